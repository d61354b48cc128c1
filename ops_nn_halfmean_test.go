package vram

import (
	"math"
	"testing"
)

// CrossEntropy and NLLLoss of 16-bit inputs accumulate and divide the
// mean in float32 and round it once: when most targets are ignored (the
// padding of a batch of sequences), the mean over every row that was
// rounded to float16 first fell among its subnormals, and the loss scaled
// back from it lost 1% of its value.
func TestClassLossHalfMeanRoundsOnce(t *testing.T) {
	Tidy(func() {
		const n = 4000
		cases := []struct {
			name string
			kept int // rows at the start with target 0, the others ignored
		}{
			{"two of 4000 kept", 2},
			{"half kept", n / 2},
			{"all kept", n},
		}
		for _, dt := range []DType{Float16, BFloat16} {
			for _, c := range cases {
				logits := make([]float64, 2*n)
				targets := make([]int64, n)
				for i := range n {
					logits[2*i] = 6
					targets[i] = CrossEntropyIgnoreIndex
					if i < c.kept {
						targets[i] = 0
					}
				}
				x := FromSlice(logits, Shape{n, 2}).Cast(dt)
				y := FromSlice(targets, Shape{n})
				v := x.Float64s()
				// Every kept row has the loss log(1 + e^(x1 − x0)).
				want := math.Log1p(math.Exp(v[1] - v[0]))
				for _, op := range []struct {
					name string
					f    func() *Tensor
				}{
					{"CrossEntropy", func() *Tensor { return CrossEntropy(x, y) }},
					{"NLLLoss", func() *Tensor { return NLLLoss(x.LogSoftmax(1), y) }},
				} {
					t.Run(dt.String()+"/"+c.name+"/"+op.name, func(t *testing.T) {
						l := op.f()
						if l.DType() != dt {
							t.Fatalf("dtype %v, want %v", l.DType(), dt)
						}
						// One rounding of want to dt, plus the log-softmax's own
						// rounding for NLLLoss: within 2 units in the last place.
						ulp := math.Ldexp(1, math.Ilogb(want)-10)
						if dt == BFloat16 {
							ulp = math.Ldexp(1, math.Ilogb(want)-7)
						}
						if got := l.Item(); math.Abs(got-want) > 2*ulp {
							t.Fatalf("loss %v, want %v within %v", got, want, 2*ulp)
						}
					})
				}
			}
		}
	})
}
