package nn_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// bagTable is the [5, 2] table of the EmbeddingBag tests.
var bagTable = []float64{
	1, 2, // 0
	3, -1, // 1
	-2, 4, // 2
	0.5, 0.5, // 3
	10, -10, // 4
}

// newTestBag returns an EmbeddingBag of bagTable on dev with the options
// o; the padding row keeps bagTable's values, so a test sees it left out.
func newTestBag(o nn.EmbeddingBagOptions, dev vram.Device) *nn.EmbeddingBag {
	e := nn.NewEmbeddingBagOptions(5, 2, o, dev, vram.Float64)
	vram.NoGrad(func() { e.Weight.CopyFrom(vram.FromSlice(bagTable, vram.Shape{5, 2}, dev)) })
	return e
}

// TestEmbeddingBag checks each mode on 2-D input and on 1-D input with
// offsets, against results worked out by hand from PyTorch's documented
// rules: empty bags and bags of padding only give zeros, padding entries
// are not counted by a mean, and per-sample weights scale a sum.
func TestEmbeddingBag(t *testing.T) {
	tests := []struct {
		name    string
		o       nn.EmbeddingBagOptions
		input   []int64
		shape   vram.Shape
		offsets []int64 // nil for 2-D input
		psw     []float64
		want    []float64
	}{
		{"2-D sum", nn.EmbeddingBagOptions{Mode: "sum"}, []int64{0, 1, 2, 3}, vram.Shape{2, 2}, nil, nil, []float64{4, 1, -1.5, 4.5}},
		{"2-D mean by default", nn.EmbeddingBagOptions{}, []int64{0, 1, 2, 3}, vram.Shape{2, 2}, nil, nil, []float64{2, 0.5, -0.75, 2.25}},
		{"2-D max", nn.EmbeddingBagOptions{Mode: "max"}, []int64{0, 1, 2, 3}, vram.Shape{2, 2}, nil, nil, []float64{3, 2, 0.5, 4}},
		{"1-D sum, empty bag", nn.EmbeddingBagOptions{Mode: "sum"}, []int64{0, 1, 2, 3, 4}, vram.Shape{5}, []int64{0, 2, 2}, nil, []float64{4, 1, 0, 0, 8.5, -5.5}},
		{"1-D mean, empty bag", nn.EmbeddingBagOptions{Mode: "mean"}, []int64{0, 1, 2, 3, 4}, vram.Shape{5}, []int64{0, 2, 2}, nil, []float64{2, 0.5, 0, 0, 8.5 / 3, -5.5 / 3}},
		{"1-D max, empty bag", nn.EmbeddingBagOptions{Mode: "max"}, []int64{0, 1, 2, 3, 4}, vram.Shape{5}, []int64{0, 2, 2}, nil, []float64{3, 2, 0, 0, 10, 4}},
		{"include last offset", nn.EmbeddingBagOptions{Mode: "sum", IncludeLastOffset: true}, []int64{0, 1, 2, 3, 4}, vram.Shape{5}, []int64{0, 2, 2, 5}, nil, []float64{4, 1, 0, 0, 8.5, -5.5}},
		{"include last offset, one bag", nn.EmbeddingBagOptions{Mode: "max", IncludeLastOffset: true}, []int64{1, 2}, vram.Shape{2}, []int64{0, 2}, nil, []float64{3, 4}},
		{"empty first and last bags", nn.EmbeddingBagOptions{Mode: "mean"}, []int64{3}, vram.Shape{1}, []int64{0, 0, 1}, nil, []float64{0, 0, 0.5, 0.5, 0, 0}},
		{"empty input", nn.EmbeddingBagOptions{Mode: "max"}, []int64{}, vram.Shape{0}, []int64{0, 0}, nil, []float64{0, 0, 0, 0}},
		{"2-D empty bags max", nn.EmbeddingBagOptions{Mode: "max"}, []int64{}, vram.Shape{2, 0}, nil, nil, []float64{0, 0, 0, 0}},
		{"2-D empty bags mean", nn.EmbeddingBagOptions{Mode: "mean"}, []int64{}, vram.Shape{3, 0}, nil, nil, []float64{0, 0, 0, 0, 0, 0}},
		{"padding sum", nn.EmbeddingBagOptions{Mode: "sum", PaddingIdx: intp(4)}, []int64{0, 4, 1, 4, 4, 4}, vram.Shape{2, 3}, nil, nil, []float64{4, 1, 0, 0}},
		{"padding mean", nn.EmbeddingBagOptions{Mode: "mean", PaddingIdx: intp(4)}, []int64{0, 4, 1, 4, 4, 4}, vram.Shape{2, 3}, nil, nil, []float64{2, 0.5, 0, 0}},
		{"padding max", nn.EmbeddingBagOptions{Mode: "max", PaddingIdx: intp(-1)}, []int64{0, 4, 1, 4, 4, 4}, vram.Shape{2, 3}, nil, nil, []float64{3, 2, 0, 0}},
		{"padding mean 1-D", nn.EmbeddingBagOptions{Mode: "mean", PaddingIdx: intp(4)}, []int64{0, 4, 4, 4, 2, 3}, vram.Shape{6}, []int64{0, 2, 3}, nil, []float64{1, 2, 0, 0, -0.75, 2.25}},
		{"per-sample weights 1-D", nn.EmbeddingBagOptions{Mode: "sum"}, []int64{0, 1, 2}, vram.Shape{3}, []int64{0, 1}, []float64{2, -1, 0.5}, []float64{2, 4, -4, 3}},
		{"per-sample weights 2-D", nn.EmbeddingBagOptions{Mode: "sum"}, []int64{0, 1, 2, 2}, vram.Shape{2, 2}, nil, []float64{2, -1, 0.5, 1}, []float64{-1, 5, -3, 6}},
		{"per-sample weights and padding", nn.EmbeddingBagOptions{Mode: "sum", PaddingIdx: intp(1)}, []int64{0, 1, 2}, vram.Shape{3}, []int64{0, 1}, []float64{2, -1, 0.5}, []float64{2, 4, -1, 2}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				vram.Tidy(func() {
					e := newTestBag(tc.o, dev)
					x := vram.FromSlice(tc.input, tc.shape, vram.Int64, dev)
					var off, psw *vram.Tensor
					if tc.offsets != nil {
						off = vram.FromSlice(tc.offsets, vram.Shape{len(tc.offsets)}, dev)
					}
					if tc.psw != nil {
						psw = vram.FromSlice(tc.psw, tc.shape, dev)
					}
					y := e.ForwardBags(x, off, psw)
					if got, want := y.Shape(), (vram.Shape{len(tc.want) / 2, 2}); !slices.Equal(got, want) {
						t.Fatalf("shape %v, want %v", got, want)
					}
					if got := y.Float64s(); !allNear(got, tc.want, 1e-12) {
						t.Fatalf("got %v, want %v", got, tc.want)
					}
				})
			})
		}
	}
}

