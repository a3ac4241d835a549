package metrics

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StatusAborted is the status_class of a request whose handler gave up
// mid-answer (it panicked, for example with http.ErrAbortHandler after a lost
// pin): the client saw a cut connection, not a status.
const StatusAborted = "aborted"

// Middleware counts the requests that next serves. operation names a
// request's S3 operation (s3api.ResolveOperation); it must return a small,
// fixed set of names, because each one becomes a label value. Bytes are
// counted as they flow, so that the byte counters of a long transfer move
// while it runs.
func (m *Metrics) Middleware(next http.Handler, operation func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		op := operation(r)
		m.inFlight.Inc()
		rw := &responseWriter{ResponseWriter: w, bytes: m.bytesOut.WithLabelValues(op)}
		if r.Body != nil && r.Body != http.NoBody {
			// http.NoBody stays as it is: handlers may compare against it.
			r.Body = &countingBody{ReadCloser: r.Body, bytes: m.bytesIn.WithLabelValues(op)}
		}
		defer func() {
			rec := recover()
			m.inFlight.Dec()
			class := statusClass(rw.status)
			if rec != nil {
				class = StatusAborted
			}
			m.requests.WithLabelValues(op, class).Inc()
			m.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
			if rec != nil {
				panic(rec) // net/http cuts the connection (and logs other panics)
			}
		}()
		next.ServeHTTP(rw, r)
	})
}

// statusClass maps a final status to "2xx", "4xx", ...; a handler that wrote
// nothing answered 200.
func statusClass(code int) string {
	if code == 0 {
		code = http.StatusOK
	}
	if code < 100 || code > 599 {
		return "other"
	}
	return strconv.Itoa(code/100) + "xx"
}

// countingBody counts the request body bytes the handler reads.
type countingBody struct {
	io.ReadCloser
	bytes prometheus.Counter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.bytes.Add(float64(n))
	}
	return n, err
}

// responseWriter records the final status and counts the body bytes written.
// Unwrap lets http.ResponseController reach the real writer (per-write
// deadlines, flushing, full duplex); Flush keeps plain http.Flusher type
// assertions working.
type responseWriter struct {
	http.ResponseWriter
	status int
	bytes  prometheus.Counter
}

func (w *responseWriter) WriteHeader(code int) {
	// 1xx answers (100 Continue, 103 Early Hints) are not the final status.
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	if n > 0 {
		w.bytes.Add(float64(n))
	}
	return n, err
}

// ReadFrom keeps the writer's sendfile path (a file section handed over by
// a GET stream), counting what it wrote.
func (w *responseWriter) ReadFrom(src io.Reader) (int64, error) {
	rf, ok := w.ResponseWriter.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{w}, src)
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := rf.ReadFrom(src)
	if n > 0 {
		w.bytes.Add(float64(n))
	}
	return n, err
}

// Flush sends buffered data to the client, if the underlying writer can.
func (w *responseWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush() // http.Flusher has no error to report
}

// Unwrap returns the wrapped writer (for http.ResponseController).
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
