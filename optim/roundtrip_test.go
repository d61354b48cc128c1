package optim_test

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// roundTripCase makes one kind of optimizer over two groups of
// parameters, the second with hyper-parameters of its own.
type roundTripCase struct {
	name string
	make func(a, b []*vram.Tensor) (optim.Optimizer, error)
}

func roundTripCases() []roundTripCase {
	g2 := func(a, b []*vram.Tensor, opts ...optim.Option) []optim.ParamGroup {
		return []optim.ParamGroup{optim.Group(a), optim.Group(b, append([]optim.Option{optim.WithLR(0.003)}, opts...)...)}
	}
	return []roundTripCase{
		{"SGD", func(a, b []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewSGDGroups(g2(a, b, optim.WithNesterov(true)), optim.SGDConfig{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-3})
		}},
		{"Adam", func(a, b []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdamGroups(g2(a, b, optim.WithAMSGrad(true)), optim.AdamConfig{LR: 0.01})
		}},
		{"AdamW", func(a, b []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdamWGroups(g2(a, b, optim.WithBetas(0.8, 0.99)), optim.AdamConfig{LR: 0.01, WeightDecay: 0.1})
		}},
		{"Adagrad", func(a, b []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdagradGroups(g2(a, b, optim.WithLRDecay(0.01)), optim.AdagradConfig{LR: 0.05})
		}},
		{"Adamax", func(a, b []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdamaxGroups(g2(a, b, optim.WithWeightDecay(0.01)), optim.AdamaxConfig{LR: 0.01})
		}},
		{"NAdam", func(a, b []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewNAdamGroups(g2(a, b, optim.WithDecoupledWeightDecay(true), optim.WithWeightDecay(0.01)), optim.NAdamConfig{LR: 0.01})
		}},
		{"RAdam", func(a, b []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewRAdamGroups(g2(a, b, optim.WithWeightDecay(0.01)), optim.RAdamConfig{LR: 0.01})
		}},
		{"Adadelta", func(a, b []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdadeltaGroups(g2(a, b, optim.WithRho(0.8)), optim.AdadeltaConfig{LR: 1})
		}},
		{"ASGD", func(a, b []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewASGDGroups(g2(a, b, optim.WithT0(2)), optim.ASGDConfig{LR: 0.01, T0: 1})
		}},
		{"Rprop", func(a, b []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewRpropGroups(g2(a, b), optim.RpropConfig{LR: 0.01})
		}},
		{"RMSprop", func(a, b []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewRMSpropGroups(g2(a, b, optim.WithCentered(true)), optim.RMSpropConfig{LR: 0.01, Momentum: 0.5})
		}},
	}
}

// TestSaveLoadRoundTrips checks, for every optimizer Save takes, that the
// state one saves and an identical fresh one loads is the state saved:
// the fresh one saves the same file, bit for bit, and steps on exactly as
// the one saved does.
func TestSaveLoadRoundTrips(t *testing.T) {
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, dt := range []vram.DType{vram.Float32, vram.Float64, vram.BFloat16} {
			for _, tc := range roundTripCases() {
				t.Run(fmt.Sprintf("%v/%v/%s", dev, dt, tc.name), func(t *testing.T) {
					dir := t.TempDir()
					newRun := func() ([]*vram.Tensor, optim.Optimizer) {
						ps := []*vram.Tensor{
							vram.FromSlice([]float64{1, -2, 0.5}, nil, dt, dev, vram.WithGrad()),
							vram.FromSlice([]float64{0.3, -0.7, 2, 1}, vram.Shape{2, 2}, dt, dev, vram.WithGrad()),
							vram.FromSlice([]float64{-1, 4}, nil, dt, dev, vram.WithGrad()),
						}
						t.Cleanup(func() {
							for _, p := range ps {
								p.Release()
							}
						})
						o, err := tc.make(ps[:2], ps[2:])
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { optim.Release(o) })
						return ps, o
					}
					// train steps o with gradients drawn from the step number
					// (parameter 1 has none at the first, so that it has state
					// of fewer steps).
					train := func(ps []*vram.Tensor, o optim.Optimizer, from, steps int) {
						for s := from; s < from+steps; s++ {
							vram.Tidy(func() {
								for k, p := range ps {
									if k == 1 && s == 0 {
										continue
									}
									vals := make([]float64, p.NumElements())
									for i := range vals {
										vals[i] = math.Sin(float64(7*s+3*k+i)) + 0.1
									}
									setGrad(p, vals...)
								}
								o.Step()
								o.ZeroGrad()
							})
						}
					}
					ps1, o1 := newRun()
					sched, err := optim.NewStepLR(o1, 2, 0.5) // gives the groups an initial_lr
					if err != nil {
						t.Fatal(err)
					}
					for s := range 3 {
						train(ps1, o1, s, 1)
						sched.Step()
					}
					first := filepath.Join(dir, "first.safetensors")
					if err := optim.Save(o1, first); err != nil {
						t.Fatal(err)
					}

					ps2, o2 := newRun()
					train(ps2, o2, 5, 1) // state that Load must replace
					vram.NoGrad(func() {
						for i, p := range ps2 {
							p.CopyFrom(ps1[i])
						}
					})
					if err := optim.Load(o2, first); err != nil {
						t.Fatal(err)
					}
					second := filepath.Join(dir, "second.safetensors")
					if err := optim.Save(o2, second); err != nil {
						t.Fatal(err)
					}
					ts1, md1 := readCheckpoint(t, first)
					ts2, md2 := readCheckpoint(t, second)
					if !maps.Equal(md1, md2) {
						t.Errorf("metadata saved again %v, want %v", md2, md1)
					}
					if k1, k2 := slices.Sorted(maps.Keys(ts1)), slices.Sorted(maps.Keys(ts2)); !slices.Equal(k1, k2) {
						t.Fatalf("tensors saved again %v, want %v", k2, k1)
					}
					for k, a := range ts1 {
						b := ts2[k]
						if a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) || !bytes.Equal(a.Data, b.Data) {
							t.Errorf("%s saved again differs: %s %v, want %s %v", k, b.DType, b.Shape, a.DType, a.Shape)
						}
					}
					train(ps1, o1, 3, 3)
					train(ps2, o2, 3, 3)
					for i := range ps1 {
						if a, b := ps1[i].Float64s(), ps2[i].Float64s(); !slices.Equal(a, b) {
							t.Errorf("parameter %d: %v after loading, %v without stopping", i, b, a)
						}
					}
					if g, ok := o2.(optim.GroupedOptimizer); ok {
						for k := range g.NumGroups() {
							if want := o1.(optim.GroupedOptimizer).GroupLR(k); g.GroupLR(k) != want {
								t.Errorf("group %d: rate %v, want %v", k, g.GroupLR(k), want)
							}
						}
					}
				})
			}
		}
	}
}
