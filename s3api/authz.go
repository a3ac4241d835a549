package s3api

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/s3gate/s3gate/store"
)

// Authorizer decides, after a request is authenticated, whether accessKey may
// run operation (an AWS API name as Operation resolves it) on bucket ("" for
// ListBuckets). A refusal wraps ErrAccessDenied; any other error fails the
// request as it is (a store outage answers 503). s3api calls it before the
// handler runs, so a refused request changes nothing.
type Authorizer interface {
	Authorize(ctx context.Context, accessKey, operation, bucket string) error
}

// BucketFilter may be implemented by an Authorizer to let ListBuckets keep
// the buckets a key may see in one decision; without it s3api asks Authorize
// ("HeadBucket", name) for each bucket.
type BucketFilter interface {
	VisibleBuckets(ctx context.Context, accessKey string, names []string) ([]string, error)
}

// ErrAccessDenied is what an Authorizer returns (wrapped) to refuse a
// request: the client gets 403 AccessDenied.
var ErrAccessDenied = errors.New("access denied")

// Access is the class of an operation for authorization.
type Access int

// Access classes.
const (
	// AccessWrite changes state (or might: unknown operations are writes).
	AccessWrite Access = iota
	// AccessRead only reads.
	AccessRead
)

func (a Access) String() string {
	if a == AccessRead {
		return "read"
	}
	return "write"
}

// accessTable is the one place that classifies operations. Entries are exact
// names or, ending in "*", name prefixes; the first match wins. Anything
// unmatched is a write, so an operation added later is refused to read-only
// keys until it is classified here.
var accessTable = []struct {
	pattern string
	access  Access
}{
	// A POST that only reads object content (IAM classifies it as
	// s3:GetObject).
	{"SelectObjectContent", AccessRead},
	{"Get*", AccessRead},
	{"Head*", AccessRead},
	{"List*", AccessRead},
}

// OperationAccess returns whether op reads or writes.
func OperationAccess(op string) Access {
	for _, e := range accessTable {
		if p, ok := strings.CutSuffix(e.pattern, "*"); ok {
			if strings.HasPrefix(op, p) {
				return e.access
			}
		} else if op == e.pattern {
			return e.access
		}
	}
	return AccessWrite
}

// PolicySource resolves an access key's policy (auth.Keyring implements it):
// the buckets it is limited to (empty: all), whether it may only read, and
// whether it is the root key. An unknown key is an error wrapping
// store.ErrNoSuchAccessKey.
type PolicySource interface {
	Policy(ctx context.Context, accessKey string) (buckets []string, readOnly, root bool, err error)
}

// KeyPolicy is the Authorizer of per-key policies: the root key may do
// everything; other keys only what their bucket list and read-only flag
// allow. ListBuckets is allowed to every key and shows only its buckets.
type KeyPolicy struct {
	Source PolicySource
}

var (
	_ Authorizer   = KeyPolicy{}
	_ BucketFilter = KeyPolicy{}
)

// NewKeyPolicy returns the Authorizer that enforces src's per-key policies.
func NewKeyPolicy(src PolicySource) KeyPolicy { return KeyPolicy{Source: src} }

// Authorize implements Authorizer.
func (p KeyPolicy) Authorize(ctx context.Context, accessKey, operation, bucket string) error {
	buckets, readOnly, root, err := p.policy(ctx, accessKey)
	if err != nil || root {
		return err
	}
	if readOnly && OperationAccess(operation) != AccessRead {
		return fmt.Errorf("%w: key %q is read-only (%s)", ErrAccessDenied, accessKey, operation)
	}
	if bucket == "" && operation == "ListBuckets" {
		return nil // filtered by VisibleBuckets
	}
	if len(buckets) > 0 && !slices.Contains(buckets, bucket) {
		return fmt.Errorf("%w: key %q may not use bucket %q", ErrAccessDenied, accessKey, bucket)
	}
	return nil
}

