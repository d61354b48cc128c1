package vram

import (
	"math"
	"testing"
)

// savedCase is one op whose graph should keep no more than PyTorch's
// derivatives keep for the backward pass.
type savedCase struct {
	name string
	// leaves returns the inputs, float64 on the quiet device, those the
	// case differentiates already requiring grad.
	leaves func() []*Tensor
	// forward computes the op from leaves, releasing every intermediate
	// it made (as Tidy would), so that what stays allocated is the result
	// and what its graph saved. It must be deterministic (a dropout draws
	// from a generator seeded inside).
	forward func(in []*Tensor) *Tensor
	// held is PyTorch's figure: the result's bytes plus those of every
	// tensor its autograd graph saves that the caller no longer holds.
	held int64
}

// The shapes below are 512 float64 elements (4096 bytes; a bool mask of as
// many elements is 512 bytes), multiples of the allocator's 512-byte
// rounding, so that the counts are exact.
const (
	f64Block  = 512 * 8
	boolBlock = 512
)

func quietRandn(seed uint64, requires bool, shape ...int) *Tensor {
	t := Randn(shape, Float64, quiet, WithGenerator(NewGenerator(seed)))
	return t.SetRequiresGrad(requires)
}

// checkSaved measures what c's forward leaves allocated on the quiet device
// and compares its gradients with central finite differences.
func checkSaved(t *testing.T, c savedCase) {
	t.Helper()
	in := c.leaves()
	defer func() {
		for _, x := range in {
			x.Release()
		}
	}()
	before := MemoryAllocated(quiet)
	out := c.forward(in)
	held := MemoryAllocated(quiet) - before
	if held > c.held {
		t.Errorf("held %d bytes between forward and backward, PyTorch holds %d", held, c.held)
	}
	r := Randn(out.Shape(), Float64, quiet, WithGenerator(NewGenerator(99)))
	defer r.Release()
	loss := out.Mul(r).Sum()
	loss.Backward()
	loss.Release()
	out.Release()
	eval := func() float64 {
		var v float64
		NoGrad(func() {
			o := c.forward(in)
			defer o.Release()
			p := o.Mul(r)
			defer p.Release()
			s := p.Sum()
			defer s.Release()
			v = s.Item()
		})
		return v
	}
	const eps = 1e-6
	for k, x := range in {
		if !x.RequiresGrad() {
			continue
		}
		if x.Grad() == nil {
			t.Fatalf("input %d: no gradient", k)
		}
		got := x.Grad().Float64s()
		vals := x.Float64s()
		set := func(i int, v float64) {
			vals[i] = v
			NoGrad(func() {
				s := FromSlice(vals, x.Shape())
				defer s.Release()
				x.CopyFrom(s)
			})
		}
		for i := range vals {
			orig := vals[i]
			set(i, orig+eps)
			up := eval()
			set(i, orig-eps)
			down := eval()
			set(i, orig)
			want := (up - down) / (2 * eps)
			if math.IsNaN(got[i]) || math.Abs(got[i]-want) > 1e-5+1e-4*math.Abs(want) {
				t.Fatalf("input %d element %d: gradient %v, finite difference %v", k, i, got[i], want)
			}
		}
	}
}

func TestDropoutSavesBoolMask(t *testing.T) {
	gen := func() Option { return WithGenerator(NewGenerator(5)) }
	tests := []savedCase{
		{
			name:    "dropout",
			leaves:  func() []*Tensor { return []*Tensor{quietRandn(1, true, 16, 32)} },
			forward: func(in []*Tensor) *Tensor { return Dropout(in[0], 0.25, gen()) },
			// the result and a bool mask
			held: f64Block + boolBlock,
		},
		{
			name:   "dropout of an intermediate",
			leaves: func() []*Tensor { return []*Tensor{quietRandn(1, true, 16, 32)} },
			forward: func(in []*Tensor) *Tensor {
				h := in[0].AddScalar(1)
				defer h.Release()
				return Dropout(h, 0.5, gen())
			},
			held: f64Block + boolBlock,
		},
		{
			name:    "feature dropout",
			leaves:  func() []*Tensor { return []*Tensor{quietRandn(2, true, 8, 32, 2, 2)} },
			forward: func(in []*Tensor) *Tensor { return FeatureDropout(in[0], 0.3, 2, gen()) },
			// an [8, 32, 1, 1] bool mask (256 bytes, rounded to 512)
			held: 2*f64Block + boolBlock,
		},
		{
			name:   "attention dropout",
			leaves: func() []*Tensor { return []*Tensor{quietRandn(3, true, 2, 16, 16)} },
			forward: func(in []*Tensor) *Tensor {
				// q = k = v: weights [2, 16, 16] (512 elements) after softmax and dropout.
				var out *Tensor
				out, w := ScaledDotProductAttentionWeights(in[0], in[0], in[0], AttentionOptions{DropoutP: 0.2, Generator: NewGenerator(5)})
				w.Release()
				return out
			},
			// the result, q·kᵀ's operands (the input, held by the caller),
			// the softmax result, the bool mask, the dropped weights
			// (saved by the matmul with v), and the scaled q.
			held: f64Block + f64Block + boolBlock + f64Block + f64Block,
		},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) { checkSaved(t, c) })
	}
}

