package fleet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/s3gate/s3gate/throttle"
)

// gatedSource serves data, but after the first gateAt bytes it waits until
// gate is closed: the test decides that the loss happens between two quanta,
// without depending on timing.
type gatedSource struct {
	data   []byte
	off    int
	gateAt int
	gate   <-chan struct{}
}

func (g *gatedSource) Read(p []byte) (int, error) {
	if g.off >= len(g.data) {
		return 0, io.EOF
	}
	if g.off == g.gateAt {
		<-g.gate
	}
	end := min(len(g.data), g.off+len(p))
	if g.off < g.gateAt {
		end = min(end, g.gateAt)
	}
	n := copy(p, g.data[g.off:end])
	g.off += n
	return n, nil
}

// A paced stream guarded by a real pin stops at the first quantum after its
// session is lost (pg_terminate_backend, noticed by the checker goroutine), and
// what the reader got is an exact prefix of the content.
func TestPinnedStreamStopsOnLoss(t *testing.T) {
	dsn := pgtestDSN(t)
	adm := admin(t, dsn)
	p := newPins(t, PinsConfig{Session: fastCfg(dsn, "s3gate-pins")})
	pin, err := p.Acquire(tctx(t), 77)
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Release()
	lost := p.sess.Lost()

	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	const gateAt = 1 << 20
	src := &gatedSource{data: data, gateAt: gateAt, gate: lost}
	g, err := throttle.New(throttle.Config{PerRequest: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	r := g.NewReader(context.Background(), src, Guard(pin))

	var got bytes.Buffer
	if _, err := io.CopyN(&got, r, gateAt); err != nil {
		t.Fatalf("before the loss: %v", err)
	}
	terminate(t, adm, p.BackendPID())
	_, err = io.Copy(&got, r) // the source resumes only once the loss is known
	if !errors.Is(err, ErrPinLost) {
		t.Fatalf("stream ended with %v, want ErrPinLost", err)
	}
	if got.Len() != gateAt {
		t.Errorf("got %d bytes, want exactly the %d released before the loss", got.Len(), gateAt)
	}
	if !bytes.Equal(got.Bytes(), data[:got.Len()]) {
		t.Error("delivered bytes are not a prefix of the content")
	}
}
