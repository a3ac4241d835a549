package s3api

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/s3gate/s3gate/store"
)

// Object Lock (docs/adr/016-object-lock.md): the bucket's configuration
// (store.BucketConfigObjectLock), retention and legal hold per version
// (store.ObjectMeta.Lock, changed through store.LockStore), and the
// x-amz-object-lock-* headers of writes and reads. The rules of what a
// change or a removal may do live in the store's protocol, judged by the
// database's clock.

// Object Lock's answers, as AWS words them.
var (
	errNoSuchObjectLockConfig = &apiError{"NoSuchObjectLockConfiguration", http.StatusNotFound, "The specified object does not have a ObjectLock configuration"}
	errNoLockConfiguration    = &apiError{"ObjectLockConfigurationNotFoundError", http.StatusNotFound, "Object Lock configuration does not exist for this bucket"}
	errLockNeedsVersioning    = &apiError{"InvalidBucketState", http.StatusConflict, "Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration"}
	errLockHeadersPair        = errInvalidArgument.withMessage("x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied")
	errLockMode               = errInvalidArgument.withMessage("Unknown wormMode directive.")
	errLockDate               = errInvalidArgument.withMessage("The retain until date must be in the future!")
	errLegalHoldHeader        = errInvalidArgument.withMessage("Legal Hold must be either of 'ON' or 'OFF'")
	errLockPeriod             = errInvalidArgument.withMessage("Default retention period must be a positive integer value.")
	errLockPutNeedsDigest     = errInvalidRequest.withMessage("Content-MD5 OR x-amz-checksum- HTTP header is required for Put Object requests with Object Lock parameters")
)

// maxRetentionDays bounds a default retention (AWS accepts up to 100 years).
const maxRetentionDays = 36500

// lockHeaders are the x-amz-object-lock-* headers of writes.
var lockHeaders = []string{"X-Amz-Object-Lock-Mode", "X-Amz-Object-Lock-Retain-Until-Date", "X-Amz-Object-Lock-Legal-Hold"}

// objectLockConfiguration is the XML of Put/GetObjectLockConfiguration.
type objectLockConfiguration struct {
	XMLName           xml.Name `xml:"ObjectLockConfiguration"`
	NS                string   `xml:"xmlns,attr,omitempty"`
	ObjectLockEnabled string   `xml:"ObjectLockEnabled,omitempty"`
	Rule              *struct {
		DefaultRetention *defaultRetentionXML `xml:"DefaultRetention"`
	} `xml:"Rule"`
}

type defaultRetentionXML struct {
	Mode  string `xml:"Mode,omitempty"`
	Days  *int   `xml:"Days"`
	Years *int   `xml:"Years"`
}

// retentionXML is the XML of Put/GetObjectRetention.
type retentionXML struct {
	XMLName         xml.Name `xml:"Retention"`
	NS              string   `xml:"xmlns,attr,omitempty"`
	Mode            string   `xml:"Mode,omitempty"`
	RetainUntilDate string   `xml:"RetainUntilDate,omitempty"`
}

// legalHoldXML is the XML of Put/GetObjectLegalHold.
type legalHoldXML struct {
	XMLName xml.Name `xml:"LegalHold"`
	NS      string   `xml:"xmlns,attr,omitempty"`
	Status  string   `xml:"Status"`
}

// lockConfigOf reads the bucket's Object Lock configuration (nil: none).
func lockConfigOf(cfgs map[string]string) (*store.ObjectLockConfig, error) {
	doc := cfgs[store.BucketConfigObjectLock]
	if doc == "" {
		return nil, nil
	}
	var c store.ObjectLockConfig
	if err := json.Unmarshal([]byte(doc), &c); err != nil {
		return nil, fmt.Errorf("stored object lock configuration: %w", err)
	}
	return &c, nil
}

// bucketLock reads rq's bucket's Object Lock configuration, from the
// documents the access decision read when there is one.
func (a *api) bucketLock(rq *request) (*store.ObjectLockConfig, error) {
	cfgs, err := a.lockConfigs(rq)
	if err != nil {
		return nil, err
	}
	return lockConfigOf(cfgs)
}

func (a *api) lockConfigs(rq *request) (map[string]string, error) {
	if rq.decision != nil {
		return rq.decision.cfgs, nil // read by the access decision (nil: none kept)
	}
	return a.bucketConfigs(rq)
}

func isLockMode(m string) bool { return m == store.LockGovernance || m == store.LockCompliance }

