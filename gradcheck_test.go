package vram

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// gradCheck compares the gradients Backward computes for f at the given
// float64 inputs with central finite differences of sum(f(x) * r) for a
// fixed random r.
func gradCheck(t *testing.T, f func(xs []*Tensor) *Tensor, inputs ...*Tensor) {
	t.Helper()
	g := NewGenerator(7)
	for _, in := range inputs {
		in.SetRequiresGrad(true)
	}
	out := f(inputs)
	r := Randn(out.Shape(), Float64, WithGenerator(g))
	loss := out.Mul(r).Sum()
	loss.Backward()
	const eps = 1e-6
	eval := func() float64 {
		var v float64
		NoGrad(func() {
			o := f(inputs)
			v = o.Mul(r).Sum().Item()
		})
		return v
	}
	for k, in := range inputs {
		if in.Grad() == nil {
			t.Fatalf("input %d: no gradient", k)
		}
		got := in.Grad().Float64s()
		vals := in.Float64s()
		for i := range vals {
			orig := vals[i]
			set := func(v float64) {
				vals[i] = v
				NoGrad(func() { in.CopyFrom(FromSlice(vals, in.Shape())) })
			}
			set(orig + eps)
			up := eval()
			set(orig - eps)
			down := eval()
			set(orig)
			want := (up - down) / (2 * eps)
			if math.IsNaN(got[i]) || math.Abs(got[i]-want) > 1e-5+1e-4*math.Abs(want) {
				t.Errorf("input %d element %d: gradient %v, finite difference %v", k, i, got[i], want)
			}
		}
	}
}

func rnd(seed uint64, shape ...int) *Tensor {
	return Randn(shape, Float64, WithGenerator(NewGenerator(seed)))
}

func pos(seed uint64, shape ...int) *Tensor {
	return Rand(shape, Float64, WithGenerator(NewGenerator(seed))).AddScalar(0.5)
}

