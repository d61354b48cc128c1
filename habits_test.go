package vram

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// needSim skips t unless sim device i exists.
func needSim(t *testing.T, i int) Device {
	t.Helper()
	d := Sim(i)
	if !d.Available() {
		t.Skipf("no %s", d)
	}
	return d
}

func TestLikeFactories(t *testing.T) {
	sim := needSim(t, 0)
	sources := map[string]func() *Tensor{
		"cpu f64 [2, 3]":       func() *Tensor { return Ones(Shape{2, 3}, Float64) },
		"sim f16 [4]":          func() *Tensor { return Ones(Shape{4}, Float16, sim) },
		"transposed [3, 2]":    func() *Tensor { return Arange(0, 6, 1).Reshape(2, 3).Transpose(0, 1) },
		"scalar":               func() *Tensor { return Scalar(5, Float64) },
		"requires grad":        func() *Tensor { return Ones(Shape{2}, WithGrad()) },
		"empty [0, 2] on sim":  func() *Tensor { return Zeros(Shape{0, 2}, sim) },
		"bf16 view of a slice": func() *Tensor { return Ones(Shape{4, 4}, BFloat16).Narrow(1, 1, 2) },
	}
	factories := []struct {
		name string
		make func(*Tensor, ...Option) *Tensor
		want float64 // every value, unless rand
		rand bool    // values are not fixed
	}{
		{"zeros_like", ZerosLike, 0, false},
		{"ones_like", OnesLike, 1, false},
		{"full_like", func(t *Tensor, o ...Option) *Tensor { return FullLike(t, -2.5, o...) }, -2.5, false},
		{"empty_like", EmptyLike, 0, true},
		{"rand_like", RandLike, 0, true},
		{"randn_like", RandnLike, 0, true},
	}
	overrides := []struct {
		name  string
		opts  []Option
		dtype func(*Tensor) DType
		dev   func(*Tensor) Device
		grad  bool
	}{
		{"inherit", nil, (*Tensor).DType, (*Tensor).Device, false},
		{"dtype", []Option{Float32}, func(*Tensor) DType { return Float32 }, (*Tensor).Device, false},
		{"device", []Option{CPU}, (*Tensor).DType, func(*Tensor) Device { return CPU }, false},
		{"both and grad", []Option{sim, Float64, WithGrad()}, func(*Tensor) DType { return Float64 }, func(*Tensor) Device { return sim }, true},
	}
	for sname, src := range sources {
		for _, f := range factories {
			for _, o := range overrides {
				t.Run(sname+"/"+f.name+"/"+o.name, func(t *testing.T) {
					s := src()
					defer s.Release()
					out := f.make(s, o.opts...)
					defer out.Release()
					if !reflect.DeepEqual(out.Shape(), s.Shape()) || out.DType() != o.dtype(s) || out.Device() != o.dev(s) {
						t.Fatalf("got %v %s on %s, want %v %s on %s", out.Shape(), out.DType(), out.Device(), s.Shape(), o.dtype(s), o.dev(s))
					}
					if out.RequiresGrad() != o.grad || !out.IsLeaf() {
						t.Fatalf("requires grad %v (leaf %v), want %v", out.RequiresGrad(), out.IsLeaf(), o.grad)
					}
					// A new dense tensor: row-major for the random
					// factories and for a source with gaps, else with the
					// source's strides (PyTorch's preserve_format).
					want := out.IsContiguous()
					if !f.rand || f.name == "empty_like" {
						if s.NumElements() > 0 && denseStrides(s.shape, s.strides) {
							want = slices.Equal(out.Strides(), s.Strides())
						}
					}
					if out.SharesStorage(s) || !want {
						t.Fatalf("shares storage %v, strides %v of a source with strides %v: want a new dense tensor in the source's layout",
							out.SharesStorage(s), out.Strides(), s.Strides())
					}
					vals := out.Float64s()
					for _, v := range vals {
						if !f.rand && v != f.want {
							t.Fatalf("values %v, want all %v", vals, f.want)
						}
					}
					if f.name == "rand_like" {
						for _, v := range vals {
							if v < 0 || v >= 1 {
								t.Fatalf("rand_like value %v outside [0, 1)", v)
							}
						}
					}
				})
			}
		}
	}
}

