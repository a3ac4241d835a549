// Package metricsdoc reads docs/metrics.md, the operator's reference of the
// gateway's metrics, for the tests that hold it, the dashboard and the alert
// rules to what the gateway exports.
package metricsdoc

import (
	"fmt"
	"os"
	"regexp"
)

// row matches a documented metric: a table row whose first cell is
// `s3gate_name`.
var row = regexp.MustCompile("(?m)^\\| `(s3gate_[a-z0-9_]+)`")

// Names returns the metric families the doc at path lists.
func Names(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("metrics doc: %w", err)
	}
	names := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		names[m[1]] = true
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("metrics doc %s: no table row names a metric", path)
	}
	return names, nil
}
