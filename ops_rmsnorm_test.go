package vram_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
)

// closeTo reports whether got and want have the same length and agree
// elementwise within tol (relative to the larger magnitude, at least tol).
func closeTo(got, want []float64, tol float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if math.IsNaN(got[i]) || math.Abs(got[i]-want[i]) > tol*math.Max(1, math.Abs(want[i])) {
			return false
		}
	}
	return true
}

// errorOp returns the operation a vram error names, or "" for another
// error.
func errorOp(err error) string {
	var ve *vram.Error
	if errors.As(err, &ve) {
		return ve.Op
	}
	var de *vram.DeviceMismatchError
	if errors.As(err, &de) {
		return de.Op
	}
	return ""
}

func TestRMSNormValues(t *testing.T) {
	r10 := 1 / math.Sqrt(10)
	tiny := 1e-8 / math.Sqrt(1e-16+0x1p-52) // eps defaults to float64's machine epsilon
	tests := []struct {
		name   string
		x      []float64
		shape  vram.Shape
		ns     []int
		weight []float64 // nil for none
		eps    float64
		want   []float64
	}{
		{"rows with eps", []float64{1, 3, 0, 0}, vram.Shape{2, 2}, []int{2}, nil, 5, []float64{r10, 3 * r10, 0, 0}},
		{"weight", []float64{2, -2}, vram.Shape{1, 2}, []int{2}, []float64{1, 0.5}, 0, []float64{1, -0.5}},
		{"two dimensions", []float64{1, 2, 2, 4}, vram.Shape{1, 2, 2}, []int{2, 2}, nil, 0, []float64{0.4, 0.8, 0.8, 1.6}},
		{"whole tensor", []float64{1, 2, 2, 4}, vram.Shape{2, 2}, []int{2, 2}, []float64{1, 2, 3, 4}, 0, []float64{0.4, 1.6, 2.4, 6.4}},
		{"default eps", []float64{1e-8, 0}, vram.Shape{2, 1}, []int{1}, nil, -1, []float64{tiny, 0}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				x := vram.FromSlice(tc.x, tc.shape, vram.Float64, dev)
				defer x.Release()
				var w *vram.Tensor
				if tc.weight != nil {
					w = vram.FromSlice(tc.weight, vram.Shape(tc.ns), vram.Float64, dev)
					defer w.Release()
				}
				y := vram.RMSNorm(x, tc.ns, w, tc.eps)
				defer y.Release()
				if !slices.Equal(y.Shape(), tc.shape) || y.DType() != vram.Float64 || y.Device() != dev {
					t.Fatalf("got shape %v dtype %v device %v, want %v float64 %v", y.Shape(), y.DType(), y.Device(), tc.shape, dev)
				}
				if got := y.Float64s(); !closeTo(got, tc.want, 1e-12) {
					t.Errorf("got %v, want %v", got, tc.want)
				}
				if got := x.Float64s(); !slices.Equal(got, tc.x) {
					t.Errorf("input changed to %v", got)
				}
			})
		}
	}
}

// TestRMSNormHalf checks that 16-bit inputs are normalised in float32 and
// rounded once, that the default eps is the 16-bit machine epsilon, and
// that inside an Autocast region the result is float32.
func TestRMSNormHalf(t *testing.T) {
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, dt := range []vram.DType{vram.Float16, vram.BFloat16} {
			t.Run(dev.String()+"/"+dt.String(), func(t *testing.T) {
				// Squares of 300 overflow float16's range: a 16-bit mean would be inf.
				x := vram.FromSlice([]float64{300, 400}, vram.Shape{2}, dt, dev)
				defer x.Release()
				y := vram.RMSNorm(x, []int{2}, nil, 0)
				defer y.Release()
				if y.DType() != dt {
					t.Fatalf("dtype %v, want %v", y.DType(), dt)
				}
				want := []float64{300 / math.Sqrt(125000), 400 / math.Sqrt(125000)}
				if got := y.Float64s(); !closeTo(got, want, 1e-2) {
					t.Errorf("got %v, want %v", got, want)
				}
				// The default eps is float32's, the dtype the norm
				// computes in, as PyTorch's kernel takes it (not the
				// 16-bit dtype's, 2⁻¹⁰ or 2⁻⁷, which would damp this row to
				// 0.89 or 0.58).
				z := vram.FromSlice([]float64{0.0625}, vram.Shape{1}, dt, dev)
				defer z.Release()
				eps := 0x1p-23
				zy := vram.RMSNorm(z, []int{1}, nil, -1)
				defer zy.Release()
				if got, want := zy.Item(), 0.0625/math.Sqrt(0.0625*0.0625+eps); math.Abs(got-want) > 1e-2*want {
					t.Errorf("default eps: got %v, want %v", got, want)
				}
				var a *vram.Tensor
				vram.Autocast(dt, func() { a = vram.RMSNorm(x, []int{2}, nil, 0) })
				defer a.Release()
				if a.DType() != vram.Float32 {
					t.Errorf("under autocast: dtype %v, want float32", a.DType())
				}
			})
		}
	}
}

