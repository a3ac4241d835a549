package store

import (
	"crypto/sha256"
	"errors"
	"fmt"
)

// clientError is a sentinel error (ErrInvalidRequest, ErrInvalidPart, ...)
// that carries S3's own message for the client. s3api answers with the
// sentinel's code and this message; other wrapped text stays internal.
type clientError struct {
	sentinel error
	msg      string
}

func (e *clientError) Error() string { return e.sentinel.Error() + ": " + e.msg }
func (e *clientError) Unwrap() error { return e.sentinel }

// ClientError returns an error wrapping sentinel whose client-facing message
// is msg (S3's text, word for word).
func ClientError(sentinel error, msg string) error {
	return &clientError{sentinel: sentinel, msg: msg}
}

// ClientMessage returns the S3 message carried by err (see ClientError), or
// "" if it carries none.
func ClientMessage(err error) string {
	var ce *clientError
	if errors.As(err, &ce) {
		return ce.msg
	}
	return ""
}

// PayloadSHA256Error is ErrPayloadSHA256Mismatch with both digests, which S3
// reports in its answer (ClientComputedContentSHA256, S3ComputedContentSHA256).
type PayloadSHA256Error struct {
	Client, Computed [sha256.Size]byte
}

func (e *PayloadSHA256Error) Error() string {
	return fmt.Sprintf("%v: the body's SHA-256 %x is not the signed x-amz-content-sha256 %x", ErrPayloadSHA256Mismatch, e.Computed, e.Client)
}

// Unwrap makes the error match ErrPayloadSHA256Mismatch.
func (e *PayloadSHA256Error) Unwrap() error { return ErrPayloadSHA256Mismatch }
