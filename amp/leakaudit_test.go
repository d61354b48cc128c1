package amp_test

import (
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// TestScaledStepsReleaseWhatTheyMake trains a small model under autocast
// with a GradScaler, through clean and overflowing steps, and checks that
// the library released everything it made on the way: no storage stays
// live, none is left for the garbage collector, and the allocator's count
// of a simulated device returns to where it was.
func TestScaledStepsReleaseWhatTheyMake(t *testing.T) {
	tests := []struct {
		name string
		dt   vram.DType
		x    float64 // input value: large ones overflow float16
	}{
		{"bfloat16", vram.BFloat16, 1},
		{"float16", vram.Float16, 1},
		{"float16 overflowing", vram.Float16, 6e4},
	}
	for _, d := range []vram.Device{vram.CPU, vram.Sim(0)} {
		memtest.Settle(d)
		for _, tc := range tests {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				before, allocated := vram.Storage(d), vram.MemoryAllocated(d)
				m := nn.NewSequential(nn.NewLinear(3, 4), nn.NewGELU(), nn.NewLayerNorm([]int{4}, 1e-5), nn.NewLinear(4, 2))
				m.To(d)
				opt, err := optim.NewAdamW(m.Parameters(), optim.AdamConfig{})
				if err != nil {
					t.Fatal(err)
				}
				s, err := amp.NewGradScaler(amp.GradScalerConfig{GrowthInterval: 1})
				if err != nil {
					t.Fatal(err)
				}
				x := vram.Full(vram.Shape{2, 3}, tc.x, d)
				target := vram.Zeros(vram.Shape{2, 2}, d)
				for range 3 {
					var loss *vram.Tensor
					amp.Autocast(tc.dt, func() {
						y := m.Forward(x)
						loss = nn.MSELoss(y, target)
						y.Release()
					})
					scaled := s.Scale(loss)
					scaled.Backward()
					if _, err := s.Unscale(m.Parameters()); err != nil {
						t.Fatal(err)
					}
					optim.ClipGradNorm(m.Parameters(), 1)
					s.Step(opt, m.Parameters())
					s.Update()
					opt.ZeroGrad()
					scaled.Release()
					loss.Release()
				}
				opt.Release()
				nn.Release(m)
				x.Release()
				target.Release()
				after := vram.Storage(d)
				if after.LiveBytes != before.LiveBytes || after.Allocs-before.Allocs != after.Frees-before.Frees ||
					after.Leaked != before.Leaked || vram.MemoryAllocated(d) != allocated {
					t.Errorf("%s: %d storages made, %d freed, %d left to the collector; %d bytes live, %d before",
						d, after.Allocs-before.Allocs, after.Frees-before.Frees, after.Leaked-before.Leaked, after.LiveBytes, before.LiveBytes)
				}
			})
		}
	}
}
