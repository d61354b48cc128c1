package vram

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// refAttention computes scaled dot-product attention in float64 loops:
// q, k, v and the mask are first expanded to the batch shape, the mask
// given as allowed (bool) or added (float) values per score. A row whose
// scores are all -Inf gives zero weights.
func refAttention(q, k, v *Tensor, mask *Tensor, causal bool, scale float64) ([]float64, Shape) {
	nq, nk, nv := q.Dim(), k.Dim(), v.Dim()
	batch := broadcastShapes("ref", q.shape[:nq-2], k.shape[:nk-2], v.shape[:nv-2])
	l, e, s, ev := q.shape[nq-2], q.shape[nq-1], k.shape[nk-2], v.shape[nv-1]
	ex := func(t *Tensor, rows, cols int) []float64 {
		return t.Expand(append(slices.Clone(batch), rows, cols)...).Contiguous().Float64s()
	}
	qs, ks, vs := ex(q, l, e), ex(k, s, e), ex(v, s, ev)
	var ms []float64
	if mask != nil {
		ms = mask.Cast(Float64).Expand(append(slices.Clone(batch), l, s)...).Contiguous().Float64s()
	}
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(e))
	}
	nb := 1
	for _, d := range batch {
		nb *= d
	}
	out := make([]float64, nb*l*ev)
	for b := 0; b < nb; b++ {
		for i := 0; i < l; i++ {
			sc := make([]float64, s)
			top := math.Inf(-1)
			for j := 0; j < s; j++ {
				var dot float64
				for c := 0; c < e; c++ {
					dot += qs[(b*l+i)*e+c] * ks[(b*s+j)*e+c]
				}
				sc[j] = dot * scale
				if causal && j > i {
					sc[j] = math.Inf(-1)
				}
				if ms != nil {
					m := ms[(b*l+i)*s+j]
					if mask.DType() == Bool {
						if m == 0 {
							sc[j] = math.Inf(-1)
						}
					} else {
						sc[j] += m
					}
				}
				top = math.Max(top, sc[j])
			}
			if math.IsInf(top, -1) {
				continue // zero weights, zero output
			}
			var sum float64
			for j := range sc {
				sc[j] = math.Exp(sc[j] - top)
				sum += sc[j]
			}
			for j := range sc {
				for c := 0; c < ev; c++ {
					out[(b*l+i)*ev+c] += sc[j] / sum * vs[(b*s+j)*ev+c]
				}
			}
		}
	}
	return out, append(Shape(slices.Clone(batch)), l, ev)
}

