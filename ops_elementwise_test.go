package vram_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
)

// TestPowGradientAtZero pins PyTorch's gradients of a ** b where the plain
// formulas give 0 * inf: a zero exponent passes no gradient to the base,
// and a zero base with an exponent of at least 0 none to the exponent.
func TestPowGradientAtZero(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		name           string
		a, b           float64
		wantDA, wantDB float64
	}{
		{"0 ** 0", 0, 0, 0, 0},
		{"0 ** 2", 0, 2, 0, 0},
		{"0 ** 0.5", 0, 0.5, inf, 0},
		{"0 ** -1", 0, -1, -inf, -inf},
		{"2 ** 0", 2, 0, 0, math.Log(2)},
		{"2 ** 3", 2, 3, 12, 8 * math.Log(2)},
		{"-2 ** 0", -2, 0, 0, math.NaN()},
	}
	same := func(got, want float64) bool {
		return got == want || math.IsNaN(got) && math.IsNaN(want) || math.Abs(got-want) < 1e-12
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				a := vram.FromSlice([]float64{c.a}, vram.Shape{1}, dev, vram.WithGrad())
				defer a.Release()
				b := vram.FromSlice([]float64{c.b}, vram.Shape{1}, dev, vram.WithGrad())
				defer b.Release()
				vram.Tidy(func() { a.Pow(b).Sum().Backward() })
				if got := a.Grad().Item(); !same(got, c.wantDA) {
					t.Errorf("d/da = %v, want %v", got, c.wantDA)
				}
				if got := b.Grad().Item(); !same(got, c.wantDB) {
					t.Errorf("d/db = %v, want %v", got, c.wantDB)
				}
			})
		}
	}
	// Broadcast operands: the masks broadcast with the gradient.
	a := vram.FromSlice([]float64{0, 1, 2}, vram.Shape{3, 1}, vram.WithGrad())
	defer a.Release()
	b := vram.FromSlice([]float64{0, 2}, vram.Shape{2}, vram.WithGrad())
	defer b.Release()
	vram.Tidy(func() { a.Pow(b).Sum().Backward() })
	for i, want := range []float64{0, 2, 4} {
		if got := a.Grad().Float64s()[i]; !same(got, want) {
			t.Errorf("broadcast d/da[%d] = %v, want %v", i, got, want)
		}
	}
	for i, want := range []float64{math.Log(2), 4 * math.Log(2)} {
		if got := b.Grad().Float64s()[i]; !same(got, want) {
			t.Errorf("broadcast d/db[%d] = %v, want %v", i, got, want)
		}
	}
}

// TestInPlaceOnSharedElements checks that in-place operations refuse a
// tensor whose elements share memory (an Expand view), as PyTorch does,
// and leave its storage as it was, while views whose elements are distinct
// stay writable. fill_ is the exception, as in PyTorch: every element gets
// the one value, so it writes such a tensor, and so its storage.
func TestInPlaceOnSharedElements(t *testing.T) {
	ops := []struct {
		name string
		fn   func(x *vram.Tensor)
		// filled, when not 0, is the value an idempotent op writes into
		// a tensor whose elements share memory.
		filled float64
	}{
		{"mul_", func(x *vram.Tensor) { x.MulScalarInPlace(2) }, 0},
		{"add_", func(x *vram.Tensor) { x.AddInPlace(vram.Scalar(1)) }, 0},
		{"fill_", func(x *vram.Tensor) { x.FillInPlace(3) }, 3},
		{"copy_", func(x *vram.Tensor) { x.CopyFrom(vram.Scalar(5)) }, 0},
	}
	views := []struct {
		name   string
		view   func(base *vram.Tensor) *vram.Tensor
		shared bool
	}{
		{"expanded", func(b *vram.Tensor) *vram.Tensor { return b.Expand(4) }, true},
		{"expanded 2-D", func(b *vram.Tensor) *vram.Tensor { return b.Unsqueeze(0).Expand(3, 4) }, true},
		{"size-1 expand", func(b *vram.Tensor) *vram.Tensor { return b.Expand(1) }, false},
		{"contiguous copy", func(b *vram.Tensor) *vram.Tensor { return b.Expand(4).Contiguous() }, false},
	}
	for _, v := range views {
		for _, op := range ops {
			t.Run(v.name+"/"+op.name, func(t *testing.T) {
				base := vram.Ones(vram.Shape{1})
				defer base.Release()
				x := v.view(base)
				defer x.Release()
				err := vram.Catch(func() { vram.Tidy(func() { op.fn(x) }) })
				if !v.shared {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					return
				}
				if op.filled != 0 {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					if got := base.Item(); got != op.filled {
						t.Errorf("the storage holds %v, want %v", got, op.filled)
					}
					if got := x.Float64s(); slices.ContainsFunc(got, func(v float64) bool { return v != op.filled }) {
						t.Errorf("the view reads %v", got)
					}
					return
				}
				if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), "Clone") {
					t.Fatalf("error %v, want ErrArgument naming the fix", err)
				}
				if got := base.Item(); got != 1 {
					t.Errorf("the storage changed to %v", got)
				}
			})
		}
	}
}

