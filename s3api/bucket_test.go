package s3api

import (
	"encoding/xml"
	"net/http"
	"strings"
	"testing"
)

func locationBody(region string) string {
	return `<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>` +
		region + `</LocationConstraint></CreateBucketConfiguration>`
}

func TestCreateBucket(t *testing.T) {
	tests := []struct {
		name     string
		region   string
		existing bool
		body     string
		hdr      map[string]string
		status   int
		code     string
	}{
		{name: "no body", region: "us-east-1", status: 200},
		{name: "matching constraint", region: "eu-west-1", body: locationBody("eu-west-1"), status: 200},
		{name: "EU alias", region: "eu-west-1", body: locationBody("EU"), status: 200},
		{name: "empty constraint", region: "eu-central-1", body: locationBody(""), status: 200},
		{name: "other region", region: "us-east-1", body: locationBody("eu-west-1"), status: 400, code: "IllegalLocationConstraintException"},
		{name: "explicit us-east-1 elsewhere", region: "eu-west-1", body: locationBody("us-east-1"), status: 400, code: "InvalidLocationConstraint"},
		{name: "explicit us-east-1 in us-east-1", region: "us-east-1", body: locationBody("us-east-1"), status: 400, code: "InvalidLocationConstraint"},
		{name: "malformed body", region: "us-east-1", body: "<CreateBucketConfiguration><Loc", status: 400, code: "MalformedXML"},
		{name: "owned in us-east-1 is 200", region: "us-east-1", existing: true, status: 200},
		{name: "owned elsewhere is 409", region: "eu-west-1", existing: true, status: 409, code: "BucketAlreadyOwnedByYou"},
		{name: "public acl", region: "us-east-1", hdr: map[string]string{"x-amz-acl": "public-read-write"}, status: 501, code: "NotImplemented"},
		{name: "body over cap", region: "us-east-1", body: locationBody(strings.Repeat("x", 200)), status: 400, code: "MaxMessageLengthExceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{Region: tt.region, MaxXMLBody: 200})
			if tt.existing {
				e.mustBucket("bkt")
			}
			w := e.do(req{method: "PUT", target: "/bkt", body: tt.body, hdr: tt.hdr})
			if tt.code != "" {
				expectError(t, w, tt.status, tt.code)
				if !tt.existing {
					if _, ok := e.st.buckets["bkt"]; ok {
						t.Error("bucket created despite the error")
					}
				}
				return
			}
			if w.Code != tt.status {
				t.Fatalf("status %d %s", w.Code, w.Body.String())
			}
			if b := e.st.buckets["bkt"]; b.Region != tt.region {
				t.Errorf("bucket region %q, want %q", b.Region, tt.region)
			}
		})
	}
}

func TestBucketInfo(t *testing.T) {
	for _, region := range []string{"us-east-1", "eu-west-1"} {
		t.Run(region, func(t *testing.T) {
			e := newEnv(t, Config{Region: region})
			e.mustBucket("bkt")
			w := e.do(req{method: "HEAD", target: "/bkt"})
			if w.Code != 200 || w.Header().Get("x-amz-bucket-region") != region || w.Body.Len() != 0 {
				t.Errorf("HeadBucket: %d region %q body %q", w.Code, w.Header().Get("x-amz-bucket-region"), w.Body.String())
			}
			w = e.do(req{method: "GET", target: "/bkt?location"})
			var loc struct {
				XMLName xml.Name `xml:"LocationConstraint"`
				Value   string   `xml:",chardata"`
			}
			if err := xml.Unmarshal(w.Body.Bytes(), &loc); err != nil || w.Code != 200 {
				t.Fatalf("location: %d %v", w.Code, err)
			}
			want := region
			if region == "us-east-1" {
				want = ""
			}
			if loc.Value != want {
				t.Errorf("LocationConstraint %q, want %q", loc.Value, want)
			}
			if w := e.do(req{method: "DELETE", target: "/bkt"}); w.Code != http.StatusNoContent {
				t.Errorf("DeleteBucket: %d", w.Code)
			}
			if w := e.do(req{method: "HEAD", target: "/bkt"}); w.Code != 404 {
				t.Errorf("HeadBucket after delete: %d", w.Code)
			}
		})
	}
}

