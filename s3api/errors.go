package s3api

import (
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/s3gate/s3gate/auth"
	"github.com/s3gate/s3gate/store"
)

// apiError is an S3 error answer: code, HTTP status and client-facing message.
// Every error a handler returns is turned into one of these by toAPIError; this
// file is the only place that decides codes and statuses.
type apiError struct {
	Code    string
	Status  int
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// withMessage returns a copy of a predefined error with another message.
func (e *apiError) withMessage(msg string) *apiError {
	c := *e
	c.Message = msg
	return &c
}

// Errors that s3api raises itself (request parsing, unsupported features).
var (
	errAccessDenied             = &apiError{"AccessDenied", http.StatusForbidden, "Access Denied"}
	errMalformedXML             = &apiError{"MalformedXML", http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema"}
	errMaxMessageLength         = &apiError{"MaxMessageLengthExceeded", http.StatusBadRequest, "Your request was too big."}
	errInvalidDigest            = &apiError{"InvalidDigest", http.StatusBadRequest, "The Content-MD5 you specified is not valid."}
	errBadDigest                = &apiError{"BadDigest", http.StatusBadRequest, "The Content-MD5 or checksum value that you specified did not match what the server received."}
	errMissingContentMD5        = &apiError{"InvalidRequest", http.StatusBadRequest, "Missing required header for this request: Content-MD5"}
	errInvalidRequest           = &apiError{"InvalidRequest", http.StatusBadRequest, "Invalid Request"}
	errInvalidArgument          = &apiError{"InvalidArgument", http.StatusBadRequest, "Invalid Argument"}
	errInvalidPartNumber        = &apiError{"InvalidArgument", http.StatusBadRequest, "Part number must be an integer between 1 and 10000, inclusive"}
	errNotImplemented           = &apiError{"NotImplemented", http.StatusNotImplemented, "A header or query you provided implies functionality that is not implemented."}
	errMethodNotAllowed         = &apiError{"MethodNotAllowed", http.StatusMethodNotAllowed, "The specified method is not allowed against this resource."}
	errInvalidURI               = &apiError{"InvalidURI", http.StatusBadRequest, "Couldn't parse the specified URI."}
	errInvalidLocation          = &apiError{"InvalidLocationConstraint", http.StatusBadRequest, "The specified location-constraint is not valid"}
	errIllegalLocation          = &apiError{"IllegalLocationConstraintException", http.StatusBadRequest, "The location constraint is incompatible for the region specific endpoint this request was sent to."}
	errMetadataTooLarge         = &apiError{"MetadataTooLarge", http.StatusBadRequest, "Your metadata headers exceed the maximum allowed metadata size."}
	errInvalidCopySource        = &apiError{"InvalidArgument", http.StatusBadRequest, "Copy Source must mention the source bucket and key: sourcebucket/sourcekey"}
	errInvalidVersionID         = &apiError{"InvalidArgument", http.StatusBadRequest, "Invalid version id specified"}
	errNoSuchVersion            = &apiError{"NoSuchVersion", http.StatusNotFound, "The specified version does not exist."}
	errInvalidMetadataDirective = &apiError{"InvalidArgument", http.StatusBadRequest, "Unknown metadata directive."}
	errSelfCopy                 = &apiError{"InvalidRequest", http.StatusBadRequest, "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."}
	errInvalidCopyRange         = &apiError{"InvalidArgument", http.StatusBadRequest, "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy"}
	errRangeWithPart            = &apiError{"InvalidRequest", http.StatusBadRequest, "Cannot specify both Range header and partNumber query parameter"}
	errInvalidMaxKeys           = &apiError{"InvalidArgument", http.StatusBadRequest, "Provided max-keys not an integer or within integer range"}
	errInvalidEncodingType      = &apiError{"InvalidArgument", http.StatusBadRequest, "Invalid Encoding Method specified in Request"}
	errInvalidToken             = &apiError{"InvalidArgument", http.StatusBadRequest, "The continuation token provided is incorrect"}
	errMultipleChecksums        = &apiError{"InvalidRequest", http.StatusBadRequest, "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed."}
	errUnsupportedChecksumAlg   = &apiError{"InvalidRequest", http.StatusBadRequest, "Checksum algorithm provided is unsupported. Please try again with any of the valid types: [CRC32, CRC32C, CRC64NVME, SHA1, SHA256, MD5, SHA512, XXHASH64, XXHASH3, XXHASH128]"}
	errMalformedACL             = &apiError{"MalformedACLError", http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema"}
	errMissingSecurityHeader    = &apiError{"MissingSecurityHeader", http.StatusBadRequest, "Your request was missing a required header"}
	errInvalidAttributeName     = &apiError{"InvalidArgument", http.StatusBadRequest, "Invalid attribute name specified."}
	errInternal                 = &apiError{"InternalError", http.StatusInternalServerError, "We encountered an internal error. Please try again."}
	errServiceUnavailable       = &apiError{"ServiceUnavailable", http.StatusServiceUnavailable, "Service is unable to handle request."}
	errMissingContentLength     = &apiError{"MissingContentLength", http.StatusLengthRequired, "You must provide the Content-Length HTTP header."}
	errPartNotSatisfiable       = &apiError{"InvalidPartNumber", http.StatusRequestedRangeNotSatisfiable, "The requested partnumber is not satisfiable"}
	errInvalidMPObjectSize      = &apiError{"InvalidRequest", http.StatusBadRequest, "Value for x-amz-mp-object-size header is invalid."}
	errSDKChecksumAlone         = &apiError{"InvalidRequest", http.StatusBadRequest, "x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found."}
	errHeaderSectionTooLarge    = &apiError{"RequestHeaderSectionTooLarge", http.StatusBadRequest, "Your request header section exceeds the maximum allowed size."}
	errInvalidRange             = &apiError{"InvalidRange", http.StatusRequestedRangeNotSatisfiable, "The requested range is not satisfiable"}
	errAnonymousOverrides       = &apiError{"InvalidRequest", http.StatusBadRequest, "Request specific response headers cannot be used for anonymous GET requests."}
	// errReadOnly answers writes on a read replica (ADR 013): 403, which
	// clients do not retry, as AWS answers a write that a policy denies.
	errReadOnly       = &apiError{"AccessDenied", http.StatusForbidden, "This gateway is a read-only replica: it serves GET, HEAD and LIST only; send writes to the primary's gateway."}
	errRequestTimeout = &apiError{"RequestTimeout", http.StatusBadRequest, "Your socket connection to the server was not read from or written to within the timeout period. Idle connections will be closed."}
)

// Errors of bucket policies and Block Public Access (bucketpolicy.go).
var (
	errMalformedPolicy         = &apiError{"MalformedPolicy", http.StatusBadRequest, "Policies must be valid JSON and the first byte must be '{'"}
	errNoSuchBucketPolicy      = notFoundDefault("NoSuchBucketPolicy", "The bucket policy does not exist")
	errNoSuchPublicAccessBlock = notFoundDefault("NoSuchPublicAccessBlockConfiguration", "The public access block configuration was not found")
)

// Errors of the exact-behaviour refusals (refusals.go).
var (
	errInvalidStorageClass = &apiError{"InvalidStorageClass", http.StatusBadRequest, "The storage class you specified is not valid"}
)

// The Get by id of a configuration s3gate does not keep (unconfigured.go).
var errNoSuchConfiguration = notFoundDefault("NoSuchConfiguration", "The specified configuration does not exist.")

// notFoundDefault builds the "no such configuration" answers that clients
// expect for bucket sub-resources that are never configured here.
func notFoundDefault(code, msg string) *apiError {
	return &apiError{code, http.StatusNotFound, msg}
}

// storeErrors maps the store's sentinel errors. Messages are AWS's, never the
// wrapped internal text, so nothing about the engine leaks to clients.
var storeErrors = []struct {
	err error
	api *apiError
}{
	{store.ErrNoSuchBucket, &apiError{"NoSuchBucket", http.StatusNotFound, "The specified bucket does not exist"}},
	{store.ErrBucketExists, &apiError{"BucketAlreadyOwnedByYou", http.StatusConflict, "Your previous request to create the named bucket succeeded and you already own it."}},
	{store.ErrBucketNotEmpty, &apiError{"BucketNotEmpty", http.StatusConflict, "The bucket you tried to delete is not empty"}},
	{store.ErrInvalidBucketName, &apiError{"InvalidBucketName", http.StatusBadRequest, "The specified bucket is not valid."}},
	{store.ErrNoSuchKey, &apiError{"NoSuchKey", http.StatusNotFound, "The specified key does not exist."}},
	{store.ErrKeyTooLong, &apiError{"KeyTooLongError", http.StatusBadRequest, "Your key is too long"}},
	{store.ErrInvalidKey, &apiError{"InvalidArgument", http.StatusBadRequest, "Object key is not valid: it must be valid UTF-8 without characters that XML cannot carry."}},
	{store.ErrNoSuchUpload, &apiError{"NoSuchUpload", http.StatusNotFound, "The specified multipart upload does not exist. The upload ID might be invalid, or the multipart upload might have been aborted or completed."}},
	{store.ErrInvalidPartOrder, &apiError{"InvalidPartOrder", http.StatusBadRequest, "The list of parts was not in ascending order. The parts list must be specified in order by part number."}},
	{store.ErrInvalidPart, &apiError{"InvalidPart", http.StatusBadRequest, "One or more of the specified parts could not be found. The part might not have been uploaded, or the specified entity tag might not have matched the part's entity tag."}},
	{store.ErrEntityTooSmall, &apiError{"EntityTooSmall", http.StatusBadRequest, "Your proposed upload is smaller than the minimum allowed object size."}},
	{store.ErrEntityTooLarge, &apiError{"EntityTooLarge", http.StatusBadRequest, "Your proposed upload exceeds the maximum allowed object size."}},
	{store.ErrBadDigest, errBadDigest},
	{store.ErrPayloadSHA256Mismatch, &apiError{"XAmzContentSHA256Mismatch", http.StatusBadRequest, "The provided 'x-amz-content-sha256' header does not match what was computed."}},
	{store.ErrIncompleteBody, &apiError{"IncompleteBody", http.StatusBadRequest, "You did not provide the number of bytes specified by the Content-Length HTTP header."}},
	{store.ErrPreconditionFailed, &apiError{"PreconditionFailed", http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold"}},
	{store.ErrNotModified, &apiError{"NotModified", http.StatusNotModified, "Not Modified"}},
	{store.ErrInvalidRange, errInvalidRange},
	{store.ErrInvalidArgument, errInvalidArgument},
	{store.ErrInvalidRequest, errInvalidRequest},
	{store.ErrSlowDown, &apiError{"SlowDown", http.StatusServiceUnavailable, "Please reduce your request rate."}},
	{store.ErrUnavailable, errServiceUnavailable},
	{store.ErrConditionalConflict, &apiError{"ConditionalRequestConflict", http.StatusConflict, "A conflicting operation occurred. If using PutObject you can retry the request. If using multipart upload you should initiate another CreateMultipartUpload request and re-upload each part."}},
	{store.ErrNoBucketConfigs, errNotImplemented.withMessage("This metadata engine keeps no bucket configuration.")},
	{store.ErrObjectLocked, errAccessDenied},
	{store.ErrRetentionInPast, errLockDate},
	{store.ErrNoSuchVersion, errNoSuchVersion},
	{store.ErrDeleteMarker, errMethodNotAllowed},
	{store.ErrInvalidBucketState, &apiError{"InvalidBucketState", http.StatusConflict, "An Object Lock configuration is present on this bucket, so the versioning state cannot be changed."}},
	{store.ErrNotImplemented, errNotImplemented},
	// A body that ends before its declared length (client went away mid-upload).
	{io.ErrUnexpectedEOF, &apiError{"IncompleteBody", http.StatusBadRequest, "You did not provide the number of bytes specified by the Content-Length HTTP header."}},
}

// authStatus is the HTTP status of each auth.Error code; unknown codes are 403.
var authStatus = map[string]int{
	"AccessDenied":                      http.StatusForbidden,
	"SignatureDoesNotMatch":             http.StatusForbidden,
	"InvalidAccessKeyId":                http.StatusForbidden,
	"RequestTimeTooSkewed":              http.StatusForbidden,
	"XAmzContentSHA256Mismatch":         http.StatusBadRequest,
	"AuthorizationHeaderMalformed":      http.StatusBadRequest,
	"AuthorizationQueryParametersError": http.StatusBadRequest,
	"IncompleteBody":                    http.StatusBadRequest,
	"MissingSecurityHeader":             http.StatusBadRequest,
	"InvalidRequest":                    http.StatusBadRequest,
	"InvalidArgument":                   http.StatusBadRequest,
	"InvalidDigest":                     http.StatusBadRequest,
	"BadDigest":                         http.StatusBadRequest,
	"InvalidChunkSizeError":             http.StatusBadRequest,
	"MalformedTrailerError":             http.StatusBadRequest,
	"EntityTooLarge":                    http.StatusBadRequest,
	"ExpiredToken":                      http.StatusBadRequest,
	"InvalidToken":                      http.StatusBadRequest,
	"MissingContentLength":              http.StatusLengthRequired,
	"NotImplemented":                    http.StatusNotImplemented,
	"SlowDown":                          http.StatusServiceUnavailable,
}

// toAPIError resolves any error to the S3 answer. internal reports an
// unexpected error (500) whose cause must be logged.
func toAPIError(err error) (e *apiError, internal bool) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae, false
	}
	var au *auth.Error
	if errors.As(err, &au) {
		if au.Code == auth.CodeInternalError {
			// The credential lookup failed (managed keys live in the store):
			// answer as the store's failure would, and log the cause.
			if errors.Is(au.Err, store.ErrUnavailable) {
				return errServiceUnavailable, true
			}
			return errInternal, true
		}
		status, ok := authStatus[au.Code]
		if !ok {
			status = http.StatusForbidden
		}
		return &apiError{Code: au.Code, Status: status, Message: au.Message}, false
	}
	for _, m := range storeErrors {
		if errors.Is(err, m.err) {
			if msg := store.ClientMessage(err); msg != "" {
				return m.api.withMessage(msg), false
			}
			return m.api, false
		}
	}
	return errInternal, true
}

// errorBody is the XML body of an error answer.
type errorBody struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource"`
	RequestID string   `xml:"RequestId"`
	// Details are the extra elements of some auth errors (AWSAccessKeyId,
	// HeadersNotSigned, StringToSign, ...), each named by its XMLName.
	Details []errorDetail
}

// errorDetail is one extra element of an error body.
type errorDetail struct {
	XMLName xml.Name
	Value   string `xml:",chardata"`
}

// authDetails are the extra elements an auth error carries, nil for others.
func authDetails(err error) []errorDetail {
	var au *auth.Error
	if !errors.As(err, &au) || au.Code == auth.CodeInternalError {
		return nil
	}
	var out []errorDetail
	for _, d := range au.Details {
		out = append(out, errorDetail{XMLName: xml.Name{Local: d.Name}, Value: d.Value})
	}
	return out
}

// detailedError is an S3 error whose body carries extra elements (the
// CORS refusals' Method and ResourceType, NoSuchCORSConfiguration's
// BucketName).
type detailedError struct {
	*apiError
	details []errorDetail
}

func (d *detailedError) Unwrap() error { return d.apiError }

// withDetails adds elements, given as name, value pairs, to e's body.
func withDetails(e *apiError, nameValues ...string) error {
	return &detailedError{apiError: e, details: details(nameValues...)}
}

// details builds error elements from name, value pairs.
func details(nameValues ...string) []errorDetail {
	var out []errorDetail
	for i := 0; i+1 < len(nameValues); i += 2 {
		out = append(out, errorDetail{XMLName: xml.Name{Local: nameValues[i]}, Value: nameValues[i+1]})
	}
	return out
}

// apiDetails are the extra elements of a detailedError, or of a store
// error that carries some (the digests of a payload mismatch); nil for others.
func apiDetails(err error) []errorDetail {
	var d *detailedError
	if errors.As(err, &d) {
		return d.details
	}
	var pe *store.PayloadSHA256Error
	if errors.As(err, &pe) {
		return details("ClientComputedContentSHA256", hex.EncodeToString(pe.Client[:]),
			"S3ComputedContentSHA256", hex.EncodeToString(pe.Computed[:]))
	}
	return nil
}

// writeError answers err. HEAD answers and 304 carry no body.
func (a *api) writeError(rq *request, err error) {
	if rq.idle.TimedOut() {
		// The idle body read decides the answer, whatever layer (auth's
		// chunk decoder, the store, a cancelled context) reported it.
		err = fmt.Errorf("%w: %w", errRequestTimeout, err)
	}
	e, internal := toAPIError(err)
	rq.errCode = e.Code
	if internal {
		a.log.LogAttrs(rq.r.Context(), slog.LevelError, "s3 internal error",
			slog.String("request_id", rq.id), slog.String("op", rq.op),
			slog.String("bucket", rq.bucket), slog.String("key", rq.key),
			slog.String("error", err.Error()))
	}
	if rq.w.status != 0 {
		// Headers already went out: the only honest signal left is to cut the
		// connection so the client cannot mistake the answer for complete.
		panic(http.ErrAbortHandler)
	}
	h := rq.w.Header()
	if rq.r.Method == http.MethodHead || e.Status == http.StatusNotModified {
		rq.w.WriteHeader(e.Status)
		return
	}
	body, mErr := xml.Marshal(errorBody{Code: e.Code, Message: e.Message, Resource: rq.r.URL.Path, RequestID: rq.id,
		Details: append(authDetails(err), apiDetails(err)...)})
	if mErr != nil {
		// Cannot happen with string fields; answer without a body rather than lie.
		rq.w.WriteHeader(e.Status)
		return
	}
	h.Set("Content-Type", "application/xml")
	h.Del("Content-Length")
	if rq.bodyLeftUnread() && closeable(rq.r) {
		// An error answered before the body was read (a database outage, a
		// refused header): net/http does not always close such a connection
		// (seen after a 503 on a 2 MiB PUT), and the next request on it
		// would be parsed from the rest of this body.
		h.Set("Connection", "close")
	}
	rq.w.WriteHeader(e.Status)
	_, _ = rq.w.Write([]byte(xml.Header))
	_, _ = rq.w.Write(body) // the client may be gone; nothing more to do
}

// OverloadAnswer is a whole HTTP/1.1 503 SlowDown answer (S3 XML body,
// Connection: close) for a connection refused before any request was read,
// such as one beyond the server's connection cap.
func OverloadAnswer() []byte {
	e, _ := toAPIError(store.ErrSlowDown)
	body, _ := xml.Marshal(errorBody{Code: e.Code, Message: e.Message, Resource: "/"}) // string fields: cannot fail
	return []byte(fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\nConnection: close\r\nRetry-After: 1\r\nServer: s3gate\r\n\r\n%s%s",
		e.Status, http.StatusText(e.Status), len(xml.Header)+len(body), xml.Header, body))
}

// HeaderTooLargeAnswer is S3's whole HTTP/1.1 answer to a request whose
// header section exceeds max bytes: 400 RequestHeaderSectionTooLarge.
func HeaderTooLargeAnswer(max int) []byte {
	body, _ := xml.Marshal(struct { // string and int fields: cannot fail
		XMLName        xml.Name `xml:"Error"`
		Code           string   `xml:"Code"`
		Message        string   `xml:"Message"`
		MaxSizeAllowed int      `xml:"MaxSizeAllowed"`
	}{Code: errHeaderSectionTooLarge.Code, Message: errHeaderSectionTooLarge.Message, MaxSizeAllowed: max})
	return []byte(fmt.Sprintf("HTTP/1.1 400 Bad Request\r\nContent-Type: application/xml\r\nContent-Length: %d\r\nConnection: close\r\nServer: s3gate\r\n\r\n%s%s",
		len(xml.Header)+len(body), xml.Header, body))
}
