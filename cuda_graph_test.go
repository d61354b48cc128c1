package vram_test

import (
	"errors"
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
