package vram_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// trainer is a small model, its optimizer and fixed input tensors, the
// work a captured training step reads.
type trainer struct {
	model *nn.Sequential
	opt   *optim.SGD
	x, y  *vram.Tensor
	loss  *vram.Tensor
}

func newTrainer(t *testing.T, d vram.Device) *trainer {
	t.Helper()
	gen := vram.NewGenerator(7)
	m := nn.NewSequential(nn.NewLinear(8, 16, vram.WithGenerator(gen)), nn.NewReLU(), nn.NewLinear(16, 4, vram.WithGenerator(gen)))
	m.To(d)
	opt, err := optim.NewSGD(m.Parameters(), optim.SGDConfig{LR: 0.05, Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	x := vram.Randn(vram.Shape{32, 8}, vram.WithGenerator(gen)).To(d)
	y := vram.Randn(vram.Shape{32, 4}, vram.WithGenerator(gen)).To(d)
	return &trainer{model: m, opt: opt, x: x, y: y}
}

// step is one training step; the loss is kept for reading after it.
func (tr *trainer) step() {
	vram.Tidy(func() {
		tr.opt.ZeroGrad()
		l := nn.MSELoss(tr.model.Forward(tr.x), tr.y)
		l.Backward()
		tr.opt.Step()
		if tr.loss == nil {
			tr.loss = vram.Keep(l.Detach())
		} else {
			tr.loss.CopyFrom(l)
		}
	})
}

func (tr *trainer) params() [][]float32 {
	var out [][]float32
	for _, p := range tr.model.Parameters() {
		out = append(out, p.Float32s())
	}
	return out
}

// TestGraphTrainingStep captures a training step (forward, backward and an
// SGD step with momentum) and checks that replaying it trains exactly as
// running it does, that a new input written into the captured input tensor
// is used, and that the graph's memory is kept until Release.
func TestGraphTrainingStep(t *testing.T) {
	d := vram.Sim(0)
	eager, graphed := newTrainer(t, d), newTrainer(t, d)
	eager.step() // warm-up: momentum buffers, the kept loss
	graphed.step()
	vram.EmptyCache(d)
	before := vram.MemoryReserved(d)
	g, err := vram.CaptureGraph(d, graphed.step)
	if err != nil {
		t.Fatal(err)
	}
	if g.Nodes() == 0 {
		t.Fatal("the graph recorded nothing")
	}
	if !slices.EqualFunc(eager.params(), graphed.params(), slices.Equal) {
		t.Fatal("the capture ran the step")
	}
	var losses []float64
	for range 5 {
		eager.step()
		if err := g.Replay(); err != nil {
			t.Fatal(err)
		}
		if a, b := eager.loss.Item(), graphed.loss.Item(); a != b {
			t.Fatalf("loss %v eager, %v replayed", a, b)
		}
		losses = append(losses, graphed.loss.Item())
	}
	if !(losses[4] < losses[0]) {
		t.Errorf("replays do not train: losses %v", losses)
	}
	if !slices.EqualFunc(eager.params(), graphed.params(), slices.Equal) {
		t.Fatal("parameters differ after 5 eager steps and 5 replays")
	}
	// A new batch written into the captured input.
	gen := vram.NewGenerator(9)
	nx := vram.Randn(vram.Shape{32, 8}, vram.WithGenerator(gen)).To(d)
	eager.x.CopyFrom(nx)
	graphed.x.CopyFrom(nx)
	eager.step()
	if err := g.Replay(); err != nil {
		t.Fatal(err)
	}
	if a, b := eager.loss.Item(), graphed.loss.Item(); a != b {
		t.Fatalf("new input: loss %v eager, %v replayed", a, b)
	}
	vram.EmptyCache(d)
	if vram.MemoryReserved(d) <= before {
		t.Errorf("the graph's pool was given back while the graph lives: %d bytes reserved, %d before the capture", vram.MemoryReserved(d), before)
	}
	g.Release()
	g.Release()
	// The gradients of the last replay live in the graph's pool until they
	// are released; then all of it goes back.
	graphed.opt.ZeroGrad()
	eager.opt.ZeroGrad()
	vram.EmptyCache(d)
	if got := vram.MemoryReserved(d); got > before {
		t.Errorf("%d bytes reserved after Release and EmptyCache, %d before the capture", got, before)
	}
	if err := g.Replay(); !errors.Is(err, vram.ErrReleased) {
		t.Errorf("replay after Release: %v, want ErrReleased", err)
	}
}

// TestGraphRefusals checks that work a graph cannot record fails with
// ErrCapturing, discards the capture and leaves the device usable.
func TestGraphRefusals(t *testing.T) {
	d := vram.Sim(0)
	x := vram.Ones(vram.Shape{4}).To(d)
	tests := []struct {
		name string
		fn   func()
	}{
		{"item", func() { x.MulScalar(2).Sum().Item() }},
		{"read", func() { x.AddScalar(1).Float32s() }},
		{"to cpu", func() { x.AddScalar(1).To(vram.CPU) }},
		{"from cpu", func() { vram.Ones(vram.Shape{3}).To(d) }},
		{"random", func() { vram.Rand(vram.Shape{3}, d) }},
		{"synchronize", func() {
			if err := vram.Synchronize(d); err != nil {
				panic(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := vram.CaptureGraph(d, tc.fn)
			if g != nil || !errors.Is(err, vram.ErrCapturing) {
				t.Fatalf("got %v, %v; want an error wrapping ErrCapturing", g, err)
			}
			// The device works, without a capture.
			if got := x.MulScalar(3).Sum().Item(); got != 12 {
				t.Fatalf("after the refused capture: %v, want 12", got)
			}
		})
	}
}

// TestGraphArguments checks the errors of CaptureGraph's arguments and
// devices without graphs, and that a panic that is not a vram error still
// ends the capture.
func TestGraphArguments(t *testing.T) {
	if _, err := vram.CaptureGraph(vram.Sim(0), nil); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("nil fn: %v", err)
	}
	if _, err := vram.CaptureGraph(vram.CPU, func() {}); !errors.Is(err, vram.ErrUnavailable) {
		t.Errorf("CPU: %v", err)
	}
	var g *vram.Graph
	if err := g.Replay(); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("nil graph: %v", err)
	}
	g.Release()
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want boom", r)
			}
		}()
		vram.CaptureGraph(vram.Sim(0), func() { panic("boom") })
	}()
	// The stream is no longer captured: an eager op runs.
	if got := vram.Ones(vram.Shape{2}).To(vram.Sim(0)).Sum().Item(); got != 2 {
		t.Errorf("after the panic: %v", got)
	}
	// An empty capture replays nothing.
	e, err := vram.CaptureGraph(vram.Sim(0), func() {})
	if err != nil || e.Nodes() != 0 || e.Replay() != nil {
		t.Errorf("empty capture: %v, %d nodes", err, e.Nodes())
	}
	e.Release()
}

