package policy

import "strings"

// Scope is what kind of resource an action applies to.
type Scope int

// Scopes of actions.
const (
	// ScopeService: no bucket (ListAllMyBuckets).
	ScopeService Scope = iota
	// ScopeBucket: the bucket, arn:aws:s3:::bucket.
	ScopeBucket
	// ScopeObject: an object, arn:aws:s3:::bucket/key.
	ScopeObject
)

// operations maps S3 API operations to the IAM action a request needs. It is
// the one table of that mapping: an operation missing here needs an action
// no policy can grant, so only the owner may run it.
var operations = map[string]string{
	"ListBuckets":       "s3:ListAllMyBuckets",
	"CreateBucket":      "s3:CreateBucket",
	"HeadBucket":        "s3:ListBucket",
	"DeleteBucket":      "s3:DeleteBucket",
	"GetBucketLocation": "s3:GetBucketLocation",
	"ListObjects":       "s3:ListBucket",
	"ListObjectsV2":     "s3:ListBucket",
	// DeleteObjects is decided per key, as s3:DeleteObject, by the handler;
	// the request itself needs the same action on the bucket's keys.
	"DeleteObjects":        "s3:DeleteObject",
	"ListObjectVersions":   "s3:ListBucketVersions",
	"ListMultipartUploads": "s3:ListBucketMultipartUploads",

	"GetBucketVersioning":                         "s3:GetBucketVersioning",
	"PutBucketVersioning":                         "s3:PutBucketVersioning",
	"GetBucketAcl":                                "s3:GetBucketAcl",
	"PutBucketAcl":                                "s3:PutBucketAcl",
	"GetBucketTagging":                            "s3:GetBucketTagging",
	"PutBucketTagging":                            "s3:PutBucketTagging",
	"DeleteBucketTagging":                         "s3:PutBucketTagging",
	"GetBucketPolicy":                             "s3:GetBucketPolicy",
	"PutBucketPolicy":                             "s3:PutBucketPolicy",
	"DeleteBucketPolicy":                          "s3:DeleteBucketPolicy",
	"GetBucketPolicyStatus":                       "s3:GetBucketPolicyStatus",
	"GetBucketCors":                               "s3:GetBucketCORS",
	"PutBucketCors":                               "s3:PutBucketCORS",
	"DeleteBucketCors":                            "s3:PutBucketCORS",
	"GetBucketLifecycleConfiguration":             "s3:GetLifecycleConfiguration",
	"PutBucketLifecycleConfiguration":             "s3:PutLifecycleConfiguration",
	"DeleteBucketLifecycleConfiguration":          "s3:PutLifecycleConfiguration",
	"GetBucketEncryption":                         "s3:GetEncryptionConfiguration",
	"PutBucketEncryption":                         "s3:PutEncryptionConfiguration",
	"DeleteBucketEncryption":                      "s3:PutEncryptionConfiguration",
	"GetObjectLockConfiguration":                  "s3:GetBucketObjectLockConfiguration",
	"PutObjectLockConfiguration":                  "s3:PutBucketObjectLockConfiguration",
	"GetBucketReplication":                        "s3:GetReplicationConfiguration",
	"PutBucketReplication":                        "s3:PutReplicationConfiguration",
	"DeleteBucketReplication":                     "s3:PutReplicationConfiguration",
	"GetBucketWebsite":                            "s3:GetBucketWebsite",
	"PutBucketWebsite":                            "s3:PutBucketWebsite",
	"DeleteBucketWebsite":                         "s3:DeleteBucketWebsite",
	"GetBucketNotificationConfiguration":          "s3:GetBucketNotification",
	"PutBucketNotificationConfiguration":          "s3:PutBucketNotification",
	"GetBucketLogging":                            "s3:GetBucketLogging",
	"PutBucketLogging":                            "s3:PutBucketLogging",
	"GetBucketAccelerateConfiguration":            "s3:GetAccelerateConfiguration",
	"PutBucketAccelerateConfiguration":            "s3:PutAccelerateConfiguration",
	"GetBucketRequestPayment":                     "s3:GetBucketRequestPayment",
	"PutBucketRequestPayment":                     "s3:PutBucketRequestPayment",
	"GetBucketAnalyticsConfiguration":             "s3:GetAnalyticsConfiguration",
	"ListBucketAnalyticsConfigurations":           "s3:GetAnalyticsConfiguration",
	"PutBucketAnalyticsConfiguration":             "s3:PutAnalyticsConfiguration",
	"DeleteBucketAnalyticsConfiguration":          "s3:PutAnalyticsConfiguration",
	"GetBucketMetricsConfiguration":               "s3:GetMetricsConfiguration",
	"ListBucketMetricsConfigurations":             "s3:GetMetricsConfiguration",
	"PutBucketMetricsConfiguration":               "s3:PutMetricsConfiguration",
	"DeleteBucketMetricsConfiguration":            "s3:PutMetricsConfiguration",
	"GetBucketInventoryConfiguration":             "s3:GetInventoryConfiguration",
	"ListBucketInventoryConfigurations":           "s3:GetInventoryConfiguration",
	"PutBucketInventoryConfiguration":             "s3:PutInventoryConfiguration",
	"DeleteBucketInventoryConfiguration":          "s3:PutInventoryConfiguration",
	"GetBucketIntelligentTieringConfiguration":    "s3:GetIntelligentTieringConfiguration",
	"ListBucketIntelligentTieringConfigurations":  "s3:GetIntelligentTieringConfiguration",
	"PutBucketIntelligentTieringConfiguration":    "s3:PutIntelligentTieringConfiguration",
	"DeleteBucketIntelligentTieringConfiguration": "s3:PutIntelligentTieringConfiguration",
	"GetBucketOwnershipControls":                  "s3:GetBucketOwnershipControls",
	"PutBucketOwnershipControls":                  "s3:PutBucketOwnershipControls",
	"DeleteBucketOwnershipControls":               "s3:PutBucketOwnershipControls",
	"GetPublicAccessBlock":                        "s3:GetBucketPublicAccessBlock",
	"PutPublicAccessBlock":                        "s3:PutBucketPublicAccessBlock",
	"DeletePublicAccessBlock":                     "s3:PutBucketPublicAccessBlock",

	"PutObject":           "s3:PutObject",
	"PostObject":          "s3:PutObject",
	"CopyObject":          "s3:PutObject",
	"GetObject":           "s3:GetObject",
	"HeadObject":          "s3:GetObject",
	"SelectObjectContent": "s3:GetObject",
	"DeleteObject":        "s3:DeleteObject",
	"GetObjectAcl":        "s3:GetObjectAcl",
	"PutObjectAcl":        "s3:PutObjectAcl",
	"GetObjectTagging":    "s3:GetObjectTagging",
	"PutObjectTagging":    "s3:PutObjectTagging",
	"DeleteObjectTagging": "s3:DeleteObjectTagging",
	"GetObjectAttributes": "s3:GetObjectAttributes",
	"GetObjectRetention":  "s3:GetObjectRetention",
	"PutObjectRetention":  "s3:PutObjectRetention",
	"GetObjectLegalHold":  "s3:GetObjectLegalHold",
	"PutObjectLegalHold":  "s3:PutObjectLegalHold",
	// Not an operation: the permission x-amz-bypass-governance-retention
	// needs, decided under this name.
	"BypassGovernanceRetention": "s3:BypassGovernanceRetention",
	"GetObjectTorrent":          "s3:GetObjectTorrent",
	"RestoreObject":             "s3:RestoreObject",
	"CreateMultipartUpload":     "s3:PutObject",
	"UploadPart":                "s3:PutObject",
	"UploadPartCopy":            "s3:PutObject",
	"CompleteMultipartUpload":   "s3:PutObject",
	"AbortMultipartUpload":      "s3:AbortMultipartUpload",
	"ListParts":                 "s3:ListMultipartUploadParts",
}