// TestInPlaceFromOverlappingViews checks in-place operations whose operand
// is another view of the tensor written (a shifted slice, its transpose, a
// row broadcast over it): the result is the out-of-place one, computed
// from the operand's values before the write, on every device, and an
// operand that is exactly the tensor written is still written in place.
func TestInPlaceFromOverlappingViews(t *testing.T) {
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range []struct {
			name string
			// dst and src of base, a 4×4 matrix 0..15
			dst, src func(base *vram.Tensor) *vram.Tensor
		}{
			{"shift right", func(b *vram.Tensor) *vram.Tensor { return b.Reshape(16).Narrow(0, 1, 15) },
				func(b *vram.Tensor) *vram.Tensor { return b.Reshape(16).Narrow(0, 0, 15) }},
			{"shift left", func(b *vram.Tensor) *vram.Tensor { return b.Reshape(16).Narrow(0, 0, 15) },
				func(b *vram.Tensor) *vram.Tensor { return b.Reshape(16).Narrow(0, 1, 15) }},
			{"transpose", func(b *vram.Tensor) *vram.Tensor { return b }, (*vram.Tensor).T},
			{"row broadcast", func(b *vram.Tensor) *vram.Tensor { return b },
				func(b *vram.Tensor) *vram.Tensor { return b.Narrow(0, 2, 1) }},
			{"column broadcast", func(b *vram.Tensor) *vram.Tensor { return b },
				func(b *vram.Tensor) *vram.Tensor { return b.Narrow(1, 1, 1) }},
			{"itself", func(b *vram.Tensor) *vram.Tensor { return b }, func(b *vram.Tensor) *vram.Tensor { return b }},
			{"disjoint halves", func(b *vram.Tensor) *vram.Tensor { return b.Narrow(0, 0, 2) },
				func(b *vram.Tensor) *vram.Tensor { return b.Narrow(0, 2, 2) }},
		} {
			for _, op := range []struct {
				name string
				fn   func(dst, src *vram.Tensor)
				want func(dst, src *vram.Tensor) *vram.Tensor
			}{
				{"copy_", func(d, s *vram.Tensor) { d.CopyFrom(s) }, func(d, s *vram.Tensor) *vram.Tensor { return s.Expand(d.Shape()...) }},
				{"add_", func(d, s *vram.Tensor) { d.AddInPlace(s) }, (*vram.Tensor).Add},
				{"mul_", func(d, s *vram.Tensor) { d.MulInPlace(s) }, (*vram.Tensor).Mul},
				{"sub_", func(d, s *vram.Tensor) { d.SubInPlace(s) }, (*vram.Tensor).Sub},
				{"add_ scaled", func(d, s *vram.Tensor) { d.AddScaledInPlace(s, 2) }, func(d, s *vram.Tensor) *vram.Tensor { return d.Add(s.MulScalar(2)) }},
			} {
				vram.Tidy(func() {
					base := vram.Arange(0, 16, 1, dev, vram.Float64).Reshape(4, 4)
					ref := base.Clone()
					want := op.want(tc.dst(ref), tc.src(ref)).Float64s()
					dst := tc.dst(base)
					if err := vram.Catch(func() { op.fn(dst, tc.src(base)) }); err != nil {
						t.Errorf("%s: %s from %s: %v", dev, op.name, tc.name, err)
						return
					}
					if got := dst.Float64s(); !slices.Equal(got, want) {
						t.Errorf("%s: %s from %s:\n got %v\nwant %v", dev, op.name, tc.name, got, want)
					}
				})
			}
		}
	}
}