// TestBinarySavesOnlyWhatGradientsRead: an operand is kept for backward
// only when the gradient of an input that requires grad reads it, as
// PyTorch's derivatives save it (mul keeps self only when other requires
// grad). Each forward makes its operands from the leaves and releases
// them, as a layer does with its intermediates: x requires grad, c does
// not (a constant such as a mask or a frozen weight).
func TestBinarySavesOnlyWhatGradientsRead(t *testing.T) {
	xc := func(xs, cs []int) func() []*Tensor {
		return func() []*Tensor { return []*Tensor{quietRandn(1, true, xs...), quietRandn(2, false, cs...)} }
	}
	// two makes h and c from the leaves and runs f in a Tidy, which
	// releases every intermediate.
	two := func(f func(h, c *Tensor) *Tensor) func(in []*Tensor) *Tensor {
		return func(in []*Tensor) *Tensor {
			return TidyResult(func() *Tensor { return f(in[0].AddScalar(1), in[1].MulScalar(2)) })
		}
	}
	// then adds 1 to f's result, so that a result the graph keeps shows.
	then := func(f func(h, c *Tensor) *Tensor) func(h, c *Tensor) *Tensor {
		return func(h, c *Tensor) *Tensor { return f(h, c).AddScalar(1) }
	}
	tests := []savedCase{
		{
			name: "mul by a constant", leaves: xc([]int{16, 32}, []int{16, 32}),
			forward: two(func(h, c *Tensor) *Tensor { return h.Mul(c) }),
			held:    2 * f64Block, // the result and c
		},
		{
			name: "constant times mul", leaves: xc([]int{16, 32}, []int{16, 32}),
			forward: two(func(h, c *Tensor) *Tensor { return c.Mul(h) }),
			held:    2 * f64Block,
		},
		{
			name: "matmul by a frozen weight", leaves: xc([]int{16, 32}, []int{32, 16}),
			forward: two(func(h, c *Tensor) *Tensor { return h.MatMul(c) }),
			held:    f64Block/2 + f64Block, // the [16, 16] result and c
		},
		{
			name: "matmul of a frozen input by a weight", leaves: xc([]int{32, 16}, []int{16, 32}),
			forward: two(func(h, c *Tensor) *Tensor { return c.MatMul(h) }),
			held:    f64Block/2 + f64Block, // the result and c, read by h's gradient
		},
		{
			name: "div by a constant", leaves: xc([]int{16, 32}, []int{16, 32}),
			forward: two(then(func(h, c *Tensor) *Tensor { return h.Div(c.Abs().AddScalar(1)) })),
			held:    2 * f64Block, // the result and the divisor
		},
		{
			name: "pow by a constant exponent", leaves: xc([]int{16, 32}, []int{16, 32}),
			forward: two(then(func(h, c *Tensor) *Tensor { return h.Abs().AddScalar(1).Pow(c) })),
			// the result, the base, |h| (read by abs) and the exponent
			held: 4 * f64Block,
		},
		{
			name: "remainder by a constant", leaves: xc([]int{16, 32}, []int{16, 32}),
			forward: two(func(h, c *Tensor) *Tensor { return h.Remainder(c.Abs().AddScalar(10)) }),
			held:    f64Block, // the result alone
		},
		{
			name: "fmod by a constant", leaves: xc([]int{16, 32}, []int{16, 32}),
			forward: two(func(h, c *Tensor) *Tensor { return h.Fmod(c.Abs().AddScalar(10)) }),
			held:    f64Block,
		},
		{
			name: "lerp with a number weight", leaves: xc([]int{16, 32}, []int{16, 32}),
			forward: two(func(h, c *Tensor) *Tensor { return h.LerpScalar(c, 0.3) }),
			held:    f64Block, // the result alone
		},
		{
			name: "lerp with a constant tensor weight", leaves: xc([]int{16, 32}, []int{16, 32}),
			forward: two(func(h, c *Tensor) *Tensor { return h.Lerp(h.MulScalar(3), c) }),
			held:    2 * f64Block, // the result and the weight
		},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) { checkSaved(t, c) })
	}
}