// parseLockConfiguration reads a PutObjectLockConfiguration body.
func parseLockConfiguration(body []byte) (store.ObjectLockConfig, error) {
	var in objectLockConfiguration
	if err := decodeXML(body, &in); err != nil {
		return store.ObjectLockConfig{}, err
	}
	if in.ObjectLockEnabled != "Enabled" {
		return store.ObjectLockConfig{}, errMalformedXML
	}
	out := store.ObjectLockConfig{Enabled: true}
	if in.Rule == nil {
		return out, nil
	}
	d := in.Rule.DefaultRetention
	if d == nil || !isLockMode(d.Mode) || (d.Days == nil) == (d.Years == nil) {
		return store.ObjectLockConfig{}, errMalformedXML
	}
	def := store.DefaultRetention{Mode: d.Mode}
	switch {
	case d.Days != nil && (*d.Days <= 0 || *d.Days > maxRetentionDays):
		return store.ObjectLockConfig{}, errLockPeriod
	case d.Years != nil && (*d.Years <= 0 || *d.Years > maxRetentionDays/365):
		return store.ObjectLockConfig{}, errLockPeriod
	case d.Days != nil:
		def.Days = *d.Days
	default:
		def.Years = *d.Years
	}
	out.Default = &def
	return out, nil
}

func (a *api) putObjectLockConfiguration(rq *request) error {
	body, err := readBody(rq, a.cfg.MaxXMLBody)
	if err != nil {
		return err
	}
	if err := verifySmallBody(rq, body); err != nil {
		return err
	}
	c, err := parseLockConfiguration(body)
	if err != nil {
		return err
	}
	configs, err := a.policyConfigs()
	if err != nil {
		return err
	}
	status, err := a.st.BucketVersioning(rq.ctx, rq.bucket)
	if err != nil {
		return fmt.Errorf("put object lock configuration %q: %w", rq.bucket, err)
	}
	if status != store.VersioningEnabled {
		return errLockNeedsVersioning
	}
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("put object lock configuration %q: %w", rq.bucket, err)
	}
	if err := configs.PutBucketConfig(rq.ctx, rq.bucket, store.BucketConfigObjectLock, string(doc)); err != nil {
		return fmt.Errorf("put object lock configuration %q: %w", rq.bucket, err)
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (a *api) getObjectLockConfiguration(rq *request) error {
	c, err := a.bucketLock(rq)
	if err != nil {
		return err
	}
	if c == nil || !c.Enabled {
		return errNoLockConfiguration
	}
	out := objectLockConfiguration{NS: s3NS, ObjectLockEnabled: "Enabled"}
	if d := c.Default; d != nil {
		x := &defaultRetentionXML{Mode: d.Mode}
		if d.Days > 0 {
			x.Days = &d.Days
		} else {
			x.Years = &d.Years
		}
		out.Rule = &struct {
			DefaultRetention *defaultRetentionXML `xml:"DefaultRetention"`
		}{x}
	}
	return writeXML(rq, out)
}

// createLockBucket gives a bucket created with
// x-amz-bucket-object-lock-enabled: true its versioning (Enabled, first,
// so that no crash leaves a bucket with Object Lock and without versioning)
// and its Object Lock configuration.
func (a *api) createLockBucket(rq *request) error {
	configs, err := a.policyConfigs()
	if err != nil {
		return err
	}
	if err := a.st.SetBucketVersioning(rq.ctx, rq.bucket, store.VersioningEnabled); err != nil {
		return fmt.Errorf("create bucket %q: versioning for object lock: %w", rq.bucket, err)
	}
	doc, err := json.Marshal(store.ObjectLockConfig{Enabled: true})
	if err != nil {
		return fmt.Errorf("create bucket %q: %w", rq.bucket, err)
	}
	if err := configs.PutBucketConfig(rq.ctx, rq.bucket, store.BucketConfigObjectLock, string(doc)); err != nil {
		return fmt.Errorf("create bucket %q: object lock: %w", rq.bucket, err)
	}
	return nil
}

// parseObjectLockEnabled reads CreateBucket's
// x-amz-bucket-object-lock-enabled.
func parseObjectLockEnabled(h http.Header) (bool, error) {
	switch v := strings.ToLower(strings.TrimSpace(h.Get("X-Amz-Bucket-Object-Lock-Enabled"))); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, errInvalidArgument.withMessage("Invalid x-amz-bucket-object-lock-enabled value: it must be true or false.")
	}
}

