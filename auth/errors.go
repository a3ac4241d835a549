package auth

import "net/http"

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
)

// HTTPStatus is the HTTP status S3 answers with for e.Code.
func (e *Error) HTTPStatus() int {
	switch e.Code {
	case CodeAccessDenied, CodeSignatureDoesNotMatch, CodeInvalidAccessKeyID,
		CodeRequestTimeTooSkewed:
		return http.StatusForbidden
	case CodeInternalError:
		return http.StatusInternalServerError
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

func errUnknownKey() *Error {
	return newErr(CodeInvalidAccessKeyID, "The AWS Access Key Id you provided does not exist in our records.")
}

func errSkewed() *Error {
	return newErr(CodeRequestTimeTooSkewed, "The difference between the request time and the server's time is too large.")
}

func errExpired() *Error { return newErr(CodeAccessDenied, "Request has expired") }
