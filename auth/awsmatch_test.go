package auth

import (
	"context"
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestAWSErrorDetails checks the codes, messages and extra elements that S3
// puts in its answers to these authentication failures.
func TestAWSErrorDetails(t *testing.T) {
	presign := func(t *testing.T) (url.Values, func(url.Values) error) {
		p, err := presignClient().PresignGetObject(context.Background(),
			&s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("k")}, s3.WithPresignExpires(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		req, at := presignedRequest(t, p, "")
		q := req.URL.Query()
		return q, func(q url.Values) error {
			req.URL.RawQuery = q.Encode()
			_, err := newVerifier(at).Verify(req)
			return err
		}
	}
	tests := []struct {
		name    string
		run     func(t *testing.T) error
		code    string
		msg     string
		details map[string]string
	}{
		{name: "header: wrong region names the expected one",
			run: func(t *testing.T) error {
				req := signHeader(t, headerCase{method: "GET", key: "k"}, testSK, t0)
				req.Header.Set("Authorization", strings.Replace(req.Header.Get("Authorization"), "/"+testRegion+"/", "/eu-west-1/", 1))
				_, err := newVerifier(t0).Verify(overTheWire(t, req))
				return err
			},
			code: CodeAuthorizationHeaderMalformed, msg: "The authorization header is malformed; the region 'eu-west-1' is wrong; expecting '" + testRegion + "'",
			details: map[string]string{"Region": testRegion}},
		{name: "presigned: wrong region names the expected one",
			run: func(t *testing.T) error {
				q, verify := presign(t)
				q.Set("X-Amz-Credential", strings.Replace(q.Get("X-Amz-Credential"), testRegion, "eu-west-1", 1))
				return verify(q)
			},
			code: CodeAuthorizationQueryParametersError, msg: "Error parsing the X-Amz-Credential parameter; the region 'eu-west-1' is wrong; expecting '" + testRegion + "'",
			details: map[string]string{"Region": testRegion}},
		{name: "header: skewed request tells both times and the limit",
			run: func(t *testing.T) error {
				_, err := newVerifier(t0.Add(20 * time.Minute)).Verify(overTheWire(t, signHeader(t, headerCase{method: "GET", key: "k"}, testSK, t0)))
				return err
			},
			code: CodeRequestTimeTooSkewed, msg: "The difference between the request time and the current time is too large.",
			details: map[string]string{"RequestTime": t0.UTC().Format(iso8601Format),
				"ServerTime": t0.Add(20 * time.Minute).UTC().Format(time.RFC3339), "MaxAllowedSkewMilliseconds": "900000"}},
		{name: "presigned: dated in the future is not yet valid",
			run: func(t *testing.T) error {
				p, err := presignClient().PresignGetObject(context.Background(),
					&s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("k")}, s3.WithPresignExpires(time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				req, at := presignedRequest(t, p, "")
				_, err = newVerifier(at.Add(-20 * time.Minute)).Verify(req)
				if v, _ := detail(err, "X-Amz-Date"); v != strconv.FormatInt(at.UnixMilli(), 10) {
					t.Errorf("X-Amz-Date = %q, want %d", v, at.UnixMilli())
				}
				if v, _ := detail(err, "Expires"); v != at.Add(time.Hour).UTC().Format(time.RFC3339) {
					t.Errorf("Expires = %q", v)
				}
				if v, _ := detail(err, "ServerTime"); v != at.Add(-20*time.Minute).UTC().Format(time.RFC3339) {
					t.Errorf("ServerTime = %q", v)
				}
				return err
			},
			code: CodeAccessDenied, msg: "Request is not yet valid"},
		{name: "header: a session token is refused",
			run: func(t *testing.T) error {
				req := signHeader(t, headerCase{method: "GET", key: "k", headers: map[string]string{"X-Amz-Security-Token": "FwoGZXIvYXdz"}}, testSK, t0)
				_, err := newVerifier(t0).Verify(overTheWire(t, req))
				return err
			},
			code: CodeInvalidToken, msg: "The provided token is malformed or otherwise invalid."},
		{name: "presigned: a session token is refused",
			run: func(t *testing.T) error {
				q, verify := presign(t)
				q.Set("X-Amz-Security-Token", "FwoGZXIvYXdz")
				return verify(q)
			},
			code: CodeInvalidToken, msg: "The provided token is malformed or otherwise invalid."},
		{name: "payload mismatch names both digests",
			run: func(t *testing.T) error {
				c := headerCase{method: "PUT", key: "obj", body: []byte("the real body"), payload: sha256Hex256([]byte("another body"))}
				res, err := newVerifier(t0).Verify(overTheWire(t, signHeader(t, c, testSK, t0)))
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				_, err = io.ReadAll(res.Body)
				return err
			},
			code: CodeXAmzContentSHA256Mismatch, msg: "The provided 'x-amz-content-sha256' header does not match what was computed.",
			details: map[string]string{"ClientComputedContentSHA256": sha256Hex256([]byte("another body")),
				"S3ComputedContentSHA256": sha256Hex256([]byte("the real body"))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run(t)
			var ae *Error
			if errCode(err) != tc.code || !errors.As(err, &ae) || ae.Message != tc.msg {
				t.Fatalf("got %v, want %s: %s", err, tc.code, tc.msg)
			}
			for name, want := range tc.details {
				if got, ok := detail(err, name); !ok || got != want {
					t.Errorf("<%s> = %q (present %v), want %q", name, got, ok, want)
				}
			}
		})
	}
}
