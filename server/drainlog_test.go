package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"
)

// logRecords is a slog handler that sends records to a channel (while it
// has room).
type logRecords chan slog.Record

func (r logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (r logRecords) Handle(_ context.Context, rec slog.Record) error {
	select {
	case r <- rec:
	default: // never block the gateway: a test reads a few records only
	}
	return nil
}
func (r logRecords) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r logRecords) WithGroup(string) slog.Handler      { return r }

// next returns the next record with message msg and its attributes.
func (r logRecords) next(t *testing.T, msg string) map[string]slog.Value {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case rec := <-r:
			if rec.Message != msg {
				continue
			}
			attrs := map[string]slog.Value{}
			rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value; return true })
			return attrs
		case <-timeout:
			t.Fatalf("no %q logged", msg)
		}
	}
}

// TestDrainLogged: the drain's start and end are logged with the number of
// requests still open: one slow PUT at the start, none at the end.
func TestDrainLogged(t *testing.T) {
	recs := make(logRecords, 1024)
	g := startGateway(t, gatewaySetup{env: []string{"S3GATE_DATA_DIR=" + t.TempDir(), "S3GATE_DRAIN_TIMEOUT=60s",
		"S3GATE_GC_INTERVAL=0"}, log: slog.New(recs)})
	content := bytes.Repeat([]byte("drain me "), 20000)
	pw, resps, errs := startSlowPut(t, g, content)
	g.cancel()
	if a := recs.next(t, "drain started: no new connections; waiting for the open requests"); a["open_requests"].Int64() != 1 {
		t.Fatalf("drain started with open_requests %v, want 1", a["open_requests"])
	}
	if _, err := pw.Write(content[len(content)/2:]); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	select {
	case resp := <-resps:
		_ = resp.Body.Close()
	case err := <-errs:
		t.Fatal(err)
	}
	if a := recs.next(t, "drain done"); a["open_requests"].Int64() != 0 {
		t.Fatalf("drain done with open_requests %v, want 0", a["open_requests"])
	}
	if err := <-g.served; err != nil {
		t.Fatal(err)
	}
}
