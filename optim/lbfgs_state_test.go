package optim_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// newRosen returns the parameters a [2] and b [1, 2] at start and an
// LBFGS of them with c, which the test releases.
func newRosen(t *testing.T, start []float64, c optim.LBFGSConfig, dev vram.Device) (a, b *vram.Tensor, opt *optim.LBFGS) {
	t.Helper()
	a = vram.FromSlice(start[:2], nil, vram.Float64, dev, vram.WithGrad())
	b = vram.FromSlice(start[2:], vram.Shape{1, 2}, vram.Float64, dev, vram.WithGrad())
	opt, err := optim.NewLBFGS([]*vram.Tensor{a, b}, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { opt.Release(); a.Release(); b.Release() })
	return a, b, opt
}

// An LBFGS loaded with another's State, over parameters at the same
// point, steps exactly as the other goes on to, as PyTorch's
// load_state_dict resumes an LBFGS.
func TestLBFGSStateResumes(t *testing.T) {
	start := []float64{-1.2, 1, -0.5, 0.8}
	tests := []struct {
		name   string
		c      optim.LBFGSConfig
		before int // Steps before the state is taken
	}{
		{"fixed step", optim.LBFGSConfig{LR: 0.5, MaxIter: 3, HistorySize: 2}, 2},
		{"strong wolfe", optim.LBFGSConfig{LineSearch: "strong_wolfe", MaxIter: 4, HistorySize: 3}, 2},
		{"fresh", optim.LBFGSConfig{MaxIter: 3}, 0},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%v/%s", dev, tc.name), func(t *testing.T) {
				a, b, opt := newRosen(t, start, tc.c, dev)
				closure := rosenClosure(opt, a, b)
				for range tc.before {
					opt.Step(closure)
				}
				opt.SetLR(opt.Config().LR * 0.9)
				st := opt.State()
				defer st.Release()
				here := append(a.Float64s(), b.Float64s()...)
				for range 2 {
					opt.Step(closure)
				}
				want := append(a.Float64s(), b.Float64s()...)

				a2, b2, opt2 := newRosen(t, here, tc.c, dev)
				if err := opt2.LoadState(st); err != nil {
					t.Fatal(err)
				}
				if opt2.Config().LR != st.LR || opt2.FuncEvals() != st.FuncEvals || opt2.Iterations() != st.NIter {
					t.Fatalf("loaded lr %v, %d evaluations, %d iterations; want %v, %d, %d",
						opt2.Config().LR, opt2.FuncEvals(), opt2.Iterations(), st.LR, st.FuncEvals, st.NIter)
				}
				closure2 := rosenClosure(opt2, a2, b2)
				for range 2 {
					opt2.Step(closure2)
				}
				if got := append(a2.Float64s(), b2.Float64s()...); !slices.Equal(got, want) {
					t.Fatalf("resumed at %v, want %v", got, want)
				}
				if opt2.FuncEvals() != opt.FuncEvals() || opt2.Iterations() != opt.Iterations() {
					t.Fatalf("resumed counts %d, %d; want %d, %d", opt2.FuncEvals(), opt2.Iterations(), opt.FuncEvals(), opt.Iterations())
				}
			})
		}
	}
}

