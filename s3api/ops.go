package s3api

import (
	"context"
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
	{"encryption", "BucketEncryption", "ObjectEncryption"},
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
	{"renameObject", "", "RenameObject"},
	{"annotation", "", "ObjectAnnotation"},
	{"metadataTable", "BucketMetadataTableConfiguration", ""},
	{"metadataConfiguration", "BucketMetadataConfiguration", ""},
	{"metadataInventoryTable", "BucketMetadataInventoryTableConfiguration", ""},
	{"metadataJournalTable", "BucketMetadataJournalTableConfiguration", ""},
	{"metadataAnnotationTable", "BucketMetadataAnnotationTableConfiguration", ""},
	{"abac", "BucketAbac", ""},
	{"session", "Session", ""},
}

// configLists names the List operation of the subresources that hold
// configurations by id: a GET without an id lists them all.
var configLists = map[string]string{
	"analytics":           "ListBucketAnalyticsConfigurations",
	"metrics":             "ListBucketMetricsConfigurations",
	"inventory":           "ListBucketInventoryConfigurations",
	"intelligent-tiering": "ListBucketIntelligentTieringConfigurations",
}

// opUnsupportedQuery names a request whose query carries a parameter without
// a value that no operation here knows: AWS's way of selecting an API
// (?metadataTable, ?renameObject, ...). It answers NotImplemented instead
// of falling through to the method's plain operation, which would run a
// DeleteBucket or a PutObject the client never asked for.
const opUnsupportedQuery = "UnsupportedSubresource"

// selectors are the query parameters that select an operation: the
// subresources and the few matched by name in bucketOperation and
// objectOperation.
var selectors = func() map[string]bool {
	m := map[string]bool{"location": true, "uploads": true, "delete": true, "versions": true, "uploadId": true}
	for _, s := range subresources {
		m[s.query] = true
	}
	return m
}()

// plainParams are the parameters the plain operations (list, get, head, put,
// copy, delete of a bucket or an object) and query authentication take; an
// unknown parameter with a value is ignored, as AWS ignores it.
var plainParams = map[string]bool{
	"list-type": true, "prefix": true, "delimiter": true, "marker": true, "max-keys": true,
	"encoding-type": true, "continuation-token": true, "fetch-owner": true, "start-after": true,
	"versionId": true, "partNumber": true, "x-id": true,
	"AWSAccessKeyId": true, "Signature": true, "Expires": true,
}

// plainQuery returns "" when q may reach a plain operation. Otherwise it
// names what the request gets instead: opUnknown (MethodNotAllowed) for a
// known selector this method or resource has no operation for (DELETE
// /bucket?versions, PUT /bucket/key?policy), opUnsupportedQuery
// (NotImplemented) for an unknown parameter without a value.
func plainQuery(q url.Values) string {
	unsupported := false
	for name, vals := range q {
		if selectors[name] {
			return opUnknown
		}
		lower := strings.ToLower(name)
		if plainParams[name] || strings.HasPrefix(lower, "x-amz-") || strings.HasPrefix(lower, "response-") {
			continue
		}
		if len(vals) == 0 || vals[0] == "" {
			unsupported = true
		}
	}
	if unsupported {
		return opUnsupportedQuery
	}
	return ""
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
			if list := configLists[s.query]; list != "" && method == http.MethodGet && !q.Has("id") {
				return list
			}
			return verb + s.bucket
		}
	}
	if op := plainQuery(q); op != "" {
		return op
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
			if h.Get("X-Amz-Copy-Source") != "" {
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
	if op := plainQuery(q); op != "" {
		return op
	}
	switch method {
	case http.MethodGet:
		return "GetObject"
	case http.MethodHead:
		return "HeadObject"
	case http.MethodPut:
		if h.Get("X-Amz-Copy-Source") != "" {
			return "CopyObject"
		}
		return "PutObject"
	case http.MethodDelete:
		return "DeleteObject"
	default:
		return "PostObject"
	}
}

// Route is what the router resolves of a request, once: its operation, the
// bucket and key it addresses (unescaped) and its query. Err is non-nil for
// paths the router rejects (InvalidURI).
type Route struct {
	Op, Bucket, Key string
	Query           url.Values
	Err             error
	domain          string // the virtual-host base it was resolved for
}

type routeKey struct{}

// ResolveRoute resolves r for a handler configured with domain (the
// virtual-host base, "" for path style only).
func ResolveRoute(r *http.Request, domain string) *Route {
	rt := &Route{Query: r.URL.Query(), domain: normalDomain(domain)}
	var named bool
	rt.Bucket, rt.Key, named, rt.Err = splitPath(r, rt.domain)
	rt.Op = opUnknown
	if named {
		rt.Op = Operation(r.Method, rt.Bucket, rt.Key, rt.Query, r.Header)
	}
	return rt
}

// WithRoute resolves r and carries the route on the returned request, so
// that middleware in front of New's handler (the request metrics) and the
// handler itself parse the path and query once (RouteOf).
func WithRoute(r *http.Request, domain string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), routeKey{}, ResolveRoute(r, domain)))
}

