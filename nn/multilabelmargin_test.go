package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// refMultiLabelMargin returns PyTorch's multilabel_margin_loss of each
// row of x [n, c] for the targets y, which end at the first -1.
func refMultiLabelMargin(x []float64, y []int64, c int) []float64 {
	n := len(x) / c
	out := make([]float64, n)
	for s := range n {
		row, tgt := x[s*c:(s+1)*c], y[s*c:(s+1)*c]
		listed := make([]bool, c)
		var js []int64
		for _, k := range tgt {
			if k == -1 {
				break
			}
			listed[k] = true
			js = append(js, k)
		}
		for _, j := range js {
			for i := range c {
				if !listed[i] {
					out[s] += math.Max(0, 1-(row[j]-row[i])) / float64(c)
				}
			}
		}
	}
	return out
}

// MultiLabelMarginLoss gives PyTorch's values for 1-D and 2-D inputs with
// every reduction, on the CPU and a simulated device: only the targets
// before the first -1 count (later ones, -1 or not, are ignored), a
// repeated target counts twice, as in PyTorch, and the gradient matches
// finite differences.
func TestMultiLabelMarginLoss(t *testing.T) {
	x := []float64{0.1, 0.2, 0.4, 0.8, -0.5, 1.3, 0.05, -2, 0.7, 0.33, 1.9, -0.45}
	cases := []struct {
		name  string
		shape vram.Shape
		y     []int64
	}{
		{"PyTorch's example", vram.Shape{1, 4}, []int64{3, 0, -1, 1}},
		{"one sample 1-D", vram.Shape{4}, []int64{3, 0, -1, 1}},
		{"no targets", vram.Shape{4}, []int64{-1, 0, 1, 2}},
		{"every class", vram.Shape{4}, []int64{0, 1, 2, 3}},
		{"batch", vram.Shape{3, 4}, []int64{3, 0, -1, 1, 2, -1, -1, -1, 1, 1, 0, -1}},
		{"batch without targets", vram.Shape{2, 3}, []int64{-1, 2, 0, -1, -1, -1}},
	}
	for _, c := range cases {
		n := c.shape.NumElements()
		per := refMultiLabelMargin(x[:n], c.y, c.shape[len(c.shape)-1])
		var sum float64
		for _, v := range per {
			sum += v
		}
		for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
			t.Run(dev.String()+" "+c.name, func(t *testing.T) {
				vram.Tidy(func() {
					in := vram.FromSlice(x[:n], c.shape, dev)
					y := vram.FromSlice(c.y, c.shape, dev)
					none := nn.MultiLabelMarginLoss(in, y, nn.ReductionNone)
					if want := c.shape[:len(c.shape)-1]; none.Device() != dev || none.Dim() != len(want) {
						t.Fatalf("none: %v on %v, want %v on %v", none.Shape(), none.Device(), want, dev)
					}
					checkValues(t, "none", none.Float64s(), per, 1e-12)
					checkValues(t, "sum", []float64{nn.MultiLabelMarginLoss(in, y, nn.ReductionSum).Item()}, []float64{sum}, 1e-12)
					checkValues(t, "mean", []float64{nn.MultiLabelMarginLoss(in, y, nn.ReductionMean).Item()}, []float64{sum / float64(len(per))}, 1e-12)
					if dev == vram.CPU {
						finiteDifferences(t, func() *vram.Tensor { return nn.MultiLabelMarginLoss(in, y, nn.ReductionNone) }, in)
					}
				})
			})
		}
	}
	// An empty batch sums to 0 and averages to NaN, as in PyTorch.
	empty := vram.Zeros(vram.Shape{0, 3})
	ey := vram.Zeros(vram.Shape{0, 3}, vram.Int64)
	if s, m := nn.MultiLabelMarginLoss(empty, ey, nn.ReductionSum).Item(), nn.MultiLabelMarginLoss(empty, ey, nn.ReductionMean).Item(); s != 0 || !math.IsNaN(m) {
		t.Errorf("empty batch: sum %v and mean %v, want 0 and NaN", s, m)
	}
	// PyTorch's documented example: 0.85.
	got := nn.MultiLabelMarginLoss(vram.FromSlice([]float64{0.1, 0.2, 0.4, 0.8}, vram.Shape{1, 4}),
		vram.FromSlice([]int64{3, 0, -1, 1}, vram.Shape{1, 4}), nn.ReductionMean).Item()
	if math.Abs(got-0.85) > 1e-12 {
		t.Errorf("PyTorch's example: %v, want 0.85", got)
	}
}

