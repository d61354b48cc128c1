package cuda

import (
	"math"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
)

var (
	_ backend.FusedAdam = (*Device)(nil)
	_ backend.FusedSGD  = (*Device)(nil)
)

// AdamStep does one Adam or AdamW step of a parameter with a single kernel
// (kernels/optim.cu): p, m and v are updated in place from g. The four
// views must be contiguous, of one shape and one floating-point dtype;
// other views return an error wrapping [backend.ErrNotImplemented], so
// that callers fall back to the composed ops.
func (dev *Device) AdamStep(s backend.Stream, p, g, m, v backend.View, cfg backend.AdamStepConfig) error {
	const what = "adam step"
	d, err := dev.begin(s, what, backend.CheckAdamStep(p, g, m, v, cfg))
	if err != nil {
		return err
	}
	ops, err := d.ops(what, p, g, m, v)
	if err != nil {
		return err
	}
	n := int64(p.NumElements())
	if n == 0 {
		return nil
	}
	bc1 := 1 - math.Pow(cfg.Beta1, float64(cfg.Step))
	bc2 := 1 - math.Pow(cfg.Beta2, float64(cfg.Step))
	decay, dec := 1.0, int32(0)
	if cfg.Decoupled {
		dec = 1
		if cfg.WeightDecay != 0 {
			decay = 1 - cfg.LR*cfg.WeightDecay
		}
	}
	key := modKey{fam: famOptim, dt: p.DType, op: "adam"}
	return d.run(func() error {
		f, err := d.function(key, "adam_step")
		if err != nil {
			return err
		}
		a := d.getArgs()
		defer d.putArgs(a)
		a.Ptr(ops[0].ptr).Ptr(ops[1].ptr).Ptr(ops[2].ptr).Ptr(ops[3].ptr).Int64(n)
		a.Float64(cfg.Beta1).Float64(cfg.Beta2).Float64(cfg.Eps).Float64(cfg.WeightDecay).Float64(decay)
		a.Float64(-cfg.LR / bc1).Float64(math.Sqrt(bc2)).Int32(dec)
		return d.launch(f, d.grid(n), a)
	})
}

// SGDStep does one SGD step of a parameter with a single kernel
// (kernels/optim.cu): p, and buf when there is momentum, are updated in
// place from g. Views that are not contiguous, or of different or
// non-float dtypes, return an error wrapping [backend.ErrNotImplemented].
func (dev *Device) SGDStep(s backend.Stream, p, g, buf backend.View, cfg backend.SGDStepConfig) error {
	const what = "sgd step"
	d, err := dev.begin(s, what, backend.CheckSGDStep(p, g, buf, cfg))
	if err != nil {
		return err
	}
	views := []backend.View{p, g}
	if cfg.Momentum != 0 {
		views = append(views, buf)
	}
	ops, err := d.ops(what, views...)
	if err != nil {
		return err
	}
	n := int64(p.NumElements())
	if n == 0 {
		return nil
	}
	var bp cuda.DevicePtr
	hasBuf, first, nesterov := int32(0), int32(0), int32(0)
	if cfg.Momentum != 0 {
		bp, hasBuf = ops[2].ptr, 1
		if cfg.First {
			first = 1
		}
		if cfg.Nesterov {
			nesterov = 1
		}
	}
	key := modKey{fam: famOptim, dt: p.DType, op: "sgd"}
	return d.run(func() error {
		f, err := d.function(key, "sgd_step")
		if err != nil {
			return err
		}
		a := d.getArgs()
		defer d.putArgs(a)
		a.Ptr(ops[0].ptr).Ptr(ops[1].ptr).Ptr(bp).Int64(n)
		a.Float64(-cfg.LR).Float64(cfg.Momentum).Float64(1 - cfg.Dampening).Float64(cfg.WeightDecay)
		a.Int32(hasBuf).Int32(first).Int32(nesterov)
		return d.launch(f, d.grid(n), a)
	})
}

var _ backend.FusedSGDMulti = (*Device)(nil)

// sgdMax is the most parameters one launch of kernels/optim.cu's sgd_multi
// takes (its SGD_MAX): four kernel parameters each, 32 bytes, within
// maxKernelArgs and CUDA's 4 KiB of kernel parameters. A ResNet-50's 161
// parameters take 3 launches (14 with 12 a launch, whose small tail
// launches cost 0.06 ms of its step on an H100).
const sgdMax = 64

// sgdTile is the elements of one block of sgd_multi, the kernel's SGD_TILE:
// 16 for each of blockThreads threads, enough for the loads of a block to be
// in flight together, few enough that a parameter of 64 elements wastes
// only one block.
const sgdTile = 4096

// SGDSteps does the SGD steps of many parameters with one launch of
// kernels/optim.cu's sgd_multi per dtype and group of up to 64
// parameters, each parameter's tiles of sgdTile elements a block of the
// grid. It implements
// [backend.FusedSGDMulti].
func (dev *Device) SGDSteps(s backend.Stream, ps, gs, bufs []backend.View, first []bool, cfg backend.SGDStepConfig) error {
	const what = "sgd steps"
	d, err := dev.begin(s, what, backend.CheckSGDSteps(ps, gs, bufs, first, cfg))
	if err != nil {
		return err
	}
	type param struct {
		p, g, b cuda.DevicePtr
		n       int64
		first   bool
	}
	byDType := map[backend.DType][]param{}
	for i, p := range ps {
		views := []backend.View{p, gs[i]}
		if cfg.Momentum != 0 {
			views = append(views, bufs[i])
		}
		ops, err := d.ops(what, views...)
		if err != nil {
			return err
		}
		n := int64(p.NumElements())
		if n == 0 {
			continue
		}
		pr := param{p: ops[0].ptr, g: ops[1].ptr, n: n, first: first[i]}
		if cfg.Momentum != 0 {
			pr.b = ops[2].ptr
		}
		byDType[p.DType] = append(byDType[p.DType], pr)
	}
	hasBuf, nesterov := int32(0), int32(0)
	if cfg.Momentum != 0 {
		hasBuf = 1
		if cfg.Nesterov {
			nesterov = 1
		}
	}
	return d.run(func() error {
		for _, dt := range backend.DTypes {
			group := byDType[dt]
			if len(group) == 0 {
				continue
			}
			f, err := d.function(modKey{fam: famOptim, dt: dt, op: "sgd"}, "sgd_multi")
			if err != nil {
				return err
			}
			for len(group) > 0 {
				chunk := group[:min(len(group), sgdMax)]
				group = group[len(chunk):]
				var mask uint64
				var blocks int64 // the tiles of the chunk's parameters
				for i, pr := range chunk {
					if pr.first && hasBuf != 0 {
						mask |= 1 << i
					}
					blocks += (pr.n + sgdTile - 1) / sgdTile
				}
				a := d.getArgs()
				a.Float64(-cfg.LR).Float64(cfg.Momentum).Float64(1 - cfg.Dampening).Float64(cfg.WeightDecay)
				a.Int32(hasBuf).Int32(nesterov).Int32(int32(len(chunk))).Uint64(mask)
				for i := range sgdMax {
					if i < len(chunk) {
						a.Ptr(chunk[i].p).Ptr(chunk[i].g).Ptr(chunk[i].b).Int64(chunk[i].n)
					} else {
						a.Ptr(0).Ptr(0).Ptr(0).Int64(0)
					}
				}
				err := d.check(cuda.LaunchKernel(f, cuda.Dim3{X: uint32(blocks), Y: 1, Z: 1},
					cuda.Dim3{X: blockThreads, Y: 1, Z: 1}, 0, d.stream, a))
				d.putArgs(a)
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
}