func TestGradients(t *testing.T) {
	one := func(f func(x *Tensor) *Tensor) func([]*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return f(xs[0]) }
	}
	two := func(f func(a, b *Tensor) *Tensor) func([]*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return f(xs[0], xs[1]) }
	}
	tests := []struct {
		name   string
		f      func([]*Tensor) *Tensor
		inputs func() []*Tensor
	}{
		{"add broadcast", two((*Tensor).Add), func() []*Tensor { return []*Tensor{rnd(1, 3, 4), rnd(2, 4)} }},
		{"sub broadcast", two((*Tensor).Sub), func() []*Tensor { return []*Tensor{rnd(1, 3, 1), rnd(2, 1, 4)} }},
		{"mul", two((*Tensor).Mul), func() []*Tensor { return []*Tensor{rnd(1, 2, 3), rnd(2, 2, 3)} }},
		{"div", two((*Tensor).Div), func() []*Tensor { return []*Tensor{rnd(1, 2, 3), pos(2, 3)} }},
		{"pow", two((*Tensor).Pow), func() []*Tensor { return []*Tensor{pos(1, 2, 3), rnd(2, 2, 3)} }},
		{"maximum", two((*Tensor).Maximum), func() []*Tensor { return []*Tensor{rnd(1, 5), rnd(2, 5)} }},
		{"minimum", two((*Tensor).Minimum), func() []*Tensor { return []*Tensor{rnd(1, 5), rnd(2, 5)} }},
		{"add scalar", one(func(x *Tensor) *Tensor { return x.AddScalar(2) }), func() []*Tensor { return []*Tensor{rnd(1, 4)} }},
		{"rsub scalar", one(func(x *Tensor) *Tensor { return x.RSubScalar(2) }), func() []*Tensor { return []*Tensor{rnd(1, 4)} }},
		{"mul scalar", one(func(x *Tensor) *Tensor { return x.MulScalar(-3) }), func() []*Tensor { return []*Tensor{rnd(1, 4)} }},
		{"div scalar", one(func(x *Tensor) *Tensor { return x.DivScalar(4) }), func() []*Tensor { return []*Tensor{rnd(1, 4)} }},
		{"rdiv scalar", one(func(x *Tensor) *Tensor { return x.RDivScalar(2) }), func() []*Tensor { return []*Tensor{pos(1, 4)} }},
		{"pow scalar", one(func(x *Tensor) *Tensor { return x.PowScalar(3) }), func() []*Tensor { return []*Tensor{rnd(1, 4)} }},
		{"clamp", one(func(x *Tensor) *Tensor { return x.Clamp(-0.5, 0.5) }), func() []*Tensor { return []*Tensor{rnd(1, 6)} }},
		{"neg", one((*Tensor).Neg), func() []*Tensor { return []*Tensor{rnd(1, 4)} }},
		{"abs", one((*Tensor).Abs), func() []*Tensor { return []*Tensor{rnd(1, 4)} }},
		{"exp", one((*Tensor).Exp), func() []*Tensor { return []*Tensor{rnd(1, 4)} }},
		{"log", one((*Tensor).Log), func() []*Tensor { return []*Tensor{pos(1, 4)} }},
		{"log1p", one((*Tensor).Log1p), func() []*Tensor { return []*Tensor{pos(1, 4)} }},
		{"expm1", one((*Tensor).Expm1), func() []*Tensor { return []*Tensor{rnd(1, 4)} }},
		{"sqrt", one((*Tensor).Sqrt), func() []*Tensor { return []*Tensor{pos(1, 4)} }},
		{"rsqrt", one((*Tensor).Rsqrt), func() []*Tensor { return []*Tensor{pos(1, 4)} }},
		{"square", one((*Tensor).Square), func() []*Tensor { return []*Tensor{rnd(1, 4)} }},
		{"reciprocal", one((*Tensor).Reciprocal), func() []*Tensor { return []*Tensor{pos(1, 4)} }},
		{"sin", one((*Tensor).Sin), func() []*Tensor { return []*Tensor{rnd(1, 4)} }},
		{"cos", one((*Tensor).Cos), func() []*Tensor { return []*Tensor{rnd(1, 4)} }},
		{"tanh", one((*Tensor).Tanh), func() []*Tensor { return []*Tensor{rnd(1, 4)} }},
		{"sigmoid", one((*Tensor).Sigmoid), func() []*Tensor { return []*Tensor{rnd(1, 4)} }},
		{"relu", one((*Tensor).Relu), func() []*Tensor { return []*Tensor{rnd(1, 6)} }},
		{"leaky relu", one(func(x *Tensor) *Tensor { return x.LeakyRelu(0.1) }), func() []*Tensor { return []*Tensor{rnd(1, 6)} }},
		{"gelu", one((*Tensor).Gelu), func() []*Tensor { return []*Tensor{rnd(1, 6)} }},
		{"gelu tanh", one((*Tensor).GeluTanh), func() []*Tensor { return []*Tensor{rnd(1, 6)} }},
		{"silu", one((*Tensor).Silu), func() []*Tensor { return []*Tensor{rnd(1, 6)} }},
		{"erf", one((*Tensor).Erf), func() []*Tensor { return []*Tensor{rnd(1, 6)} }},
		{"sum all", one(func(x *Tensor) *Tensor { return x.Sum() }), func() []*Tensor { return []*Tensor{rnd(1, 2, 3)} }},
		{"sum dim", one(func(x *Tensor) *Tensor { return x.Sum(1) }), func() []*Tensor { return []*Tensor{rnd(1, 2, 3, 2)} }},
		{"sum keepdim", one(func(x *Tensor) *Tensor { return x.SumKeepDim(0, 2) }), func() []*Tensor { return []*Tensor{rnd(1, 2, 3, 2)} }},
		{"mean", one(func(x *Tensor) *Tensor { return x.Mean(-1) }), func() []*Tensor { return []*Tensor{rnd(1, 3, 4)} }},
		{"max", one(func(x *Tensor) *Tensor { return x.Max(1) }), func() []*Tensor { return []*Tensor{rnd(1, 3, 4)} }},
		{"min keepdim", one(func(x *Tensor) *Tensor { return x.MinKeepDim(0) }), func() []*Tensor { return []*Tensor{rnd(1, 3, 4)} }},
		{"var", one(func(x *Tensor) *Tensor { return x.Var([]int{1}, 1, false) }), func() []*Tensor { return []*Tensor{rnd(1, 3, 4)} }},
		{"std", one(func(x *Tensor) *Tensor { return x.Std(nil, 0, false) }), func() []*Tensor { return []*Tensor{rnd(1, 3, 4)} }},
		{"matmul", two((*Tensor).MatMul), func() []*Tensor { return []*Tensor{rnd(1, 3, 4), rnd(2, 4, 2)} }},
		{"matmul batched broadcast", two((*Tensor).MatMul), func() []*Tensor { return []*Tensor{rnd(1, 2, 3, 4), rnd(2, 4, 2)} }},
		{"matmul vector", two((*Tensor).MatMul), func() []*Tensor { return []*Tensor{rnd(1, 4), rnd(2, 4, 3)} }},
		{"bmm", two((*Tensor).BMM), func() []*Tensor { return []*Tensor{rnd(1, 2, 3, 4), rnd(2, 2, 4, 3)} }},
		{"matmul transposed", two(func(a, b *Tensor) *Tensor { return a.MatMul(b.T()) }), func() []*Tensor { return []*Tensor{rnd(1, 3, 4), rnd(2, 2, 4)} }},
		{"softmax", one(func(x *Tensor) *Tensor { return x.Softmax(1) }), func() []*Tensor { return []*Tensor{rnd(1, 3, 4)} }},
		{"log softmax", one(func(x *Tensor) *Tensor { return x.LogSoftmax(0) }), func() []*Tensor { return []*Tensor{rnd(1, 3, 4)} }},
		{"cross entropy", one(func(x *Tensor) *Tensor {
			return CrossEntropy(x, FromSlice([]int64{0, 2, 1}, nil))
		}), func() []*Tensor { return []*Tensor{rnd(1, 3, 4)} }},
		{"mse", two(MSELoss), func() []*Tensor { return []*Tensor{rnd(1, 3, 4), rnd(2, 3, 4)} }},
		{"layer norm", func(xs []*Tensor) *Tensor { return LayerNorm(xs[0], []int{4}, xs[1], xs[2], 1e-5) },
			func() []*Tensor { return []*Tensor{rnd(1, 3, 4), rnd(2, 4), rnd(3, 4)} }},
		{"layer norm over two dimensions", func(xs []*Tensor) *Tensor { return LayerNorm(xs[0], []int{3, 4}, xs[1], nil, 1e-5) },
			func() []*Tensor { return []*Tensor{rnd(1, 2, 3, 4), rnd(2, 3, 4)} }},
		{"layer norm without affine", one(func(x *Tensor) *Tensor { return LayerNorm(x, []int{5}, nil, nil, 1e-3) }),
			func() []*Tensor { return []*Tensor{rnd(4, 3, 5)} }},
		{"rms norm", func(xs []*Tensor) *Tensor { return RMSNorm(xs[0], []int{4}, xs[1], 1e-5) },
			func() []*Tensor { return []*Tensor{rnd(1, 3, 4), rnd(2, 4)} }},
		{"rms norm over two dimensions", func(xs []*Tensor) *Tensor { return RMSNorm(xs[0], []int{3, 4}, xs[1], 1e-5) },
			func() []*Tensor { return []*Tensor{rnd(1, 2, 3, 4), rnd(2, 3, 4)} }},
		{"rms norm without weight, default eps", one(func(x *Tensor) *Tensor { return RMSNorm(x, []int{5}, nil, -1) }),
			func() []*Tensor { return []*Tensor{rnd(4, 3, 5)} }},
		{"normalize", one(func(x *Tensor) *Tensor { return Normalize(x, 2, 1, 1e-12) }),
			func() []*Tensor { return []*Tensor{rnd(5, 3, 4)} }},
		{"normalize negative dim", one(func(x *Tensor) *Tensor { return Normalize(x, 2, -3, 1e-12) }),
			func() []*Tensor { return []*Tensor{rnd(6, 3, 2, 2)} }},
		{"normalize p=1", one(func(x *Tensor) *Tensor { return Normalize(x, 1, 0, 1e-12) }),
			func() []*Tensor { return []*Tensor{rnd(7, 3, 4)} }},
		{"normalize p=3", one(func(x *Tensor) *Tensor { return Normalize(x, 3, -1, 1e-12) }),
			func() []*Tensor { return []*Tensor{rnd(8, 3, 4)} }},
		{"normalize p=inf", one(func(x *Tensor) *Tensor { return Normalize(x, math.Inf(1), 1, 1e-12) }),
			func() []*Tensor { return []*Tensor{rnd(9, 3, 4)} }},
		{"normalize below eps", one(func(x *Tensor) *Tensor { return Normalize(x, 2, 1, 10) }),
			func() []*Tensor { return []*Tensor{rnd(10, 3, 4)} }},
		{"mse broadcast", two(MSELoss), func() []*Tensor { return []*Tensor{rnd(1, 3, 4), rnd(2, 4)} }},
		{"mean of all", one(func(x *Tensor) *Tensor { return x.Mean() }), func() []*Tensor { return []*Tensor{rnd(5, 2, 3)} }},
		{"mean keepdim", one(func(x *Tensor) *Tensor { return x.MeanKeepDim(0, 2) }), func() []*Tensor { return []*Tensor{rnd(6, 2, 3, 2)} }},
		{"embedding", one(func(w *Tensor) *Tensor {
			return Embedding(FromSlice([]int64{1, 0, 1, 3}, Shape{2, 2}), w)
		}), func() []*Tensor { return []*Tensor{rnd(1, 4, 3)} }},
		{"gather", one(func(x *Tensor) *Tensor {
			return x.Gather(1, FromSlice([]int64{0, 0, 2, 1, 3, 3}, Shape{3, 2}))
		}), func() []*Tensor { return []*Tensor{rnd(1, 3, 4)} }},
		{"where", two(func(a, b *Tensor) *Tensor { return Where(a.GtScalar(0), a, b) }), func() []*Tensor { return []*Tensor{rnd(1, 3, 4), rnd(2, 4)} }},
		{"cat", two(func(a, b *Tensor) *Tensor { return Cat([]*Tensor{a, b}, 1) }), func() []*Tensor { return []*Tensor{rnd(1, 2, 3), rnd(2, 2, 1)} }},
		{"stack", two(func(a, b *Tensor) *Tensor { return Stack([]*Tensor{a, b}, 0) }), func() []*Tensor { return []*Tensor{rnd(1, 2, 3), rnd(2, 2, 3)} }},
		{"reshape", one(func(x *Tensor) *Tensor { return x.Reshape(3, -1).Exp() }), func() []*Tensor { return []*Tensor{rnd(1, 2, 3)} }},
		{"reshape of transpose", one(func(x *Tensor) *Tensor { return x.T().Reshape(-1).Exp() }), func() []*Tensor { return []*Tensor{rnd(1, 2, 3)} }},
		{"permute", one(func(x *Tensor) *Tensor { return x.Permute(2, 0, 1).Exp() }), func() []*Tensor { return []*Tensor{rnd(1, 2, 3, 2)} }},
		{"narrow", one(func(x *Tensor) *Tensor { return x.Narrow(1, 1, 2).Exp() }), func() []*Tensor { return []*Tensor{rnd(1, 2, 4)} }},
		{"slice step", one(func(x *Tensor) *Tensor { return x.Slice(1, 0, 5, 2).Exp() }), func() []*Tensor { return []*Tensor{rnd(1, 2, 5)} }},
		{"select", one(func(x *Tensor) *Tensor { return x.Select(0, 1).Exp() }), func() []*Tensor { return []*Tensor{rnd(1, 2, 3)} }},
		{"expand", one(func(x *Tensor) *Tensor { return x.Expand(2, 3, 4).Exp() }), func() []*Tensor { return []*Tensor{rnd(1, 3, 1)} }},
		{"squeeze unsqueeze", one(func(x *Tensor) *Tensor { return x.Squeeze().Unsqueeze(0).Exp() }), func() []*Tensor { return []*Tensor{rnd(1, 3, 1)} }},
		{"flatten", one(func(x *Tensor) *Tensor { return x.Flatten(0, 1).Exp() }), func() []*Tensor { return []*Tensor{rnd(1, 2, 3, 2)} }},
		{"clone contiguous", one(func(x *Tensor) *Tensor { return x.T().Contiguous().Clone().Exp() }), func() []*Tensor { return []*Tensor{rnd(1, 2, 3)} }},
		{"to cpu", one(func(x *Tensor) *Tensor { return x.To(CPU).Exp() }), func() []*Tensor { return []*Tensor{rnd(1, 3)} }},
		{"reused input", one(func(x *Tensor) *Tensor { return x.Mul(x).Add(x.Exp()) }), func() []*Tensor { return []*Tensor{rnd(1, 3)} }},
		{"bias act none", two(func(x, b *Tensor) *Tensor { return BiasAct(x, b, ActNone) }), func() []*Tensor { return []*Tensor{rnd(1, 3, 4), rnd(2, 4)} }},
		{"bias act relu", two(func(x, b *Tensor) *Tensor { return BiasAct(x, b, ActReLU) }), func() []*Tensor { return []*Tensor{rnd(1, 3, 4), rnd(2, 4)} }},
		{"bias act gelu", two(func(x, b *Tensor) *Tensor { return BiasAct(x, b, ActGELU) }), func() []*Tensor { return []*Tensor{rnd(1, 2, 3, 4), rnd(2, 3, 1)} }},
	}
	for _, act := range []Activation{ActNone, ActReLU, ActGELU} {
		lin := func(xs []*Tensor) *Tensor { return LinearAct(xs[0], xs[1], xs[2], act) }
		tests = append(tests, []struct {
			name   string
			f      func([]*Tensor) *Tensor
			inputs func() []*Tensor
		}{
			{"linear " + act.String(), lin, func() []*Tensor { return []*Tensor{rnd(1, 3, 4), rnd(2, 2, 4), rnd(3, 2)} }},
			{"linear 3-d input " + act.String(), lin, func() []*Tensor { return []*Tensor{rnd(1, 2, 3, 4), rnd(2, 5, 4), rnd(3, 5)} }},
			{"linear no bias " + act.String(), two(func(x, w *Tensor) *Tensor { return LinearAct(x, w, nil, act) }),
				func() []*Tensor { return []*Tensor{rnd(1, 3, 4), rnd(2, 2, 4)} }},
			{"linear transposed input " + act.String(), func(xs []*Tensor) *Tensor { return LinearAct(xs[0].T(), xs[1].T(), xs[2], act) },
				func() []*Tensor { return []*Tensor{rnd(1, 4, 3), rnd(2, 4, 2), rnd(3, 2)} }},
		}...)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gradCheck(t, tc.f, tc.inputs()...)
		})
		if strings.HasPrefix(tc.name, "linear") {
			// The same without the backend's fused products.
			t.Run(tc.name+" unfused", func(t *testing.T) {
				noFusedMatMul.Store(true)
				defer noFusedMatMul.Store(false)
				gradCheck(t, tc.f, tc.inputs()...)
			})
		}
	}
}

func TestCastGradient(t *testing.T) {
	x := FromSlice([]float64{1.5, -2, 3}, nil, WithGrad())
	y := x.Cast(Float32).MulScalar(2).Cast(Float16).Cast(Float64).Sum()
	y.Backward()
	if got := x.Grad(); got.DType() != Float64 || fmt.Sprint(got.Float64s()) != "[2 2 2]" {
		t.Fatalf("gradient through casts: %v", got)
	}
}

func TestGradientAcrossSimDevices(t *testing.T) {
	if !Sim(1).Available() {
		t.Skip("no sim:1 device")
	}
	// Model parallelism: a two-stage computation split across devices.
	gradCheck(t, func(xs []*Tensor) *Tensor {
		h := xs[0].To(Sim(0)).Tanh()
		h = h.To(Sim(1)).MatMul(xs[1].To(Sim(1)))
		return h.To(CPU)
	}, rnd(1, 2, 3), rnd(2, 3, 2))
}
