package s3api

import (
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/s3gate/s3gate/store"
)

// POST Object: a browser form upload (multipart/form-data to the bucket's
// URL). The fields before the file carry the key, a base64 POST policy and
// its signature (verified by the Authenticator's VerifyPost); the policy's
// conditions must hold for every field, and every field but the exempt ones
// must be named by a condition. The file part streams into PutObject, its
// length checked against content-length-range as it arrives, so a file out
// of range fails the put and nothing is stored.

// PostVerifier verifies the signature of a POST form's policy
// (auth.Verifier implements it): the access key that signed it, "" for a
// form without any signature field.
type PostVerifier interface {
	VerifyPost(r *http.Request, fields map[string]string) (string, error)
}

// maxPostPreData caps the names and values of the fields before the file,
// as S3's 20 KB limit does. The bytes read before the file part (part
// headers, boundaries and the multipart reader's read-ahead included) are
// capped at twice that.
const maxPostPreData = 20 << 10

var (
	errPostNotForm = withDetails(&apiError{"PreconditionFailed", http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold"},
		"Condition", "Bucket POST must be of the enclosure-type multipart/form-data")
	errPostMalformed  = &apiError{"MalformedPOSTRequest", http.StatusBadRequest, "The body of your POST request is not well-formed multipart/form-data."}
	errPostPreData    = &apiError{"MaxPostPreDataLengthExceededError", http.StatusBadRequest, "Your POST request fields preceding the upload file were too large."}
	errPostNoFile     = &apiError{"IncorrectNumberOfFilesInPostRequest", http.StatusBadRequest, "POST requires exactly one file upload per request."}
	errPostTooLarge   = &apiError{"EntityTooLarge", http.StatusBadRequest, "Your proposed upload exceeds the maximum allowed size"}
	errPostTooSmall   = &apiError{"EntityTooSmall", http.StatusBadRequest, "Your proposed upload is smaller than the minimum allowed size"}
	errPolicyExpired  = errAccessDenied.withMessage("Invalid according to Policy: Policy expired.")
	errPolicyDocument = &apiError{"InvalidPolicyDocument", http.StatusBadRequest, "Invalid Policy: Invalid JSON."}
)

// postExempt are the fields no policy condition needs to name.
var postExempt = []string{"policy", "x-amz-signature", "signature", "awsaccesskeyid", "file"}

// postCondition is one condition of a POST policy: eq or starts-with on a
// field (lower-case, without "$"), or content-length-range.
type postCondition struct {
	op, field, value string
	min, max         int64
}

func (c postCondition) String() string {
	if c.op == "content-length-range" {
		return fmt.Sprintf(`["content-length-range", %d, %d]`, c.min, c.max)
	}
	v, _ := json.Marshal(c.value) // a string: cannot fail
	return fmt.Sprintf(`["%s", "$%s", %s]`, c.op, c.field, v)
}

type postPolicy struct {
	expiration time.Time
	conditions []postCondition
}

// parsePostPolicy decodes the base64 policy document.
func parsePostPolicy(b64 string) (*postPolicy, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errPolicyDocument.withMessage("Invalid Policy: Invalid Base64 Encoding.")
	}
	var doc struct {
		Expiration *string           `json:"expiration"`
		Conditions []json.RawMessage `json:"conditions"`
	}
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		return nil, errPolicyDocument
	}
	if doc.Expiration == nil {
		return nil, errPolicyDocument.withMessage("Invalid Policy: Policy missing expiration.")
	}
	p := &postPolicy{}
	if p.expiration, err = time.Parse(time.RFC3339, *doc.Expiration); err != nil {
		return nil, errPolicyDocument.withMessage("Invalid Policy: Invalid 'expiration' value: '" + *doc.Expiration + "'")
	}
	if doc.Conditions == nil {
		return nil, errPolicyDocument.withMessage("Invalid Policy: Policy missing conditions.")
	}
	for _, rc := range doc.Conditions {
		cs, err := parsePostCondition(rc)
		if err != nil {
			return nil, err
		}
		p.conditions = append(p.conditions, cs...)
	}
	return p, nil
}