func TestLikeFactoriesErrors(t *testing.T) {
	released := Ones(Shape{2})
	released.Release()
	ints := Ones(Shape{3}, Int64)
	tests := []struct {
		name string
		fn   func()
		kind error
	}{
		{"zeros_like of a released tensor", func() { ZerosLike(released) }, ErrReleased},
		{"full_like of a released tensor", func() { FullLike(released, 1) }, ErrReleased},
		{"empty_like of a released tensor", func() { EmptyLike(released) }, ErrReleased},
		{"rand_like of a released tensor", func() { RandLike(released) }, ErrReleased},
		{"new_zeros of a released tensor", func() { released.NewZeros(Shape{1}) }, ErrReleased},
		{"rand_like of int64", func() { RandLike(ints) }, ErrDType},
		{"randn_like of int64", func() { RandnLike(ints) }, ErrDType},
		{"new_randn of int64", func() { ints.NewRandn(Shape{2}) }, ErrDType},
		{"ones_like on a missing device", func() { OnesLike(ints, CUDA(7)) }, ErrUnavailable},
		{"new_full on a missing device", func() { ints.NewFull(Shape{2}, 1, Sim(99)) }, ErrUnavailable},
		{"new_tensor with a wrong shape", func() { ints.NewTensor([]int{1, 2, 3}, Shape{2, 2}) }, ErrShape},
		{"new_tensor of strings", func() { ints.NewTensor([]string{"a"}, nil) }, ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := Catch(tc.fn); !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want %v", err, tc.kind)
			}
		})
	}
	// A float dtype option makes random values of an integer template.
	r := RandLike(ints, Float32, WithGenerator(NewGenerator(7)))
	want := Rand(Shape{3}, WithGenerator(NewGenerator(7)))
	if r.DType() != Float32 || !slices.Equal(r.Float64s(), want.Float64s()) {
		t.Fatalf("RandLike with a generator: %v %v, want %v", r.DType(), r.Float64s(), want.Float64s())
	}
}

func TestNewMethodsTakeShapes(t *testing.T) {
	sim := needSim(t, 0)
	base := Ones(Shape{2}, Float64, sim)
	defer base.Release()
	tests := []struct {
		name  string
		t     *Tensor
		shape Shape
		dtype DType
		dev   Device
		vals  []float64
	}{
		{"zeros", base.NewZeros(Shape{2, 2}), Shape{2, 2}, Float64, sim, []float64{0, 0, 0, 0}},
		{"ones 0-d from nil", base.NewOnes(nil), Shape{}, Float64, sim, []float64{1}},
		{"full int32", base.NewFull(Shape{3}, 7, Int32), Shape{3}, Int32, sim, []float64{7, 7, 7}},
		{"full []int", base.NewFull([]int{1}, 2), Shape{1}, Float64, sim, []float64{2}},
		{"empty on cpu", base.NewEmpty(Shape{0, 3}, CPU), Shape{0, 3}, Float64, CPU, []float64{}},
		{"tensor 1-D", base.NewTensor([]int{1, 2, 3}, nil), Shape{3}, Float64, sim, []float64{1, 2, 3}},
		{"tensor shaped", base.NewTensor([]float32{1, 2, 3, 4}, Shape{2, 2}, Int64), Shape{2, 2}, Int64, sim, []float64{1, 2, 3, 4}},
		{"randn", base.NewRandn(Shape{4}, Float32), Shape{4}, Float32, sim, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.t.Release()
			if !reflect.DeepEqual(tc.t.Shape(), tc.shape) || tc.t.DType() != tc.dtype || tc.t.Device() != tc.dev {
				t.Fatalf("got %v %s on %s, want %v %s on %s", tc.t.Shape(), tc.t.DType(), tc.t.Device(), tc.shape, tc.dtype, tc.dev)
			}
			if tc.vals != nil && tc.name != "empty on cpu" && !slices.Equal(tc.t.Float64s(), tc.vals) {
				t.Fatalf("values %v, want %v", tc.t.Float64s(), tc.vals)
			}
		})
	}
}

// gradModeCase nests scopes around a check.
type gradModeCase struct {
	name      string
	wrap      func(fn func())
	grad      bool // GradEnabled inside
	inference bool // InferenceModeEnabled inside
}

