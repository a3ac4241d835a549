package policy

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Keys are the condition keys s3gate fills in (lower case): the request's
// values, or absent. s3:ExistingObjectTag/<tag> is filled with the object's
// tags by the caller (UsesExistingObjectTag) and absent for an untagged
// object, so that a StringEquals on it does not match and a StringNotEquals
// (or an ...IfExists) does, as AWS evaluates a key a request lacks.
var Keys = map[string]bool{
	"aws:securetransport": true, "aws:sourceip": true, "aws:referer": true,
	"aws:username": true, "aws:userid": true, "aws:currenttime": true, "aws:epochtime": true,
	"aws:useragent": true, "aws:principaltype": true,
	"s3:prefix": true, "s3:delimiter": true, "s3:max-keys": true, "s3:x-amz-acl": true,
	"s3:authtype": true, "s3:signatureversion": true, "s3:x-amz-content-sha256": true,
}

// ExistingObjectTagPrefix starts the tag keys; the tag's key follows, lower
// case (condition keys are compared folded).
const ExistingObjectTagPrefix = "s3:existingobjecttag/"

// UsesExistingObjectTag reports whether a condition of p reads the object's
// tags, so that a caller reads them only when they matter.
func (p *Policy) UsesExistingObjectTag() bool {
	for _, st := range p.Statements {
		for _, c := range st.Conditions {
			if strings.HasPrefix(c.Key, ExistingObjectTagPrefix) {
				return true
			}
		}
	}
	return false
}

// Condition is one (operator, key, values) test of a Condition block.
type Condition struct {
	Op       string // base operator, e.g. "StringLike"
	IfExists bool
	Set      string // "", "ForAnyValue" or "ForAllValues"
	Key      string // lower case
	Values   []string
	vars     bool // Values use policy variables
}

// operators maps each base operator to its test of one context value against
// one policy value, and whether it is negated (true when no value matches).
var operators = map[string]struct {
	test   func(ctx, pol string) bool
	negate bool
	kind   string // "string", "numeric", "date", "bool", "ip", "null"
}{
	"StringEquals":              {func(c, p string) bool { return c == p }, false, "string"},
	"StringNotEquals":           {func(c, p string) bool { return c == p }, true, "string"},
	"StringEqualsIgnoreCase":    {strings.EqualFold, false, "string"},
	"StringNotEqualsIgnoreCase": {strings.EqualFold, true, "string"},
	"StringLike":                {func(c, p string) bool { return Match(p, c) }, false, "string"},
	"StringNotLike":             {func(c, p string) bool { return Match(p, c) }, true, "string"},
	"NumericEquals":             {numeric(func(c int) bool { return c == 0 }), false, "numeric"},
	"NumericNotEquals":          {numeric(func(c int) bool { return c == 0 }), true, "numeric"},
	"NumericLessThan":           {numeric(func(c int) bool { return c < 0 }), false, "numeric"},
	"NumericLessThanEquals":     {numeric(func(c int) bool { return c <= 0 }), false, "numeric"},
	"NumericGreaterThan":        {numeric(func(c int) bool { return c > 0 }), false, "numeric"},
	"NumericGreaterThanEquals":  {numeric(func(c int) bool { return c >= 0 }), false, "numeric"},
	"DateEquals":                {date(func(c int) bool { return c == 0 }), false, "date"},
	"DateNotEquals":             {date(func(c int) bool { return c == 0 }), true, "date"},
	"DateLessThan":              {date(func(c int) bool { return c < 0 }), false, "date"},
	"DateLessThanEquals":        {date(func(c int) bool { return c <= 0 }), false, "date"},
	"DateGreaterThan":           {date(func(c int) bool { return c > 0 }), false, "date"},
	"DateGreaterThanEquals":     {date(func(c int) bool { return c >= 0 }), false, "date"},
	"Bool":                      {strings.EqualFold, false, "bool"},
	"IpAddress":                 {inPrefix, false, "ip"},
	"NotIpAddress":              {inPrefix, true, "ip"},
	"Null":                      {nil, false, "null"},
}

func numeric(ok func(int) bool) func(c, p string) bool {
	return func(c, p string) bool {
		cv, err1 := strconv.ParseFloat(c, 64)
		pv, err2 := strconv.ParseFloat(p, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		switch {
		case cv < pv:
			return ok(-1)
		case cv > pv:
			return ok(1)
		}
		return ok(0)
	}
}

func date(ok func(int) bool) func(c, p string) bool {
	return func(c, p string) bool {
		ct, ok1 := parseDate(c)
		pt, ok2 := parseDate(p)
		if !ok1 || !ok2 {
			return false
		}
		return ok(ct.Compare(pt))
	}
}

// parseDate reads the ISO 8601 forms AWS accepts, or epoch seconds.
func parseDate(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05Z0700", "2006-01-02T15:04Z07:00", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0), true
	}
	return time.Time{}, false
}

func parsePrefix(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}

func inPrefix(c, p string) bool {
	pr, ok := parsePrefix(p)
	a, err := netip.ParseAddr(c)
	return ok && err == nil && pr.Contains(a.Unmap())
}

