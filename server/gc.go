package server

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/gc"
)

// startGC runs online GC under the lease while ctx lives (PostgreSQL only;
// S3GATE_GC_INTERVAL=0 disables it). The returned channel closes when it stopped.
func (s *Server) startGC(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	p, ok := s.engine.(interface{ Pool() *pgxpool.Pool })
	if !ok || s.cfg.GCInterval <= 0 {
		close(done)
		return done
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.work, cancel) // lost ownership stops GC too
	go func() {
		defer close(done)
		defer stop()
		defer cancel()
		r, err := gc.NewRunner(ctx, p.Pool(), s.media, s.gcOptions())
		if err != nil {
			s.log.Error("online GC not started", "err", err)
			return
		}
		if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error("online GC stopped", "err", err)
		}
	}()
	return done
}

func (s *Server) gcOptions() gc.Options {
	return gc.Options{
		Interval:     time.Duration(s.cfg.GCInterval),
		Grace:        time.Duration(s.cfg.GCGrace),
		UploadExpiry: time.Duration(s.cfg.UploadExpiry),
		Media:        s.media,
		Logger:       s.log,
	}
}
