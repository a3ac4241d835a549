package s3api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	iam "github.com/s3gate/s3gate/policy"
	"github.com/s3gate/s3gate/store"
)

// Identity is what an access key may do by itself: the root key is the
// owner; another key is limited by its bucket list and read-only flag (the
// shortcuts of `s3gate admin key create`) and, if it has one, by its own
// policy document.
type Identity struct {
	Root     bool
	Buckets  []string // empty: every bucket
	ReadOnly bool
	// Policy is the key's identity policy (JSON), "" for none: a key
	// without one may do what its shortcuts allow.
	Policy string
}

// IdentitySource resolves access keys (the server implements it over the
// key store). An unknown key is an error wrapping store.ErrNoSuchAccessKey.
type IdentitySource interface {
	Identity(ctx context.Context, accessKey string) (Identity, error)
}

// KeyIdentities is the IdentitySource over the key store: Root is the root
// key's id (the owner); other keys are read from Keys on every request,
// uncached like their secrets, so a change applies at once.
type KeyIdentities struct {
	Root string
	Keys store.KeyStore
}

// Identity implements IdentitySource.
func (ids KeyIdentities) Identity(ctx context.Context, accessKey string) (Identity, error) {
	if ids.Root != "" && accessKey == ids.Root {
		return Identity{Root: true}, nil
	}
	if ids.Keys == nil {
		return Identity{}, fmt.Errorf("identity of %q: %w", accessKey, store.ErrNoSuchAccessKey)
	}
	k, err := ids.Keys.GetKey(ctx, accessKey)
	if err != nil {
		return Identity{}, fmt.Errorf("identity: %w", err)
	}
	return Identity{Buckets: k.Buckets, ReadOnly: k.ReadOnly, Policy: k.Policy}, nil
}

// access evaluates requests the AWS way: the key's identity rules × the
// bucket policy × Block Public Access (see docs/adr/011-access-policies.md).
// It replaces Config.Authorizer when Config.Identities is set, and it is
// what lets anonymous requests in.
type access struct {
	ids IdentitySource
	// configs is nil on a store that keeps no bucket configuration: then
	// no bucket has a policy, and Block Public Access is the default.
	configs store.BucketConfigStore
	// st answers whether a bucket exists when configs cannot.
	st store.ObjectStore
	// blockPublic is the gateway-wide default of Block Public Access for a
	// bucket that never had its own set (Config.BlockPublicAccess).
	blockPublic bool
	docs        docCache
}

// decision is what the request path keeps of the request-level decision:
// enough to decide the per-key checks of DeleteObjects without reading the
// bucket's configuration again.
type decision struct {
	principal iam.Principal
	id        Identity
	idPolicy  *iam.Policy
	bucket    *iam.Policy
	bpa       publicAccessBlock
	context   map[string][]string
	// cfgs are the bucket's configuration documents, bucketACL its ACL
	// (nil: private to its owner).
	cfgs      map[string]string
	bucketACL *store.ACL
	// objectACL reads an object's ACL (nil: none, or no such object), for
	// the decisions an ACL may grant.
	objectACL func(bucket, key, versionID string) (*store.ACL, error)
}

// lockoutOps are the bucket policy operations the owner may always run, a
// Deny in the bucket policy notwithstanding (as AWS lets the account root
// user recover from a policy that locks everyone out).
var lockoutOps = []string{"GetBucketPolicy", "PutBucketPolicy", "DeleteBucketPolicy"}

// lookupTimeout bounds the reads of a decision (the key, the bucket's
// configuration).
const lookupTimeout = 10 * time.Second

