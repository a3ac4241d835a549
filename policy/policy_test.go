package policy

import (
	"strings"
	"testing"
)

// cond builds a bucket policy for bucket "b" that allows s3:GetObject and
// s3:ListBucket to everyone under one Condition block.
func cond(block string) string {
	return `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*",
		"Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"],
		"Condition":` + block + `}]}`
}

func ctx(kv ...string) map[string][]string {
	m := map[string][]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = append(m[kv[i]], kv[i+1])
	}
	return m
}

// TestConditions has, for every condition key s3gate fills in, a request
// that the condition allows and one it does not (several are AWS's
// documented bucket policy examples).
func TestConditions(t *testing.T) {
	cases := []struct {
		name  string
		block string
		allow map[string][]string
		deny  map[string][]string
	}{
		{"SecureTransport", `{"Bool":{"aws:SecureTransport":"true"}}`,
			ctx("aws:securetransport", "true"), ctx("aws:securetransport", "false")},
		{"SourceIp range minus one address (AWS example)", `{"IpAddress":{"aws:SourceIp":"192.0.2.0/24"},"NotIpAddress":{"aws:SourceIp":"192.0.2.188/32"}}`,
			ctx("aws:sourceip", "192.0.2.7"), ctx("aws:sourceip", "192.0.2.188")},
		{"SourceIp IPv6", `{"IpAddress":{"aws:SourceIp":["2001:db8::/32"]}}`,
			ctx("aws:sourceip", "2001:db8::1"), ctx("aws:sourceip", "2001:db9::1")},
		{"SourceIp IPv4-mapped", `{"IpAddress":{"aws:SourceIp":"127.0.0.0/8"}}`,
			ctx("aws:sourceip", "::ffff:127.0.0.1"), ctx("aws:sourceip", "10.0.0.1")},
		{"Referer (AWS example)", `{"StringLike":{"aws:Referer":["http://www.example.com/*","http://example.com/*"]}}`,
			ctx("aws:referer", "http://example.com/page"), ctx("aws:referer", "http://evil.example/")},
		{"Referer absent", `{"StringLike":{"aws:Referer":"http://example.com/*"}}`,
			ctx("aws:referer", "http://example.com/"), ctx()},
		{"username", `{"StringEquals":{"aws:username":"alice"}}`,
			ctx("aws:username", "alice"), ctx("aws:username", "bob")},
		{"userid", `{"StringNotEquals":{"aws:userid":"bob"}}`,
			ctx("aws:userid", "alice"), ctx("aws:userid", "bob")},
		{"CurrentTime DateLessThan", `{"DateLessThan":{"aws:CurrentTime":"2030-01-01T00:00:00Z"}}`,
			ctx("aws:currenttime", "2029-12-31T23:59:59Z"), ctx("aws:currenttime", "2030-01-01T00:00:01Z")},
		{"CurrentTime DateGreaterThanEquals", `{"DateGreaterThanEquals":{"aws:CurrentTime":"2020-06-30"}}`,
			ctx("aws:currenttime", "2020-06-30T00:00:00Z"), ctx("aws:currenttime", "2020-06-29T23:00:00Z")},
		{"CurrentTime DateGreaterThan", `{"DateGreaterThan":{"aws:CurrentTime":"2020-06-30T00:00:00Z"}}`,
			ctx("aws:currenttime", "2020-06-30T00:00:01Z"), ctx("aws:currenttime", "2020-06-30T00:00:00Z")},
		{"CurrentTime DateLessThanEquals", `{"DateLessThanEquals":{"aws:CurrentTime":"2020-06-30T00:00:00Z"}}`,
			ctx("aws:currenttime", "2020-06-30T00:00:00Z"), ctx("aws:currenttime", "2020-06-30T00:00:01Z")},
		{"EpochTime", `{"NumericLessThan":{"aws:EpochTime":1900000000}}`,
			ctx("aws:epochtime", "1800000000"), ctx("aws:epochtime", "1900000000")},
		{"UserAgent StringNotLike", `{"StringNotLike":{"aws:UserAgent":"*curl*"}}`,
			ctx("aws:useragent", "aws-sdk-go-v2/1.0"), ctx("aws:useragent", "curl/8.5.0")},
		{"UserAgent IgnoreCase", `{"StringEqualsIgnoreCase":{"aws:UserAgent":"MyApp"}}`,
			ctx("aws:useragent", "myapp"), ctx("aws:useragent", "other")},
		{"StringNotEqualsIgnoreCase", `{"StringNotEqualsIgnoreCase":{"aws:UserAgent":"BadBot"}}`,
			ctx("aws:useragent", "goodbot"), ctx("aws:useragent", "badbot")},
		{"NumericEquals", `{"NumericEquals":{"s3:max-keys":"100"}}`,
			ctx("s3:max-keys", "100"), ctx("s3:max-keys", "99")},
		{"NumericLessThanEquals", `{"NumericLessThanEquals":{"s3:max-keys":"100"}}`,
			ctx("s3:max-keys", "100"), ctx("s3:max-keys", "101")},
		{"NumericGreaterThanEquals", `{"NumericGreaterThanEquals":{"s3:max-keys":"100"}}`,
			ctx("s3:max-keys", "100"), ctx("s3:max-keys", "99")},
		{"max-keys not a number", `{"NumericLessThan":{"s3:max-keys":"100"}}`,
			ctx("s3:max-keys", "5"), ctx("s3:max-keys", "many")},
		{"DateEquals", `{"DateEquals":{"aws:CurrentTime":"2024-01-01T00:00:00Z"}}`,
			ctx("aws:currenttime", "2024-01-01T00:00:00Z"), ctx("aws:currenttime", "2024-01-01T00:00:01Z")},
		{"DateNotEquals epoch", `{"DateNotEquals":{"aws:CurrentTime":"1704067200"}}`,
			ctx("aws:currenttime", "2024-01-01T00:00:01Z"), ctx("aws:currenttime", "2024-01-01T00:00:00Z")},
		{"PrincipalType", `{"StringEquals":{"aws:PrincipalType":"Anonymous"}}`,
			ctx("aws:principaltype", "Anonymous"), ctx("aws:principaltype", "User")},
		{"prefix and delimiter (AWS example)", `{"StringEquals":{"s3:prefix":["","home/"],"s3:delimiter":["/"]}}`,
			ctx("s3:prefix", "home/", "s3:delimiter", "/"), ctx("s3:prefix", "home/", "s3:delimiter", "-")},
		{"prefix StringLike", `{"StringLike":{"s3:prefix":"home/alice/*"}}`,
			ctx("s3:prefix", "home/alice/docs"), ctx("s3:prefix", "home/bob/")},
		{"delimiter StringNotEquals", `{"StringNotEquals":{"s3:delimiter":"/"}}`,
			ctx("s3:delimiter", "-"), ctx("s3:delimiter", "/")},
		{"max-keys (AWS example)", `{"NumericLessThanEquals":{"s3:max-keys":"10"}}`,
			ctx("s3:max-keys", "10"), ctx("s3:max-keys", "11")},
		{"max-keys NumericGreaterThan", `{"NumericGreaterThan":{"s3:max-keys":5}}`,
			ctx("s3:max-keys", "6"), ctx("s3:max-keys", "5")},
		{"max-keys NumericNotEquals", `{"NumericNotEquals":{"s3:max-keys":5}}`,
			ctx("s3:max-keys", "6"), ctx("s3:max-keys", "5")},
		{"x-amz-acl (AWS example)", `{"StringEquals":{"s3:x-amz-acl":"bucket-owner-full-control"}}`,
			ctx("s3:x-amz-acl", "bucket-owner-full-control"), ctx("s3:x-amz-acl", "public-read")},
		{"x-amz-acl IfExists", `{"StringEqualsIfExists":{"s3:x-amz-acl":"private"}}`,
			ctx(), ctx("s3:x-amz-acl", "public-read")},
		{"authType", `{"StringEquals":{"s3:authType":"REST-HEADER"}}`,
			ctx("s3:authtype", "REST-HEADER"), ctx("s3:authtype", "REST-QUERY-STRING")},
		{"signatureversion", `{"StringEquals":{"s3:signatureversion":"AWS4-HMAC-SHA256"}}`,
			ctx("s3:signatureversion", "AWS4-HMAC-SHA256"), ctx("s3:signatureversion", "AWS")},
		{"x-amz-content-sha256", `{"StringNotEquals":{"s3:x-amz-content-sha256":"UNSIGNED-PAYLOAD"}}`,
			ctx("s3:x-amz-content-sha256", "abc"), ctx("s3:x-amz-content-sha256", "UNSIGNED-PAYLOAD")},
		{"ExistingObjectTag is absent: StringNotEquals holds", `{"StringNotEquals":{"s3:ExistingObjectTag/secret":"yes"}}`,
			ctx(), ctx("s3:existingobjecttag/secret", "yes")},
		{"ExistingObjectTag is absent: StringEquals fails", `{"StringEquals":{"s3:ExistingObjectTag/public":"yes"}}`,
			ctx("s3:existingobjecttag/public", "yes"), ctx()},
		{"Null", `{"Null":{"aws:Referer":"true"}}`,
			ctx(), ctx("aws:referer", "x")},
		{"ForAnyValue", `{"ForAnyValue:StringEquals":{"s3:prefix":["a","b"]}}`,
			ctx("s3:prefix", "b"), ctx()},
		{"ForAllValues", `{"ForAllValues:StringLike":{"s3:prefix":["a*"]}}`,
			ctx("s3:prefix", "ab", "s3:prefix", "ac"), ctx("s3:prefix", "ab", "s3:prefix", "b")},
		{"NotIpAddressIfExists", `{"NotIpAddressIfExists":{"aws:SourceIp":"10.0.0.0/8"}}`,
			ctx(), ctx("aws:sourceip", "10.1.2.3")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse([]byte(cond(c.block)), Bucket, "b")
			if err != nil {
				t.Fatal(err)
			}
			req := Request{Principal: Principal{Anonymous: true}, Action: "s3:GetObject", Resource: "arn:aws:s3:::b/k"}
			req.Context = c.allow
			if d := p.Evaluate(req); d != Allowed {
				t.Errorf("allow case: %v, want Allowed", d)
			}
			req.Context = c.deny
			if d := p.Evaluate(req); d != NoMatch {
				t.Errorf("deny case: %v, want NoMatch", d)
			}
		})
	}
}

