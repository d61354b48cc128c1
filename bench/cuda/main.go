// Command cuda benchmarks vram's CUDA backend on the GPU machine. It prints
// one JSON object a line ({"name", "value", "unit", "note"}); run.sh runs
// it and bench/torch_bench.py in one call and compare.py prints the ratios.
//
//	go build -trimpath -ldflags='-s -w' -o .gpu/vram-bench ./bench/cuda
//	.gpu/vram-bench [-only name,name] [-quick] [-lazy]
//
// -only resnet runs the ResNet-50 training step (bench/cuda/resnet.go) alone;
// -cpuprofile DIR also writes a CPU profile of 50 more steps of each mode
// (DIR/resnet50_MODE.pprof), for where the host's time goes. -lazy skips
// compiling every kernel module first: only the modules the benchmarks use
// compile, at first use (first-step figures then include those compiles).
// -gpuprofile runs one more step of each ResNet-50 mode between
// cuProfilerStart and cuProfilerStop, so that
// ncu --profile-from-start off --graph-profiling node measures the
// kernels of that step alone.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend"
	cb "github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/backend/sim"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

type result struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Note  string  `json:"note,omitempty"`
	// Vs names further PyTorch rows of the same measurement (another
	// optimizer, torch.compile) that compare.py prints this row against.
	Vs []string `json:"vs,omitempty"`
}

var (
	only  = flag.String("only", "", "comma-separated benchmark names (prefixes) to run")
	quick = flag.Bool("quick", false, "fewer repetitions")
	lazy  = flag.Bool("lazy", false, "compile kernel modules at first use, not all first")
	// cpuProfile names a folder for CPU profiles of the host's side of
	// the timed ResNet-50 steps, one file per mode, sampled at 2 kHz.
	cpuProfile = flag.String("cpuprofile", "", "folder for CPU profiles of the ResNet-50 steps")
	// gpuProfile brackets one more step of each ResNet-50 mode with
	// cuProfilerStart and cuProfilerStop, for a profiler started with
	// profiling from the start off (ncu --profile-from-start off).
	// cudnnLimits are the benchmark limits (CuDNNSettings.BenchmarkLimit)
	// that resnet_convs times the convolutions under.
	cudnnLimits = flag.String("cudnn-limits", "0", "comma-separated cuDNN benchmark limits for resnet_convs (0: the default, -1: all)")
	// convsDTypes names the dtypes resnet_convs times.
	convsDTypes = flag.String("convs-dtypes", "float32,bfloat16", "dtypes resnet_convs times")
	// cudnnLimit is the benchmark limit of the ResNet-50 steps.
	cudnnLimit = flag.Int("cudnn-limit", 0, "cuDNN benchmark limit of the ResNet-50 steps (0: the default, -1: all)")
	gpuProfile = flag.Bool("gpuprofile", false, "bracket one more ResNet-50 step of each mode for a GPU profiler")
	enc        = json.NewEncoder(os.Stdout)
)

func emit(name string, v float64, unit, note string) {
	enc.Encode(result{Name: name, Value: v, Unit: unit, Note: note})
}

// emitVs is emit with PyTorch rows besides the one of the same name to
// compare the value with.
func emitVs(name string, v float64, unit, note string, vs ...string) {
	enc.Encode(result{Name: name, Value: v, Unit: unit, Note: note, Vs: vs})
}

func want(name string) bool {
	if *only == "" {
		return true
	}
	for _, p := range strings.Split(*only, ",") {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "vram-bench:", err)
		os.Exit(1)
	}
}

