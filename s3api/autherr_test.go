package s3api

import (
	"encoding/xml"
	"fmt"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/auth"
)

// TestAuthErrorDetails: the extra elements of an auth error reach the body
// (escaped), other errors carry none, and an internal error never shows its.
func TestAuthErrorDetails(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want []string // substrings of the body
		not  []string
	}{
		{name: "access key id", err: &auth.Error{Code: "InvalidAccessKeyId", Message: "m",
			Details: []auth.Detail{{Name: "AWSAccessKeyId", Value: "AKID<&>"}}},
			want: []string{"<AWSAccessKeyId>AKID&lt;&amp;&gt;</AWSAccessKeyId>"}},
		{name: "wrapped, two details in order", err: fmt.Errorf("verify: %w", &auth.Error{Code: "AccessDenied",
			Details: []auth.Detail{{Name: "HeadersNotSigned", Value: "x-amz-a, x-amz-b"}, {Name: "StringToSign", Value: "s"}}}),
			want: []string{"<HeadersNotSigned>x-amz-a, x-amz-b</HeadersNotSigned><StringToSign>s</StringToSign>"}},
		{name: "internal keeps its details", err: &auth.Error{Code: auth.CodeInternalError,
			Details: []auth.Detail{{Name: "Leak", Value: "x"}}}, not: []string{"Leak"}},
		{name: "store error has none", err: errMalformedXML, not: []string{"Details"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := toAPIError(tt.err)
			b, err := xml.Marshal(errorBody{Code: e.Code, Message: e.Message, Details: authDetails(tt.err)})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("body %s lacks %s", b, w)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(string(b), n) {
					t.Errorf("body %s has %s", b, n)
				}
			}
		})
	}
}