func TestEvaluate(t *testing.T) {
	const doc = `{"Version":"2012-10-17","Statement":[
		{"Sid":"PublicRead","Effect":"Allow","Principal":{"AWS":"*"},"Action":["s3:GetObject"],"Resource":"arn:aws:s3:::b/public/*"},
		{"Sid":"NoSecrets","Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/public/secret*"},
		{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::123456789012:user/alice"]},"Action":"s3:Put*","Resource":"arn:aws:s3:::b/uploads/*"},
		{"Effect":"Allow","Principal":{"AWS":"123456789012"},"Action":"s3:ListBucket","Resource":"arn:aws:s3:::b"},
		{"Effect":"Allow","Principal":{"CanonicalUser":"carol"},"NotAction":"s3:DeleteObject","Resource":"arn:aws:s3:::b/carol/*"},
		{"Effect":"Deny","NotPrincipal":{"AWS":"arn:aws:iam::123456789012:user/admin"},"Action":"s3:DeleteBucket","Resource":"arn:aws:s3:::b"},
		{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","NotResource":["arn:aws:s3:::b/*"]}
	]}`
	p, err := Parse([]byte(doc), Bucket, "b")
	if err != nil {
		t.Fatal(err)
	}
	anon := Principal{Anonymous: true}
	alice, bob, carol, admin := Principal{Key: "alice"}, Principal{Key: "bob"}, Principal{Key: "carol"}, Principal{Key: "admin"}
	cases := []struct {
		who      Principal
		action   string
		resource string
		want     Decision
	}{
		{anon, "s3:GetObject", "arn:aws:s3:::b/public/x", Allowed},
		{anon, "s3:GetObject", "arn:aws:s3:::b/private/x", NoMatch},
		{anon, "s3:getobject", "arn:aws:s3:::b/public/x", Allowed}, // actions are case-insensitive
		{anon, "s3:GetObject", "arn:aws:s3:::b/Public/x", NoMatch}, // resources are not
		{anon, "s3:GetObject", "arn:aws:s3:::b/public/secret.txt", Denied},
		{bob, "s3:GetObject", "arn:aws:s3:::b/public/secret.txt", Denied},
		{alice, "s3:PutObject", "arn:aws:s3:::b/uploads/a", Allowed},
		{bob, "s3:PutObject", "arn:aws:s3:::b/uploads/a", NoMatch},
		{anon, "s3:PutObject", "arn:aws:s3:::b/uploads/a", NoMatch},
		{bob, "s3:ListBucket", "arn:aws:s3:::b", Allowed},
		{anon, "s3:ListBucket", "arn:aws:s3:::b", NoMatch},
		{carol, "s3:GetObject", "arn:aws:s3:::b/carol/x", Allowed},
		{carol, "s3:DeleteObject", "arn:aws:s3:::b/carol/x", NoMatch},
		{bob, "s3:DeleteBucket", "arn:aws:s3:::b", Denied},
		{anon, "s3:DeleteBucket", "arn:aws:s3:::b", Denied},
		{admin, "s3:DeleteBucket", "arn:aws:s3:::b", NoMatch},
		{anon, "s3:GetObject", "arn:aws:s3:::b", Allowed}, // NotResource b/*
	}
	for _, c := range cases {
		if got := p.Evaluate(Request{Principal: c.who, Action: c.action, Resource: c.resource}); got != c.want {
			t.Errorf("%+v %s %s: %v, want %v", c.who, c.action, c.resource, got, c.want)
		}
	}
}

