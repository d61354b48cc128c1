package nn_test

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// stack returns depth blocks of Linear(width) + GELU (+ Dropout(p) when p >
// 0), with weights drawn from seed, each block wrapped in Checkpoint when
// ckpt is set. dropGen, when non-nil, is the dropout layers' generator.
func stack(depth, width int, p float64, seed uint64, ckpt bool, dropGen *vram.Generator, dev vram.Device) *nn.Sequential {
	g := vram.NewGenerator(seed)
	s := nn.NewSequential()
	for range depth {
		blk := nn.NewSequential(nn.NewLinear(width, width, vram.WithGenerator(g), dev), nn.NewGELU())
		if p > 0 {
			var opts []vram.Option
			if dropGen != nil {
				opts = append(opts, vram.WithGenerator(dropGen))
			}
			blk.Append(nn.NewDropout(p, opts...))
		}
		if ckpt {
			s.Append(nn.Checkpoint(blk))
		} else {
			s.Append(blk)
		}
	}
	return s
}

type ckptRun struct {
	out    []float64
	grads  [][]float64
	inGrad []float64
	next   float64 // the default generator's next draw after the step
	gnext  float64 // the dropout generator's next draw, when there is one
}

func runStack(t *testing.T, ckpt, inputGrad bool, p float64, ownGen bool) ckptRun {
	t.Helper()
	var dg *vram.Generator
	if ownGen {
		dg = vram.NewGenerator(99)
	}
	m := stack(4, 8, p, 7, ckpt, dg, vram.CPU)
	defer func() {
		for _, q := range m.Parameters() {
			q.Release()
		}
	}()
	vram.ManualSeed(1234)
	x := vram.Randn(vram.Shape{5, 8}, vram.WithGenerator(vram.NewGenerator(3)))
	defer x.Release()
	x.SetRequiresGrad(inputGrad)
	y := m.Forward(x)
	defer y.Release()
	loss := y.Mul(y).Sum()
	defer loss.Release()
	loss.Backward()
	r := ckptRun{out: y.Float64s()}
	r.next = randNext()
	if dg != nil {
		r.gnext = dg.Float64()
	}
	for _, q := range m.Parameters() {
		if q.Grad() == nil {
			t.Fatalf("checkpoint=%v: a parameter got no gradient", ckpt)
		}
		r.grads = append(r.grads, q.Grad().Float64s())
	}
	if inputGrad {
		r.inGrad = x.Grad().Float64s()
	}
	return r
}

// randNext is the default generator's next uniform draw.
func randNext() float64 {
	r := vram.Rand(vram.Shape{1})
	defer r.Release()
	return r.Float64s()[0]
}

func TestCheckpointMatchesPlain(t *testing.T) {
	tests := []struct {
		name      string
		inputGrad bool
		p         float64
		ownGen    bool
	}{
		{"no dropout, input without grad", false, 0, false},
		{"no dropout, input with grad", true, 0, false},
		{"dropout from the default generator", true, 0.4, false},
		{"dropout from its own generator", false, 0.4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain := runStack(t, false, tt.inputGrad, tt.p, tt.ownGen)
			ck := runStack(t, true, tt.inputGrad, tt.p, tt.ownGen)
			if !slices.Equal(plain.out, ck.out) {
				t.Fatalf("outputs differ:\nplain %v\nckpt  %v", plain.out, ck.out)
			}
			for i := range plain.grads {
				if !slices.Equal(plain.grads[i], ck.grads[i]) {
					t.Fatalf("gradient of parameter %d differs:\nplain %v\nckpt  %v", i, plain.grads[i], ck.grads[i])
				}
			}
			if !slices.Equal(plain.inGrad, ck.inGrad) {
				t.Fatalf("input gradient differs:\nplain %v\nckpt  %v", plain.inGrad, ck.inGrad)
			}
			// The recompute replays the draws without rewinding the
			// generators: what comes next is what comes after the plain step.
			if plain.next != ck.next || plain.gnext != ck.gnext {
				t.Fatalf("generators after the step differ: plain %v %v, ckpt %v %v", plain.next, plain.gnext, ck.next, ck.gnext)
			}
		})
	}
}

