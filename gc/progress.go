package gc

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// IsTerminal reports whether w is a character device (a terminal), where a
// redrawn progress bar makes sense; pipes and files get plain lines.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Progress reports the advance of one phase of a long task (a sweep, a
// check): on a terminal as a bar redrawn in place, otherwise as a plain line
// at most every PlainEvery and at the end. It is safe for concurrent use.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	label string
	unit  string // "" counts items; "B" counts bytes
	total int64
	done  int64
	last  time.Time
	now   func() time.Time
	ended bool
}

// PlainEvery is the least interval between two plain progress lines.
const PlainEvery = 5 * time.Second

// redrawEvery bounds how often a terminal bar is redrawn.
const redrawEvery = 100 * time.Millisecond

// NewProgress starts a phase called label with total units to do (0 if
// unknown). unit is "" for items or "B" for bytes. A nil w discards.
func NewProgress(w io.Writer, label string, total int64, unit string) *Progress {
	if w == nil {
		w = io.Discard
	}
	return &Progress{w: w, tty: IsTerminal(w), label: label, unit: unit, total: total, now: time.Now}
}

// Add records n more units done.
func (p *Progress) Add(n int64) {
	if p == nil || n == 0 { // nothing new to report
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	t := p.now()
	every := PlainEvery
	if p.tty {
		every = redrawEvery
	}
	if t.Sub(p.last) >= every {
		p.last = t
		p.drawLocked(false)
	}
}

// Done ends the phase with a final line.
func (p *Progress) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.ended = true
	p.drawLocked(true)
}

func (p *Progress) drawLocked(final bool) {
	count := p.format(p.done)
	if p.total > 0 {
		count += "/" + p.format(p.total)
	}
	if !p.tty {
		state := ""
		if final {
			state = " done"
		}
		fmt.Fprintf(p.w, "%s: %s%s\n", p.label, count, state)
		return
	}
	const width = 30
	bar := strings.Repeat("-", width)
	pct := ""
	if p.total > 0 {
		frac := min(float64(p.done)/float64(p.total), 1)
		fill := int(frac * width)
		bar = strings.Repeat("#", fill) + strings.Repeat("-", width-fill)
		pct = fmt.Sprintf(" %3.0f%%", frac*100)
	}
	end := ""
	if final {
		end = "\n"
	}
	// \r and erase-to-end-of-line redraw the same terminal line.
	fmt.Fprintf(p.w, "\r%s [%s]%s %s\x1b[K%s", p.label, bar, pct, count, end)
}

func (p *Progress) format(n int64) string {
	if p.unit == "B" {
		return FormatBytes(n)
	}
	return fmt.Sprint(n)
}

// FormatBytes renders n bytes with a binary unit (1.5 MiB).
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