// LoadState refuses a state that does not fit the optimizer, with an
// error of vram's kinds, and changes nothing.
func TestLBFGSLoadStateRefuses(t *testing.T) {
	start := []float64{-1.2, 1, -0.5, 0.8}
	c := optim.LBFGSConfig{MaxIter: 3, HistorySize: 2}
	a, b, src := newRosen(t, start, c, vram.CPU)
	closure := rosenClosure(src, a, b)
	for range 3 {
		src.Step(closure)
	}
	good := src.State()
	defer good.Release()
	if good.NIter == 0 || len(good.OldDirs) == 0 {
		t.Fatalf("state without a history: %+v", good)
	}
	vec := func(n int, opts ...vram.Option) *vram.Tensor {
		return vram.Zeros(vram.Shape{n}, append([]vram.Option{vram.Float64}, opts...)...)
	}
	released := vec(4)
	released.Release()
	tests := []struct {
		name   string
		change func(st *optim.LBFGSState)
		kind   error
	}{
		{"negative lr", func(st *optim.LBFGSState) { st.LR = -1 }, vram.ErrArgument},
		{"NaN lr", func(st *optim.LBFGSState) { st.LR = math.NaN() }, vram.ErrArgument},
		{"negative count", func(st *optim.LBFGSState) { st.FuncEvals = -1 }, vram.ErrArgument},
		{"history lengths", func(st *optim.LBFGSState) { st.Ro = st.Ro[:len(st.Ro)-1] }, vram.ErrArgument},
		{"history too long", func(st *optim.LBFGSState) {
			st.OldDirs = append(slices.Clone(st.OldDirs), vec(4), vec(4))
			st.OldStps = append(slices.Clone(st.OldStps), vec(4), vec(4))
			st.Ro = append(slices.Clone(st.Ro), 1, 1)
		}, vram.ErrArgument},
		{"ro not positive", func(st *optim.LBFGSState) { st.Ro = slices.Clone(st.Ro); st.Ro[0] = 0 }, vram.ErrArgument},
		{"H_diag NaN", func(st *optim.LBFGSState) { st.HDiag = math.NaN() }, vram.ErrArgument},
		{"no direction", func(st *optim.LBFGSState) { st.D = nil }, vram.ErrArgument},
		{"n_iter 0 with history", func(st *optim.LBFGSState) { st.NIter = 0 }, vram.ErrArgument},
		{"direction length", func(st *optim.LBFGSState) { st.D = vec(3) }, vram.ErrShape},
		{"direction 2-d", func(st *optim.LBFGSState) { st.PrevFlatGrad = vram.Zeros(vram.Shape{2, 2}, vram.Float64) }, vram.ErrShape},
		{"correction dtype", func(st *optim.LBFGSState) {
			st.OldDirs = slices.Clone(st.OldDirs)
			st.OldDirs[0] = vram.Zeros(vram.Shape{4}, vram.Float32)
		}, vram.ErrDType},
		{"correction device", func(st *optim.LBFGSState) {
			st.OldStps = slices.Clone(st.OldStps)
			st.OldStps[0] = vec(4, vram.Sim(0))
		}, vram.ErrDevice},
		{"released", func(st *optim.LBFGSState) { st.D = released }, vram.ErrReleased},
		{"zero Tensor direction", func(st *optim.LBFGSState) { st.D = &vram.Tensor{} }, vram.ErrArgument},
		{"zero Tensor correction", func(st *optim.LBFGSState) {
			st.OldStps = slices.Clone(st.OldStps)
			st.OldStps[0] = &vram.Tensor{}
		}, vram.ErrArgument},
		{"huge evaluation count", func(st *optim.LBFGSState) { st.FuncEvals = math.MaxInt }, vram.ErrArgument},
		{"huge iteration count", func(st *optim.LBFGSState) { st.NIter = 1<<53 + 1 }, vram.ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a2, b2, opt := newRosen(t, start, c, vram.CPU)
			closure2 := rosenClosure(opt, a2, b2)
			opt.Step(closure2)
			before := opt.State()
			defer before.Release()
			st := good
			tc.change(&st)
			var err error
			if p := vram.Catch(func() { err = opt.LoadState(st) }); p != nil {
				t.Fatalf("LoadState panicked: %v", p)
			}
			if !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want %v", err, tc.kind)
			}
			after := opt.State()
			defer after.Release()
			if after.NIter != before.NIter || after.FuncEvals != before.FuncEvals || after.LR != before.LR ||
				!slices.Equal(after.D.Float64s(), before.D.Float64s()) || len(after.OldDirs) != len(before.OldDirs) {
				t.Fatalf("a refused state changed the optimizer: %+v, was %+v", after, before)
			}
		})
	}
}