// allNear reports whether got and want have the same length and their
// elements are near within tol.
func allNear(got, want []float64, tol float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !near(got[i], want[i], tol) {
			return false
		}
	}
	return true
}

// TestEmbeddingBagGradients checks the gradients of Weight and of the
// per-sample weights with finite differences, with empty bags, bags of
// padding only and padding in a bag, in each mode.
func TestEmbeddingBagGradients(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(21))
	input := []int64{0, 4, 1, 4, 4, 2, 3, 1, 0}
	offsets := []int64{0, 3, 3, 5, 9}
	for _, mode := range []string{"sum", "mean", "max"} {
		for _, psw := range []bool{false, true} {
			if psw && mode != "sum" {
				continue
			}
			name := mode
			if psw {
				name += " with per-sample weights"
			}
			t.Run(name, func(t *testing.T) {
				e := nn.NewEmbeddingBagOptions(5, 3, nn.EmbeddingBagOptions{Mode: mode, PaddingIdx: intp(4), IncludeLastOffset: true}, vram.Float64)
				vram.NoGrad(func() { e.Weight.CopyFrom(vram.Randn(vram.Shape{5, 3}, vram.Float64, g)) })
				x := vram.FromSlice(input, vram.Shape{len(input)})
				off := vram.FromSlice(offsets, vram.Shape{len(offsets)})
				ts := []*vram.Tensor{e.Weight}
				var w *vram.Tensor
				if psw {
					w = vram.Randn(vram.Shape{len(input)}, vram.Float64, g)
					ts = append(ts, w)
				}
				finiteDifferences(t, func() *vram.Tensor { return e.ForwardBags(x, off, w) }, ts...)
				grad := e.Weight.Grad().Float64s()
				for _, v := range grad[12:15] {
					if v != 0 {
						t.Fatalf("padding row's gradient %v, want zeros", grad[12:15])
					}
				}
			})
		}
	}
}

