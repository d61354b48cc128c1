package parallel

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// blocks returns the layers of a small model, in groups that stages take.
func pipeBlocks() []nn.Module {
	return []nn.Module{
		nn.NewSequential(nn.NewLinear(4, 8), nn.NewTanh()),
		nn.NewSequential(nn.NewLinear(8, 8), nn.NewGELU()),
		nn.NewSequential(nn.NewLinear(8, 6), nn.NewTanh()),
		nn.NewLinear(6, 3),
	}
}

// stagesOf groups bs into len(devs) stages (as evenly as possible).
func stagesOf(bs []nn.Module, devs []vram.Device) []Stage {
	sizes := splitSizes(len(bs), len(devs))
	var out []Stage
	off := 0
	for i, n := range sizes {
		out = append(out, Stage{Module: nn.NewSequential(bs[off : off+n]...), Device: devs[i]})
		off += n
	}
	return out
}

func TestPipelineMatchesSequential(t *testing.T) {
	tests := []struct {
		devs  []vram.Device
		micro int
		batch int
	}{
		{simDevs(1), 3, 10},
		{simDevs(2), 1, 6},
		{simDevs(2), 4, 10},
		{[]vram.Device{vram.Sim(0), vram.CPU, vram.Sim(1)}, 5, 9},
		{[]vram.Device{vram.Sim(0), vram.Sim(0), vram.Sim(1), vram.Sim(1)}, 6, 12},
		{simDevs(3), 8, 5}, // fewer rows than micro-batches
	}
	for _, tt := range tests {
		for _, sched := range []Schedule{GPipe, OneFOneB} {
			t.Run(fmt.Sprintf("%v %d stages %d of %d", sched, len(tt.devs), tt.micro, tt.batch), func(t *testing.T) {
				vram.ManualSeed(11)
				bs := pipeBlocks()
				ref, err := nn.Replicate(nn.NewSequential(bs...), vram.CPU)
				if err != nil {
					t.Fatal(err)
				}
				defer nn.Release(ref)
				p, err := NewPipeline(stagesOf(bs, tt.devs), MicroBatches(tt.micro), WithSchedule(sched))
				if err != nil {
					t.Fatal(err)
				}
				defer nn.Release(p)
				x, y := vram.Randn(vram.Shape{tt.batch, 4}), vram.Randn(vram.Shape{tt.batch, 3})
				defer x.Release()
				defer y.Release()

				var want float64
				vram.Tidy(func() {
					l := nn.MSELoss(ref.Forward(x), y)
					l.Backward()
					want = l.Item()
				})
				got := p.ForwardBackward(x, y, nn.MSELoss)
				if !nearF32(got, want) {
					t.Fatalf("loss %v, the sequential model's %v", got, want)
				}
				compareGrads(t, p, ref)

				rep := p.Report()
				m := min(tt.micro, tt.batch)
				s := len(tt.devs)
				if rep.MicroBatches != m || rep.Stages != s || rep.Schedule != sched ||
					!nearF32(rep.ExpectedBubble, float64(s-1)/float64(m+s-1)) || rep.MeasuredBubble < 0 || rep.MeasuredBubble > 1 {
					t.Fatalf("report: %+v", rep)
				}
				for i, sr := range rep.StageReports {
					limit := m
					if sched == OneFOneB {
						limit = min(m, s-i)
					}
					if sr.MaxHeld > limit || sr.MaxHeld < 1 || sr.Forward <= 0 || sr.Backward <= 0 {
						t.Fatalf("stage %d: %+v (at most %d micro-batches held)", i, sr, limit)
					}
					if sched == GPipe && sr.MaxHeld != m {
						t.Fatalf("stage %d held %d micro-batches under GPipe, want %d", i, sr.MaxHeld, m)
					}
				}
				if str := rep.String(); !strings.Contains(str, "bubble expected") || !strings.Contains(str, tt.devs[0].String()) {
					t.Fatalf("report:\n%s", str)
				}

				// Forward: the same output, and its Backward the same
				// gradients again.
				for _, prm := range slices.Concat(p.Parameters(), ref.Parameters()) {
					prm.ZeroGrad()
				}
				vram.Tidy(func() {
					out := p.Forward(x)
					wantOut := ref.Forward(x)
					if out.Device() != tt.devs[len(tt.devs)-1] {
						t.Fatalf("forward on %v", out.Device())
					}
					a, b := out.To(vram.CPU).Float64s(), wantOut.Float64s()
					for i := range b {
						if !nearF32(a[i], b[i]) {
							t.Fatalf("forward element %d: %v, want %v", i, a[i], b[i])
						}
					}
					nn.MSELoss(out, y.To(out.Device())).Backward()
					nn.MSELoss(wantOut, y).Backward()
				})
				compareGrads(t, p, ref)
				// Forward's graph keeps every micro-batch until Backward;
				// without gradients a stage holds one at a time.
				for _, grad := range []bool{true, false} {
					run := func(f func()) { f() }
					if !grad {
						run = vram.NoGrad
					}
					run(func() { vram.Tidy(func() { p.Forward(x) }) })
					want := m
					if !grad {
						want = 1
					}
					for i, sr := range p.Report().StageReports {
						if sr.MaxHeld != want {
							t.Fatalf("forward with gradients %v: stage %d held %d micro-batches, want %d", grad, i, sr.MaxHeld, want)
						}
					}
				}
			})
		}
	}
}

