package server

import (
	"context"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/s3gate/s3gate/metrics"
	"github.com/s3gate/s3gate/s3api"
	"github.com/s3gate/s3gate/store"
)

// identities resolves access keys for s3api's policy evaluation: the root
// key is the owner; other keys come from the key store on every request
// (uncached, like their secrets), with their shortcuts and policy.
type identities struct {
	root string
	keys store.KeyStore
}

var _ s3api.IdentitySource = identities{}

// Identity implements s3api.IdentitySource.
func (ids identities) Identity(ctx context.Context, accessKey string) (s3api.Identity, error) {
	if ids.root != "" && accessKey == ids.root {
		return s3api.Identity{Root: true}, nil
	}
	k, err := ids.keys.GetKey(ctx, accessKey)
	if err != nil {
		return s3api.Identity{}, fmt.Errorf("identity: %w", err)
	}
	return s3api.Identity{Buckets: k.Buckets, ReadOnly: k.ReadOnly, Policy: k.Policy}, nil
}

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