// wallMs returns the median wall time of f in milliseconds, each run
// followed by a synchronize of d, over reps runs after three warm-ups.
func wallMs(d *cb.Device, reps int, f func()) float64 {
	for range 3 {
		f()
	}
	must(d.Synchronize())
	var ts []float64
	for range reps {
		t0 := time.Now()
		f()
		must(d.Synchronize())
		ts = append(ts, time.Since(t0).Seconds())
	}
	return median(ts) * 1000
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// gpuTime returns the median over reps of fn's device time, measured with
// events on the device's stream, after warm warm-up runs.
func gpuTime(d *cb.Device, warm, reps int, fn func()) time.Duration {
	for range warm {
		fn()
	}
	must(d.Synchronize())
	var start, end cuda.Event
	must(d.Context().Do(func() error {
		var err error
		if start, err = cuda.EventCreate(cuda.EventDefault); err != nil {
			return err
		}
		end, err = cuda.EventCreate(cuda.EventDefault)
		return err
	}))
	var ts []float64
	for range reps {
		must(d.Context().Do(func() error { return cuda.EventRecord(start, d.Stream()) }))
		fn()
		must(d.Context().Do(func() error { return cuda.EventRecord(end, d.Stream()) }))
		must(d.Synchronize())
		var el time.Duration
		must(d.Context().Do(func() error {
			var err error
			el, err = cuda.EventElapsedTime(start, end)
			return err
		}))
		ts = append(ts, float64(el))
	}
	return time.Duration(median(ts))
}

// parseLimits reads -cudnn-limits.
func parseLimits(v string) []int {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		must(err)
		out = append(out, n)
	}
	return out
}

func view(d backend.Device, dt backend.DType, shape ...int) backend.View {
	n := backend.NumElements(shape)
	b, err := d.Alloc(int64(n*dt.Size()), d.DefaultStream(), "bench")
	must(err)
	return backend.View{Buf: b, DType: dt, Shape: shape, Strides: backend.ContiguousStrides(shape)}
}

func main() {
	flag.Parse()
	d, err := cb.Open(0)
	must(err)
	if !*lazy {
		start := time.Now()
		must(d.Precompile())
		fmt.Fprintf(os.Stderr, "%s sm_%d: kernels ready in %v\n", d.Name(), d.ComputeCapability(), time.Since(start))
	}
	reps := 20
	if *quick {
		reps = 5
	}

	if want("alloc_free") {
		benchAllocFree(d)
	}
	if want("thread") {
		benchThreads(d)
	}
	if want("copy") {
		benchCopies(d, reps)
		benchPeer(reps)
	}
	if want("ewise") {
		benchElementwise(d, reps)
	}
	if want("gemm") {
		benchGEMM(d, reps)
	}
	if want("tiny") {
		benchTiny(d)
	}
	if want("mlp") {
		benchMLP(reps)
	}
	if want("overlap") {
		benchOverlap(reps)
	}
	if want("ddp") {
		benchDDP(reps)
	}
	if want("amp") {
		benchAmp(reps)
	}
	if want("ckpt") {
		benchCheckpoint(reps)
	}
	if want("findbatch") {
		benchFindBatch()
	}
	if want("int8") {
		benchInt8(reps)
	}
	if want("allreduce") {
		benchAllReduce(reps)
	}
	if want("conv") {
		benchConv(d, reps)
	}
	if want("pool") {
		benchPool(d)
	}
	if want("resnet_convs") {
		benchResNetConvs(d, parseLimits(*cudnnLimits))
	}
	if wantResNet() {
		benchResNet(reps)
	}
}

func benchAllocFree(d *cb.Device) {
	sd, err := (&sim.Backend{}).Device(0)
	must(err)
	// Shape-only: the sim device then keeps no host copy of the data, so
	// both sides time the caching allocator alone.
	must(sd.(*sim.Device).SetShapeOnly(true))
	var s backend.Device = sd
	for _, c := range []struct {
		name string
		dev  backend.Device
	}{{"cuda", d}, {"sim", s}} {
		st := c.dev.DefaultStream()
		b, _ := c.dev.Alloc(1<<20, st, "")
		c.dev.Free(b, st)
		const n = 200000
		var ts []float64
		for range 5 {
			t0 := time.Now()
			for range n {
				b, err := c.dev.Alloc(1<<20, st, "")
				if err != nil {
					must(err)
				}
				c.dev.Free(b, st)
			}
			ts = append(ts, float64(time.Since(t0).Nanoseconds())/n)
		}
		emit("alloc_free_1MiB_"+c.name, median(ts)/1000, "us", "cached Alloc+Free through the caching allocator (sim: shape-only)")
	}
}

