package vram

import (
	"slices"
	"testing"
)

// TestGraphOutlivesTidy: a graph built inside a Tidy, whose output is
// kept, backpropagates after the Tidy returned, as a pipeline stage does
// (forward of a micro-batch in one Tidy, its backward in a later one). What
// every op saves for backward must belong to the graph, not to the Tidy.
func TestGraphOutlivesTidy(t *testing.T) {
	ops := []struct {
		name string
		f    func(x, w, b *Tensor) *Tensor
	}{
		{"linear", func(x, w, b *Tensor) *Tensor { return Linear(x, w, b) }},
		{"linear relu", func(x, w, b *Tensor) *Tensor { return LinearAct(x, w, b, ActReLU) }},
		{"linear gelu", func(x, w, b *Tensor) *Tensor { return LinearAct(x, w, b, ActGELU) }},
		{"linear gelu no bias", func(x, w, _ *Tensor) *Tensor { return LinearAct(x, w, nil, ActGELU) }},
		{"bias gelu", func(x, _, b *Tensor) *Tensor { return BiasAct(x, b, ActGELU) }},
		{"bias relu", func(x, _, b *Tensor) *Tensor { return BiasAct(x, b, ActReLU) }},
		{"layer norm", func(x, _, b *Tensor) *Tensor { return LayerNorm(x, []int{3}, b, b, 1e-5) }},
		{"rms norm", func(x, _, b *Tensor) *Tensor { return RMSNorm(x, []int{3}, b, 1e-5) }},
		{"normalize", func(x, _, _ *Tensor) *Tensor { return Normalize(x, 2, 1, 1e-12) }},
		{"mse", func(x, _, _ *Tensor) *Tensor { return MSELoss(x, x.Detach().MulScalar(0.5)) }},
		{"softmax", func(x, _, _ *Tensor) *Tensor { return x.Softmax(1) }},
		{"log softmax", func(x, _, _ *Tensor) *Tensor { return x.LogSoftmax(1) }},
		{"matmul", func(x, w, _ *Tensor) *Tensor { return x.MatMul(w.T()) }},
		{"mul div", func(x, _, b *Tensor) *Tensor { return x.Mul(b).Div(b.AddScalar(2)) }},
		{"unary", func(x, _, _ *Tensor) *Tensor { return x.Tanh().Sigmoid().Gelu().Exp().Sqrt().Log() }},
		{"mean var", func(x, _, _ *Tensor) *Tensor { return x.Mean(1).Add(x.Var([]int{1}, 1, false)) }},
		{"views", func(x, _, _ *Tensor) *Tensor { return x.T().Reshape(-1).Narrow(0, 1, 3).Square() }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			g := NewGenerator(3)
			mk := func(shape Shape) *Tensor { return Randn(shape, WithGenerator(g), WithGrad()) }
			x, w, b := mk(Shape{2, 3}), mk(Shape{3, 3}), mk(Shape{3})
			defer func() {
				for _, p := range []*Tensor{x, w, b} {
					p.Release()
				}
			}()
			grads := func() [][]float64 {
				var out [][]float64
				for _, p := range []*Tensor{x, w, b} {
					if gr := p.Grad(); gr != nil {
						out = append(out, gr.Float64s())
					} else {
						out = append(out, nil)
					}
					p.ZeroGrad()
				}
				return out
			}
			Tidy(func() { op.f(x, w, b).Sum().Backward() })
			want := grads()
			var kept *Tensor
			Tidy(func() { kept = Keep(op.f(x, w, b).Sum()) })
			defer kept.Release()
			if err := Catch(func() { kept.Backward() }); err != nil {
				t.Fatalf("backward after the Tidy that built the graph: %v", err)
			}
			if got := grads(); !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("gradients %v, want %v", got, want)
			}
		})
	}
}