// TestCrossEntropyIgnoresPadding checks targets of -100 (PyTorch's default
// ignore_index): left out of the mean and of the gradient, NaN when every
// target is ignored (with zero gradients, as PyTorch's); any other
// negative target is still an index error.
func TestCrossEntropyIgnoresPadding(t *testing.T) {
	logits := []float64{1, 2, 3, 0, 0, 0, 3, 2, 1}
	lse := func(a, b, c float64) float64 { return math.Log(math.Exp(a) + math.Exp(b) + math.Exp(c)) }
	nll0 := lse(1, 2, 3) - 3 // row 0, class 2
	nll2 := lse(3, 2, 1) - 3 // row 2, class 0
	cases := []struct {
		name    string
		targets []int64
		want    float64
		rowGrad []bool // rows with a gradient
	}{
		{"none ignored", []int64{2, 1, 0}, (nll0 + math.Log(3) + nll2) / 3, []bool{true, true, true}},
		{"middle ignored", []int64{2, -100, 0}, (nll0 + nll2) / 2, []bool{true, false, true}},
		{"all ignored", []int64{-100, -100, -100}, math.NaN(), []bool{false, false, false}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				vram.Tidy(func() {
					x := vram.FromSlice(logits, vram.Shape{3, 3}, dev, vram.WithGrad())
					loss := vram.CrossEntropy(x, vram.FromSlice(c.targets, vram.Shape{3}, dev))
					got := loss.Item()
					if math.IsNaN(c.want) != math.IsNaN(got) || !math.IsNaN(got) && math.Abs(got-c.want) > 1e-12 {
						t.Fatalf("loss %v, want %v", got, c.want)
					}
					// All ignored: a NaN loss, but zero gradients, as PyTorch's.
					loss.Backward()
					g := x.Grad().Float64s()
					for r, want := range c.rowGrad {
						var abs float64
						for _, v := range g[3*r : 3*r+3] {
							abs += math.Abs(v)
						}
						if math.IsNaN(abs) || (abs > 0) != want {
							t.Errorf("row %d gradient %v, want one: %v", r, g[3*r:3*r+3], want)
						}
					}
				})
			})
		}
	}
	err := vram.Catch(func() {
		vram.Tidy(func() { vram.CrossEntropy(vram.Zeros(vram.Shape{1, 3}), vram.FromSlice([]int64{-1}, vram.Shape{1})) })
	})
	if !errors.Is(err, vram.ErrIndex) {
		t.Errorf("target -1: %v, want ErrIndex", err)
	}
}

// TestClassLossTargetDTypes checks that CrossEntropy and NLLLoss take
// int64 and int32 class targets and refuse others, which would be
// truncated to classes (PyTorch refuses them too).
func TestClassLossTargetDTypes(t *testing.T) {
	losses := map[string]struct {
		fn   func(x, y *vram.Tensor) *vram.Tensor
		want float64 // of zero scores
	}{"cross_entropy": {vram.CrossEntropy, math.Log(3)}, "nll_loss": {vram.NLLLoss, 0}}
	tests := []struct {
		dt   vram.DType
		kind error // nil: accepted
	}{
		{vram.Int64, nil},
		{vram.Int32, nil},
		{vram.Float32, vram.ErrDType},
		{vram.Float64, vram.ErrDType},
		{vram.Bool, vram.ErrDType},
	}
	for name, loss := range losses {
		for _, tc := range tests {
			t.Run(name+"/"+tc.dt.String(), func(t *testing.T) {
				err := vram.Catch(func() {
					vram.Tidy(func() {
						x := vram.Zeros(vram.Shape{2, 3})
						y := vram.FromSlice([]float64{0.7, 1}, vram.Shape{2}).Cast(tc.dt)
						if got := loss.fn(x, y).Item(); !(math.Abs(got-loss.want) < 1e-6) {
							t.Errorf("loss %v, want %v", got, loss.want)
						}
					})
				})
				if !errors.Is(err, tc.kind) || (err == nil) != (tc.kind == nil) {
					t.Fatalf("error %v, want %v", err, tc.kind)
				}
			})
		}
	}
}