func gradModeCases() []gradModeCase {
	return []gradModeCase{
		{"none", func(fn func()) { fn() }, true, false},
		{"no_grad", NoGrad, false, false},
		{"enable_grad", EnableGrad, true, false},
		{"set_grad_enabled(false)", func(fn func()) { SetGradEnabled(false, fn) }, false, false},
		{"set_grad_enabled(true)", func(fn func()) { SetGradEnabled(true, fn) }, true, false},
		{"no_grad > enable_grad", func(fn func()) { NoGrad(func() { EnableGrad(fn) }) }, true, false},
		{"enable_grad > no_grad", func(fn func()) { EnableGrad(func() { NoGrad(fn) }) }, false, false},
		{"no_grad > no_grad", func(fn func()) { NoGrad(func() { NoGrad(fn) }) }, false, false},
		{"no_grad > set_grad_enabled(true)", func(fn func()) { NoGrad(func() { SetGradEnabled(true, fn) }) }, true, false},
		{"set_grad_enabled(false) > tidy", func(fn func()) { SetGradEnabled(false, func() { Tidy(fn) }) }, false, false},
		{"no_grad > enable_grad{tidy} > after", func(fn func()) {
			// The inner scopes end, leaving NoGrad in force.
			NoGrad(func() {
				EnableGrad(func() { Tidy(func() {}) })
				fn()
			})
		}, false, false},
		{"no_grad > region > enable_grad", func(fn func()) { NoGrad(func() { Region("r", func() { EnableGrad(fn) }) }) }, true, false},
		{"inference_mode", InferenceMode, false, true},
		{"inference_mode > enable_grad", func(fn func()) { InferenceMode(func() { EnableGrad(fn) }) }, false, true},
		{"inference_mode > set_grad_enabled(true)", func(fn func()) { InferenceMode(func() { SetGradEnabled(true, fn) }) }, false, true},
		{"enable_grad > inference_mode", func(fn func()) { EnableGrad(func() { InferenceMode(fn) }) }, false, true},
		{"inference_mode > inference_mode", func(fn func()) { InferenceMode(func() { InferenceMode(fn) }) }, false, true},
		{"inference_mode{} > after", func(fn func()) { NoGrad(func() { InferenceMode(func() {}); EnableGrad(fn) }) }, true, false},
	}
}

func TestGradModes(t *testing.T) {
	w := Ones(Shape{2}, WithGrad())
	defer w.Release()
	for _, tc := range gradModeCases() {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			tc.wrap(func() {
				ran = true
				if GradEnabled() != tc.grad || InferenceModeEnabled() != tc.inference {
					t.Errorf("GradEnabled %v, InferenceModeEnabled %v; want %v, %v", GradEnabled(), InferenceModeEnabled(), tc.grad, tc.inference)
				}
				y := w.MulScalar(2)
				defer y.Release()
				if y.RequiresGrad() != tc.grad || (y.GradFn() != "") != tc.grad {
					t.Errorf("an op inside records %v (grad_fn %q), want %v", y.RequiresGrad(), y.GradFn(), tc.grad)
				}
				if y.IsInference() != tc.inference {
					t.Errorf("IsInference %v, want %v", y.IsInference(), tc.inference)
				}
			})
			if !ran {
				t.Fatal("fn did not run")
			}
			if !GradEnabled() || InferenceModeEnabled() || current() != nil {
				t.Fatalf("state left after the scopes returned: grad %v, inference %v, state %v", GradEnabled(), InferenceModeEnabled(), current())
			}
		})
	}
}

func TestGradModesRestoreAfterPanic(t *testing.T) {
	for _, tc := range gradModeCases() {
		t.Run(tc.name, func(t *testing.T) {
			err := Catch(func() {
				tc.wrap(func() { fail("test", ErrArgument, "boom") })
			})
			if !errors.Is(err, ErrArgument) {
				t.Fatalf("got %v", err)
			}
			if !GradEnabled() || InferenceModeEnabled() || current() != nil {
				t.Fatalf("a panic left the state behind: grad %v, inference %v", GradEnabled(), InferenceModeEnabled())
			}
		})
	}
}

