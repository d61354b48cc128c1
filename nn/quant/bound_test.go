package quant_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/quant"
)

// TestQuantizedOutputBound checks a quantized Linear's output against the
// float layer's on random layers, dtypes and devices, with the bound that
// symmetric per-channel rounding guarantees: each weight moves by at most
// half a step, scale[n]/2 = max_k|w[n,k]|/254, so output n moves by at
// most max_k|w[n,k]|/254 · Σ_k|x_k|, plus the rounding of the dtype's own
// arithmetic.
func TestQuantizedOutputBound(t *testing.T) {
	tests := []struct {
		in, out int
		dt      vram.DType
		dev     vram.Device
		bias    bool
		eps     float64 // the dtype's relative rounding, times a margin
	}{
		{16, 8, vram.Float32, vram.CPU, true, 1e-5},
		{64, 33, vram.Float32, vram.Sim(0), true, 1e-5},
		{7, 5, vram.Float64, vram.CPU, false, 1e-12},
		{128, 16, vram.Float64, vram.Sim(0), true, 1e-12},
		{32, 4, vram.Float16, vram.CPU, true, 4e-3},
		{32, 4, vram.BFloat16, vram.CPU, false, 3e-2},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%dx%d %s %s", tt.in, tt.out, tt.dt, tt.dev), func(t *testing.T) {
			g := vram.WithGenerator(vram.NewGenerator(uint64(tt.in*100 + tt.out)))
			var l *nn.Linear
			if tt.bias {
				l = nn.NewLinear(tt.in, tt.out, g, tt.dev, tt.dt)
			} else {
				l = nn.NewLinearNoBias(tt.in, tt.out, g, tt.dev, tt.dt)
			}
			defer nn.Release(l)
			// One row of zeros and one row much larger than the rest.
			vram.NoGrad(func() {
				vram.Tidy(func() {
					l.Weight.Narrow(0, 0, 1).FillInPlace(0)
					l.Weight.Narrow(0, 1, 1).MulScalarInPlace(1000)
				})
			})
			w := l.Weight.Float64s()
			x := vram.Randn(vram.Shape{6, tt.in}, g, tt.dev, tt.dt)
			defer x.Release()
			xs := x.Float64s()
			var ref []float64
			vram.NoGrad(func() { vram.Tidy(func() { ref = l.Forward(x).Float64s() }) })
			if err := quant.QuantizeLinear(l); err != nil {
				t.Fatal(err)
			}
			var got []float64
			vram.NoGrad(func() { vram.Tidy(func() { got = l.Forward(x).Float64s() }) })
			for r := range 6 {
				for n := range tt.out {
					var amax, l1, mag float64
					for k := range tt.in {
						amax = math.Max(amax, math.Abs(w[n*tt.in+k]))
						l1 += math.Abs(xs[r*tt.in+k])
						mag += math.Abs(w[n*tt.in+k] * xs[r*tt.in+k])
					}
					bound := amax/254*l1 + tt.eps*(mag+math.Abs(ref[r*tt.out+n])+amax/254*l1)
					if d := math.Abs(got[r*tt.out+n] - ref[r*tt.out+n]); !(d <= bound) {
						t.Errorf("row %d output %d: %v, float %v, off by %g > bound %g", r, n, got[r*tt.out+n], ref[r*tt.out+n], d, bound)
					}
				}
			}
		})
	}
}

// TestQuantizedForwardModes checks a quantized model under NoGrad and
// autocast, on the CPU and a sim device: the output has the dtype the
// mode gives, requires grad only with grad mode on, and the gradient
// reaches the input.
func TestQuantizedForwardModes(t *testing.T) {
	tests := []struct {
		name     string
		run      func(f func())
		wantDT   vram.DType
		wantGrad bool
	}{
		{"grad mode", func(f func()) { f() }, vram.Float32, true},
		{"NoGrad", vram.NoGrad, vram.Float32, false},
		{"autocast bfloat16", func(f func()) { vram.Autocast(vram.BFloat16, f) }, vram.BFloat16, true},
		{"autocast float16 under NoGrad", func(f func()) { vram.NoGrad(func() { vram.Autocast(vram.Float16, f) }) }, vram.Float16, false},
	}
	for _, d := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tt := range tests {
			t.Run(d.String()+"/"+tt.name, func(t *testing.T) {
				g := vram.WithGenerator(vram.NewGenerator(21))
				model := nn.NewSequential(nn.NewLinear(8, 16, g, d), nn.NewReLU(), nn.NewLinear(16, 4, g, d))
				defer nn.Release(model)
				if _, err := quant.Quantize(model); err != nil {
					t.Fatal(err)
				}
				x := vram.Randn(vram.Shape{3, 8}, g, d).SetRequiresGrad(true)
				defer x.Release()
				err := vram.Catch(func() {
					tt.run(func() {
						vram.Tidy(func() {
							y := model.Forward(x)
							if y.DType() != tt.wantDT || y.RequiresGrad() != tt.wantGrad {
								t.Errorf("output %s, requires grad %v; want %s, %v", y.DType(), y.RequiresGrad(), tt.wantDT, tt.wantGrad)
							}
							if tt.wantGrad {
								y.Float().Sum().Backward()
							}
						})
					})
				})
				if err != nil {
					t.Fatal(err)
				}
				if got := x.Grad() != nil; got != tt.wantGrad {
					t.Errorf("input gradient %v, want %v", got, tt.wantGrad)
				}
			})
		}
	}
}