// writeLock reads the x-amz-object-lock-* headers of PutObject, CopyObject
// and CreateMultipartUpload into the new version's lock: honoured on a
// bucket with Object Lock (mode and date both or neither, a date the store
// checks is in the future in database time), refused on others as before.
// Without a retention named, the bucket's default retention is left for the
// store to apply from the version's last-modified time.
func (a *api) writeLock(rq *request, withBody bool) (*store.ObjectLock, error) {
	h := rq.r.Header
	named := false
	for _, k := range lockHeaders {
		if _, ok := h[k]; ok {
			named = true
		}
	}
	if !named && rq.decision == nil {
		return nil, nil // no configurations kept: no default retention either
	}
	cfg, err := a.bucketLock(rq)
	if err != nil {
		return nil, err
	}
	if cfg == nil || !cfg.Enabled {
		if named {
			return nil, errNoObjectLock
		}
		return nil, nil
	}
	var l store.ObjectLock
	mode, date := h.Get("X-Amz-Object-Lock-Mode"), h.Get("X-Amz-Object-Lock-Retain-Until-Date")
	switch {
	case (mode == "") != (date == ""):
		return nil, errLockHeadersPair
	case mode != "":
		if !isLockMode(mode) {
			return nil, errLockMode
		}
		t, err := time.Parse(time.RFC3339, date)
		if err != nil {
			return nil, errLockDate
		}
		t = t.UTC()
		l.Mode, l.RetainUntil = mode, &t
	case cfg.Default != nil:
		d := *cfg.Default
		l.Default = &d
	}
	if v, ok := h["X-Amz-Object-Lock-Legal-Hold"]; ok {
		if s := strings.Join(v, ""); s != store.LegalHoldOn && s != store.LegalHoldOff {
			return nil, errLegalHoldHeader
		} else {
			l.LegalHold = s
		}
	}
	// S3 wants the digest for a version that will be locked, whether by
	// the request's headers or by the bucket's default retention.
	if (named || l.Default != nil) && withBody && !hasDigest(rq) {
		return nil, errLockPutNeedsDigest
	}
	if l == (store.ObjectLock{}) {
		return nil, nil
	}
	return &l, nil
}

// hasDigest reports whether a request carries Content-MD5, an
// x-amz-checksum-* value (header or trailer) or a signed payload SHA-256
// (which auth verifies against the body as the others are), so that a
// locked version's bytes are the ones sent.
func hasDigest(rq *request) bool {
	h := rq.r.Header
	if h.Get("Content-Md5") != "" || rq.trailer != nil || isHexSHA256(h.Get("X-Amz-Content-Sha256")) {
		return true
	}
	for k := range h {
		if strings.HasPrefix(k, "X-Amz-Checksum-") && k != "X-Amz-Checksum-Algorithm" && k != "X-Amz-Checksum-Type" {
			return true
		}
	}
	return false
}

// lockWriteOps are the writes whose x-amz-object-lock-* headers need the
// permissions of the calls that set the same (AWS: s3:PutObjectRetention,
// s3:PutObjectLegalHold).
var lockWriteOps = []string{"PutObject", "CopyObject", "CreateMultipartUpload"}

// lockWriteActions are the extra operations rq's lock headers need.
func lockWriteActions(rq *request) []string {
	if !slices.Contains(lockWriteOps, rq.op) {
		return nil
	}
	var ops []string
	h := rq.r.Header
	if h.Get("X-Amz-Object-Lock-Mode") != "" || h.Get("X-Amz-Object-Lock-Retain-Until-Date") != "" {
		ops = append(ops, "PutObjectRetention")
	}
	if h.Get("X-Amz-Object-Lock-Legal-Hold") != "" {
		ops = append(ops, "PutObjectLegalHold")
	}
	return ops
}

// bypassGovernance reports whether rq asks to bypass GOVERNANCE retention
// and may: x-amz-bypass-governance-retention: true and
// s3:BypassGovernanceRetention. Without the permission the request goes
// on without the bypass, and a GOVERNANCE version refuses it.
func (a *api) bypassGovernance(rq *request, key string) bool {
	if !strings.EqualFold(strings.TrimSpace(rq.r.Header.Get("X-Amz-Bypass-Governance-Retention")), "true") {
		return false
	}
	return rq.decision == nil || rq.decision.decide("BypassGovernanceRetention", rq.bucket, key) == nil
}

// setLockHeaders sets GET/HEAD's x-amz-object-lock-* headers for callers
// allowed to read them (s3:GetObjectRetention, s3:GetObjectLegalHold).
func setLockHeaders(rq *request, info store.ObjectInfo) {
	l := info.Meta.Lock
	if l == nil {
		return
	}
	allowed := func(op string) bool { return rq.decision == nil || rq.decision.decide(op, rq.bucket, rq.key) == nil }
	h := rq.w.Header()
	if l.Mode != "" && l.RetainUntil != nil && allowed("GetObjectRetention") {
		h.Set("X-Amz-Object-Lock-Mode", l.Mode)
		h.Set("X-Amz-Object-Lock-Retain-Until-Date", xmlTime(*l.RetainUntil))
	}
	if l.LegalHold != "" && allowed("GetObjectLegalHold") {
		h.Set("X-Amz-Object-Lock-Legal-Hold", l.LegalHold)
	}
}