// TestGraphConcurrentReplays replays one graph from several goroutines
// while others run eager work on the device, for the race detector: the
// replays of an accumulation all count.
func TestGraphConcurrentReplays(t *testing.T) {
	d := vram.Sim(1)
	acc := vram.Zeros(vram.Shape{16}).To(d)
	one := vram.Ones(vram.Shape{16}).To(d)
	g, err := vram.CaptureGraph(d, func() { acc.AddInPlace(one) })
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 25 {
				if err := g.Replay(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 25 {
				vram.Tidy(func() { one.MulScalar(2).Sum() })
			}
		}()
	}
	wg.Wait()
	if got := acc.Sum().Item(); got != 16*100 {
		t.Fatalf("accumulated %v, want %d", got, 16*100)
	}
}

// cnnGraphCheck trains three copies of the model mk makes on a small batch
// on d, two eagerly and one by replaying a captured step, and checks that
// after three steps the replayed copy's parameters and buffers (batch
// norm's running statistics) differ from the first eager copy's by at most
// tol, or four times what the two eager copies differ by where the device's
// kernels are not deterministic (cuDNN's atomics), each tensor's difference
// taken relative to its largest value. The step is channels-last and under
// bf16 autocast when asked, as the fast ResNet path runs.
func cnnGraphCheck(t *testing.T, d vram.Device, mk func() nn.Module, channelsLast, bf16 bool, tol float64) {
	t.Helper()
	type run struct {
		model nn.Module
		step  func()
	}
	gen := vram.NewGenerator(3)
	x0 := vram.Randn(vram.Shape{8, 3, 32, 32}, d, vram.WithGenerator(gen))
	format := vram.ContiguousFormat
	if channelsLast {
		format = vram.ChannelsLast
	}
	x := x0.Contiguous(format)
	y := vram.FromSlice([]int64{1, 7, 0, 3, 9, 2, 5, 5}, vram.Shape{8}, d)
	newRun := func() *run {
		m := mk()
		m.To(d)
		if channelsLast {
			nn.ToMemoryFormat(m, format)
		}
		opt, err := optim.NewSGD(m.Parameters(), optim.SGDConfig{LR: 1e-3, Momentum: 0.9})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(opt.Release)
		return &run{model: m, step: func() {
			vram.Tidy(func() {
				var loss *vram.Tensor
				fwd := func() { loss = nn.CrossEntropyLoss(m.Forward(x), y) }
				if bf16 {
					amp.Autocast(vram.BFloat16, fwd)
				} else {
					fwd()
				}
				loss.Backward()
				opt.Step()
				opt.ZeroGrad()
			})
		}}
	}
	eager, eager2, graphed := newRun(), newRun(), newRun()
	eager.step()
	eager2.step()
	graphed.step()
	g, err := vram.CaptureGraph(d, graphed.step)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	for range 3 {
		eager.step()
		eager2.step()
		if err := g.Replay(); err != nil {
			t.Fatal(err)
		}
	}
	tensors := func(m nn.Module) []*vram.Tensor {
		ts := m.Parameters()
		for _, b := range nn.NamedBuffers(m) {
			ts = append(ts, b.Tensor)
		}
		return ts
	}
	// diff returns the largest difference of a tensor of a and its
	// counterpart in b, relative to the tensor's largest value.
	diff := func(a, b []*vram.Tensor) float64 {
		if len(a) != len(b) {
			t.Fatalf("%d and %d tensors", len(a), len(b))
		}
		var worst float64
		for i := range a {
			av, bv := a[i].Float64s(), b[i].Float64s()
			var d, scale float64
			for j := range av {
				d = max(d, math.Abs(av[j]-bv[j]))
				scale = max(scale, math.Abs(av[j]))
			}
			if d > 0 {
				worst = max(worst, d/max(scale, 1e-30))
			}
		}
		return worst
	}
	ge := diff(tensors(eager.model), tensors(graphed.model))
	ee := diff(tensors(eager.model), tensors(eager2.model))
	t.Logf("%s, channels-last %v, bf16 %v: %d nodes; relative difference %.3g replayed, %.3g between eager runs", d, channelsLast, bf16, g.Nodes(), ge, ee)
	if ge > max(tol, 4*ee) {
		t.Errorf("replays and eager steps differ by %.3g relative (eager runs by %.3g)", ge, ee)
	}
}

