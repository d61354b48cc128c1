package cpu

import (
	"math"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/internal/half"
)

var (
	_ backend.FusedAdam = (*Device)(nil)
	_ backend.FusedSGD  = (*Device)(nil)
)

// The fused optimizer steps compute what the CUDA kernels compute
// (backend/cuda/kernels/optim.cu), operation for operation: in float32 for
// float32, float16 and bfloat16 (float64 for float64), every operation
// rounded on its own (the explicit conversions below keep the compiler
// from fusing a multiply and an add), the state rounded to its dtype when
// stored and read back from there. So a step of a 16-bit parameter on the
// CPU, or on a sim device, gives what it gives on a GPU.

// AdamStep does one Adam or AdamW step of a parameter in one pass over its
// elements: p, m and v are updated in place from g. It implements
// [backend.FusedAdam]. Views that are not contiguous, or of different or
// non-float dtypes, return an error wrapping [backend.ErrNotImplemented].
func (dev *Device) AdamStep(st backend.Stream, p, g, m, v backend.View, cfg backend.AdamStepConfig) (err error) {
	const what = "adam step"
	if err := begin(st, what, backend.CheckAdamStep(p, g, m, v, cfg)); err != nil {
		return err
	}
	defer recoverTo(&err, what)
	ops, err := resolveAll(what, p, g, m, v)
	if err != nil {
		return err
	}
	if ops[0].dt == backend.Float64 {
		return adamStep[float64](ops, cfg)
	}
	return adamStep[float32](ops, cfg)
}

// SGDStep does one SGD step of a parameter in one pass: p, and buf when
// cfg.Momentum is not 0, are updated in place from g. It implements
// [backend.FusedSGD]; its refusals are AdamStep's.
func (dev *Device) SGDStep(st backend.Stream, p, g, buf backend.View, cfg backend.SGDStepConfig) (err error) {
	const what = "sgd step"
	if err := begin(st, what, backend.CheckSGDStep(p, g, buf, cfg)); err != nil {
		return err
	}
	defer recoverTo(&err, what)
	views := []backend.View{p, g}
	if cfg.Momentum != 0 {
		views = append(views, buf)
	}
	ops, err := resolveAll(what, views...)
	if err != nil {
		return err
	}
	if ops[0].dt == backend.Float64 {
		return sgdStep[float64](ops, cfg)
	}
	return sgdStep[float32](ops, cfg)
}

// roundTrip rounds xs to dtype dt in place: what storing them and loading
// them back gives.
func roundTrip[F floating](dt backend.DType, xs []F) {
	switch dt {
	case backend.Float16:
		for i, x := range xs {
			xs[i] = F(half.F16To32(half.F16(float32(x))))
		}
	case backend.BFloat16:
		for i, x := range xs {
			xs[i] = F(half.BF16To32(half.BF16(float32(x))))
		}
	}
}

// stepBlocks calls fn on consecutive blocks of the n elements, in
// parallel, with one scratch slice per operand holding the block's values
// in compute type F. fn computes in place; then the blocks of the operands
// listed in out are stored.
func stepBlocks[F floating](ops []*operand, out []int, cost int, fn func(xs [][]F)) error {
	n := ops[0].size()
	return parallel(n, n*cost, func(lo, hi int) error {
		bufs := make([][]F, len(ops))
		for k := range bufs {
			bufs[k] = make([]F, min(block, hi-lo))
		}
		xs := make([][]F, len(ops))
		for i := lo; i < hi; i += block {
			m := min(block, hi-i)
			for k, o := range ops {
				xs[k] = bufs[k][:m]
				load(o, o.off+i, 1, xs[k])
			}
			fn(xs)
			for _, k := range out {
				store(ops[k], ops[k].off+i, 1, xs[k])
			}
		}
		return nil
	})
}

// adamStep is AdamStep in compute type F, over p, g, m, v.
func adamStep[F floating](ops []*operand, c backend.AdamStepConfig) error {
	dt := ops[0].dt
	bc1 := 1 - math.Pow(c.Beta1, float64(c.Step))
	bc2 := 1 - math.Pow(c.Beta2, float64(c.Step))
	decay := 1.0
	if c.Decoupled && c.WeightDecay != 0 {
		decay = 1 - c.LR*c.WeightDecay
	}
	b1, ob1, b2, ob2 := F(c.Beta1), F(1-c.Beta1), F(c.Beta2), F(1-c.Beta2)
	eps, wd, dec := F(c.Eps), F(c.WeightDecay), F(decay)
	negStep, sqrtBC2 := F(-c.LR/bc1), F(math.Sqrt(bc2))
	return stepBlocks(ops, []int{0, 2, 3}, 12, func(xs [][]F) {
		p, g, m, v := xs[0], xs[1], xs[2], xs[3]
		// g is not written back: the gradient with weight decay lives in
		// the scratch block only.
		switch {
		case c.Decoupled && decay != 1:
			for i := range p {
				p[i] = F(p[i] * dec)
			}
			roundTrip(dt, p)
		case !c.Decoupled && c.WeightDecay != 0:
			for i := range g {
				g[i] = F(g[i] + F(p[i]*wd))
			}
		}
		for i := range m {
			gi := g[i]
			m[i] = F(F(m[i]*b1) + F(gi*ob1))
			v[i] = F(F(v[i]*b2) + F(F(gi*gi)*ob2))
		}
		roundTrip(dt, m)
		roundTrip(dt, v)
		for i := range p {
			denom := F(F(F(math.Sqrt(float64(v[i])))/sqrtBC2) + eps)
			p[i] = F(p[i] + F(negStep*F(m[i]/denom)))
		}
	})
}

// sgdStep is SGDStep in compute type F, over p, g and (with momentum) buf.
func sgdStep[F floating](ops []*operand, c backend.SGDStepConfig) error {
	dt := ops[0].dt
	negLR, mom, damp1, wd := F(-c.LR), F(c.Momentum), F(1-c.Dampening), F(c.WeightDecay)
	out := []int{0}
	if c.Momentum != 0 {
		out = append(out, 2)
	}
	return stepBlocks(ops, out, 6, func(xs [][]F) {
		p, d := xs[0], xs[1]
		if c.WeightDecay != 0 {
			for i := range d {
				d[i] = F(d[i] + F(p[i]*wd))
			}
		}
		if c.Momentum != 0 {
			b := xs[2]
			for i := range b {
				if c.First {
					b[i] = d[i]
				} else {
					b[i] = F(F(b[i]*mom) + F(d[i]*damp1))
				}
			}
			roundTrip(dt, b)
			for i := range d {
				if c.Nesterov {
					d[i] = F(d[i] + F(b[i]*mom))
				} else {
					d[i] = b[i]
				}
			}
		}
		for i := range p {
			p[i] = F(p[i] + F(negLR*d[i]))
		}
	})
}
