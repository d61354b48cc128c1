package vram

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// sortDevices are the devices the sort tests run on: the CPU and sim
// kernels, and nativetest, a device without a sort kernel, which sorts a
// host copy.
var sortDevices = []Device{CPU, Sim(0), nativeTest}

// TestSort checks Sort and ArgSort against hand-sorted references: ties
// keep their order in both directions, NaN counts as the greatest value.
func TestSort(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name       string
		in         *Tensor
		dim        int
		descending bool
		values     []float64
		indices    []int64
	}{
		{"ascending ties", FromSlice([]float64{3, 1, 2, 1, 3}, Shape{5}), 0, false, []float64{1, 1, 2, 3, 3}, []int64{1, 3, 2, 0, 4}},
		{"descending ties", FromSlice([]float64{3, 1, 2, 1, 3}, Shape{5}), -1, true, []float64{3, 3, 2, 1, 1}, []int64{0, 4, 2, 1, 3}},
		{"nan last", FromSlice([]float64{nan, 2, math.Inf(1), nan, -1}, Shape{5}), 0, false, []float64{-1, 2, math.Inf(1), nan, nan}, []int64{4, 1, 2, 0, 3}},
		{"nan first descending", FromSlice([]float64{2, nan, math.Inf(1)}, Shape{3}), 0, true, []float64{nan, math.Inf(1), 2}, []int64{1, 2, 0}},
		{"rows", FromSlice([]float64{3, 1, 2, 0, 5, 4}, Shape{2, 3}), 1, false, []float64{1, 2, 3, 0, 4, 5}, []int64{1, 2, 0, 0, 2, 1}},
		{"columns", FromSlice([]float64{3, 1, 2, 0, 5, 4}, Shape{2, 3}), -2, false, []float64{0, 1, 2, 3, 5, 4}, []int64{1, 0, 0, 0, 1, 1}},
		{"transposed view", FromSlice([]float64{3, 1, 2, 0, 5, 4}, Shape{2, 3}).T(), 1, true, []float64{3, 0, 5, 1, 4, 2}, []int64{0, 1, 1, 0, 1, 0}},
		// values unused: checked against the int64 input below.
		{"int64 beyond float64", FromSlice([]int64{1<<60 + 1, 1 << 60, -3}, Shape{3}), 0, false, nil, []int64{2, 1, 0}},
		{"bool", FromSlice([]bool{true, false, true, false}, Shape{4}), 0, false, []float64{0, 0, 1, 1}, []int64{1, 3, 0, 2}},
		{"float16", FromSlice([]float32{0.5, -2, 1}, Shape{3}, Float16), 0, false, []float64{-2, 0.5, 1}, []int64{1, 0, 2}},
		{"empty", Zeros(Shape{2, 0}), 1, false, []float64{}, []int64{}},
		{"0-d", Scalar(7, Float64), 0, false, []float64{7}, []int64{0}},
	}
	for _, dev := range sortDevices {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				x := c.in.To(dev)
				v, i := x.Sort(c.dim, c.descending)
				if !slices.Equal(v.Shape(), x.Shape()) || !slices.Equal(i.Shape(), x.Shape()) || i.DType() != Int64 || v.DType() != x.DType() {
					t.Fatalf("got %v %s and %v %s for %v %s", v.Shape(), v.DType(), i.Shape(), i.DType(), x.Shape(), x.DType())
				}
				if v.Device() != dev || i.Device() != dev {
					t.Errorf("results on %s and %s, want %s", v.Device(), i.Device(), dev)
				}
				if x.DType() == Int64 {
					want := []int64{-3, 1 << 60, 1<<60 + 1}
					if got := v.Int64s(); !slices.Equal(got, want) {
						t.Errorf("values %v, want %v", got, want)
					}
				} else if got := v.Float64s(); !nearAll(got, c.values) {
					t.Errorf("values %v, want %v", got, c.values)
				}
				if got := i.Int64s(); !slices.Equal(got, c.indices) {
					t.Errorf("indices %v, want %v", got, c.indices)
				}
				if got := x.ArgSort(c.dim, c.descending).Int64s(); !slices.Equal(got, c.indices) {
					t.Errorf("ArgSort %v, want %v", got, c.indices)
				}
			})
		}
	}
	for _, f := range []func(){
		func() { Ones(Shape{2}).Sort(1, false) },
		func() { Scalar(1).ArgSort(-2, true) },
	} {
		if err := Catch(f); !errors.Is(err, ErrIndex) {
			t.Errorf("bad dim: got %v, want ErrIndex", err)
		}
	}
	gradCheck(t, func(xs []*Tensor) *Tensor { v, _ := xs[0].Sort(1, true); return v }, rnd(61, 3, 4))
	gradCheck(t, func(xs []*Tensor) *Tensor { v, _ := xs[0].Sort(0, false); return v }, rnd(62, 3, 2))
}

