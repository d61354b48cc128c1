package vram

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// orderDevices are the devices the order-statistic tests run on.
var orderDevices = []Device{CPU, Sim(0)}

// sameFloats reports whether got and want are equal within tol, NaN
// matching NaN.
func sameFloats(got, want []float64, tol float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if math.IsNaN(got[i]) != math.IsNaN(want[i]) || !math.IsNaN(want[i]) && math.Abs(got[i]-want[i]) > tol && got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestMedianKthvalue checks the row selections against values worked out
// from PyTorch's definitions: the lower median, NaN and its first position
// for rows holding NaN, the first of equal elements.
func TestMedianKthvalue(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name    string
		fn      func(x *Tensor) (*Tensor, *Tensor)
		data    []float64
		shape   Shape
		dtype   DType
		values  []float64
		indices []int64
		shapeV  Shape
	}{
		{"median even is lower", func(x *Tensor) (*Tensor, *Tensor) { return x.MedianDim(0, false) }, []float64{4, 1, 3, 2}, Shape{4}, Float32, []float64{2}, []int64{3}, Shape{}},
		{"median rows", func(x *Tensor) (*Tensor, *Tensor) { return x.MedianDim(1, false) }, []float64{5, 1, 3, 9, 7, 8}, Shape{2, 3}, Float64, []float64{3, 8}, []int64{2, 2}, Shape{2}},
		{"median columns keepdim", func(x *Tensor) (*Tensor, *Tensor) { return x.MedianDim(0, true) }, []float64{5, 1, 3, 9, 7, 8}, Shape{2, 3}, Float64, []float64{5, 1, 3}, []int64{0, 0, 0}, Shape{1, 3}},
		{"median nan", func(x *Tensor) (*Tensor, *Tensor) { return x.MedianDim(0, false) }, []float64{1, nan, 2, nan}, Shape{4}, Float32, []float64{nan}, []int64{1}, Shape{}},
		{"median ties first", func(x *Tensor) (*Tensor, *Tensor) { return x.MedianDim(0, false) }, []float64{2, 2, 2}, Shape{3}, Float32, []float64{2}, []int64{0}, Shape{}},
		{"median int", func(x *Tensor) (*Tensor, *Tensor) { return x.MedianDim(-1, false) }, []float64{7, -3, 5}, Shape{3}, Int32, []float64{5}, []int64{2}, Shape{}},
		{"nanmedian", func(x *Tensor) (*Tensor, *Tensor) { return x.NanMedianDim(0, false) }, []float64{nan, 3, 1, nan, 2}, Shape{5}, Float32, []float64{2}, []int64{4}, Shape{}},
		{"nanmedian all nan", func(x *Tensor) (*Tensor, *Tensor) { return x.NanMedianDim(0, false) }, []float64{nan, nan}, Shape{2}, Float32, []float64{nan}, []int64{0}, Shape{}},
		{"kthvalue", func(x *Tensor) (*Tensor, *Tensor) { return x.Kthvalue(2, 1, false) }, []float64{3, 1, 2, 6, 4, 5}, Shape{2, 3}, Float32, []float64{2, 5}, []int64{2, 2}, Shape{2}},
		{"kthvalue nan greatest", func(x *Tensor) (*Tensor, *Tensor) { return x.Kthvalue(3, 0, false) }, []float64{nan, 1, 2}, Shape{3}, Float32, []float64{nan}, []int64{0}, Shape{}},
		{"kthvalue 0-d", func(x *Tensor) (*Tensor, *Tensor) { return x.Kthvalue(1, 0, false) }, []float64{4}, Shape{}, Float32, []float64{4}, []int64{0}, Shape{}},
		{"cummax", func(x *Tensor) (*Tensor, *Tensor) { return x.Cummax(0) }, []float64{1, 3, 2, 3, 5}, Shape{5}, Float32, []float64{1, 3, 3, 3, 5}, []int64{0, 1, 1, 3, 4}, Shape{5}},
		{"cummax nan sticks", func(x *Tensor) (*Tensor, *Tensor) { return x.Cummax(0) }, []float64{1, nan, 5, nan}, Shape{4}, Float32, []float64{1, nan, nan, nan}, []int64{0, 1, 1, 3}, Shape{4}},
		{"cummin rows", func(x *Tensor) (*Tensor, *Tensor) { return x.Cummin(1) }, []float64{3, 1, 1, 0, 2, -1}, Shape{2, 3}, Int64, []float64{3, 1, 1, 0, 0, -1}, []int64{0, 1, 2, 0, 0, 2}, Shape{2, 3}},
		{"cummin empty", func(x *Tensor) (*Tensor, *Tensor) { return x.Cummin(0) }, []float64{}, Shape{0}, Float32, []float64{}, []int64{}, Shape{0}},
	}
	for _, d := range orderDevices {
		for _, tc := range cases {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				x := FromSlice(tc.data, tc.shape, d, tc.dtype)
				defer x.Release()
				v, i := tc.fn(x)
				defer v.Release()
				defer i.Release()
				if v.DType() != tc.dtype || i.DType() != Int64 {
					t.Errorf("dtypes %s, %s; want %s, int64", v.DType(), i.DType(), tc.dtype)
				}
				if !slices.Equal(v.Shape(), tc.shapeV) || !slices.Equal(i.Shape(), tc.shapeV) {
					t.Errorf("shapes %v, %v; want %v", v.Shape(), i.Shape(), tc.shapeV)
				}
				if !sameFloats(v.Float64s(), tc.values, 0) || !slices.Equal(i.Int64s(), tc.indices) {
					t.Errorf("got %v %v, want %v %v", v.Float64s(), i.Int64s(), tc.values, tc.indices)
				}
			})
		}
	}
}

