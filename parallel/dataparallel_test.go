package parallel

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// userNet is a model as users write one: nn.Base and layers in
// unexported fields.
type userNet struct {
	nn.Base
	body *nn.Sequential
	head *nn.Linear
}

func newUserNet(in, hidden, out int) *userNet {
	m := &userNet{
		body: nn.NewSequential(nn.NewLinear(in, hidden), nn.NewTanh()),
		head: nn.NewLinear(hidden, out),
	}
	m.RegisterModule("body", m.body)
	m.RegisterModule("head", m.head)
	return m
}

func (m *userNet) Forward(x *vram.Tensor) *vram.Tensor {
	h := m.body.Forward(x)
	defer h.Release()
	return m.head.Forward(h)
}

// f32Tol is the float32 tolerance of the comparisons with one device.
const f32Tol = 2e-5

func nearF32(a, b float64) bool { return math.Abs(a-b) <= f32Tol*(1+math.Abs(b)) }

// sameParams fails unless got's parameters equal want's within f32Tol.
func sameParams(t *testing.T, what string, got, want nn.Module) {
	t.Helper()
	g, w := got.Parameters(), want.Parameters()
	if len(g) != len(w) {
		t.Fatalf("%s: %d parameters, want %d", what, len(g), len(w))
	}
	for i := range w {
		gv, wv := g[i].Float64s(), w[i].Float64s()
		for j := range wv {
			if !nearF32(gv[j], wv[j]) {
				t.Fatalf("%s: parameter %d element %d is %v, one device has %v", what, i, j, gv[j], wv[j])
			}
		}
	}
}

// sgd and adam make the dpOptimizers compared.
var dpOptimizers = map[string]func(ps []*vram.Tensor) (optim.Optimizer, error){
	"sgd": func(ps []*vram.Tensor) (optim.Optimizer, error) {
		return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1, Momentum: 0.9})
	},
	"adam": func(ps []*vram.Tensor) (optim.Optimizer, error) {
		return optim.NewAdam(ps, optim.AdamConfig{LR: 0.01})
	},
}

