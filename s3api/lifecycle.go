package s3api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/s3gate/s3gate/lifecycle"
	"github.com/s3gate/s3gate/store"
)

// Lifecycle: Put/Get/DeleteBucketLifecycleConfiguration keep the bucket's
// rules (package lifecycle validates them) as the bucket configuration
// lifecycle.ConfigName; x-amz-expiration on GET, HEAD and PUT answers when
// an enabled rule expires the object. The runner (lifecycle.Runner) applies
// the rules in the background.

var errNoSuchLifecycle = notFoundDefault("NoSuchLifecycleConfiguration", "The lifecycle configuration does not exist")

// lifecycleStatus maps the codes of lifecycle.Error to S3's answers.
var lifecycleStatus = map[string]*apiError{
	lifecycle.CodeMalformedXML:    errMalformedXML,
	lifecycle.CodeInvalidArgument: errInvalidArgument,
	lifecycle.CodeInvalidRequest:  errInvalidRequest,
	lifecycle.CodeNotImplemented:  errNotImplemented,
}

// errNoLifecycleStore answers lifecycle writes on a store that keeps no
// bucket configuration.
var errNoLifecycleStore = errNotImplemented.withMessage("Lifecycle configuration needs a metadata engine that keeps bucket configuration.")

func (a *api) putBucketLifecycle(rq *request) error {
	if a.access == nil || a.access.configs == nil {
		return errNoLifecycleStore
	}
	body, err := readBody(rq, max(a.cfg.MaxXMLBody, bigXMLBody))
	if err != nil {
		return err
	}
	if err := verifySmallBody(rq, body); err != nil {
		return err
	}
	var c lifecycle.Configuration
	if err := decodeXML(body, &c); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		var le *lifecycle.Error
		if errors.As(err, &le) {
			return lifecycleStatus[le.Code].withMessage(le.Message)
		}
		return err
	}
	if _, err := a.bucketConfigs(rq); err != nil { // the bucket must exist
		return err
	}
	doc, err := c.Encode()
	if err != nil {
		return err
	}
	return a.putConfig(rq, lifecycle.ConfigName, doc, http.StatusOK)
}

// storedLifecycle returns the bucket's configuration, nil if it has none.
func storedLifecycle(cfgs map[string]string) (*lifecycle.Configuration, error) {
	doc, ok := cfgs[lifecycle.ConfigName]
	if !ok {
		return nil, nil
	}
	return lifecycle.Decode(doc)
}

func (a *api) getBucketLifecycle(rq *request) error {
	cfgs, err := a.bucketConfigs(rq)
	if err != nil {
		return err
	}
	c, err := storedLifecycle(cfgs)
	if err != nil {
		return fmt.Errorf("%s %q: %w", rq.op, rq.bucket, err)
	}
	if c == nil {
		return withDetails(errNoSuchLifecycle, "BucketName", rq.bucket)
	}
	c.NS = s3NS
	return writeXML(rq, c)
}

// deleteBucketLifecycle answers 204 whether or not there were rules, as S3.
func (a *api) deleteBucketLifecycle(rq *request) error {
	if a.access == nil || a.access.configs == nil {
		return errNoLifecycleStore
	}
	if _, err := a.access.configs.DeleteBucketConfig(rq.ctx, rq.bucket, lifecycle.ConfigName); err != nil {
		return fmt.Errorf("%s %q: %w", rq.op, rq.bucket, err)
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// setExpiration sets x-amz-expiration for the current version info when an
// enabled Expiration rule of the bucket matches it: the expiry (S3's
// rounding, on the configured lifecycle day) and the rule's URL-encoded ID.
// The bucket's configuration is the one the request's decision loaded.
func (a *api) setExpiration(rq *request, info store.ObjectInfo, tags []store.Tag) {
	if rq.decision == nil || rq.q.Has("versionId") {
		return // a version read by id may not be the current one the rules expire
	}
	doc, ok := rq.decision.cfgs[lifecycle.ConfigName]
	if !ok {
		return
	}
	c, err := a.lifecycles.get(doc, func() (*lifecycle.Configuration, error) { return lifecycle.Decode(doc) })
	if err != nil {
		return // a stored document is validated: unreadable is not the client's answer
	}
	at, id, ok := c.Expiry(rq.key, info.Size, tags, info.LastModified, a.cfg.LifecycleDay)
	if ok {
		rq.w.Header().Set("X-Amz-Expiration", `expiry-date="`+httpTime(at)+`", rule-id="`+url.QueryEscape(id)+`"`)
	}
}