func compareGrads(t *testing.T, p *Pipeline, ref nn.Module) {
	t.Helper()
	got, want := p.NamedParameters(), ref.NamedParameters()
	if len(got) != len(want) {
		t.Fatalf("%d parameters, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i].Tensor.Grad(), want[i].Tensor.Grad()
		if g == nil || w == nil {
			t.Fatalf("parameter %q: gradient %v, want %v", got[i].Name, g, w)
		}
		gv, wv := g.Float64s(), w.Float64s()
		for j := range wv {
			if !nearF32(gv[j], wv[j]) {
				t.Fatalf("parameter %q (%q) element %d: gradient %v, the sequential model's %v", got[i].Name, want[i].Name, j, gv[j], wv[j])
			}
		}
	}
}

func TestScheduleOps(t *testing.T) {
	f := func(j int) pipeOp { return pipeOp{mb: j} }
	b := func(j int) pipeOp { return pipeOp{backward: true, mb: j} }
	tests := []struct {
		sched   Schedule
		s, n, m int
		want    []pipeOp
	}{
		{GPipe, 0, 2, 3, []pipeOp{f(0), f(1), f(2), b(0), b(1), b(2)}},
		{OneFOneB, 0, 3, 4, []pipeOp{f(0), f(1), f(2), b(0), f(3), b(1), b(2), b(3)}},
		{OneFOneB, 1, 3, 4, []pipeOp{f(0), f(1), b(0), f(2), b(1), f(3), b(2), b(3)}},
		{OneFOneB, 2, 3, 4, []pipeOp{f(0), b(0), f(1), b(1), f(2), b(2), f(3), b(3)}},
		{OneFOneB, 0, 4, 2, []pipeOp{f(0), f(1), b(0), b(1)}}, // fewer micro-batches than stages
	}
	for _, tt := range tests {
		if got := scheduleOps(tt.sched, tt.s, tt.n, tt.m); !slices.Equal(got, tt.want) {
			t.Errorf("%v stage %d of %d, %d micro-batches: %v, want %v", tt.sched, tt.s, tt.n, tt.m, got, tt.want)
		}
	}
	// Every schedule runs each pass once, a micro-batch's forward first.
	for _, sched := range []Schedule{GPipe, OneFOneB} {
		for n := 1; n <= 5; n++ {
			for m := 1; m <= 7; m++ {
				for s := range n {
					seen := map[pipeOp]int{}
					for i, o := range scheduleOps(sched, s, n, m) {
						seen[o] = i + 1
					}
					for j := range m {
						if seen[f(j)] == 0 || seen[b(j)] == 0 || seen[f(j)] > seen[b(j)] || len(seen) != 2*m {
							t.Fatalf("%v stage %d of %d, %d micro-batches: %v", sched, s, n, m, scheduleOps(sched, s, n, m))
						}
					}
				}
			}
		}
	}
}

func TestPipelineErrors(t *testing.T) {
	lin := nn.NewLinear(2, 2)
	defer nn.Release(lin)
	for _, tt := range []struct {
		name   string
		stages []Stage
		opts   []PipelineOption
		want   string
	}{
		{"no stages", nil, nil, "no stages"},
		{"nil module", []Stage{{Device: vram.CPU}}, nil, "no module"},
		{"nil pointer module", []Stage{{Module: (*nn.Linear)(nil), Device: vram.CPU}}, nil, "no module"},
		{"missing device", []Stage{{Module: lin, Device: vram.Sim(40)}}, nil, "sim:40"},
		{"no micro-batches", []Stage{{Module: lin, Device: vram.CPU}}, []PipelineOption{MicroBatches(0)}, "micro-batches"},
		{"unknown schedule", []Stage{{Module: lin, Device: vram.CPU}}, []PipelineOption{WithSchedule(7)}, "schedule"},
		{"parameters shared across devices", []Stage{{Module: lin, Device: vram.Sim(0)},
			{Module: nn.NewSequential(nn.NewTanh(), lin), Device: vram.Sim(1)}}, nil, "must share a device"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPipeline(tt.stages, tt.opts...)
			if err == nil || p != nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, %v; want an error with %q", p, err, tt.want)
			}
		})
	}

	// A stage that fails stops the others, and the error names it.
	bad := &panicky{bad: vram.Sim(1)}
	bad.w = vram.Keep(vram.Ones(vram.Shape{2}, vram.WithGrad()))
	bad.RegisterParameter("w", bad.w)
	for _, sched := range []Schedule{GPipe, OneFOneB} {
		first := nn.NewLinear(2, 2)
		p, err := NewPipeline([]Stage{{first, vram.Sim(0)}, {bad, vram.Sim(1)}, {nn.NewLinear(2, 2), vram.Sim(2)}},
			MicroBatches(3), WithSchedule(sched))
		if err != nil {
			t.Fatal(err)
		}
		x := vram.Ones(vram.Shape{6, 2})
		memtest.Settle(vram.Sim(2))
		before := vram.MemoryAllocated(vram.Sim(2))
		err = vram.Catch(func() { p.ForwardBackward(x, x, nn.MSELoss) })
		if !errors.Is(err, vram.ErrShape) || !strings.Contains(err.Error(), "stage 1 on sim:1") {
			t.Fatalf("%v: a failing stage: %v", sched, err)
		}
		if after := vram.MemoryAllocated(vram.Sim(2)); after != before {
			t.Errorf("%v: a failed pass left %d bytes on sim:2", sched, after-before)
		}
		err = vram.Catch(func() { p.ForwardBackward(x, x, func(a, b *vram.Tensor) *vram.Tensor { return a.Sub(b) }) })
		if err == nil {
			t.Fatalf("%v: a loss that is not a scalar was taken", sched)
		}
		err = vram.Catch(func() { p.ForwardBackward(x, vram.Ones(vram.Shape{5, 2}), nn.MSELoss) })
		if !errors.Is(err, vram.ErrShape) || !strings.Contains(err.Error(), "batch dimension") {
			t.Fatalf("%v: targets of another batch: %v", sched, err)
		}
		for _, in := range []*vram.Tensor{nil, vram.Scalar(1), vram.Zeros(vram.Shape{0, 2})} {
			if err := vram.Catch(func() { p.ForwardBackward(in, in, nn.MSELoss) }); err == nil {
				t.Fatalf("%v: ForwardBackward took the input %v", sched, in)
			}
			if err := vram.Catch(func() { p.Forward(in) }); err == nil {
				t.Fatalf("%v: Forward took the input %v", sched, in)
			}
		}
		if err := vram.Catch(func() { p.To(vram.CPU) }); !errors.Is(err, vram.ErrArgument) {
			t.Fatalf("To: %v", err)
		}
		x.Release()
		nn.Release(first)
	}
}