func TestCheckpointFunctionForm(t *testing.T) {
	w := vram.FromSlice([]float64{1, 2, 3, 4}, vram.Shape{2, 2}).SetRequiresGrad(true)
	defer w.Release()
	x := vram.FromSlice([]float64{0.5, -1}, vram.Shape{1, 2})
	defer x.Release()
	f := func(x *vram.Tensor) *vram.Tensor {
		h := x.MatMul(w)
		defer h.Release()
		return h.Tanh()
	}
	var want []float64
	for _, ckpt := range []bool{false, true} {
		w.ZeroGrad()
		var y *vram.Tensor
		if ckpt {
			y = vram.Checkpoint(f, x, w)
		} else {
			y = f(x)
		}
		if !y.RequiresGrad() {
			t.Fatalf("checkpoint=%v: the result does not require grad", ckpt)
		}
		s := y.Sum()
		s.Backward()
		s.Release()
		y.Release()
		got := w.Grad().Float64s()
		if want == nil {
			want = got
		} else if !slices.Equal(got, want) {
			t.Fatalf("checkpointed gradient %v, want %v", got, want)
		}
	}
	// Under NoGrad it is a plain call.
	vram.NoGrad(func() {
		y := vram.Checkpoint(f, x, w)
		defer y.Release()
		if y.RequiresGrad() {
			t.Fatal("a checkpoint under NoGrad requires grad")
		}
	})
}

func TestCheckpointBadInput(t *testing.T) {
	x := vram.Zeros(vram.Shape{2})
	defer x.Release()
	tests := []struct {
		name string
		call func()
	}{
		{"nil function", func() { vram.Checkpoint(nil, x) }},
		{"function returns nil", func() {
			vram.Checkpoint(func(*vram.Tensor) *vram.Tensor { return nil }, x)
		}},
		{"nil module", func() { nn.Checkpoint(nil) }},
		// A Checkpointed made without Checkpoint, or whose Module was
		// set to nil since, dereferenced nil in Forward.
		{"forward of the zero Checkpointed", func() { (&nn.Checkpointed{}).Forward(x) }},
		{"forward of a module set to nil", func() {
			c := nn.Checkpoint(nn.NewLinear(2, 2))
			c.Module = nil
			c.Forward(x)
		}},
		{"forward of a typed nil module", func() { (&nn.Checkpointed{Module: (*nn.Linear)(nil)}).Forward(x) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked with %v", r)
					}
				}()
				err = vram.Catch(tt.call)
			}()
			if !errors.Is(err, vram.ErrArgument) {
				t.Fatalf("got %v, want an ErrArgument", err)
			}
		})
	}
}

func TestCheckpointLowersPeak(t *testing.T) {
	memtest.Settle()
	dev := vram.Sim(1)
	peak := func(ckpt bool) int64 {
		m := stack(16, 128, 0.1, 5, ckpt, nil, dev)
		defer func() {
			for _, q := range m.Parameters() {
				q.Release()
			}
		}()
		x := vram.Randn(vram.Shape{256, 128}, dev)
		defer x.Release()
		base := vram.MemoryAllocated(dev)
		vram.ResetPeakMemoryStats(dev)
		vram.Tidy(func() {
			y := m.Forward(x)
			y.Mul(y).Mean().Backward()
		})
		for _, q := range m.Parameters() {
			q.ZeroGrad()
		}
		if got := vram.MemoryAllocated(dev); got != base {
			t.Fatalf("checkpoint=%v: %d bytes allocated after the step, want %d", ckpt, got, base)
		}
		return vram.MaxMemoryAllocated(dev) - base
	}
	plain, ck := peak(false), peak(true)
	t.Logf("peak above the parameters: plain %d B, checkpointed %d B", plain, ck)
	// Each checkpointed block keeps its input only, where a plain one
	// also keeps its linear layer's result (for the GELU) and its dropout's
	// result (for the next linear layer): at least one activation [256,
	// 128] of float32 less a block. (Dropout's own bool masks are a quarter
	// of an activation each, so comparing with half the plain peak, as
	// when they were float masks, is no longer a fair test.)
	const act = 256 * 128 * 4
	if plain-ck < 16*act {
		t.Fatalf("checkpointed peak %d B is not %d B (one activation a block) below the plain peak %d B", ck, 16*act, plain)
	}
}