// TestEmbeddingBagMaxNorm checks that max_norm renormalises the rows the
// input names in place, as Embedding does, before they are reduced.
func TestEmbeddingBagMaxNorm(t *testing.T) {
	e := newTestBag(nn.EmbeddingBagOptions{Mode: "sum", MaxNorm: 1}, vram.CPU)
	input := []int64{0, 3, 0}
	y := e.ForwardBags(vram.FromSlice(input, vram.Shape{3}), vram.FromSlice([]int64{0, 2}, vram.Shape{2}), nil)
	w := refRenorm(bagTable, 2, input, 1, 2)
	if got := e.Weight.Float64s(); !allNear(got, w, 1e-12) {
		t.Fatalf("weight %v, want %v", got, w)
	}
	want := []float64{w[0] + w[6], w[1] + w[7], w[0], w[1]}
	if got := y.Float64s(); !allNear(got, want, 1e-12) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestEmbeddingBagStateDict checks PyTorch's state-dict name and that the
// padding row starts as zeros.
func TestEmbeddingBagStateDict(t *testing.T) {
	e := nn.NewEmbeddingBagOptions(4, 3, nn.EmbeddingBagOptions{PaddingIdx: intp(-2)})
	sd := nn.StateDict(e)
	if len(sd) != 1 || sd["weight"] != e.Weight {
		t.Fatalf("state dict %v, want weight only", sd)
	}
	if got := e.Weight.Select(0, 2).Float64s(); !slices.Equal(got, []float64{0, 0, 0}) || *e.PaddingIdx != 2 {
		t.Fatalf("padding row %v (index %d), want zeros at 2", got, *e.PaddingIdx)
	}
	if got := e.Forward(vram.FromSlice([]int64{0, 1, 3}, vram.Shape{1, 3})).Shape(); !slices.Equal(got, vram.Shape{1, 3}) {
		t.Fatalf("shape %v", got)
	}
}

// TestEmbeddingBagErrors checks that bad arguments panic with an error
// of the right kind naming embedding_bag, and leave the weight as it was
// even with max_norm set.
func TestEmbeddingBagErrors(t *testing.T) {
	i64 := func(v []int64, s ...int) *vram.Tensor { return vram.FromSlice(v, vram.Shape(s)) }
	x1 := i64([]int64{0, 1, 2}, 3)
	x2 := i64([]int64{0, 1, 2, 3}, 2, 2)
	tests := []struct {
		name string
		o    nn.EmbeddingBagOptions
		edit func(*nn.EmbeddingBag)
		x    *vram.Tensor
		off  *vram.Tensor
		psw  *vram.Tensor
		kind error
	}{
		{"nil input", nn.EmbeddingBagOptions{}, nil, nil, nil, nil, vram.ErrArgument},
		{"1-D without offsets", nn.EmbeddingBagOptions{}, nil, x1, nil, nil, vram.ErrArgument},
		{"2-D with offsets", nn.EmbeddingBagOptions{}, nil, x2, i64([]int64{0}, 1), nil, vram.ErrArgument},
		{"3-D input", nn.EmbeddingBagOptions{}, nil, i64([]int64{0}, 1, 1, 1), nil, nil, vram.ErrShape},
		{"float input", nn.EmbeddingBagOptions{}, nil, vram.Zeros(vram.Shape{2, 2}), nil, nil, vram.ErrDType},
		{"2-D offsets", nn.EmbeddingBagOptions{}, nil, x1, i64([]int64{0}, 1, 1), nil, vram.ErrShape},
		{"float offsets", nn.EmbeddingBagOptions{}, nil, x1, vram.Zeros(vram.Shape{1}), nil, vram.ErrDType},
		{"no offsets", nn.EmbeddingBagOptions{}, nil, x1, i64([]int64{}, 0), nil, vram.ErrArgument},
		{"first offset not 0", nn.EmbeddingBagOptions{}, nil, x1, i64([]int64{1, 2}, 2), nil, vram.ErrArgument},
		{"decreasing offsets", nn.EmbeddingBagOptions{}, nil, x1, i64([]int64{0, 2, 1}, 3), nil, vram.ErrArgument},
		{"offset past the end", nn.EmbeddingBagOptions{}, nil, x1, i64([]int64{0, 4}, 2), nil, vram.ErrArgument},
		{"last offset short of the end", nn.EmbeddingBagOptions{IncludeLastOffset: true}, nil, x1, i64([]int64{0, 2}, 2), nil, vram.ErrArgument},
		{"weights with mean", nn.EmbeddingBagOptions{}, nil, x2, nil, vram.Ones(vram.Shape{2, 2}, vram.Float64), vram.ErrArgument},
		{"weights with max", nn.EmbeddingBagOptions{Mode: "max"}, nil, x2, nil, vram.Ones(vram.Shape{2, 2}, vram.Float64), vram.ErrArgument},
		{"weights of another shape", nn.EmbeddingBagOptions{Mode: "sum"}, nil, x2, nil, vram.Ones(vram.Shape{4}, vram.Float64), vram.ErrShape},
		{"weights of another dtype", nn.EmbeddingBagOptions{Mode: "sum"}, nil, x2, nil, vram.Ones(vram.Shape{2, 2}), vram.ErrDType},
		{"index out of range", nn.EmbeddingBagOptions{}, nil, i64([]int64{0, 5}, 1, 2), nil, nil, vram.ErrIndex},
		{"negative index", nn.EmbeddingBagOptions{}, nil, i64([]int64{0, -1}, 2), i64([]int64{0, 1}, 2), nil, vram.ErrIndex},
		{"mode changed", nn.EmbeddingBagOptions{}, func(e *nn.EmbeddingBag) { e.Mode = "min" }, x2, nil, nil, vram.ErrArgument},
		{"padding changed", nn.EmbeddingBagOptions{}, func(e *nn.EmbeddingBag) { e.PaddingIdx = intp(5) }, x2, nil, nil, vram.ErrArgument},
		{"integer weight", nn.EmbeddingBagOptions{}, func(e *nn.EmbeddingBag) { e.Weight = vram.Zeros(vram.Shape{5, 2}, vram.Int64) }, x2, nil, nil, vram.ErrDType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.MaxNorm = 0.1
			e := newTestBag(o, vram.CPU)
			if tc.edit != nil {
				tc.edit(e)
			}
			before := e.Weight.Float64s()
			err := vram.Catch(func() { e.ForwardBags(tc.x, tc.off, tc.psw) })
			var ve *vram.Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &ve) || ve.Op != "embedding_bag" {
				t.Fatalf("error %v, want %v from embedding_bag", err, tc.kind)
			}
			if got := e.Weight.Float64s(); !slices.Equal(got, before) {
				t.Fatalf("weight changed to %v", got)
			}
		})
	}
	for name, o := range map[string]nn.EmbeddingBagOptions{
		"mode":           {Mode: "min"},
		"padding":        {PaddingIdx: intp(5)},
		"padding before": {PaddingIdx: intp(-6)},
		"max norm":       {MaxNorm: -1},
	} {
		if err := vram.Catch(func() { nn.NewEmbeddingBagOptions(5, 2, o) }); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("%s: error %v, want ErrArgument", name, err)
		}
	}
	if err := vram.Catch(func() { nn.NewEmbeddingBag(-1, 2) }); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("negative size: error %v, want ErrArgument", err)
	}
}