// TestDataParallelMatchesOneDevice trains a model with DataParallel and
// the same model on one device with the whole batch, and compares the
// parameters of every replica after several steps.
func TestDataParallelMatchesOneDevice(t *testing.T) {
	tests := []struct {
		name  string
		devs  []vram.Device
		batch int
		mode  string // "gather", "loss" or "scalar" (the loss returned by the module)
		opt   string
		dim   int
		sync  bool    // call SyncGradients before the optimizer's Step
		clip  float64 // clip the gradients' norm to this (not 0)
	}{
		{"gather even sgd", simDevs(2), 8, "gather", "sgd", 0, false, 0},
		{"gather uneven adam", []vram.Device{vram.Sim(0), vram.CPU, vram.Sim(1)}, 10, "gather", "adam", 0, false, 0},
		{"loss uneven sgd", simDevs(3), 10, "loss", "sgd", 0, false, 0},
		{"loss even adam", []vram.Device{vram.CPU, vram.Sim(0)}, 6, "loss", "adam", 0, false, 0},
		{"fewer rows than devices", simDevs(3), 2, "loss", "sgd", 0, false, 0},
		{"gather along dim 1", simDevs(2), 5, "gather", "sgd", 1, false, 0},
		{"loss along dim 1", simDevs(3), 7, "loss", "adam", 1, false, 0},
		{"one device", simDevs(1), 4, "loss", "sgd", 0, false, 0},
		{"SyncGradients before Step", simDevs(2), 6, "gather", "sgd", 0, true, 0},
		{"SyncGradients before Step, loss", simDevs(3), 7, "loss", "adam", 0, true, 0},
		{"clipped gradients", simDevs(2), 6, "gather", "sgd", 0, false, 0.05},
		{"clipped gradients after SyncGradients", []vram.Device{vram.Sim(0), vram.CPU, vram.Sim(1)}, 8, "loss", "sgd", 0, true, 0.05},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vram.ManualSeed(7)
			ref := newUserNet(4, 8, 3)
			defer nn.Release(ref)
			initial, err := nn.Replicate(ref, vram.CPU)
			if err != nil {
				t.Fatal(err)
			}
			dp, err := NewDataParallel(initial, tt.devs, ScatterDim(tt.dim), GradientBucketBytes(64))
			if err != nil {
				t.Fatal(err)
			}
			defer nn.Release(initial)
			defer dp.Release()
			refOpt, _ := dpOptimizers[tt.opt](ref.Parameters())
			opt, err := dp.Optimizer(dpOptimizers[tt.opt])
			if err != nil {
				t.Fatal(err)
			}
			defer opt.Release()
			shape := vram.Shape{tt.batch, 4}
			tshape := vram.Shape{tt.batch, 3}
			if tt.dim == 1 {
				shape, tshape = vram.Shape{2, tt.batch, 4}, vram.Shape{2, tt.batch, 3}
			}
			for step := range 4 {
				vram.Tidy(func() {
					x, y := vram.Randn(shape), vram.Randn(tshape)
					refLoss := nn.MSELoss(ref.Forward(x), y)
					refLoss.Backward()
					refNorm := 0.0
					if tt.clip > 0 {
						refNorm = optim.ClipGradNorm(ref.Parameters(), tt.clip)
					}
					refOpt.Step()
					refOpt.ZeroGrad()

					var got float64
					switch tt.mode {
					case "gather":
						out := dp.Forward(x)
						if out.Device() != tt.devs[0] || !slices.Equal(out.Shape(), tshape) {
							t.Fatalf("gathered %v on %v", out.Shape(), out.Device())
						}
						loss := nn.MSELoss(out, y.To(out.Device()))
						loss.Mean().Backward()
						got = loss.Item()
					case "loss":
						loss := dp.ForwardLoss(x, y, nn.MSELoss)
						loss.Backward()
						got = loss.Item()
					}
					if tt.sync {
						if err := dp.SyncGradients(); err != nil {
							t.Fatal(err)
						}
					}
					if tt.clip > 0 {
						norm, err := dp.ClipGradNorm(tt.clip)
						if err != nil || !nearF32(norm, refNorm) {
							t.Fatalf("step %d: ClipGradNorm: %v, %v; one device's norm %v", step, norm, err, refNorm)
						}
					}
					opt.Step()
					opt.ZeroGrad()
					if !nearF32(got, refLoss.Item()) {
						t.Fatalf("step %d: loss %v, one device %v", step, got, refLoss.Item())
					}
				})
			}
			for r, rep := range dp.Replicas() {
				sameParams(t, fmt.Sprintf("replica %d on %v", r, tt.devs[r]), rep, ref)
				for i, p := range rep.Parameters() {
					if p.Device() != tt.devs[r] {
						t.Fatalf("replica %d's parameter %d is on %v", r, i, p.Device())
					}
					if !slices.Equal(p.Float64s(), initial.Parameters()[i].Float64s()) {
						t.Fatalf("replica %d's parameter %d differs from replica 0's: the replicas left step", r, i)
					}
				}
			}
			rep := dp.Report()
			if rep.Steps != 4 || rep.Forwards != 4 || len(rep.Replicas) != len(tt.devs) || rep.Collectives != "in-process" {
				t.Fatalf("report: %+v", rep)
			}
			if s := rep.String(); !strings.Contains(s, "all-reduce") || !strings.Contains(s, tt.devs[0].String()) {
				t.Fatalf("report table:\n%s", s)
			}
		})
	}
}

// TestDataParallelScalarOutputs: a module that returns its own loss (the
// advice "compute the loss in the forward pass") gives one loss per
// replica, stacked; their mean's backward trains every replica.
func TestDataParallelScalarOutputs(t *testing.T) {
	vram.ManualSeed(2)
	lin := nn.NewLinear(3, 1)
	m := &lossNet{lin: lin}
	m.RegisterModule("lin", lin)
	dp, err := NewDataParallel(m, simDevs(2))
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Release()
	defer nn.Release(m)
	opt, err := dp.Optimizer(dpOptimizers["sgd"])
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Release()
	vram.Tidy(func() {
		x := vram.Randn(vram.Shape{6, 3})
		losses := dp.Forward(x)
		if !slices.Equal(losses.Shape(), vram.Shape{2}) {
			t.Fatalf("losses of shape %v, want [2]", losses.Shape())
		}
		losses.Mean().Backward()
		opt.Step()
	})
	a, b := dp.Replicas()[0].Parameters(), dp.Replicas()[1].Parameters()
	for i := range a {
		if !slices.Equal(a[i].Float64s(), b[i].Float64s()) || a[i].Grad() == nil {
			t.Fatal("the replicas differ after a step, or got no gradient")
		}
	}
}

// lossNet returns the mean square of a linear map: a loss.
type lossNet struct {
	nn.Base
	lin *nn.Linear
}

func (m *lossNet) Forward(x *vram.Tensor) *vram.Tensor {
	y := m.lin.Forward(x)
	defer y.Release()
	sq := y.Square()
	defer sq.Release()
	return sq.Mean()
}

