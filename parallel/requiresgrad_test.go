package parallel

import (
	"slices"
	"testing"
	"time"

	"github.com/vramgo/vram"
)

// TestCollectivesWriteTensorsThatRequireGrad: every communicator writes
// the result into a tensor that requires grad (a parameter, say, whose
// values a broadcast replaces) with gradients on, as NCCL's collectives
// and PyTorch's do, rather than refusing it as an in-place operation once
// the other ranks have their results.
func TestCollectivesWriteTensorsThatRequireGrad(t *testing.T) {
	ops := []struct {
		name string
		run  func(c Communicator, a, b *vram.Tensor) error // a: 2 elements, b: 4
		got  func(a, b *vram.Tensor) []float32             // what rank 1 checks
		want []float32
	}{
		{"all_reduce", func(c Communicator, a, _ *vram.Tensor) error { return c.AllReduce(a, Sum) },
			func(a, _ *vram.Tensor) []float32 { return a.Float32s() }, []float32{3, 3}},
		{"broadcast", func(c Communicator, a, _ *vram.Tensor) error { return c.Broadcast(a, 0) },
			func(a, _ *vram.Tensor) []float32 { return a.Float32s() }, []float32{1, 1}},
		{"reduce", func(c Communicator, a, _ *vram.Tensor) error { return c.Reduce(a, Max, 1) },
			func(a, _ *vram.Tensor) []float32 { return a.Float32s() }, []float32{2, 2}},
		{"all_gather", func(c Communicator, a, b *vram.Tensor) error { return c.AllGather(b, a) },
			func(_, b *vram.Tensor) []float32 { return b.Float32s() }, []float32{1, 1, 2, 2}},
		{"reduce_scatter", func(c Communicator, a, b *vram.Tensor) error { return c.ReduceScatter(a, b, Sum) },
			func(a, _ *vram.Tensor) []float32 { return a.Float32s() }, []float32{3, 3}},
		{"send and recv", func(c Communicator, a, _ *vram.Tensor) error {
			if c.Rank() == 0 {
				return c.Send(a, 1)
			}
			return c.Recv(a, 0)
		}, func(a, _ *vram.Tensor) []float32 { return a.Float32s() }, []float32{1, 1}},
	}
	for _, b := range cpuBackends {
		for _, op := range ops {
			t.Run(b.name+"/"+op.name, func(t *testing.T) {
				comms := b.make(t, 10*time.Second)
				defer func() {
					for _, c := range comms {
						c.Close()
					}
				}()
				var got []float32
				errs := eachRank(comms, func(c Communicator) error {
					a := vram.Full(vram.Shape{2}, float64(c.Rank()+1), c.Device())
					defer a.Release()
					b := vram.Full(vram.Shape{4}, float64(c.Rank()+1), c.Device())
					defer b.Release()
					a.SetRequiresGrad(true)
					b.SetRequiresGrad(true)
					if err := op.run(c, a, b); err != nil {
						return err
					}
					if c.Rank() == 1 {
						got = op.got(a, b)
					}
					return nil
				})
				noErrors(t, errs)
				if !slices.Equal(got, op.want) {
					t.Errorf("rank 1 holds %v, want %v", got, op.want)
				}
			})
		}
	}
}