func TestScaledDotProductAttention(t *testing.T) {
	boolMask := func(vals []bool, shape ...int) *Tensor { return FromSlice(vals, shape) }
	tests := []struct {
		name    string
		q, k, v *Tensor
		opts    AttentionOptions
	}{
		{"plain", rnd(1, 3, 4), rnd(2, 5, 4), rnd(3, 5, 2), AttentionOptions{}},
		{"batched", rnd(1, 2, 3, 4), rnd(2, 2, 5, 4), rnd(3, 2, 5, 6), AttentionOptions{}},
		{"batch broadcast", rnd(1, 2, 1, 3, 4), rnd(2, 1, 3, 5, 4), rnd(3, 3, 5, 2), AttentionOptions{}},
		{"scale", rnd(1, 3, 4), rnd(2, 5, 4), rnd(3, 5, 2), AttentionOptions{Scale: 0.3}},
		{"causal square", rnd(1, 2, 4, 3), rnd(2, 2, 4, 3), rnd(3, 2, 4, 3), AttentionOptions{Causal: true}},
		{"causal L<S", rnd(1, 2, 5), rnd(2, 4, 5), rnd(3, 4, 3), AttentionOptions{Causal: true}},
		{"causal L>S", rnd(1, 4, 5), rnd(2, 2, 5), rnd(3, 2, 3), AttentionOptions{Causal: true}},
		{"bool mask broadcast", rnd(1, 2, 2, 3), rnd(2, 2, 3, 3), rnd(3, 2, 3, 2),
			AttentionOptions{Mask: boolMask([]bool{true, false, true, true, true, false}, 2, 3)}},
		{"bool mask per batch", rnd(1, 2, 1, 3), rnd(2, 2, 3, 3), rnd(3, 2, 3, 2),
			AttentionOptions{Mask: boolMask([]bool{true, false, false, false, true, true}, 2, 1, 3)}},
		{"float mask", rnd(1, 2, 3), rnd(2, 3, 3), rnd(3, 3, 2),
			AttentionOptions{Mask: FromSlice([]float64{0, -1, 2, math.Inf(-1), 0.5, 0}, Shape{2, 3})}},
		{"fully masked row", rnd(1, 2, 3), rnd(2, 3, 3), rnd(3, 3, 2),
			AttentionOptions{Mask: boolMask([]bool{false, false, false, true, false, true}, 2, 3)}},
		{"float mask all -inf row", rnd(1, 2, 3), rnd(2, 3, 3), rnd(3, 3, 2),
			AttentionOptions{Mask: FromSlice([]float64{math.Inf(-1), math.Inf(-1), math.Inf(-1), 0, 1, 0}, Shape{2, 3})}},
		{"empty keys", rnd(1, 2, 3), rnd(2, 0, 3), rnd(3, 0, 2), AttentionOptions{}},
		{"empty queries", rnd(1, 0, 3), rnd(2, 4, 3), rnd(3, 4, 2), AttentionOptions{Causal: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, shape := refAttention(tc.q, tc.k, tc.v, tc.opts.Mask, tc.opts.Causal, tc.opts.Scale)
			got, w := ScaledDotProductAttentionWeights(tc.q, tc.k, tc.v, tc.opts)
			defer got.Release()
			defer w.Release()
			if !slices.Equal(got.Shape(), shape) {
				t.Fatalf("shape %v, want %v", got.Shape(), shape)
			}
			for i, g := range got.Float64s() {
				if math.IsNaN(g) || math.Abs(g-want[i]) > 1e-12+1e-10*math.Abs(want[i]) {
					t.Fatalf("element %d: %v, want %v", i, g, want[i])
				}
			}
			if ws := w.Shape(); ws[len(ws)-1] != tc.k.Size(-2) || ws[len(ws)-2] != tc.q.Size(-2) {
				t.Errorf("weights shape %v", ws)
			}
			if Sim(0).Available() {
				to := func(x *Tensor) *Tensor {
					if x == nil {
						return nil
					}
					return x.To(Sim(0))
				}
				o := tc.opts
				o.Mask = to(o.Mask)
				s := ScaledDotProductAttention(to(tc.q), to(tc.k), to(tc.v), o)
				if !slices.Equal(s.To(CPU).Float64s(), got.Float64s()) {
					t.Errorf("sim:0 gave %v, cpu %v", s.To(CPU).Float64s(), got.Float64s())
				}
			}
		})
	}
}

func TestScaledDotProductAttentionGradients(t *testing.T) {
	three := func(o AttentionOptions) func([]*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return ScaledDotProductAttention(xs[0], xs[1], xs[2], o) }
	}
	tests := []struct {
		name    string
		f       func([]*Tensor) *Tensor
		q, k, v *Tensor
	}{
		{"plain", three(AttentionOptions{}), rnd(1, 2, 3, 4), rnd(2, 2, 5, 4), rnd(3, 2, 5, 2)},
		{"broadcast", three(AttentionOptions{}), rnd(1, 2, 3, 4), rnd(2, 5, 4), rnd(3, 5, 2)},
		{"causal", three(AttentionOptions{Causal: true, Scale: 0.7}), rnd(1, 4, 3), rnd(2, 3, 3), rnd(3, 3, 2)},
		{"float mask", three(AttentionOptions{Mask: FromSlice([]float64{0, -1, 2, 0.5, 0, math.Inf(-1)}, Shape{2, 3})}),
			rnd(1, 2, 3), rnd(2, 3, 3), rnd(3, 3, 2)},
		{"fully masked row", three(AttentionOptions{Mask: FromSlice([]bool{false, false, false, true, false, true}, Shape{2, 3})}),
			rnd(1, 2, 3), rnd(2, 3, 3), rnd(3, 3, 2)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { gradCheck(t, tc.f, tc.q, tc.k, tc.v) })
	}
}

