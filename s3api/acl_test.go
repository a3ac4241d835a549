package s3api

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/s3gate/s3gate/store"
)

func TestRequestACL(t *testing.T) {
	const all = `uri="http://acs.amazonaws.com/groups/global/AllUsers"`
	owner := store.ACLGrant{ID: "AKOWNER", Permission: "FULL_CONTROL"}
	body := func(grants string) string {
		return `<AccessControlPolicy><Owner><ID>AKOWNER</ID></Owner><AccessControlList>` + grants + `</AccessControlList></AccessControlPolicy>`
	}
	const xsi = `xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"`
	tests := []struct {
		name   string
		hdr    map[string]string
		body   string
		object bool
		want   []store.ACLGrant // nil with code "": no ACL set
		code   string
	}{
		{"none", nil, "", true, nil, ""},
		{"private", map[string]string{"x-amz-acl": "private"}, "", true, []store.ACLGrant{owner}, ""},
		{"public-read", map[string]string{"x-amz-acl": "public-read"}, "", true,
			[]store.ACLGrant{owner, {URI: groupAllUsers, Permission: "READ"}}, ""},
		{"public-read-write", map[string]string{"x-amz-acl": "public-read-write"}, "", false,
			[]store.ACLGrant{owner, {URI: groupAllUsers, Permission: "READ"}, {URI: groupAllUsers, Permission: "WRITE"}}, ""},
		{"authenticated-read", map[string]string{"x-amz-acl": "authenticated-read"}, "", true,
			[]store.ACLGrant{owner, {URI: groupAuthenticated, Permission: "READ"}}, ""},
		{"bucket-owner-read", map[string]string{"x-amz-acl": "bucket-owner-read"}, "", true,
			[]store.ACLGrant{owner, {ID: "AKBUCKET", Permission: "READ"}}, ""},
		{"bucket-owner-full-control", map[string]string{"x-amz-acl": "bucket-owner-full-control"}, "", true,
			[]store.ACLGrant{owner, {ID: "AKBUCKET", Permission: "FULL_CONTROL"}}, ""},
		{"bucket-owner-read on a bucket", map[string]string{"x-amz-acl": "bucket-owner-read"}, "", false, []store.ACLGrant{owner}, ""},
		{"aws-exec-read", map[string]string{"x-amz-acl": "aws-exec-read"}, "", true, nil, "NotImplemented"},
		{"unknown canned", map[string]string{"x-amz-acl": "everyone"}, "", true, nil, "InvalidArgument"},
		{"grant headers", map[string]string{"x-amz-grant-read": all + `, id="AKOTHER"`, "x-amz-grant-write-acp": `id=AKOTHER`}, "", true,
			[]store.ACLGrant{{URI: groupAllUsers, Permission: "READ"}, {ID: "AKOTHER", Permission: "READ"}, {ID: "AKOTHER", Permission: "WRITE_ACP"}}, ""},
		{"grant by email", map[string]string{"x-amz-grant-read": `emailAddress="a@example.com"`}, "", true, nil, "InvalidArgument"},
		{"unknown group", map[string]string{"x-amz-grant-read": `uri="http://acs.amazonaws.com/groups/global/Nobody"`}, "", true, nil, "InvalidArgument"},
		{"grantee without value", map[string]string{"x-amz-grant-read": `id=`}, "", true, nil, "InvalidArgument"},
		{"canned and grants", map[string]string{"x-amz-acl": "private", "x-amz-grant-read": all}, "", true, nil, "InvalidRequest"},
		{"canned and body", map[string]string{"x-amz-acl": "private"}, body(""), true, nil, "InvalidRequest"},
		{"body", nil, body(`<Grant><Grantee ` + xsi + ` xsi:type="CanonicalUser"><ID>AKOWNER</ID></Grantee><Permission>FULL_CONTROL</Permission></Grant>` +
			`<Grant><Grantee ` + xsi + ` xsi:type="Group"><URI>` + groupAuthenticated + `</URI></Grantee><Permission>READ_ACP</Permission></Grant>`), true,
			[]store.ACLGrant{owner, {URI: groupAuthenticated, Permission: "READ_ACP"}}, ""},
		{"body of another owner", nil, `<AccessControlPolicy><Owner><ID>AKOTHER</ID></Owner></AccessControlPolicy>`, true, nil, "AccessDenied"},
		{"body without owner", nil, `<AccessControlPolicy><AccessControlList/></AccessControlPolicy>`, true, nil, "MalformedACLError"},
		{"body with a bad permission", nil, body(`<Grant><Grantee ` + xsi + ` xsi:type="CanonicalUser"><ID>x</ID></Grantee><Permission>ALL</Permission></Grant>`), true, nil, "MalformedACLError"},
		{"body with an unknown type", nil, body(`<Grant><Grantee ` + xsi + ` xsi:type="Robot"><ID>x</ID></Grantee><Permission>READ</Permission></Grant>`), true, nil, "MalformedACLError"},
		{"body without grantee", nil, body(`<Grant><Permission>READ</Permission></Grant>`), true, nil, "MalformedACLError"},
		{"body by email", nil, body(`<Grant><Grantee ` + xsi + ` xsi:type="AmazonCustomerByEmail"><EmailAddress>a@example.com</EmailAddress></Grantee><Permission>READ</Permission></Grant>`), true, nil, "InvalidArgument"},
		{"body not XML", nil, "<AccessControlPolicy", true, nil, "MalformedACLError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPut, "/b/k?acl", nil)
			for k, v := range tt.hdr {
				r.Header.Set(k, v)
			}
			acl, err := requestACL(&request{r: r, accessKey: "AKOWNER"}, []byte(tt.body), "AKOWNER", "AKBUCKET", tt.object)
			if tt.code != "" {
				var ae *apiError
				if !errors.As(err, &ae) || ae.Code != tt.code {
					t.Fatalf("err = %v, want %s", err, tt.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				if acl != nil {
					t.Fatalf("acl = %+v, want none", acl)
				}
				return
			}
			if acl == nil || acl.Owner != "AKOWNER" || !reflect.DeepEqual(acl.Grants, tt.want) {
				t.Fatalf("acl = %+v, want grants %+v", acl, tt.want)
			}
		})
	}
}

func TestACLGrants(t *testing.T) {
	acl := &store.ACL{Owner: "AKOWNER", Grants: []store.ACLGrant{
		{ID: "AKOWNER", Permission: "FULL_CONTROL"},
		{URI: groupAllUsers, Permission: "READ"},
		{URI: groupAuthenticated, Permission: "WRITE"},
		{ID: "AKREADER", Permission: "READ_ACP"},
	}}
	tests := []struct {
		name         string
		acl          *store.ACL
		anonymous    bool
		key, perm    string
		ignorePublic bool
		want         bool
	}{
		{"no ACL", nil, false, "AKOWNER", "READ", false, false},
		{"owner's FULL_CONTROL", acl, false, "AKOWNER", "WRITE", false, true},
		{"anonymous by AllUsers", acl, true, "", "READ", false, true},
		{"anonymous not by AuthenticatedUsers", acl, true, "", "WRITE", false, false},
		{"a key by AuthenticatedUsers", acl, false, "AKANY", "WRITE", false, true},
		{"a key by AllUsers", acl, false, "AKANY", "READ", false, true},
		{"IgnorePublicAcls: AllUsers gives nothing", acl, true, "", "READ", true, false},
		{"IgnorePublicAcls: AuthenticatedUsers gives nothing", acl, false, "AKANY", "WRITE", true, false},
		{"IgnorePublicAcls keeps grants to ids", acl, false, "AKREADER", "READ_ACP", true, true},
		{"a grant to an id", acl, false, "AKREADER", "READ_ACP", false, true},
		{"an id's grant is not another's", acl, false, "AKOTHER", "READ_ACP", false, false},
		{"anonymous is no id", acl, true, "AKREADER", "READ_ACP", false, false},
		{"an unlisted permission", acl, false, "AKREADER", "WRITE_ACP", false, false},
		{"the owner keeps WRITE_ACP", &store.ACL{Owner: "AKOWNER"}, false, "AKOWNER", "WRITE_ACP", false, true},
		{"the owner gets no READ by ownership", &store.ACL{Owner: "AKOWNER"}, false, "AKOWNER", "READ", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := aclGrants(tt.acl, tt.anonymous, tt.key, tt.perm, tt.ignorePublic); got != tt.want {
				t.Fatalf("aclGrants = %v, want %v", got, tt.want)
			}
		})
	}
}
