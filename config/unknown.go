package config

import (
	"sort"
	"strings"
)

// UnknownVar is an S3GATE_ variable of the environment that names no
// setting, with the nearest setting's variable when one is close (a typo).
type UnknownVar struct {
	Name    string
	Nearest string // empty when no setting's name is close
}

// unknownVars lists the variables of environ that start with the prefix (in
// any case) but name no setting, sorted by name.
func unknownVars(environ []string) []UnknownVar {
	var out []UnknownVar
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		key, ok := strings.CutPrefix(upper, Prefix)
		if !ok {
			continue
		}
		if _, known := helps[key]; known && upper == name {
			continue
		}
		u := UnknownVar{Name: name}
		best := -1
		for k := range helps {
			// Close: a few edits for a long name, fewer for a short one.
			if d := editDistance(key, k); d <= 1+len(k)/4 && (best < 0 || d < best || d == best && Prefix+k < u.Nearest) {
				best, u.Nearest = d, Prefix+k
			}
		}
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
