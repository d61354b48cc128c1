package vram_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/models"
)

// TestCUDAGraphTrainingStep replays a captured training step of a small
// model on the GPU (a CUDA graph) and checks it against eager steps.
func TestCUDAGraphTrainingStep(t *testing.T) {
	requireCUDA(t, 1)
	d := vram.CUDA(0)
	eager, graphed := newTrainer(t, d), newTrainer(t, d)
	eager.step()
	graphed.step()
	g, err := vram.CaptureGraph(d, graphed.step)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	t.Logf("%d nodes", g.Nodes())
	for i := range 5 {
		eager.step()
		if err := g.Replay(); err != nil {
			t.Fatal(err)
		}
		if a, b := eager.loss.Item(), graphed.loss.Item(); !graphNear(a, b, 1e-5) {
			t.Fatalf("step %d: loss %v eager, %v replayed", i, a, b)
		}
	}
	ep, gp := eager.params(), graphed.params()
	for i := range ep {
		for j := range ep[i] {
			if !graphNear(float64(ep[i][j]), float64(gp[i][j]), 1e-5) {
				t.Fatalf("parameter %d[%d]: %v eager, %v replayed", i, j, ep[i][j], gp[i][j])
			}
		}
	}
}

func graphNear(a, b, tol float64) bool {
	return a == b || (a-b)*(a-b) <= tol*tol*max(1, a*a, b*b)
}

// TestCUDAGraphRefusals checks that work a CUDA graph cannot record fails
// with ErrCapturing before it reaches the driver, and that the device
// works after.
func TestCUDAGraphRefusals(t *testing.T) {
	requireCUDA(t, 1)
	d := vram.CUDA(0)
	x := vram.Ones(vram.Shape{4}, d)
	for name, fn := range map[string]func(){
		"item":     func() { x.MulScalar(2).Sum().Item() },
		"to cpu":   func() { x.AddScalar(1).To(vram.CPU) },
		"from cpu": func() { vram.Ones(vram.Shape{3}).To(d) },
		"random":   func() { vram.Rand(vram.Shape{3}, d) },
		"synchronize": func() {
			if err := vram.Synchronize(d); err != nil {
				panic(err)
			}
		},
	} {
		g, err := vram.CaptureGraph(d, fn)
		if g != nil || !errors.Is(err, vram.ErrCapturing) {
			t.Errorf("%s: got %v, %v; want an error wrapping ErrCapturing", name, g, err)
		}
		if got := x.MulScalar(3).Sum().Item(); got != 12 {
			t.Fatalf("%s: after the refused capture: %v, want 12", name, got)
		}
	}
}

// TestCUDAGraphResNet replays a captured ResNet-18 training step (cuDNN
// convolutions, vram's batch-norm kernels, the fused SGD step) in the four
// modes of the ResNet benchmark and checks it against eager steps.
func TestCUDAGraphResNet(t *testing.T) {
	requireCUDA(t, 1)
	mk := func() nn.Module {
		return models.ResNet18(models.Config{NumClasses: 10}, vram.WithGenerator(vram.NewGenerator(1)))
	}
	for _, cl := range []bool{false, true} {
		for _, bf := range []bool{false, true} {
			tol := 1e-4
			if bf {
				tol = 2e-2
			}
			cnnGraphCheck(t, vram.CUDA(0), mk, cl, bf, tol)
		}
	}
}

// TestCUDAGraphComposed captures the small CNN's step with cuDNN turned
// off: convolutions and pooling are composed, and their gather tables are
// written at capture time (backend.ConstantWriter) for the replays to
// read.
func TestCUDAGraphComposed(t *testing.T) {
	requireCUDA(t, 1)
	old := vram.CuDNN()
	off := old
	off.Disabled = true
	vram.SetCuDNN(off)
	defer vram.SetCuDNN(old)
	for _, cl := range []bool{false, true} {
		cnnGraphCheck(t, vram.CUDA(0), smallCNN, cl, false, 1e-4)
	}
}