// smallCNN is a convolutional network with the layers of a ResNet
// (convolutions, batch norm, ReLU, max and adaptive average pooling, a
// linear layer), small enough for two copies on a sim device.
func smallCNN() nn.Module {
	g := vram.WithGenerator(vram.NewGenerator(1))
	return nn.NewSequential(
		nn.NewConv2d(3, 8, 3, nn.ConvOptions{Padding: 1, NoBias: true}, g), nn.NewBatchNorm2d(8), nn.NewReLU(),
		nn.NewMaxPool2d(3, 2, 1),
		nn.NewConv2d(8, 16, 3, nn.ConvOptions{Stride: 2, Padding: 1}, g), nn.NewBatchNorm2d(16), nn.NewReLU(),
		nn.NewAdaptiveAvgPool2d(1, 1), nn.NewFlatten(), nn.NewLinear(16, 10, g))
}

// TestGraphCNN runs cnnGraphCheck on a sim device, in the four modes of
// the ResNet benchmark.
func TestGraphCNN(t *testing.T) {
	for _, cl := range []bool{false, true} {
		for _, bf := range []bool{false, true} {
			cnnGraphCheck(t, vram.Sim(0), smallCNN, cl, bf, 0)
		}
	}
}

// A training step captured once and replayed: the replays train the model
// exactly as running the step would.
func ExampleCaptureGraph() {
	d := vram.Sim(0) // vram.CUDA(0) on a GPU
	gen := vram.NewGenerator(1)
	model := nn.NewLinear(4, 1, d, vram.WithGenerator(gen))
	opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.1})
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	x := vram.Randn(vram.Shape{16, 4}, vram.WithGenerator(gen)).To(d)
	y := x.SumKeepDim(1) // learn the sum of the inputs
	loss := vram.Zeros(vram.Shape{}, d)
	step := func() {
		vram.Tidy(func() {
			l := nn.MSELoss(model.Forward(x), y)
			l.Backward()
			opt.Step()
			opt.ZeroGrad()
			loss.CopyFrom(l)
		})
	}
	step() // warm up outside the capture
	g, err := vram.CaptureGraph(d, step)
	if err != nil {
		panic(err)
	}
	defer g.Release()
	for range 200 {
		if err := g.Replay(); err != nil {
			panic(err)
		}
	}
	fmt.Printf("recorded %v, loss after 200 replays below 1e-4: %v\n", g.Nodes() > 0, loss.Item() < 1e-4)
	// Output: recorded true, loss after 200 replays below 1e-4: true
}