// TestMedianWhole checks the whole-tensor forms.
func TestMedianWhole(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		fn   func(x *Tensor) *Tensor
		data []float64
		want float64
	}{
		{"median", (*Tensor).Median, []float64{4, 1, 3, 2, 9, 0}, 2},
		{"median nan", (*Tensor).Median, []float64{4, nan, 3}, nan},
		{"nanmedian", (*Tensor).NanMedian, []float64{4, nan, 3}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := FromSlice(tc.data, Shape{len(tc.data)}, Float32)
			defer x.Release()
			m := tc.fn(x)
			defer m.Release()
			if m.Dim() != 0 || !sameFloats(m.Float64s(), []float64{tc.want}, 0) {
				t.Errorf("got %v, want 0-d %v", m, tc.want)
			}
		})
	}
}

// TestQuantile checks every interpolation against numpy's definitions,
// which PyTorch follows.
func TestQuantile(t *testing.T) {
	nan := math.NaN()
	data := []float64{1, 3, 2, 10} // sorted 1 2 3 10; q 0.4 -> rank 1.2
	cases := []struct {
		name   string
		interp string
		q      []float64
		want   []float64
	}{
		{"linear", QuantileLinear, []float64{0.4}, []float64{2.2}},
		{"default", "", []float64{0, 0.5, 1}, []float64{1, 2.5, 10}},
		{"lower", QuantileLower, []float64{0.4}, []float64{2}},
		{"higher", QuantileHigher, []float64{0.4}, []float64{3}},
		{"midpoint", QuantileMidpoint, []float64{0.4, 1}, []float64{2.5, 10}},
		{"nearest", QuantileNearest, []float64{0.4, 0.5}, []float64{2, 3}}, // rank 1.5 rounds to 2
	}
	for _, d := range orderDevices {
		for _, tc := range cases {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				x := FromSlice(data, Shape{4}, d, Float64)
				defer x.Release()
				q := FromSlice(tc.q, Shape{len(tc.q)}, d, Float64)
				defer q.Release()
				got := x.Quantile(q, 0, false, tc.interp)
				defer got.Release()
				if !slices.Equal(got.Shape(), Shape{len(tc.q)}) || !sameFloats(got.Float64s(), tc.want, 1e-12) {
					t.Errorf("got %v, want %v", got, tc.want)
				}
			})
		}
	}
	t.Run("rows keepdim q first", func(t *testing.T) {
		x := FromSlice([]float32{1, 2, 3, 4, 10, 20, 30, float32(nan)}, Shape{2, 4})
		defer x.Release()
		q := FromSlice([]float32{0.5, 1}, Shape{2})
		defer q.Release()
		got := x.Quantile(q, 1, true, "")
		defer got.Release()
		if !slices.Equal(got.Shape(), Shape{2, 2, 1}) || !sameFloats(got.Float64s(), []float64{2.5, nan, 4, nan}, 1e-6) {
			t.Errorf("got %v", got)
		}
		nq := x.NanQuantile(q, 1, false, "")
		defer nq.Release()
		if !slices.Equal(nq.Shape(), Shape{2, 2}) || !sameFloats(nq.Float64s(), []float64{2.5, 20, 4, 30}, 1e-6) {
			t.Errorf("nanquantile got %v", nq)
		}
		s := Scalar(0.25, Float32)
		defer s.Release()
		all := x.NanQuantileAll(s, QuantileLower)
		defer all.Release()
		if all.Dim() != 0 || all.Item() != 2 {
			t.Errorf("nanquantile all got %v, want 0-d 2", all)
		}
	})
	t.Run("gradient", func(t *testing.T) {
		x := FromSlice([]float64{1, 3, 2, 10}, Shape{4}, WithGrad())
		defer x.Release()
		q := Scalar(0.4, Float64)
		defer q.Release()
		y := x.QuantileAll(q, "")
		defer y.Release()
		y.Backward()
		// 2.2 = 0.8*x[2] + 0.2*x[1]
		if g := x.Grad().Float64s(); !sameFloats(g, []float64{0, 0.2, 0.8, 0}, 1e-12) {
			t.Errorf("grad %v", g)
		}
	})
}