// authorize decides rq: nil, or an error that is AccessDenied, NoSuchBucket
// (an anonymous request of a bucket that does not exist) or a store failure.
// Its reads do not end with the client's connection: a client that
// half-closes after its headers still gets the answer its request has
// (MissingContentLength, ...), not a failed lookup; they are short
// statements, bounded by lookupTimeout.
func (ac *access) authorize(rq *request) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rq.ctx), lookupTimeout)
	defer cancel()
	g := &decision{principal: iam.Principal{Anonymous: rq.anonymous, Key: rq.accessKey}}
	if !rq.anonymous {
		id, err := ac.ids.Identity(ctx, rq.accessKey)
		if errors.Is(err, store.ErrNoSuchAccessKey) {
			return fmt.Errorf("%w: %w", ErrAccessDenied, err) // deleted since authentication
		}
		if err != nil {
			return fmt.Errorf("identity of %q: %w", rq.accessKey, err)
		}
		g.id = id
		if id.Policy != "" {
			if g.idPolicy, err = parsePolicy(&ac.docs, id.Policy, iam.Identity, ""); err != nil {
				return fmt.Errorf("%w: key %q has an invalid policy: %w", ErrAccessDenied, rq.accessKey, err)
			}
		}
	}
	if err := g.shortcuts(rq.op, rq.bucket, rq.accessKey); err != nil {
		return err
	}
	missing, err := ac.loadBucket(ctx, rq, g)
	if err != nil {
		return err
	}
	if g.idPolicy != nil || g.bucket != nil {
		g.context = conditionContext(rq) // only a policy reads it
	}
	if err := checkPublicACL(rq, g.bpa, missing); err != nil {
		return err
	}
	if err := ac.existingTags(ctx, rq, g); err != nil {
		return err
	}
	rq.decision = g
	if rq.op == "DeleteObjects" {
		if rq.anonymous && missing {
			return fmt.Errorf("authorize: %w", store.ErrNoSuchBucket)
		}
		return nil // decided per key (allowKey)
	}
	err = g.decideVersion(rq.op, rq.bucket, rq.key, rq.q.Get("versionId"))
	if err == nil && rq.r.Header.Get("X-Amz-Tagging") != "" && slices.Contains(taggingOps, rq.op) {
		err = g.decide("PutObjectTagging", rq.bucket, rq.key) // as AWS: tags on a write need their own action
	}
	for _, op := range lockWriteActions(rq) { // and so do Object Lock headers
		if err == nil {
			err = g.decide(op, rq.bucket, rq.key)
		}
	}
	if err == nil && rq.op == "DeleteObject" && conditionReads(strings.TrimSpace(rq.r.Header.Get("If-Match"))) {
		err = g.decide("GetObject", rq.bucket, rq.key) // as AWS: an ETag condition reads the object
	}
	if err != nil && rq.anonymous && missing {
		// AWS tells anyone that a bucket does not exist.
		return fmt.Errorf("authorize: %w", store.ErrNoSuchBucket)
	}
	if err == nil && missing && rq.op == "PutObject" {
		// A small put learns of a missing bucket from the object row's
		// foreign key, after its body was read and judged (ADR 002): answer
		// as AWS does, before the body, when the bucket read already says so.
		return fmt.Errorf("authorize: %w", store.ErrNoSuchBucket)
	}
	return err
}

