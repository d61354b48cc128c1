package vram_test

import (
	"math"
	"os"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// GPU tests of the root package: they skip without a GPU, and fail instead
// when VRAM_REQUIRE_CUDA=1.

func requireCUDA(t *testing.T, n int) {
	t.Helper()
	if vram.DeviceCount() >= n {
		return
	}
	if n == 1 && os.Getenv("VRAM_REQUIRE_CUDA") == "1" {
		t.Fatalf("no CUDA device")
	}
	t.Skipf("needs %d CUDA devices, have %d", n, vram.DeviceCount())
}

func closeSlices(t *testing.T, what string, got, want []float32, rtol, atol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) || math.Abs(g-w) > atol+rtol*math.Abs(w) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, g, w)
		}
	}
}

func TestCUDATensorsMoveAndCompute(t *testing.T) {
	requireCUDA(t, 1)
	x := vram.FromSlice([]float32{1, -2, 3, -4, 5, -6}, vram.Shape{2, 3})
	defer x.Release()
	g := x.CUDA(0)
	defer g.Release()
	if g.Device() != vram.CUDA(0) {
		t.Fatalf("device %v", g.Device())
	}
	y := g.Relu().Add(g.MulScalar(2)).Sum(1)
	defer y.Release()
	back := y.CPU()
	defer back.Release()
	closeSlices(t, "relu(x)+2x summed", back.Float32s(), []float32{3 - 4 + 9, -8 + 15 - 12}, 0, 0)
	z := vram.Zeros(vram.Shape{3, 4}, vram.CUDA(0))
	defer z.Release()
	if s := z.Sum().Item(); s != 0 {
		t.Errorf("sum of zeros on the GPU: %v", s)
	}
}

// mlp builds the same small MLP (same seed) on device d.
func mlp(d vram.Device) *nn.Sequential {
	g := vram.NewGenerator(7)
	m := nn.NewSequential(
		nn.NewLinear(16, 32, vram.WithGenerator(g)),
		nn.NewReLU(),
		nn.NewLinear(32, 8, vram.WithGenerator(g)),
	)
	m.To(d)
	return m
}

