package pgtest

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Crash stops the server the way a crash does, as pg_ctl stop -m immediate
// does: SIGQUIT to the postmaster, which passes it on to every backend and
// background process, and each exits at once without writing anything more
// (no shutdown checkpoint, WAL buffers left unwritten); the next Start
// recovers by replaying the WAL. (SIGKILL of the postmaster alone would not
// do: each backend is a process group of its own and runs on until it
// notices the postmaster gone.) The kernel survives: what PostgreSQL had
// written to its files stays in the page cache, so the server's fsync=off
// loses nothing here that fsync would have kept; what is lost is what was
// still in PostgreSQL's own memory, as an asynchronous commit leaves it.
// Crash returns once the postmaster has exited, which it does after all its
// children. Crashing a stopped server does nothing.
func (s *Server) Crash() error {
	if !s.running() {
		return nil
	}
	p := s.s.cmd.Process
	if err := p.Signal(syscall.SIGQUIT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pgtest: signal postgres (pid %d) to crash: %w", p.Pid, err)
	}
	select {
	case <-s.s.exited:
		return nil
	case <-time.After(stopTimeout): // hang guard only: the postmaster kills stragglers after 5 s
	}
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pgtest: kill postgres (pid %d): %w", p.Pid, err)
	}
	<-s.s.exited
	return fmt.Errorf("pgtest: postgres (pid %d) ignored immediate shutdown for %s and was killed", p.Pid, stopTimeout)
}