// TestQuantileAllKeepDim checks the quantiles over all elements with
// keepdim, as torch.quantile(x, q, dim=None, keepdim=True): every one of
// x's dimensions stays, of size 1, after q's, and the values and gradient
// are QuantileAll's.
func TestQuantileAllKeepDim(t *testing.T) {
	nan := math.NaN()
	data := []float64{4, nan, 1, 3, 2, 10}
	cases := []struct {
		name  string
		shape Shape
		q     []float64 // nil: a 0-d q of 0.4
		nanq  bool
		want  Shape
		vals  []float64
	}{
		{"2-D", Shape{2, 3}, nil, false, Shape{1, 1}, []float64{nan}},
		{"nan 2-D", Shape{2, 3}, nil, true, Shape{1, 1}, []float64{2.6}},
		{"nan 3-D q vector", Shape{3, 1, 2}, []float64{0, 1}, true, Shape{2, 1, 1, 1}, []float64{1, 10}},
		{"1-D", Shape{6}, []float64{0.5}, false, Shape{1, 1}, []float64{nan}},
		{"0-D", Shape{}, nil, false, Shape{}, []float64{4}},
	}
	for _, d := range orderDevices {
		for _, tc := range cases {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				Tidy(func() {
					x := FromSlice(data[:tc.shape.NumElements()], tc.shape, d, Float64)
					q := Scalar(0.4, Float64, d)
					if tc.q != nil {
						q = FromSlice(tc.q, Shape{len(tc.q)}, d, Float64)
					}
					var got, flat *Tensor
					if tc.nanq {
						got, flat = x.NanQuantileAllKeepDim(q, ""), x.NanQuantileAll(q, "")
					} else {
						got, flat = x.QuantileAllKeepDim(q, ""), x.QuantileAll(q, "")
					}
					if !slices.Equal(got.Shape(), tc.want) || !sameFloats(got.Float64s(), tc.vals, 1e-12) || !sameFloats(flat.Float64s(), tc.vals, 1e-12) {
						t.Errorf("got %v %v (without keepdim %v), want %v %v", got.Shape(), got.Float64s(), flat.Float64s(), tc.want, tc.vals)
					}
				})
			})
		}
	}
	t.Run("gradient", func(t *testing.T) {
		Tidy(func() {
			x := FromSlice([]float64{1, 3, 2, 10}, Shape{2, 2}, WithGrad())
			y := x.QuantileAllKeepDim(Scalar(0.4, Float64), "")
			if !slices.Equal(y.Shape(), Shape{1, 1}) {
				t.Fatalf("shape %v", y.Shape())
			}
			y.Sum().Backward()
			if g := x.Grad().Float64s(); !sameFloats(g, []float64{0, 0.2, 0.8, 0}, 1e-12) {
				t.Errorf("grad %v", g)
			}
		})
	})
}

