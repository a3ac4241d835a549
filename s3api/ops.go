package s3api

import (
	"net/http"
	"net/url"
	"strings"
)

// opUnknown names requests no S3 operation matches (unsupported methods).
const opUnknown = "Unknown"

// opPreflight names a CORS preflight (OPTIONS on a bucket or an object).
const opPreflight = "OptionsObject"

// subresource is a query parameter that selects a bucket or object
// configuration API; the operation is the method's verb plus the suffix.
type subresource struct {
	query  string
	bucket string // suffix on a bucket, "" if none
	object string // suffix on an object, "" if none
}

// subresources is checked in order; the first present parameter wins.
var subresources = []subresource{
	{"acl", "BucketAcl", "ObjectAcl"},
	{"tagging", "BucketTagging", "ObjectTagging"},
	{"versioning", "BucketVersioning", ""},
	{"policy", "BucketPolicy", ""},
	{"policyStatus", "BucketPolicyStatus", ""},
	{"lifecycle", "BucketLifecycleConfiguration", ""},
	{"cors", "BucketCors", ""},
	{"encryption", "BucketEncryption", ""},
	{"object-lock", "ObjectLockConfiguration", ""},
	{"replication", "BucketReplication", ""},
	{"website", "BucketWebsite", ""},
	{"notification", "BucketNotificationConfiguration", ""},
	{"logging", "BucketLogging", ""},
	{"accelerate", "BucketAccelerateConfiguration", ""},
	{"requestPayment", "BucketRequestPayment", ""},
	{"analytics", "BucketAnalyticsConfiguration", ""},
	{"metrics", "BucketMetricsConfiguration", ""},
	{"inventory", "BucketInventoryConfiguration", ""},
	{"intelligent-tiering", "BucketIntelligentTieringConfiguration", ""},
	{"ownershipControls", "BucketOwnershipControls", ""},
	{"publicAccessBlock", "PublicAccessBlock", ""},
	{"retention", "", "ObjectRetention"},
	{"legal-hold", "", "ObjectLegalHold"},
	{"attributes", "", "ObjectAttributes"},
	{"torrent", "", "ObjectTorrent"},
	{"restore", "", "RestoreObject"},
	{"select", "", "SelectObjectContent"},
}

var verbs = map[string]string{
	http.MethodGet:    "Get",
	http.MethodHead:   "Head",
	http.MethodPut:    "Put",
	http.MethodDelete: "Delete",
	http.MethodPost:   "Post",
}

// Operation names the S3 operation (AWS API names: "GetObject",
// "ListObjectsV2", "PutBucketPolicy", ...) that a request with this method,
// bucket, key (both unescaped, "" when absent), query and headers asks for.
// Requests that match no operation are "Unknown". Metrics can reuse it.
func Operation(method, bucket, key string, q url.Values, h http.Header) string {
	if method == http.MethodOptions && bucket != "" {
		return opPreflight
	}
	verb, ok := verbs[method]
	if !ok {
		return opUnknown
	}
	switch {
	case bucket == "":
		if method == http.MethodGet {
			return "ListBuckets"
		}
		return opUnknown
	case key == "":
		return bucketOperation(method, verb, q)
	default:
		return objectOperation(method, verb, q, h)
	}
}

func bucketOperation(method, verb string, q url.Values) string {
	switch {
	case q.Has("location") && method == http.MethodGet:
		return "GetBucketLocation"
	case q.Has("uploads") && method == http.MethodGet:
		return "ListMultipartUploads"
	case q.Has("delete") && method == http.MethodPost:
		return "DeleteObjects"
	case q.Has("versions") && method == http.MethodGet:
		return "ListObjectVersions"
	}
	for _, s := range subresources {
		if q.Has(s.query) && s.bucket != "" {
			return verb + s.bucket
		}
	}
	switch method {
	case http.MethodGet:
		if q.Get("list-type") == "2" {
			return "ListObjectsV2"
		}
		return "ListObjects"
	case http.MethodHead:
		return "HeadBucket"
	case http.MethodPut:
		return "CreateBucket"
	case http.MethodDelete:
		return "DeleteBucket"
	default: // POST without ?delete: browser form upload
		return "PostObject"
	}
}

func objectOperation(method, verb string, q url.Values, h http.Header) string {
	if q.Has("uploadId") {
		switch method {
		case http.MethodGet:
			return "ListParts"
		case http.MethodPut:
			if h.Get("x-amz-copy-source") != "" {
				return "UploadPartCopy"
			}
			return "UploadPart"
		case http.MethodPost:
			return "CompleteMultipartUpload"
		case http.MethodDelete:
			return "AbortMultipartUpload"
		}
	}
	if q.Has("uploads") && method == http.MethodPost {
		return "CreateMultipartUpload"
	}
	for _, s := range subresources {
		if q.Has(s.query) && s.object != "" {
			if strings.HasSuffix(s.object, "Object") || strings.HasSuffix(s.object, "Content") {
				return s.object // RestoreObject, SelectObjectContent
			}
			return verb + s.object
		}
	}
	switch method {
	case http.MethodGet:
		return "GetObject"
	case http.MethodHead:
		return "HeadObject"
	case http.MethodPut:
		if h.Get("x-amz-copy-source") != "" {
			return "CopyObject"
		}
		return "PutObject"
	case http.MethodDelete:
		return "DeleteObject"
	default:
		return "PostObject"
	}
}

