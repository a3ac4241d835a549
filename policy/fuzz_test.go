package policy

import "testing"

// FuzzParse: no document makes Parse, Evaluate or IsPublic panic, and a
// document Parse accepts parses again to the same decisions.
func FuzzParse(f *testing.F) {
	f.Add([]byte(cond(`{"StringLike":{"aws:Referer":"http://x/*"}}`)), "s3:GetObject", "arn:aws:s3:::b/k")
	f.Add([]byte(`{"Version":"2012-10-17","Statement":{"Effect":"Deny","NotPrincipal":{"AWS":["arn:aws:iam::123456789012:user/a"]},"NotAction":"s3:Get*","NotResource":"arn:aws:s3:::b/${aws:username}/*"}}`), "s3:PutObject", "arn:aws:s3:::b/x")
	f.Add([]byte(`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b","Condition":{"ForAllValues:NumericLessThanIfExists":{"s3:max-keys":[1,"2"]},"Null":{"s3:prefix":false}}}]}`), "s3:ListBucket", "arn:aws:s3:::b")
	f.Fuzz(func(t *testing.T, doc []byte, action, resource string) {
		p, err := Parse(doc, Bucket, "b")
		if err != nil {
			if _, ok := IsMalformed(err); !ok {
				t.Fatalf("Parse error %v is not a policy *Error", err)
			}
			return
		}
		q, err := Parse(doc, Bucket, "b")
		if err != nil {
			t.Fatalf("second Parse: %v", err)
		}
		_ = p.IsPublic()
		for _, who := range []Principal{{Anonymous: true}, {Key: "a"}} {
			for _, c := range []map[string][]string{nil, ctx("aws:username", "a", "s3:prefix", "p", "s3:max-keys", "1", "aws:sourceip", "127.0.0.1")} {
				r := Request{Principal: who, Action: action, Resource: resource, Context: c}
				if d1, d2 := p.Evaluate(r), q.Evaluate(r); d1 != d2 {
					t.Fatalf("decisions differ: %v %v", d1, d2)
				}
			}
		}
	})
}