func parsePostCondition(rc json.RawMessage) ([]postCondition, error) {
	bad := errPolicyDocument.withMessage("Invalid Policy: Invalid Condition: " + string(rc))
	var obj map[string]any
	if json.Unmarshal(rc, &obj) == nil {
		var out []postCondition
		for k, v := range obj {
			s, ok := v.(string)
			if !ok {
				return nil, bad
			}
			out = append(out, postCondition{op: "eq", field: strings.ToLower(strings.TrimPrefix(k, "$")), value: s})
		}
		slices.SortFunc(out, func(a, b postCondition) int { return strings.Compare(a.field, b.field) })
		return out, nil
	}
	var arr []any
	d := json.NewDecoder(strings.NewReader(string(rc)))
	d.UseNumber()
	if d.Decode(&arr) != nil || len(arr) != 3 {
		return nil, bad
	}
	op, _ := arr[0].(string)
	switch op = strings.ToLower(op); op {
	case "eq", "starts-with":
		name, ok1 := arr[1].(string)
		value, ok2 := arr[2].(string)
		if !ok1 || !ok2 || !strings.HasPrefix(name, "$") {
			return nil, bad
		}
		return []postCondition{{op: op, field: strings.ToLower(name[1:]), value: value}}, nil
	case "content-length-range":
		lo, ok1 := policyInt(arr[1])
		hi, ok2 := policyInt(arr[2])
		if !ok1 || !ok2 || lo < 0 || hi < lo {
			return nil, bad
		}
		return []postCondition{{op: op, min: lo, max: hi}}, nil
	}
	return nil, bad
}

// policyInt reads a content-length-range bound, a number or a numeric string.
func policyInt(v any) (int64, bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = x
	default:
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// check evaluates the policy against the form: expiry, then every
// condition, then the fields no condition covers. It returns the allowed
// length range of the file (-1, -1 for none).
func (p *postPolicy) check(now time.Time, bucket string, fields map[string]string) (lo, hi int64, err error) {
	if !now.Before(p.expiration) {
		return 0, 0, errPolicyExpired
	}
	lo, hi = -1, -1
	covered := map[string]bool{}
	for _, c := range p.conditions {
		if c.op == "content-length-range" {
			lo, hi = c.min, c.max
			continue
		}
		covered[c.field] = true
		got := fields[c.field]
		if c.field == "bucket" {
			got = bucket
		}
		if (c.op == "eq" && got != c.value) || (c.op == "starts-with" && !strings.HasPrefix(got, c.value)) {
			return 0, 0, errAccessDenied.withMessage("Invalid according to Policy: Policy Condition failed: " + c.String())
		}
	}
	var extra []string
	for name := range fields {
		if !covered[name] && !slices.Contains(postExempt, name) && !strings.HasPrefix(name, "x-ignore-") {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return 0, 0, errAccessDenied.withMessage("Invalid according to Policy: Extra input fields: " + strings.Join(extra, ", "))
	}
	return lo, hi, nil
}

// preDataLimit fails the read of a form once more than its budget was read
// before the file part; lift removes the limit at the file.
type preDataLimit struct {
	r      io.Reader
	left   int64
	lifted bool
}

func (l *preDataLimit) Read(p []byte) (int, error) {
	if !l.lifted && l.left <= 0 {
		return 0, errPostPreData
	}
	if !l.lifted {
		p = p[:min(int64(len(p)), l.left)]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// lengthRange enforces content-length-range on the file as it streams: more
// than hi bytes, or EOF before lo, fails the read (and so the put).
type lengthRange struct {
	r      io.Reader
	n      int64
	lo, hi int64
}

func (l *lengthRange) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.hi >= 0 && l.n > l.hi {
		return 0, fmt.Errorf("%w: more than %d bytes", errPostTooLarge, l.hi)
	}
	if err == io.EOF && l.n < l.lo {
		return n, fmt.Errorf("%w: %d bytes, at least %d", errPostTooSmall, l.n, l.lo)
	}
	return n, err
}

// readPostForm reads the fields before the file (lower-case names) and
// returns the file part, its body positioned at the file's first byte.
func readPostForm(rq *request, lim *preDataLimit) (map[string]string, *multipart.Part, error) {
	mt, params, err := mime.ParseMediaType(rq.r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, nil, errPostNotForm
	}
	mr := multipart.NewReader(rq.body, params["boundary"])
	fields := map[string]string{}
	size := 0
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil, nil, errPostNoFile
		}
		if err != nil {
			return nil, nil, postReadError(lim, err)
		}
		name := strings.ToLower(part.FormName())
		if name == "file" {
			lim.lifted = true
			return fields, part, nil
		}
		v, err := io.ReadAll(part)
		if err != nil {
			return nil, nil, postReadError(lim, err)
		}
		if _, dup := fields[name]; dup || name == "" {
			return nil, nil, errInvalidArgument.withMessage("POST requires exactly one value for each form field: " + name)
		}
		if size += len(name) + len(v); size > maxPostPreData {
			return nil, nil, errPostPreData
		}
		fields[name] = string(v)
	}
}

// postReadError keeps the body's own errors (the pre-data cap, which the
// multipart reader may not pass on as it got it; a timeout; a client gone)
// and calls anything else malformed.
func postReadError(lim *preDataLimit, err error) error {
	if lim.left <= 0 {
		return fmt.Errorf("%w: %v", errPostPreData, err) //nolint:errorlint // the parse detail is for logs only
	}
	var ae *apiError
	if errors.As(err, &ae) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("read POST form: %w", err)
	}
	return fmt.Errorf("%w: %v", errPostMalformed, err) //nolint:errorlint // the parse detail is for logs only
}

