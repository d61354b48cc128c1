package vram_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/optim"
)

// TestCUDAComposedMathOps checks that the composed math ops give the CPU's
// results on a GPU, that integer remainders run there, and that float
// ones, which need a remainder kernel the GPU lacks, fail with an error
// wrapping backend.ErrNotImplemented rather than give a rounded answer.
func TestCUDAComposedMathOps(t *testing.T) {
	requireCUDA(t, 1)
	vram.Tidy(func() {
		x := vram.FromSlice([]float32{-0.9, -0.3, 0, 0.2, 0.7, 0.95}, vram.Shape{2, 3})
		g := x.CUDA(0)
		ops := []struct {
			name string
			f    func(*vram.Tensor) *vram.Tensor
		}{
			{"asin", (*vram.Tensor).Asin}, {"acos", (*vram.Tensor).Acos}, {"atan", (*vram.Tensor).Atan},
			{"sinh", (*vram.Tensor).Sinh}, {"cosh", (*vram.Tensor).Cosh}, {"tan", (*vram.Tensor).Tan},
			{"log2 abs", func(v *vram.Tensor) *vram.Tensor { return v.Abs().AddScalar(1).Log2() }},
			{"logsumexp", func(v *vram.Tensor) *vram.Tensor { return v.Logsumexp([]int{1}, false) }},
			{"cdist", func(v *vram.Tensor) *vram.Tensor { return vram.Cdist(v, v, 2) }},
			{"diagonal", func(v *vram.Tensor) *vram.Tensor { return v.Diagonal(1, 0, 1).Contiguous() }},
			{"masked_select", func(v *vram.Tensor) *vram.Tensor { return v.MaskedSelect(v.GtScalar(0)) }},
		}
		for _, o := range ops {
			closeSlices(t, o.name, o.f(g).CPU().Float32s(), o.f(x).Float32s(), 1e-6, 1e-7)
		}
		// Python's 7 % -2 and -7 % -2 are both -1; 7 % 2 and -7 % 2 both 1;
		// C's fmod takes the dividend's sign instead.
		ic := vram.FromSlice([]int64{7, -7, 7, -7}, vram.Shape{4})
		dc := vram.FromSlice([]int64{-2, -2, 2, 2}, vram.Shape{4})
		i, d := ic.CUDA(0), dc.CUDA(0)
		ints := []struct {
			name string
			got  []int64
			want []int64
		}{
			{"remainder by -2", i.RemainderScalar(-2).Int64s(), []int64{-1, -1, -1, -1}},
			{"remainder by 2", i.RemainderScalar(2).Int64s(), []int64{1, 1, 1, 1}},
			{"remainder by a tensor", i.Remainder(d).Int64s(), []int64{-1, -1, 1, 1}},
			{"fmod by a tensor", i.Fmod(d).Int64s(), []int64{1, -1, 1, -1}},
			{"floor_divide by a tensor", i.FloorDivide(d).Int64s(), []int64{-4, 3, 3, -4}},
			{"cpu remainder by a tensor", ic.Remainder(dc).Int64s(), []int64{-1, -1, 1, 1}},
		}
		for _, c := range ints {
			if !slices.Equal(c.got, c.want) {
				t.Errorf("int64 %s on the GPU: %v, want %v", c.name, c.got, c.want)
			}
		}
		err := vram.Catch(func() { g.RemainderScalar(2) })
		if !errors.Is(err, backend.ErrNotImplemented) && err != nil {
			t.Errorf("float remainder on the GPU: %v", err)
		}
		if err == nil && math.Abs(g.RemainderScalar(2).CPU().Float64s()[0]-1.1) > 1e-6 {
			t.Errorf("float remainder on the GPU: %v", g.RemainderScalar(2).CPU().Float64s())
		}
	})
}