// MultiLabelMarginLoss keeps the dtype of 16-bit scores and names itself
// in its errors, which have the right kind; the inputs stay as they were.
func TestMultiLabelMarginLossDTypesAndErrors(t *testing.T) {
	h := vram.FromSlice([]float32{0.1, 0.2, 0.4, 0.8}, vram.Shape{4}, vram.Float16)
	if l := nn.MultiLabelMarginLoss(h, vram.FromSlice([]int64{3, 0, -1, 1}, vram.Shape{4}), nn.ReductionMean); l.DType() != vram.Float16 || math.Abs(l.Item()-0.85) > 1e-3 {
		t.Errorf("float16: %v %v, want float16 0.85", l.DType(), l.Item())
	}
	x := vram.FromSlice([]float64{0.1, 0.2, 0.4, 0.8, 1, 2}, vram.Shape{2, 3})
	y := vram.FromSlice([]int64{2, -1, 0, 1, 0, -1}, vram.Shape{2, 3})
	cases := []struct {
		name string
		x, y *vram.Tensor
		r    nn.Reduction
		want error
	}{
		{"nil input", nil, y, nn.ReductionMean, vram.ErrArgument},
		{"nil target", x, nil, nn.ReductionMean, vram.ErrArgument},
		{"reduction", x, y, nn.Reduction(7), vram.ErrArgument},
		{"scalar input", vram.Scalar(1.0), vram.FromSlice([]int64{0}, vram.Shape{1}).Reshape(), nn.ReductionMean, vram.ErrShape},
		{"3-D input", x.Reshape(1, 2, 3), y.Reshape(1, 2, 3), nn.ReductionMean, vram.ErrShape},
		{"no classes", vram.Zeros(vram.Shape{2, 0}), vram.Zeros(vram.Shape{2, 0}, vram.Int64), nn.ReductionMean, vram.ErrShape},
		{"target shape", x, y.Reshape(3, 2), nn.ReductionMean, vram.ErrShape},
		{"int32 target", x, y.Cast(vram.Int32), nn.ReductionMean, vram.ErrDType},
		{"integer input", x.Cast(vram.Int64), y, nn.ReductionMean, vram.ErrDType},
		{"target too big", x, vram.FromSlice([]int64{3, -1, 0, 0, 0, 0}, vram.Shape{2, 3}), nn.ReductionMean, vram.ErrIndex},
		{"target below -1", x, vram.FromSlice([]int64{0, -2, 0, 0, 0, 0}, vram.Shape{2, 3}), nn.ReductionMean, vram.ErrIndex},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := vram.Catch(func() { nn.MultiLabelMarginLoss(c.x, c.y, c.r) })
			var ve *vram.Error
			if !errors.Is(err, c.want) || !errors.As(err, &ve) || ve.Op != "multilabel_margin_loss" {
				t.Fatalf("got %v, want a multilabel_margin_loss error of kind %v", err, c.want)
			}
		})
	}
	checkValues(t, "input after the errors", x.Float64s(), []float64{0.1, 0.2, 0.4, 0.8, 1, 2}, 0)
	// The entries after the first -1 may be anything: they are ignored.
	ok := vram.FromSlice([]int64{2, -1, 7, 1, -1, -5}, vram.Shape{2, 3})
	if err := vram.Catch(func() { nn.MultiLabelMarginLoss(x, ok, nn.ReductionMean) }); err != nil {
		t.Fatalf("entries after the first -1: %v", err)
	}
}