// TestOrderErrors checks that bad arguments panic with the documented
// kinds.
func TestOrderErrors(t *testing.T) {
	x := FromSlice([]float32{1, 2, 3}, Shape{3})
	defer x.Release()
	e := Zeros(Shape{2, 0})
	defer e.Release()
	ix := FromSlice([]int64{1, 2}, Shape{2})
	defer ix.Release()
	q := FromSlice([]float32{0.5, 1.5}, Shape{2})
	defer q.Release()
	h := Scalar(0.5, Float32)
	defer h.Release()
	for _, tc := range []struct {
		name string
		fn   func()
		kind error
	}{
		{"median empty dim", func() { x, _ := e.MedianDim(1, false); x.Release() }, ErrShape},
		{"median empty int", func() { e.Long().Median() }, ErrShape},
		{"nanmedian empty bool", func() { e.Cast(Bool).NanMedian() }, ErrDType},
		{"median bool", func() { x.GtScalar(1).Median() }, ErrDType},
		{"median bool scalar", func() { Scalar(1, Bool).Median() }, ErrDType},
		{"median dim bool", func() { x.GtScalar(1).MedianDim(0, true) }, ErrDType},
		{"nanmedian bool", func() { x.GtScalar(1).NanMedian() }, ErrDType},
		{"nanmedian dim bool", func() { x.GtScalar(1).NanMedianDim(-1, false) }, ErrDType},
		{"kthvalue bool", func() { x.GtScalar(1).Kthvalue(1, 0, false) }, ErrDType},
		{"topk bool", func() { x.GtScalar(1).TopK(1, 0, true) }, ErrDType},
		{"median bad dim", func() { x.MedianDim(1, false) }, ErrIndex},
		{"kthvalue k 0", func() { x.Kthvalue(0, 0, false) }, ErrArgument},
		{"kthvalue k big", func() { x.Kthvalue(4, 0, false) }, ErrArgument},
		{"quantile q out of range", func() { x.Quantile(q, 0, false, "") }, ErrArgument},
		{"quantile bad interpolation", func() { x.Quantile(h, 0, false, "cubic") }, ErrArgument},
		{"quantile int input", func() { ix.QuantileAll(h, "") }, ErrDType},
		{"quantile int q", func() { x.QuantileAll(ix, "") }, ErrDType},
		{"quantile q float64 for float32", func() { x.QuantileAll(h.Cast(Float64), "") }, ErrDType},
		{"quantile q float16 for float32", func() { x.Quantile(h.Cast(Float16), 0, false, "") }, ErrDType},
		{"nanquantile q float32 for float64", func() { x.Cast(Float64).NanQuantile(h, 0, false, "") }, ErrDType},
		{"nanquantile all q bfloat16", func() { x.NanQuantileAll(h.Cast(BFloat16), "") }, ErrDType},
		{"cummax bad dim", func() { x.Cummax(2) }, ErrIndex},
		{"logcumsumexp int", func() { ix.Logcumsumexp(0) }, ErrDType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Catch(func() { Tidy(tc.fn) }); !errors.Is(err, tc.kind) {
				t.Errorf("got %v, want %v", err, tc.kind)
			}
		})
	}
}