// TestPiecewiseConstantGradients checks that Sign and the roundings pass a
// zero gradient, as PyTorch's do, rather than cutting the graph.
func TestPiecewiseConstantGradients(t *testing.T) {
	ops := map[string]func(*vram.Tensor) *vram.Tensor{
		"sign": (*vram.Tensor).Sign, "floor": (*vram.Tensor).Floor, "ceil": (*vram.Tensor).Ceil, "round": (*vram.Tensor).Round,
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			vram.Tidy(func() {
				x := vram.FromSlice([]float64{-1.5, 0.25, 2.5}, nil, vram.WithGrad())
				// x² + op(x): the gradient is 2x alone.
				x.Square().Add(op(x)).Sum().Backward()
				if got := x.Grad().Float64s(); got[0] != -3 || got[1] != 0.5 || got[2] != 5 {
					t.Errorf("gradient %v, want [-3 0.5 5]", got)
				}
				if err := vram.Catch(func() { op(x).Sum().Backward() }); err != nil {
					t.Errorf("backward through %s alone: %v", name, err)
				}
			})
		})
	}
}

// TestBoolAndIntegerArithmetic checks the ops PyTorch refuses on bool and
// integer tensors (a subtraction or negation of bool, a power of bools, an
// integer to a negative whole power) and the promotions it makes (a bool
// to a whole power is int64): refused with the dtype or argument error,
// never with a backend's "not implemented" nor a wrong value.
func TestBoolAndIntegerArithmetic(t *testing.T) {
	mask := func() *vram.Tensor { return vram.FromSlice([]bool{true, false}, nil) }
	ints := func() *vram.Tensor { return vram.FromSlice([]int64{2, -3}, nil) }
	for _, tc := range []struct {
		name string
		fn   func() *vram.Tensor
		kind error
	}{
		{"bool Neg", func() *vram.Tensor { return mask().Neg() }, vram.ErrDType},
		{"bool - bool", func() *vram.Tensor { return mask().Sub(mask()) }, vram.ErrDType},
		{"bool - int", func() *vram.Tensor { return mask().Sub(ints()) }, vram.ErrDType},
		{"int - bool", func() *vram.Tensor { return ints().Sub(mask()) }, vram.ErrDType},
		{"float - 0-d bool", func() *vram.Tensor { return vram.Ones(vram.Shape{2}).Sub(vram.Scalar(1, vram.Bool)) }, vram.ErrDType},
		{"bool SubScalar", func() *vram.Tensor { return mask().SubScalar(1) }, vram.ErrDType},
		{"bool RSubScalar", func() *vram.Tensor { return mask().RSubScalar(1) }, vram.ErrDType},
		{"int SubInPlace bool", func() *vram.Tensor { return ints().SubInPlace(mask()) }, vram.ErrDType},
		{"bool ** bool", func() *vram.Tensor { return mask().Pow(mask()) }, vram.ErrDType},
		{"int PowScalar(-1)", func() *vram.Tensor { return ints().PowScalar(-1) }, vram.ErrArgument},
		{"int32 PowScalar(-2)", func() *vram.Tensor { return ints().Cast(vram.Int32).PowScalar(-2) }, vram.ErrArgument},
		{"bool PowScalar(-1)", func() *vram.Tensor { return mask().PowScalar(-1) }, vram.ErrArgument},
	} {
		if err := vram.Catch(func() { tc.fn() }); !errors.Is(err, tc.kind) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.kind)
		}
	}
	for _, tc := range []struct {
		name string
		fn   func() *vram.Tensor
		dt   vram.DType
		want []float64
	}{
		{"bool PowScalar(2)", func() *vram.Tensor { return mask().PowScalar(2) }, vram.Int64, []float64{1, 0}},
		{"bool PowScalar(0.5)", func() *vram.Tensor { return mask().PowScalar(0.5) }, vram.Float32, []float64{1, 0}},
		{"bool ** int", func() *vram.Tensor { return mask().Pow(ints()) }, vram.Int64, []float64{1, 0}},
		{"int ** bool", func() *vram.Tensor { return ints().Pow(mask()) }, vram.Int64, []float64{2, 1}},
		{"int PowScalar(-0.5)", func() *vram.Tensor { return vram.FromSlice([]int64{4}, nil).PowScalar(-0.5) }, vram.Float32, []float64{0.5}},
		{"bool + bool", func() *vram.Tensor { return mask().Add(mask()) }, vram.Bool, []float64{1, 0}},
		{"bool AddScalar(-1)", func() *vram.Tensor { return mask().AddScalar(-1) }, vram.Int64, []float64{0, -1}},
		{"int Neg", func() *vram.Tensor { return ints().Neg() }, vram.Int64, []float64{-2, 3}},
	} {
		var got *vram.Tensor
		if err := vram.Catch(func() { got = tc.fn() }); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got.DType() != tc.dt || !slices.Equal(got.Float64s(), tc.want) {
			t.Errorf("%s: %v %s, want %v %s", tc.name, got.Float64s(), got.DType(), tc.want, tc.dt)
		}
	}
}