// TestGradModesPerGoroutine runs every mode on many goroutines at once,
// each checking that it sees only its own setting, and that goroutines
// started inside a mode do not inherit it.
func TestGradModesPerGoroutine(t *testing.T) {
	cases := gradModeCases()
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan string, 4*len(cases))
	report := func(e string) {
		select {
		case errs <- e:
		default: // enough said
		}
	}
	for round := range 4 {
		for _, tc := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range 50 {
					tc.wrap(func() {
						if GradEnabled() != tc.grad || InferenceModeEnabled() != tc.inference {
							report(tc.name + ": saw another goroutine's setting")
						}
						runtime.Gosched()
						if round == 0 {
							done := make(chan bool)
							go func() { done <- GradEnabled() && !InferenceModeEnabled() }()
							if !<-done {
								report(tc.name + ": a goroutine started inside inherited the setting")
							}
						}
					})
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestInferenceTensors(t *testing.T) {
	w := Ones(Shape{3}, WithGrad())
	normal := Ones(Shape{3})
	var inf, view, ofNormal *Tensor
	InferenceMode(func() {
		inf = Ones(Shape{3}).MulScalar(2)
		view = inf.Narrow(0, 0, 2)
		ofNormal = normal.Narrow(0, 0, 2) // a view of a normal tensor stays normal
		inf.AddScalarInPlace(1)           // in-place is fine inside
		if y := w.Mul(inf); y.RequiresGrad() {
			t.Error("an op inside InferenceMode recorded a graph")
		}
	})
	if !inf.IsInference() || !view.IsInference() || ofNormal.IsInference() || normal.IsInference() {
		t.Fatalf("IsInference: made inside %v, its view %v, view of a normal tensor %v, normal %v",
			inf.IsInference(), view.IsInference(), ofNormal.IsInference(), normal.IsInference())
	}
	if got := inf.Float64s(); !slices.Equal(got, []float64{3, 3, 3}) {
		t.Fatalf("values %v", got)
	}
	tests := []struct {
		name string
		fn   func() *Tensor
		kind error // nil: allowed
	}{
		{"saved for backward (mul)", func() *Tensor { return w.Mul(inf) }, ErrAutograd},
		{"saved for backward (view)", func() *Tensor { return w.Narrow(0, 0, 2).Mul(view) }, ErrAutograd},
		{"saved for backward (matmul)", func() *Tensor { return w.Reshape(1, 3).MatMul(inf.Reshape(3, 1)) }, ErrAutograd},
		{"saved for backward (unary)", func() *Tensor { return inf.Add(w).Exp().Mul(inf) }, ErrAutograd},
		{"clone requires grad", func() *Tensor { return inf.Clone().SetRequiresGrad(true) }, nil},
		{"set requires grad", func() *Tensor { return view.SetRequiresGrad(true) }, ErrAutograd},
		{"in-place", func() *Tensor { return inf.AddScalarInPlace(1) }, ErrAutograd},
		{"in-place from a normal tensor", func() *Tensor { return view.CopyFrom(normal.Narrow(0, 0, 2)) }, ErrAutograd},
		{"not saved (add)", func() *Tensor { return w.Add(inf) }, nil},
		{"no grad needed", func() *Tensor { return normal.Mul(inf) }, nil},
		{"clone is normal", func() *Tensor { return w.Mul(inf.Clone()) }, nil},
		{"read", func() *Tensor { return Scalar(inf.Sum().Item()) }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out *Tensor
			err := Catch(func() { out = tc.fn() })
			switch {
			case tc.kind == nil && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.kind != nil && !errors.Is(err, tc.kind):
				t.Fatalf("got %v, want %v", err, tc.kind)
			case tc.kind != nil && !strings.Contains(err.Error(), "inference"):
				t.Fatalf("the error does not say why: %v", err)
			case out != nil && out.IsInference():
				t.Fatalf("a result computed outside InferenceMode is an inference tensor")
			}
		})
	}
	// The rules hold outside InferenceMode only.
	InferenceMode(func() {
		if err := Catch(func() { inf.AddScalarInPlace(1); view.SetRequiresGrad(true).SetRequiresGrad(false) }); err != nil {
			t.Fatalf("inside InferenceMode: %v", err)
		}
	})
	// A normal tensor computed from inference tensors trains.
	c := inf.Clone()
	y := w.Mul(c).Sum()
	y.Backward()
	if got := w.Grad().Float64s(); !slices.Equal(got, c.Float64s()) {
		t.Fatalf("gradient %v, want %v", got, c.Float64s())
	}
}

func TestHostScalarOperands(t *testing.T) {
	sim := needSim(t, 0)
	other := needSim(t, 1)
	x := FromSlice([]float32{1, 2, 4}, nil, sim)
	xi := FromSlice([]int32{1, 2, 4}, nil, sim)
	yes := FromSlice([]bool{true, false, true}, nil, sim)
	s := Scalar(2)
	si := Scalar(3, Int64)
	sb := Scalar(1, Bool)
	defer func() {
		for _, u := range []*Tensor{x, xi, yes, s, si, sb} {
			u.Release()
		}
	}()
	ops := []struct {
		name string
		fn   func(x, s *Tensor) *Tensor
		x, s *Tensor
	}{
		{"add", (*Tensor).Add, x, s},
		{"add (scalar first)", func(x, s *Tensor) *Tensor { return s.Add(x) }, x, s},
		{"sub", (*Tensor).Sub, x, s},
		{"sub (scalar first)", func(x, s *Tensor) *Tensor { return s.Sub(x) }, x, s},
		{"mul", (*Tensor).Mul, x, s},
		{"div", (*Tensor).Div, x, s},
		{"div int", (*Tensor).Div, xi, si},
		{"pow", (*Tensor).Pow, x, s},
		{"maximum", (*Tensor).Maximum, x, s},
		{"minimum", (*Tensor).Minimum, x, s},
		{"eq", (*Tensor).Eq, x, s},
		{"ne", (*Tensor).Ne, x, s},
		{"lt", (*Tensor).Lt, x, s},
		{"le", (*Tensor).Le, x, s},
		{"gt", (*Tensor).Gt, x, s},
		{"ge", (*Tensor).Ge, x, s},
		{"int + int64 scalar", (*Tensor).Add, xi, si},
		{"int * float scalar", (*Tensor).Mul, xi, s},
		{"logical_and", (*Tensor).LogicalAnd, yes, sb},
		{"logical_or", (*Tensor).LogicalOr, yes, sb},
		{"where (scalar b)", func(x, s *Tensor) *Tensor { return Where(x.GtScalar(1), x, s) }, x, s},
		{"where (scalar a)", func(x, s *Tensor) *Tensor { return Where(x.GtScalar(1), s, x) }, x, s},
		{"where (scalar cond)", func(x, s *Tensor) *Tensor { return Where(s.GtScalar(0), x, x.Neg()) }, x, s},
		{"add_", func(x, s *Tensor) *Tensor { return x.Clone().AddInPlace(s) }, x, s},
		{"sub_", func(x, s *Tensor) *Tensor { return x.Clone().SubInPlace(s) }, x, s},
		{"mul_", func(x, s *Tensor) *Tensor { return x.Clone().MulInPlace(s) }, x, s},
		{"div_", func(x, s *Tensor) *Tensor { return x.Clone().DivInPlace(s) }, x, s},
		{"add_ scaled", func(x, s *Tensor) *Tensor { return x.Clone().AddScaledInPlace(s, 0.5) }, x, s},
		{"copy_", func(x, s *Tensor) *Tensor { return x.Clone().CopyFrom(s) }, x, s},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			Tidy(func() { checkHostScalarOp(t, sim, op.fn, op.x, op.s) })
		})
	}

	// Everything else across devices is still a mismatch.
	mismatches := []struct {
		name string
		fn   func()
	}{
		{"1-element CPU tensor", func() { x.Add(Ones(Shape{1})) }},
		{"3-element CPU tensor", func() { x.Mul(Ones(Shape{3})) }},
		{"0-d on another sim device", func() { x.Add(Scalar(1, other)) }},
		{"0-d sim with a CPU vector", func() { Ones(Shape{3}).Add(Scalar(1, sim)) }},
		{"in-place into a 0-d CPU tensor", func() { Scalar(1).AddInPlace(x) }},
		{"where with a CPU vector", func() { Where(x.GtScalar(1), x, Ones(Shape{3})) }},
		{"matmul", func() { x.Reshape(3, 1).MatMul(Ones(Shape{1, 1})) }},
	}
	for _, m := range mismatches {
		t.Run("mismatch/"+m.name, func(t *testing.T) {
			var dm *DeviceMismatchError
			if err := Catch(func() { Tidy(m.fn) }); !errors.As(err, &dm) {
				t.Fatalf("got %v, want a DeviceMismatchError", err)
			}
		})
	}

	// A released scalar is reported as released, under the op's name.
	gone := Scalar(1)
	gone.Release()
	if err := Catch(func() { Tidy(func() { x.Add(gone) }) }); !errors.Is(err, ErrReleased) || !strings.Contains(err.Error(), "add") {
		t.Fatalf("got %v, want ErrReleased from add", err)
	}
}