// TestCheckpointNestedAndConcurrent checkpoints a stack of checkpointed
// dropout blocks, on several goroutines at once, each with its own
// generator: every goroutine's gradients equal its plain run's.
func TestCheckpointNestedAndConcurrent(t *testing.T) {
	run := func(seed uint64, mode int) [][]float64 {
		dg := vram.NewGenerator(seed)
		m := stack(3, 8, 0.5, seed, mode > 0, dg, vram.CPU)
		var top nn.Module = m
		if mode == 2 {
			top = nn.Checkpoint(m)
		}
		defer nn.Release(m)
		x := vram.Randn(vram.Shape{4, 8}, vram.WithGenerator(vram.NewGenerator(seed+1)))
		defer x.Release()
		vram.Tidy(func() {
			y := top.Forward(x)
			y.Mul(y).Sum().Backward(vram.RetainGraph())
		})
		var out [][]float64
		for _, q := range m.Parameters() {
			out = append(out, q.Grad().Float64s())
		}
		return out
	}
	const workers = 4
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			seed := uint64(100 + w)
			plain := run(seed, 0)
			for _, mode := range []int{1, 2} {
				got := run(seed, mode)
				for i := range plain {
					if !slices.Equal(got[i], plain[i]) {
						errs <- fmt.Errorf("worker %d, mode %d: gradient %d differs", w, mode, i)
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestCheckpointRetainGraph backpropagates twice through one checkpoint:
// the input stays saved and the recompute runs again.
func TestCheckpointRetainGraph(t *testing.T) {
	w := vram.FromSlice([]float64{0.5, -2}, vram.Shape{2}).SetRequiresGrad(true)
	defer w.Release()
	x := vram.FromSlice([]float64{3, 4}, vram.Shape{2}).SetRequiresGrad(true)
	defer x.Release()
	y := vram.Checkpoint(func(x *vram.Tensor) *vram.Tensor { return x.Mul(w) }, x, w)
	defer y.Release()
	s := y.Sum()
	defer s.Release()
	s.Backward(vram.RetainGraph())
	s.Backward()
	checkValues(t, "weight gradient", w.Grad().Float64s(), []float64{6, 8}, 0)
	checkValues(t, "input gradient", x.Grad().Float64s(), []float64{1, -4}, 0)
}

// TestCheckpointReleasesRecomputeOutput checks that a checkpoint's
// backward does not hold the recomputed output of its block while it
// backpropagates through it: for Linear + GELU on an input that needs no
// gradient, the backward pass holds the incoming gradient, the recomputed
// pre-activation and the GELU gradient (three activations of A bytes, and
// a small weight gradient), not a fourth for the recomputed output.
func TestCheckpointReleasesRecomputeOutput(t *testing.T) {
	memtest.Settle()
	dev := vram.Sim(1)
	const batch, width = 4096, 64
	const a = batch * width * 4
	blk := nn.Checkpoint(nn.NewSequential(nn.NewLinear(width, width, dev), nn.NewGELU()))
	defer nn.Release(blk)
	x := vram.Randn(vram.Shape{batch, width}, dev)
	defer x.Release()
	var above int64
	vram.Tidy(func() {
		loss := blk.Forward(x).Sum()
		base := vram.MemoryAllocated(dev)
		vram.ResetPeakMemoryStats(dev)
		loss.Backward()
		above = vram.MaxMemoryAllocated(dev) - base
	})
	t.Logf("backward peak: %d B = %.2f activations", above, float64(above)/a)
	if above > 3*a+a/2 {
		t.Errorf("backward peak %d B is %.2f activations of %d B; want about 3 (the recomputed output released before its backward)", above, float64(above)/a, a)
	}
	for _, p := range blk.Parameters() {
		if p.Grad() == nil {
			t.Fatal("a parameter got no gradient")
		}
	}
}

// TestCheckpointRecomputeMismatch checkpoints a function that returns a
// different shape when recomputed: Backward reports it instead of
// backpropagating a gradient of the wrong shape, and leaves nothing
// allocated.
func TestCheckpointRecomputeMismatch(t *testing.T) {
	dev := vram.Sim(1)
	w := vram.FromSlice([]float64{1, 2, 3, 4}, vram.Shape{4}, dev).SetRequiresGrad(true)
	defer w.Release()
	x := vram.FromSlice([]float64{1, 1, 1, 1}, vram.Shape{4}, dev)
	defer x.Release()
	calls := 0
	fn := func(x *vram.Tensor) *vram.Tensor {
		calls++
		if calls == 1 {
			return x.Mul(w)
		}
		return x.Mul(w).Narrow(0, 0, 2)
	}
	memtest.Settle()
	before := vram.MemoryAllocated(dev)
	err := vram.Catch(func() {
		out := vram.Checkpoint(fn, x, w)
		defer out.Release()
		s := out.Sum()
		defer s.Release()
		s.Backward()
	})
	// No Tidy and no collection: what the failure left is still allocated.
	if got := vram.MemoryAllocated(dev); got != before {
		t.Errorf("%d bytes allocated after the failed Backward, want %d", got, before)
	}
	var e *vram.Error
	if !errors.As(err, &e) || e.Kind != vram.ErrShape {
		t.Fatalf("Backward with a recompute of another shape: %v, want an ErrShape *vram.Error", err)
	}
}

// TestCheckpointReturnsInput pins a checkpointed function that returns its
// input or a parameter as it is: the gradient still reaches that tensor,
// which stays a leaf the caller holds (the result is a new view of it).
func TestCheckpointReturnsInput(t *testing.T) {
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		memtest.Settle(dev) // earlier tests' garbage is freed before, not during, the count
		base := vram.MemoryAllocated(dev)
		x := vram.FromSlice([]float32{1, 2}, vram.Shape{2}, dev, vram.WithGrad())
		w := vram.FromSlice([]float32{3, 4}, vram.Shape{2}, dev, vram.WithGrad())
		cases := []struct {
			name         string
			fn           func(x *vram.Tensor) *vram.Tensor
			params       []*vram.Tensor
			wantX, wantW []float64 // nil: no gradient
		}{
			{"input", func(x *vram.Tensor) *vram.Tensor { return x }, nil, []float64{3, 3}, nil},
			{"parameter", func(*vram.Tensor) *vram.Tensor { return w }, []*vram.Tensor{w}, nil, []float64{3, 3}},
			{"input and parameter", func(x *vram.Tensor) *vram.Tensor { return x }, []*vram.Tensor{w}, []float64{3, 3}, nil},
			{"computed", func(x *vram.Tensor) *vram.Tensor { return x.Mul(w) }, []*vram.Tensor{w}, []float64{9, 12}, []float64{3, 6}},
		}
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", dev, c.name), func(t *testing.T) {
				x.ZeroGrad()
				w.ZeroGrad()
				vram.Tidy(func() {
					y := vram.Checkpoint(c.fn, x, c.params...)
					if y == x || y == w {
						t.Fatal("the result is the tensor fn returned, not a new one")
					}
					y.MulScalar(3).Sum().Backward()
					y.Release()
				})
				for _, p := range []struct {
					name string
					t    *vram.Tensor
					want []float64
				}{{"x", x, c.wantX}, {"w", w, c.wantW}} {
					if !p.t.IsLeaf() || p.t.Released() {
						t.Fatalf("%s: leaf %v, released %v", p.name, p.t.IsLeaf(), p.t.Released())
					}
					var got []float64
					if g := p.t.Grad(); g != nil {
						got = g.Float64s()
					}
					if !slices.Equal(got, p.want) {
						t.Errorf("%s.Grad() = %v, want %v", p.name, got, p.want)
					}
				}
			})
		}
		x.ZeroGrad()
		w.ZeroGrad()
		x.Release()
		w.Release()
		if got := vram.MemoryAllocated(dev); dev != vram.CPU && got != base {
			t.Errorf("%s: %d bytes allocated after releasing everything, want %d", dev, got, base)
		}
	}
}