// TestInPlaceRecordsOperandsThatNeedGrad checks that an in-place operation
// whose operand requires grad is recorded outside NoGrad, as PyTorch
// records it: the tensor written, which required no grad, becomes a
// computed tensor whose backward pass gives the operand its gradient. A
// write into a view, which vram does not record, is refused and leaves the
// tensor unchanged. Inside NoGrad, and with a detached operand, the write
// goes through unrecorded.
func TestInPlaceRecordsOperandsThatNeedGrad(t *testing.T) {
	ops := []struct {
		name  string
		fn    func(x, w *vram.Tensor)
		want  []float32 // x = [1, 2] after the write, w = [3, 4]
		gradW []float32 // of x.Sum() after the write; nil: refused
	}{
		{"add_", func(x, w *vram.Tensor) { x.AddInPlace(w) }, []float32{4, 6}, []float32{1, 1}},
		{"sub_", func(x, w *vram.Tensor) { x.SubInPlace(w) }, []float32{-2, -2}, []float32{-1, -1}},
		{"mul_", func(x, w *vram.Tensor) { x.MulInPlace(w) }, []float32{3, 8}, []float32{1, 2}},
		{"div_", func(x, w *vram.Tensor) { x.DivInPlace(w) }, []float32{1.0 / 3, 0.5}, []float32{-1.0 / 9, -2.0 / 16}},
		{"add_ alpha", func(x, w *vram.Tensor) { x.AddScaledInPlace(w, 2) }, []float32{7, 10}, []float32{2, 2}},
		{"copy_", func(x, w *vram.Tensor) { x.CopyFrom(w) }, []float32{3, 4}, []float32{1, 1}},
		{"copy_ of a view", func(x, w *vram.Tensor) { x.CopyFrom(w.Narrow(0, 1, 1)) }, []float32{4, 4}, []float32{0, 2}},
		{"add_ into a view", func(x, w *vram.Tensor) { x.Narrow(0, 0, 1).AddInPlace(w.Sum()) }, []float32{8, 2}, nil},
	}
	near := func(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-6 }
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, op := range ops {
			t.Run(dev.String()+"/"+op.name, func(t *testing.T) {
				vram.Tidy(func() {
					x := vram.FromSlice([]float32{1, 2}, vram.Shape{2}, dev)
					w := vram.FromSlice([]float32{3, 4}, vram.Shape{2}, dev, vram.WithGrad())
					err := vram.Catch(func() { op.fn(x, w) })
					if op.gradW == nil {
						if !errors.Is(err, vram.ErrAutograd) || !strings.Contains(err.Error(), "view") {
							t.Fatalf("error %v, want ErrAutograd about a view", err)
						}
						if got := x.Float32s(); !slices.Equal(got, []float32{1, 2}) {
							t.Errorf("refused write changed the tensor to %v", got)
						}
						if x.RequiresGrad() {
							t.Errorf("refused write made the tensor require grad")
						}
					} else {
						if err != nil {
							t.Fatal(err)
						}
						if got := x.Float32s(); !slices.EqualFunc(got, op.want, near) {
							t.Errorf("got %v, want %v", got, op.want)
						}
						if !x.RequiresGrad() || x.IsLeaf() {
							t.Fatalf("written tensor: requires grad %v, leaf %v; want a computed tensor", x.RequiresGrad(), x.IsLeaf())
						}
						x.Sum().Backward()
						if got := w.Grad().Float32s(); !slices.EqualFunc(got, op.gradW, near) {
							t.Errorf("operand's gradient %v, want %v", got, op.gradW)
						}
					}
					for _, how := range []struct {
						name string
						run  func()
					}{
						{"NoGrad", func() { vram.NoGrad(func() { op.fn(x, w) }) }},
						{"Detach", func() { op.fn(x, w.Detach()) }},
					} {
						x = vram.FromSlice([]float32{1, 2}, vram.Shape{2}, dev)
						if err := vram.Catch(how.run); err != nil {
							t.Fatalf("%s: %v", how.name, err)
						}
						if got := x.Float32s(); !slices.EqualFunc(got, op.want, near) {
							t.Errorf("%s: got %v, want %v", how.name, got, op.want)
						}
						if x.RequiresGrad() {
							t.Errorf("%s: the unrecorded write made the tensor require grad", how.name)
						}
					}
				})
			})
		}
	}
}