// TestGraphKeepsInputs releases, after the capture, a tensor the captured
// work reads, and fills the device with other tensors: the replays still
// read the released tensor's values, because the graph keeps its memory,
// until Release gives everything back.
func TestGraphKeepsInputs(t *testing.T) {
	d := vram.Sim(1)
	memtest.Settle(d)
	vram.EmptyCache(d)
	base := vram.Storage(d).LiveBytes
	x := vram.Full(vram.Shape{1024}, 3, d)
	var y *vram.Tensor
	g, err := vram.CaptureGraph(d, func() { y = x.MulScalar(2) })
	if err != nil {
		t.Fatal(err)
	}
	x.Release()
	var others []*vram.Tensor
	for range 8 {
		others = append(others, vram.Full(vram.Shape{1024}, -1, d))
	}
	if err := g.Replay(); err != nil {
		t.Fatal(err)
	}
	if got := y.Float32s(); got[0] != 6 || got[1023] != 6 {
		t.Fatalf("replay read %v..., want 6: the released input's memory was reused", got[:2])
	}
	for _, o := range others {
		o.Release()
	}
	g.Release()
	y.Release()
	if got := vram.Storage(d).LiveBytes; got != base {
		t.Fatalf("%d bytes live after Release, %d before", got, base)
	}
}

// TestGraphOps runs graphOpsCheck on a sim device.
func TestGraphOps(t *testing.T) { graphOpsCheck(t, vram.Sim(0), []bool{false}) }

