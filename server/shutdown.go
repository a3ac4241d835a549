package server

import (
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/s3gate/s3gate/config"
)

// The shutdown budget. Everything after the signal (or the lost claim) ends
// within DRAIN_TIMEOUT (at most 120 s, ADR 004), on one deadline that Serve
// sets when it stops accepting. The HTTP drain may use all but the last
// tenth of it; what runs after the drain — the GC stop, the metrics
// listener's stop, Close's pool, pin session and claim — shares the rest, at
// least that tenth. A step not done by the deadline is logged and abandoned,
// not waited for: the process exits anyway, and its sockets close with it.
const afterDrainShare = 10 // 1/afterDrainShare of the budget is kept for after the drain

// part is one thing Close releases, with the name its log lines use.
type part struct {
	name  string
	close func() error
}

// onClose registers a part; Close releases the parts in reverse order.
func (s *Server) onClose(name string, close func() error) {
	s.parts = append(s.parts, part{name, close})
}

// release closes every part, newest first, each waited for until by.
func (s *Server) release(by time.Time) {
	for i := len(s.parts) - 1; i >= 0; i-- {
		s.within(by, s.parts[i].name, s.parts[i].close)
	}
	s.parts = nil
}

// startShutdown starts the budget (once) and returns its end.
func (s *Server) startShutdown() time.Time {
	end := time.Now().Add(time.Duration(s.cfg.DrainTimeout))
	s.stopBy.CompareAndSwap(nil, &end)
	return *s.stopBy.Load()
}

// deadline is when a step that takes at most d on its own must end: d from
// now, or the end of the budget if that comes first.
func (s *Server) deadline(d time.Duration) time.Time {
	by := time.Now().Add(d)
	if end := s.stopBy.Load(); end != nil && end.Before(by) {
		return *end
	}
	return by
}

// within runs step and waits for it until by; a step still running then is
// logged and left to finish (or hang) on its own.
func (s *Server) within(by time.Time, name string, step func() error) {
	done := make(chan error, 1) // buffered: an abandoned step still ends
	go func() {
		if s.stepHook != nil {
			s.stepHook(name)
		}
		done <- step()
	}()
	t := time.NewTimer(time.Until(by))
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			s.log.Error(name, "err", err)
		}
	case <-t.C:
		s.log.Error("shutdown step abandoned: not done within "+config.Prefix+"DRAIN_TIMEOUT",
			"step", name, "drain_timeout", time.Duration(s.cfg.DrainTimeout))
	}
}

// openRequests counts the connections with a request in progress (an
// http.Server's ConnState), for the drain's log lines.
type openRequests struct {
	mu     sync.Mutex
	active map[net.Conn]bool
}

// track is an http.Server's ConnState.
func (o *openRequests) track(c net.Conn, state http.ConnState) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if state == http.StateActive {
		if o.active == nil {
			o.active = map[net.Conn]bool{}
		}
		o.active[c] = true
		return
	}
	delete(o.active, c) // idle, closed or hijacked: no request in progress
}

// count is the number of requests in progress.
func (o *openRequests) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.active)
}