// loadBucket reads what the decision needs of rq's bucket into g: its
// policy and Block Public Access (the default for a bucket that never had
// its own, and for requests without a bucket), and whether it is missing.
func (ac *access) loadBucket(ctx context.Context, rq *request, g *decision) (missing bool, err error) {
	var cfgs map[string]string
	switch {
	case rq.bucket == "" || rq.op == "CreateBucket":
	case ac.configs != nil:
		cfgs, err = ac.configs.BucketConfigs(ctx, rq.bucket)
		switch {
		case errors.Is(err, store.ErrNoSuchBucket):
			missing = true
		case errors.Is(err, store.ErrNoBucketConfigs): // none kept: no policy, the default BPA
		case err != nil:
			return false, fmt.Errorf("bucket configuration of %q: %w", rq.bucket, err)
		}
		if doc := cfgs[store.BucketConfigPolicy]; doc != "" {
			if g.bucket, err = parsePolicy(&ac.docs, doc, iam.Bucket, rq.bucket); err != nil {
				return false, fmt.Errorf("bucket policy of %q: %w", rq.bucket, err)
			}
		}
	default:
		_, err := ac.st.HeadBucket(ctx, rq.bucket)
		if err != nil && !errors.Is(err, store.ErrNoSuchBucket) {
			return false, fmt.Errorf("bucket %q: %w", rq.bucket, err)
		}
		missing = err != nil
	}
	g.cfgs = cfgs
	g.bpa, _, err = ac.effectiveBPA(cfgs)
	if o, _ := ownershipOf(ac, cfgs); o == ownerEnforced || err != nil {
		return missing, err // ACLs off: they grant nothing
	}
	if g.bucketACL, err = parseStoredACL(cfgs[store.BucketConfigACL]); err != nil {
		return false, fmt.Errorf("bucket acl of %q: %w", rq.bucket, err)
	}
	g.objectACL = func(bucket, key, versionID string) (*store.ACL, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(rq.ctx), lookupTimeout)
		defer cancel()
		// The version the request names has its own ACL (S3 keeps one per
		// version); "" is the latest.
		info, _, rd, err := ac.st.GetObject(ctx, bucket, key, store.GetOptions{VersionID: versionID}, true)
		if rd != nil {
			_ = rd.Close() // head=true opens nothing
		}
		if errors.Is(err, store.ErrNoSuchKey) || errors.Is(err, store.ErrNoSuchBucket) ||
			errors.Is(err, store.ErrNoSuchVersion) || errors.Is(err, store.ErrDeleteMarker) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("acl of %q/%q: %w", bucket, key, err)
		}
		return info.Meta.ACL, nil
	}
	return missing, nil
}

// existingTags fills s3:ExistingObjectTag/<key> with the tags of rq's
// object, read only when a policy of the decision names such a key.
func (ac *access) existingTags(ctx context.Context, rq *request, g *decision) error {
	uses := func(p *iam.Policy) bool { return p != nil && p.UsesExistingObjectTag() }
	if rq.key == "" || (!uses(g.idPolicy) && !uses(g.bucket)) {
		return nil
	}
	info, _, rd, err := ac.st.GetObject(ctx, rq.bucket, rq.key, store.GetOptions{}, true)
	if rd != nil {
		_ = rd.Close() // head=true opens nothing
	}
	if errors.Is(err, store.ErrNoSuchKey) || errors.Is(err, store.ErrNoSuchBucket) {
		return nil // no object, no tags: the handler answers
	}
	if err != nil {
		return fmt.Errorf("tags of %q/%q: %w", rq.bucket, rq.key, err)
	}
	for _, t := range info.Meta.Tags {
		g.context[iam.ExistingObjectTagPrefix+strings.ToLower(t.Key)] = []string{t.Value}
	}
	return nil
}

// shortcuts applies a key's bucket list and read-only flag, which bound
// everything it does (policies included), as KeyPolicy always has.
func (g *decision) shortcuts(op, bucket, key string) error {
	if g.principal.Anonymous {
		if op == "ListBuckets" || op == "CreateBucket" {
			return fmt.Errorf("%w: anonymous %s", ErrAccessDenied, op)
		}
		return nil
	}
	if g.id.Root {
		return nil
	}
	if g.id.ReadOnly && OperationAccess(op) != AccessRead {
		return fmt.Errorf("%w: key %q is read-only (%s)", ErrAccessDenied, key, op)
	}
	if op != "ListBuckets" && len(g.id.Buckets) > 0 && !slices.Contains(g.id.Buckets, bucket) {
		return fmt.Errorf("%w: key %q may not use bucket %q", ErrAccessDenied, key, bucket)
	}
	return nil
}

