package main

import (
	"github.com/vramgo/vram"
	cb "github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
	"github.com/vramgo/vram/parallel"
)

// benchDDP times the MLP training step of benchMLP plainly and under
// DistributedDataParallel with one NCCL rank on cuda:0, in one process:
// the step time DDP adds on one GPU (buckets, hooks, the reductions on a
// communication stream, and the waits between the streams).
func benchDDP(reps int) {
	const width, batch = 4096, 1024
	dev := vram.CUDA(0)
	build := func() (nn.Module, *optim.Adam) {
		g := vram.NewGenerator(1)
		var mods []nn.Module
		for i := range 4 {
			mods = append(mods, nn.NewLinear(width, width, vram.WithGenerator(g)))
			if i < 3 {
				mods = append(mods, nn.NewReLU())
			}
		}
		model := nn.NewSequential(mods...)
		model.To(dev)
		opt, err := optim.NewAdamW(model.Parameters(), optim.AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
		must(err)
		return model, opt
	}
	g := vram.NewGenerator(2)
	x := vram.Randn(vram.Shape{batch, width}, vram.WithGenerator(g), dev)
	y := vram.Randn(vram.Shape{batch, width}, vram.WithGenerator(g), dev)
	d, _ := cb.Open(0)
	timeIt := func(f func()) float64 { return wallMs(d, max(7, reps/2), f) }

	model, opt := build()
	plain := timeIt(func() {
		vram.Tidy(func() {
			nn.MSELoss(model.Forward(x), y).Backward()
			opt.Step()
			opt.ZeroGrad()
		})
	})
	opt.Release()
	nn.Release(model)

	id, err := parallel.NewNCCLID()
	must(err)
	comm, err := parallel.NewNCCLRank(0, 1, dev, id)
	must(err)
	model, opt = build()
	ddp, err := parallel.NewDistributedDataParallel(model, comm, parallel.DDPOptions{})
	must(err)
	withDDP := timeIt(func() {
		vram.Tidy(func() {
			must(ddp.Backward(nn.MSELoss(ddp.Forward(x), y)))
			opt.Step()
			ddp.ZeroGrad()
		})
	})
	must(ddp.Close())
	must(comm.Close())
	emit("ddp_plain_mlp_step_f32", plain, "ms", "the MLP step without DDP, same process")
	emit("ddp_mlp_step_f32", withDDP, "ms", "the MLP step under DistributedDataParallel, one NCCL rank")
	emit("ddp_overhead", withDDP/plain, "x", "DDP step / plain step (target <= 1.03)")
	opt.Release()
	nn.Release(model)
	x.Release()
	y.Release()
}