func TestScaledDotProductAttentionErrors(t *testing.T) {
	q, k, v := rnd(1, 2, 3, 4), rnd(2, 2, 5, 4), rnd(3, 2, 5, 2)
	tests := []struct {
		name    string
		q, k, v *Tensor
		opts    AttentionOptions
		kind    error
	}{
		{"1-D query", rnd(1, 4), k, v, AttentionOptions{}, ErrShape},
		{"key width", q, rnd(2, 2, 5, 3), v, AttentionOptions{}, ErrShape},
		{"value length", q, k, rnd(3, 2, 4, 2), AttentionOptions{}, ErrShape},
		{"batch", q, rnd(2, 3, 5, 4), rnd(3, 3, 5, 2), AttentionOptions{}, ErrShape},
		{"dtype mix", q, k.Cast(Float32), v, AttentionOptions{}, ErrDType},
		{"integer", q.Cast(Int64), k.Cast(Int64), v.Cast(Int64), AttentionOptions{}, ErrDType},
		{"mask shape", q, k, v, AttentionOptions{Mask: Ones(Shape{4, 5}, Bool)}, ErrShape},
		{"mask grows batch", q, k, v, AttentionOptions{Mask: Ones(Shape{4, 2, 3, 5}, Bool)}, ErrShape},
		{"mask dtype", q, k, v, AttentionOptions{Mask: Ones(Shape{3, 5}, Int64)}, ErrDType},
		{"mask and causal", q, k, v, AttentionOptions{Mask: Ones(Shape{3, 5}, Bool), Causal: true}, ErrArgument},
		{"dropout", q, k, v, AttentionOptions{DropoutP: 1.5}, ErrArgument},
		{"dropout NaN", q, k, v, AttentionOptions{DropoutP: math.NaN()}, ErrArgument},
		{"scale", q, k, v, AttentionOptions{Scale: math.Inf(1)}, ErrArgument},
		{"nil", q, nil, v, AttentionOptions{}, ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Catch(func() { ScaledDotProductAttention(tc.q, tc.k, tc.v, tc.opts) })
			var ve *Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &ve) || ve.Op != "scaled_dot_product_attention" {
				t.Fatalf("got %v, want a scaled_dot_product_attention error of kind %v", err, tc.kind)
			}
		})
	}
}

func TestScaledDotProductAttentionDropout(t *testing.T) {
	q, k, v := rnd(1, 4, 8, 3), rnd(2, 4, 6, 3), rnd(3, 4, 6, 2)
	run := func(p float64, seed uint64) (*Tensor, *Tensor) {
		return ScaledDotProductAttentionWeights(q, k, v, AttentionOptions{DropoutP: p, Generator: NewGenerator(seed)})
	}
	_, plain := run(0, 1)
	_, a := run(0.5, 9)
	outB, b := run(0.5, 9)
	if !slices.Equal(a.Float64s(), b.Float64s()) {
		t.Error("the same seed gave different dropout masks")
	}
	zeros := 0
	pw, bw := plain.Float64s(), b.Float64s()
	for i, x := range bw {
		switch {
		case x == 0:
			zeros++
		case math.Abs(x-2*pw[i]) > 1e-12:
			t.Fatalf("kept weight %d is %v, want 2·%v", i, x, pw[i])
		}
	}
	if n := len(bw); zeros < n/4 || zeros > 3*n/4 {
		t.Errorf("%d of %d weights dropped with p = 0.5", zeros, n)
	}
	// The output is the dropped weights times v.
	want := b.MatMul(v).Float64s()
	for i, x := range outB.Float64s() {
		if math.Abs(x-want[i]) > 1e-12 {
			t.Fatalf("output %d is %v, want %v", i, x, want[i])
		}
	}
	allOut, all := run(1, 3)
	for _, x := range append(all.Float64s(), allOut.Float64s()...) {
		if x != 0 {
			t.Fatalf("p = 1 left %v", x)
		}
	}
}

