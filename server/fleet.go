package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/metrics"
	"github.com/s3gate/s3gate/store/pg"
)

// fleetRefusal is the static half of the fleet-validity predicate (ADR 009):
// metadata on PostgreSQL AND (large content in that PostgreSQL — pgchunks or
// pglo — OR the local engine on media declared shared). Its error is one
// line that names the clause that failed. The declared media is then proven
// shared by probeSharedMedia.
func fleetRefusal(cfg config.Config) error {
	if !cfg.Fleet {
		return nil
	}
	if cfg.DatabaseURL == "" {
		return config.Errorf("FLEET", "fleet mode needs metadata on PostgreSQL (%s): the embedded default serves one process only", config.Name("DATABASE_URL"))
	}
	if cfg.LargeEngine == config.EngineLocal && !cfg.SharedMedia {
		return config.Errorf("FLEET", "fleet mode with %s=local needs media that every instance shares: mount %s on shared storage (NFS, CephFS) and set %s=true, or keep large content in PostgreSQL (pgchunks, pglo)",
			config.Prefix+"LARGE_ENGINE", config.Prefix+"DATA_DIR", config.Prefix+"SHARED_MEDIA")
	}
	return nil
}

// mediaMarkerFile is the marker of the shared-media probe, under DATA_DIR.
const mediaMarkerFile = "fleet-media-marker"

// probeSharedMedia proves that DATA_DIR is the media every fleet instance
// uses: the first instance writes a random marker file there and records it
// in the database; every later one must find the recorded marker in its own
// DATA_DIR, or it refuses to start (one line naming the clause).
func (s *Server) probeSharedMedia(ctx context.Context, eng *pg.Engine) error {
	path := filepath.Join(s.cfg.DataDir, mediaMarkerFile)
	err := eng.ProbeMediaMarker(ctx, s.InstanceID(), func(rec *pg.MediaMarker) (string, error) {
		if rec == nil {
			marker := randomMarker()
			if err := writeSynced(path, marker+"\n"); err != nil {
				return "", fmt.Errorf("write %s: %w", path, err)
			}
			s.log.Info("shared media: marker written; later instances must see it", "path", path)
			return marker, nil
		}
		b, err := os.ReadFile(path)
		got := strings.TrimSpace(string(b))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", config.Errorf("SHARED_MEDIA", "%s is not the shared media of this fleet: the marker that instance %s wrote at %s is missing here (%s)",
				config.Prefix+"DATA_DIR", rec.WrittenBy, rec.At.UTC().Format(time.RFC3339), path)
		case err != nil:
			return "", fmt.Errorf("read %s: %w", path, err)
		case got != rec.Marker:
			return "", config.Errorf("SHARED_MEDIA", "%s is not the shared media of this fleet: %s holds another marker than the one instance %s wrote at %s",
				config.Prefix+"DATA_DIR", path, rec.WrittenBy, rec.At.UTC().Format(time.RFC3339))
		}
		return "", nil
	})
	var refusal *config.SettingError
	if errors.As(err, &refusal) {
		return refusal // the one line, without the transaction's wrapping
	}
	return err
}

func randomMarker() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go >= 1.24)
	return hex.EncodeToString(b[:])
}

// writeSynced writes a file durably: a temporary file, fsynced, renamed into
// place, and its directory fsynced.
func writeSynced(path, data string) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".marker-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.WriteString(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp) // the write error is the one to report
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// register enters this instance into the fleet's registry (fleet mode only)
// and heartbeats it until Close, which deregisters it.
func (s *Server) register(ctx context.Context) error {
	reg, err := fleet.Register(ctx, fleet.RegistryConfig{
		Session: fleet.SessionConfig{DSN: s.cfg.DirectURL()},
		TTL:     time.Duration(s.cfg.InstanceTTL),
		Metrics: s.regMetrics,
		OnError: func(err error) { s.log.Warn("fleet registry", "err", err) },
	})
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	s.registry = reg
	s.log.Info("fleet mode: registered; serving reads and writes beside the other instances (no writer claim)",
		"instance", reg.ID(), "instance_ttl", reg.TTL())
	s.onClose("deregister from the fleet", func() error {
		ctx, cancel := context.WithDeadline(context.Background(), s.deadline(5*time.Second))
		defer cancel()
		return reg.Close(ctx)
	})
	return nil
}

// InstanceID is this instance's id in the fleet's registry (the owner of
// its row pins); "" outside fleet mode.
func (s *Server) InstanceID() fleet.InstanceID {
	if s.registry == nil {
		return ""
	}
	return s.registry.ID()
}

// registerFleetMetrics exports fleet mode's state: whether it is on, the
// registry's size as this instance last saw it, and failed heartbeats.
func (s *Server) registerFleetMetrics(reg prometheus.Registerer) error {
	m := s.regMetrics
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: "fleet_mode",
			Help: "1 when the instance runs in fleet mode (" + config.Prefix + "FLEET=true), 0 otherwise."},
			func() float64 {
				if s.cfg.Fleet {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "fleet", Name: "instances",
			Help: "Live registrations in the fleet's registry (this instance included) at its last heartbeat; 0 outside fleet mode."},
			func() float64 { return float64(m.Live.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "fleet", Name: "heartbeat_failures_total",
			Help: "Registry heartbeats of this instance that failed, or found the registration reaped."},
			func() float64 { return float64(m.HeartbeatFailures.Load()) }),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: fleet: %w", err)
		}
	}
	return nil
}