// panicky panics on one device.
type panicky struct {
	nn.Base
	w   *vram.Tensor
	bad vram.Device
}

func (p *panicky) Forward(x *vram.Tensor) *vram.Tensor {
	if p.w.Device() == p.bad {
		y := vram.Ones(vram.Shape{3, 3}, x.Device())
		defer y.Release()
		return x.Add(y) // a shape error
	}
	return x.Mul(p.w)
}

func TestDataParallelErrors(t *testing.T) {
	lin := nn.NewLinear(2, 2)
	defer nn.Release(lin)
	for _, tt := range []struct {
		name string
		make func() (*DataParallelModule, error)
		want string
	}{
		{"nil module", func() (*DataParallelModule, error) { return NewDataParallel(nil, simDevs(2)) }, "nil module"},
		{"nil pointer module", func() (*DataParallelModule, error) { return NewDataParallel((*nn.Linear)(nil), simDevs(2)) }, "nil module"},
		{"no devices", func() (*DataParallelModule, error) { return NewDataParallel(lin, nil) }, "no devices"},
		{"a device twice", func() (*DataParallelModule, error) {
			return NewDataParallel(lin, []vram.Device{vram.Sim(0), vram.Sim(0)})
		}, "given twice"},
		{"missing device", func() (*DataParallelModule, error) { return NewDataParallel(lin, []vram.Device{vram.Sim(40)}) }, "sim:40"},
		{"no GPU", func() (*DataParallelModule, error) { return DataParallel(lin, []int{0, 1}) }, "cuda:0"},
		{"wrong communicators", func() (*DataParallelModule, error) {
			comms, _ := NewLocalGroup(simDevs(2))
			return NewDataParallel(lin, []vram.Device{vram.Sim(1), vram.Sim(0)}, WithCommunicators(comms))
		}, "communicator 0 is on sim:0"},
		{"negative bucket", func() (*DataParallelModule, error) {
			return NewDataParallel(lin, simDevs(2), GradientBucketBytes(-1))
		}, "negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dp, err := tt.make()
			if err == nil || dp != nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, %v; want an error with %q", dp, err, tt.want)
			}
		})
	}
	if vram.CUDAAvailable() {
		return
	}

	dp, err := NewDataParallel(lin, simDevs(2))
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Release()
	x := vram.Randn(vram.Shape{4, 2})
	defer x.Release()
	y := vram.Randn(vram.Shape{3, 2})
	defer y.Release()
	for _, tt := range []struct {
		name string
		fn   func()
		kind error
		want string
	}{
		{"To another device", func() { dp.To(vram.CPU) }, vram.ErrArgument, "replicas stay on"},
		{"scalar input", func() { dp.Forward(vram.Scalar(1)) }, vram.ErrShape, "0-dimensional"},
		{"empty batch", func() { dp.Forward(vram.Zeros(vram.Shape{0, 2})) }, vram.ErrShape, "empty"},
		{"targets of another batch", func() { dp.ForwardLoss(x, y, nn.MSELoss) }, vram.ErrShape, "batch dimension"},
		{"a loss that is not a scalar", func() {
			dp.ForwardLoss(x, x, func(a, b *vram.Tensor) *vram.Tensor { return a.Sub(b) })
		}, vram.ErrShape, "scalar"},
		{"a shape error in every replica, the first named", func() { dp.Forward(vram.Randn(vram.Shape{4, 3})) }, vram.ErrShape, "replica 0 on sim:0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := vram.Catch(tt.fn)
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want a %v error with %q", err, tt.kind, tt.want)
			}
		})
	}
	dp.To(vram.Sim(0)) // where the module is: nothing to do

	// A released DataParallelModule says so.
	gone, err := NewDataParallel(nn.NewLinear(2, 2), simDevs(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Release(); err != nil {
		t.Fatal(err)
	}
	if err := vram.Catch(func() { gone.Forward(x) }); !errors.Is(err, vram.ErrReleased) {
		t.Fatalf("Forward after Release: %v", err)
	}
	if err := gone.SyncGradients(); err == nil {
		t.Fatal("SyncGradients after Release")
	}

	// A replica that fails is named, and the error keeps its kind.
	p := &panicky{bad: vram.Sim(1)}
	p.w = vram.Keep(vram.Ones(vram.Shape{3}, vram.WithGrad()))
	p.RegisterParameter("w", p.w)
	dpp, err := NewDataParallel(p, simDevs(2))
	if err != nil {
		t.Fatal(err)
	}
	defer dpp.Release()
	in := vram.Ones(vram.Shape{4, 3})
	defer in.Release()
	err = vram.Catch(func() { dpp.Forward(in) })
	if !errors.Is(err, vram.ErrShape) || !strings.Contains(err.Error(), "replica 1 on sim:1") {
		t.Fatalf("a failing replica: %v", err)
	}
}

// TestDataParallelSyncParameters: after the module's parameters change
// outside the optimizer, SyncParameters makes the replicas equal again.
func TestDataParallelSyncParameters(t *testing.T) {
	m := newUserNet(2, 3, 1)
	defer nn.Release(m)
	dp, err := NewDataParallel(m, []vram.Device{vram.Sim(0), vram.Sim(1), vram.CPU})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Release()
	vram.NoGrad(func() { m.head.Weight.FillInPlace(5) })
	if err := dp.SyncParameters(); err != nil {
		t.Fatal(err)
	}
	for r, rep := range dp.Replicas() {
		sameParams(t, fmt.Sprintf("replica %d", r), rep, m)
	}
	if n := dp.NamedParameters()[0].Name; n != "module.body.0.weight" {
		t.Fatalf("first parameter named %q", n)
	}
}

// TestDataParallelConcurrentUse runs two DataParallel models at once from
// two goroutines, for the race detector.
func TestDataParallelConcurrentUse(t *testing.T) {
	done := make(chan error, 2)
	for k := range 2 {
		go func() {
			done <- vram.Catch(func() {
				m := newUserNet(3, 4, 2)
				defer nn.Release(m)
				dp, err := NewDataParallel(m, []vram.Device{vram.Sim(2 * k), vram.Sim(2*k + 1)})
				if err != nil {
					panic(&vram.Error{Kind: vram.ErrArgument, Detail: err.Error()})
				}
				defer dp.Release()
				opt, _ := dp.Optimizer(dpOptimizers["adam"])
				defer opt.Release()
				for range 3 {
					vram.Tidy(func() {
						x, y := vram.Randn(vram.Shape{5, 3}), vram.Randn(vram.Shape{5, 2})
						l := dp.ForwardLoss(x, y, nn.MSELoss)
						l.Backward()
						opt.Step()
						opt.ZeroGrad()
						out := dp.Forward(x)
						nn.MSELoss(out, y.To(out.Device())).Backward()
						opt.Step()
						opt.ZeroGrad()
					})
				}
			})
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestReplicaOptimizerGroups checks that a Schedule of a ReplicaOptimizer
// whose replicas have parameter groups drives each group from its own
// base rate on every replica, rather than setting every group to one
// rate.
func TestReplicaOptimizerGroups(t *testing.T) {
	vram.ManualSeed(3)
	lin := nn.NewLinear(3, 2)
	defer nn.Release(lin)
	dp, err := NewDataParallel(lin, simDevs(2))
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Release()
	tests := []struct {
		name  string
		newOp func(ps []*vram.Tensor) (optim.Optimizer, error)
		want  [][]float64 // each group's rate after 0 and 1 steps
	}{
		{"grouped", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewSGDGroups([]optim.ParamGroup{optim.Group(ps[:1]), optim.Group(ps[1:], optim.WithLR(0.01))}, optim.SGDConfig{LR: 0.1})
		}, [][]float64{{0.1, 0.01}, {0.05, 0.005}}},
		{"one group", dpOptimizers["sgd"], [][]float64{{0.1}, {0.05}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt, err := dp.Optimizer(tt.newOp)
			if err != nil {
				t.Fatal(err)
			}
			defer opt.Release()
			s, err := optim.NewStepLR(opt, 1, 0.5)
			if err != nil {
				t.Fatal(err)
			}
			for step, want := range tt.want {
				if step > 0 {
					s.Step()
				}
				for r, ro := range opt.Optimizers() {
					for k, lr := range want {
						got := ro.LR()
						if g, ok := ro.(optim.GroupedOptimizer); ok {
							got = g.GroupLR(k)
						}
						if math.Abs(got-lr) > 1e-15 {
							t.Fatalf("step %d: replica %d group %d has rate %v, want %v", step, r, k, got, lr)
						}
					}
				}
			}
			if err := vram.Catch(func() { opt.SetGroupLR(len(tt.want[0]), 1) }); !errors.Is(err, vram.ErrIndex) {
				t.Fatalf("SetGroupLR of a missing group: %v", err)
			}
		})
	}
}

// TestDataParallelBuffers checks that the replicas use the module's
// buffers (BatchNorm's running statistics), as PyTorch's DataParallel
// does by replicating the module at each forward: the module's statistics
// are those of the first device's share of each training batch, and an
// evaluation gives every row the output the module alone gives it,
// whichever replica computes the row.
func TestDataParallelBuffers(t *testing.T) {
	for _, tc := range []struct {
		name string
		loss bool // train through ForwardLoss rather than Forward
		devs []vram.Device
	}{
		{name: "forward, 2 sim devices", devs: []vram.Device{vram.Sim(0), vram.Sim(1)}},
		{name: "forward loss, sim and CPU", loss: true, devs: []vram.Device{vram.Sim(0), vram.CPU}},
		{name: "forward, 3 devices", devs: []vram.Device{vram.Sim(0), vram.Sim(1), vram.Sim(2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vram.Tidy(func() {
				bn := nn.NewBatchNorm2d(3, vram.Sim(0))
				defer nn.Release(bn)
				ref := nn.NewBatchNorm2d(3) // trained on the first device's share alone
				defer nn.Release(ref)
				dp, err := NewDataParallel(bn, tc.devs)
				if err != nil {
					t.Fatal(err)
				}
				defer dp.Release()
				const batch = 7
				first := chunkSizes(batch, len(tc.devs))[0]
				x := vram.Randn(vram.Shape{batch, 3, 2, 2}, vram.WithGenerator(vram.NewGenerator(3)))
				for step := range 3 {
					in := x.AddScalar(float64(2 * step)) // every batch moves the statistics
					if tc.loss {
						dp.ForwardLoss(in, in, nn.MSELoss).Backward()
					} else {
						dp.Forward(in)
					}
					ref.Forward(in.Narrow(0, 0, first))
				}
				dp.Eval()
				ref.Eval()
				got := dp.Forward(x).To(vram.CPU).Float64s()
				want := ref.Forward(x).Float64s()
				for i := range want {
					if !nearF32(got[i], want[i]) {
						t.Fatalf("evaluation output %d is %v, the module alone gives %v", i, got[i], want[i])
					}
				}
				for r, rep := range dp.Replicas() {
					for i, b := range nn.NamedBuffers(rep) {
						w := nn.NamedBuffers(ref)[i].Tensor.Float64s()
						for j, v := range b.Tensor.Float64s() {
							if !nearF32(v, w[j]) {
								t.Fatalf("replica %d's %s is %v, want %v", r, b.Name, b.Tensor.Float64s(), w)
							}
						}
					}
				}
			})
		})
	}
}

// TestDataParallelReplicaFailsInCollective: a replica whose part of
// SyncGradients or SyncParameters fails before it reaches the collective
// (here on a tensor released behind the module's back) makes the call
// fail at once, not after the communicators' timeout, and names it.
func TestDataParallelReplicaFailsInCollective(t *testing.T) {
	const timeout = 10 * time.Second
	for _, tc := range []struct {
		name  string
		spoil func(dp *DataParallelModule)
		call  func(dp *DataParallelModule) error
	}{
		{"SyncGradients, a released parameter", func(dp *DataParallelModule) {
			// Releasing only the gradient clears it, as ZeroGrad does: the
			// replica then takes part with zeros.
			dp.Replicas()[1].Parameters()[0].Release()
		}, (*DataParallelModule).SyncGradients},
		{"SyncParameters, a released parameter", func(dp *DataParallelModule) {
			dp.Replicas()[1].Parameters()[1].Release()
		}, (*DataParallelModule).SyncParameters},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms, err := NewLocalGroupOptions(simDevs(2), LocalOptions{Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			m := newUserNet(3, 4, 2)
			defer nn.Release(m)
			dp, err := NewDataParallel(m, simDevs(2), WithCommunicators(comms))
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Release()
			vram.Tidy(func() {
				x, y := vram.Randn(vram.Shape{4, 3}), vram.Randn(vram.Shape{4, 2})
				dp.ForwardLoss(x, y, nn.MSELoss).Backward()
			})
			tc.spoil(dp)
			start := time.Now()
			var callErr error
			if perr := vram.Catch(func() { callErr = tc.call(dp) }); perr != nil {
				callErr = perr
			}
			if el := time.Since(start); el > timeout/4 {
				t.Errorf("took %v", el)
			}
			if !errors.Is(callErr, vram.ErrReleased) || !strings.Contains(callErr.Error(), "replica 1") {
				t.Errorf("got %v, want an ErrReleased naming replica 1", callErr)
			}
		})
	}
}

// TestDataParallelGradScaler trains with an amp.GradScaler given the
// wrapper optimizer's Parameters, every replica's: the scaled gradients
// of every replica are unscaled before the sum, so training matches one
// device with the same scaler, and a step whose gradients overflow on one
// replica only is skipped by all.
func TestDataParallelGradScaler(t *testing.T) {
	vram.ManualSeed(5)
	ref := newUserNet(4, 8, 3)
	defer nn.Release(ref)
	initial, err := nn.Replicate(ref, vram.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer nn.Release(initial)
	dp, err := NewDataParallel(initial, simDevs(3))
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Release()
	refOpt, _ := optim.NewSGD(ref.Parameters(), optim.SGDConfig{LR: 0.1})
	opt, err := dp.Optimizer(func(ps []*vram.Tensor) (optim.Optimizer, error) {
		return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1})
	})
	if err != nil {
		t.Fatal(err)
	}
	refScaler, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 1024})
	scaler, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 1024})
	for step := range 4 {
		vram.Tidy(func() {
			x, y := vram.Randn(vram.Shape{7, 4}), vram.Randn(vram.Shape{7, 3})
			if step == 2 { // an overflow in the last replica's rows only
				x = vram.Cat([]*vram.Tensor{x.Narrow(0, 0, 6), vram.Full(vram.Shape{1, 4}, math.Inf(1))}, 0)
			}
			refScaler.Scale(nn.MSELoss(ref.Forward(x), y)).Backward()
			refStepped := refScaler.Step(refOpt, ref.Parameters())
			refScaler.Update()
			refOpt.ZeroGrad()

			out := dp.Forward(x)
			scaler.Scale(nn.MSELoss(out, y.To(out.Device()))).Backward()
			stepped := scaler.Step(opt, opt.Parameters())
			scaler.Update()
			opt.ZeroGrad()
			if stepped != refStepped || (step == 2) == stepped {
				t.Fatalf("step %d: stepped %v, one device %v", step, stepped, refStepped)
			}
		})
	}
	for r, rep := range dp.Replicas() {
		sameParams(t, fmt.Sprintf("replica %d", r), rep, ref)
	}
	// The module's Parameters are replica 0's alone: the other replicas
	// would step with their gradients still scaled, so Step refuses them,
	// stepping no replica.
	vram.Tidy(func() {
		x, y := vram.Randn(vram.Shape{7, 4}), vram.Randn(vram.Shape{7, 3})
		out := dp.Forward(x)
		scaler.Scale(nn.MSELoss(out, y.To(out.Device()))).Backward()
		err := vram.Catch(func() { scaler.Step(opt, dp.Parameters()) })
		if !errors.Is(err, vram.ErrArgument) {
			t.Errorf("Step with replica 0's parameters only: %v, want a refusal matching vram.ErrArgument", err)
		}
		opt.ZeroGrad()
	})
	for r, rep := range dp.Replicas() {
		sameParams(t, fmt.Sprintf("replica %d after the refused step", r), rep, ref)
	}
}