// TestCUDALogicOps checks that the logical reductions, the value tests and
// the small math ops built from other ops give the CPU's results on a GPU.
func TestCUDALogicOps(t *testing.T) {
	requireCUDA(t, 1)
	vram.Tidy(func() {
		inf, nan := math.Inf(1), math.NaN()
		x := vram.FromSlice([]float32{-2.5, 0, float32(nan), 0.75, float32(inf), float32(-inf)}, vram.Shape{2, 3})
		g := x.CUDA(0)
		w := vram.FromSlice([]float32{0.1, 0.5, 0.9}, vram.Shape{3})
		ops := []struct {
			name string
			f    func(v, w *vram.Tensor) *vram.Tensor
		}{
			{"any", func(v, _ *vram.Tensor) *vram.Tensor { return v.Any(1) }},
			{"all", func(v, _ *vram.Tensor) *vram.Tensor { return v.AllKeepDim(0) }},
			{"count_nonzero", func(v, _ *vram.Tensor) *vram.Tensor { return v.CountNonzero() }},
			{"isclose", func(v, _ *vram.Tensor) *vram.Tensor { return v.IsClose(v.AddScalar(1e-6), 1e-5, 1e-8, true) }},
			{"isinf", func(v, _ *vram.Tensor) *vram.Tensor { return v.IsInf() }},
			{"isposinf", func(v, _ *vram.Tensor) *vram.Tensor { return v.IsPosInf() }},
			{"isneginf", func(v, _ *vram.Tensor) *vram.Tensor { return v.IsNegInf() }},
			{"isfinite", func(v, _ *vram.Tensor) *vram.Tensor { return v.IsFinite() }},
			{"nan_to_num", func(v, _ *vram.Tensor) *vram.Tensor { return v.NanToNum(0, inf, -inf) }},
			{"trunc", func(v, _ *vram.Tensor) *vram.Tensor { return v.Trunc() }},
			{"frac", func(v, _ *vram.Tensor) *vram.Tensor { return v.Frac() }},
			{"clamp_min", func(v, _ *vram.Tensor) *vram.Tensor { return v.ClampMin(0) }},
			{"lerp", func(v, w *vram.Tensor) *vram.Tensor { return v.NanToNum(0, 10, -10).Lerp(v.NanToNum(1, 1, 1), w) }},
			{"lerp scalar", func(v, _ *vram.Tensor) *vram.Tensor { return v.LerpScalar(v.AddScalar(1), 0.75) }},
			{"outer", func(v, w *vram.Tensor) *vram.Tensor { return w.Outer(w) }},
			{"nonzero", func(v, _ *vram.Tensor) *vram.Tensor { return v.Nonzero() }},
			{"nonzero tuple", func(v, _ *vram.Tensor) *vram.Tensor { return v.NonzeroTuple()[1] }},
			{"logical_xor", func(v, w *vram.Tensor) *vram.Tensor { return v.LogicalXor(w.SubScalar(0.5)) }},
			{"one_hot", func(v, _ *vram.Tensor) *vram.Tensor { return v.NanToNum(0, 3, 0).Abs().Long().OneHot(-1) }},
		}
		for _, o := range ops {
			got, want := o.f(g, w.CUDA(0)), o.f(x, w)
			if got.Device() != vram.CUDA(0) || got.DType() != want.DType() {
				t.Errorf("%s: got %s on %s, want %s", o.name, got.DType(), got.Device(), want.DType())
				continue
			}
			gs, ws := got.CPU().Float64s(), want.Float64s()
			if len(gs) != len(ws) {
				t.Errorf("%s: got %v, want %v", o.name, gs, ws)
				continue
			}
			for i := range ws {
				if gs[i] != ws[i] && !(math.IsNaN(gs[i]) && math.IsNaN(ws[i])) && math.Abs(gs[i]-ws[i]) > 1e-6*math.Abs(ws[i]) {
					t.Errorf("%s: got %v, want %v", o.name, gs, ws)
					break
				}
			}
		}
		if g.Equal(g) != x.Equal(x) || !g.AllClose(g, 0, 0, true) {
			t.Errorf("equal or allclose on the GPU differs from the CPU")
		}
	})
}