// TestCheckpointUnderAutocast checks that a block checkpointed inside an
// Autocast region is recomputed in that region: its gradients are those of
// the block without Checkpoint, where the recompute failed on operands of
// two dtypes (the block's low-precision input, its float32 weights).
func TestCheckpointUnderAutocast(t *testing.T) {
	for _, dt := range []vram.DType{vram.BFloat16, vram.Float16} {
		for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
			t.Run(fmt.Sprint(dt, "/", dev), func(t *testing.T) {
				grads := func(ckpt bool) [][]float64 {
					var out [][]float64
					vram.Tidy(func() {
						g := vram.NewGenerator(5)
						first := nn.NewLinear(6, 6, vram.WithGenerator(g), dev)
						blk := nn.NewSequential(nn.NewLinear(6, 6, vram.WithGenerator(g), dev), nn.NewGELU(),
							nn.NewConv2d(1, 2, 3, nn.ConvOptions{Padding: 1}, vram.WithGenerator(g), dev))
						var m nn.Module = blk
						if ckpt {
							m = nn.Checkpoint(blk)
						}
						x := vram.Randn(vram.Shape{1, 1, 6, 6}, vram.WithGenerator(g), dev)
						var loss *vram.Tensor
						vram.Autocast(dt, func() { loss = m.Forward(first.Forward(x)).Float().Sum() })
						if err := vram.Catch(func() { loss.Backward() }); err != nil {
							t.Fatalf("backward: %v", err)
						}
						for _, p := range append(first.Parameters(), blk.Parameters()...) {
							out = append(out, p.Grad().Float64s())
						}
					})
					return out
				}
				want, got := grads(false), grads(true)
				for i := range want {
					if !slices.Equal(got[i], want[i]) {
						t.Errorf("parameter %d: gradient %v with Checkpoint, want %v", i, got[i], want[i])
					}
				}
			})
		}
	}
}