// TestDataParallelAccumulatesAcrossSums: gradients that build up over a
// sum (a step without ZeroGrad, as PyTorch allows, or SyncGradients before
// the last backward) equal those of one device: the sum already on the
// replicas is counted once, not once per replica.
func TestDataParallelAccumulatesAcrossSums(t *testing.T) {
	type act int
	const (
		backward act = iota // a forward and backward of the batch
		step                // the optimizer's Step
		sync                // SyncGradients
		clip                // ClipGradNorm (a large bound: it sums only)
	)
	tests := []struct {
		name string
		loss bool // ForwardLoss rather than Forward
		acts []act
	}{
		{"two steps without ZeroGrad", false, []act{backward, step, backward, step}},
		{"two steps without ZeroGrad, loss", true, []act{backward, step, backward, step}},
		{"SyncGradients between backwards", false, []act{backward, sync, backward, step}},
		{"ClipGradNorm between backwards, loss", true, []act{backward, clip, backward, backward, step}},
		{"two backwards, one step", false, []act{backward, backward, step}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vram.Tidy(func() {
				vram.ManualSeed(7)
				ref := newUserNet(4, 8, 3)
				defer nn.Release(ref)
				initial, err := nn.Replicate(ref, vram.CPU)
				if err != nil {
					t.Fatal(err)
				}
				defer nn.Release(initial)
				dp, err := NewDataParallel(initial, simDevs(3))
				if err != nil {
					t.Fatal(err)
				}
				defer dp.Release()
				newSGD := func(ps []*vram.Tensor) (optim.Optimizer, error) {
					return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1})
				}
				refOpt, _ := newSGD(ref.Parameters())
				opt, err := dp.Optimizer(newSGD)
				if err != nil {
					t.Fatal(err)
				}
				x, y := vram.Randn(vram.Shape{7, 4}), vram.Randn(vram.Shape{7, 3})
				for _, a := range tt.acts {
					switch a {
					case backward:
						nn.MSELoss(ref.Forward(x), y).Backward()
						if tt.loss {
							dp.ForwardLoss(x, y, nn.MSELoss).Backward()
						} else {
							nn.MSELoss(dp.Forward(x), y.To(vram.Sim(0))).Backward()
						}
					case step:
						refOpt.Step()
						opt.Step()
					case sync:
						if err := dp.SyncGradients(); err != nil {
							t.Fatal(err)
						}
					case clip:
						if _, err := dp.ClipGradNorm(1e9); err != nil {
							t.Fatal(err)
						}
					}
				}
				for r, rep := range dp.Replicas() {
					sameParams(t, fmt.Sprintf("replica %d", r), rep, ref)
					for i, p := range rep.Parameters() {
						g, w := p.Grad().Float64s(), ref.Parameters()[i].Grad().Float64s()
						for j := range w {
							if !nearF32(g[j], w[j]) {
								t.Fatalf("replica %d: gradient %d element %d is %v, one device has %v", r, i, j, g[j], w[j])
							}
						}
					}
				}
			})
		})
	}
}