// TestCUDAEinsumOrderSearch checks that Einsum, the order statistics and
// the search and bin ops give the CPU's results on a GPU, and that the
// gradient of an Einsum reaches a GPU operand.
func TestCUDAEinsumOrderSearch(t *testing.T) {
	requireCUDA(t, 1)
	vram.Tidy(func() {
		x := vram.FromSlice([]float32{3, -1, 2, 2, 0.5, 7, -4, 1, 6, 0, 2, 5}, vram.Shape{3, 4})
		g := x.CUDA(0)
		q := vram.FromSlice([]float32{0.1, 0.5, 0.75}, vram.Shape{3})
		ops := []struct {
			name string
			f    func(v, q *vram.Tensor) *vram.Tensor
		}{
			{"einsum matmul", func(v, _ *vram.Tensor) *vram.Tensor { return vram.Einsum("ij,kj->ik", v, v) }},
			{"einsum trace batch", func(v, _ *vram.Tensor) *vram.Tensor {
				return vram.Einsum("...ii->...", v.Narrow(1, 0, 3).Unsqueeze(0))
			}},
			{"median", func(v, _ *vram.Tensor) *vram.Tensor { m, _ := v.MedianDim(1, false); return m }},
			{"median index", func(v, _ *vram.Tensor) *vram.Tensor { _, i := v.MedianDim(0, true); return i.Float() }},
			{"kthvalue", func(v, _ *vram.Tensor) *vram.Tensor { k, _ := v.Kthvalue(3, 1, false); return k }},
			{"quantile", func(v, q *vram.Tensor) *vram.Tensor { return v.Quantile(q, 1, false, vram.QuantileLinear) }},
			{"cummax", func(v, _ *vram.Tensor) *vram.Tensor { c, _ := v.Cummax(1); return c }},
			{"logcumsumexp", func(v, _ *vram.Tensor) *vram.Tensor { return v.Logcumsumexp(1) }},
			{"searchsorted", func(v, _ *vram.Tensor) *vram.Tensor {
				s, _ := v.Sort(1, false)
				return vram.SearchSorted(s, v, vram.SearchSortedOptions{Right: true}).Float()
			}},
			{"histc", func(v, _ *vram.Tensor) *vram.Tensor { return v.Histc(5, 0, 0) }},
			{"unique", func(v, _ *vram.Tensor) *vram.Tensor { u, _, _ := v.Unique(true, false, false); return u }},
			{"unique dim", func(v, _ *vram.Tensor) *vram.Tensor { u, _, _ := v.Round().UniqueDim(1, false, false); return u }},
			{"bucketize int32", func(v, _ *vram.Tensor) *vram.Tensor {
				b := vram.FromSlice([]float32{-1, 0, 2, 5}, vram.Shape{4}, v.Device())
				return v.BucketizeWith(b, vram.BucketizeOptions{OutInt32: true}).Float()
			}},
		}
		for _, o := range ops {
			closeSlices(t, o.name, o.f(g, q.CUDA(0)).CPU().Float32s(), o.f(x, q).Float32s(), 1e-5, 1e-6)
		}
		w := vram.FromSlice([]float32{1, 2, 3, 4}, vram.Shape{2, 2}, vram.CUDA(0), vram.WithGrad())
		vram.Einsum("ij,ij->", w, w).Backward()
		closeSlices(t, "einsum grad", w.Grad().CPU().Float32s(), []float32{2, 4, 6, 8}, 1e-6, 0)
	})
}

// TestCUDATotalNorm checks optim.GetTotalNorm of gradients on a GPU, of
// three dtypes and with a NaN, against the same gradients on the CPU.
func TestCUDATotalNorm(t *testing.T) {
	requireCUDA(t, 1)
	vram.Tidy(func() {
		g := vram.NewGenerator(3)
		host := []*vram.Tensor{
			vram.Randn(vram.Shape{64, 33}, vram.Float32, vram.WithGenerator(g)),
			vram.Randn(vram.Shape{7}, vram.Float64, vram.WithGenerator(g)),
			vram.Randn(vram.Shape{5, 5}, vram.Float32, vram.WithGenerator(g)).Cast(vram.BFloat16),
			nil,
		}
		dev := make([]*vram.Tensor, len(host))
		for i, h := range host {
			if h != nil {
				dev[i] = h.CUDA(0)
			}
		}
		for _, p := range []float64{2, 1, 3, math.Inf(1)} {
			want, err := optim.GetTotalNorm(host, optim.ClipOptions{NormType: p})
			if err != nil {
				t.Fatal(err)
			}
			got, err := optim.GetTotalNorm(dev, optim.ClipOptions{NormType: p})
			if err != nil || math.Abs(got-want) > 1e-5*want {
				t.Errorf("p=%v: total norm on the GPU %v (%v), on the CPU %v", p, got, err, want)
			}
		}
		nan := vram.FromSlice([]float32{1, float32(math.NaN())}, vram.Shape{2}, vram.CUDA(0))
		if got, _ := optim.GetTotalNorm(append(dev, nan), optim.ClipOptions{}); !math.IsNaN(got) {
			t.Errorf("a NaN gradient on the GPU: total norm %v, want NaN", got)
		}
	})
}