// benchThreads compares the per-op cost of the two thread disciplines: a
// direct call (LockOSThread + cuCtxSetCurrent on the caller's goroutine)
// and a hop to a goroutine locked to the device.
func benchThreads(d *cb.Device) {
	const n = 100000
	x := view(d, backend.Float32, 1)
	must(d.Fill(d.DefaultStream(), x, 0))
	must(d.Synchronize())
	t0 := time.Now()
	for range n {
		must(d.Context().Do(func() error { return nil }))
	}
	emit("thread_ctx_set_current", float64(time.Since(t0).Nanoseconds())/n/1000, "us", "LockOSThread + cuCtxSetCurrent + unlock")
	op := func() { must(d.Scalar(d.DefaultStream(), backend.Add, x, x, 1, false)) }
	for range 1000 {
		op()
	}
	must(d.Synchronize())
	t0 = time.Now()
	for range n {
		op()
	}
	must(d.Synchronize())
	emit("thread_direct_op", float64(time.Since(t0).Nanoseconds())/n/1000, "us", "x.add_(1) on 1 element, direct call")
	req := make(chan struct{})
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		for range req {
			op()
			done <- struct{}{}
		}
	}()
	for range 1000 {
		req <- struct{}{}
		<-done
	}
	t0 = time.Now()
	for range n {
		req <- struct{}{}
		<-done
	}
	must(d.Synchronize())
	close(req)
	emit("thread_channel_op", float64(time.Since(t0).Nanoseconds())/n/1000, "us", "same op through a goroutine locked to the device")
}

func benchCopies(d *cb.Device, reps int) {
	const n = 1 << 30
	dv := view(d, backend.Bool, n)
	pinned, err := d.AllocHost(n)
	must(err)
	for i := range pinned {
		pinned[i] = byte(i)
	}
	pageable := make([]byte, n)
	copy(pageable, pinned)
	wall := func(fn func()) float64 {
		fn()
		var ts []float64
		for range max(3, reps/4) {
			t0 := time.Now()
			fn()
			ts = append(ts, time.Since(t0).Seconds())
		}
		return median(ts)
	}
	emit("copy_h2d_1GiB_pinned", n/wall(func() { must(d.CopyFromHost(d.DefaultStream(), dv, pinned)) })/1e9, "GB/s", "CopyFromHost from AllocHost memory")
	emit("copy_d2h_1GiB_pinned", n/wall(func() { must(d.CopyToHost(d.DefaultStream(), pinned, dv)) })/1e9, "GB/s", "CopyToHost into AllocHost memory")
	emit("copy_h2d_1GiB_pageable", n/wall(func() { must(d.CopyFromHost(d.DefaultStream(), dv, pageable)); must(d.Synchronize()) })/1e9, "GB/s", "staged through pinned buffers")
	emit("copy_d2h_1GiB_pageable", n/wall(func() { must(d.CopyToHost(d.DefaultStream(), pageable, dv)) })/1e9, "GB/s", "staged through pinned buffers")
	must(d.FreeHost(pinned))
	dv2 := view(d, backend.Bool, n)
	t := gpuTime(d, 3, reps, func() { must(d.Copy(d.DefaultStream(), dv2, dv)) })
	emit("copy_d2d_1GiB", 2*n/t.Seconds()/1e12, "TB/s", "bytes read + written")
	d.Free(dv.Buf, nil)
	d.Free(dv2.Buf, nil)
}