// RouteOf returns the route WithRoute carried on r for domain, or resolves r.
func RouteOf(r *http.Request, domain string) *Route {
	domain = normalDomain(domain)
	if rt, ok := r.Context().Value(routeKey{}).(*Route); ok && rt.domain == domain {
		return rt
	}
	return ResolveRoute(r, domain)
}

func normalDomain(domain string) string { return strings.ToLower(strings.Trim(domain, ".")) }

// splitPath returns the bucket and key r addresses: the virtual host's
// bucket and the whole path as the key, or the path's first segment and the
// rest (path style), each unescaped once. A path style path with an empty
// bucket segment ("//x") or none at all is refused unnamed (the operation is
// Unknown); a bad escape is refused named (the operation is named for the
// bucket, as the metrics always named it).
func splitPath(r *http.Request, domain string) (bucket, key string, named bool, err error) {
	path := r.URL.EscapedPath()
	if b := vhostBucket(r.Host, domain); b != "" {
		k, err := url.PathUnescape(strings.TrimPrefix(path, "/"))
		if err != nil {
			return b, "", true, errInvalidURI
		}
		return b, k, true, nil
	}
	if !strings.HasPrefix(path, "/") {
		return "", "", false, errInvalidURI
	}
	rawBucket, rawKey, _ := strings.Cut(path[1:], "/")
	if rawBucket == "" && path != "/" {
		return "", "", false, errInvalidURI
	}
	b, err1 := url.PathUnescape(rawBucket)
	k, err2 := url.PathUnescape(rawKey)
	if err1 != nil || err2 != nil {
		return b, "", true, errInvalidURI
	}
	return b, k, true, nil
}

// ResolveOperation names the operation of r and the bucket and key it
// addresses, as New's handler resolves them for domain (the virtual-host
// base, "" for path style only). ok is false for paths it rejects
// (InvalidURI).
func ResolveOperation(r *http.Request, domain string) (op, bucket, key string, ok bool) {
	rt := ResolveRoute(r, domain)
	return rt.Op, rt.Bucket, rt.Key, rt.Err == nil
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

	// Configurations s3gate does not keep: AWS's answers for a bucket with
	// none set (unconfigured.go); their PUTs stay NotImplemented.
	"GetBucketLogging":                           emptyConfig(newEmptyDoc("BucketLoggingStatus")),
	"GetBucketAccelerateConfiguration":           emptyConfig(newEmptyDoc("AccelerateConfiguration")),
	"GetBucketNotificationConfiguration":         emptyConfig(newEmptyDoc("NotificationConfiguration")),
	"GetBucketRequestPayment":                    emptyConfig(requestPayment{NS: s3NS, Payer: "BucketOwner"}),
	"ListBucketAnalyticsConfigurations":          emptyConfig(newEmptyConfigList("ListBucketAnalyticsConfigurationResult")),
	"ListBucketMetricsConfigurations":            emptyConfig(newEmptyConfigList("ListMetricsConfigurationsResult")),
	"ListBucketInventoryConfigurations":          emptyConfig(newEmptyConfigList("ListInventoryConfigurationsResult")),
	"ListBucketIntelligentTieringConfigurations": emptyConfig(newEmptyConfigList("ListBucketIntelligentTieringConfigurationsOutput")),
	"GetBucketAnalyticsConfiguration":            notFoundConfig(errNoSuchConfiguration),
	"GetBucketMetricsConfiguration":              notFoundConfig(errNoSuchConfiguration),
	"GetBucketInventoryConfiguration":            notFoundConfig(errNoSuchConfiguration),
	"GetBucketIntelligentTieringConfiguration":   notFoundConfig(errNoSuchConfiguration),
	"DeleteBucketWebsite":                        deleteUnconfigured,
	"DeleteBucketReplication":                    deleteUnconfigured,
	"DeleteBucketEncryption":                     deleteUnconfigured,

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
