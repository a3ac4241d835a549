package s3api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// DefaultIdleTimeout is the default of Config.ReadIdleTimeout and
// Config.WriteIdleTimeout.
const DefaultIdleTimeout = 60 * time.Second

// writeSlice is the most bytes one write deadline covers: a client that takes
// at least this much per idle timeout is making progress and is never cut off
// in the middle of one large Write.
const writeSlice = 64 << 10

// idleBody is the request body with a per-read deadline: every Read may wait
// at most timeout for the client's next bytes. A server-wide ReadTimeout
// would bound the whole upload instead, cutting off large, healthy ones.
type idleBody struct {
	io.ReadCloser
	w        *respWriter
	rc       *http.ResponseController
	timeout  time.Duration
	timedOut atomic.Bool
	started  bool
	done     bool
}

// wrapIdleBody installs the idle read deadline on r's body (if it has one).
func wrapIdleBody(r *http.Request, w *respWriter, timeout time.Duration) *idleBody {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	b := &idleBody{ReadCloser: r.Body, w: w, rc: w.rc, timeout: timeout}
	r.Body = b
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	if !b.started {
		// The first read sends "100 Continue" if the client asked for it.
		b.started = true
		b.w.extend()
	}
	// ErrNotSupported (a writer without deadlines, e.g. in unit tests) leaves
	// the read unbounded, as it was before; nothing else can fail here.
	_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	n, err := b.ReadCloser.Read(p)
	if err == nil {
		return n, nil
	}
	b.done = true
	// The body is finished (EOF) or broken: clear the deadline, because
	// net/http's background read of the connection, which starts at the
	// body's EOF, would otherwise time out and cancel the request while it is
	// still being answered.
	_ = b.rc.SetReadDeadline(time.Time{})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		b.timedOut.Store(true)
		return n, fmt.Errorf("%w: no request body bytes for %s: %w", errRequestTimeout, b.timeout, err)
	}
	return n, err
}

// TimedOut reports whether a read of the body hit the idle timeout; nil-safe.
func (b *idleBody) TimedOut() bool { return b != nil && b.timedOut.Load() }