// decide combines the decisions: an explicit Deny of the key's policy or of
// the bucket policy wins (except for the owner's lockout operations); then
// an Allow of either grants (one account: a bucket policy may grant a key
// what its own policy does not); otherwise the implicit deny. The root key
// and keys without a policy of their own are allowed by their identity.
func (g *decision) decide(op, bucket, key string) error {
	return g.decideVersion(op, bucket, key, "")
}

// versionActions are the actions S3 checks instead when a request names a
// version (versionId).
var versionActions = map[string]string{
	"s3:GetObject":           "s3:GetObjectVersion",
	"s3:DeleteObject":        "s3:DeleteObjectVersion",
	"s3:GetObjectAcl":        "s3:GetObjectVersionAcl",
	"s3:PutObjectAcl":        "s3:PutObjectVersionAcl",
	"s3:GetObjectTagging":    "s3:GetObjectVersionTagging",
	"s3:PutObjectTagging":    "s3:PutObjectVersionTagging",
	"s3:DeleteObjectTagging": "s3:DeleteObjectVersionTagging",
	"s3:GetObjectAttributes": "s3:GetObjectVersionAttributes",
}

// decideVersion is decide for a request that names version vid of key
// ("" none): S3 checks the version's own action (s3:GetObjectVersion, ...).
func (g *decision) decideVersion(op, bucket, key, vid string) error {
	action, scope, known := iam.ActionOf(op)
	if va, ok := versionActions[action]; ok && vid != "" {
		action = va
	}
	if !known {
		// No policy can name it (an odd method, an unsupported form): the
		// owner and keys without a policy reach the handler's answer
		// (MethodNotAllowed, NotImplemented), as before.
		if g.id.Root || (!g.principal.Anonymous && g.idPolicy == nil) {
			return nil
		}
		return fmt.Errorf("%w: %s needs an action no policy grants", ErrAccessDenied, op)
	}
	req := iam.Request{Principal: g.principal, Action: action,
		Resource: iam.Resource(scope, bucket, key), Context: g.context}
	idDecision := iam.NoMatch
	switch {
	case g.principal.Anonymous:
	case g.idPolicy != nil:
		idDecision = g.idPolicy.Evaluate(req)
	default:
		idDecision = iam.Allowed
	}
	bucketDecision := iam.NoMatch
	if g.bucket != nil {
		bucketDecision = g.bucket.Evaluate(req)
		// RestrictPublicBuckets: a public policy grants only to the keys of
		// the owner's account, that is, to no anonymous caller.
		if bucketDecision == iam.Allowed && g.principal.Anonymous && g.bpa.RestrictPublicBuckets && g.bucket.IsPublic() {
			bucketDecision = iam.NoMatch
		}
	}
	switch {
	case bucketDecision == iam.Denied && !(g.id.Root && slices.Contains(lockoutOps, op)):
		return fmt.Errorf("%w: the bucket policy denies %s", ErrAccessDenied, action)
	case idDecision == iam.Denied:
		return fmt.Errorf("%w: the key's policy denies %s", ErrAccessDenied, action)
	case idDecision == iam.Allowed || bucketDecision == iam.Allowed:
		return nil
	}
	// An ACL grant counts as an Allow (AWS's evaluation); it is read last,
	// so that requests a policy decides read no object.
	if ok, err := g.aclAllows(action, bucket, key, vid); err != nil || ok {
		return err
	}
	return fmt.Errorf("%w: no policy or ACL allows %s on %s", ErrAccessDenied, action, req.Resource)
}

// aclAllows reports whether the bucket's or the object's ACL (of version vid
// when the request names one) gives the permission action needs.
func (g *decision) aclAllows(action, bucket, key, vid string) (bool, error) {
	anon, ignore := g.principal.Anonymous, g.bpa.IgnorePublicAcls
	if perm, ok := bucketACLPerms[action]; ok && aclGrants(g.bucketACL, anon, g.principal.Key, perm, ignore) {
		return true, nil
	}
	perm, ok := objectACLPerms[action]
	if !ok || key == "" || g.objectACL == nil {
		return false, nil
	}
	acl, err := g.objectACL(bucket, key, vid)
	if err != nil {
		return false, err
	}
	return aclGrants(acl, anon, g.principal.Key, perm, ignore), nil
}