func benchElementwise(d *cb.Device, reps int) {
	const n = 1 << 28
	a, b, c := view(d, backend.Float32, n), view(d, backend.Float32, n), view(d, backend.Float32, n)
	must(d.Fill(d.DefaultStream(), a, 1.5))
	must(d.Fill(d.DefaultStream(), b, -0.25))
	t := gpuTime(d, 3, reps, func() { must(d.Binary(d.DefaultStream(), backend.Add, c, a, b)) })
	emit("ewise_add_2p28_f32", 3*4*n/t.Seconds()/1e12, "TB/s", "c = a + b, bytes read + written")
	t = gpuTime(d, 3, reps, func() { must(d.Unary(d.DefaultStream(), backend.Gelu, c, a, 0)) })
	emit("ewise_gelu_2p28_f32", 2*4*n/t.Seconds()/1e12, "TB/s", "exact gelu, computed in float")
	t = gpuTime(d, 3, reps, func() { must(d.Scalar(d.DefaultStream(), backend.Mul, a, a, 1.0000001, false)) })
	emit("ewise_mul_scalar_inplace_2p28_f32", 2*4*n/t.Seconds()/1e12, "TB/s", "a *= s")
	// Fused elementwise: a bias of 4096 along every row plus an activation,
	// one kernel (PyTorch eager: x + b, then the activation).
	const width = 4096
	x2, o2, bias := a, c, b
	x2.Shape, x2.Strides = []int{n / width, width}, []int{width, 1}
	o2.Shape, o2.Strides = x2.Shape, x2.Strides
	bias.Shape, bias.Strides = x2.Shape, []int{0, 1}
	for _, f := range []struct {
		name string
		op   backend.BinaryOp
	}{{"ewise_bias_gelu_2p28_f32", backend.AddGelu}, {"ewise_bias_relu_2p28_f32", backend.AddRelu}} {
		t = gpuTime(d, 3, reps, func() { must(d.Binary(d.DefaultStream(), f.op, o2, x2, bias)) })
		emit(f.name, 2*4*n/t.Seconds()/1e12, "TB/s", "act(x + bias), bias [4096] on every row, one kernel; bytes of x read + out written")
	}
	bt := b
	bt.Shape, bt.Strides = []int{1 << 14, 1 << 14}, []int{1, 1 << 14}
	ct := c
	ct.Shape, ct.Strides = []int{1 << 14, 1 << 14}, []int{1 << 14, 1}
	at := a
	at.Shape, at.Strides = ct.Shape, ct.Strides
	t = gpuTime(d, 3, reps, func() { must(d.Binary(d.DefaultStream(), backend.Add, ct, at, bt)) })
	emit("ewise_add_transposed_2p28_f32", 3*4*n/t.Seconds()/1e12, "TB/s", "c = a + b.T (16384^2), tiled kernel")
	t = gpuTime(d, 3, reps, func() { must(d.Copy(d.DefaultStream(), ct, bt)) })
	emit("ewise_copy_transposed_2p28_f32", 2*4*n/t.Seconds()/1e12, "TB/s", "c = b.T made contiguous (16384^2), tiled kernel")
	s := view(d, backend.Float32, 1)
	t = gpuTime(d, 3, reps, func() {
		must(d.Reduce(d.DefaultStream(), backend.Sum, backend.View{Buf: s.Buf, DType: backend.Float32, Shape: []int{1}, Strides: []int{1}}, a, []int{0}))
	})
	emit("reduce_sum_2p28_f32", 4*n/t.Seconds()/1e12, "TB/s", "sum of all elements")
	for _, v := range []backend.View{a, b, c, s} {
		d.Free(v.Buf, nil)
	}
}