// centered is a module whose output depends on the other rows of its
// input, as BatchNorm's in training does: each row less the mean of the
// rows it came with, times a weight.
type centered struct {
	nn.Base
	w *vram.Tensor
}

func newCentered(dev vram.Device) *centered {
	m := &centered{w: vram.Full(vram.Shape{3}, 2, dev).SetRequiresGrad(true)}
	m.RegisterParameter("w", m.w)
	return m
}

func (m *centered) Forward(x *vram.Tensor) *vram.Tensor {
	mean := x.Mean(0)
	defer mean.Release()
	d := x.Sub(mean)
	defer d.Release()
	return d.Mul(m.w)
}

// TestDataParallelScattersAsChunk: the batch is split as PyTorch's
// DataParallel splits it, with torch.chunk (parts of ceil(n/devices) rows,
// devices left over get none), which a module that looks at the other
// rows of its part shows; devices without rows run nothing and the
// outputs come back in order.
func TestDataParallelScattersAsChunk(t *testing.T) {
	tests := []struct {
		rows, devs int
		parts      []int // rows per device
	}{
		{10, 3, []int{4, 4, 2}},
		{6, 4, []int{2, 2, 2, 0}},
		{5, 4, []int{2, 2, 1, 0}},
		{1, 3, []int{1, 0, 0}},
		{3, 3, []int{1, 1, 1}},
		{7, 2, []int{4, 3}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d rows on %d devices", tt.rows, tt.devs), func(t *testing.T) {
			vram.Tidy(func() {
				m := newCentered(vram.Sim(0))
				defer nn.Release(m)
				dp, err := NewDataParallel(m, simDevs(tt.devs))
				if err != nil {
					t.Fatal(err)
				}
				defer dp.Release()
				x := vram.Randn(vram.Shape{tt.rows, 3})
				var want []float64
				ref := newCentered(vram.CPU)
				defer nn.Release(ref)
				for _, part := range x.Chunk(tt.devs, 0) {
					want = append(want, ref.Forward(part).Float64s()...)
				}
				got := dp.Forward(x).Float64s()
				if len(got) != len(want) {
					t.Fatalf("%d outputs, want %d", len(got), len(want))
				}
				for i := range want {
					if !nearF32(got[i], want[i]) {
						t.Fatalf("output %d is %v, PyTorch's parts give %v", i, got[i], want[i])
					}
				}
				loss := dp.ForwardLoss(x, vram.Zeros(vram.Shape{tt.rows, 3}), nn.MSELoss)
				for r, p := range loss.Parts() {
					if (p != nil) != (tt.parts[r] > 0) {
						t.Fatalf("replica %d with %d rows has loss part %v", r, tt.parts[r], p)
					}
				}
				loss.Backward()
			})
		})
	}
}

