package bench

import (
	"testing"

	"github.com/s3gate/s3gate/internal/pgtest"
)

// TestMain stops the throwaway PostgreSQL server that the gateways and the
// baselines share once the benchmarks end.
func TestMain(m *testing.M) { pgtest.Main(m) }