func benchGEMM(d *cb.Device, reps int) {
	const n = 8192
	for _, c := range []struct {
		name string
		dt   backend.DType
		tf32 bool
	}{{"gemm_8192_bf16", backend.BFloat16, false}, {"gemm_8192_f32_tf32", backend.Float32, true}, {"gemm_8192_f32", backend.Float32, false}} {
		if !want(c.name) {
			continue
		}
		cb.SetAllowTF32(c.tf32)
		a, b, o := view(d, c.dt, 1, n, n), view(d, c.dt, 1, n, n), view(d, c.dt, 1, n, n)
		tmp := view(d, backend.Float32, n*n)
		host := make([]float32, n*n)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range host {
			host[i] = float32(r.NormFloat64())
		}
		must(d.CopyFromHost(d.DefaultStream(), tmp, unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host))))
		x := tmp
		x.Shape, x.Strides = []int{n, n}, []int{n, 1}
		for _, v := range []backend.View{a, b} {
			vv := v
			vv.Shape, vv.Strides = []int{n, n}, []int{n, 1}
			must(d.Copy(d.DefaultStream(), vv, x))
		}
		reps := reps
		if c.dt == backend.Float32 && !c.tf32 {
			reps = max(3, reps/4)
		}
		t := gpuTime(d, 2, reps, func() { must(d.MatMul(d.DefaultStream(), o, a, b)) })
		emit(c.name, 2*float64(n)*n*n/t.Seconds()/1e12, "TFLOP/s", "")
		for _, v := range []backend.View{a, b, o, tmp} {
			d.Free(v.Buf, nil)
		}
	}
	cb.SetAllowTF32(false)
}

// benchTiny measures the host overhead of one tiny op, launch to launch,
// through the root package as a user writes it.
func benchTiny(d *cb.Device) {
	const n = 100000
	x := vram.Ones(vram.Shape{1}, vram.CUDA(0))
	for range 1000 {
		x.AddScalar(1).Release()
	}
	must(d.Synchronize())
	t0 := time.Now()
	for range n {
		x.AddScalar(1).Release()
	}
	must(d.Synchronize())
	emit("tiny_x_plus_1", float64(time.Since(t0).Nanoseconds())/n/1000, "us", "y := x.AddScalar(1); y.Release(), 1 element")
	t0 = time.Now()
	for range n {
		x.AddScalarInPlace(1)
	}
	must(d.Synchronize())
	emit("tiny_x_add_inplace", float64(time.Since(t0).Nanoseconds())/n/1000, "us", "x.AddScalarInPlace(1), 1 element")
	x.Release()
}

// benchMLP times one training step of 4 Linear layers of width 4096 with
// ReLU, batch 1024, MSE loss and AdamW, in float32 with TF32 off.
func benchMLP(reps int) {
	const width, batch = 4096, 1024
	dev := vram.CUDA(0)
	g := vram.NewGenerator(1)
	var mods []nn.Module
	for i := range 4 {
		mods = append(mods, nn.NewLinear(width, width, vram.WithGenerator(g)))
		if i < 3 {
			mods = append(mods, nn.NewReLU())
		}
	}
	model := nn.NewSequential(mods...)
	model.To(dev)
	opt, err := optim.NewAdamW(model.Parameters(), optim.AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
	must(err)
	x := vram.Randn(vram.Shape{batch, width}, vram.WithGenerator(g), dev)
	y := vram.Randn(vram.Shape{batch, width}, vram.WithGenerator(g), dev)
	d, _ := cb.Open(0)
	step := func() {
		vram.Tidy(func() {
			loss := nn.MSELoss(model.Forward(x), y)
			loss.Backward()
			opt.Step()
			opt.ZeroGrad()
		})
	}
	// The step's parts: the forward pass with the loss (graph recorded,
	// then dropped), forward and backward, and the whole step.
	fwd := func() {
		vram.Tidy(func() { nn.MSELoss(model.Forward(x), y) })
	}
	fwdBwd := func() {
		vram.Tidy(func() {
			nn.MSELoss(model.Forward(x), y).Backward()
			opt.ZeroGrad()
		})
	}
	timeIt := func(f func()) float64 { return wallMs(d, max(5, reps/2), f) }
	emit("mlp_fwd_f32", timeIt(fwd), "ms", "forward and loss")
	emit("mlp_fwdbwd_f32", timeIt(fwdBwd), "ms", "forward, loss and backward")
	emit("mlp_step_f32", timeIt(step), "ms", "4x Linear(4096) + ReLU, batch 1024, MSE, AdamW, TF32 off")
	st := vram.MemoryStats(dev)
	emit("mlp_peak_reserved", float64(st.ReservedBytes[0].Peak)/(1<<30), "GiB", "allocator reserve peak")
}