// checkHostScalarOp checks that fn(x, s) for a 0-d CPU s gives what it
// gives for s on x's device.
func checkHostScalarOp(t *testing.T, dev Device, fn func(x, s *Tensor) *Tensor, x, s *Tensor) {
	t.Helper()
	want := fn(x, s.To(dev)) // the same scalar on x's device: the meaning
	got := fn(x, s)
	if got.Device() != dev || got.DType() != want.DType() || !reflect.DeepEqual(got.Shape(), want.Shape()) {
		t.Fatalf("got %v %s on %s, want %v %s on %s", got.Shape(), got.DType(), got.Device(), want.Shape(), want.DType(), dev)
	}
	if !slices.Equal(got.Float64s(), want.Float64s()) {
		t.Fatalf("values %v, want %v", got.Float64s(), want.Float64s())
	}
}

func TestHostScalarGradientsAndMemory(t *testing.T) {
	d := needSim(t, 2)
	base := liveOn(d)
	x := FromSlice([]float32{1, 2, 3}, nil, d, WithGrad())
	s := Scalar(2, WithGrad()) // on the CPU
	for _, tc := range []struct {
		name   string
		loss   func() *Tensor
		gx, gs []float64
	}{
		{"mul", func() *Tensor { return x.Mul(s).Sum() }, []float64{2, 2, 2}, []float64{6}},
		{"sub (scalar first)", func() *Tensor { return s.Sub(x).Sum() }, []float64{-1, -1, -1}, []float64{3}},
		{"div", func() *Tensor { return x.Div(s).Sum() }, []float64{0.5, 0.5, 0.5}, []float64{-1.5}},
		{"where", func() *Tensor { return Where(x.GtScalar(1), x, s).Sum() }, []float64{0, 1, 1}, []float64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				tc.loss().Backward()
			})
			if x.Grad().Device() != d || s.Grad().Device() != CPU {
				t.Fatalf("gradients on %s and %s, want %s and cpu", x.Grad().Device(), s.Grad().Device(), d)
			}
			if !slices.Equal(x.Grad().Float64s(), tc.gx) || !slices.Equal(s.Grad().Float64s(), tc.gs) {
				t.Fatalf("gradients %v and %v, want %v and %v", x.Grad().Float64s(), s.Grad().Float64s(), tc.gx, tc.gs)
			}
			x.ZeroGrad()
			s.ZeroGrad()
		})
	}
	// Without Tidy: the copies of the scalar are released by the op.
	for range 10 {
		y := x.Add(s)
		y.Release()
		NoGrad(func() {
			z := x.Clone()
			z.MulInPlace(s)
			z.Release()
		})
	}
	x.Release()
	s.Release()
	if got := liveOn(d) - base; got != 0 {
		t.Fatalf("%d bytes left on %s", got, d)
	}
}

