package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	cb "github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/models"
	"github.com/vramgo/vram/optim"
)

// resnetModes are the four configurations of the ResNet-50 step: memory
// format and precision, named as torch_bench.py names them.
var resnetModes = []struct {
	name         string
	channelsLast bool
	bf16         bool
}{
	{"nchw_f32", false, false},
	{"nchw_bf16", false, true},
	{"cl_f32", true, false},
	{"cl_bf16", true, true},
}

// wantResNet reports whether any ResNet mode is selected.
func wantResNet() bool {
	for _, m := range resnetModes {
		if want("resnet50_step_" + m.name) {
			return true
		}
	}
	return false
}

// benchResNet times the ResNet-50 training step of issue 14: batch 64 at
// 224×224, 1000 classes, cross entropy, SGD with momentum 0.9, in each
// mode, with a fresh model, optimizer and peak statistics per mode. It
// emits the step's median time, the first step's time (algorithm searches
// and kernel compiles included), and the peaks of allocated and reserved
// memory over all the mode's steps.
func benchResNet(reps int) {
	const batch, classes = 64, 1000
	dev := vram.CUDA(0)
	d, err := cb.Open(0)
	must(err)
	r := rand.New(rand.NewPCG(1, 14))
	labels := make([]int64, batch)
	for i := range labels {
		labels[i] = int64(r.IntN(classes))
	}
	for _, m := range resnetModes {
		name := "resnet50_step_" + m.name
		if !want(name) {
			continue
		}
		if err := vram.Catch(func() { resnetMode(d, dev, m.name, m.channelsLast, m.bf16, labels, reps) }); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		}
	}
	vram.EmptyCache(dev)
}

// resnetMode runs the steps of one mode and emits its rows; a failure
// panics, and benchResNet reports it and goes on with the next mode.
func resnetMode(d *cb.Device, dev vram.Device, mode string, channelsLast, bf16 bool, labels []int64, reps int) {
	const batch, classes = 64, 1000
	name := "resnet50_step_" + mode
	vram.EmptyCache(dev)
	model := models.ResNet50(models.Config{NumClasses: classes}, dev, vram.WithGenerator(vram.NewGenerator(1)))
	defer releaseModel(model)
	format := vram.ContiguousFormat
	if channelsLast {
		format = vram.ChannelsLast
		nn.ToMemoryFormat(model, format)
	}
	opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.1, Momentum: 0.9})
	must(err)
	defer opt.Release()
	x0 := vram.Randn(vram.Shape{batch, 3, 224, 224}, dev, vram.WithGenerator(vram.NewGenerator(2)))
	x := x0.Contiguous(format)
	x0.Release()
	defer x.Release()
	y := vram.FromSlice(labels, vram.Shape{batch}, dev)
	defer y.Release()
	step := func() {
		vram.Tidy(func() {
			var loss *vram.Tensor
			fwd := func() { loss = nn.CrossEntropyLoss(model.Forward(x), y) }
			if bf16 {
				amp.Autocast(vram.BFloat16, fwd)
			} else {
				fwd()
			}
			loss.Backward()
			opt.Step()
			opt.ZeroGrad()
		})
	}
	must(d.Synchronize())
	vram.ResetPeakMemoryStats(dev)
	t0 := time.Now()
	step()
	must(d.Synchronize())
	first := time.Since(t0)
	// Two more warm-up steps and reps timed ones; a step of seconds
	// (no fast convolution path) gets one warm-up and three, so that
	// the four modes stay within a few minutes.
	warm, n := 2, min(reps, 10)
	if first > 2*time.Second {
		warm, n = 1, 3
	}
	for range warm {
		step()
	}
	must(d.Synchronize())
	ts := make([]float64, n)
	for i := range ts {
		t0 := time.Now()
		step()
		must(d.Synchronize())
		ts[i] = float64(time.Since(t0).Microseconds()) / 1000
	}
	ms := median(ts)
	what := "float32, TF32 convolutions"
	if bf16 {
		what = "bf16 autocast"
	}
	if channelsLast {
		what += ", channels_last"
	} else {
		what += ", NCHW"
	}
	emit(name, ms, "ms", "batch 64, 224x224, SGD momentum, "+what)
	emit("resnet50_first_step_"+mode, float64(first.Microseconds())/1000, "ms", "the first step, algorithm search and kernel compiles included")
	emit("resnet50_peak_allocated_"+mode, gibOf(vram.MaxMemoryAllocated(dev)), "GiB", "MaxMemoryAllocated")
	emit("resnet50_peak_reserved_"+mode, gibOf(vram.MaxMemoryReserved(dev)), "GiB", "MaxMemoryReserved")
	fmt.Fprintf(os.Stderr, "%s: %.1f ms a step, first step %v\n", name, ms, first.Round(time.Millisecond))
}

func gibOf(n int64) float64 { return float64(n) / (1 << 30) }

// releaseModel releases m's parameters and its buffers (batch-norm
// running statistics).
func releaseModel(m nn.Module) {
	for _, b := range nn.NamedBuffers(m) {
		b.Tensor.Release()
	}
	nn.Release(m)
}