func TestRMSNormErrors(t *testing.T) {
	x := vram.Ones(vram.Shape{2, 3})
	defer x.Release()
	w2 := vram.Ones(vram.Shape{2})
	defer w2.Release()
	xi := vram.FromSlice([]int64{1, 2, 3}, vram.Shape{3})
	defer xi.Release()
	ws := vram.Ones(vram.Shape{3}, vram.Sim(0))
	defer ws.Release()
	tests := []struct {
		name string
		kind error
		fn   func()
	}{
		{"empty normalized shape", vram.ErrShape, func() { vram.RMSNorm(x, nil, nil, 1e-5) }},
		{"shape not at the end", vram.ErrShape, func() { vram.RMSNorm(x, []int{2}, nil, 1e-5) }},
		{"longer than the input", vram.ErrShape, func() { vram.RMSNorm(x, []int{1, 2, 3}, nil, 1e-5) }},
		{"weight shape", vram.ErrShape, func() { vram.RMSNorm(x, []int{3}, w2, 1e-5) }},
		{"integer input", vram.ErrDType, func() { vram.RMSNorm(xi, []int{3}, nil, 1e-5) }},
		{"NaN eps", vram.ErrArgument, func() { vram.RMSNorm(x, []int{3}, nil, math.NaN()) }},
		{"infinite eps", vram.ErrArgument, func() { vram.RMSNorm(x, []int{3}, nil, math.Inf(1)) }},
		{"weight on another device", vram.ErrDevice, func() { vram.RMSNorm(x, []int{3}, ws, 1e-5) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			if !errors.Is(err, tc.kind) || errorOp(err) != "rms_norm" {
				t.Fatalf("got %v, want an rms_norm error of kind %v", err, tc.kind)
			}
		})
	}
}

func TestNormalizeValues(t *testing.T) {
	tests := []struct {
		name  string
		x     []float64
		shape vram.Shape
		p     float64
		dim   int
		eps   float64
		want  []float64
	}{
		{"rows", []float64{3, 4, 0, 0}, vram.Shape{2, 2}, 2, 1, 1e-12, []float64{0.6, 0.8, 0, 0}},
		{"columns", []float64{3, 1, 4, 0}, vram.Shape{2, 2}, 2, 0, 1e-12, []float64{0.6, 1, 0.8, 0}},
		{"negative dim, p=1", []float64{1, -3}, vram.Shape{1, 2}, 1, -1, 1e-12, []float64{0.25, -0.75}},
		{"p=inf", []float64{2, -4, 1}, vram.Shape{3}, math.Inf(1), 0, 1e-12, []float64{0.5, -1, 0.25}},
		{"p=3", []float64{1, 2}, vram.Shape{2}, 3, 0, 1e-12, []float64{1 / math.Cbrt(9), 2 / math.Cbrt(9)}},
		{"norm below eps", []float64{0.3, 0.4}, vram.Shape{2}, 2, 0, 1, []float64{0.3, 0.4}},
		{"0-dimensional", []float64{-2}, vram.Shape{}, 2, 0, 1e-12, []float64{-1}},
		{"empty, other dimension", nil, vram.Shape{0, 3}, 2, 1, 1e-12, []float64{}},
		{"empty, along dim", nil, vram.Shape{2, 0}, 2, 1, 1e-12, []float64{}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				x := vram.FromSlice(tc.x, tc.shape, vram.Float64, dev)
				defer x.Release()
				y := vram.Normalize(x, tc.p, tc.dim, tc.eps)
				defer y.Release()
				if !slices.Equal(y.Shape(), tc.shape) || y.DType() != vram.Float64 || y.Device() != dev {
					t.Fatalf("got shape %v dtype %v device %v, want %v float64 %v", y.Shape(), y.DType(), y.Device(), tc.shape, dev)
				}
				if got := y.Float64s(); !closeTo(got, tc.want, 1e-12) {
					t.Errorf("got %v, want %v", got, tc.want)
				}
			})
		}
	}
}

