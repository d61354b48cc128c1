// Quantize trains a small classifier on the CPU, moves it to a simulated
// GPU and quantizes its Linear layers to int8 weights with per-channel
// scales (package nn/quant), then prints the model memory the
// allocator counts before and after, and the test accuracy and inference
// time of both: the weights take a quarter of their float32 bytes and the
// accuracy barely moves.
//
//	go run ./examples/quantize
package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/quant"
	"github.com/vramgo/vram/optim"
)

func main() {
	cmdline.NoArgs("Quantize trains a classifier, quantizes its Linear layers to int8 and compares memory, accuracy and time.")
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "quantize:", err)
		os.Exit(1)
	}
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quantize:", err)
		os.Exit(1)
	}
}

// setup gives the process a small simulated GPU; it must run before any
// device is used.
func setup() error {
	return vram.Configure(vram.Config{SimDevices: []int64{256 << 20}})
}

const (
	features = 32
	classes  = 8
	hidden   = 128
	steps    = 60
)

// data returns n points labelled by the argmax of a fixed random linear
// map: a task a small MLP learns well.
func data(n int, seed uint64) (x, y *vram.Tensor) {
	teacher := vram.Randn(vram.Shape{features, classes}, vram.WithGenerator(vram.NewGenerator(42)))
	defer teacher.Release()
	x = vram.Randn(vram.Shape{n, features}, vram.WithGenerator(vram.NewGenerator(seed)))
	s := x.MatMul(teacher)
	defer s.Release()
	return x, s.ArgMax(1, false)
}

func run(w io.Writer) error {
	return vram.Catch(func() { demo(w) })
}

func demo(w io.Writer) {
	g := vram.WithGenerator(vram.NewGenerator(1))
	model := nn.NewSequential(
		nn.NewLinear(features, hidden, g), nn.NewReLU(),
		nn.NewLinear(hidden, hidden, g), nn.NewReLU(),
		nn.NewLinear(hidden, classes, g))
	defer nn.Release(model)

	// Train on the CPU.
	x, y := data(2048, 2)
	defer x.Release()
	defer y.Release()
	opt, err := optim.NewAdamW(model.Parameters(), optim.AdamConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-4})
	if err != nil {
		panic(err)
	}
	for range steps {
		vram.Tidy(func() {
			opt.ZeroGrad()
			nn.CrossEntropyLoss(model.Forward(x), y).Backward()
			opt.Step()
		})
	}
	opt.ZeroGrad() // the gradients are not part of the model
	opt.Release()

	// Evaluate on the simulated GPU, whose allocator counts the bytes.
	dev := vram.Sim(0)
	xt, yt := data(2048, 3)
	defer xt.Release()
	defer yt.Release()
	xd, yd := xt.To(dev), yt.To(dev)
	defer xd.Release()
	defer yd.Release()
	base := vram.MemoryAllocated(dev)
	model.To(dev)
	floatBytes := vram.MemoryAllocated(dev) - base
	floatWeights := weightBytes(model)
	floatAcc, floatTime := evaluate(model, xd, yd)

	n, err := quant.Quantize(model)
	if err != nil {
		panic(err)
	}
	intBytes := vram.MemoryAllocated(dev) - base
	intWeights := weightBytes(model)
	intAcc, intTime := evaluate(model, xd, yd)

	fmt.Fprintf(w, "quantized %d Linear layers to int8 weights with per-channel scales\n", n)
	fmt.Fprintf(w, "weights: float32 %d bytes, int8 %d bytes (%.2fx smaller)\n",
		floatWeights, intWeights, float64(floatWeights)/float64(intWeights))
	fmt.Fprintf(w, "the whole model on %s (biases and scales too), as its allocator counts: float32 %d bytes, int8 %d bytes\n",
		dev, floatBytes, intBytes)
	// The quantized layers have no parameters left: their state is buffers.
	fmt.Fprintf(w, "parameters: %d; buffers:\n", len(model.Parameters()))
	for _, p := range nn.NamedBuffers(model) {
		fmt.Fprintf(w, "  %-9s %-8s %v\n", p.Name, p.Tensor.DType(), p.Tensor.Shape())
	}
	fmt.Fprintf(w, "test accuracy: float32 %.2f%%, int8 %.2f%% (change %+.2f points)\n",
		100*floatAcc, 100*intAcc, 100*(intAcc-floatAcc))
	fmt.Fprintf(w, "inference of %d rows: float32 %v, int8 %v\n", xd.Shape()[0], floatTime.Round(time.Microsecond), intTime.Round(time.Microsecond))
}

// weightBytes returns the bytes of the Linear layers' weights.
func weightBytes(model nn.Module) (n int64) {
	for _, m := range nn.Modules(model) {
		if l, ok := m.(*nn.Linear); ok {
			n += l.Weight.Bytes()
		}
	}
	return n
}

// evaluate returns the accuracy of model on x, y and the time of the
// forward pass, under NoGrad.
func evaluate(model nn.Module, x, y *vram.Tensor) (acc float64, took time.Duration) {
	vram.NoGrad(func() {
		vram.Tidy(func() {
			start := time.Now()
			logits := model.Forward(x)
			vram.Synchronize(x.Device())
			took = time.Since(start)
			acc = logits.ArgMax(1, false).Eq(y).Float().Mean().Item()
		})
	})
	return acc, took
}
