package server

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/metrics"
	"github.com/s3gate/s3gate/throttle"
)

// runtimeParts are the pieces beside the engine that GET streams use: the
// bandwidth governor and the content pins, with their counters.
type runtimeParts struct {
	gov        *throttle.BandwidthGovernor
	pinMetrics *fleet.Metrics
	rowMetrics *fleet.RowPinMetrics // PIN_MODE=rows
	sessPins   *fleet.SessionPins   // PostgreSQL only
	localPins  *fleet.LocalPins     // embedded only
}

func (s *Server) openRuntime() error {
	gov, err := throttle.New(throttle.Config{
		Global:     int64(s.cfg.BandwidthGlobal),
		PerRequest: int64(s.cfg.BandwidthPerRequest),
	})
	if err != nil {
		return fmt.Errorf("%sBANDWIDTH_*: %w", config.Prefix, err)
	}
	s.rt.gov = gov
	s.onClose("close bandwidth governor", func() error { gov.Close(); return nil })
	s.rt.pinMetrics = &fleet.Metrics{}
	s.rt.rowMetrics = &fleet.RowPinMetrics{}
	return nil
}

// openSessionPins opens the pin session's adapter (the session itself opens on
// first use and after a loss, once every old pin is released).
func (s *Server) openSessionPins() error {
	pins, err := fleet.NewSessionPins(fleet.PinsConfig{
		// The plain URL: the session is a dedicated connection, not a pool.
		Session: fleet.SessionConfig{DSN: s.cfg.DirectURL(), Metrics: s.rt.pinMetrics},
		MaxPins: s.cfg.MaxPins,
		OnError: func(err error) { s.log.Error("content pins", "err", err) },
	})
	if err != nil {
		return fmt.Errorf("content pins: %w", err)
	}
	s.rt.sessPins = pins
	s.onClose("close content pins", pins.Close)
	return nil
}

// registerRuntimeMetrics exports the pin and pacing counters.
func registerRuntimeMetrics(reg prometheus.Registerer, pm *fleet.Metrics, tm *throttle.Metrics) error {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: name, Help: help}, f)
	}
	load := func(v interface{ Load() int64 }) func() float64 { return func() float64 { return float64(v.Load()) } }
	cs := []prometheus.Collector{
		gauge("pins_held", "Distinct blobs this instance pins (one advisory lock each).", load(&pm.PinsHeld)),
		gauge("pin_refs", "Live pin handles (streams); several streams share one pin.", load(&pm.PinRefs)),
		counter("pins_refused_total", "Pin requests refused by the per-instance cap (answered 503 SlowDown).", load(&pm.PinsRefused)),
		counter("pin_session_checks_total", "Liveness checks of the pin session.", load(&pm.Checks)),
		counter("pin_session_check_failures_total", "Failed liveness checks of the pin session.", load(&pm.CheckFailures)),
		counter("pin_session_losses_total", "Pin sessions lost; every pin of a lost session is invalid.", load(&pm.Losses)),
		counter("paced_bytes_total", "Bytes released to GET streams by the bandwidth governor.", load(&tm.PacedBytes)),
		counter("throttled_seconds_total", "Time GET streams waited for bandwidth.", func() float64 { return float64(tm.ThrottledNanos.Load()) / 1e9 }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: runtime: %w", err)
		}
	}
	return nil
}
