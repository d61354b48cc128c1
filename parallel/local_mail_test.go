package parallel

import (
	"errors"
	"testing"
	"time"

	"github.com/vramgo/vram"
)

// TestLocalUnreceivedSendsReleased: the copies that Send queued for a
// rank that never received them are released once that rank can no
// longer receive them (its communicator closed), whether the group ended
// first or not, and a Send to a closed rank keeps nothing.
func TestLocalUnreceivedSendsReleased(t *testing.T) {
	tests := []struct {
		name  string
		abort bool // rank 1 aborts the group before the ranks close
		late  bool // rank 0 sends once more after rank 1 closed
	}{
		{"closed", false, false},
		{"aborted, then closed", true, false},
		{"a send after the receiver closed", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			devs := simDevs(2)
			comms, err := NewLocalGroupOptions(devs, LocalOptions{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			before := vram.MemoryAllocated(devs[0])
			x := vram.Full(vram.Shape{1024}, 1, devs[0])
			for range 3 {
				if err := comms[0].Send(x, 1); err != nil {
					t.Fatal(err)
				}
			}
			x.Release()
			if tt.abort {
				comms[1].Abort(errors.New("stop"))
			}
			if err := comms[1].Close(); err != nil {
				t.Fatal(err)
			}
			if tt.late {
				y := vram.Full(vram.Shape{1024}, 1, devs[0])
				if err := comms[0].Send(y, 1); err == nil {
					t.Error("a send to a closed rank succeeded")
				}
				y.Release()
			}
			if err := comms[0].Close(); err != nil {
				t.Fatal(err)
			}
			// More than before is a leak (less can be garbage of earlier
			// tests that the collector released meanwhile).
			if got := vram.MemoryAllocated(devs[0]); got > before {
				t.Errorf("%v: %d bytes allocated once the ranks closed, %d before the sends", devs[0], got, before)
			}
		})
	}
}
