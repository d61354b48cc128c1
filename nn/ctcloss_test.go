package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// CTCLoss combines the samples' losses as PyTorch does: 'mean' divides
// each by its target length, at least 1, then averages; 'sum' adds them;
// 'none' returns them. zeroInfinity turns an impossible sample into 0.
func TestCTCLossReductions(t *testing.T) {
	lp := vram.Randn(vram.Shape{4, 3, 3}, vram.Float64, vram.WithGenerator(vram.NewGenerator(3))).LogSoftmax(2)
	tg := vram.FromSlice([]int64{1, 2, 1, 2, 0, 0, 1, 1, 0}, vram.Shape{3, 3})
	in := vram.FromSlice([]int64{4, 3, 2}, vram.Shape{3})
	tl := vram.FromSlice([]int64{3, 0, 2}, vram.Shape{3})
	per := vram.CTCLoss(lp, tg, in, tl, 0, false).Float64s()
	if !math.IsInf(per[2], 1) {
		t.Fatalf("sample 2 needs 3 steps for 1 1 but has 2: loss %v, want +Inf", per[2])
	}
	zi := []float64{per[0], per[1], 0}
	cases := []struct {
		name string
		r    nn.Reduction
		zi   bool
		want []float64
	}{
		{"none", nn.ReductionNone, false, per},
		{"none zero infinity", nn.ReductionNone, true, zi},
		{"sum", nn.ReductionSum, false, []float64{math.Inf(1)}},
		{"sum zero infinity", nn.ReductionSum, true, []float64{zi[0] + zi[1]}},
		{"mean zero infinity", nn.ReductionMean, true, []float64{(zi[0]/3 + zi[1]/1 + 0) / 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := nn.CTCLoss(lp, tg, in, tl, 0, c.r, c.zi).Float64s()
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for i := range got {
				if !(got[i] == c.want[i] || math.Abs(got[i]-c.want[i]) < 1e-12) {
					t.Fatalf("got %v, want %v", got, c.want)
				}
			}
		})
	}
}

// CTCLoss with 'mean' reduction differentiates through the division by
// the target lengths, on the CPU and a simulated device with targets and
// lengths left on the CPU, and for one unbatched sample.
func TestCTCLossGradientAndDevices(t *testing.T) {
	tg := vram.FromSlice([]int64{1, 2, 2, 0}, vram.Shape{2, 2})
	in := vram.FromSlice([]int64{4, 3}, vram.Shape{2})
	tl := vram.FromSlice([]int64{2, 1}, vram.Shape{2})
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		t.Run(dev.String(), func(t *testing.T) {
			x := vram.Randn(vram.Shape{4, 2, 3}, vram.Float64, vram.WithGenerator(vram.NewGenerator(5)), dev)
			l := nn.CTCLoss(x, tg, in, tl, 0, nn.ReductionMean, false)
			if l.Device() != dev || l.Dim() != 0 {
				t.Fatalf("loss %v on %v, want a scalar on %v", l.Shape(), l.Device(), dev)
			}
			if dev != vram.CPU {
				return
			}
			finiteDifferences(t, func() *vram.Tensor { return nn.CTCLoss(x, tg, in, tl, 0, nn.ReductionMean, false) }, x)
			one := vram.Randn(vram.Shape{3, 3}, vram.Float64, vram.WithGenerator(vram.NewGenerator(6)))
			finiteDifferences(t, func() *vram.Tensor {
				return nn.CTCLoss(one, vram.FromSlice([]int64{2}, vram.Shape{1}), vram.FromSlice([]int64{3}, vram.Shape{1}).Reshape(),
					vram.FromSlice([]int64{1}, vram.Shape{1}).Reshape(), 0, nn.ReductionMean, false)
			}, one)
		})
	}
}

// CTCLoss's errors name ctc_loss and have the right kind, the reduction
// included.
func TestCTCLossArguments(t *testing.T) {
	lp := vram.Zeros(vram.Shape{2, 1, 3})
	tg := vram.FromSlice([]int64{1}, vram.Shape{1, 1})
	one := vram.FromSlice([]int64{1}, vram.Shape{1})
	cases := []struct {
		name string
		f    func()
		want error
	}{
		{"reduction", func() { nn.CTCLoss(lp, tg, one, one, 0, nn.Reduction(9), false) }, vram.ErrArgument},
		{"nil targets", func() { nn.CTCLoss(lp, nil, one, one, 0, nn.ReductionMean, false) }, vram.ErrArgument},
		{"blank target", func() { nn.CTCLoss(lp, tg, one, one, 1, nn.ReductionMean, false) }, vram.ErrArgument},
		{"target out of range", func() {
			nn.CTCLoss(lp, vram.FromSlice([]int64{3}, vram.Shape{1, 1}), one, one, 0, nn.ReductionSum, false)
		}, vram.ErrIndex},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := vram.Catch(c.f)
			var ve *vram.Error
			if !errors.Is(err, c.want) || !errors.As(err, &ve) || ve.Op != "ctc_loss" {
				t.Fatalf("got %v, want a ctc_loss error of kind %v", err, c.want)
			}
		})
	}
}

// CTCLoss computes 16-bit log-probabilities in float32 and returns their
// dtype, or float32 inside an Autocast region, as PyTorch's autocast
// runs ctc_loss in float32; the gradient comes back in the input's dtype.
func TestCTCLossHalf(t *testing.T) {
	lp := vram.Randn(vram.Shape{3, 1, 3}, vram.Float64, vram.WithGenerator(vram.NewGenerator(2))).LogSoftmax(2)
	tg := vram.FromSlice([]int64{1, 2}, vram.Shape{1, 2})
	in := vram.FromSlice([]int64{3}, vram.Shape{1})
	tl := vram.FromSlice([]int64{2}, vram.Shape{1})
	want := nn.CTCLoss(lp, tg, in, tl, 0, nn.ReductionMean, false).Item()
	for _, dt := range []vram.DType{vram.Float16, vram.BFloat16} {
		for _, ac := range []bool{false, true} {
			x := lp.Cast(dt).Detach().SetRequiresGrad(true)
			var l *vram.Tensor
			run := func() { l = nn.CTCLoss(x, tg, in, tl, 0, nn.ReductionMean, false) }
			wantDT := dt
			if ac {
				vram.Autocast(dt, run)
				wantDT = vram.Float32
			} else {
				run()
			}
			if l.DType() != wantDT || math.Abs(l.Item()-want) > 2e-2*math.Abs(want) {
				t.Errorf("%v autocast %v: %v %v, want %v %v", dt, ac, l.DType(), l.Item(), wantDT, want)
			}
			l.Backward()
			if g := x.Grad(); g == nil || g.DType() != dt {
				t.Errorf("%v autocast %v: gradient %v", dt, ac, g)
			}
		}
	}
}