func TestSubresources(t *testing.T) {
	tests := []struct {
		method, target string
		hdr            map[string]string
		status         int
		code           string // error code, or "" for a success
		contains       string // substring of a success body
	}{
		{"GET", "/bkt?versioning", nil, 200, "", `<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></VersioningConfiguration>`},
		{"GET", "/bkt?acl", nil, 200, "", "<Permission>FULL_CONTROL</Permission>"},
		{"GET", "/bkt/obj?acl", nil, 200, "", `xsi:type="CanonicalUser"`},
		{"GET", "/bkt/obj?tagging", nil, 200, "", "<TagSet></TagSet>"},
		{"PUT", "/bkt?acl", map[string]string{"x-amz-acl": "private"}, 200, "", ""},
		{"PUT", "/bkt/obj?acl", map[string]string{"x-amz-acl": "private"}, 200, "", ""},
		{"PUT", "/bkt?acl", map[string]string{"x-amz-acl": "public-read"}, 501, "NotImplemented", ""},
		{"PUT", "/bkt/obj?acl", nil, 400, "MissingSecurityHeader", ""},
		{"GET", "/bkt?tagging", nil, 404, "NoSuchTagSet", ""},
		{"GET", "/bkt?policy", nil, 404, "NoSuchBucketPolicy", ""},
		{"GET", "/bkt?cors", nil, 404, "NoSuchCORSConfiguration", ""},
		{"GET", "/bkt?lifecycle", nil, 404, "NoSuchLifecycleConfiguration", ""},
		{"GET", "/bkt?encryption", nil, 404, "ServerSideEncryptionConfigurationNotFoundError", ""},
		{"GET", "/bkt?object-lock", nil, 404, "ObjectLockConfigurationNotFoundError", ""},
		{"GET", "/nobkt?policy", nil, 404, "NoSuchBucket", ""},
		{"GET", "/nobkt?versioning", nil, 404, "NoSuchBucket", ""},
		{"PUT", "/bkt?policy", nil, 501, "NotImplemented", ""},
		{"DELETE", "/bkt?policy", nil, 501, "NotImplemented", ""},
		{"PUT", "/bkt?versioning", nil, 400, "InvalidRequest", ""}, // no Content-MD5 for no body
		{"PUT", "/bkt?tagging", nil, 501, "NotImplemented", ""},
		{"PUT", "/bkt?lifecycle", nil, 501, "NotImplemented", ""},
		{"PUT", "/bkt?cors", nil, 400, "InvalidRequest", ""}, // the CORS API: no Content-MD5 for no body
		{"PUT", "/bkt?encryption", nil, 501, "NotImplemented", ""},
		{"PUT", "/bkt?object-lock", nil, 400, "InvalidRequest", ""}, // no Content-MD5 for no body
		{"PUT", "/bkt?replication", nil, 501, "NotImplemented", ""},
		{"PUT", "/bkt?website", nil, 501, "NotImplemented", ""},
		{"GET", "/bkt?notification", nil, 200, "", `<NotificationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></NotificationConfiguration>`},
		{"GET", "/bkt?logging", nil, 200, "", `<BucketLoggingStatus xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></BucketLoggingStatus>`},
		{"GET", "/bkt?accelerate", nil, 200, "", `<AccelerateConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></AccelerateConfiguration>`},
		{"GET", "/bkt?requestPayment", nil, 200, "", "<RequestPaymentConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Payer>BucketOwner</Payer></RequestPaymentConfiguration>"},
		{"GET", "/bkt?metrics", nil, 200, "", "<ListMetricsConfigurationsResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><IsTruncated>false</IsTruncated></ListMetricsConfigurationsResult>"},
		{"GET", "/bkt?inventory", nil, 200, "", "<ListInventoryConfigurationsResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><IsTruncated>false</IsTruncated>"},
		{"GET", "/bkt?intelligent-tiering", nil, 200, "", "<ListBucketIntelligentTieringConfigurationsOutput xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><IsTruncated>false</IsTruncated>"},
		{"GET", "/bkt?analytics&id=a", nil, 404, "NoSuchConfiguration", ""},
		{"GET", "/bkt?inventory&id=a", nil, 404, "NoSuchConfiguration", ""},
		{"GET", "/nobkt?logging", nil, 404, "NoSuchBucket", ""},
		{"GET", "/nobkt?analytics", nil, 404, "NoSuchBucket", ""},
		{"DELETE", "/bkt?website", nil, 204, "", ""},
		{"DELETE", "/bkt?replication", nil, 204, "", ""},
		{"DELETE", "/bkt?encryption", nil, 204, "", ""},
		{"DELETE", "/nobkt?website", nil, 404, "NoSuchBucket", ""},
		{"PUT", "/bkt?logging", nil, 501, "NotImplemented", ""},
		{"PUT", "/bkt?accelerate", nil, 501, "NotImplemented", ""},
		{"PUT", "/bkt?requestPayment", nil, 501, "NotImplemented", ""},
		{"PUT", "/bkt?notification", nil, 501, "NotImplemented", ""},
		{"PUT", "/bkt?analytics&id=a", nil, 501, "NotImplemented", ""},
		{"DELETE", "/bkt?analytics&id=a", nil, 501, "NotImplemented", ""},
		{"GET", "/bkt?versions", nil, 200, "", "<VersionId>null</VersionId>"},
		{"GET", "/bkt?analytics", nil, 200, "", "<ListBucketAnalyticsConfigurationResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><IsTruncated>false</IsTruncated></ListBucketAnalyticsConfigurationResult>"},
		{"POST", "/bkt", nil, 412, "PreconditionFailed", ""},      // POST Object wants a form
		{"PUT", "/bkt/obj?tagging", nil, 400, "MalformedXML", ""}, // no Tagging body
		{"GET", "/bkt/obj?retention", nil, 400, "InvalidRequest", ""},
		{"PUT", "/bkt/obj?legal-hold", nil, 400, "InvalidRequest", ""}, // no Content-MD5 for no body
		{"POST", "/bkt/obj?restore", nil, 501, "NotImplemented", ""},
		{"POST", "/bkt/obj?select&select-type=2", nil, 501, "NotImplemented", ""},
		{"GET", "/bkt/obj?attributes", nil, 400, "InvalidArgument", ""},
		{"POST", "/bkt/obj", nil, 501, "NotImplemented", ""},
		{"OPTIONS", "/bkt/obj", nil, 400, "BadRequest", ""}, // a CORS preflight without Origin
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustBucket("bkt")
			e.mustPut("bkt", "obj", "x", nil)
			w := e.do(req{method: tt.method, target: tt.target, hdr: tt.hdr})
			if tt.code != "" {
				expectError(t, w, tt.status, tt.code)
				return
			}
			if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.contains) {
				t.Errorf("%d %s, want %d containing %q", w.Code, w.Body.String(), tt.status, tt.contains)
			}
		})
	}
}