func TestGetDevice(t *testing.T) {
	tests := []struct {
		dev  Device
		want int
	}{
		{CPU, -1},
		{Sim(0), 0},
		{Sim(1), 1},
		{CUDA(0), 0},
	}
	for _, tc := range tests {
		t.Run(tc.dev.String(), func(t *testing.T) {
			if !tc.dev.Available() {
				t.Skipf("no %s", tc.dev)
			}
			x := Ones(Shape{1}, tc.dev)
			defer x.Release()
			if got := x.GetDevice(); got != tc.want {
				t.Fatalf("GetDevice() = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSetDevice(t *testing.T) {
	n := DeviceCount()
	tests := []struct {
		index int
		kind  error // nil: accepted
	}{
		{-1, ErrArgument},
		{-1 << 40, ErrArgument},
		{n, ErrUnavailable},
		{n + 1, ErrUnavailable},
		{1 << 40, ErrUnavailable},
	}
	if n > 0 {
		tests = append(tests, struct {
			index int
			kind  error
		}{n - 1, nil}, struct {
			index int
			kind  error
		}{0, nil})
	} else {
		tests = append(tests, struct {
			index int
			kind  error
		}{0, ErrUnavailable})
	}
	for _, tc := range tests {
		err := SetDevice(tc.index)
		switch {
		case tc.kind == nil && err != nil:
			t.Errorf("SetDevice(%d): %v", tc.index, err)
		case tc.kind != nil && !errors.Is(err, tc.kind):
			t.Errorf("SetDevice(%d) = %v, want %v", tc.index, err, tc.kind)
		case tc.kind != nil && CurrentDevice() != 0:
			t.Errorf("a failed SetDevice(%d) changed the current device to %d", tc.index, CurrentDevice())
		case tc.kind == nil && CurrentDevice() != tc.index:
			t.Errorf("SetDevice(%d) left the current device at %d", tc.index, CurrentDevice())
		}
		if tc.kind == ErrUnavailable && err != nil && !strings.Contains(err.Error(), fmt.Sprintf("cuda:%d does not exist", tc.index)) {
			t.Errorf("SetDevice(%d): the error does not name the device: %v", tc.index, err)
		}
		if tc.kind == nil {
			if err := SetDevice(0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if CurrentDevice() != 0 {
		t.Fatalf("current device %d", CurrentDevice())
	}
}

// collectWarnings runs fn with Config.DebugLeaks on, then collects garbage
// until the warnings whose message contains want have arrived (or a second
// has passed), and returns all warnings.
func collectWarnings(t *testing.T, fn func(), want ...string) []Warning {
	t.Helper()
	var mu sync.Mutex
	var got []Warning
	old := SetWarningHandler(func(w Warning) {
		mu.Lock()
		got = append(got, w)
		mu.Unlock()
	})
	defer SetWarningHandler(old)
	debugLeaks.Store(true)
	fn()
	debugLeaks.Store(false)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		found := 0
		for _, s := range want {
			for _, w := range got {
				if strings.Contains(w.Message, s) {
					found++
					break
				}
			}
		}
		mu.Unlock()
		if found == len(want) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(got)
}

//go:noinline
func forgetView(b *Tensor) float64 { return b.Narrow(0, 0, 1).Sum().Item() }

func TestLeakReportNamesTheView(t *testing.T) {
	d := needSim(t, 2)
	base := liveOn(d)
	var kept *Tensor
	warnings := collectWarnings(t, func() {
		b := Zeros(Shape{64 << 10}, d) // 256 KiB
		forgetView(b)                  // the Narrow view is never released
		b.Release()                    // ... so the storage stays
		if got := liveOn(d) - base; got < 256<<10 {
			t.Errorf("live %d: the view should keep the storage", got)
		}
		kept = Ones(Shape{16}, d)
		kept.Narrow(0, 0, 4) // never released, but kept is still alive
	}, "was the last reference", "still used by other tensors", "a tensor [] float32")
	defer kept.Release()
	var pinned, shared, plain *Warning
	for i, w := range warnings {
		switch {
		case strings.Contains(w.Message, "was the last reference"):
			pinned = &warnings[i]
		case strings.Contains(w.Message, "still used by other tensors"):
			shared = &warnings[i]
		case strings.HasPrefix(w.Message, "a tensor [] float32"):
			plain = &warnings[i] // the Sum
		}
	}
	if pinned == nil || shared == nil || plain == nil {
		t.Fatalf("missing reports; got %d warnings: %v", len(warnings), warnings)
	}
	for _, want := range []string{
		"a view [1] float32 on " + d.String(),
		"made by Narrow at ",
		"habits_test.go:",
		"all 256.00 KiB of it",
		"allocated by Zeros at ",
		"forgetView",
		"vram.Tidy",
	} {
		if !strings.Contains(pinned.Message, want) {
			t.Errorf("the report of the view that pinned the storage lacks %q:\n%s", want, pinned.Message)
		}
	}
	if !strings.Contains(pinned.Location, "habits_test.go:") {
		t.Errorf("location %q does not name the view's creation site", pinned.Location)
	}
	for _, want := range []string{"a view [4] float32", "made by Narrow at", "allocated by Ones at"} {
		if !strings.Contains(shared.Message, want) {
			t.Errorf("the report of a view whose storage is shared lacks %q:\n%s", want, shared.Message)
		}
	}
	if !strings.Contains(plain.Message, "made by Sum at") {
		t.Errorf("the report of a plain tensor lacks its creator:\n%s", plain.Message)
	}
	if got := liveOn(d) - base; got != 64 {
		t.Fatalf("live %d after the view was collected, want only kept's 64 bytes", got)
	}
}
