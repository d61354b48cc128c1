// CNN trains a small convolutional network to tell four kinds of generated
// 28×28 grey images apart (horizontal stripes, vertical stripes, a filled
// square, a ring; random sizes, positions, phases and noise), then reports
// its accuracy on images it has not seen, the training time and the memory
// it took. Two convolution + batch norm + ReLU + max pool stages and one
// linear layer, SGD with momentum, shuffled batches from a data.Loader: the
// shape of every image classifier. It runs on cuda:0 when there is one,
// else on the CPU, where it takes seconds.
//
//	go run ./examples/cnn
package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
	"github.com/vramgo/vram/examples/internal/cmdline"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

func main() {
	cmdline.NoArgs("CNN trains a small convolutional network on generated images and reports its accuracy on held-out ones, its time and its memory.")
	if err := run(os.Stdout, device()); err != nil {
		fmt.Fprintln(os.Stderr, "cnn:", err)
		os.Exit(1)
	}
}

// device returns cuda:0 when the machine has a GPU, else the CPU.
func device() vram.Device {
	if vram.CUDAAvailable() {
		return vram.CUDA(0)
	}
	return vram.CPU
}

const (
	size    = 28 // image height and width
	classes = 4  // the kinds of image
	trainN  = 2048
	testN   = 512
	batch   = 64
	epochs  = 3
)

var classNames = [classes]string{"horizontal stripes", "vertical stripes", "square", "ring"}

// image draws one noisy image of class c into px (size·size values).
func image(px []float32, c int, r *rand.Rand) {
	period := 3 + 4*r.Float64()
	phase := 2 * math.Pi * r.Float64()
	side := 7 + r.IntN(8)
	x0, y0 := r.IntN(size-side), r.IntN(size-side)
	radius := 5 + 5*r.Float64()
	cx := radius + 1 + r.Float64()*(size-2*radius-2)
	cy := radius + 1 + r.Float64()*(size-2*radius-2)
	for y := range size {
		for x := range size {
			var v float64
			switch c {
			case 0:
				v = 0.5 + 0.5*math.Sin(2*math.Pi*float64(y)/period+phase)
			case 1:
				v = 0.5 + 0.5*math.Sin(2*math.Pi*float64(x)/period+phase)
			case 2:
				if x >= x0 && x < x0+side && y >= y0 && y < y0+side {
					v = 1
				}
			case 3:
				if d := math.Hypot(float64(x)-cx, float64(y)-cy); math.Abs(d-radius) < 1.2 {
					v = 1
				}
			}
			px[y*size+x] = float32(v - 0.5 + 0.25*r.NormFloat64())
		}
	}
}

// generate returns n generated images [n, 1, size, size] on the CPU and
// their labels [n], the classes in turn, as a dataset on disk would give
// them.
func generate(n int, seed uint64) (x, y *vram.Tensor) {
	r := rand.New(rand.NewPCG(seed, 14))
	px := make([]float32, n*size*size)
	labels := make([]int64, n)
	for i := range n {
		c := i % classes
		labels[i] = int64(c)
		image(px[i*size*size:(i+1)*size*size], c, r)
	}
	return vram.FromSlice(px, vram.Shape{n, 1, size, size}), vram.FromSlice(labels, vram.Shape{n})
}

// model returns the network: [N, 1, 28, 28] → 8 × 14 × 14 → 16 × 7 × 7 →
// [N, classes] logits.
func model(dev vram.Device, g *vram.Generator) *nn.Sequential {
	opts := []vram.Option{dev, vram.WithGenerator(g)}
	return nn.NewSequential(
		nn.NewConv2d(1, 8, 3, nn.ConvOptions{Padding: 1}, opts...),
		nn.NewBatchNorm2d(8, opts...),
		nn.NewReLU(),
		nn.NewMaxPool2d(2, 2, 0),
		nn.NewConv2d(8, 16, 3, nn.ConvOptions{Padding: 1}, opts...),
		nn.NewBatchNorm2d(16, opts...),
		nn.NewReLU(),
		nn.NewMaxPool2d(2, 2, 0),
		nn.NewFlatten(),
		nn.NewLinear(16*7*7, classes, opts...),
	)
}

// run trains the network on dev and writes what it did to w.
func run(w io.Writer, dev vram.Device) error {
	return vram.Catch(func() { train(w, dev) })
}

func train(w io.Writer, dev vram.Device) {
	trainX, trainY := generate(trainN, 1)
	testX, testY := generate(testN, 2)
	for _, t := range []*vram.Tensor{trainX, trainY, testX, testY} {
		defer t.Release()
	}
	trainSet, err := data.NewTensorDataset(trainX, trainY)
	if err != nil {
		panic(err)
	}
	// A new order every epoch, batches copied to dev, the next ones
	// prepared by a worker goroutine while the network trains.
	loader, err := data.NewLoader(trainSet, batch, data.Options{
		Shuffle: true, Generator: vram.NewGenerator(4), DropLast: true, NumWorkers: 1, Device: dev,
	})
	if err != nil {
		panic(err)
	}
	net := model(dev, vram.NewGenerator(3))
	defer nn.Release(net)
	opt, err := optim.NewSGD(net.Parameters(), optim.SGDConfig{LR: 0.05, Momentum: 0.9})
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	fmt.Fprintf(w, "%d training images of %v on %v, batch %d, %d epochs\n", trainN, classNames, dev, batch, epochs)

	vram.ResetPeakMemoryStats(dev)
	start := time.Now()
	for epoch := range epochs {
		var sum float64
		steps := 0
		for b, err := range loader.All() {
			if err != nil {
				panic(err)
			}
			vram.Tidy(func() {
				loss := nn.CrossEntropyLoss(net.Forward(b.Tensors[0]), b.Tensors[1])
				loss.Backward()
				opt.Step()
				opt.ZeroGrad()
				sum += loss.Item()
				steps++
			})
		}
		fmt.Fprintf(w, "epoch %d: mean loss %.4f\n", epoch+1, sum/float64(steps))
	}
	vram.Synchronize(dev)
	took := time.Since(start)

	net.Eval()
	correct := 0
	vram.NoGrad(func() {
		vram.Tidy(func() {
			pred := net.Forward(testX.To(dev)).ArgMax(1, false).Int64s()
			for i, want := range testY.Int64s() {
				if pred[i] == want {
					correct++
				}
			}
		})
	})
	fmt.Fprintf(w, "test accuracy: %.1f%% (%d of %d)\n", 100*float64(correct)/testN, correct, testN)
	fmt.Fprintf(w, "training took %v, %.1f ms a step\n", took.Round(time.Millisecond),
		float64(took.Microseconds())/1000/float64(epochs*(trainN/batch)))
	fmt.Fprintf(w, "peak memory allocated on %v: %.2f MiB\n", dev, float64(vram.MaxMemoryAllocated(dev))/(1<<20))
}
