// Package policy parses, validates and evaluates access policies in the S3
// subset of the AWS policy language: bucket policies (with a Principal) and
// the identity policies of access keys (without one). It knows no SQL and no
// HTTP: the caller names the action, the resource and the condition context.
//
// Evaluation is AWS's: an explicit Deny wins over any Allow; without a
// matching Allow the answer is the implicit deny (NoMatch).
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MaxBucketPolicy is S3's limit on a bucket policy document (20 KiB).
const MaxBucketPolicy = 20 << 10

// Error is a document that is not a valid policy; Message is S3's wording
// for MalformedPolicy.
type Error struct{ Message string }

func (e *Error) Error() string { return "malformed policy: " + e.Message }

func malformed(format string, args ...any) error {
	return &Error{Message: fmt.Sprintf(format, args...)}
}

// IsMalformed reports whether err is a policy validation error and returns it.
func IsMalformed(err error) (*Error, bool) {
	var pe *Error
	ok := errors.As(err, &pe)
	return pe, ok
}

// Kind is what a document is for.
type Kind int

// Kinds of documents.
const (
	// Bucket is a bucket policy: every statement names its Principal and its
	// resources lie in the bucket.
	Bucket Kind = iota
	// Identity is an access key's own policy: no Principal.
	Identity
)

// Effect of a statement.
type Effect bool

// Effects.
const (
	Deny  Effect = false
	Allow Effect = true
)

// Policy is a parsed, validated document.
type Policy struct {
	Version    string
	Statements []Statement
}

// Statement is one statement of a policy.
type Statement struct {
	Sid          string
	Effect       Effect
	Principals   *Principals // nil in identity policies
	NotPrincipal bool        // Principals came from NotPrincipal
	Actions      []string    // lower case patterns
	NotAction    bool
	Resources    []string
	NotResource  bool
	Conditions   []Condition
	// vars: Resources or condition values use policy variables (variables.go).
	vars bool
}

// Principals is the Principal (or NotPrincipal) element, as s3gate maps it
// onto its keys: Any ("*" or {"AWS": "*"}) is everyone, anonymous callers
// included; Account (an account id or arn:aws:iam::ACCOUNT:root) is every
// access key of the gateway (one account); Keys are key ids named by
// arn:aws:iam::ACCOUNT:user/KEYID or {"CanonicalUser": "KEYID"} (a key's
// canonical id is its id).
type Principals struct {
	Any     bool
	Account bool
	Keys    []string
}

// Principal is who makes a request: an access key, or nobody (Anonymous).
type Principal struct {
	Anonymous bool
	Key       string
}

// Request is what is being decided.
type Request struct {
	Principal Principal
	// Action is an IAM action ("s3:GetObject"), Resource its ARN (see
	// Resource in actions.go).
	Action   string
	Resource string
	// Context holds the condition keys of the request, by lower-case name
	// (see Keys); a missing key is absent from the request.
	Context map[string][]string
}

// Decision is the outcome of evaluating one policy.
type Decision int

// Decisions.
const (
	// NoMatch: no statement applies (the implicit deny).
	NoMatch Decision = iota
	// Allowed: an Allow statement applies and no Deny does.
	Allowed
	// Denied: a Deny statement applies.
	Denied
)

// Parse reads and validates a document of kind; bucket is the bucket a
// bucket policy is for (its resources must lie in it). A bad document is an
// *Error with S3's message.
func Parse(doc []byte, kind Kind, bucket string) (*Policy, error) {
	doc = bytes.TrimLeft(doc, " \t\r\n")
	if len(doc) == 0 || doc[0] != '{' {
		return nil, malformed("Policies must be valid JSON and the first byte must be '{'")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, malformed("This policy contains invalid Json")
	}
	p := &Policy{Version: "2008-10-17"}
	for k, v := range raw {
		switch k {
		case "Version":
			if err := json.Unmarshal(v, &p.Version); err != nil || (p.Version != "2012-10-17" && p.Version != "2008-10-17") {
				return nil, malformed("The policy must contain a valid version string")
			}
		case "Id":
			var id string
			if json.Unmarshal(v, &id) != nil {
				return nil, malformed("Id must be a string")
			}
		case "Statement":
		default:
			return nil, malformed("Unknown field %s", k)
		}
	}
	stmts, err := objects(raw["Statement"])
	if err != nil || len(stmts) == 0 {
		return nil, malformed("Missing required field Statement")
	}
	sids := map[string]bool{}
	for _, s := range stmts {
		st, err := parseStatement(s, kind, bucket, p.Version == "2012-10-17")
		if err != nil {
			return nil, err
		}
		if st.Sid != "" {
			if sids[st.Sid] {
				return nil, malformed("Statement IDs (SID) in a single policy must be unique")
			}
			sids[st.Sid] = true
		}
		p.Statements = append(p.Statements, st)
	}
	return p, nil
}

