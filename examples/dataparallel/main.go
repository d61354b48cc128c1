// Dataparallel trains one network on several devices at once, a goroutine
// per device: PyTorch's nn.DataParallel(myNet, device_ids=[0, 1, 2]) in Go.
// Each batch is split into one part per device, every replica computes its
// part, and the replicas' gradients are summed before every replica's
// optimizer takes the same step, so they stay identical without copying
// the network again.
//
// It trains twice: first gathering the predictions on the first device and
// computing the loss there, as PyTorch's nn.DataParallel examples do (that device holds
// every replica's output and its gradient: it is the overloaded one), then
// with the loss computed on each device (ForwardLoss), the usual fix. It
// prints each device's peak memory for both, checks that the replicas stay
// in step and that training on one device with the whole batch gives the
// same parameters. It uses GPUs 0, 1 and 2 when the machine has at least
// two GPUs, else three simulated ones.
//
//	go run ./examples/dataparallel
package main

import (
	"fmt"
	"io"
	"math"
	"os"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
	"github.com/vramgo/vram/parallel"
)

func main() {
	cmdline.NoArgs("Dataparallel trains one network on several devices at once, a goroutine per device, as nn.DataParallel does.")
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "dataparallel:", err)
		os.Exit(1)
	}
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dataparallel:", err)
		os.Exit(1)
	}
}

// setup gives the process three small simulated GPUs, for machines with
// fewer than two real ones; it must run before any device is used.
func setup() error {
	return vram.Configure(vram.Config{SimDevices: []int64{1 << 30, 1 << 30, 1 << 30}})
}

const (
	features = 64
	hidden   = 128
	classes  = 256
	batch    = 768
	steps    = 6
)

// myNet is the network, written as a Go programmer writes a module:
// nn.Base and its layers in fields. DataParallel replicates it without any
// code of its own.
type myNet struct {
	nn.Base
	body *nn.Sequential
	head *nn.Linear
}

func newMyNet() *myNet {
	m := &myNet{
		body: nn.NewSequential(nn.NewLinear(features, hidden), nn.NewReLU(), nn.NewLinear(hidden, hidden), nn.NewTanh()),
		head: nn.NewLinear(hidden, classes),
	}
	m.RegisterModule("body", m.body)
	m.RegisterModule("head", m.head)
	return m
}

func (m *myNet) Forward(x *vram.Tensor) *vram.Tensor {
	h := m.body.Forward(x)
	defer h.Release()
	return m.head.Forward(h)
}

func run(w io.Writer) error {
	var err error
	if e := vram.Catch(func() { err = dataParallel(w) }); e != nil {
		return e
	}
	return err
}

func newSGD(ps []*vram.Tensor) (optim.Optimizer, error) {
	return optim.NewSGD(ps, optim.SGDConfig{LR: 0.5, Momentum: 0.9})
}

func dataParallel(w io.Writer) error {
	vram.ManualSeed(1)
	// The data: a batch of points whose class is the sign pattern of a
	// few coordinates, the same for every run.
	x := vram.Randn(vram.Shape{batch, features}, vram.WithGenerator(vram.NewGenerator(2)))
	defer x.Release()
	y := labels(x)
	defer y.Release()

	// One device, the whole batch: the reference.
	initial := newMyNet()
	defer nn.Release(initial)
	one, err := nn.Replicate(initial, vram.CPU)
	if err != nil {
		return err
	}
	defer nn.Release(one)
	opt1, _ := newSGD(one.Parameters())
	for range steps {
		vram.Tidy(func() {
			loss := nn.CrossEntropyLoss(one.Forward(x), y)
			loss.Backward()
			opt1.Step()
			opt1.ZeroGrad()
		})
	}

	for _, mode := range []string{"gather", "loss on each device"} {
		if err := train(w, mode, initial, one, x, y); err != nil {
			return err
		}
	}
	return nil
}