// stageFunc is a stage without parameters that applies f.
type stageFunc struct {
	nn.Base
	f func(*vram.Tensor) *vram.Tensor
}

func (m *stageFunc) Forward(x *vram.Tensor) *vram.Tensor { return m.f(x) }

// TestPipelineUnusualStages checks ForwardBackward against Forward and
// Backward of its result (the unsplit graph) for stages that return their
// input, change the dtype, hand on indices or detach their input: the same
// loss and gradients, nil where the unsplit model has none, and nothing
// left on the devices.
func TestPipelineUnusualStages(t *testing.T) {
	fn := func(f func(*vram.Tensor) *vram.Tensor) nn.Module { return &stageFunc{f: f} }
	tests := []struct {
		name string
		mods func() []nn.Module
	}{
		{"stage returns its input", func() []nn.Module {
			return []nn.Module{nn.NewLinear(4, 3), fn(func(x *vram.Tensor) *vram.Tensor { return x }), nn.NewLinear(3, 3)}
		}},
		{"float64 between stages", func() []nn.Module {
			return []nn.Module{nn.NewLinear(4, 3), fn(func(x *vram.Tensor) *vram.Tensor { return x.Cast(vram.Float64) }),
				fn(func(x *vram.Tensor) *vram.Tensor { return x.Cast(vram.Float32) }), nn.NewLinear(3, 3)}
		}},
		{"indices between stages", func() []nn.Module {
			return []nn.Module{nn.NewLinear(4, 4), fn(func(x *vram.Tensor) *vram.Tensor { return x.MulScalar(3).Cast(vram.Int64) }),
				fn(func(x *vram.Tensor) *vram.Tensor { return x.Cast(vram.Float32) }), nn.NewLinear(4, 3)}
		}},
		{"a stage leaves its output on the CPU", func() []nn.Module {
			lin := nn.NewLinear(4, 3)
			first := &stageFunc{f: func(x *vram.Tensor) *vram.Tensor { return lin.Forward(x).To(vram.CPU) }}
			first.RegisterModule("lin", lin)
			return []nn.Module{first, nn.NewLinear(3, 3)}
		}},
		{"a stage detaches", func() []nn.Module {
			return []nn.Module{nn.NewLinear(4, 4), fn(func(x *vram.Tensor) *vram.Tensor { return x.Detach() }), nn.NewLinear(4, 3)}
		}},
	}
	devs := simDevs(2)
	for _, tt := range tests {
		for _, sched := range []Schedule{GPipe, OneFOneB} {
			t.Run(fmt.Sprintf("%s %v", tt.name, sched), func(t *testing.T) {
				vram.ManualSeed(2)
				var stages []Stage
				for i, m := range tt.mods() {
					stages = append(stages, Stage{Module: m, Device: devs[i%2]})
				}
				p, err := NewPipeline(stages, MicroBatches(3), WithSchedule(sched))
				if err != nil {
					t.Fatal(err)
				}
				defer nn.Release(p)
				x, y := vram.Randn(vram.Shape{7, 4}), vram.Randn(vram.Shape{7, 3})
				defer x.Release()
				defer y.Release()
				memtest.Settle(devs...)
				before := []int64{vram.MemoryAllocated(devs[0]), vram.MemoryAllocated(devs[1])}

				var got, want float64
				if err := vram.Catch(func() { got = p.ForwardBackward(x, y, nn.MSELoss) }); err != nil {
					t.Fatal(err)
				}
				grads := map[string][]float64{}
				for _, np := range p.NamedParameters() {
					if g := np.Tensor.Grad(); g != nil {
						grads[np.Name] = g.Float64s()
					}
					np.Tensor.SetGrad(nil)
				}
				vram.Tidy(func() {
					out := p.Forward(x)
					l := nn.MSELoss(out, y.To(out.Device()))
					l.Backward()
					want = l.Item()
				})
				if !nearF32(got, want) {
					t.Fatalf("loss %v, unsplit %v", got, want)
				}
				for _, np := range p.NamedParameters() {
					g, w := grads[np.Name], np.Tensor.Grad()
					if (g == nil) != (w == nil) {
						t.Fatalf("%s: gradient %v, unsplit %v", np.Name, g, w)
					}
					if w == nil {
						continue
					}
					for i, wv := range w.Float64s() {
						if !nearF32(g[i], wv) {
							t.Fatalf("%s element %d: gradient %v, unsplit %v", np.Name, i, g[i], wv)
						}
					}
					np.Tensor.SetGrad(nil)
				}
				memtest.Settle(devs...)
				for i, d := range devs {
					if a := vram.MemoryAllocated(d); a != before[i] {
						t.Errorf("%v: %d bytes left", d, a-before[i])
					}
				}
			})
		}
	}
}

