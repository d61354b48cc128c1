package main

import (
	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	cb "github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// benchAmp times the MLP training step of benchMLP under bfloat16 and
// float16 autocast (float32 master weights, AdamW), the float16 one with a
// GradScaler, next to the float32 step.
func benchAmp(reps int) {
	const width, batch = 4096, 1024
	dev := vram.CUDA(0)
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
	params := model.Parameters()
	opt, err := optim.NewAdamW(params, optim.AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
	must(err)
	x := vram.Randn(vram.Shape{batch, width}, vram.WithGenerator(g), dev)
	y := vram.Randn(vram.Shape{batch, width}, vram.WithGenerator(g), dev)
	d, _ := cb.Open(0)
	bf16 := wallMs(d, max(7, reps/2), func() {
		vram.Tidy(func() {
			var loss *vram.Tensor
			amp.Autocast(vram.BFloat16, func() { loss = nn.MSELoss(model.Forward(x), y) })
			loss.Backward()
			opt.Step()
			opt.ZeroGrad()
		})
	})
	scaler, err := amp.NewGradScaler(amp.GradScalerConfig{})
	must(err)
	fp16 := wallMs(d, max(7, reps/2), func() {
		vram.Tidy(func() {
			var loss *vram.Tensor
			amp.Autocast(vram.Float16, func() { loss = nn.MSELoss(model.Forward(x), y) })
			scaler.Scale(loss).Backward()
			scaler.Step(opt, params)
			scaler.Update()
			opt.ZeroGrad()
		})
	})
	emitVs("amp_mlp_step_bf16", bf16, "ms", "bf16 autocast, float32 master weights, AdamW",
		"amp_mlp_step_bf16_foreach", "amp_mlp_step_bf16_compile", "amp_mlp_step_bf16_cudagraphs")
	emitVs("amp_mlp_step_fp16_scaler", fp16, "ms", "fp16 autocast with GradScaler (fused unscale)",
		"amp_mlp_step_fp16_scaler_foreach")
	opt.Release()
	nn.Release(model)
	x.Release()
	y.Release()
}