// TestGraphNestedAndStreams checks that a capture inside a capture of the
// same device is refused, that a capture started inside WithStream waits
// for that stream's work and replays on the stream current at replay, and
// that an out-of-memory error during a capture names the graph's pool.
func TestGraphNestedAndStreams(t *testing.T) {
	d := vram.Sim(1)
	var inner error
	g, err := vram.CaptureGraph(d, func() {
		_, inner = vram.CaptureGraph(d, func() {})
	})
	if err != nil || !errors.Is(inner, vram.ErrArgument) {
		t.Fatalf("nested capture: outer %v, inner %v; want the inner refused with ErrArgument", err, inner)
	}
	g.Release()

	s, err := vram.NewStream(d)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	var x, y *vram.Tensor
	vram.WithStream(s, func() {
		x = vram.Full(vram.Shape{8}, 2, d) // queued on s, not yet run
		g, err = vram.CaptureGraph(d, func() { y = x.MulScalar(3) })
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	vram.WithStream(s, func() {
		if err := g.Replay(); err != nil {
			t.Fatal(err)
		}
	})
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if got := y.Float32s(); got[0] != 6 || got[7] != 6 {
		t.Fatalf("replay on the stream: %v, want 6", got)
	}

	_, err = vram.CaptureGraph(d, func() { vram.Zeros(vram.Shape{1 << 40}, d) })
	var oom *memory.OutOfMemoryError
	if !errors.As(err, &oom) || !strings.Contains(err.Error(), "graph pool") {
		t.Fatalf("out of memory in a capture: %v", err)
	}
}

// TestGraphOtherGoroutines runs eager work on the device under capture
// from another goroutine, in the middle of the capture: composed
// operations that make constant tables run as usual, the tensors that work
// reads are not kept by the graph, and only the capturing goroutine's
// current stream reports being captured.
func TestGraphOtherGoroutines(t *testing.T) {
	d := vram.Sim(0)
	x := vram.Full(vram.Shape{1, 2, 7, 7}, 2, d)
	defer x.Release()
	tests := []struct {
		name string
		fn   func(z *vram.Tensor) float64
		want float64
	}{
		{"adaptive pool", func(z *vram.Tensor) float64 { return vram.AdaptiveAvgPool2d(z, 3, 3).Sum().Item() }, 2 * 2 * 9},
		{"avg pool", func(z *vram.Tensor) float64 {
			return vram.AvgPool2d(z, vram.Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}).Sum().Item()
		}, -1},
		{"elementwise", func(z *vram.Tensor) float64 { return z.MulScalar(3).Sum().Item() }, 2 * 2 * 49 * 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want < 0 {
				vram.Tidy(func() { want = tc.fn(x) })
			}
			z := vram.Full(vram.Shape{1, 2, 7, 7}, 2, d)
			inCapture, resume := make(chan bool), make(chan struct{})
			var eagerErr error
			var got float64
			var eagerCapturing bool
			go func() {
				defer close(resume)
				<-inCapture
				eagerCapturing = vram.IsCurrentStreamCapturing(d)
				eagerErr = vram.Catch(func() { vram.Tidy(func() { got = tc.fn(z) }) })
			}()
			var y *vram.Tensor
			g, err := vram.CaptureGraph(d, func() {
				y = x.MulScalar(2)
				inCapture <- vram.IsCurrentStreamCapturing(d)
				<-resume
			})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Release()
			if eagerErr != nil || got != want {
				t.Fatalf("eager work during the capture: %v, %v; want %v", got, eagerErr, want)
			}
			if eagerCapturing {
				t.Error("IsCurrentStreamCapturing true in another goroutine")
			}
			memtest.Settle(d)
			before, zb := vram.Storage(d).LiveBytes, int64(4*z.NumElements())
			z.Release()
			if after := vram.Storage(d).LiveBytes; after != before-zb {
				t.Errorf("releasing a tensor only the eager work used: %d live bytes, want %d: the graph keeps it", after, before-zb)
			}
			if err := g.Replay(); err != nil {
				t.Fatal(err)
			}
			if v := y.Float32s(); v[0] != 4 {
				t.Fatalf("replay: %v, want 4", v[0])
			}
			y.Release()
		})
	}
	if vram.IsCurrentStreamCapturing(d) || vram.IsCurrentStreamCapturing(vram.CPU) {
		t.Error("IsCurrentStreamCapturing true outside a capture")
	}
	var inside bool
	g, err := vram.CaptureGraph(d, func() { inside = vram.IsCurrentStreamCapturing(d) })
	if err != nil || !inside {
		t.Fatalf("IsCurrentStreamCapturing in the capture: %v, %v", inside, err)
	}
	g.Release()
}