func TestNormalizeHalf(t *testing.T) {
	x := vram.FromSlice([]float64{3, 4}, vram.Shape{2}, vram.Float16)
	defer x.Release()
	y := vram.Normalize(x, 2, 0, 1e-12)
	defer y.Release()
	if y.DType() != vram.Float16 {
		t.Fatalf("dtype %v, want float16", y.DType())
	}
	if got := y.Float64s(); !closeTo(got, []float64{0.6, 0.8}, 1e-3) {
		t.Errorf("got %v, want [0.6 0.8]", got)
	}
}

func TestNormalizeErrors(t *testing.T) {
	x := vram.Ones(vram.Shape{2, 3})
	defer x.Release()
	xi := vram.FromSlice([]int64{1, 2, 3}, vram.Shape{3})
	defer xi.Release()
	e := vram.Zeros(vram.Shape{2, 0})
	defer e.Release()
	tests := []struct {
		name string
		kind error
		fn   func()
	}{
		{"integer input", vram.ErrDType, func() { vram.Normalize(xi, 2, 0, 1e-12) }},
		{"dim out of range", vram.ErrIndex, func() { vram.Normalize(x, 2, 2, 1e-12) }},
		{"negative dim out of range", vram.ErrIndex, func() { vram.Normalize(x, 2, -3, 1e-12) }},
		{"NaN p", vram.ErrArgument, func() { vram.Normalize(x, math.NaN(), 0, 1e-12) }},
		{"NaN eps", vram.ErrArgument, func() { vram.Normalize(x, 2, 0, math.NaN()) }},
		{"inf norm over an empty dimension", vram.ErrShape, func() { vram.Normalize(e, math.Inf(1), 1, 1e-12) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			if !errors.Is(err, tc.kind) || errorOp(err) != "normalize" {
				t.Fatalf("got %v, want a normalize error of kind %v", err, tc.kind)
			}
		})
	}
}

// TestNormGradientsOnDevicesAndDTypes checks that the gradients of RMSNorm
// and Normalize on sim:0 and for 16-bit inputs agree with the float64 CPU
// ones, and come in the inputs' dtypes.
func TestNormGradientsOnDevicesAndDTypes(t *testing.T) {
	xv := []float64{0.5, -1, 2, 0.25, 1.5, -0.75}
	wv := []float64{1.5, -0.5, 2}
	tests := []struct {
		name string
		f    func(x, w *vram.Tensor) *vram.Tensor
	}{
		{"rms norm", func(x, w *vram.Tensor) *vram.Tensor { return vram.RMSNorm(x, []int{3}, w, 1e-5) }},
		{"normalize", func(x, w *vram.Tensor) *vram.Tensor { return vram.Normalize(x, 2, 0, 1e-12).Mul(w) }},
	}
	// grads returns the gradients of sum(f(x, w)·r) for x and w as float64
	// values, with their dtype and device.
	type result struct {
		gx, gw []float64
		dt     [2]vram.DType
		dev    vram.Device
	}
	grads := func(f func(x, w *vram.Tensor) *vram.Tensor, dev vram.Device, dt vram.DType) result {
		var res result
		vram.Tidy(func() {
			x := vram.FromSlice(xv, vram.Shape{2, 3}, dt, dev, vram.WithGrad())
			w := vram.FromSlice(wv, vram.Shape{3}, dt, dev, vram.WithGrad())
			r := vram.FromSlice([]float64{1, -2, 0.5, 3, 1, -1}, vram.Shape{2, 3}, dt, dev)
			f(x, w).Mul(r).Sum().Backward()
			res = result{x.Grad().Float64s(), w.Grad().Float64s(), [2]vram.DType{x.Grad().DType(), w.Grad().DType()}, x.Grad().Device()}
		})
		return res
	}
	for _, tc := range tests {
		want := grads(tc.f, vram.CPU, vram.Float64)
		for _, c := range []struct {
			dev vram.Device
			dt  vram.DType
			tol float64
		}{{vram.Sim(0), vram.Float64, 1e-12}, {vram.CPU, vram.Float16, 1e-2}, {vram.Sim(0), vram.BFloat16, 5e-2}} {
			t.Run(tc.name+"/"+c.dev.String()+"/"+c.dt.String(), func(t *testing.T) {
				got := grads(tc.f, c.dev, c.dt)
				if got.dt != [2]vram.DType{c.dt, c.dt} || got.dev != c.dev {
					t.Fatalf("gradients %v on %v, want %v on %v", got.dt, got.dev, c.dt, c.dev)
				}
				if !closeTo(got.gx, want.gx, c.tol) {
					t.Errorf("input gradient %v, want %v", got.gx, want.gx)
				}
				if !closeTo(got.gw, want.gw, c.tol) {
					t.Errorf("weight gradient %v, want %v", got.gw, want.gw)
				}
			})
		}
	}
}