// TestScaledDotProductAttentionShapeOnly plans attention with its
// backward pass on a device that keeps no data, as a user asking whether
// a transformer fits would.
func TestScaledDotProductAttentionShapeOnly(t *testing.T) {
	d := planningDevice(t)
	tests := []struct {
		name string
		opts func() AttentionOptions
	}{
		{"causal with dropout", func() AttentionOptions { return AttentionOptions{Causal: true, DropoutP: 0.1} }},
		{"bool mask", func() AttentionOptions { return AttentionOptions{Mask: Ones(Shape{128, 256}, Bool, d)} }},
		{"float mask", func() AttentionOptions { return AttentionOptions{Mask: Zeros(Shape{2, 1, 1, 256}, d)} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				q := Randn(Shape{2, 4, 128, 64}, d, WithGrad())
				k := Randn(Shape{2, 4, 256, 64}, d, WithGrad())
				v := Randn(Shape{2, 4, 256, 32}, d)
				o := ScaledDotProductAttention(q, k, v, tc.opts())
				o.Sum().Backward()
				if !slices.Equal(o.Shape(), Shape{2, 4, 128, 32}) || !slices.Equal(k.Grad().Shape(), k.Shape()) {
					t.Fatalf("output %v, key gradient %v", o.Shape(), k.Grad().Shape())
				}
			})
		})
	}
}

func TestScaledDotProductAttentionGQA(t *testing.T) {
	// Four query heads over two key/value heads: heads 0 and 1 use kv
	// head 0, heads 2 and 3 kv head 1.
	q, k, v := rnd(1, 2, 4, 3, 5), rnd(2, 2, 2, 6, 5), rnd(3, 2, 2, 6, 2)
	idx := FromSlice([]int64{0, 0, 1, 1}, Shape{4})
	for _, o := range []AttentionOptions{{EnableGQA: true}, {EnableGQA: true, Causal: true}} {
		got := ScaledDotProductAttention(q, k, v, o)
		o.EnableGQA = false
		want := ScaledDotProductAttention(q, k.IndexSelect(1, idx), v.IndexSelect(1, idx), o)
		if !slices.Equal(got.Shape(), want.Shape()) || !slices.Equal(got.Float64s(), want.Float64s()) {
			t.Fatalf("causal=%v: got %v, want %v", o.Causal, got, want)
		}
	}
	gradCheck(t, func(xs []*Tensor) *Tensor {
		return ScaledDotProductAttention(xs[0], xs[1], xs[2], AttentionOptions{EnableGQA: true})
	}, rnd(1, 4, 2, 3), rnd(2, 2, 3, 3), rnd(3, 2, 3, 2))
	for _, tc := range []struct {
		name    string
		q, k, v *Tensor
	}{
		{"not dividing", rnd(1, 3, 2, 3), rnd(2, 2, 3, 3), rnd(3, 2, 3, 2)},
		{"key and value heads differ", rnd(1, 4, 2, 3), rnd(2, 2, 3, 3), rnd(3, 1, 3, 2)},
		{"without EnableGQA", rnd(1, 4, 2, 3), rnd(2, 2, 3, 3), rnd(3, 2, 3, 2)},
	} {
		o := AttentionOptions{EnableGQA: tc.name != "without EnableGQA"}
		if err := Catch(func() { ScaledDotProductAttention(tc.q, tc.k, tc.v, o) }); !errors.Is(err, ErrShape) {
			t.Errorf("%s: got %v, want ErrShape", tc.name, err)
		}
	}
}
