package metrics

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Version is the gateway's release, set by the command from its build-time
// version (s3gate version); it labels s3gate_build_info.
var Version = "dev"

// newBuildInfo returns s3gate_build_info: a constant 1 labelled with the
// release, the Go version and the source revision, so that a dashboard can
// show which build each instance runs and an alert can join on it.
func newBuildInfo() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help: "Always 1; the labels name the release, the Go version and the source revision (unknown: built without version control information).",
		ConstLabels: prometheus.Labels{
			"version": Version, "goversion": runtime.Version(), "revision": revision(),
		},
	}, func() float64 { return 1 })
}

// revision is the version control revision the binary was built from, with
// "-dirty" for a modified tree.
func revision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "unknown"
	}
	return rev + dirty
}
