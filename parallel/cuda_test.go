package parallel

import (
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// GPU tests of package parallel: they skip without enough GPUs, and fail
// instead when VRAM_REQUIRE_CUDA=1 and there is none at all.

func needGPUs(t *testing.T, n int) {
	t.Helper()
	if vram.DeviceCount() >= n {
		return
	}
	if n == 1 && os.Getenv("VRAM_REQUIRE_CUDA") == "1" {
		t.Fatal("no CUDA device")
	}
	t.Skipf("needs %d CUDA devices, have %d", n, vram.DeviceCount())
}

// nearGPU compares GPU and CPU results, which differ by the GEMMs'
// rounding.
func nearGPU(t *testing.T, what string, got, want []float64) {
	t.Helper()
	for i := range want {
		if math.IsNaN(got[i]) || math.Abs(got[i]-want[i]) > 1e-3+1e-3*math.Abs(want[i]) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestCUDADataParallel trains with DataParallel on every GPU (PyTorch's
// spelling, by index), and on a GPU, a sim device and the CPU together,
// and compares with the whole batch on the CPU.
func TestCUDADataParallel(t *testing.T) {
	needGPUs(t, 1)
	for _, mode := range []string{"gpus", "mixed"} {
		t.Run(mode, func(t *testing.T) {
			vram.ManualSeed(4)
			ref := newUserNet(8, 32, 4)
			defer nn.Release(ref)
			m, err := nn.Replicate(ref, vram.CPU)
			if err != nil {
				t.Fatal(err)
			}
			defer nn.Release(m)
			var dp *DataParallelModule
			if mode == "gpus" {
				dp, err = DataParallel(m, nil)
			} else {
				dp, err = NewDataParallel(m, []vram.Device{vram.CUDA(0), vram.Sim(0), vram.CPU})
			}
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Release()
			mk := func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewSGD(ps, optim.SGDConfig{LR: 0.05}) }
			refOpt, _ := mk(ref.Parameters())
			opt, err := dp.Optimizer(mk)
			if err != nil {
				t.Fatal(err)
			}
			defer opt.Release()
			for step := range 3 {
				vram.Tidy(func() {
					x, y := vram.Randn(vram.Shape{24, 8}), vram.Randn(vram.Shape{24, 4})
					nn.MSELoss(ref.Forward(x), y).Backward()
					refOpt.Step()
					refOpt.ZeroGrad()
					if step%2 == 0 {
						l := dp.ForwardLoss(x, y, nn.MSELoss)
						l.Backward()
					} else {
						out := dp.Forward(x)
						nn.MSELoss(out, y.To(out.Device())).Backward()
					}
					opt.Step()
					opt.ZeroGrad()
				})
			}
			for r, rep := range dp.Replicas() {
				for i, p := range rep.Parameters() {
					nearGPU(t, fmt.Sprintf("replica %d parameter %d", r, i), p.Float64s(), ref.Parameters()[i].Float64s())
				}
			}
			t.Log(dp.Report())
		})
	}
}

// TestCUDAPipeline runs GPipe and 1F1B with stages on the GPUs (and the
// CPU when there is one GPU) against the sequential model on the CPU.
func TestCUDAPipeline(t *testing.T) {
	needGPUs(t, 1)
	devs := []vram.Device{vram.CUDA(0), vram.CPU}
	if vram.DeviceCount() >= 2 {
		devs = []vram.Device{vram.CUDA(0), vram.CUDA(1)}
	}
	for _, sched := range []Schedule{GPipe, OneFOneB} {
		t.Run(sched.String(), func(t *testing.T) {
			vram.ManualSeed(9)
			bs := pipeBlocks()
			ref, err := nn.Replicate(nn.NewSequential(bs...), vram.CPU)
			if err != nil {
				t.Fatal(err)
			}
			defer nn.Release(ref)
			p, err := NewPipeline(stagesOf(bs, devs), MicroBatches(4), WithSchedule(sched))
			if err != nil {
				t.Fatal(err)
			}
			defer nn.Release(p)
			x, y := vram.Randn(vram.Shape{16, 4}), vram.Randn(vram.Shape{16, 3})
			defer x.Release()
			defer y.Release()
			var want float64
			vram.Tidy(func() {
				l := nn.MSELoss(ref.Forward(x), y)
				l.Backward()
				want = l.Item()
			})
			got := p.ForwardBackward(x, y, nn.MSELoss)
			nearGPU(t, "loss", []float64{got}, []float64{want})
			for i, np := range p.NamedParameters() {
				nearGPU(t, np.Name, np.Tensor.Grad().Float64s(), ref.Parameters()[i].Grad().Float64s())
			}
			t.Log(p.Report())
		})
	}
}

// TestCUDAModelParallel is PyTorch's model-parallel example as written in Go:
// m.sub_network1.cuda(0), m.sub_network2.cuda(1), x.cuda(0) and x.cuda(1)
// inside forward.
func TestCUDAModelParallel(t *testing.T) {
	needGPUs(t, 2)
	vram.ManualSeed(1)
	m := newModelParallel(vram.CPU, vram.CPU)
	defer nn.Release(m)
	m.subNetwork1.CUDA(0) // place the first sub-network on GPU 0
	m.subNetwork2.CUDA(1) // place the second sub-network on GPU 1
	m.dev1, m.dev2 = vram.CUDA(0), vram.CUDA(1)
	fwd := func(x *vram.Tensor) *vram.Tensor {
		x = x.CUDA(0) // move the input to GPU 0
		defer x.Release()
		h := m.subNetwork1.Forward(x)
		defer h.Release()
		h = h.CUDA(1) // transfer the output to GPU 1
		defer h.Release()
		return m.subNetwork2.Forward(h)
	}
	x := vram.Randn(vram.Shape{8, 4})
	defer x.Release()
	vram.Tidy(func() {
		a, b := fwd(x), m.Forward(x)
		nearGPU(t, "the forward as written", a.CPU().Float64s(), b.CPU().Float64s())
	})
	trainModelParallel(t, m, 1e-3)
}