// TestNamedModulesSeesThroughCheckpoint checks that a layer wrapped in
// Checkpoint is still found by type, under its own name.
func TestNamedModulesSeesThroughCheckpoint(t *testing.T) {
	lin := nn.NewLinear(4, 4)
	norm := nn.NewLayerNorm([]int{4}, 1e-5)
	inner := nn.NewSequential(nn.NewLinear(4, 4), nn.NewReLU())
	model := nn.NewSequential(nn.NewLinear(4, 4), nn.Checkpoint(lin), nn.Checkpoint(norm), nn.Checkpoint(inner))
	defer nn.Release(model)
	tests := []struct {
		name string
		want nn.Module
	}{
		{"1", lin},
		{"2", norm},
		{"3", inner},
		{"3.0", inner.At(0)},
		{"3.1", inner.At(1)},
	}
	named := nn.NamedModules(model)
	for _, tt := range tests {
		found := slices.ContainsFunc(named, func(nm nn.NamedModule) bool { return nm.Name == tt.name && nm.Module == tt.want })
		if !found {
			t.Errorf("NamedModules lacks the wrapped %T under %q", tt.want, tt.name)
		}
	}
	// Listed once each: the wrapper, then what it wraps.
	var names []string
	for _, nm := range named {
		names = append(names, nm.Name)
	}
	want := []string{"", "0", "1", "1", "2", "2", "3", "3", "3.0", "3.1"}
	if !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}

	// A checkpointed normalization layer stays float32 under Half.
	model.Half()
	if dt := norm.Weight.DType(); dt != vram.Float32 {
		t.Errorf("checkpointed LayerNorm weight is %v after Half, want float32", dt)
	}
	if dt := lin.Weight.DType(); dt != vram.Float16 {
		t.Errorf("checkpointed Linear weight is %v after Half, want float16", dt)
	}
}

// TestCheckpointKeepsBuffers: a checkpointed module's buffers (batch
// norm's running statistics) are its wrapper's, under the same names, as
// its parameters are: the state dict of a model with checkpointed blocks
// has the keys of the unwrapped model, and a Save and Load round trip
// restores the running statistics.
func TestCheckpointKeepsBuffers(t *testing.T) {
	tests := []struct {
		name  string
		build func(ckpt bool) (nn.Module, *nn.BatchNorm1d)
	}{
		{"batch norm inside a checkpointed block", func(ckpt bool) (nn.Module, *nn.BatchNorm1d) {
			bn := nn.NewBatchNorm1d(3)
			var blk nn.Module = nn.NewSequential(nn.NewLinear(2, 3), bn)
			if ckpt {
				blk = nn.Checkpoint(blk)
			}
			return nn.NewSequential(blk, nn.NewLinear(3, 1)), bn
		}},
		{"checkpointed batch norm", func(ckpt bool) (nn.Module, *nn.BatchNorm1d) {
			bn := nn.NewBatchNorm1d(3)
			var m nn.Module = bn
			if ckpt {
				m = nn.Checkpoint(bn)
			}
			return nn.NewSequential(nn.NewLinear(2, 3), m), bn
		}},
		{"nested checkpoints, at the top", func(ckpt bool) (nn.Module, *nn.BatchNorm1d) {
			bn := nn.NewBatchNorm1d(3)
			var m nn.Module = nn.NewSequential(nn.NewLinear(2, 3), bn)
			if ckpt {
				m = nn.Checkpoint(nn.Checkpoint(m))
			}
			return m, bn
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plain, _ := tc.build(false)
			defer nn.Release(plain)
			model, bn := tc.build(true)
			defer nn.Release(model)
			want := slices.Sorted(maps.Keys(nn.StateDict(plain)))
			got := slices.Sorted(maps.Keys(nn.StateDict(model)))
			if !slices.Equal(got, want) {
				t.Fatalf("state-dict keys %q, want those of the unwrapped model %q", got, want)
			}
			vram.NoGrad(func() {
				model.Forward(vram.Randn(vram.Shape{4, 2})).Release()
			})
			saved := bn.RunningMean.Float64s()
			path := filepath.Join(t.TempDir(), "m.safetensors")
			if err := nn.Save(model, path); err != nil {
				t.Fatal(err)
			}
			fresh, freshBN := tc.build(true)
			defer nn.Release(fresh)
			if err := nn.Load(fresh, path); err != nil {
				t.Fatal(err)
			}
			if got := freshBN.RunningMean.Float64s(); !slices.Equal(got, saved) {
				t.Errorf("running mean %v after the round trip, want %v", got, saved)
			}
		})
	}
}