// ResolveOperation names the operation of r and the bucket and key it
// addresses, as New's router resolves them for a handler configured with
// domain (the virtual-host base, "" for path style only). ok is false for
// paths the router rejects (InvalidURI).
func ResolveOperation(r *http.Request, domain string) (op, bucket, key string, ok bool) {
	domain = strings.ToLower(strings.Trim(domain, "."))
	path := r.URL.EscapedPath()
	if b := vhostBucket(r.Host, domain); b != "" {
		k, err := url.PathUnescape(strings.TrimPrefix(path, "/"))
		if err != nil {
			return Operation(r.Method, b, "", r.URL.Query(), r.Header), b, "", false
		}
		return Operation(r.Method, b, k, r.URL.Query(), r.Header), b, k, true
	}
	if !strings.HasPrefix(path, "/") {
		return opUnknown, "", "", false
	}
	rawBucket, rawKey, _ := strings.Cut(path[1:], "/")
	if rawBucket == "" && path != "/" {
		return opUnknown, "", "", false
	}
	b, err1 := url.PathUnescape(rawBucket)
	k, err2 := url.PathUnescape(rawKey)
	if err1 != nil || err2 != nil {
		return Operation(r.Method, b, "", r.URL.Query(), r.Header), b, "", false
	}
	return Operation(r.Method, b, k, r.URL.Query(), r.Header), b, k, true
}

// handlers maps implemented operations to their handlers; every other named
// operation answers NotImplemented.
var handlers = map[string]handlerFunc{
	"ListBuckets":        (*api).listBuckets,
	"CreateBucket":       (*api).createBucket,
	"HeadBucket":         (*api).headBucket,
	"DeleteBucket":       (*api).deleteBucket,
	"GetBucketLocation":  (*api).getBucketLocation,
	"ListObjects":        (*api).listObjectsV1,
	"ListObjectsV2":      (*api).listObjectsV2,
	"DeleteObjects":      (*api).deleteObjects,
	"ListObjectVersions": (*api).listObjectVersions,

	"GetBucketVersioning":             (*api).getBucketVersioning,
	"PutBucketVersioning":             (*api).putBucketVersioning,
	"GetBucketAcl":                    (*api).getBucketACL,
	"PutBucketAcl":                    (*api).putBucketACL,
	"GetBucketTagging":                (*api).getBucketTagging,
	"PutBucketTagging":                (*api).putBucketTagging,
	"DeleteBucketTagging":             (*api).deleteBucketTagging,
	"GetBucketCors":                   (*api).getBucketCors,
	"PutBucketCors":                   (*api).putBucketCors,
	"DeleteBucketCors":                (*api).deleteBucketCors,
	"GetBucketLifecycleConfiguration": (*api).getBucketLifecycle,
	"GetBucketEncryption":             notFoundConfig(notFoundDefault("ServerSideEncryptionConfigurationNotFoundError", "The server side encryption configuration was not found")),
	"GetObjectLockConfiguration":      (*api).getObjectLockConfiguration,
	"PutObjectLockConfiguration":      (*api).putObjectLockConfiguration,
	"GetBucketWebsite":                notFoundConfig(notFoundDefault("NoSuchWebsiteConfiguration", "The specified bucket does not have a website configuration")),
	"GetBucketReplication":            notFoundConfig(notFoundDefault("ReplicationConfigurationNotFoundError", "The replication configuration was not found")),
	"GetBucketOwnershipControls":      (*api).getOwnershipControls,
	"PutBucketOwnershipControls":      (*api).putOwnershipControls,
	"DeleteBucketOwnershipControls":   (*api).deleteOwnershipControls,

	"PutBucketLifecycleConfiguration":    (*api).putBucketLifecycle,
	"DeleteBucketLifecycleConfiguration": (*api).deleteBucketLifecycle,

	"PutBucketPolicy":         (*api).putBucketPolicy,
	"GetBucketPolicy":         (*api).getBucketPolicy,
	"DeleteBucketPolicy":      (*api).deleteBucketPolicy,
	"GetBucketPolicyStatus":   (*api).getBucketPolicyStatus,
	"PutPublicAccessBlock":    (*api).putPublicAccessBlock,
	"GetPublicAccessBlock":    (*api).getPublicAccessBlock,
	"DeletePublicAccessBlock": (*api).deletePublicAccessBlock,

	"PutObject":    (*api).putObject,
	"GetObject":    (*api).getObject,
	"HeadObject":   (*api).getObject,
	"DeleteObject": (*api).deleteObject,
	"CopyObject":   (*api).copyObject,

	"GetObjectAcl":        (*api).getObjectACL,
	"PutObjectAcl":        (*api).putObjectACL,
	"GetObjectTagging":    (*api).getObjectTagging,
	"PutObjectTagging":    (*api).putObjectTagging,
	"DeleteObjectTagging": (*api).deleteObjectTagging,
	"GetObjectAttributes": (*api).getObjectAttributes,
	"GetObjectRetention":  (*api).getObjectRetention,
	"PutObjectRetention":  (*api).putObjectRetention,
	"GetObjectLegalHold":  (*api).getObjectLegalHold,
	"PutObjectLegalHold":  (*api).putObjectLegalHold,

	"CreateMultipartUpload":   (*api).createMultipartUpload,
	"UploadPart":              (*api).uploadPart,
	"UploadPartCopy":          (*api).uploadPartCopy,
	"CompleteMultipartUpload": (*api).completeMultipartUpload,
	"AbortMultipartUpload":    (*api).abortMultipartUpload,
	"ListParts":               (*api).listParts,
	"ListMultipartUploads":    (*api).listMultipartUploads,
}
