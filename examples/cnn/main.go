// CNN trains a small convolutional network to tell four kinds of generated
// 28×28 grey images apart (horizontal stripes, vertical stripes, a filled
// square, a ring; random sizes, positions, phases and noise), then reports
// its accuracy on images it has not seen, the training time and the memory
// it took. Two convolution + batch norm + ReLU + max pool stages and one
// linear layer, SGD with momentum: the shape of every image classifier. It
// runs on cuda:0 when there is one, else on the CPU, where it takes seconds.
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
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

func main() {
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

// dataset holds n generated images, row after row, and their labels, the
// classes in turn, in host memory, as a data loader would read them.
type dataset struct {
	px     []float32 // n·size·size values
	labels []int64
}

func generate(n int, seed uint64) dataset {
	r := rand.New(rand.NewPCG(seed, 14))
	d := dataset{px: make([]float32, n*size*size), labels: make([]int64, n)}
	for i := range n {
		c := i % classes
		d.labels[i] = int64(c)
		image(d.px[i*size*size:(i+1)*size*size], c, r)
	}
	return d
}

// batch returns the images idx as a tensor [len(idx), 1, size, size] on
// dev and their labels [len(idx)].
func (d dataset) batch(idx []int, dev vram.Device) (x, y *vram.Tensor) {
	px := make([]float32, 0, len(idx)*size*size)
	labels := make([]int64, len(idx))
	for j, i := range idx {
		px = append(px, d.px[i*size*size:(i+1)*size*size]...)
		labels[j] = d.labels[i]
	}
	return vram.FromSlice(px, vram.Shape{len(idx), 1, size, size}, dev), vram.FromSlice(labels, vram.Shape{len(idx)}, dev)
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
	trainSet, testSet := generate(trainN, 1), generate(testN, 2)
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
	order := rand.New(rand.NewPCG(4, 14))
	for epoch := range epochs {
		perm := order.Perm(trainN)
		var sum float64
		steps := 0
		for i := 0; i+batch <= trainN; i += batch {
			vram.Tidy(func() {
				x, y := trainSet.batch(perm[i:i+batch], dev)
				loss := nn.CrossEntropyLoss(net.Forward(x), y)
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
			all := make([]int, testN)
			for i := range all {
				all[i] = i
			}
			x, _ := testSet.batch(all, dev)
			pred := net.Forward(x).ArgMax(1, false).Int64s()
			for i, want := range testSet.labels {
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