// actionScopes lists the S3 actions a policy may name (lower case), with
// the kind of resource each applies to. Besides those of operations it
// holds the version-specific ones AWS knows: s3api decides a request that
// names a version (or bypasses a GOVERNANCE retention) under them, and
// s3:GetObjectVersionTorrent, which no request here asks for, still
// validates in documents written for AWS.
var actionScopes = func() map[string]Scope {
	m := map[string]Scope{"s3:listallmybuckets": ScopeService}
	object := []string{
		"s3:GetObjectVersion", "s3:DeleteObjectVersion", "s3:GetObjectVersionAcl",
		"s3:PutObjectVersionAcl", "s3:GetObjectVersionTagging", "s3:PutObjectVersionTagging",
		"s3:DeleteObjectVersionTagging", "s3:GetObjectVersionAttributes",
		"s3:GetObjectVersionTorrent", "s3:BypassGovernanceRetention",
	}
	for _, a := range object {
		m[strings.ToLower(a)] = ScopeObject
	}
	for op, a := range operations {
		if _, ok := m[strings.ToLower(a)]; ok {
			continue
		}
		m[strings.ToLower(a)] = opScope(op)
	}
	return m
}()

// opScope is the resource kind of an operation: bucket operations end in a
// bucket subresource or list; the object ones name objects, uploads, parts.
func opScope(op string) Scope {
	switch op {
	case "ListBuckets":
		return ScopeService
	case "PutObject", "PostObject", "CopyObject", "GetObject", "HeadObject", "SelectObjectContent",
		"DeleteObject", "DeleteObjects", "GetObjectAcl", "PutObjectAcl", "GetObjectTagging", "PutObjectTagging",
		"DeleteObjectTagging", "GetObjectAttributes", "GetObjectRetention", "PutObjectRetention",
		"GetObjectLegalHold", "PutObjectLegalHold", "BypassGovernanceRetention", "GetObjectTorrent", "RestoreObject",
		"CreateMultipartUpload", "UploadPart", "UploadPartCopy", "CompleteMultipartUpload",
		"AbortMultipartUpload", "ListParts":
		return ScopeObject
	}
	return ScopeBucket
}

// ActionOf returns the IAM action that operation needs and the kind of
// resource it is checked on; ok is false for an operation no policy grants.
func ActionOf(operation string) (action string, scope Scope, ok bool) {
	a, ok := operations[operation]
	return a, opScope(operation), ok
}

// Resource is the ARN a request is checked against: arn:aws:s3:::* for
// ScopeService (which both "*" and "arn:aws:s3:::*" match, as policies for
// ListAllMyBuckets write it), arn:aws:s3:::bucket for ScopeBucket,
// arn:aws:s3:::bucket/key for ScopeObject.
func Resource(scope Scope, bucket, key string) string {
	switch scope {
	case ScopeService:
		return arnPrefix + "*"
	case ScopeBucket:
		return arnPrefix + bucket
	}
	return arnPrefix + bucket + "/" + key
}

const arnPrefix = "arn:aws:s3:::"
