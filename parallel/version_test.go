package parallel

import (
	"testing"

	"github.com/vramgo/vram"
)

// checkWriteVersions runs each collective of a one-rank communicator and
// checks that it counts a write in the version of every tensor it writes,
// and of no tensor it only reads (the root's tensor of a broadcast), as
// PyTorch's in-place collectives do: a
// graph that saved a tensor a collective replaced must refuse to
// backpropagate, and one that saved a tensor a collective only read must
// not.
func checkWriteVersions(t *testing.T, c Communicator, dev vram.Device) {
	tests := []struct {
		name  string
		run   func(a, b *vram.Tensor) error // a has 2 elements, b has 2·Size
		wantA bool                          // a's version moves
		wantB bool
	}{
		{"all-reduce", func(a, _ *vram.Tensor) error { return c.AllReduce(a, Sum) }, true, false},
		{"broadcast from the root", func(a, _ *vram.Tensor) error { return c.Broadcast(a, 0) }, false, false},
		{"reduce to the root", func(a, _ *vram.Tensor) error { return c.Reduce(a, Sum, 0) }, true, false},
		{"all-gather", func(a, b *vram.Tensor) error { return c.AllGather(b, a) }, false, true},
		{"reduce-scatter", func(a, b *vram.Tensor) error { return c.ReduceScatter(a, b, Sum) }, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := vram.Ones(vram.Shape{2}, dev)
			defer a.Release()
			b := vram.Ones(vram.Shape{2 * c.Size()}, dev)
			defer b.Release()
			va, vb := a.Version(), b.Version()
			if err := tc.run(a, b); err != nil {
				t.Fatal(err)
			}
			vram.Synchronize(dev)
			if moved := a.Version() != va; moved != tc.wantA {
				t.Errorf("version of the first tensor %d → %d, want a change: %v", va, a.Version(), tc.wantA)
			}
			if moved := b.Version() != vb; moved != tc.wantB {
				t.Errorf("version of the second tensor %d → %d, want a change: %v", vb, b.Version(), tc.wantB)
			}
		})
	}
}

func TestCollectiveWriteVersions(t *testing.T) {
	comms, err := NewLocalGroup([]vram.Device{vram.CPU})
	if err != nil {
		t.Fatal(err)
	}
	defer comms[0].Close()
	checkWriteVersions(t, comms[0], vram.CPU)
}

func TestNCCLWriteVersionsGPU(t *testing.T) {
	dev := requireNCCL(t)
	comms, err := NewNCCLGroup([]vram.Device{dev})
	if err != nil {
		t.Fatal(err)
	}
	defer comms[0].Close()
	checkWriteVersions(t, comms[0], dev)
}