// TestLogcumsumexp checks values over a wide range, where the plain
// log(cumsum(exp(x))) underflows or overflows, and the gradient, which is
// softmax of the prefix.
func TestLogcumsumexp(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		name string
		data []float64
		want []float64
	}{
		{"plain", []float64{0, 0, math.Log(2)}, []float64{0, math.Log(2), math.Log(4)}},
		{"wide", []float64{-1000, 0, 1000}, []float64{-1000, 0, 1000}},
		{"infinities", []float64{-inf, -inf, 1, inf}, []float64{-inf, -inf, 1, inf}},
	}
	for _, d := range orderDevices {
		for _, tc := range cases {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				x := FromSlice(tc.data, Shape{len(tc.data)}, d)
				defer x.Release()
				y := x.Logcumsumexp(0)
				defer y.Release()
				if !sameFloats(y.Float64s(), tc.want, 1e-9) {
					t.Errorf("got %v, want %v", y.Float64s(), tc.want)
				}
			})
		}
	}
	t.Run("gradient with ties", func(t *testing.T) {
		x := FromSlice([]float64{1, 1, 1}, Shape{3}, WithGrad())
		defer x.Release()
		y := x.Logcumsumexp(0)
		defer y.Release()
		s := y.Sum()
		defer s.Release()
		s.Backward()
		// d/dx_j sum_i lse(x_0..x_i) = sum_{i>=j} 1/(i+1)
		want := []float64{1 + 0.5 + 1.0/3, 0.5 + 1.0/3, 1.0 / 3}
		if g := x.Grad().Float64s(); !sameFloats(g, want, 1e-12) {
			t.Errorf("grad %v, want %v", g, want)
		}
	})
	t.Run("gradient at -Inf", func(t *testing.T) {
		x := FromSlice([]float64{math.Inf(-1), math.Inf(-1), 0}, Shape{3}, WithGrad())
		defer x.Release()
		y := x.Logcumsumexp(0)
		defer y.Release()
		s := y.Sum()
		defer s.Release()
		s.Backward()
		// The limit of x = [-M, -M, 0] as M grows: y0 = x0 gives x0 1,
		// y1 = x0 + log 2 splits 1 evenly, y2 = 0 gives x2 1.
		if g := x.Grad().Float64s(); !sameFloats(g, []float64{1.5, 0.5, 1}, 0) {
			t.Errorf("grad %v, want [1.5 0.5 1]", g)
		}
	})
	t.Run("float16", func(t *testing.T) {
		x := FromSlice([]float32{0, 0}, Shape{2}, Float16)
		defer x.Release()
		y := x.Logcumsumexp(0)
		defer y.Release()
		if y.DType() != Float16 || !sameFloats(y.Float64s(), []float64{0, math.Log(2)}, 1e-3) {
			t.Errorf("got %v", y)
		}
	})
}

// TestSelectionGradients checks that median, kthvalue and cummax pass
// their gradient back to the positions they chose.
func TestSelectionGradients(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   func(x *Tensor) *Tensor
		want []float64
	}{
		{"median", func(x *Tensor) *Tensor { return x.Median() }, []float64{0, 0, 0, 1}},
		{"kthvalue", func(x *Tensor) *Tensor { v, i := x.Kthvalue(4, 0, false); i.Release(); return v }, []float64{0, 1, 0, 0}},
		{"cummax", func(x *Tensor) *Tensor { v, i := x.Cummax(0); i.Release(); return v }, []float64{1, 3, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := FromSlice([]float64{1, 5, 3, 2}, Shape{4}, WithGrad())
			defer x.Release()
			y := tc.fn(x)
			defer y.Release()
			s := y.Sum()
			defer s.Release()
			s.Backward()
			if g := x.Grad().Float64s(); !sameFloats(g, tc.want, 0) {
				t.Errorf("grad %v, want %v", g, tc.want)
			}
		})
	}
}