// TestEmbeddingBagDTypes checks int32 indices and offsets and 32- and
// 16-bit tables against the float64 results of TestEmbeddingBag's
// "padding mean 1-D" case and its sum and max.
func TestEmbeddingBagDTypes(t *testing.T) {
	input := []int32{0, 4, 4, 4, 2, 3}
	offsets := []int32{0, 2, 3}
	want := map[string][]float64{
		"sum":  {1, 2, 0, 0, -1.5, 4.5},
		"mean": {1, 2, 0, 0, -0.75, 2.25},
		"max":  {1, 2, 0, 0, 0.5, 4},
	}
	for _, dt := range []vram.DType{vram.Float32, vram.Float16, vram.BFloat16} {
		for mode, w := range want {
			t.Run(dt.String()+"/"+mode, func(t *testing.T) {
				e := newTestBag(nn.EmbeddingBagOptions{Mode: mode, PaddingIdx: intp(4)}, vram.Sim(0))
				e.ToDType(dt)
				y := e.ForwardBags(vram.FromSlice(input, vram.Shape{6}, vram.Sim(0)), vram.FromSlice(offsets, vram.Shape{3}, vram.Sim(0)), nil)
				if y.DType() != dt {
					t.Fatalf("dtype %s, want %s", y.DType(), dt)
				}
				if got := y.Float64s(); !allNear(got, w, 1e-2) {
					t.Fatalf("got %v, want %v", got, w)
				}
				y.Sum().Backward()
				if g := e.Weight.Grad(); g == nil || g.DType() != dt {
					t.Fatalf("gradient %v", g)
				}
			})
		}
	}
}