// TestDataParallelFreezeAfterWrapping: a layer of the module frozen or
// unfrozen after NewDataParallel trains (or not) as on one device: the
// replicas follow the module's requires-grad flags at each forward.
func TestDataParallelFreezeAfterWrapping(t *testing.T) {
	tests := []struct {
		name   string
		frozen bool // whether the head's weight ends frozen
		loss   bool // ForwardLoss rather than Forward
	}{
		{"frozen after wrapping", true, false},
		{"frozen after wrapping, loss", true, true},
		{"unfrozen after wrapping", false, false},
		{"unfrozen after wrapping, loss", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vram.Tidy(func() {
				vram.ManualSeed(7)
				ref := newUserNet(4, 8, 3)
				defer nn.Release(ref)
				ref.head.Weight.SetRequiresGrad(tt.frozen) // the opposite of the end state
				initial, err := nn.Replicate(ref, vram.CPU)
				if err != nil {
					t.Fatal(err)
				}
				defer nn.Release(initial)
				dp, err := NewDataParallel(initial, simDevs(3))
				if err != nil {
					t.Fatal(err)
				}
				defer dp.Release()
				ref.head.Weight.SetRequiresGrad(!tt.frozen)
				dp.Module().(*userNet).head.Weight.SetRequiresGrad(!tt.frozen)
				newSGD := func(ps []*vram.Tensor) (optim.Optimizer, error) {
					return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1})
				}
				refOpt, _ := newSGD(ref.Parameters())
				opt, err := dp.Optimizer(newSGD)
				if err != nil {
					t.Fatal(err)
				}
				x, y := vram.Randn(vram.Shape{7, 4}), vram.Randn(vram.Shape{7, 3})
				for range 2 {
					nn.MSELoss(ref.Forward(x), y).Backward()
					refOpt.Step()
					refOpt.ZeroGrad()
					if tt.loss {
						dp.ForwardLoss(x, y, nn.MSELoss).Backward()
					} else {
						nn.MSELoss(dp.Forward(x), y.To(vram.Sim(0))).Backward()
					}
					opt.Step()
					opt.ZeroGrad()
				}
				for r, rep := range dp.Replicas() {
					sameParams(t, fmt.Sprintf("replica %d", r), rep, ref)
				}
			})
		})
	}
}