func TestIdentityPolicy(t *testing.T) {
	p, err := Parse([]byte(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:PutObject","Resource":"arn:aws:s3:::*/uploads/*"},
		{"Effect":"Allow","Action":"s3:ListAllMyBuckets","Resource":"arn:aws:s3:::*"}]}`), Identity, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		action, resource string
		want             Decision
	}{
		{"s3:PutObject", "arn:aws:s3:::any/uploads/x", Allowed},
		{"s3:ListAllMyBuckets", Resource(ScopeService, "", ""), Allowed},
		{"s3:PutObject", "arn:aws:s3:::any/other/x", NoMatch},
		{"s3:GetObject", "arn:aws:s3:::any/uploads/x", NoMatch},
	} {
		if got := p.Evaluate(Request{Principal: Principal{Key: "k"}, Action: c.action, Resource: c.resource}); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.action, c.resource, got, c.want)
		}
	}
}

// TestVariables: the AWS example of per-user home prefixes.
func TestVariables(t *testing.T) {
	const stmt = `"Statement":[{"Effect":"Allow","Principal":{"AWS":"123456789012"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/home/${aws:username}/*"},
		{"Effect":"Allow","Principal":{"AWS":"123456789012"},"Action":"s3:ListBucket","Resource":"arn:aws:s3:::b","Condition":{"StringLike":{"s3:prefix":"home/${aws:username}/*"}}}]`
	p, err := Parse([]byte(`{"Version":"2012-10-17",`+stmt+`}`), Bucket, "b")
	if err != nil {
		t.Fatal(err)
	}
	alice := Principal{Key: "alice"}
	for _, c := range []struct {
		who      Principal
		action   string
		resource string
		ctx      map[string][]string
		want     Decision
	}{
		{alice, "s3:GetObject", "arn:aws:s3:::b/home/alice/x", ctx("aws:username", "alice"), Allowed},
		{alice, "s3:GetObject", "arn:aws:s3:::b/home/bob/x", ctx("aws:username", "alice"), NoMatch},
		{alice, "s3:GetObject", "arn:aws:s3:::b/home/alice/x", ctx(), NoMatch}, // unresolved: no match
		{alice, "s3:ListBucket", "arn:aws:s3:::b", ctx("aws:username", "alice", "s3:prefix", "home/alice/docs"), Allowed},
		{alice, "s3:ListBucket", "arn:aws:s3:::b", ctx("aws:username", "alice", "s3:prefix", "home/bob/"), NoMatch},
	} {
		if got := p.Evaluate(Request{Principal: c.who, Action: c.action, Resource: c.resource, Context: c.ctx}); got != c.want {
			t.Errorf("%s %s %v: %v, want %v", c.action, c.resource, c.ctx, got, c.want)
		}
	}
	// In a 2008-10-17 document "${" is text.
	old, err := Parse([]byte(`{"Version":"2008-10-17",`+stmt+`}`), Bucket, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got := old.Evaluate(Request{Principal: alice, Action: "s3:GetObject", Resource: "arn:aws:s3:::b/home/alice/x", Context: ctx("aws:username", "alice")}); got != NoMatch {
		t.Errorf("2008-10-17: %v, want NoMatch", got)
	}
	for _, doc := range []string{
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/${aws:Referer}/*"}]}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"Null":{"aws:Referer":"${aws:username}"}}}]}`,
	} {
		if _, err := Parse([]byte(doc), Bucket, "b"); err == nil {
			t.Errorf("%s: accepted", doc)
		}
	}
}

// TestSingleStatement: Statement, Action and Resource may each be one value
// instead of an array.
func TestSingleStatement(t *testing.T) {
	p, err := Parse([]byte(`{"Statement":{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}}`), Identity, "")
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Evaluate(Request{Principal: Principal{Key: "k"}, Action: "s3:GetObject", Resource: "arn:aws:s3:::b/k"}); d != Allowed {
		t.Errorf("got %v, want Allowed", d)
	}
}

func TestMalformed(t *testing.T) {
	stmt := func(s string) string { return `{"Version":"2012-10-17","Statement":[` + s + `]}` }
	cases := []struct {
		kind Kind
		doc  string
		msg  string
	}{
		{Bucket, `[]`, "Policies must be valid JSON and the first byte must be '{'"},
		{Bucket, ``, "Policies must be valid JSON and the first byte must be '{'"},
		{Bucket, `{"Statement":`, "This policy contains invalid Json"},
		{Bucket, `{"Version":"2019-01-01","Statement":[]}`, "The policy must contain a valid version string"},
		{Bucket, `{"Version":"2012-10-17"}`, "Missing required field Statement"},
		{Bucket, `{"Version":"2012-10-17","Statement":[],"Foo":1}`, "Unknown field Foo"},
		{Bucket, stmt(`{"Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`), "Missing required field Effect"},
		{Bucket, stmt(`{"Effect":"hello","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`), "Invalid effect: hello"},
		{Bucket, stmt(`{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`), "Missing required field Principal"},
		{Bucket, stmt(`{"Effect":"Allow","Principal":{"AWS":"user"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`), "Invalid principal in policy"},
		{Bucket, stmt(`{"Effect":"Allow","Principal":{"Service":"cloudfront.amazonaws.com"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`), "Invalid principal in policy"},
		{Bucket, stmt(`{"Effect":"Allow","Principal":"alice","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`), "Invalid principal in policy"},
		{Bucket, stmt(`{"Effect":"Allow","Principal":"*","Action":"invalid_action","Resource":"arn:aws:s3:::b/*"}`), "Policy has invalid action"},
		{Bucket, stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:Frobnicate","Resource":"arn:aws:s3:::b/*"}`), "Policy has invalid action"},
		{Bucket, stmt(`{"Effect":"Allow","Principal":"*","Resource":"arn:aws:s3:::b/*"}`), "Missing required field Action"},
		{Bucket, stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject"}`), "Missing required field Resource"},
		{Bucket, stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"b/*"}`), "Policy has invalid resource"},
		{Bucket, stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}`), "Policy has invalid resource"},
		{Bucket, stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b"}`), "Action does not apply to any resource(s) in statement"},
		{Bucket, stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b/*"}`), "Action does not apply to any resource(s) in statement"},
		{Bucket, stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"aws:Nope":"x"}}}`), "Policy has an invalid condition key"},
		{Bucket, stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringSorta":{"aws:Referer":"x"}}}`), "Invalid Condition type : StringSorta"},
		{Bucket, stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"IpAddress":{"aws:SourceIp":"300.1.1.1"}}}`), `Invalid Condition value "300.1.1.1" for IpAddress`},
		{Bucket, stmt(`{"Sid":"a","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"},{"Sid":"a","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`), "Statement IDs (SID) in a single policy must be unique"},
		{Identity, stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"*"}`), "Policy document should not specify a principal."},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.doc), c.kind, "b")
		pe, ok := IsMalformed(err)
		if !ok || pe.Message != c.msg {
			t.Errorf("%s: got %v, want %q", c.doc, err, c.msg)
		}
	}
}

func TestIsPublic(t *testing.T) {
	for _, c := range []struct {
		stmt string
		want bool
	}{
		{`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`, true},
		{`{"Effect":"Allow","Principal":{"AWS":["*"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`, true},
		{`{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`, false},
		{`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:user/k"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`, false},
		{`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}`, false},
		{`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"IpAddress":{"aws:SourceIp":"0.0.0.0/0"}}}`, true},
		{`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringLike":{"aws:Referer":"http://x/*"}}}`, true},
		{`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"aws:username":"k"}}}`, false},
	} {
		p, err := Parse([]byte(`{"Statement":[`+c.stmt+`]}`), Bucket, "b")
		if err != nil {
			t.Fatal(err)
		}
		if got := p.IsPublic(); got != c.want {
			t.Errorf("%s: IsPublic %v, want %v", c.stmt, got, c.want)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"a*c", "abbbc", true}, {"a*c", "abbb", false}, {"a?c", "abc", true},
		{"a?c", "aéc", true}, {"a?c", "ac", false}, {"*/x/*", "a/x/b", true}, {"**", "q", true},
	} {
		if got := Match(c.p, c.s); got != c.want {
			t.Errorf("Match(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

// TestEveryOperationHasAKnownAction keeps the operation table and the
// action list in step.
func TestEveryOperationHasAKnownAction(t *testing.T) {
	for op, a := range operations {
		if _, ok := actionScopes[strings.ToLower(a)]; !ok {
			t.Errorf("%s: action %s unknown", op, a)
		}
		if _, scope, _ := ActionOf(op); scope != actionScopes[strings.ToLower(a)] {
			t.Errorf("%s: scope %v, action %s has %v", op, scope, a, actionScopes[strings.ToLower(a)])
		}
	}
}

func TestUsesExistingObjectTag(t *testing.T) {
	for block, want := range map[string]bool{
		`{"StringEquals":{"s3:ExistingObjectTag/Team":"blue"}}`: true,
		`{"StringEquals":{"s3:prefix":"a/"}}`:                   false,
		`{}`:                                                    false,
	} {
		doc := `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":` + block + `}]}`
		p, err := Parse([]byte(doc), Bucket, "b")
		if err != nil {
			t.Fatalf("Parse %s: %v", block, err)
		}
		if got := p.UsesExistingObjectTag(); got != want {
			t.Errorf("UsesExistingObjectTag(%s) = %v, want %v", block, got, want)
		}
	}
}