// train trains a copy of initial with DataParallel, gathering the outputs
// or computing the loss on each device as mode says, and compares it with
// one, trained on one device.
func train(w io.Writer, mode string, initial, one nn.Module, x, y *vram.Tensor) error {
	myNet, err := nn.Replicate(initial, vram.CPU)
	if err != nil {
		return err
	}
	defer nn.Release(myNet)
	var parallelNet *parallel.DataParallelModule
	if vram.DeviceCount() >= 2 {
		ids := []int{0, 1, 2}[:min(3, vram.DeviceCount())]
		parallelNet, err = parallel.DataParallel(myNet, ids) // nn.DataParallel(myNet, device_ids=[0, 1, 2])
	} else {
		parallelNet, err = parallel.NewDataParallel(myNet, []vram.Device{vram.Sim(0), vram.Sim(1), vram.Sim(2)})
	}
	if err != nil {
		return err
	}
	defer parallelNet.Release()
	devs := parallelNet.Devices()
	parallelNet.To(devs[0]) // parallel_net.to(0): the module is there already
	optimizer, err := parallelNet.Optimizer(newSGD)
	if err != nil {
		return err
	}
	defer optimizer.Release()
	base := make([]int64, len(devs))
	for i, d := range devs {
		vram.ResetPeakMemoryStats(d)
		base[i] = vram.MemoryAllocated(d)
	}

	fmt.Fprintf(w, "%s, %d steps of a batch of %d on %v:\n", mode, steps, batch, devs)
	for s := range steps {
		var lossValue float64
		vram.Tidy(func() {
			inputs := x.To(devs[0]) // input.to(0)
			labels := y.To(devs[0])
			if mode == "gather" {
				predictions := parallelNet.Forward(inputs)       // forward pass on every device
				loss := nn.CrossEntropyLoss(predictions, labels) // on the first device
				loss.Mean().Backward()                           // back through every replica
				optimizer.Step()                                 // sum the gradients, step every replica
				optimizer.ZeroGrad()
				lossValue = loss.Item()
			} else {
				loss := parallelNet.ForwardLoss(inputs, labels, nn.CrossEntropyLoss) // each device its own part of the loss
				loss.Backward()                                                      // each replica on its goroutine
				optimizer.Step()
				optimizer.ZeroGrad()
				lossValue = loss.Item()
			}
		})
		fmt.Fprintf(w, "  step %d: loss %.4f\n", s, lossValue)
	}
	for i, d := range devs {
		fmt.Fprintf(w, "  %v: peak %.2f MiB above what it held before the first step\n", d, float64(vram.MaxMemoryAllocated(d)-base[i])/(1<<20))
	}
	fmt.Fprintf(w, "  replicas in step: %v\n", inStep(parallelNet))
	fmt.Fprintf(w, "  largest difference from one device with the whole batch: %.2g\n", maxDiff(myNet, one))
	fmt.Fprint(w, indent(parallelNet.Report().String()))
	return nil
}

// labels returns the class of each row of x: the sign bits of its first
// eight coordinates.
func labels(x *vram.Tensor) *vram.Tensor {
	v := x.Float32s()
	out := make([]int64, x.Size(0))
	for i := range out {
		c := int64(0)
		for j := range 8 {
			if v[i*features+j] > 0 {
				c |= 1 << j
			}
		}
		out[i] = c % classes
	}
	return vram.FromSlice(out, vram.Shape{len(out)})
}

// inStep reports whether every replica holds exactly the module's values.
func inStep(dp *parallel.DataParallelModule) bool {
	reps := dp.Replicas()
	for _, r := range reps[1:] {
		for i, p := range r.Parameters() {
			a, b := p.Float32s(), reps[0].Parameters()[i].Float32s()
			for j := range a {
				if a[j] != b[j] {
					return false
				}
			}
		}
	}
	return true
}

// maxDiff returns the largest difference between a's and b's parameters.
func maxDiff(a, b nn.Module) float64 {
	d := 0.0
	for i, p := range a.Parameters() {
		x, y := p.Float64s(), b.Parameters()[i].Float64s()
		for j := range x {
			d = math.Max(d, math.Abs(x[j]-y[j]))
		}
	}
	return d
}

func indent(s string) string {
	out := "  "
	for i, c := range s {
		out += string(c)
		if c == '\n' && i < len(s)-1 {
			out += "  "
		}
	}
	return out
}
