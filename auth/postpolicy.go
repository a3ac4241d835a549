package auth

import (
	"encoding/hex"
	"net/http"
	"strings"
	"time"
)

// Browser form uploads (S3's POST Object) carry their signature in form
// fields rather than in headers or the query: the signature covers the
// base64 POST policy document, which the gateway then enforces (s3api). SigV4
// signs it with the day's signing key, SigV2 with the secret itself.

// VerifyPost checks the signature of a POST form's policy. fields are the
// form fields before the file, by lower-case name. It returns the access key
// that signed the policy, or "" for a form without any signature field (an
// anonymous upload: the caller decides). r gives the context of the
// credential lookup. Errors are *Error with S3's codes.
func (v *Verifier) VerifyPost(r *http.Request, fields map[string]string) (string, error) {
	policy := fields["policy"]
	_, v4 := fields["x-amz-signature"]
	_, v2 := fields["signature"]
	switch {
	case !v4 && !v2 && fields["x-amz-credential"] == "" && fields["awsaccesskeyid"] == "":
		if policy != "" {
			return "", missingPostField("x-amz-signature")
		}
		return "", nil
	case v4 && v2:
		return "", newErr(CodeInvalidArgument, "Only one auth mechanism allowed; only the x-amz-signature or the signature form field should be specified")
	case policy == "":
		return "", missingPostField("policy")
	case v4 || fields["x-amz-credential"] != "":
		return v.verifyPostV4(r, fields, policy)
	default:
		return v.verifyPostV2(r, fields, policy)
	}
}

// missingPostField is S3's answer to a form without a required field.
func missingPostField(name string) *Error {
	e := newErr(CodeInvalidArgument, "Bucket POST must contain a field named '"+name+"'.  If it is specified, please check the order of the fields.")
	e.Details = []Detail{{Name: "ArgumentName", Value: name}, {Name: "ArgumentValue"}}
	return e
}

func (v *Verifier) verifyPostV4(r *http.Request, fields map[string]string, policy string) (string, error) {
	for _, name := range []string{"x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-signature"} {
		if fields[name] == "" {
			return "", missingPostField(name)
		}
	}
	if alg := fields["x-amz-algorithm"]; alg != sigV4Algorithm {
		return "", newErr(CodeInvalidArgument, "POST form algorithm '"+truncate(alg, 64)+"' is not supported; expecting '"+sigV4Algorithm+"'")
	}
	invalid := func(msg string) *Error { return newErr(CodeInvalidArgument, "X-Amz-Credential: "+msg) }
	cred, ok := parseCredential(fields["x-amz-credential"])
	if !ok {
		return "", invalid("the credential is malformed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\"")
	}
	t, err := time.Parse(iso8601Format, fields["x-amz-date"])
	if err != nil {
		return "", newErr(CodeInvalidArgument, "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	if aerr := v.checkScope(cred, t, invalid); aerr != nil {
		return "", aerr
	}
	secret, aerr := v.lookup(r, cred.accessKey)
	if aerr != nil {
		return "", aerr
	}
	mac := hmacSHA256(v.keys.get(secret, cred.date, cred.region, cred.service), []byte(policy))
	if !sigEqual(hex.EncodeToString(mac[:]), fields["x-amz-signature"]) {
		return "", errSignature()
	}
	return cred.accessKey, nil
}

func (v *Verifier) verifyPostV2(r *http.Request, fields map[string]string, policy string) (string, error) {
	accessKey := strings.TrimSpace(fields["awsaccesskeyid"])
	if accessKey == "" {
		return "", missingPostField("AWSAccessKeyId")
	}
	if fields["signature"] == "" {
		return "", missingPostField("signature")
	}
	secret, aerr := v.lookup(r, accessKey)
	if aerr != nil {
		return "", aerr
	}
	if !v2Equal(v2Signature(secret, policy), fields["signature"]) {
		return "", errSignature()
	}
	return accessKey, nil
}