// postHeaders turns the fields that S3 reads as headers into a header set,
// so that the PutObject checks and metadata parsing apply unchanged.
func postHeaders(fields map[string]string) http.Header {
	h := http.Header{}
	for name, v := range fields {
		switch {
		case name == "acl":
			h.Set("X-Amz-Acl", v)
		case name == "tagging":
			h.Set("X-Amz-Tagging", postTagging(v))
		case strings.HasPrefix(name, "x-amz-"), name == "content-type", name == "cache-control",
			name == "content-disposition", name == "content-encoding", name == "content-language", name == "expires",
			name == "content-md5": // verified against the file, as S3 does
			h[textproto.CanonicalMIMEHeaderKey(name)] = []string{v}
		}
	}
	return h
}

type postResponse struct {
	XMLName  xml.Name `xml:"PostResponse"`
	Location string   `xml:"Location"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	ETag     string   `xml:"ETag"`
}

// postObject serves PostObject. It runs before authentication: the form
// carries its own.
func (a *api) postObject(rq *request) error {
	lim := &preDataLimit{r: rq.r.Body, left: 2 * maxPostPreData}
	rq.body.r = lim
	fields, file, err := readPostForm(rq, lim)
	if err != nil {
		return err
	}
	pv, ok := a.authn.(PostVerifier)
	if !ok {
		return errNotImplemented.withMessage("POST uploads need an authenticator of POST forms.")
	}
	ak, err := pv.VerifyPost(rq.r, fields)
	if err != nil {
		return err
	}
	// An unsigned form is an anonymous request: the policies decide it.
	rq.accessKey, rq.anonymous = ak, ak == ""
	if rq.anonymous && a.access == nil {
		return errAccessDenied // without policies nothing grants an anonymous caller
	}
	if err := errors.Join(checkTextParams(rq.q), checkExpectedOwner(rq)); err != nil {
		return err
	}
	key, ok := fields["key"]
	if !ok {
		return errInvalidArgument.withMessage("Bucket POST must contain a field named 'key'.  If it is specified, please check the order of the fields.")
	}
	rq.key = strings.ReplaceAll(key, "${filename}", file.FileName())
	// The form is decided as the PutObject it is, by whichever authorization
	// the gateway runs (policies, or the configured Authorizer).
	put := *rq
	put.op = "PutObject"
	if err := a.authorize(&put); err != nil {
		return err
	}
	// The decision carries the bucket's settings (ownership, Block Public
	// Access, Object Lock's default retention) that the write applies:
	// without it the form was stored as if the bucket had none, a locked
	// bucket's default retention included.
	rq.decision = put.decision
	pol, err := parsePostPolicy(fields["policy"])
	if err != nil {
		return err
	}
	lo, hi, err := pol.check(time.Now(), rq.bucket, fields)
	if err != nil {
		return err
	}
	opts, err := a.postPutOptions(rq, fields)
	if err != nil {
		return err
	}
	info, err := a.st.PutObject(rq.ctx, rq.bucket, rq.key, &lengthRange{r: file, lo: lo, hi: hi}, opts)
	if err != nil {
		return fmt.Errorf("post object %q/%q: %w", rq.bucket, rq.key, err)
	}
	return a.postAnswer(rq, fields, info)
}

// postPutOptions reads the fields as PutObject reads its headers, with the
// same refusals.
func (a *api) postPutOptions(rq *request, fields map[string]string) (store.PutOptions, error) {
	h := postHeaders(fields)
	for _, check := range []func(http.Header) error{checkWriteFeatures, checkEncryption} {
		if err := check(h); err != nil {
			return store.PutOptions{}, err
		}
	}
	if err := checkEncryption(rq.r.Header); err != nil {
		return store.PutOptions{}, err
	}
	// The fields stand in for PutObject's headers; the size is unknown.
	frq := *rq
	frq.r = &http.Request{Header: h}
	frq.size = -1
	acl, err := a.writeACL(&frq)
	if err != nil {
		return store.PutOptions{}, err
	}
	opts, err := putOptions(&request{r: frq.r, size: -1}, true)
	if err != nil {
		return opts, err
	}
	opts.Meta.ACL = acl
	opts.Meta.Lock, err = a.postLock(&frq)
	return opts, err
}

// postAnswer answers a stored POST: a 303 to success_action_redirect (or
// redirect) with bucket, key and etag added, else success_action_status
// (200, 201 with a PostResponse, 204 by default).
func (a *api) postAnswer(rq *request, fields map[string]string, info store.ObjectInfo) error {
	h := rq.w.Header()
	etag := quoteETag(info.ETag)
	h.Set("ETag", etag)
	if err := a.setVersionHeader(rq, info.VersionID); err != nil {
		return err
	}
	loc := a.objectURL(rq)
	h.Set("Location", loc)
	redirect := fields["success_action_redirect"]
	if redirect == "" {
		redirect = fields["redirect"]
	}
	if u, err := url.Parse(redirect); redirect != "" && err == nil && u.IsAbs() {
		q := u.Query()
		q.Set("bucket", rq.bucket)
		q.Set("key", rq.key)
		q.Set("etag", etag)
		u.RawQuery = q.Encode()
		h.Set("Location", u.String())
		rq.w.WriteHeader(http.StatusSeeOther)
		return nil
	}
	switch fields["success_action_status"] {
	case "200":
		rq.w.WriteHeader(http.StatusOK)
	case "201":
		body, err := xml.Marshal(postResponse{Location: loc, Bucket: rq.bucket, Key: rq.key, ETag: etag})
		if err != nil {
			return fmt.Errorf("marshal PostResponse: %w", err)
		}
		h.Set("Content-Type", "application/xml")
		h.Set("Content-Length", strconv.Itoa(len(xml.Header)+len(body)))
		rq.w.WriteHeader(http.StatusCreated)
		_, _ = rq.w.Write([]byte(xml.Header))
		_, _ = rq.w.Write(body) // the client may be gone; the object is stored
	default:
		rq.w.WriteHeader(http.StatusNoContent)
	}
	return nil
}

// objectURL is the URL of the stored object as this request addressed the
// bucket (path or virtual-host style).
func (a *api) objectURL(rq *request) string {
	u := url.URL{Scheme: "http", Host: rq.r.Host, Path: "/" + rq.bucket + "/" + rq.key}
	if rq.r.TLS != nil {
		u.Scheme = "https"
	}
	if vhostBucket(rq.r.Host, a.cfg.Domain) != "" {
		u.Path = "/" + rq.key
	}
	return u.String()
}
