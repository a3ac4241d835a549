package s3api

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strconv"

	iam "github.com/s3gate/s3gate/policy"
	"github.com/s3gate/s3gate/store"
)

// Bucket policies and Block Public Access (PutBucketPolicy, ...,
// DeletePublicAccessBlock), stored through store.BucketConfigStore.

// publicAccessBlock is a bucket's Block Public Access setting.
type publicAccessBlock struct {
	XMLName               xml.Name `xml:"PublicAccessBlockConfiguration"`
	NS                    string   `xml:"xmlns,attr,omitempty"`
	BlockPublicAcls       bool     `xml:"BlockPublicAcls"`
	IgnorePublicAcls      bool     `xml:"IgnorePublicAcls"`
	BlockPublicPolicy     bool     `xml:"BlockPublicPolicy"`
	RestrictPublicBuckets bool     `xml:"RestrictPublicBuckets"`
}

// blockAll is Block Public Access with every flag set: the default of a
// bucket that never had its own (Config.BlockPublicAccess).
var blockAll = publicAccessBlock{BlockPublicAcls: true, IgnorePublicAcls: true, BlockPublicPolicy: true, RestrictPublicBuckets: true}

// effectiveBPA reads a bucket's Block Public Access from its configuration
// documents: the stored setting; none if it was deleted (stored as ""); and
// for a bucket that never had one, the gateway's default. set reports
// whether the bucket has a configuration (GetPublicAccessBlock).
func (ac *access) effectiveBPA(cfgs map[string]string) (bpa publicAccessBlock, set bool, err error) {
	v, ok := cfgs[store.BucketConfigPublicAccessBlock]
	switch {
	case !ok && ac.blockPublic:
		return blockAll, true, nil
	case !ok || v == "":
		return publicAccessBlock{}, false, nil
	}
	if err := xml.Unmarshal([]byte(v), &bpa); err != nil {
		return publicAccessBlock{}, false, fmt.Errorf("stored public access block: %w", err)
	}
	return bpa, true, nil
}

// policyConfigs returns the bucket's configuration store, or NotImplemented
// when the gateway evaluates no policies.
func (a *api) policyConfigs() (store.BucketConfigStore, error) {
	if a.access == nil || a.access.configs == nil {
		return nil, errNotImplemented.withMessage("Bucket policies and Block Public Access need a gateway that evaluates policies.")
	}
	return a.access.configs, nil
}

// bucketConfigs reads the bucket's configuration documents; without policy
// evaluation a bucket has none (it must exist all the same).
func (a *api) bucketConfigs(rq *request) (map[string]string, error) {
	if a.access == nil || a.access.configs == nil {
		if _, err := a.st.HeadBucket(rq.ctx, rq.bucket); err != nil {
			return nil, fmt.Errorf("%s %q: %w", rq.op, rq.bucket, err)
		}
		return nil, nil
	}
	cfgs, err := a.access.configs.BucketConfigs(rq.ctx, rq.bucket)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", rq.op, rq.bucket, err)
	}
	return cfgs, nil
}

// bpaOf is the bucket's effective Block Public Access (none without policy
// evaluation).
func (a *api) bpaOf(cfgs map[string]string) (publicAccessBlock, bool, error) {
	if a.access == nil {
		return publicAccessBlock{}, false, nil
	}
	return a.access.effectiveBPA(cfgs)
}

// readPolicyBody reads a policy document: at most iam.MaxBucketPolicy
// bytes, checked against Content-MD5 and checksum headers.
func readPolicyBody(rq *request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(rq.body, iam.MaxBucketPolicy+1))
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	if len(body) > iam.MaxBucketPolicy {
		return nil, errMalformedPolicy.withMessage("Policy exceeds the maximum allowed document size.")
	}
	if err := verifySmallBody(rq, body); err != nil {
		return nil, err
	}
	return body, nil
}

func (a *api) putBucketPolicy(rq *request) error {
	if _, err := a.policyConfigs(); err != nil {
		return err
	}
	body, err := readPolicyBody(rq)
	if err != nil {
		return err
	}
	cfgs, err := a.bucketConfigs(rq)
	if err != nil {
		return err
	}
	p, err := iam.Parse(body, iam.Bucket, rq.bucket)
	if pe, ok := iam.IsMalformed(err); ok {
		return errMalformedPolicy.withMessage(pe.Message)
	}
	if err != nil {
		return err
	}
	bpa, _, err := a.bpaOf(cfgs)
	if err != nil {
		return err
	}
	if bpa.BlockPublicPolicy && p.IsPublic() {
		return errAccessDenied
	}
	return a.putConfig(rq, store.BucketConfigPolicy, string(body), http.StatusNoContent)
}

