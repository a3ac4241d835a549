package auth

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // SigV2 is defined on HMAC-SHA1
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"maps"
	"net/http/httptest"
	"testing"
)

// TestVerifyPost checks POST form signatures against an independent
// computation of SigV4's signing key (and SigV2's HMAC-SHA1).
func TestVerifyPost(t *testing.T) {
	const ak, secret, region = "AKPOST", "post-secret", "us-east-1"
	v := &Verifier{Region: region, Creds: StaticCredentials{ak: secret}}
	policy := base64.StdEncoding.EncodeToString([]byte(`{"expiration":"2030-01-01T00:00:00Z","conditions":[]}`))
	mac := func(h func() hash.Hash, k []byte, s string) []byte {
		m := hmac.New(h, k)
		m.Write([]byte(s))
		return m.Sum(nil)
	}
	key := []byte("AWS4" + secret)
	for _, s := range []string{"20250102", region, "s3", "aws4_request"} {
		key = mac(sha256.New, key, s)
	}
	v4 := map[string]string{
		"policy": policy, "x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-credential": ak + "/20250102/" + region + "/s3/aws4_request",
		"x-amz-date": "20250102T030405Z", "x-amz-signature": hex.EncodeToString(mac(sha256.New, key, policy)),
	}
	v2 := map[string]string{"policy": policy, "awsaccesskeyid": ak,
		"signature": base64.StdEncoding.EncodeToString(mac(sha1.New, []byte(secret), policy))}
	with := func(m map[string]string, k, val string) map[string]string {
		c := maps.Clone(m)
		if val == "" {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	tests := []struct {
		name   string
		fields map[string]string
		want   string // the access key; "" for anonymous
		code   string
	}{
		{"sigv4", v4, ak, ""},
		{"sigv2", v2, ak, ""},
		{"anonymous", map[string]string{"key": "k"}, "", ""},
		{"policy without signature", map[string]string{"policy": policy}, "", CodeInvalidArgument},
		{"sigv4 wrong signature", with(v4, "x-amz-signature", hex.EncodeToString(make([]byte, 32))), "", CodeSignatureDoesNotMatch},
		{"sigv4 other policy", with(v4, "policy", policy+"AA=="), "", CodeSignatureDoesNotMatch},
		{"sigv4 without policy", with(v4, "policy", ""), "", CodeInvalidArgument},
		{"sigv4 without date", with(v4, "x-amz-date", ""), "", CodeInvalidArgument},
		{"sigv4 date not the scope's", with(v4, "x-amz-date", "20250103T030405Z"), "", CodeInvalidArgument},
		{"sigv4 other region", with(v4, "x-amz-credential", ak+"/20250102/eu-west-1/s3/aws4_request"), "", CodeInvalidArgument},
		{"sigv4 other algorithm", with(v4, "x-amz-algorithm", "AWS4-HMAC-SHA512"), "", CodeInvalidArgument},
		{"sigv4 unknown key", with(v4, "x-amz-credential", "AKOTHER/20250102/"+region+"/s3/aws4_request"), "", CodeInvalidAccessKeyID},
		{"sigv2 wrong signature", with(v2, "signature", "AAAA"), "", CodeSignatureDoesNotMatch},
		{"sigv2 without key", with(v2, "awsaccesskeyid", ""), "", CodeInvalidArgument},
		{"both", with(v4, "signature", "x"), "", CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.VerifyPost(httptest.NewRequest("POST", "/b", nil), tt.fields)
			var ae *Error
			switch {
			case tt.code == "" && (err != nil || got != tt.want):
				t.Fatalf("VerifyPost = %q, %v; want %q", got, err, tt.want)
			case tt.code != "" && (!errors.As(err, &ae) || ae.Code != tt.code || got != ""):
				t.Fatalf("VerifyPost = %q, %v; want %s", got, err, tt.code)
			}
		})
	}
}