func TestPipelineForwardBackwardWithoutGrad(t *testing.T) {
	p, err := NewPipeline([]Stage{{nn.NewLinear(2, 2), vram.Sim(0)}, {nn.NewLinear(2, 2), vram.Sim(1)}})
	if err != nil {
		t.Fatal(err)
	}
	defer nn.Release(p)
	x := vram.Ones(vram.Shape{4, 2})
	defer x.Release()
	for _, tt := range []struct {
		name string
		wrap func(func())
	}{
		{"NoGrad", vram.NoGrad},
		{"InferenceMode", vram.InferenceMode},
	} {
		var err error
		tt.wrap(func() { err = vram.Catch(func() { p.ForwardBackward(x, x, nn.MSELoss) }) })
		if !errors.Is(err, vram.ErrAutograd) {
			t.Errorf("%s: %v, want an error of kind ErrAutograd", tt.name, err)
		}
	}
}

// TestPipelineTiedStages runs stages on one device that share a layer
// (tied weights): their goroutines accumulate into the same gradients,
// which must equal the unsplit model's, the input's gradient too. Run
// with -race.
func TestPipelineTiedStages(t *testing.T) {
	for _, sched := range []Schedule{GPipe, OneFOneB} {
		t.Run(sched.String(), func(t *testing.T) {
			vram.ManualSeed(4)
			shared := nn.NewLinear(3, 3)
			p, err := NewPipeline([]Stage{{shared, vram.Sim(0)}, {nn.NewTanh(), vram.Sim(1)}, {shared, vram.Sim(0)}},
				MicroBatches(4), WithSchedule(sched))
			if err != nil {
				t.Fatal(err)
			}
			defer nn.Release(p)
			x := vram.Randn(vram.Shape{8, 3}, vram.Sim(0), vram.WithGrad())
			defer x.Release()
			y := vram.Randn(vram.Shape{8, 3})
			defer y.Release()
			got := p.ForwardBackward(x, y, nn.MSELoss)
			tensors := []*vram.Tensor{shared.Weight, shared.Bias, x}
			grads := make([][]float64, len(tensors))
			for i, tn := range tensors {
				grads[i] = tn.Grad().Float64s()
				tn.SetGrad(nil)
			}
			var want float64
			vram.Tidy(func() {
				h := shared.Forward(x).To(vram.Sim(1)).Tanh().To(vram.Sim(0))
				l := nn.MSELoss(shared.Forward(h), y.To(vram.Sim(0)))
				l.Backward()
				want = l.Item()
			})
			if !nearF32(got, want) {
				t.Fatalf("loss %v, unsplit %v", got, want)
			}
			for i, tn := range tensors {
				for j, w := range tn.Grad().Float64s() {
					if !nearF32(grads[i][j], w) {
						t.Fatalf("tensor %d element %d: gradient %v, unsplit %v", i, j, grads[i][j], w)
					}
				}
				tn.SetGrad(nil)
			}
		})
	}
}

