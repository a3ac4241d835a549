// Package auth verifies S3 request signatures on the server side: SigV4 in the
// Authorization header, presigned query SigV4, and aws-chunked bodies (signed
// chunks, unsigned and signed trailers). It never logs secrets.
package auth

import (
	"context"
	"io"
)

// CredentialStore resolves an access key to its secret.
type CredentialStore interface {
	// Lookup returns the secret for accessKey; ok=false if the key is unknown.
	Lookup(ctx context.Context, accessKey string) (secret string, ok bool, err error)
}

// StaticCredentials is a CredentialStore with fixed keys (the root key pair).
type StaticCredentials map[string]string

// Lookup implements CredentialStore.
func (s StaticCredentials) Lookup(_ context.Context, accessKey string) (string, bool, error) {
	sec, ok := s[accessKey]
	return sec, ok, nil
}

// Result is a verified request.
type Result struct {
	AccessKey string
	Anonymous bool
	// Body is the request body to read instead of r.Body: it is decoded from
	// aws-chunked where needed and verifies, as it is read, the signed payload
	// hash or every chunk signature and the trailer. A mismatch surfaces as an
	// *Error from Read, never as io.EOF.
	Body io.ReadCloser
	// DecodedLength is the content length of the decoded body, -1 if unknown.
	DecodedLength int64
	// Trailer, non-nil when the client announced a trailing checksum
	// (x-amz-trailer), returns it once Body has returned io.EOF.
	Trailer func() (alg, value string, err error)
}

// Error is an authentication failure with its S3 error code (for example
// SignatureDoesNotMatch, InvalidAccessKeyId, AccessDenied, RequestTimeTooSkewed,
// XAmzContentSHA256Mismatch, AuthorizationHeaderMalformed,
// AuthorizationQueryParametersError, IncompleteBody). s3api maps the code to its
// HTTP status.
type Error struct {
	Code    string
	Message string
	// Err is the underlying cause for InternalError (for example a failed
	// credential lookup); nil for client errors. It never carries a secret.
	Err error
	// Details are the extra elements S3 puts in the error body for this code
	// (AWSAccessKeyId, HeadersNotSigned, StringToSign, ...), in order.
	Details []Detail
}

// Detail is one extra element of an S3 error body: <Name>Value</Name>.
type Detail struct {
	Name, Value string
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Code + ": " + e.Message + ": " + e.Err.Error()
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }
