package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	cb "github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/models"
	"github.com/vramgo/vram/optim"
)

// resnetModes are the configurations of the ResNet-50 step: memory format,
// precision and cuDNN's benchmark mode (timed algorithm searches, as
// torch.backends.cudnn.benchmark), named as torch_bench.py names them. The
// first four modes search; two more choose by cuDNN's heuristics, for what
// the search gains; the last two replay the channels-last step as a
// captured graph (vram.CaptureGraph), as torch.compile's reduce-overhead
// mode does with CUDA graphs.
var resnetModes = []struct {
	name         string
	channelsLast bool
	bf16         bool
	benchmark    bool
	graph        bool
}{
	{"nchw_f32", false, false, true, false},
	{"nchw_bf16", false, true, true, false},
	{"cl_f32", true, false, true, false},
	{"cl_bf16", true, true, true, false},
	{"nchw_f32_nobench", false, false, false, false},
	{"cl_bf16_nobench", true, true, false, false},
	{"cl_f32_graph", true, false, true, true},
	{"cl_bf16_graph", true, true, true, true},
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

// benchResNet times the ResNet-50 training step of BENCHMARKS.md: batch 64 at
// 224×224, 1000 classes, cross entropy, SGD with momentum 0.9, in each
// mode, with a fresh model, optimizer and peak statistics per mode. It
// emits the step's median time, the first step's time (algorithm searches
// and kernel compiles included), the time of benchmark mode's searches,
// and the peaks of allocated and reserved memory over all the mode's
// steps.
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
		if err := vram.Catch(func() { resnetMode(d, dev, m.name, m.channelsLast, m.bf16, m.benchmark, m.graph, labels, reps) }); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		}
	}
	vram.EmptyCache(dev)
}

// resnetMode runs the steps of one mode and emits its rows; a failure
// panics, and benchResNet reports it and goes on with the next mode.
func resnetMode(d *cb.Device, dev vram.Device, mode string, channelsLast, bf16, benchmark, graph bool, labels []int64, reps int) {
	const batch, classes = 64, 1000
	name := "resnet50_step_" + mode
	old := vram.CuDNN()
	defer vram.SetCuDNN(old)
	set := old
	set.Benchmark = benchmark
	set.BenchmarkLimit = *cudnnLimit
	vram.SetCuDNN(set)
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
	stats0, fb0 := vram.CuDNNStatistics(), cb.CuDNNFallbacks()
	t0 := time.Now()
	step()
	must(d.Synchronize())
	first := time.Since(t0)
	stats1, fb1 := vram.CuDNNStatistics(), cb.CuDNNFallbacks()
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
	nodes := 0
	if graph {
		t0 := time.Now()
		g, err := vram.CaptureGraph(dev, step)
		must(err)
		defer g.Release()
		must(g.Replay())
		must(d.Synchronize())
		nodes = g.Nodes()
		fmt.Fprintf(os.Stderr, "%s: captured %d nodes; capture, instantiation and a first replay took %v\n", name, nodes, time.Since(t0).Round(time.Millisecond))
		step = func() { must(g.Replay()) }
	}
	ts, host := make([]float64, n), make([]float64, n)
	for i := range ts {
		t0 := time.Now()
		step()
		host[i] = float64(time.Since(t0).Microseconds()) / 1000
		must(d.Synchronize())
		ts[i] = float64(time.Since(t0).Microseconds()) / 1000
	}
	ms := median(ts)
	stats2, fb2 := vram.CuDNNStatistics(), cb.CuDNNFallbacks()
	what := "float32, TF32 convolutions"
	if bf16 {
		what = "bf16 autocast"
	}
	if channelsLast {
		what += ", channels_last"
	} else {
		what += ", NCHW"
	}
	if benchmark {
		what += ", cuDNN benchmark mode"
	} else {
		what += ", cuDNN heuristics"
	}
	if graph {
		what += fmt.Sprintf(", replayed as a captured graph of %d nodes", nodes)
	}
	emit(name, ms, "ms", "batch 64, 224x224, SGD momentum, "+what)
	emit("resnet50_first_step_"+mode, float64(first.Microseconds())/1000, "ms", "the first step, algorithm choice (benchmark search) and kernel compiles included")
	emit("resnet50_peak_allocated_"+mode, gibOf(vram.MaxMemoryAllocated(dev)), "GiB", "MaxMemoryAllocated")
	emit("resnet50_peak_reserved_"+mode, gibOf(vram.MaxMemoryReserved(dev)), "GiB", "MaxMemoryReserved")
	if benchmark {
		emit("resnet50_search_"+mode, float64((stats1.SearchTime-stats0.SearchTime).Microseconds())/1000, "ms",
			fmt.Sprintf("benchmark mode's searches in the first step: %d", stats1.Searches-stats0.Searches))
	}
	fmt.Fprintf(os.Stderr, "%s: %.1f ms a step, first step %v, cuDNN fallbacks %d in the first step and %d after\n",
		name, ms, first.Round(time.Millisecond), stats1.Fallbacks-stats0.Fallbacks, stats2.Fallbacks-stats1.Fallbacks)
	// The time the host takes to queue a step's kernels: a step whose
	// queueing takes about as long as the step is bound by the host, not
	// by the GPU.
	fmt.Fprintf(os.Stderr, "%s: the host queues a step in %.1f ms (median)\n", name, median(host))
	printFallbacks(name+": first step", fb0, fb1)
	printFallbacks(name+": later steps", fb1, fb2)
	if *gpuProfile {
		// The profiler's switches act on the calling thread's current
		// context.
		runtime.LockOSThread()
		must(d.Synchronize())
		must(cuda.CtxSetCurrent(d.Context()))
		must(cuda.ProfilerStart())
		step()
		must(d.Synchronize())
		must(cuda.CtxSetCurrent(d.Context()))
		must(cuda.ProfilerStop())
		runtime.UnlockOSThread()
	}
	if *cpuProfile != "" {
		profileSteps(filepath.Join(*cpuProfile, name+".pprof"), 50, step)
		must(d.Synchronize())
	}
}

// profileSteps writes a CPU profile of n calls of step to path, sampled
// at 2 kHz: a step of 15 ms gets 30 samples rather than 100 Hz's one or
// two.
func profileSteps(path string, n int, step func()) {
	f, err := os.Create(path)
	must(err)
	defer f.Close()
	// StartCPUProfile asks for 100 Hz, which fails with a warning once a
	// rate is set; the rate set here stays.
	runtime.SetCPUProfileRate(2000)
	must(pprof.StartCPUProfile(f))
	for range n {
		step()
	}
	pprof.StopCPUProfile()
}

// printFallbacks writes to stderr, by operation, the cuDNN fallbacks
// between the counts before and after, with the latest reason: which
// convolutions, poolings or batch norms went to the composed path.
func printFallbacks(what string, before, after map[string]cb.Fallback) {
	ops := make([]string, 0, len(after))
	for op := range after {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	for _, op := range ops {
		if n := after[op].Count - before[op].Count; n > 0 {
			fmt.Fprintf(os.Stderr, "%s: cuDNN fallbacks of %s: %d (latest: %s)\n", what, op, n, after[op].Last)
		}
	}
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