// TestCUDALinalg checks that the linalg ops give the CPU's results on a
// GPU and leave them there: the decompositions through the host, the
// composed ones on the device, and gradients of Det, Inv and Solve.
func TestCUDALinalg(t *testing.T) {
	requireCUDA(t, 1)
	vram.Tidy(func() {
		x := vram.FromSlice([]float32{4, 1, 2, 1, 3, 0, 2, 0, 5, 1, 2, 3, -1, 0, 2, 1, 1, 4}, vram.Shape{2, 3, 3})
		b := vram.FromSlice([]float32{1, 2, 3}, vram.Shape{3})
		g, gb := x.CUDA(0), b.CUDA(0)
		ops := []struct {
			name string
			f    func(a, b *vram.Tensor) *vram.Tensor
		}{
			{"det", func(a, _ *vram.Tensor) *vram.Tensor { return vram.Det(a) }},
			{"inv", func(a, _ *vram.Tensor) *vram.Tensor { return vram.Inv(a) }},
			{"solve", func(a, b *vram.Tensor) *vram.Tensor { return vram.Solve(a, b, true) }},
			{"cholesky", func(a, _ *vram.Tensor) *vram.Tensor { return vram.Cholesky(a.MatMul(a.MT()), false) }},
			{"qr r", func(a, _ *vram.Tensor) *vram.Tensor { _, r := vram.QR(a, "reduced"); return r }},
			{"eigh values", func(a, _ *vram.Tensor) *vram.Tensor { w, _ := vram.Eigh(a, "L"); return w }},
			{"svdvals", func(a, _ *vram.Tensor) *vram.Tensor { return vram.Svdvals(a) }},
			{"pinv", func(a, _ *vram.Tensor) *vram.Tensor { return vram.Pinv(a) }},
			{"matrix norm nuc", func(a, _ *vram.Tensor) *vram.Tensor { return vram.MatrixNorm(a, "nuc", false) }},
			{"matrix norm inf", func(a, _ *vram.Tensor) *vram.Tensor { return vram.MatrixNorm(a, "inf", false) }},
			{"matrix power", func(a, _ *vram.Tensor) *vram.Tensor { return vram.MatrixPower(a, -2) }},
			{"kron", func(a, b *vram.Tensor) *vram.Tensor { return vram.Kron(a, b) }},
			{"diag embed", func(_, b *vram.Tensor) *vram.Tensor { return vram.DiagEmbed(b, 1) }},
			{"trace", func(a, _ *vram.Tensor) *vram.Tensor { return vram.Trace(a.Select(0, 1)) }},
		}
		for _, o := range ops {
			got := o.f(g, gb)
			if got.Device() != vram.CUDA(0) {
				t.Errorf("%s: result on %s", o.name, got.Device())
			}
			closeSlices(t, o.name, got.CPU().Float32s(), o.f(x, b).Float32s(), 1e-5, 1e-5)
		}
		grads := func(a, b *vram.Tensor) []float32 {
			a, b = a.Detach().SetRequiresGrad(true), b.Detach().SetRequiresGrad(true)
			vram.Det(a).Sum().Add(vram.Inv(a).Sum()).Add(vram.Solve(a, b, true).Sum()).Backward()
			return append(a.Grad().CPU().Float32s(), b.Grad().CPU().Float32s()...)
		}
		closeSlices(t, "gradients", grads(g, gb), grads(x, b), 1e-4, 1e-4)
	})
}

// TestCUDACTCLoss checks that CTCLoss on a GPU, with targets and lengths
// on the GPU or left on the CPU, gives the CPU's losses and gradients and
// leaves both on the GPU.
func TestCUDACTCLoss(t *testing.T) {
	requireCUDA(t, 1)
	vram.Tidy(func() {
		x := vram.Randn(vram.Shape{5, 2, 4}, vram.Float32, vram.WithGenerator(vram.NewGenerator(4)))
		tg := vram.FromSlice([]int64{1, 3, 1, 2, 2, 0}, vram.Shape{2, 3})
		in := vram.FromSlice([]int64{5, 3}, vram.Shape{2})
		tl := vram.FromSlice([]int32{3, 1}, vram.Shape{2})
		run := func(a *vram.Tensor, onGPU bool) ([]float32, []float32) {
			a = a.Detach().SetRequiresGrad(true)
			ts, is, ls := tg, in, tl
			if onGPU {
				ts, is, ls = tg.CUDA(0), in.CUDA(0), tl.CUDA(0)
			}
			loss := vram.CTCLoss(a.LogSoftmax(2), ts, is, ls, 0, false)
			loss.Sum().Backward()
			if loss.Device() != a.Device() || a.Grad().Device() != a.Device() {
				t.Errorf("ctc_loss of an input on %s: loss on %s, gradient on %s", a.Device(), loss.Device(), a.Grad().Device())
			}
			return loss.CPU().Float32s(), a.Grad().CPU().Float32s()
		}
		wantL, wantG := run(x, false)
		for _, onGPU := range []bool{false, true} {
			gotL, gotG := run(x.CUDA(0), onGPU)
			closeSlices(t, "ctc_loss", gotL, wantL, 1e-5, 1e-5)
			closeSlices(t, "ctc_loss gradient", gotG, wantG, 1e-5, 1e-5)
		}
	})
}