// visible keeps the buckets of a key's bucket list (all for the root key
// and keys without one).
func (g *decision) visible(bs []store.Bucket) []store.Bucket {
	if g.id.Root || len(g.id.Buckets) == 0 {
		return bs
	}
	out := bs[:0:0]
	for _, b := range bs {
		if slices.Contains(g.id.Buckets, b.Name) {
			out = append(out, b)
		}
	}
	return out
}

// hideMissingKey answers AccessDenied instead of NoSuchKey to a caller
// that may not list the bucket (s3:ListBucket), as S3 does, so that a read
// grant does not tell which keys exist. The owner and keys without a policy
// of their own may list, and see NoSuchKey as before.
func hideMissingKey(rq *request, err error) error {
	if rq.decision == nil || !errors.Is(err, store.ErrNoSuchKey) || rq.decision.decide("ListObjects", rq.bucket, "") == nil {
		return err
	}
	return errAccessDenied
}

// allowKey decides one key (or version vid of it) of a DeleteObjects
// request (nil: allowed).
func (a *api) allowKey(rq *request, key, vid, ifMatch string) error {
	if rq.decision == nil {
		return nil // no policy evaluation configured
	}
	err := rq.decision.decideVersion("DeleteObject", rq.bucket, key, vid)
	if err == nil && conditionReads(ifMatch) {
		err = rq.decision.decide("GetObject", rq.bucket, key)
	}
	return err
}

// conditionReads reports whether a delete's If-Match tells its caller
// something of the object's content: an ETag does (S3 requires
// s3:GetObject besides s3:DeleteObject for it), "*" only that it exists.
func conditionReads(ifMatch string) bool { return ifMatch != "" && ifMatch != "*" }

// publicACLs are the canned ACLs that grant to everyone or to every
// authenticated AWS user: AWS's public ACLs.
var publicACLs = map[string]bool{"public-read": true, "public-read-write": true, "authenticated-read": true}

// publicGrantees are the group URIs of AWS's public grants.
var publicGrantees = []string{"http://acs.amazonaws.com/groups/global/AllUsers", "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"}

// aclOps are the operations on an existing bucket whose headers may set an
// ACL (CreateBucket's is its own: the bucket has no setting yet).
var aclOps = []string{"PutObject", "CopyObject", "CreateMultipartUpload", "PutObjectAcl", "PutBucketAcl", "PostObject"}

// taggingOps are the writes whose x-amz-tagging also needs
// s3:PutObjectTagging.
var taggingOps = []string{"PutObject", "CopyObject", "CreateMultipartUpload", "PostObject"}

// checkPublicACL refuses a public ACL in the headers of a request on a
// bucket whose BlockPublicAcls is set, AccessDenied as on AWS (without it
// the handler answers NotImplemented: only private ACLs exist here).
func checkPublicACL(rq *request, bpa publicAccessBlock, missing bool) error {
	if !bpa.BlockPublicAcls || missing || !slices.Contains(aclOps, rq.op) {
		return nil
	}
	h := rq.r.Header
	public := publicACLs[h.Get("X-Amz-Acl")]
	for name, vals := range h {
		if strings.HasPrefix(strings.ToLower(name), "x-amz-grant-") {
			for _, v := range vals {
				public = public || slices.ContainsFunc(publicGrantees, func(u string) bool { return strings.Contains(v, u) })
			}
		}
	}
	if public {
		return fmt.Errorf("%w: BlockPublicAcls is set on bucket %q", ErrAccessDenied, rq.bucket)
	}
	return nil
}

