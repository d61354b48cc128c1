package parallel

import (
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// modelParallel is PyTorch's model-parallel example in Go: two
// sub-networks placed on two devices in the constructor, the input moved
// to each in Forward. The devices are fields so that the test runs on sim
// devices and the CPU; on GPUs the same code reads m.subNetwork1.CUDA(0)
// and x.CUDA(1) (TestCUDAModelParallel).
type modelParallel struct {
	nn.Base
	subNetwork1, subNetwork2 *nn.Sequential
	dev1, dev2               vram.Device
}

func newModelParallel(dev1, dev2 vram.Device) *modelParallel {
	m := &modelParallel{
		subNetwork1: nn.NewSequential(nn.NewLinear(4, 16), nn.NewReLU(), nn.NewLinear(16, 16), nn.NewTanh()),
		subNetwork2: nn.NewSequential(nn.NewLinear(16, 8), nn.NewGELU(), nn.NewLinear(8, 2)),
		dev1:        dev1,
		dev2:        dev2,
	}
	m.RegisterModule("sub_network1", m.subNetwork1)
	m.RegisterModule("sub_network2", m.subNetwork2)
	m.subNetwork1.To(dev1) // place the first sub-network on its device
	m.subNetwork2.To(dev2) // and the second on the other
	return m
}

func (m *modelParallel) Forward(x *vram.Tensor) *vram.Tensor {
	x = x.To(m.dev1) // move the input to the first device
	defer x.Release()
	h := m.subNetwork1.Forward(x)
	defer h.Release()
	h = h.To(m.dev2) // hand the activations to the second device
	defer h.Release()
	return m.subNetwork2.Forward(h)
}

// trainModelParallel checks one step's gradients against the same model on
// the CPU (within rtol), then trains it and checks that the loss falls.
func trainModelParallel(t *testing.T, m *modelParallel, rtol float64) {
	t.Helper()
	ref, err := nn.Replicate(m, vram.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer nn.Release(ref)
	// The replica of a module that spans two devices keeps their names in
	// its fields: point them at the CPU.
	r := ref.(*modelParallel)
	r.dev1, r.dev2 = vram.CPU, vram.CPU
	vram.ManualSeed(5)
	x := vram.Randn(vram.Shape{32, 4})
	defer x.Release()
	y := vram.Randn(vram.Shape{32, 2})
	defer y.Release()
	vram.Tidy(func() {
		nn.MSELoss(m.Forward(x), y.To(m.dev2)).Backward()
		nn.MSELoss(ref.Forward(x), y).Backward()
	})
	got, want := m.NamedParameters(), ref.NamedParameters()
	for i := range want {
		g := got[i].Tensor
		wantDev := m.dev1
		if i >= len(m.subNetwork1.Parameters()) {
			wantDev = m.dev2
		}
		if g.Device() != wantDev || g.Grad() == nil || g.Grad().Device() != wantDev {
			t.Fatalf("%s on %v, gradient %v, want both on %v", got[i].Name, g.Device(), g.Grad(), wantDev)
		}
		gv, wv := g.Grad().Float64s(), want[i].Tensor.Grad().Float64s()
		for j := range wv {
			if math.IsNaN(gv[j]) || math.Abs(gv[j]-wv[j]) > rtol*(1+math.Abs(wv[j])) {
				t.Fatalf("%s element %d: gradient %v, on one device %v", got[i].Name, j, gv[j], wv[j])
			}
		}
	}
	opt, err := optim.NewAdam(m.Parameters(), optim.AdamConfig{LR: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	opt.ZeroGrad()
	var first, last float64
	for step := range 30 {
		vram.Tidy(func() {
			loss := nn.MSELoss(m.Forward(x), y.To(m.dev2))
			loss.Backward()
			opt.Step()
			opt.ZeroGrad()
			if step == 0 {
				first = loss.Item()
			}
			last = loss.Item()
		})
	}
	if !(last < 0.8*first) {
		t.Fatalf("the loss went from %v to %v in 30 steps", first, last)
	}
}

func TestModelParallelTrains(t *testing.T) {
	for _, devs := range [][2]vram.Device{
		{vram.Sim(0), vram.Sim(1)},
		{vram.CPU, vram.Sim(0)},
		{vram.Sim(1), vram.CPU},
	} {
		t.Run(fmt.Sprintf("%v and %v", devs[0], devs[1]), func(t *testing.T) {
			vram.ManualSeed(1)
			m := newModelParallel(devs[0], devs[1])
			defer nn.Release(m)
			trainModelParallel(t, m, f32Tol)
		})
	}
}