// VisibleBuckets implements BucketFilter.
func (p KeyPolicy) VisibleBuckets(ctx context.Context, accessKey string, names []string) ([]string, error) {
	buckets, _, root, err := p.policy(ctx, accessKey)
	if err != nil {
		return nil, err
	}
	if root || len(buckets) == 0 {
		return names, nil
	}
	var out []string
	for _, n := range names {
		if slices.Contains(buckets, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (p KeyPolicy) policy(ctx context.Context, accessKey string) (buckets []string, readOnly, root bool, err error) {
	buckets, readOnly, root, err = p.Source.Policy(ctx, accessKey)
	if errors.Is(err, store.ErrNoSuchAccessKey) {
		// Deleted between authentication and this check.
		return nil, false, false, fmt.Errorf("%w: %w", ErrAccessDenied, err)
	}
	if err != nil {
		return nil, false, false, fmt.Errorf("authorize %q: %w", accessKey, err)
	}
	return buckets, readOnly, root, nil
}

// authorize runs the configured Authorizer for rq: the target bucket with the
// request's operation, and for copies the source bucket as a read
// (GetObject), so that a key cannot copy out of a bucket it may not read.
func (a *api) authorize(rq *request) error {
	if a.access != nil {
		return a.authorizePolicies(rq)
	}
	az := a.cfg.Authorizer
	if az == nil {
		return nil
	}
	if err := az.Authorize(rq.ctx, rq.accessKey, rq.op, rq.bucket); err != nil {
		return authzError(err)
	}
	if rq.op == "CopyObject" || rq.op == "UploadPartCopy" {
		// A malformed source is left to the handler's own answer.
		if src, err := parseCopySource(rq.r.Header); err == nil {
			if err := az.Authorize(rq.ctx, rq.accessKey, "GetObject", src.Bucket); err != nil {
				return authzError(err)
			}
		}
	}
	return nil
}

// authorizePolicies runs the policy evaluation for rq, and for copies on
// the source object as a GetObject.
func (a *api) authorizePolicies(rq *request) error {
	if err := a.access.authorize(rq); err != nil {
		return authzError(err)
	}
	if rq.op == "CopyObject" || rq.op == "UploadPartCopy" {
		if src, err := parseCopySource(rq.r.Header); err == nil {
			srq := *rq
			srq.op, srq.bucket, srq.key, srq.q = "GetObject", src.Bucket, src.Key, url.Values{}
			if src.VersionID != "" {
				srq.q.Set("versionId", src.VersionID) // s3:GetObjectVersion
			}
			if err := a.access.authorize(&srq); err != nil {
				return authzError(err)
			}
		}
	}
	return nil
}

// visibleBuckets keeps the buckets that rq's key may see.
func (a *api) visibleBuckets(rq *request, bs []store.Bucket) ([]store.Bucket, error) {
	if a.access != nil && rq.decision != nil {
		return rq.decision.visible(bs), nil
	}
	az := a.cfg.Authorizer
	if az == nil {
		return bs, nil
	}
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.Name
	}
	keep := map[string]bool{}
	if f, ok := az.(BucketFilter); ok {
		visible, err := f.VisibleBuckets(rq.ctx, rq.accessKey, names)
		if err != nil {
			return nil, authzError(err)
		}
		for _, n := range visible {
			keep[n] = true
		}
	} else {
		for _, n := range names {
			err := az.Authorize(rq.ctx, rq.accessKey, "HeadBucket", n)
			if errors.Is(err, ErrAccessDenied) {
				continue
			}
			if err != nil {
				return nil, authzError(err)
			}
			keep[n] = true
		}
	}
	out := bs[:0:0]
	for _, b := range bs {
		if keep[b.Name] {
			out = append(out, b)
		}
	}
	return out, nil
}

// authzError maps a refusal to AccessDenied and keeps any other cause (a
// store failure: 503 or 500 through toAPIError).
func authzError(err error) error {
	if errors.Is(err, ErrAccessDenied) {
		return errAccessDenied
	}
	return fmt.Errorf("authorize: %w", err)
}