func parseConditions(v json.RawMessage, variables bool) ([]Condition, error) {
	var block map[string]map[string]json.RawMessage
	if err := json.Unmarshal(v, &block); err != nil {
		return nil, malformed("Invalid Condition block")
	}
	var out []Condition
	for opName, tests := range block {
		c := Condition{Op: opName}
		if set, rest, ok := strings.Cut(opName, ":"); ok {
			if set != "ForAnyValue" && set != "ForAllValues" {
				return nil, malformed("Invalid Condition type : %s", opName)
			}
			c.Set, c.Op = set, rest
		}
		if base, ok := strings.CutSuffix(c.Op, "IfExists"); ok && base != "Null" {
			c.Op, c.IfExists = base, true
		}
		op, ok := operators[c.Op]
		if !ok {
			return nil, malformed("Invalid Condition type : %s", opName)
		}
		for key, raw := range tests {
			c := c
			c.Key = strings.ToLower(key)
			if !Keys[c.Key] && !(strings.HasPrefix(c.Key, ExistingObjectTagPrefix) && len(c.Key) > len(ExistingObjectTagPrefix)) {
				return nil, malformed("Policy has an invalid condition key")
			}
			vals, err := condValues(raw)
			if err != nil {
				return nil, err
			}
			for _, val := range vals {
				has, valid := hasVariables(val)
				switch {
				case variables && has && (!valid || op.kind != "string"):
					return nil, malformed("Invalid Condition value %q for %s: unsupported policy variable", val, opName)
				case variables && has:
					c.vars = true
				case !validValue(op.kind, val):
					return nil, malformed("Invalid Condition value %q for %s", val, opName)
				}
			}
			c.Values = vals
			out = append(out, c)
		}
	}
	return out, nil
}

// condValues reads a condition's value or values: strings, numbers or
// booleans, as their text.
func condValues(raw json.RawMessage) ([]string, error) {
	var items []json.RawMessage
	if r := bytes.TrimSpace(raw); len(r) > 0 && r[0] == '[' {
		if json.Unmarshal(r, &items) != nil || len(items) == 0 {
			return nil, malformed("Invalid Condition block")
		}
	} else {
		items = []json.RawMessage{raw}
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		var v any
		if json.Unmarshal(it, &v) != nil {
			return nil, malformed("Invalid Condition block")
		}
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case float64, bool:
			out = append(out, strings.TrimSpace(string(it)))
		default:
			return nil, malformed("Invalid Condition block")
		}
	}
	return out, nil
}

func validValue(kind, v string) bool {
	switch kind {
	case "numeric":
		_, err := strconv.ParseFloat(v, 64)
		return err == nil
	case "date":
		_, ok := parseDate(v)
		return ok
	case "bool", "null":
		return strings.EqualFold(v, "true") || strings.EqualFold(v, "false")
	case "ip":
		_, ok := parsePrefix(v)
		return ok
	}
	return true
}

// eval tests the condition against the request's context. A key the
// request lacks fails a positive operator and passes a negated one;
// ...IfExists and ForAllValues pass it, ForAnyValue fails it; Null tests
// presence itself.
func (c Condition) eval(ctx map[string][]string) bool {
	vals, present := ctx[c.Key]
	present = present && len(vals) > 0
	op := operators[c.Op]
	if c.vars {
		c.Values = expandAll(c.Values, ctx)
	}
	if op.kind == "null" {
		want := strings.EqualFold(c.Values[0], "true")
		return want != present
	}
	if !present {
		switch {
		case c.IfExists || c.Set == "ForAllValues":
			return true
		case c.Set == "ForAnyValue":
			return false
		}
		return op.negate
	}
	matches := func(v string) bool {
		for _, p := range c.Values {
			if op.test(v, p) {
				return true
			}
		}
		return false
	}
	switch c.Set {
	case "ForAllValues":
		for _, v := range vals {
			if matches(v) == op.negate {
				return false
			}
		}
		return true
	default: // single-valued keys and ForAnyValue: any context value
		for _, v := range vals {
			if matches(v) != op.negate {
				return true
			}
		}
		return false
	}
}

// IsPublic reports whether p grants access to everyone, per AWS's meaning of
// "public": an Allow statement whose principal is "*" (or a NotPrincipal)
// and that no condition ties to fixed values. The fixed values s3gate
// recognizes are aws:SourceIp ranges (IpAddress, no wider than /8 for IPv4 or
// /32 for IPv6) and exact aws:username / aws:userid values (StringEquals).
func (p *Policy) IsPublic() bool {
	for _, st := range p.Statements {
		if st.Effect != Allow || st.Principals == nil || (!st.Principals.Any && !st.NotPrincipal) {
			continue
		}
		if !st.fixed() {
			return true
		}
	}
	return false
}

func (st *Statement) fixed() bool {
	for _, c := range st.Conditions {
		if c.IfExists || c.Set != "" {
			continue
		}
		switch {
		case c.Key == "aws:sourceip" && c.Op == "IpAddress":
			narrow := true
			for _, v := range c.Values {
				pr, _ := parsePrefix(v)
				if (pr.Addr().Is4() && pr.Bits() < 8) || (!pr.Addr().Is4() && pr.Bits() < 32) {
					narrow = false
				}
			}
			if narrow {
				return true
			}
		case (c.Key == "aws:username" || c.Key == "aws:userid") && c.Op == "StringEquals":
			return true
		}
	}
	return false
}