// lockTarget checks what every retention and legal hold call checks first:
// a valid version id and a bucket with Object Lock.
func (a *api) lockTarget(rq *request) (versionID string, err error) {
	if versionID, err = versionParam(rq); err != nil {
		return "", err
	}
	c, err := a.bucketLock(rq)
	if err != nil {
		return "", err
	}
	if c == nil || !c.Enabled {
		return "", errNoObjectLock
	}
	return versionID, nil
}

// lockOf reads the lock of the version the request names; the version must
// exist before a bucket without Object Lock is reported, as before.
func (a *api) lockOf(rq *request) (*store.ObjectLock, error) {
	info, err := a.headVersion(rq)
	if err != nil {
		return nil, err
	}
	if _, err := a.lockTarget(rq); err != nil {
		return nil, err
	}
	return info.Meta.Lock, nil
}

// putLock applies ch to the version the request names.
func (a *api) putLock(rq *request, ch store.LockChange) error {
	versionID, err := a.lockTarget(rq)
	if err != nil {
		return err
	}
	ls, ok := a.st.(store.LockStore)
	if !ok {
		return errNotImplemented.withMessage("This store keeps no Object Lock.")
	}
	if _, err := ls.PutObjectLock(rq.ctx, rq.bucket, rq.key, versionID, ch); err != nil {
		return fmt.Errorf("%s %q/%q: %w", rq.op, rq.bucket, rq.key, err)
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// readLockBody reads the small XML body of the retention and legal hold
// calls, which AWS requires Content-MD5 or a checksum for.
func (a *api) readLockBody(rq *request, v any) error {
	body, err := readBody(rq, a.cfg.MaxXMLBody)
	if err != nil {
		return err
	}
	if err := verifySmallBody(rq, body); err != nil {
		return err
	}
	return decodeXML(body, v)
}

func (a *api) putObjectRetention(rq *request) error {
	var in retentionXML
	if err := a.readLockBody(rq, &in); err != nil {
		return err
	}
	ch := store.LockChange{SetRetention: true, BypassGovernance: a.bypassGovernance(rq, rq.key)}
	switch {
	case in.Mode == "" && in.RetainUntilDate == "": // removes the retention
	case !isLockMode(in.Mode) || in.RetainUntilDate == "":
		return errMalformedXML
	default:
		t, err := time.Parse(time.RFC3339, in.RetainUntilDate)
		if err != nil {
			return errMalformedXML
		}
		t = t.UTC()
		ch.Mode, ch.RetainUntil = in.Mode, &t
	}
	return a.putLock(rq, ch)
}

func (a *api) getObjectRetention(rq *request) error {
	l, err := a.lockOf(rq)
	if err != nil {
		return err
	}
	if l == nil || l.Mode == "" || l.RetainUntil == nil {
		return errNoSuchObjectLockConfig
	}
	return writeXML(rq, retentionXML{NS: s3NS, Mode: l.Mode, RetainUntilDate: xmlTime(*l.RetainUntil)})
}

func (a *api) putObjectLegalHold(rq *request) error {
	var in legalHoldXML
	if err := a.readLockBody(rq, &in); err != nil {
		return err
	}
	if in.Status != store.LegalHoldOn && in.Status != store.LegalHoldOff {
		return errMalformedXML
	}
	return a.putLock(rq, store.LockChange{LegalHold: in.Status})
}

func (a *api) getObjectLegalHold(rq *request) error {
	l, err := a.lockOf(rq)
	if err != nil {
		return err
	}
	if l == nil || l.LegalHold == "" {
		return errNoSuchObjectLockConfig
	}
	return writeXML(rq, legalHoldXML{NS: s3NS, Status: l.LegalHold})
}

// postLock is the lock of a browser form upload: the bucket's default
// retention. Object Lock fields are not honoured in forms (their
// permissions are decided before the form is read), so they are refused:
// as before on a bucket without Object Lock, NotImplemented on the others.
func (a *api) postLock(frq *request) (*store.ObjectLock, error) {
	l, err := a.writeLock(frq, false)
	if err != nil {
		return nil, err
	}
	for _, k := range lockHeaders {
		if _, ok := frq.r.Header[k]; ok {
			return nil, errNotImplemented.withMessage("Object Lock fields are not supported in browser form uploads; the bucket's default retention applies to them.")
		}
	}
	return l, nil
}

func isHexSHA256(v string) bool {
	if len(v) != 64 {
		return false
	}
	for _, c := range v {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