// TestIntegerScalarsOutOfRange pins the ops of an integer or bool tensor
// with a scalar its dtype cannot hold: a comparison answers as with the
// number itself rather than with a wrapped one, a maximum or minimum that
// the bound cannot change returns the tensor, an infinity promotes to
// float as a fraction does, and other arithmetic refuses the value with
// ErrArgument (it would wrap) and leaves an in-place operand unchanged.
func TestIntegerScalarsOutOfRange(t *testing.T) {
	inf := math.Inf(1)
	type op = func(x *vram.Tensor) *vram.Tensor
	ok := []struct {
		name string
		dt   vram.DType
		op   op
		want []float64
		wdt  vram.DType
	}{
		{"int32 == 2^32", vram.Int32, func(x *vram.Tensor) *vram.Tensor { return x.EqScalar(1 << 32) }, []float64{0, 0, 0}, vram.Bool},
		{"int32 < 2^32", vram.Int32, func(x *vram.Tensor) *vram.Tensor { return x.LtScalar(1 << 32) }, []float64{1, 1, 1}, vram.Bool},
		{"int32 >= -2^32", vram.Int32, func(x *vram.Tensor) *vram.Tensor { return x.GeScalar(-1 << 32) }, []float64{1, 1, 1}, vram.Bool},
		{"int8 > 256", vram.Int8, func(x *vram.Tensor) *vram.Tensor { return x.GtScalar(256) }, []float64{0, 0, 0}, vram.Bool},
		{"int8 <= -256", vram.Int8, func(x *vram.Tensor) *vram.Tensor { return x.LeScalar(-256) }, []float64{0, 0, 0}, vram.Bool},
		{"int64 < 2^63", vram.Int64, func(x *vram.Tensor) *vram.Tensor { return x.LtScalar(1 << 63) }, []float64{1, 1, 1}, vram.Bool},
		{"bool == 2", vram.Bool, func(x *vram.Tensor) *vram.Tensor { return x.EqScalar(2) }, []float64{0, 0, 0}, vram.Bool},
		{"int32 clamp to 2^40", vram.Int32, func(x *vram.Tensor) *vram.Tensor { return x.Clamp(-1<<40, 1<<40) }, []float64{-1, 0, 1}, vram.Int32},
		{"int64 clamp to 1e19", vram.Int64, func(x *vram.Tensor) *vram.Tensor { return x.Clamp(0, 1e19) }, []float64{0, 0, 1}, vram.Int64},
		{"int64 + inf", vram.Int64, func(x *vram.Tensor) *vram.Tensor { return x.AddScalar(inf) }, []float64{inf, inf, inf}, vram.Float32},
		{"int32 * -inf", vram.Int32, func(x *vram.Tensor) *vram.Tensor { return x.MulScalar(-inf) }, []float64{inf, math.NaN(), -inf}, vram.Float32},
		{"bool < 0.5", vram.Bool, func(x *vram.Tensor) *vram.Tensor { return x.LtScalar(0.5) }, []float64{1, 0, 0}, vram.Bool},
		{"int32 < 0.5", vram.Int32, func(x *vram.Tensor) *vram.Tensor { return x.LtScalar(0.5) }, []float64{1, 1, 0}, vram.Bool},
		{"int32 + 2^31-1 wraps as int32", vram.Int32, func(x *vram.Tensor) *vram.Tensor { return x.AddScalar(math.MaxInt32) }, []float64{math.MaxInt32 - 1, math.MaxInt32, math.MinInt32}, vram.Int32},
	}
	refused := []struct {
		name string
		dt   vram.DType
		op   op
	}{
		{"int64 + 1e19", vram.Int64, func(x *vram.Tensor) *vram.Tensor { return x.AddScalar(1e19) }},
		{"int32 * 1e10", vram.Int32, func(x *vram.Tensor) *vram.Tensor { return x.MulScalar(1e10) }},
		{"int8 - 1000", vram.Int8, func(x *vram.Tensor) *vram.Tensor { return x.SubScalar(1000) }},
		{"1e19 - int64", vram.Int64, func(x *vram.Tensor) *vram.Tensor { return x.RSubScalar(1e19) }},
		{"int32 clamp from 2^40", vram.Int32, func(x *vram.Tensor) *vram.Tensor { return x.Clamp(1<<40, inf) }},
		{"int64 add_ 1e19", vram.Int64, func(x *vram.Tensor) *vram.Tensor { return x.AddScalarInPlace(1e19) }},
		{"int32 mul_ 2^32", vram.Int32, func(x *vram.Tensor) *vram.Tensor { return x.MulScalarInPlace(1 << 32) }},
		{"int64 add_ inf", vram.Int64, func(x *vram.Tensor) *vram.Tensor { return x.AddScalarInPlace(inf) }},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		// A comparison with a fraction is exact even where float32, the
		// dtype int + 0.5 has, would round the integer onto it.
		big := vram.FromSlice([]int32{1<<24 + 1}, vram.Shape{1}, dev)
		if got := big.GtScalar(1<<24 + 0.5).Bools(); !got[0] {
			t.Errorf("%s: 2^24+1 > 2^24+0.5 is %v", dev, got)
		}
		// So is one of int64 with a whole number above 2^62, where
		// float64 would round the elements.
		huge := vram.FromSlice([]int64{1<<62 + 1025, 1<<62 + 1024}, vram.Shape{2}, dev)
		if got := huge.EqScalar(1<<62 + 1024).Bools(); got[0] || !got[1] {
			t.Errorf("%s: [2^62+1025, 2^62+1024] == 2^62+1024 is %v", dev, got)
		}
		if got := huge.SubScalar(1<<62 + 1024).Int64s(); got[0] != 1 || got[1] != 0 {
			t.Errorf("%s: [2^62+1025, 2^62+1024] - (2^62+1024) is %v", dev, got)
		}
		in := func(dt vram.DType) *vram.Tensor {
			if dt == vram.Bool {
				return vram.FromSlice([]bool{false, true, true}, vram.Shape{3}, dev)
			}
			return vram.FromSlice([]int64{-1, 0, 1}, vram.Shape{3}, dev).Cast(dt)
		}
		for _, c := range ok {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				var got *vram.Tensor
				if err := vram.Catch(func() { got = c.op(in(c.dt)) }); err != nil {
					t.Fatal(err)
				}
				if got.DType() != c.wdt {
					t.Errorf("dtype %s, want %s", got.DType(), c.wdt)
				}
				g := got.Cast(vram.Float64).Float64s()
				for i := range g {
					if g[i] != c.want[i] && !(math.IsNaN(g[i]) && math.IsNaN(c.want[i])) {
						t.Fatalf("got %v, want %v", g, c.want)
					}
				}
			})
		}
		for _, c := range refused {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				x := in(c.dt)
				before := x.Cast(vram.Float64).Float64s()
				err := vram.Catch(func() { c.op(x) })
				if !errors.Is(err, vram.ErrArgument) && !errors.Is(err, vram.ErrDType) {
					t.Fatalf("err = %v, want ErrArgument or ErrDType", err)
				}
				if after := x.Cast(vram.Float64).Float64s(); !slices.Equal(after, before) {
					t.Errorf("operand changed to %v from %v", after, before)
				}
			})
		}
	}
}