// TestGraphRefusedKeepsNothing checks that operations that make a tensor
// and then fail in a capture (a copy from the host refused) release it: a
// failed capture leaves the device's live, allocated and, after
// EmptyCache, reserved memory as they were, and a capture after it works.
func TestGraphRefusedKeepsNothing(t *testing.T) {
	d := vram.Sim(1)
	x := vram.Ones(vram.Shape{4, 4}).To(d)
	defer x.Release()
	cpu := vram.Ones(vram.Shape{64})
	defer cpu.Release()
	tests := []struct {
		name string
		fn   func()
	}{
		{"rand", func() { vram.Rand(vram.Shape{64}, d) }},
		{"randn", func() { vram.Randn(vram.Shape{64}, d) }},
		{"from slice", func() { vram.FromSlice(make([]float32, 64), vram.Shape{64}, d) }},
		{"arange", func() { vram.Arange(0, 64, 1, d) }},
		{"linspace", func() { vram.Linspace(0, 1, 64, d) }},
		{"to device", func() { cpu.To(d) }},
		{"dropout", func() { nn.NewDropout(0.5).Forward(x) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			memtest.Settle(d)
			vram.EmptyCache(d)
			live, alloc, reserved := vram.Storage(d).LiveBytes, vram.MemoryAllocated(d), vram.MemoryReserved(d)
			g, err := vram.CaptureGraph(d, tc.fn)
			if g != nil || !errors.Is(err, vram.ErrCapturing) {
				t.Fatalf("capture: %v; want an error wrapping ErrCapturing", err)
			}
			if got := vram.Storage(d).LiveBytes; got != live {
				t.Errorf("%d live bytes after the failed capture, %d before", got, live)
			}
			if got := vram.MemoryAllocated(d); got != alloc {
				t.Errorf("%d bytes allocated after the failed capture, %d before", got, alloc)
			}
			vram.EmptyCache(d)
			if got := vram.MemoryReserved(d); got != reserved {
				t.Errorf("%d bytes reserved after the failed capture and EmptyCache, %d before", got, reserved)
			}
			var y *vram.Tensor
			g, err = vram.CaptureGraph(d, func() { y = x.MulScalar(5) })
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Replay(); err != nil {
				t.Fatal(err)
			}
			if v := y.Float32s(); v[15] != 5 {
				t.Fatalf("the capture after: %v, want 5", v[15])
			}
			g.Release()
			y.Release()
			vram.EmptyCache(d)
			if got := vram.Storage(d).LiveBytes; got != live {
				t.Errorf("%d live bytes after a good capture and Release, %d before", got, live)
			}
			if got := vram.MemoryReserved(d); got != reserved {
				t.Errorf("%d bytes reserved after a good capture, Release and EmptyCache, %d before", got, reserved)
			}
		})
	}
}

// TestGraphCaptureUnderLoad captures and replays graphs on sim:0 while
// other goroutines run eager work, with constant tables and host reads, on
// sim:0 and sim:1, for the race detector: every capture succeeds, every
// eager result is right, and the replays compute what they recorded.
func TestGraphCaptureUnderLoad(t *testing.T) {
	d := vram.Sim(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, dev := range []vram.Device{vram.Sim(0), vram.Sim(1), vram.Sim(0), vram.Sim(1)} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			z := vram.Full(vram.Shape{1, 1, 6, 6}, 1, dev)
			defer z.Release()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var got float64
				if err := vram.Catch(func() { vram.Tidy(func() { got = vram.AdaptiveAvgPool2d(z, 4, 4).Sum().Item() }) }); err != nil || got != 16 {
					errs <- fmt.Errorf("eager work on %s during captures: %v, %v", dev, got, err)
					return
				}
			}
		}()
	}
	x := vram.Full(vram.Shape{1, 1, 6, 6}, 3, d)
	defer x.Release()
	for i := range 10 {
		var y *vram.Tensor
		g, err := vram.CaptureGraph(d, func() {
			vram.Tidy(func() { y = vram.Keep(vram.AdaptiveAvgPool2d(x.MulScalar(float64(i)), 3, 3)) })
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Replay(); err != nil {
			t.Fatal(err)
		}
		if v := y.Float32s(); v[0] != float32(3*i) {
			t.Fatalf("replay %d: %v, want %d", i, v[0], 3*i)
		}
		g.Release()
		y.Release()
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// ExampleIsCurrentStreamCapturing skips, in code shared between eager and
// captured steps, what a graph cannot record.
func ExampleIsCurrentStreamCapturing() {
	d := vram.Sim(0)
	x := vram.Full(vram.Shape{4}, 1, d)
	defer x.Release()
	step := func() {
		x.MulScalarInPlace(2)
		if !vram.IsCurrentStreamCapturing(d) {
			vram.Tidy(func() { fmt.Println("eager step, sum", x.Sum().Item()) })
		}
	}
	step()
	g, err := vram.CaptureGraph(d, step)
	if err != nil {
		panic(err)
	}
	defer g.Release()
	g.Replay()
	vram.Tidy(func() { fmt.Println("after a replay, sum", x.Sum().Item()) })
	// Output:
	// eager step, sum 8
	// after a replay, sum 16
}
