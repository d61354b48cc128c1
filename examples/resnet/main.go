// ResNet trains torchvision's ResNet-18 (package nn/models) on generated
// 3×64×64 colour images of four kinds (horizontal stripes, vertical
// stripes, a filled square, a ring) the way the fastest PyTorch recipe
// does on a GPU: channels-last memory format and bf16 autocast, batch norm
// in float32, SGD with momentum. It reports the accuracy on held-out
// images, the time a step and the peak memory, then saves the weights in
// the safetensors format, loads them into a fresh model (as a model saved
// from PyTorch with safetensors.torch.save_file would be loaded) and checks
// that it predicts the same.
//
// Training a ResNet takes a GPU: without one, the example runs one training
// step of the same model at the same sizes on a shape-only simulated 80 GiB
// GPU instead, which keeps no data, and reports the memory the step needs.
//
//	go run ./examples/resnet
package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	"github.com/vramgo/vram/examples/internal/cmdline"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/models"
	"github.com/vramgo/vram/optim"
)

func main() {
	cmdline.NoArgs("ResNet trains ResNet-18 on generated images on a GPU (channels-last, bf16 autocast), or sizes its step on a simulated GPU without one.")
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "resnet:", err)
		os.Exit(1)
	}
	if err := run(os.Stdout, vram.CUDAAvailable()); err != nil {
		fmt.Fprintln(os.Stderr, "resnet:", err)
		os.Exit(1)
	}
}

// setup makes sim:0 a shape-only 80 GiB device, before any device is used.
func setup() error {
	return vram.Configure(vram.Config{SimDevices: []int64{80 << 30}, SimShapeOnly: true})
}

const classes = 4

// settings are the sizes of a run.
type settings struct {
	size          int // image height and width
	trainN, testN int // images to train on and to test with
	batch, epochs int
}

// full is the example's run on a GPU.
var full = settings{size: 64, trainN: 4096, testN: 1024, batch: 64, epochs: 10}

// run trains on cuda:0 when gpu is set, else reports the step's memory on
// the shape-only sim device.
func run(w io.Writer, gpu bool) error {
	if !gpu {
		fmt.Fprintln(w, "no CUDA device: training ResNet-18 takes a GPU; one training step at this example's sizes on a shape-only simulated 80 GiB GPU instead")
		return vram.Catch(func() { fit(w, vram.Sim(0), full) })
	}
	return vram.Catch(func() { train(w, vram.CUDA(0), full) })
}

// image draws one noisy colour image of class c into px (3·size·size
// values, channel after channel): the class's pattern in a random colour
// on a random background.
func image(px []float32, size, c int, r *rand.Rand) {
	period := 4 + 8*r.Float64()
	phase := 2 * math.Pi * r.Float64()
	side := size/4 + r.IntN(size/4)
	x0, y0 := r.IntN(size-side), r.IntN(size-side)
	fs := float64(size)
	radius := fs/7 + fs/6*r.Float64()
	cx := radius + 2 + r.Float64()*(fs-2*radius-4)
	cy := radius + 2 + r.Float64()*(fs-2*radius-4)
	var fg, bg [3]float64
	for i := range 3 {
		fg[i], bg[i] = r.Float64(), r.Float64()
	}
	for y := range size {
		for x := range size {
			var v float64 // how much of the foreground colour
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
				if d := math.Hypot(float64(x)-cx, float64(y)-cy); math.Abs(d-radius) < 2 {
					v = 1
				}
			}
			for ch := range 3 {
				px[(ch*size+y)*size+x] = float32(v*fg[ch] + (1-v)*bg[ch] - 0.5 + 0.1*r.NormFloat64())
			}
		}
	}
}

// dataset holds generated images and their labels in host memory.
type dataset struct {
	size   int
	px     []float32
	labels []int64
}

func generate(n, size int, seed uint64) dataset {
	r := rand.New(rand.NewPCG(seed, 5))
	per := 3 * size * size
	d := dataset{size: size, px: make([]float32, n*per), labels: make([]int64, n)}
	for i := range n {
		c := r.IntN(classes)
		d.labels[i] = int64(c)
		image(d.px[i*per:(i+1)*per], size, c, r)
	}
	return d
}

// batch returns images idx as a channels-last tensor [len(idx), 3, size,
// size] on dev and their labels.
func (d dataset) batch(idx []int, dev vram.Device) (x, y *vram.Tensor) {
	size := d.size
	per := 3 * size * size
	px := make([]float32, 0, len(idx)*per)
	labels := make([]int64, len(idx))
	for j, i := range idx {
		px = append(px, d.px[i*per:(i+1)*per]...)
		labels[j] = d.labels[i]
	}
	nchw := vram.FromSlice(px, vram.Shape{len(idx), 3, size, size}, dev)
	defer nchw.Release()
	return nchw.Contiguous(vram.ChannelsLast), vram.FromSlice(labels, vram.Shape{len(idx)}, dev)
}

// newModel returns ResNet-18 for the example's classes on dev, in
// channels-last format.
func newModel(dev vram.Device, seed uint64) *models.ResNet {
	m := models.ResNet18(models.Config{NumClasses: classes}, dev, vram.WithGenerator(vram.NewGenerator(seed)))
	nn.ToMemoryFormat(m, vram.ChannelsLast)
	return m
}

// release releases m's parameters and buffers.
func release(m nn.Module) {
	for _, b := range nn.NamedBuffers(m) {
		b.Tensor.Release()
	}
	nn.Release(m)
}

