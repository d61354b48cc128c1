package amp_test

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// A training step under float16 autocast with loss scaling: the weights
// stay float32, the products run in float16, and the scaler unscales the
// gradients before the step.
func Example() {
	vram.ManualSeed(1)
	model := nn.NewSequential(nn.NewLinear(8, 16), nn.NewReLU(), nn.NewLinear(16, 1))
	defer nn.Release(model)
	params := model.Parameters()
	opt, _ := optim.NewAdamW(params, optim.AdamConfig{LR: 1e-2})
	scaler, _ := amp.NewGradScaler(amp.GradScalerConfig{})
	x := vram.Randn(vram.Shape{32, 8})
	y := vram.Randn(vram.Shape{32, 1})
	defer x.Release()
	defer y.Release()

	var first, last float64
	for step := range 20 {
		opt.ZeroGrad()
		var loss *vram.Tensor
		amp.Autocast(vram.Float16, func() {
			out := model.Forward(x)   // float16
			loss = nn.MSELoss(out, y) // float32
			out.Release()
		})
		scaled := scaler.Scale(loss)
		scaled.Backward()
		scaler.Step(opt, params)
		scaler.Update()
		if step == 0 {
			first = loss.Item()
		}
		last = loss.Item()
		loss.Release()
		scaled.Release()
	}
	fmt.Println("weights:", params[0].DType())
	fmt.Println("loss fell:", last < first)
	fmt.Println("scale:", scaler.CurrentScale())
	// Output:
	// weights: float32
	// loss fell: true
	// scale: 65536
}

// A block that needs full precision inside an autocast region: NoAutocast
// suspends the region, the block casts its inputs itself, and the region
// resumes afterwards.
func ExampleNoAutocast() {
	x := vram.Randn(vram.Shape{4, 4})
	defer x.Release()
	amp.Autocast(vram.BFloat16, func() {
		a := x.MatMul(x)
		defer a.Release()
		var b *vram.Tensor
		amp.NoAutocast(func() {
			f := a.Float()
			defer f.Release()
			b = f.MatMul(f)
		})
		defer b.Release()
		c := b.MatMul(b)
		defer c.Release()
		fmt.Println(a.DType(), b.DType(), c.DType())
	})
	// Output: bfloat16 float32 bfloat16
}
