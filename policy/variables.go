package policy

import "strings"

// Policy variables (Version 2012-10-17 only): ${key} in a Resource or a
// condition value stands for the request's value of key. Only keys whose
// values cannot carry a wildcard may be used, so that a substituted value
// never widens a pattern; ${*}, ${?} and ${$} (literal characters) are not
// supported. Another ${...} is MalformedPolicy. In a 2008-10-17 document
// "${" is plain text, as on AWS.
var variableKeys = map[string]bool{
	"aws:username": true, "aws:userid": true, "aws:principaltype": true, "aws:sourceip": true,
	"aws:securetransport": true, "aws:currenttime": true, "aws:epochtime": true,
}

// hasVariables reports whether s uses ${...}, and whether each use names a
// variable s3gate resolves.
func hasVariables(s string) (has, valid bool) {
	valid = true
	for rest := s; ; {
		i := strings.Index(rest, "${")
		if i < 0 {
			return has, valid
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return true, false
		}
		has = true
		valid = valid && variableKeys[strings.ToLower(rest[i+2:i+j])]
		rest = rest[i+j+1:]
	}
}

// expand substitutes the variables of s from ctx; ok is false when one has
// no value in the request (the pattern then matches nothing).
func expand(s string, ctx map[string][]string) (string, bool) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), true
		}
		j := strings.IndexByte(s[i:], '}')
		v := ctx[strings.ToLower(s[i+2:i+j])]
		if len(v) == 0 {
			return "", false
		}
		b.WriteString(s[:i])
		b.WriteString(v[0])
		s = s[i+j+1:]
	}
}