// heldOutput is a module whose Forward returns a tensor it does not
// compute: one of its parameters, its buffer, its input, or nil.
type heldOutput struct {
	nn.Base
	w, buf *vram.Tensor
	give   string
}

func newHeldOutput(give string) *heldOutput {
	m := &heldOutput{give: give}
	m.w = vram.Keep(vram.Full(vram.Shape{2, 3}, 2, vram.WithGrad()))
	m.buf = vram.Keep(vram.Full(vram.Shape{2, 3}, 3))
	m.RegisterParameter("w", m.w)
	m.RegisterBuffer("buf", m.buf)
	return m
}

func (m *heldOutput) Forward(x *vram.Tensor) *vram.Tensor {
	switch m.give {
	case "parameter":
		return m.w
	case "buffer":
		return m.buf
	case "input":
		return x
	}
	return nil
}

// TestModuleOutputNotReleased runs modules that return their parameter,
// buffer or input as they are through Pipeline and DataParallel, which
// release each stage's or replica's output once handed on: the module
// keeps its tensors (and their values), and a module that returns nil is
// an error rather than a part of the batch left out.
func TestModuleOutputNotReleased(t *testing.T) {
	runs := []struct {
		name string
		run  func(m nn.Module, x, y *vram.Tensor)
	}{
		{"pipeline forward", func(m nn.Module, x, _ *vram.Tensor) {
			p, err := NewPipeline([]Stage{{nn.NewLinear(3, 3), vram.Sim(0)}, {m, vram.Sim(1)}}, MicroBatches(1))
			if err != nil {
				t.Fatal(err)
			}
			vram.Tidy(func() { p.Forward(x) })
		}},
		{"pipeline forward backward", func(m nn.Module, x, y *vram.Tensor) {
			p, err := NewPipeline([]Stage{{nn.NewLinear(3, 3), vram.Sim(0)}, {m, vram.Sim(1)}, {nn.NewLinear(3, 3), vram.Sim(0)}}, MicroBatches(1))
			if err != nil {
				t.Fatal(err)
			}
			p.ForwardBackward(x, y, nn.MSELoss)
		}},
		{"data parallel forward", func(m nn.Module, x, _ *vram.Tensor) {
			dp, err := NewDataParallel(m, simDevs(2))
			if err != nil {
				t.Fatal(err)
			}
			vram.Tidy(func() { dp.Forward(x) })
		}},
		{"data parallel forward loss", func(m nn.Module, x, y *vram.Tensor) {
			dp, err := NewDataParallel(m, simDevs(2))
			if err != nil {
				t.Fatal(err)
			}
			vram.Tidy(func() { dp.ForwardLoss(x, y, nn.MSELoss) })
		}},
	}
	for _, r := range runs {
		for _, give := range []string{"parameter", "buffer", "input", "nil"} {
			t.Run(r.name+" "+give, func(t *testing.T) {
				m := newHeldOutput(give)
				defer nn.Release(m)
				rows := 2
				if strings.HasPrefix(r.name, "data parallel") {
					rows = 4 // 2 on each replica
				}
				x, y := vram.Ones(vram.Shape{rows, 3}), vram.Zeros(vram.Shape{rows, 3})
				defer x.Release()
				defer y.Release()
				err := vram.Catch(func() { r.run(m, x, y) })
				if give == "nil" {
					if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), "returned nil") {
						t.Fatalf("a module that returns nil: %v", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, tt := range []struct {
					what string
					t    *vram.Tensor
					want float64
				}{{"parameter", m.w, 2}, {"buffer", m.buf, 3}, {"input", x, 1}} {
					if tt.t.Released() {
						t.Fatalf("the %s was released", tt.what)
					}
					if v := tt.t.To(vram.CPU).Float64s(); v[0] != tt.want {
						t.Fatalf("the %s holds %v, want %v", tt.what, v, tt.want)
					}
				}
			})
		}
	}
}
