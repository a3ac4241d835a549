package auth

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// S3 error codes returned by this package (Error.Code).
const (
	CodeAccessDenied                      = "AccessDenied"
	CodeSignatureDoesNotMatch             = "SignatureDoesNotMatch"
	CodeInvalidAccessKeyID                = "InvalidAccessKeyId"
	CodeRequestTimeTooSkewed              = "RequestTimeTooSkewed"
	CodeAuthorizationHeaderMalformed      = "AuthorizationHeaderMalformed"
	CodeAuthorizationQueryParametersError = "AuthorizationQueryParametersError"
	CodeXAmzContentSHA256Mismatch         = "XAmzContentSHA256Mismatch"
	CodeIncompleteBody                    = "IncompleteBody"
	CodeInvalidRequest                    = "InvalidRequest"
	CodeInvalidArgument                   = "InvalidArgument"
	CodeMalformedTrailerError             = "MalformedTrailerError"
	CodeInvalidChunkSizeError             = "InvalidChunkSizeError"
	CodeInternalError                     = "InternalError"
	CodeInvalidToken                      = "InvalidToken"
	CodeMissingContentLength              = "MissingContentLength"
)

// HTTPStatus is the HTTP status S3 answers with for e.Code.
func (e *Error) HTTPStatus() int {
	switch e.Code {
	case CodeAccessDenied, CodeSignatureDoesNotMatch, CodeInvalidAccessKeyID,
		CodeRequestTimeTooSkewed:
		return http.StatusForbidden
	case CodeInternalError:
		return http.StatusInternalServerError
	case CodeMissingContentLength:
		return http.StatusLengthRequired
	default:
		return http.StatusBadRequest
	}
}

func newErr(code, msg string) *Error { return &Error{Code: code, Message: msg} }

func malformedHeader(msg string) *Error { return newErr(CodeAuthorizationHeaderMalformed, msg) }

func malformedQuery(msg string) *Error {
	return newErr(CodeAuthorizationQueryParametersError, msg)
}

// Fresh values each time, so that no caller can mutate a shared error.
func errSignature() *Error {
	return newErr(CodeSignatureDoesNotMatch,
		"The request signature we calculated does not match the signature you provided. Check your key and signing method.")
}

// errUnknownKey names the key, as S3 does in <AWSAccessKeyId>.
func errUnknownKey(accessKey string) *Error {
	e := newErr(CodeInvalidAccessKeyID, "The AWS Access Key Id you provided does not exist in our records.")
	e.Details = []Detail{{"AWSAccessKeyId", accessKey}}
	return e
}

// errSkewed is S3's RequestTimeTooSkewed: the request's time as it was
// sent, the server's clock and the allowed skew, so that a client (the AWS
// SDKs do) can correct its clock offset and retry.
func errSkewed(requestTime string, now time.Time, maxSkew time.Duration) *Error {
	e := newErr(CodeRequestTimeTooSkewed, "The difference between the request time and the current time is too large.")
	e.Details = []Detail{
		{"RequestTime", requestTime},
		{"ServerTime", now.UTC().Format(time.RFC3339)},
		{"MaxAllowedSkewMilliseconds", strconv.FormatInt(maxSkew.Milliseconds(), 10)},
	}
	return e
}

// errNotYetValid answers a presigned URL dated beyond the allowed skew, as
// S3 does: AccessDenied naming the URL's date (in Unix milliseconds, as S3
// writes it), its expiry and the server's clock.
func errNotYetValid(date, expires, now time.Time) *Error {
	e := newErr(CodeAccessDenied, "Request is not yet valid")
	e.Details = []Detail{
		{"X-Amz-Date", strconv.FormatInt(date.UnixMilli(), 10)},
		{"Expires", expires.UTC().Format(time.RFC3339)},
		{"ServerTime", now.UTC().Format(time.RFC3339)},
	}
	return e
}

// errInvalidToken answers a session token: s3gate issues none, so any
// token is one it cannot resolve, and S3 refuses such a token rather than
// ignore it.
func errInvalidToken() *Error {
	return newErr(CodeInvalidToken, "The provided token is malformed or otherwise invalid.")
}

// errSHA256Mismatch is XAmzContentSHA256Mismatch with both digests in hex,
// as S3 reports them.
func errSHA256Mismatch(client, computed []byte) *Error {
	e := newErr(CodeXAmzContentSHA256Mismatch, "The provided 'x-amz-content-sha256' header does not match what was computed.")
	e.Details = []Detail{
		{"ClientComputedContentSHA256", hex.EncodeToString(client)},
		{"S3ComputedContentSHA256", hex.EncodeToString(computed)},
	}
	return e
}

// errSignatureDetails is SignatureDoesNotMatch with what S3 tells the
// client so that it can find its signing mistake. Nothing in it is secret:
// the client sent or can compute all of it.
func errSignatureDetails(accessKey, stringToSign, provided, canonicalRequest string) *Error {
	e := errSignature()
	e.Details = []Detail{
		{"AWSAccessKeyId", accessKey},
		{"StringToSign", stringToSign},
		{"SignatureProvided", provided},
	}
	if canonicalRequest != "" {
		e.Details = append(e.Details, Detail{"CanonicalRequest", canonicalRequest})
	}
	return e
}

// errUnsignedHeaders is S3's answer to x-amz-* headers outside the signature.
func errUnsignedHeaders(names []string) *Error {
	e := newErr(CodeAccessDenied, "There were headers present in the request which were not signed")
	e.Details = []Detail{{"HeadersNotSigned", strings.Join(names, ", ")}}
	return e
}

// errDuplicateAuth answers a request carrying an authentication element
// twice: which one counts would be the server's guess.
func errDuplicateAuth(what string) *Error {
	return newErr(CodeInvalidArgument, "Only one "+what+" is allowed in a request")
}

func errMissingLength() *Error {
	return newErr(CodeMissingContentLength, "You must provide the Content-Length HTTP header.")
}

func errExpired() *Error { return newErr(CodeAccessDenied, "Request has expired") }
