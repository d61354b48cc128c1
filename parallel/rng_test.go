package parallel

import (
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestDataParallelDropoutRepeats: replicas that draw dropout masks at once
// on their devices draw from each device's own generator, so a run seeded
// with ManualSeed gives the same outputs and weights every time, however
// the replicas' goroutines interleave (run with -race).
func TestDataParallelDropoutRepeats(t *testing.T) {
	defer vram.ManualSeed(0)
	tests := []struct {
		name string
		devs []vram.Device
	}{
		{"two sim devices", simDevs(2)},
		{"three sim devices", simDevs(3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := func() (outs, params []uint32) {
				vram.ManualSeed(9)
				m := nn.NewSequential(nn.NewLinear(4, 16), nn.NewReLU(), nn.NewDropout(0.5), nn.NewLinear(16, 2))
				defer nn.Release(m)
				dp, err := NewDataParallel(m, tt.devs)
				if err != nil {
					t.Fatal(err)
				}
				defer dp.Release()
				opt, err := dp.Optimizer(dpOptimizers["sgd"])
				if err != nil {
					t.Fatal(err)
				}
				defer opt.Release()
				for range 3 {
					vram.Tidy(func() {
						x, y := vram.Randn(vram.Shape{12, 4}), vram.Randn(vram.Shape{12, 2})
						out := dp.Forward(x)
						for _, v := range out.Float32s() {
							outs = append(outs, math.Float32bits(v))
						}
						nn.MSELoss(out, y.To(out.Device())).Backward()
						opt.Step()
						opt.ZeroGrad()
					})
				}
				for _, p := range m.Parameters() {
					for _, v := range p.Float32s() {
						params = append(params, math.Float32bits(v))
					}
				}
				return outs, params
			}
			wantOuts, wantParams := run()
			for i := range 4 {
				outs, params := run()
				if !slices.Equal(outs, wantOuts) {
					t.Fatalf("run %d: the outputs differ from the first run's", i+2)
				}
				if !slices.Equal(params, wantParams) {
					t.Fatalf("run %d: the weights differ from the first run's", i+2)
				}
			}
		})
	}
}

// TestPipelineDropoutRepeats: pipeline stages on two devices draw their
// dropout masks at once, each from its device's generator, so a seeded
// run repeats bit for bit under either schedule (run with -race).
func TestPipelineDropoutRepeats(t *testing.T) {
	defer vram.ManualSeed(0)
	for _, sched := range []Schedule{GPipe, OneFOneB} {
		t.Run(sched.String(), func(t *testing.T) {
			run := func() (got []uint64) {
				vram.ManualSeed(13)
				stages := []Stage{
					{Module: nn.NewSequential(nn.NewLinear(4, 8), nn.NewDropout(0.5)), Device: vram.Sim(0)},
					{Module: nn.NewSequential(nn.NewDropout(0.5), nn.NewLinear(8, 3)), Device: vram.Sim(1)},
				}
				p, err := NewPipeline(stages, MicroBatches(4), WithSchedule(sched))
				if err != nil {
					t.Fatal(err)
				}
				defer nn.Release(p)
				for range 2 {
					vram.Tidy(func() {
						x, y := vram.Randn(vram.Shape{8, 4}), vram.Randn(vram.Shape{8, 3})
						got = append(got, math.Float64bits(p.ForwardBackward(x, y, nn.MSELoss)))
						for _, q := range p.Parameters() {
							for _, v := range q.Grad().Float32s() {
								got = append(got, uint64(math.Float32bits(v)))
							}
						}
					})
				}
				return got
			}
			want := run()
			for i := range 3 {
				if got := run(); !slices.Equal(got, want) {
					t.Fatalf("run %d: the losses or gradients differ from the first run's", i+2)
				}
			}
		})
	}
}