// putConfig stores one configuration document of rq's bucket and answers
// status.
func (a *api) putConfig(rq *request, name, value string, status int) error {
	c, err := a.policyConfigs()
	if err != nil {
		return err
	}
	if err := c.PutBucketConfig(rq.ctx, rq.bucket, name, value); err != nil {
		return fmt.Errorf("%s %q: %w", rq.op, rq.bucket, err)
	}
	rq.w.WriteHeader(status)
	return nil
}

// storedPolicy returns the bucket's policy document, or NoSuchBucketPolicy.
func (a *api) storedPolicy(rq *request) (string, error) {
	cfgs, err := a.bucketConfigs(rq)
	if err != nil {
		return "", err
	}
	doc, ok := cfgs[store.BucketConfigPolicy]
	if !ok {
		return "", errNoSuchBucketPolicy
	}
	return doc, nil
}

func (a *api) getBucketPolicy(rq *request) error {
	doc, err := a.storedPolicy(rq)
	if err != nil {
		return err
	}
	rq.w.Header().Set("Content-Type", "application/json")
	rq.w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
	rq.w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(rq.w, doc) // a client gone mid-answer has nothing to hear
	return nil
}

// deleteBucketPolicy answers 204 whether or not the bucket had a policy, as
// AWS does.
func (a *api) deleteBucketPolicy(rq *request) error {
	c, err := a.policyConfigs()
	if err != nil {
		return err
	}
	if _, err := c.DeleteBucketConfig(rq.ctx, rq.bucket, store.BucketConfigPolicy); err != nil {
		return fmt.Errorf("delete bucket policy %q: %w", rq.bucket, err)
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

type policyStatus struct {
	XMLName  xml.Name `xml:"PolicyStatus"`
	NS       string   `xml:"xmlns,attr"`
	IsPublic bool     `xml:"IsPublic"`
}

func (a *api) getBucketPolicyStatus(rq *request) error {
	doc, err := a.storedPolicy(rq)
	if err != nil {
		return err
	}
	p, err := iam.Parse([]byte(doc), iam.Bucket, rq.bucket)
	if err != nil {
		return fmt.Errorf("stored bucket policy of %q: %w", rq.bucket, err)
	}
	return writeXML(rq, policyStatus{NS: s3NS, IsPublic: p.IsPublic()})
}

func (a *api) putPublicAccessBlock(rq *request) error {
	body, err := readBody(rq, a.cfg.MaxXMLBody)
	if err != nil {
		return err
	}
	if err := verifySmallBody(rq, body); err != nil {
		return err
	}
	if _, err := a.policyConfigs(); err != nil {
		return err
	}
	var bpa publicAccessBlock
	if err := decodeXML(body, &bpa); err != nil {
		return err
	}
	v, err := xml.Marshal(publicAccessBlock{BlockPublicAcls: bpa.BlockPublicAcls, IgnorePublicAcls: bpa.IgnorePublicAcls,
		BlockPublicPolicy: bpa.BlockPublicPolicy, RestrictPublicBuckets: bpa.RestrictPublicBuckets})
	if err != nil {
		return fmt.Errorf("marshal public access block: %w", err)
	}
	return a.putConfig(rq, store.BucketConfigPublicAccessBlock, string(v), http.StatusOK)
}

func (a *api) getPublicAccessBlock(rq *request) error {
	cfgs, err := a.bucketConfigs(rq)
	if err != nil {
		return err
	}
	bpa, set, err := a.bpaOf(cfgs)
	if err != nil {
		return err
	}
	if !set {
		return errNoSuchPublicAccessBlock
	}
	bpa.NS = s3NS
	return writeXML(rq, bpa)
}

// deletePublicAccessBlock records that the bucket has no Block Public
// Access (""), so that the gateway's default no longer applies to it.
func (a *api) deletePublicAccessBlock(rq *request) error {
	return a.putConfig(rq, store.BucketConfigPublicAccessBlock, "", http.StatusNoContent)
}