// TestTopK checks TopK against sorted references and PyTorch's rules for
// k and NaN.
func TestTopK(t *testing.T) {
	nan := math.NaN()
	x := []float64{4, nan, 1, 7, 1, -2}
	cases := []struct {
		name    string
		k       int
		largest bool
		values  []float64
		indices []int64
	}{
		{"largest", 3, true, []float64{nan, 7, 4}, []int64{1, 3, 0}},
		{"smallest ties", 3, false, []float64{-2, 1, 1}, []int64{5, 2, 4}},
		{"all", 6, false, []float64{-2, 1, 1, 4, 7, nan}, []int64{5, 2, 4, 0, 3, 1}},
		{"none", 0, true, []float64{}, []int64{}},
	}
	for _, dev := range sortDevices {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				v, i := FromSlice(x, Shape{6}, dev).TopK(c.k, 0, c.largest)
				if got := v.Float64s(); !nearAll(got, c.values) {
					t.Errorf("values %v, want %v", got, c.values)
				}
				if got := i.Int64s(); !slices.Equal(got, c.indices) {
					t.Errorf("indices %v, want %v", got, c.indices)
				}
			})
		}
	}
	// Along the last dimension of a matrix, keeping the others.
	v, i := FromSlice([]float64{1, 5, 3, 9, 8, 7}, Shape{2, 3}).TopK(2, -1, true)
	if !slices.Equal(v.Shape(), Shape{2, 2}) || !slices.Equal(v.Float64s(), []float64{5, 3, 9, 8}) || !slices.Equal(i.Int64s(), []int64{1, 2, 0, 1}) {
		t.Errorf("rows: got %v %v %v", v.Shape(), v.Float64s(), i.Int64s())
	}
	if v, i := Scalar(3, Float64).TopK(1, 0, true); v.Dim() != 0 || v.Item() != 3 || i.Dim() != 0 {
		t.Errorf("0-d: got %v %v", v, i)
	}
	errs := []struct {
		name string
		f    func()
		kind error
	}{
		{"k too large", func() { Ones(Shape{3}).TopK(4, 0, true) }, ErrArgument},
		{"k negative", func() { Ones(Shape{3}).TopK(-1, 0, true) }, ErrArgument},
		{"0-d k 2", func() { Scalar(1).TopK(2, 0, true) }, ErrArgument},
		{"bad dim", func() { Ones(Shape{3}).TopK(1, 1, true) }, ErrIndex},
	}
	for _, e := range errs {
		err := Catch(e.f)
		var ve *Error
		if !errors.Is(err, e.kind) || !errors.As(err, &ve) || ve.Op != "topk" {
			t.Errorf("%s: got %v, want a topk error of kind %v", e.name, err, e.kind)
		}
	}
	gradCheck(t, func(xs []*Tensor) *Tensor { v, _ := xs[0].TopK(2, 1, true); return v }, rnd(63, 3, 4))
	gradCheck(t, func(xs []*Tensor) *Tensor { v, _ := xs[0].TopK(1, 0, false); return v }, rnd(64, 3, 4))
}

// TestSortLarge sorts enough elements for the CPU kernel to split the
// lines between goroutines, along both axes, against a reference sort of
// each line; under -race it also checks the split.
func TestSortLarge(t *testing.T) {
	const rows, cols = 200, 250
	x := Randn(Shape{rows, cols}, Float64, WithGenerator(NewGenerator(71)))
	// Coarse values, so that there are ties to keep in order.
	x = x.MulScalar(4).Round()
	vals := x.Float64s()
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, dim := range []int{0, 1} {
			idx := x.To(dev).ArgSort(dim, dim == 1).Int64s()
			n, lines, step, stride := cols, rows, cols, 1
			if dim == 0 {
				n, lines, step, stride = rows, cols, 1, cols
			}
			for l := 0; l < lines; l++ {
				want := make([]int64, n)
				for j := range want {
					want[j] = int64(j)
				}
				at := func(j int64) float64 { return vals[l*step+int(j)*stride] }
				slices.SortStableFunc(want, func(a, b int64) int {
					if dim == 1 {
						a, b = b, a
					}
					switch {
					case at(a) < at(b):
						return -1
					case at(a) > at(b):
						return 1
					}
					return 0
				})
				got := make([]int64, n)
				for j := range got {
					got[j] = idx[l*step+j*stride]
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%s dim %d line %d: got %v, want %v", dev, dim, l, got[:8], want[:8])
				}
			}
		}
	}
}

// TestSortKeepsLayout checks that Sort and ArgSort lay their results out
// as Clone lays out the input, as PyTorch's sort gives them the input's
// strides: channels-last stays channels-last and a transpose stays
// transposed, with the values of the row-major sort and gradients that
// flow back through the copy.
func TestSortKeepsLayout(t *testing.T) {
	tests := []struct {
		name string
		in   func(x *Tensor) *Tensor
		dim  int
	}{
		{"channels-last along channels", func(x *Tensor) *Tensor { return x.Reshape(2, 3, 2, 2).Contiguous(ChannelsLast) }, 1},
		{"channels-last along width", func(x *Tensor) *Tensor { return x.Reshape(2, 3, 2, 2).Contiguous(ChannelsLast) }, -1},
		{"transposed", func(x *Tensor) *Tensor { return x.Reshape(4, 6).T() }, 0},
		{"row-major", func(x *Tensor) *Tensor { return x.Reshape(4, 6) }, 1},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				Tidy(func() {
					x := tc.in(Randn(Shape{24}, Float64, dev, WithGenerator(NewGenerator(9))))
					want := x.Clone().Strides()
					v, i := x.Sort(tc.dim, true)
					ai := x.ArgSort(tc.dim, true)
					for name, r := range map[string]*Tensor{"values": v, "indices": i, "argsort": ai} {
						if !slices.Equal(r.Strides(), want) {
							t.Errorf("%s strides %v, want %v like the input's", name, r.Strides(), want)
						}
					}
					rv, ri := x.Contiguous().Sort(tc.dim, true)
					if !slices.Equal(v.Float64s(), rv.Float64s()) || !slices.Equal(i.Int64s(), ri.Int64s()) || !slices.Equal(ai.Int64s(), ri.Int64s()) {
						t.Errorf("values or indices differ from the row-major sort")
					}
				})
			})
		}
	}
	gradCheck(t, func(xs []*Tensor) *Tensor {
		v, _ := xs[0].Contiguous(ChannelsLast).Sort(1, false)
		return v
	}, rnd(63, 1, 3, 2, 2))
}