// objects reads a JSON object or an array of objects.
func objects(v json.RawMessage) ([]map[string]json.RawMessage, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return nil, nil
	}
	if v[0] == '{' {
		var one map[string]json.RawMessage
		err := json.Unmarshal(v, &one)
		return []map[string]json.RawMessage{one}, err
	}
	var many []map[string]json.RawMessage
	err := json.Unmarshal(v, &many)
	return many, err
}

// strs reads a JSON string or an array of strings.
func strs(v json.RawMessage) ([]string, bool) {
	var one string
	if json.Unmarshal(v, &one) == nil {
		return []string{one}, true
	}
	var many []string
	if json.Unmarshal(v, &many) == nil && len(many) > 0 {
		return many, true
	}
	return nil, false
}

func parseStatement(raw map[string]json.RawMessage, kind Kind, bucket string, variables bool) (Statement, error) {
	var st Statement
	for k := range raw {
		switch k {
		case "Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction", "Resource", "NotResource", "Condition":
		default:
			return st, malformed("Unknown field %s", k)
		}
	}
	if v, ok := raw["Sid"]; ok && json.Unmarshal(v, &st.Sid) != nil {
		return st, malformed("Statement ID (SID) must be a string")
	}
	var effect string
	if v, ok := raw["Effect"]; !ok {
		return st, malformed("Missing required field Effect")
	} else if json.Unmarshal(v, &effect) != nil || (effect != "Allow" && effect != "Deny") {
		return st, malformed("Invalid effect: %s", strings.Trim(string(v), `"`))
	}
	st.Effect = effect == "Allow"

	pv, hasP := raw["Principal"]
	npv, hasNP := raw["NotPrincipal"]
	switch {
	case kind == Identity && (hasP || hasNP):
		return st, malformed("Policy document should not specify a principal.")
	case kind == Bucket && hasP && hasNP:
		return st, malformed("Invalid principal in policy")
	case kind == Bucket && !hasP && !hasNP:
		return st, malformed("Missing required field Principal")
	case hasP:
		pr, err := parsePrincipals(pv)
		if err != nil {
			return st, err
		}
		st.Principals = pr
	case hasNP:
		pr, err := parsePrincipals(npv)
		if err != nil {
			return st, err
		}
		st.Principals, st.NotPrincipal = pr, true
	}

	var err error
	if st.Actions, st.NotAction, err = pair(raw, "Action", "NotAction"); err != nil {
		return st, err
	}
	for i, a := range st.Actions {
		st.Actions[i] = strings.ToLower(a)
		if !knownAction(st.Actions[i]) {
			return st, malformed("Policy has invalid action")
		}
	}
	if st.Resources, st.NotResource, err = pair(raw, "Resource", "NotResource"); err != nil {
		return st, err
	}
	for _, r := range st.Resources {
		has, valid := hasVariables(r)
		if !validResource(r, kind, bucket) || (variables && has && !valid) {
			return st, malformed("Policy has invalid resource")
		}
		st.vars = st.vars || (variables && has)
	}
	if !st.NotAction && !st.NotResource && !appliesToAny(st.Actions, st.Resources) {
		return st, malformed("Action does not apply to any resource(s) in statement")
	}
	if v, ok := raw["Condition"]; ok {
		if st.Conditions, err = parseConditions(v, variables); err != nil {
			return st, err
		}
		for _, c := range st.Conditions {
			st.vars = st.vars || c.vars
		}
	}
	return st, nil
}

// pair reads the one of name and notName a statement must have.
func pair(raw map[string]json.RawMessage, name, notName string) ([]string, bool, error) {
	v, has := raw[name]
	nv, hasNot := raw[notName]
	if has == hasNot {
		return nil, false, malformed("Missing required field %s", name)
	}
	if hasNot {
		v = nv
	}
	s, ok := strs(v)
	if !ok {
		return nil, false, malformed("Missing required field %s", name)
	}
	return s, hasNot, nil
}

