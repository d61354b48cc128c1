// Amp trains a small regression network with automatic mixed precision:
// the forward pass under float16 autocast (products in float16, weights
// and loss in float32) and a GradScaler that scales the loss before
// Backward, unscales the gradients before clipping them, skips the
// optimizer step when a gradient overflowed, and adapts the scale. It
// starts from a scale far too large on purpose (2^24), so that the first
// steps overflow float16 and are skipped while the scale backs off, and
// grows it again after clean steps. It runs on the CPU in a few seconds,
// or on the first CUDA device when there is one.
//
//	go run ./examples/amp
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	"github.com/vramgo/vram/examples/internal/cmdline"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

func main() {
	cmdline.NoArgs("Amp trains a small regression network under float16 autocast with a GradScaler that skips overflowing steps and adapts its scale.")
	dev := vram.CPU
	if vram.CUDAAvailable() {
		dev = vram.CUDA(0)
	}
	if err := run(os.Stdout, dev, 300); err != nil {
		fmt.Fprintln(os.Stderr, "amp:", err)
		os.Exit(1)
	}
}

const (
	inputs = 16
	hidden = 64
	batch  = 512
	growth = 100 // clean steps before the scale doubles
)

// summary is what a run ends with.
type summary struct {
	first, last float64 // the loss of the first and the last step
	skipped     int     // steps whose gradients overflowed
	scale       float64 // the final loss scale
}

func run(w io.Writer, dev vram.Device, steps int) error {
	var s summary
	err := vram.Catch(func() { s = train(w, dev, steps) })
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%d of %d steps skipped; loss %.4f -> %.4f; final scale %g\n", s.skipped, steps, s.first, s.last, s.scale)
	return nil
}

// train fits y = x·a + x0·x1 with an MLP under float16 autocast.
func train(w io.Writer, dev vram.Device, steps int) summary {
	g := vram.NewGenerator(1)
	model := nn.NewSequential(
		nn.NewLinear(inputs, hidden, dev, vram.WithGenerator(g)), nn.NewReLU(),
		nn.NewLinear(hidden, hidden, dev, vram.WithGenerator(g)), nn.NewReLU(),
		nn.NewLinear(hidden, 1, dev, vram.WithGenerator(g)),
	)
	defer nn.Release(model)
	params := model.Parameters()
	opt, err := optim.NewAdam(params, optim.AdamConfig{LR: 3e-3})
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	// PyTorch's defaults but the first scale, 2^24: float16 gradients
	// times 16.7 million overflow, so the scaler has to back off; and a
	// short growth interval, to show the scale growing back.
	scaler, err := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 1 << 24, GrowthInterval: growth})
	if err != nil {
		panic(err)
	}

	x := vram.Randn(vram.Shape{batch, inputs}, dev, vram.WithGenerator(g))
	defer x.Release()
	a := vram.Randn(vram.Shape{inputs, 1}, dev, vram.WithGenerator(g))
	defer a.Release()
	var y *vram.Tensor
	vram.Tidy(func() {
		y = vram.Keep(x.MatMul(a).Add(x.Narrow(1, 0, 1).Mul(x.Narrow(1, 1, 1))))
	})
	defer y.Release()

	fmt.Fprintf(w, "device %s, float16 autocast, weights %s, first scale %g\n", dev, params[0].DType(), scaler.CurrentScale())
	var s summary
	for step := range steps {
		vram.Tidy(func() {
			opt.ZeroGrad()
			var loss *vram.Tensor
			amp.Autocast(vram.Float16, func() {
				loss = nn.MSELoss(model.Forward(x), y) // float32, from a float16 output
			})
			scaler.Scale(loss).Backward()
			// Unscale before clipping, so that the norm is the true one;
			// Step then does not unscale again.
			overflow, err := scaler.Unscale(params)
			if err != nil {
				panic(err)
			}
			if !overflow {
				optim.ClipGradNorm(params, 1)
			}
			scale := scaler.CurrentScale()
			stepped := scaler.Step(opt, params)
			scaler.Update()
			l := loss.Item()
			if step == 0 {
				s.first = l
			}
			s.last = l
			switch {
			case !stepped:
				s.skipped++
				fmt.Fprintf(w, "step %3d  loss %8.4f  scale %9g  skipped: inf/NaN gradients, scale now %g\n", step, l, scale, scaler.CurrentScale())
			case scaler.CurrentScale() != scale:
				fmt.Fprintf(w, "step %3d  loss %8.4f  scale %9g  grown after %d clean steps\n", step, l, scaler.CurrentScale(), growth)
			case step%50 == 0 || step == steps-1:
				fmt.Fprintf(w, "step %3d  loss %8.4f  scale %9g\n", step, l, scale)
			}
		})
	}
	s.scale = scaler.CurrentScale()
	return s
}