// graphOpCases are single operations captured and replayed on a new input
// by TestCUDAGraphOps: each returns its output and the input's gradient.
var graphOpCases = []struct {
	name string
	fn   func(x, w *vram.Tensor) *vram.Tensor
}{
	{"conv", func(x, w *vram.Tensor) *vram.Tensor {
		return vram.Conv2d(x, w, nil, vram.Conv2dParams{Padding: [2]int{1, 1}})
	}},
	{"maxpool", func(x, _ *vram.Tensor) *vram.Tensor {
		return vram.MaxPool2d(x, vram.Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}})
	}},
	{"avgpool", func(x, _ *vram.Tensor) *vram.Tensor {
		return vram.AvgPool2d(x, vram.Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}})
	}},
	{"adaptive avgpool", func(x, _ *vram.Tensor) *vram.Tensor { return vram.AdaptiveAvgPool2d(x, 3, 5) }},
	{"batch norm", func(x, _ *vram.Tensor) *vram.Tensor {
		return vram.BatchNorm2d(x, nil, nil, nil, nil, true, 0.1, 1e-5)
	}},
	{"tril", func(x, _ *vram.Tensor) *vram.Tensor { return x.Tril(1) }},
	{"sum", func(x, _ *vram.Tensor) *vram.Tensor { return x.Sum() }},
	{"transposed matmul", func(x, _ *vram.Tensor) *vram.Tensor {
		m := x.Reshape(-1, 16)
		return m.Transpose(0, 1).MatMul(m)
	}},
}

// TestCUDAGraphOps captures each of graphOpCases (forward and the input's
// gradient), with cuDNN on and off, writes a new input into the captured
// one, replays, and compares with the same work run eagerly.
func TestCUDAGraphOps(t *testing.T) {
	requireCUDA(t, 1)
	graphOpsCheck(t, vram.CUDA(0), []bool{false, true})
}

// graphOpsCheck is TestCUDAGraphOps on d, with cuDNN off and on as listed.
func graphOpsCheck(t *testing.T, d vram.Device, cudnnOff []bool) {
	old := vram.CuDNN()
	defer vram.SetCuDNN(old)
	for _, off := range cudnnOff {
		set := old
		set.Disabled = off
		vram.SetCuDNN(set)
		for _, tc := range graphOpCases {
			gen := vram.NewGenerator(5)
			x := vram.Randn(vram.Shape{4, 8, 16, 16}, d, vram.WithGenerator(gen), vram.WithGrad())
			w := vram.Randn(vram.Shape{8, 8, 3, 3}, d, vram.WithGenerator(gen))
			run := func() (out, gx *vram.Tensor) {
				vram.Tidy(func() {
					x.ZeroGrad()
					y := tc.fn(x, w)
					y.Sum().Backward()
					out = vram.Keep(y.Detach())
					gx = vram.Keep(x.Grad().Detach())
				})
				return
			}
			run() // warm-up
			var gy, ggx *vram.Tensor
			g, err := vram.CaptureGraph(d, func() { gy, ggx = run() })
			if err != nil {
				t.Errorf("cuDNN off %v, %s: %v", off, tc.name, err)
				continue
			}
			nx := vram.Randn(vram.Shape{4, 8, 16, 16}, d, vram.WithGenerator(gen))
			vram.NoGrad(func() { x.CopyFrom(nx) })
			if err := g.Replay(); err != nil {
				t.Fatal(err)
			}
			ey, egx := run()
			for _, c := range []struct {
				what      string
				got, want *vram.Tensor
			}{{"output", gy, ey}, {"input gradient", ggx, egx}} {
				a, b := c.got.Float64s(), c.want.Float64s()
				var worst, scale float64
				for i := range a {
					worst = max(worst, math.Abs(a[i]-b[i]))
					scale = max(scale, math.Abs(b[i]))
				}
				if worst > 1e-4*max(scale, 1) {
					t.Errorf("cuDNN off %v, %s: replayed %s differs by %.3g (values up to %.3g)", off, tc.name, c.what, worst, scale)
				}
			}
			g.Release()
		}
	}
}