// TestMedianEmptyIsNaN checks that the median of all of an empty
// floating-point tensor is a 0-dimensional NaN of its dtype on its device,
// as torch.median and torch.nanmedian give, where it was an ErrShape.
func TestMedianEmptyIsNaN(t *testing.T) {
	for _, d := range orderDevices {
		for _, tc := range []struct {
			name  string
			shape Shape
			dtype DType
			fn    func(x *Tensor) *Tensor
		}{
			{"median [0]", Shape{0}, Float32, (*Tensor).Median},
			{"median [2, 0]", Shape{2, 0}, Float64, (*Tensor).Median},
			{"median bfloat16", Shape{0, 3}, BFloat16, (*Tensor).Median},
			{"nanmedian [0]", Shape{0}, Float16, (*Tensor).NanMedian},
		} {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				Tidy(func() {
					var got *Tensor
					if err := Catch(func() { got = tc.fn(Zeros(tc.shape, tc.dtype, d)) }); err != nil {
						t.Fatalf("got %v, want NaN", err)
					}
					v := got.Float64s()
					if len(got.Shape()) != 0 || got.DType() != tc.dtype || got.Device() != d || len(v) != 1 || !math.IsNaN(v[0]) {
						t.Errorf("got %v %s on %s = %v, want a 0-d NaN %s on %s", got.Shape(), got.DType(), got.Device(), v, tc.dtype, d)
					}
				})
			})
		}
	}
}

// TestQuantileEmpty checks that the quantiles of an empty tensor are NaN
// of the result's shape, as torch.quantile gives, and empty where another
// dimension is 0.
func TestQuantileEmpty(t *testing.T) {
	cases := []struct {
		name  string
		shape Shape
		q     []float64 // nil: a 0-d q of 0.5
		dim   int       // -99: over all elements
		keep  bool
		nanq  bool
		want  Shape
	}{
		{"all 1-D", Shape{0}, nil, -99, false, false, Shape{}},
		{"all 2-D q vector", Shape{2, 0}, []float64{0.1, 0.9}, -99, false, false, Shape{2}},
		{"dim empty", Shape{3, 0}, nil, 1, false, false, Shape{3}},
		{"dim empty keepdim", Shape{3, 0}, nil, -1, true, false, Shape{3, 1}},
		{"dim empty q vector", Shape{3, 0}, []float64{0, 1}, 1, false, false, Shape{2, 3}},
		{"other dim empty", Shape{0, 3}, nil, 1, false, false, Shape{0}},
		{"other dim empty keepdim q vector", Shape{0, 3}, []float64{0.5}, 1, true, false, Shape{1, 0, 1}},
		{"nanquantile dim empty", Shape{2, 0, 2}, nil, 1, false, true, Shape{2, 2}},
		{"nanquantile all", Shape{0}, []float64{0.5}, -99, false, true, Shape{1}},
		{"all keepdim", Shape{2, 0}, nil, -99, true, false, Shape{1, 1}},
		{"nanquantile all keepdim q vector", Shape{0, 3, 1}, []float64{0.2, 0.5}, -99, true, true, Shape{2, 1, 1, 1}},
	}
	for _, d := range orderDevices {
		for _, tc := range cases {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				for _, dt := range []DType{Float32, Float64} {
					Tidy(func() {
						x := Zeros(tc.shape, dt, d)
						q := Scalar(0.5, dt, d)
						if tc.q != nil {
							q = FromSlice(tc.q, Shape{len(tc.q)}, d, dt)
						}
						var got *Tensor
						err := Catch(func() {
							switch {
							case tc.dim == -99 && tc.nanq && tc.keep:
								got = x.NanQuantileAllKeepDim(q, "")
							case tc.dim == -99 && tc.nanq:
								got = x.NanQuantileAll(q, "")
							case tc.dim == -99 && tc.keep:
								got = x.QuantileAllKeepDim(q, "")
							case tc.dim == -99:
								got = x.QuantileAll(q, "")
							case tc.nanq:
								got = x.NanQuantile(q, tc.dim, tc.keep, "")
							default:
								got = x.Quantile(q, tc.dim, tc.keep, QuantileLower)
							}
						})
						if err != nil {
							t.Fatalf("%v: %v", dt, err)
						}
						if got.DType() != dt || got.Device() != d || !slices.Equal(got.Shape(), tc.want) {
							t.Fatalf("%v: got %v %v on %v, want %v", dt, got.DType(), got.Shape(), got.Device(), tc.want)
						}
						for _, v := range got.Float64s() {
							if !math.IsNaN(v) {
								t.Errorf("%v: got %v, want NaN", dt, got.Float64s())
								break
							}
						}
					})
				}
			})
		}
	}
}