// TestCheckpointUpdatesRunningStatsOnce: the recompute of a checkpointed
// block in the backward pass leaves the running statistics of its
// normalization layers alone, so that after training steps a checkpointed
// model has the statistics and batch counts of the same model without
// checkpoints (PyTorch's checkpoint updates them a second time).
func TestCheckpointUpdatesRunningStatsOnce(t *testing.T) {
	type norm struct {
		layer nn.Module
		state func() []float64
	}
	bn2 := func(o nn.BatchNormOptions) func(g *vram.Generator) (nn.Module, norm) {
		return func(g *vram.Generator) (nn.Module, norm) {
			bn := nn.NewBatchNorm2dOptions(2, o)
			blk := nn.NewSequential(nn.NewConv2d(1, 2, 3, nn.ConvOptions{Padding: 1}, vram.WithGenerator(g)), bn)
			return blk, norm{bn, func() []float64 {
				return slices.Concat(bn.RunningMean.Float64s(), bn.RunningVar.Float64s(), bn.NumBatchesTracked.Float64s())
			}}
		}
	}
	tests := []struct {
		name   string
		build  func(g *vram.Generator) (nn.Module, norm)
		input  vram.Shape
		nested bool
	}{
		{"batch norm 1d", func(g *vram.Generator) (nn.Module, norm) {
			bn := nn.NewBatchNorm1d(3)
			return nn.NewSequential(nn.NewLinear(4, 3, vram.WithGenerator(g)), bn), norm{bn, func() []float64 {
				return slices.Concat(bn.RunningMean.Float64s(), bn.RunningVar.Float64s(), bn.NumBatchesTracked.Float64s())
			}}
		}, vram.Shape{5, 4}, false},
		{"batch norm 2d", bn2(nn.BatchNormOptions{}), vram.Shape{2, 1, 4, 4}, false},
		{"batch norm 2d, cumulative average", bn2(nn.BatchNormOptions{CumulativeAverage: true}), vram.Shape{2, 1, 4, 4}, false},
		{"batch norm 2d, nested checkpoints", bn2(nn.BatchNormOptions{}), vram.Shape{2, 1, 4, 4}, true},
		{"instance norm with running statistics", func(g *vram.Generator) (nn.Module, norm) {
			in := nn.NewInstanceNorm1d(3, nn.InstanceNormOptions{TrackRunningStats: true})
			return nn.NewSequential(nn.NewConv1d(2, 3, 3, nn.ConvOptions{}, vram.WithGenerator(g)), in), norm{in, func() []float64 {
				return slices.Concat(in.RunningMean.Float64s(), in.RunningVar.Float64s())
			}}
		}, vram.Shape{2, 2, 6}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plain, want := tc.build(vram.NewGenerator(3))
			defer nn.Release(plain)
			blk, got := tc.build(vram.NewGenerator(3))
			defer nn.Release(blk)
			var ckpt nn.Module = nn.Checkpoint(blk)
			if tc.nested {
				ckpt = nn.Checkpoint(nn.NewSequential(ckpt, nn.NewTanh()))
				plain = nn.NewSequential(plain, nn.NewTanh())
			}
			g := vram.NewGenerator(5)
			for step := range 2 {
				x := vram.Randn(tc.input, vram.WithGenerator(g), vram.WithGrad())
				plain.Forward(x).Sum().Backward()
				ckpt.Forward(x).Sum().Backward()
				if w, c := want.state(), got.state(); !slices.Equal(c, w) {
					t.Fatalf("after step %d the checkpointed model's statistics are %v, the plain model's %v", step+1, c, w)
				}
			}
		})
	}
}