func parsePrincipals(v json.RawMessage) (*Principals, error) {
	bad := malformed("Invalid principal in policy")
	var star string
	if json.Unmarshal(v, &star) == nil {
		if star != "*" {
			return nil, bad
		}
		return &Principals{Any: true}, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil || len(m) == 0 {
		return nil, bad
	}
	p := &Principals{}
	for typ, raw := range m {
		vals, ok := strs(raw)
		if !ok {
			return nil, bad
		}
		for _, s := range vals {
			switch {
			case typ == "CanonicalUser" && s != "" && !strings.ContainsAny(s, "*?"):
				p.Keys = append(p.Keys, s)
			case typ != "AWS":
				return nil, bad
			case s == "*":
				p.Any = true
			case isAccountID(s):
				p.Account = true
			default:
				acct, res, ok := strings.Cut(strings.TrimPrefix(s, "arn:aws:iam::"), ":")
				if !strings.HasPrefix(s, "arn:aws:iam::") || !ok || !isAccountID(acct) {
					return nil, bad
				}
				if res == "root" {
					p.Account = true
					continue
				}
				name, ok := strings.CutPrefix(res, "user/")
				if i := strings.LastIndexByte(name, '/'); i >= 0 {
					name = name[i+1:] // a path: user/division/name
				}
				if !ok || name == "" || strings.ContainsAny(name, "*?") {
					return nil, bad
				}
				p.Keys = append(p.Keys, name)
			}
		}
	}
	return p, nil
}

func isAccountID(s string) bool {
	if len(s) != 12 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// knownAction reports whether a (lower-case) action pattern names at least
// one S3 action.
func knownAction(a string) bool {
	if a == "*" {
		return true
	}
	if !strings.HasPrefix(a, "s3:") {
		return false
	}
	for name := range actionScopes {
		if Match(a, name) {
			return true
		}
	}
	return false
}

// validResource: an S3 ARN; in a bucket policy, one that can lie in bucket.
func validResource(r string, kind Kind, bucket string) bool {
	if r == "*" {
		return kind == Identity
	}
	rest, ok := strings.CutPrefix(r, arnPrefix)
	if !ok || rest == "" {
		return false
	}
	if kind == Identity {
		return true
	}
	b, _, _ := strings.Cut(rest, "/")
	return Match(b, bucket)
}

// resourceScopes reports whether a resource pattern can name a bucket and
// whether it can name an object.
func resourceScopes(r string) (bucket, object bool) {
	if r == "*" {
		return true, true
	}
	rest := strings.TrimPrefix(r, arnPrefix)
	if strings.Contains(rest, "/") {
		return false, true
	}
	return true, strings.HasSuffix(rest, "*")
}

func appliesToAny(actions, resources []string) bool {
	for _, a := range actions {
		for name, scope := range actionScopes {
			if !Match(a, name) {
				continue
			}
			for _, r := range resources {
				b, o := resourceScopes(r)
				if (scope == ScopeObject && o) || (scope != ScopeObject && b) {
					return true
				}
			}
		}
	}
	return false
}

// Evaluate decides r under p.
func (p *Policy) Evaluate(r Request) Decision {
	d := NoMatch
	for i := range p.Statements {
		st := &p.Statements[i]
		if !st.applies(r) {
			continue
		}
		if st.Effect == Deny {
			return Denied
		}
		d = Allowed
	}
	return d
}

func (st *Statement) applies(r Request) bool {
	if st.Principals != nil && st.Principals.match(r.Principal) == st.NotPrincipal {
		return false
	}
	if matchAny(st.Actions, strings.ToLower(r.Action)) == st.NotAction {
		return false
	}
	resources := st.Resources
	if st.vars {
		resources = expandAll(resources, r.Context)
	}
	if matchAny(resources, r.Resource) == st.NotResource {
		return false
	}
	for _, c := range st.Conditions {
		if !c.eval(r.Context) {
			return false
		}
	}
	return true
}

// expandAll substitutes policy variables; a pattern with an unresolved one
// is left out (it matches nothing).
func expandAll(patterns []string, ctx map[string][]string) []string {
	out := make([]string, 0, len(patterns))
	for _, p := range patterns {
		if e, ok := expand(p, ctx); ok {
			out = append(out, e)
		}
	}
	return out
}

func (p *Principals) match(who Principal) bool {
	if p.Any {
		return true
	}
	if who.Anonymous {
		return false
	}
	if p.Account {
		return true
	}
	for _, k := range p.Keys {
		if k == who.Key {
			return true
		}
	}
	return false
}

func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if Match(p, s) {
			return true
		}
	}
	return false
}

// Match reports whether s matches pattern, where "*" matches any run of
// characters and "?" any one character (the policy language's wildcards).
func Match(pattern, s string) bool {
	if strings.IndexByte(pattern, '?') >= 0 && !ascii(s) {
		return match([]rune(pattern), []rune(s)) // "?" is one character, not one byte
	}
	return match([]byte(pattern), []byte(s))
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func match[E byte | rune](pattern, s []E) bool {
	px, sx := 0, 0
	star, mark := -1, 0
	for sx < len(s) {
		switch {
		case px < len(pattern) && (pattern[px] == '?' || pattern[px] == s[sx]):
			px++
			sx++
		case px < len(pattern) && pattern[px] == '*':
			star, mark = px, sx
			px++
		case star >= 0:
			px = star + 1
			mark++
			sx = mark
		default:
			return false
		}
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}