// TestEmbeddingBagScaleGradByFreq checks scale_grad_by_freq against
// gradients worked out by hand: each row's gradient of sum(output) is
// divided by the row's count in the whole input, padding and bags of
// other lengths included, and mode "max" refuses it.
func TestEmbeddingBagScaleGradByFreq(t *testing.T) {
	// Bags [0 1 0] and [0 4 3]; row 0 occurs 3 times, 1 and 3 once.
	input := []int64{0, 1, 0, 0, 4, 3}
	offsets := []int64{0, 3}
	tests := []struct {
		mode string
		psw  []float64
		want []float64 // the gradient of rows 0 to 4, one number per row
	}{
		{"sum", nil, []float64{1, 1, 0, 1, 0}},
		{"mean", nil, []float64{(2.0/3 + 0.5) / 3, 1.0 / 3, 0, 0.5, 0}},
		{"sum", []float64{1, 2, 3, 4, 5, 6}, []float64{(1 + 3 + 4) / 3.0, 2, 0, 6, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			e := newTestBag(nn.EmbeddingBagOptions{Mode: tc.mode, PaddingIdx: intp(4), ScaleGradByFreq: true}, vram.CPU)
			var psw *vram.Tensor
			if tc.psw != nil {
				psw = vram.FromSlice(tc.psw, vram.Shape{len(tc.psw)})
			}
			e.ForwardBags(vram.FromSlice(input, vram.Shape{6}), vram.FromSlice(offsets, vram.Shape{2}), psw).Sum().Backward()
			var want []float64
			for _, g := range tc.want {
				want = append(want, g, g)
			}
			if got := e.Weight.Grad().Float64s(); !allNear(got, want, 1e-12) {
				t.Fatalf("gradient %v, want %v", got, want)
			}
		})
	}
	if err := vram.Catch(func() {
		nn.NewEmbeddingBagOptions(5, 2, nn.EmbeddingBagOptions{Mode: "max", ScaleGradByFreq: true})
	}); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("max with scale_grad_by_freq: error %v, want ErrArgument", err)
	}
	e := newTestBag(nn.EmbeddingBagOptions{Mode: "max"}, vram.CPU)
	e.ScaleGradByFreq = true
	if err := vram.Catch(func() { e.Forward(vram.FromSlice([]int64{0}, vram.Shape{1, 1})) }); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("ScaleGradByFreq set on a max bag: error %v, want ErrArgument", err)
	}
}
