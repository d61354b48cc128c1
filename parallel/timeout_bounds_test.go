package parallel

import (
	"math"
	"testing"
	"time"

	"github.com/vramgo/vram"
)

// TestLongestTimeout: the longest timeout a Duration holds (a caller's
// "never time out") lets the collectives run as the default does, rather
// than overflow into a deadline already past when a rank adds its grace
// to it.
func TestLongestTimeout(t *testing.T) {
	const forever = time.Duration(math.MaxInt64)
	for _, b := range cpuBackends {
		t.Run(b.name, func(t *testing.T) {
			comms := b.make(t, forever)
			defer func() {
				for _, c := range comms {
					c.Close()
				}
			}()
			noErrors(t, eachRank(comms, func(c Communicator) error {
				x := vram.Full(vram.Shape{3}, float64(c.Rank()+1), c.Device())
				defer x.Release()
				if err := c.AllReduce(x, Sum); err != nil {
					return err
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				if c.Rank() == 0 {
					return c.Send(x, 1)
				}
				return c.Recv(x, 0)
			}))
		})
	}
}

// TestTimeoutGraceBounded: the grace a rank adds to a timeout, and rank 0
// sleeps after a failed join, stays within maxTimeoutGrace however long
// the timeout, and adding it never overflows.
func TestTimeoutGraceBounded(t *testing.T) {
	for _, d := range []time.Duration{0, time.Second, DefaultTimeout, time.Hour, math.MaxInt64 / 2, math.MaxInt64} {
		g := timeoutGrace(d)
		if g <= 0 || g > maxTimeoutGrace+250*time.Millisecond {
			t.Errorf("timeoutGrace(%v) = %v, want within (0, %v]", d, g, maxTimeoutGrace+250*time.Millisecond)
		}
		if w := graced(d); w < d || w <= 0 {
			t.Errorf("graced(%v) = %v, want at least the timeout", d, w)
		}
	}
	if g := timeoutGrace(DefaultTimeout); g != DefaultTimeout/4+250*time.Millisecond {
		t.Errorf("the default timeout's grace is %v, want %v as before", g, DefaultTimeout/4+250*time.Millisecond)
	}
}