// step runs one training step on x, y under bf16 autocast and returns the
// loss.
func step(m nn.Module, opt *optim.SGD, x, y *vram.Tensor) float64 {
	var loss float64
	vram.Tidy(func() {
		var l *vram.Tensor
		amp.Autocast(vram.BFloat16, func() { l = nn.CrossEntropyLoss(m.Forward(x), y) })
		l.Backward()
		opt.Step()
		opt.ZeroGrad()
		loss = l.Item()
	})
	return loss
}

// predict returns m's classes for every image of d, in evaluation mode.
func predict(m nn.Module, d dataset, batch int, dev vram.Device) []int64 {
	m.Eval()
	defer m.Train()
	var out []int64
	for i := 0; i < len(d.labels); i += batch {
		idx := make([]int, 0, batch)
		for j := i; j < min(i+batch, len(d.labels)); j++ {
			idx = append(idx, j)
		}
		vram.NoGrad(func() {
			vram.Tidy(func() {
				x, _ := d.batch(idx, dev)
				var logits *vram.Tensor
				amp.Autocast(vram.BFloat16, func() { logits = m.Forward(x) })
				out = append(out, logits.Cast(vram.Float32).ArgMax(1, false).Int64s()...)
			})
		})
	}
	return out
}

func accuracy(pred, labels []int64) float64 {
	ok := 0
	for i := range pred {
		if pred[i] == labels[i] {
			ok++
		}
	}
	return 100 * float64(ok) / float64(len(labels))
}

func train(w io.Writer, dev vram.Device, c settings) {
	size, trainN, testN, batch, epochs := c.size, c.trainN, c.testN, c.batch, c.epochs
	trainSet, testSet := generate(trainN, size, 1), generate(testN, size, 2)
	m := newModel(dev, 3)
	defer release(m)
	opt, err := optim.NewSGD(m.Parameters(), optim.SGDConfig{LR: 0.02, Momentum: 0.9})
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	fmt.Fprintf(w, "ResNet-18 on %v: %d generated %dx%d images, batch %d, %d epochs, channels_last, bf16 autocast\n",
		dev, trainN, size, size, batch, epochs)

	vram.ResetPeakMemoryStats(dev)
	order := rand.New(rand.NewPCG(4, 5))
	start := time.Now()
	steps := 0
	for epoch := range epochs {
		perm := order.Perm(trainN)
		var sum float64
		n := 0
		for i := 0; i+batch <= trainN; i += batch {
			x, y := trainSet.batch(perm[i:i+batch], dev)
			sum += step(m, opt, x, y)
			x.Release()
			y.Release()
			n++
		}
		steps += n
		fmt.Fprintf(w, "epoch %d: mean loss %.4f\n", epoch+1, sum/float64(n))
	}
	vram.Synchronize(dev)
	took := time.Since(start)
	pred := predict(m, testSet, batch, dev)
	fmt.Fprintf(w, "test accuracy: %.1f%% of %d images\n", accuracy(pred, testSet.labels), testN)
	fmt.Fprintf(w, "training took %v, %.1f ms a step (the first steps include kernel compiles)\n",
		took.Round(time.Millisecond), float64(took.Microseconds())/1000/float64(steps))
	fmt.Fprintf(w, "peak memory: %.2f GiB allocated, %.2f GiB reserved\n",
		float64(vram.MaxMemoryAllocated(dev))/(1<<30), float64(vram.MaxMemoryReserved(dev))/(1<<30))

	// Save and load: the file has torchvision's state-dict names, so a
	// torchvision resnet18(num_classes=4) loads it too, and a file saved
	// from one loads here the same way.
	dir, err := os.MkdirTemp("", "resnet-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "resnet18.safetensors")
	if err := nn.Save(m, path); err != nil {
		panic(err)
	}
	m2 := newModel(dev, 99)
	defer release(m2)
	if err := nn.Load(m2, path); err != nil {
		panic(err)
	}
	same := 0
	for i, p := range predict(m2, testSet, batch, dev) {
		if p == pred[i] {
			same++
		}
	}
	fmt.Fprintf(w, "reloaded from safetensors: %d of %d predictions the same\n", same, testN)
}

// fit runs one training step of the example's model and batch on dev (a
// shape-only sim device) and reports its peak memory.
func fit(w io.Writer, dev vram.Device, c settings) {
	size, batch := c.size, c.batch
	m := newModel(dev, 3)
	defer release(m)
	opt, err := optim.NewSGD(m.Parameters(), optim.SGDConfig{LR: 0.02, Momentum: 0.9})
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	x0 := vram.Empty(vram.Shape{batch, 3, size, size}, dev)
	x := x0.Contiguous(vram.ChannelsLast)
	x0.Release()
	defer x.Release()
	y := vram.Zeros(vram.Shape{batch}, dev, vram.Int64)
	defer y.Release()
	vram.ResetPeakMemoryStats(dev)
	vram.Tidy(func() {
		// step without reading the loss back: a shape-only device has no
		// values.
		var l *vram.Tensor
		amp.Autocast(vram.BFloat16, func() { l = nn.CrossEntropyLoss(m.Forward(x), y) })
		l.Backward()
		opt.Step()
		opt.ZeroGrad()
	})
	fmt.Fprintf(w, "ResNet-18, batch %d of %dx%d images, channels_last, bf16 autocast, SGD momentum: one step fits, peak %.1f MiB allocated (on the simulated GPU, whose convolutions keep their im2col matrices: an upper bound for cuDNN)\n",
		batch, size, size, float64(vram.MaxMemoryAllocated(dev))/(1<<20))
}
