package parallel

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// TestDataParallelFailureLeavesNothing makes one replica fail in Forward
// and ForwardLoss while the others succeed: the error names the replica,
// and what the others made (outputs, losses and their graphs) does not
// stay on any device.
func TestDataParallelFailureLeavesNothing(t *testing.T) {
	devs := []vram.Device{vram.Sim(0), vram.Sim(1), vram.Sim(2)}
	for _, bad := range devs {
		for _, tt := range []struct {
			name string
			call func(dp *DataParallelModule, x *vram.Tensor)
		}{
			{"Forward", func(dp *DataParallelModule, x *vram.Tensor) { dp.Forward(x).Release() }},
			{"Forward in NoGrad", func(dp *DataParallelModule, x *vram.Tensor) {
				vram.NoGrad(func() { dp.Forward(x).Release() })
			}},
			{"ForwardLoss", func(dp *DataParallelModule, x *vram.Tensor) { dp.ForwardLoss(x, x, nn.MSELoss).Release() }},
		} {
			t.Run(tt.name+"/failing on "+bad.String(), func(t *testing.T) {
				p := &panicky{bad: bad}
				p.w = vram.Keep(vram.Ones(vram.Shape{3}, vram.WithGrad()))
				p.RegisterParameter("w", p.w)
				defer p.w.Release()
				dp, err := NewDataParallel(p, devs)
				if err != nil {
					t.Fatal(err)
				}
				defer dp.Release()
				x := vram.Ones(vram.Shape{6, 3})
				defer x.Release()
				memtest.Settle(devs...)
				before := make([]int64, len(devs))
				for i, d := range devs {
					before[i] = vram.MemoryAllocated(d)
				}
				err = vram.Catch(func() { tt.call(dp, x) })
				if !errors.Is(err, vram.ErrShape) {
					t.Fatalf("a failing replica: %v", err)
				}
				// No Settle here: a tensor left to the garbage collector
				// is a leak (reported as one), however it ends.
				for i, d := range devs {
					if after := vram.MemoryAllocated(d); after != before[i] {
						t.Errorf("the failed call left %d bytes on %v", after-before[i], d)
					}
				}
			})
		}
	}
}