// listOps are the operations whose query fills s3:prefix, s3:delimiter and
// s3:max-keys.
var listOps = []string{"ListObjects", "ListObjectsV2", "ListObjectVersions"}

// conditionContext builds the condition keys of rq (iam.Keys). The
// source address is the TCP peer: s3gate trusts no forwarding header.
func conditionContext(rq *request) map[string][]string {
	r := rq.r
	c := map[string][]string{
		"aws:securetransport": {strconv.FormatBool(r.TLS != nil)},
		"aws:currenttime":     {time.Now().UTC().Format(time.RFC3339)},
		"aws:epochtime":       {strconv.FormatInt(time.Now().Unix(), 10)},
	}
	set := func(k, v string) {
		if v != "" {
			c[k] = []string{v}
		}
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		set("aws:sourceip", host)
	}
	set("aws:referer", r.Header.Get("Referer"))
	set("aws:useragent", r.Header.Get("User-Agent"))
	set("s3:x-amz-acl", r.Header.Get("X-Amz-Acl"))
	set("s3:x-amz-content-sha256", r.Header.Get("X-Amz-Content-Sha256"))
	switch {
	case rq.anonymous:
		c["aws:principaltype"] = []string{"Anonymous"}
	default:
		set("aws:username", rq.accessKey)
		set("aws:userid", rq.accessKey)
		c["aws:principaltype"] = []string{"User"}
		authType, sigVersion := authKind(r)
		set("s3:authtype", authType)
		set("s3:signatureversion", sigVersion)
	}
	if slices.Contains(listOps, rq.op) {
		c["s3:prefix"] = []string{rq.q.Get("prefix")} // "" without one, as AWS's examples expect
		if rq.q.Has("delimiter") {
			c["s3:delimiter"] = []string{rq.q.Get("delimiter")}
		}
		if rq.q.Has("max-keys") {
			c["s3:max-keys"] = []string{rq.q.Get("max-keys")}
		}
	}
	return c
}

// authKind names how an authenticated request was signed (s3:authType,
// s3:signatureversion).
func authKind(r *http.Request) (authType, sigVersion string) {
	authz := r.Header.Get("Authorization")
	q := r.URL.Query()
	switch {
	case strings.HasPrefix(authz, "AWS4-"):
		return "REST-HEADER", "AWS4-HMAC-SHA256"
	case strings.HasPrefix(authz, "AWS "):
		return "REST-HEADER", "AWS"
	case q.Has("X-Amz-Algorithm"):
		return "REST-QUERY-STRING", "AWS4-HMAC-SHA256"
	case q.Has("AWSAccessKeyId"):
		return "REST-QUERY-STRING", "AWS"
	}
	return "", ""
}

// docCache keeps parsed policy documents by their text (key and bucket
// policies are read on every request; parsing each time would cost more
// than the read).
type docCache = textCache[docKey, *iam.Policy]

type docKey struct {
	kind   iam.Kind
	bucket string
	text   string
}

func parsePolicy(c *docCache, text string, kind iam.Kind, bucket string) (*iam.Policy, error) {
	return c.get(docKey{kind, bucket, text}, func() (*iam.Policy, error) { return iam.Parse([]byte(text), kind, bucket) })
}

// textCache keeps what was parsed of stored documents, keyed by what
// determines it (the document's text included), so a changed document is a
// new key and never answered from an older parse. It is dropped whole when
// it grows past maxDocs, which only churn of many changed documents
// reaches. Cached values are shared: nothing may modify them.
type textCache[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
}

const maxDocs = 1024

// get returns the value cached for k, or parse's, cached if it succeeded.
func (c *textCache[K, V]) get(k K, parse func() (V, error)) (V, error) {
	c.mu.Lock()
	v, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := parse()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxDocs {
		c.m = map[K]V{}
	}
	c.m[k] = v
	c.mu.Unlock()
	return v, nil
}
