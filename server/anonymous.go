package server

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/s3gate/s3gate/metrics"
)

// registerAnonymousMetrics registers s3gate_anonymous_requests_total and
// returns the s3api hook that counts them.
func registerAnonymousMetrics(reg prometheus.Registerer) (func(op string, status int), error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Name: "anonymous_requests_total",
		Help: "S3 requests without a signature (evaluated against bucket policies), by operation and status class; they are also counted in s3gate_requests_total.",
	}, []string{"operation", "status_class"})
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("metrics: anonymous requests: %w", err)
	}
	return func(op string, status int) {
		class := "aborted"
		if status > 0 {
			class = strconv.Itoa(status/100) + "xx"
		}
		c.WithLabelValues(op, class).Inc()
	}, nil
}