// modeNet has a BatchNorm between two layers: its output depends on the
// BatchNorm's mode.
type modeNet struct {
	nn.Base
	in  *nn.Linear
	bn  *nn.BatchNorm1d
	out *nn.Sequential
}

func newModeNet() *modeNet {
	m := &modeNet{in: nn.NewLinear(4, 5), bn: nn.NewBatchNorm1d(5), out: nn.NewSequential(nn.NewTanh(), nn.NewLinear(5, 2))}
	m.RegisterModule("in", m.in)
	m.RegisterModule("bn", m.bn)
	m.RegisterModule("out", m.out)
	return m
}

func (m *modeNet) Forward(x *vram.Tensor) *vram.Tensor {
	h := m.in.Forward(x)
	defer h.Release()
	n := m.bn.Forward(h)
	defer n.Release()
	return m.out.Forward(n)
}

// TestDataParallelFollowsModuleModes: sub-modules of the module put in
// evaluation (or training) mode on their own, or the module itself rather
// than the wrapper, run in that mode on every replica, as in PyTorch.
func TestDataParallelFollowsModuleModes(t *testing.T) {
	tests := []struct {
		name      string
		evalFirst bool // the wrapper's Eval first, on every replica
		set       func(m *modeNet)
	}{
		{"BatchNorm alone in evaluation", false, func(m *modeNet) { m.bn.Eval() }},
		{"the module in evaluation", false, func(m *modeNet) { m.Eval() }},
		{"BatchNorm alone in training after the wrapper's Eval", true, func(m *modeNet) { m.bn.Train() }},
		{"the module in training after the wrapper's Eval", true, func(m *modeNet) { m.Train() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vram.Tidy(func() {
				vram.ManualSeed(3)
				ref := newModeNet()
				defer nn.Release(ref)
				x := vram.Randn(vram.Shape{6, 4})
				ref.Forward(x) // running statistics that differ from a batch's
				initial, err := nn.Replicate(ref, vram.CPU)
				if err != nil {
					t.Fatal(err)
				}
				defer nn.Release(initial)
				dp, err := NewDataParallel(initial, simDevs(3))
				if err != nil {
					t.Fatal(err)
				}
				defer dp.Release()
				if tt.evalFirst {
					ref.Eval()
					dp.Eval()
				}
				tt.set(ref)
				tt.set(dp.Module().(*modeNet))
				x = x.MulScalar(3)
				got := dp.Forward(x).Float64s()
				var want []float64 // each replica's part alone, as a BatchNorm in training sees it
				for _, part := range x.Chunk(3, 0) {
					want = append(want, ref.Forward(part).Float64s()...)
				}
				for i := range want {
					if !nearF32(got[i], want[i]) {
						t.Fatalf("output %d is %v, one device gives %v", i, got[i], want[i])
					}
				}
			})
		})
	}
}
