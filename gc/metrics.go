package gc

import (
	"sync/atomic"
	"time"
)

// Metrics are GC's counters and gauges as plain atomics, so that the caller
// exports them (Prometheus CounterFunc/GaugeFunc) without this package
// depending on a metrics library. Set Options.Metrics to have the Runner,
// RunOnce and Offline record into it; every method is safe on a nil receiver.
type Metrics struct {
	// SweepsRun counts runs that completed and were counted (lease still
	// held at Finish); SweepsFailed those that stopped with an error or were
	// not counted.
	SweepsRun    atomic.Int64
	SweepsFailed atomic.Int64
	// BlobsReclaimed and BytesReclaimed count blob rows deleted and their
	// sizes, failed runs included (what was deleted stays deleted).
	BlobsReclaimed atomic.Int64
	BytesReclaimed atomic.Int64
	// UploadsAborted counts expired multipart uploads removed.
	UploadsAborted atomic.Int64
	// OrphansFound counts crash leftovers removed: large objects without a
	// blob, stage files, blob files without a row.
	OrphansFound atomic.Int64
	// LeaseHeld is a gauge: 1 while this instance holds the GC lease.
	LeaseHeld atomic.Int64
	// LeaseAcquired counts grants taken, LeaseBusy attempts that found the
	// lease held elsewhere, LeaseLost grants lost before their run finished.
	LeaseAcquired atomic.Int64
	LeaseBusy     atomic.Int64
	LeaseLost     atomic.Int64
	// LastSweepUnix is the Unix time (seconds) of the last counted run; 0
	// before the first.
	LastSweepUnix atomic.Int64
}

// record adds what a run reclaimed.
func (m *Metrics) record(st Stats) {
	if m == nil {
		return
	}
	m.BlobsReclaimed.Add(st.BlobsDeleted)
	m.BytesReclaimed.Add(st.BytesReclaimed)
	m.UploadsAborted.Add(st.UploadsAborted)
	m.OrphansFound.Add(st.StagesReaped + st.LargeObjectsUnlinked + st.StageFilesRemoved + st.BlobFilesRemoved)
}

// finished counts a run as done (ok) or failed.
func (m *Metrics) finished(ok bool, at time.Time) {
	if m == nil {
		return
	}
	if ok {
		m.SweepsRun.Add(1)
		m.LastSweepUnix.Store(at.Unix())
		return
	}
	m.SweepsFailed.Add(1)
}

func (m *Metrics) leaseAcquired() {
	if m == nil {
		return
	}
	m.LeaseAcquired.Add(1)
	m.LeaseHeld.Store(1)
}

func (m *Metrics) leaseReleased(lost bool) {
	if m == nil {
		return
	}
	m.LeaseHeld.Store(0)
	if lost {
		m.LeaseLost.Add(1)
	}
}

func (m *Metrics) leaseBusy() {
	if m == nil {
		return
	}
	m.LeaseBusy.Add(1)
}
