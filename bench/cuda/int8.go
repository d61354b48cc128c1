package main

import (
	"fmt"

	"github.com/vramgo/vram"
	cb "github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/quant"
)

// benchInt8 times inference of the MLP of benchMLP (4 × Linear 4096 +
// ReLU) with float32, bfloat16 and int8 weights (nn/quant: per-channel
// scales, each layer's weight expanded into a transient buffer for the
// cuBLASLt product), at a batch of 1024 rows and of 16, and reports the
// parameter memory of each and the peak above the parameters of an int8
// forward pass (one layer's transient weight at a time).
func benchInt8(reps int) {
	const width = 4096
	dev := vram.CUDA(0)
	d, _ := cb.Open(0)
	g := vram.NewGenerator(1)
	var mods []nn.Module
	for i := range 4 {
		mods = append(mods, nn.NewLinear(width, width, vram.WithGenerator(g), dev))
		if i < 3 {
			mods = append(mods, nn.NewReLU())
		}
	}
	model := nn.NewSequential(mods...)
	defer nn.Release(model)
	// gib counts the model's own tensors (weights, biases, scales), not
	// what the device allocated since base: the first product also
	// allocates the cuBLASLt workspace, which is not parameter memory.
	gib := func() float64 {
		var n int64
		for _, t := range nn.StateDict(model) {
			n += t.Bytes()
		}
		return float64(n) / (1 << 30)
	}
	infer := func(name, note string, dt vram.DType) {
		for _, batch := range []int{1024, 16} {
			x := vram.Randn(vram.Shape{batch, width}, vram.WithGenerator(g), dev, dt)
			ms := wallMs(d, reps, func() {
				vram.NoGrad(func() { vram.Tidy(func() { model.Forward(x) }) })
			})
			emit(fmt.Sprintf("int8_mlp_infer_%s_b%d", name, batch), ms, "ms", note)
			x.Release()
		}
	}
	emit("int8_mlp_params_f32", gib(), "GiB", "4 x Linear 4096, float32")
	infer("f32", "float32 weights and activations", vram.Float32)
	model.BFloat16()
	emit("int8_mlp_params_bf16", gib(), "GiB", "bfloat16 weights")
	infer("bf16", "bfloat16 weights and activations", vram.BFloat16)
	model.Float()
	if _, err := quant.Quantize(model); err != nil {
		must(err)
	}
	emit("int8_mlp_params_int8", gib(), "GiB", "int8 weights, float32 scales and biases")
	infer("int8_f32", "int8 weights, float32 activations", vram.Float32)
	infer("int8_bf16", "int8 weights, bfloat16 activations", vram.BFloat16)
	x := vram.Randn(vram.Shape{1024, width}, vram.WithGenerator(g), dev, vram.BFloat16)
	before := vram.MemoryAllocated(dev)
	vram.ResetPeakMemoryStats(dev)
	vram.NoGrad(func() { vram.Tidy(func() { model.Forward(x) }) })
	emit("int8_mlp_infer_peak_extra", float64(vram.MaxMemoryAllocated(dev)-before)/(1<<20), "MiB",
		"peak above parameters and input, int8 bf16 forward at batch 1024 (activations and one transient weight)")
	x.Release()
}