func TestCUDAMLPStepMatchesCPU(t *testing.T) {
	requireCUDA(t, 1)
	gen := vram.NewGenerator(3)
	x := vram.Randn(vram.Shape{64, 16}, vram.WithGenerator(gen))
	y := vram.Randn(vram.Shape{64, 8}, vram.WithGenerator(gen))
	defer x.Release()
	defer y.Release()
	var losses [2]float64
	var params [2][][]float32
	for i, d := range []vram.Device{vram.CPU, vram.CUDA(0)} {
		m := mlp(d)
		opt, err := optim.NewAdamW(m.Parameters(), optim.AdamConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
		if err != nil {
			t.Fatal(err)
		}
		vram.Tidy(func() {
			xd, yd := x.To(d), y.To(d)
			loss := nn.MSELoss(m.Forward(xd), yd)
			loss.Backward()
			losses[i] = loss.Item()
			opt.Step()
		})
		for _, p := range m.Parameters() {
			c := p.CPU()
			params[i] = append(params[i], c.Float32s())
			c.Release()
		}
		opt.Release()
	}
	if math.Abs(losses[0]-losses[1]) > 1e-5*math.Abs(losses[0]) {
		t.Errorf("loss: CPU %v, GPU %v", losses[0], losses[1])
	}
	for j := range params[0] {
		closeSlices(t, "parameter after one AdamW step", params[1][j], params[0][j], 1e-4, 1e-5)
	}
}

func TestCUDAGradientsAcrossGPUs(t *testing.T) {
	requireCUDA(t, 2)
	gen := vram.NewGenerator(5)
	w0c := vram.Randn(vram.Shape{8, 8}, vram.WithGenerator(gen))
	w1c := vram.Randn(vram.Shape{8, 4}, vram.WithGenerator(gen))
	x := vram.Randn(vram.Shape{3, 8}, vram.WithGenerator(gen))
	grads := map[string][]float32{}
	for _, split := range []bool{false, true} {
		d0, d1 := vram.CPU, vram.CPU
		if split {
			d0, d1 = vram.CUDA(0), vram.CUDA(1)
		}
		w0 := w0c.To(d0).Detach()
		w0.SetRequiresGrad(true)
		w1 := w1c.To(d1).Detach()
		w1.SetRequiresGrad(true)
		vram.Tidy(func() {
			h := x.To(d0).MatMul(w0).Tanh().To(d1)
			h.MatMul(w1).Square().Sum().Backward()
		})
		key := "cpu"
		if split {
			key = "gpu"
			if w0.Grad().Device() != vram.CUDA(0) || w1.Grad().Device() != vram.CUDA(1) {
				t.Errorf("gradients on %v and %v", w0.Grad().Device(), w1.Grad().Device())
			}
		}
		g0, g1 := w0.Grad().CPU(), w1.Grad().CPU()
		grads[key+"0"], grads[key+"1"] = g0.Float32s(), g1.Float32s()
		g0.Release()
		g1.Release()
		w0.Release()
		w1.Release()
	}
	closeSlices(t, "gradient of w0 (cuda:0)", grads["gpu0"], grads["cpu0"], 1e-4, 1e-5)
	closeSlices(t, "gradient of w1 (cuda:1)", grads["gpu1"], grads["cpu1"], 1e-4, 1e-5)
}

func TestCUDADeviceMemoryBreakdown(t *testing.T) {
	requireCUDA(t, 1)
	dev := vram.CUDA(0)
	x := vram.Empty(vram.Shape{256 << 20}, dev) // 1 GiB
	defer func() { x.Release(); vram.EmptyCache(dev) }()
	m, err := vram.DeviceMemory(dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(m)
	used := m.Used()
	if m.Device != "cuda:0" || m.Reserved < 1<<30 || used < m.Reserved || m.Total <= used {
		t.Fatalf("breakdown: %+v", m)
	}
	sum := m.Reserved + m.Unattributed() + max(m.ProcessOther(), 0) + max(m.OtherProcesses(), 0)
	if sum != used {
		t.Fatalf("parts add to %d, used is %d: %+v", sum, used, m)
	}
	if m.ProcessOther() < 0 {
		t.Log("NVML does not list this process: its context and libraries count as unattributed")
	} else if m.ProcessOther() == 0 {
		t.Errorf("this process's context and libraries should show as its other memory: %+v", m)
	}
}

// TestCUDALinearActMatchesCPU runs the fused linear layer (cuBLASLt's bias
// and ReLU epilogues, the bias gradient from the weight-gradient product)
// and BiasAct on the GPU, forward and backward, against the CPU.
func TestCUDALinearActMatchesCPU(t *testing.T) {
	requireCUDA(t, 1)
	gen := vram.NewGenerator(11)
	for _, sh := range [][3]int{{37, 48, 24}, {256, 512, 384}} {
		rows, in, out := sh[0], sh[1], sh[2]
		x := vram.Randn(vram.Shape{rows, in}, vram.WithGenerator(gen))
		w := vram.Randn(vram.Shape{out, in}, vram.WithGenerator(gen))
		b := vram.Randn(vram.Shape{out}, vram.WithGenerator(gen))
		r := vram.Randn(vram.Shape{rows, out}, vram.WithGenerator(gen))
		for _, act := range []vram.Activation{vram.ActNone, vram.ActReLU, vram.ActGELU} {
			for _, withBias := range []bool{true, false} {
				var ys, gx, gw, gb [2][]float32
				for i, d := range []vram.Device{vram.CPU, vram.CUDA(0)} {
					vram.Tidy(func() {
						xd, wd, bd, rd := x.To(d), w.To(d), b.To(d), r.To(d)
						for _, p := range []*vram.Tensor{xd, wd, bd} {
							p.SetRequiresGrad(true)
						}
						bias := bd
						if !withBias {
							bias = nil
						}
						y := vram.LinearAct(xd, wd, bias, act)
						y.Mul(rd).Sum().Backward()
						ys[i] = y.CPU().Float32s()
						gx[i], gw[i] = xd.Grad().CPU().Float32s(), wd.Grad().CPU().Float32s()
						if withBias {
							gb[i] = bd.Grad().CPU().Float32s()
						}
					})
				}
				// Products of in terms of size ~1: tolerance grows with in.
				tol := 2e-5 * float64(in)
				what := func(s string) string { return s + " " + act.String() }
				closeSlices(t, what("output"), ys[1], ys[0], 1e-4, tol)
				closeSlices(t, what("input gradient"), gx[1], gx[0], 1e-4, tol)
				closeSlices(t, what("weight gradient"), gw[1], gw[0], 1e-4, 2e-5*float64(rows))
				if withBias {
					closeSlices(t, what("bias gradient"), gb[1], gb[0], 1e-4, 2e-5*float64(rows))
				}
			}
			// BiasAct on the product's shape.
			var bo [2][]float32
			for i, d := range []vram.Device{vram.CPU, vram.CUDA(0)} {
				vram.Tidy(func() {
					pre := r.To(d)
					bo[i] = vram.BiasAct(pre, b.To(d), act).CPU().Float32s()
				})
			}
			closeSlices(t, "bias_act "+act.String(), bo[1], bo[0], 1e-5, 1e-6)
		}
	}
}

// TestCUDALinearAcrossGPUs splits a model of fused linear layers over two
// GPUs (model parallelism) and compares its gradients with the CPU's.
func TestCUDALinearAcrossGPUs(t *testing.T) {
	requireCUDA(t, 2)
	x := vram.Randn(vram.Shape{16, 32}, vram.WithGenerator(vram.NewGenerator(9)))
	defer x.Release()
	var grads [2][][]float32
	for i, devs := range [][2]vram.Device{{vram.CPU, vram.CPU}, {vram.CUDA(0), vram.CUDA(1)}} {
		g := vram.NewGenerator(4)
		s0 := nn.NewSequential(nn.NewLinear(32, 64, vram.WithGenerator(g)), nn.NewReLU())
		s1 := nn.NewSequential(nn.NewLinear(64, 64, vram.WithGenerator(g)), nn.NewGELU(), nn.NewLinear(64, 8, vram.WithGenerator(g)))
		s0.To(devs[0])
		s1.To(devs[1])
		vram.Tidy(func() {
			h := s0.Forward(x.To(devs[0])).To(devs[1])
			s1.Forward(h).Square().Mean().Backward()
		})
		for _, p := range append(s0.Parameters(), s1.Parameters()...) {
			c := p.Grad().CPU()
			grads[i] = append(grads[i], c.Float32s())
			c.Release()
		}
	}
	for j := range grads[0] {
		closeSlices(t, "gradient across two GPUs", grads[1][j], grads[0][j], 1e-4, 1e-5)
	}
}

// TestCUDASGDMatchesCPU runs optim.SGD with momentum, dampening, weight
// decay and Nesterov (the fused step on the GPU) against the CPU's
// composed step, for three steps.
func TestCUDASGDMatchesCPU(t *testing.T) {
	requireCUDA(t, 1)
	gen := vram.NewGenerator(13)
	x := vram.Randn(vram.Shape{32, 16}, vram.WithGenerator(gen))
	y := vram.Randn(vram.Shape{32, 8}, vram.WithGenerator(gen))
	defer x.Release()
	defer y.Release()
	for _, cfg := range []optim.SGDConfig{
		{LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.01},
		{LR: 0.05, Momentum: 0.9, WeightDecay: 0.01, Nesterov: true},
		{LR: 0.1},
	} {
		var params [2][][]float32
		for i, d := range []vram.Device{vram.CPU, vram.CUDA(0)} {
			m := mlp(d)
			opt, err := optim.NewSGD(m.Parameters(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				vram.Tidy(func() {
					nn.MSELoss(m.Forward(x.To(d)), y.To(d)).Backward()
					opt.Step()
					opt.ZeroGrad()
				})
			}
			for _, p := range m.Parameters() {
				c := p.CPU()
				params[i] = append(params[i], c.Float32s())
				c.Release()
			}
			opt.Release()
		}
		for j := range params[0] {
			closeSlices(t, "parameter after three SGD steps", params[1][j], params[0][j], 1e-4, 1e-5)
		}
	}
}

// TestCUDAHalfNumerics runs the 16-bit numerics suite (numerics_test.go)
// on the GPU: means, variances, softmax, losses and norms of float16 and
// bfloat16 at sizes where 16-bit intermediates overflow or stall.
func TestCUDAHalfNumerics(t *testing.T) {
	requireCUDA(t, 1)
	runNumerics(t, vram.CUDA(0))
}

// TestCUDAHalfOptimizersMatchSim trains float16 and bfloat16 parameters
// with tiny gradients (whose squares vanish in float16) for three steps of
// Adam, AdamW and SGD with momentum on the GPU (fused kernels) and on a
// sim device (the CPU's fused steps), which must agree and stay finite.
func TestCUDAHalfOptimizersMatchSim(t *testing.T) {
	requireCUDA(t, 1)
	if vram.SimDeviceCount() == 0 {
		t.Skip("no sim device")
	}
	for _, dt := range []vram.DType{vram.Float16, vram.BFloat16} {
		for _, name := range []string{"adam", "adamw", "sgd"} {
			var params [2][]float32
			for i, d := range []vram.Device{vram.Sim(0), vram.CUDA(0)} {
				params[i] = halfOptimizerRun(t, d, dt, name)
			}
			for j, want := range params[0] {
				if got := params[1][j]; got != want && !(math.Abs(float64(got-want)) <= relTol(dt)*math.Abs(float64(want))+tiny(dt)) {
					t.Fatalf("%s %s: element %d: GPU %v, sim %v", dt, name, j, got, want)
				}
			}
		}
	}
}

// TestCUDAEdgeCasesMatchCPU runs on a GPU the edge cases the CPU tests pin
// (dims of 0-d tensors, empty softmax, Cat of channels-last inputs, Clone
// of a transposed matrix, in-place ops from overlapping views) and checks
// values and layouts against the CPU.
func TestCUDAEdgeCasesMatchCPU(t *testing.T) {
	requireCUDA(t, 1)
	cases := []struct {
		name string
		fn   func(d vram.Device) *vram.Tensor
	}{
		{"Softmax of 0-d", func(d vram.Device) *vram.Tensor { return vram.Scalar(2.5, d).Softmax(0) }},
		{"LogSoftmax of 0-d", func(d vram.Device) *vram.Tensor { return vram.Scalar(2.5, d).LogSoftmax(-1) }},
		{"ArgMax of 0-d", func(d vram.Device) *vram.Tensor { return vram.Scalar(2.5, d).ArgMax(0, true).Float() }},
		{"Gather of 0-d", func(d vram.Device) *vram.Tensor {
			return vram.Scalar(2.5, d).Gather(0, vram.Scalar(0, d, vram.Int64))
		}},
		{"Softmax of empty", func(d vram.Device) *vram.Tensor { return vram.Ones(vram.Shape{0, 3}, d).Softmax(0) }},
		{"Cat of channels-last", func(d vram.Device) *vram.Tensor {
			x := vram.Arange(0, 120, 1, d).Reshape(2, 3, 4, 5).Contiguous(vram.ChannelsLast)
			return vram.Cat([]*vram.Tensor{x, x.MulScalar(2)}, 1)
		}},
		{"Clone of a transpose", func(d vram.Device) *vram.Tensor { return vram.Arange(0, 12, 1, d).Reshape(3, 4).T().Clone() }},
		{"add_ from a shifted view", func(d vram.Device) *vram.Tensor {
			a := vram.Arange(0, 64, 1, d)
			a.Narrow(0, 1, 63).AddInPlace(a.Narrow(0, 0, 63))
			return a
		}},
		{"copy_ from a transpose", func(d vram.Device) *vram.Tensor {
			m := vram.Arange(0, 64, 1, d).Reshape(8, 8)
			m.CopyFrom(m.T())
			return m
		}},
	}
	for _, tc := range cases {
		var got, want *vram.Tensor
		if err := vram.Catch(func() { got, want = tc.fn(vram.CUDA(0)), tc.fn(vram.CPU) }); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(got.Shape(), want.Shape()) || !slices.Equal(got.Strides(), want.Strides()) {
			t.Errorf("%s: shape %v strides %v on the GPU, %v %v on the CPU", tc.name, got.Shape(), got.Strides(), want.Shape(), want.Strides())
		}
		closeSlices(t, tc.name, got.CPU().Float32s(), want.Float32s(), 1e-6, 1e-6)
	}
}

// TestCUDACopyFromAcrossDevices: copy_ into a GPU tensor from the CPU or
// another GPU, and out of one, converting dtypes and broadcasting.
func TestCUDACopyFromAcrossDevices(t *testing.T) {
	requireCUDA(t, 1)
	type pair struct {
		name     string
		dst, src vram.Device
	}
	cases := []pair{{"cpu to cuda:0", vram.CUDA(0), vram.CPU}, {"cuda:0 to cpu", vram.CPU, vram.CUDA(0)}}
	if vram.DeviceCount() >= 2 {
		cases = append(cases, pair{"cuda:1 to cuda:0", vram.CUDA(0), vram.CUDA(1)})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := vram.Zeros(vram.Shape{2, 3}, c.dst)
			defer dst.Release()
			src := vram.FromSlice([]float64{1.5, -2, 3}, nil, c.src)
			defer src.Release()
			dst.CopyFrom(src)
			if got, want := dst.Float32s(), []float32{1.5, -2, 3, 1.5, -2, 3}; !slices.Equal(got, want) {
				t.Errorf("dst holds %v, want %v", got, want)
			}
		})
	}
}

// TestCUDADeviceGenerator: draws on a GPU come from its own generator,
// which ManualSeed seeds: they repeat after the seed whatever the CPU
// draws in between.
func TestCUDADeviceGenerator(t *testing.T) {
	requireCUDA(t, 1)
	defer vram.ManualSeed(0)
	vram.ManualSeed(3)
	a := vram.Rand(vram.Shape{8}, vram.CUDA(0))
	defer a.Release()
	vram.ManualSeed(3)
	vram.Rand(vram.Shape{5}).Release()
	b := vram.Rand(vram.Shape{8}, vram.CUDA(0))
	defer b.Release()
	if !slices.Equal(a.Float32s(), b.Float32s()) {
		t.Errorf("after ManualSeed(3) cuda:0 drew %v, then %v", a.Float32s(), b.Float32s())
	}
}
