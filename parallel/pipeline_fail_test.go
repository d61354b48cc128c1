package parallel

import (
	"errors"
	"fmt"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// TestPipelineFailureLeavesNothing makes a stage of Forward or
// ForwardBackward fail on a later micro-batch, after the last stage has
// made the outputs of the earlier ones: the error comes back, and nothing
// of the failed pass stays on any device; for Forward, with gradients on
// (the outputs hold graphs) or off.
func TestPipelineFailureLeavesNothing(t *testing.T) {
	devs := []vram.Device{vram.Sim(0), vram.Sim(1), vram.Sim(2)}
	for _, tt := range []struct {
		stage, call int // the stage that fails, on its call-th micro-batch (from 1)
	}{{0, 3}, {1, 2}, {2, 3}, {2, 4}} {
		for _, run := range []string{"Forward", "Forward in NoGrad", "ForwardBackward"} {
			t.Run(fmt.Sprintf("%s/stage %d micro-batch %d", run, tt.stage, tt.call), func(t *testing.T) {
				mods := []nn.Module{nn.NewLinear(2, 3), nn.NewLinear(3, 3), nn.NewLinear(3, 2)}
				defer func() {
					for _, m := range mods {
						nn.Release(m)
					}
				}()
				calls := 0
				inner := mods[tt.stage]
				mods[tt.stage] = &stageFunc{f: func(x *vram.Tensor) *vram.Tensor {
					if calls++; calls == tt.call {
						panic(&vram.Error{Op: "stage", Kind: vram.ErrShape, Detail: "refused"})
					}
					return inner.Forward(x)
				}}
				mods[tt.stage].(*stageFunc).RegisterModule("inner", inner)
				var stages []Stage
				for s, m := range mods {
					stages = append(stages, Stage{m, devs[s]})
				}
				p, err := NewPipeline(stages, MicroBatches(4))
				if err != nil {
					t.Fatal(err)
				}
				x := vram.Ones(vram.Shape{8, 2})
				defer x.Release()
				memtest.Settle(devs...)
				before := make([]int64, len(devs))
				for i, d := range devs {
					before[i] = vram.MemoryAllocated(d)
				}
				err = vram.Catch(func() {
					switch run {
					case "Forward":
						p.Forward(x).Release()
					case "Forward in NoGrad":
						vram.NoGrad(func() { p.Forward(x).Release() })
					default:
						y := vram.Zeros(vram.Shape{8, 2})
						defer y.Release()
						p.ForwardBackward(x, y, nn.MSELoss)
					}
				})
				if !errors.Is(err, vram.ErrShape) {
					t.Fatalf("%s with a failing stage: %v", run, err)
				}
				// No Settle here: a tensor left to the garbage collector
				// is a leak (reported as one), however it ends.
				for i, d := range devs {
					if after := vram.MemoryAllocated(d); after != before[i] {
						t.Errorf("the failed pass left %d bytes on %v", after-before[i], d)
					}
				}
			})
		}
	}
}
