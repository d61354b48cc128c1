package optim_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// refSWALR transcribes torch.optim.swa_utils.SWALR: the rates of the
// groups (starting at lrs) after making the scheduler and after each of
// n steps, computed by its get_lr from the rates it finds.
func refSWALR(lrs, swa []float64, annealEpochs int, linear bool, n int) [][]float64 {
	anneal := func(t float64) float64 {
		if linear {
			return t
		}
		return (1 - math.Cos(math.Pi*t)) / 2
	}
	lrs = append([]float64(nil), lrs...)
	var out [][]float64
	for stepCount := 1; stepCount <= n+1; stepCount++ { // the constructor's step is the first
		step := stepCount - 1
		if annealEpochs == 0 {
			step = max(1, step)
		}
		e := float64(max(1, annealEpochs))
		prevAlpha := anneal(math.Max(0, math.Min(1, float64(step-1)/e)))
		alpha := anneal(math.Max(0, math.Min(1, float64(step)/e)))
		for g := range lrs {
			s := swa[g]
			prev := s
			if prevAlpha != 1 {
				prev = (lrs[g] - prevAlpha*s) / (1 - prevAlpha)
			}
			lrs[g] = s*alpha + prev*(1-alpha)
		}
		out = append(out, append([]float64(nil), lrs...))
	}
	return out
}

func TestSWALRMatchesReference(t *testing.T) {
	tests := []struct {
		swa    []float64
		epochs int
		linear bool
	}{
		{[]float64{0.05}, 10, false},
		{[]float64{0.05}, 10, true},
		{[]float64{0.2, 0.01}, 4, false},
		{[]float64{0.2, 0.01}, 3, true},
		{[]float64{0.02}, 0, false},
		{[]float64{0.02, 0.03}, 1, true},
	}
	const n = 14
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v/%d/linear=%v", tc.swa, tc.epochs, tc.linear), func(t *testing.T) {
			p, q := vram.Zeros(vram.Shape{2}, vram.WithGrad()), vram.Zeros(vram.Shape{2}, vram.WithGrad())
			opt, err := optim.NewSGDGroups([]optim.ParamGroup{optim.Group([]*vram.Tensor{p}),
				optim.Group([]*vram.Tensor{q}, optim.WithLR(0.5))}, optim.SGDConfig{LR: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			swa := tc.swa
			if len(swa) == 1 {
				swa = []float64{swa[0], swa[0]}
			}
			want := refSWALR([]float64{0.1, 0.5}, swa, tc.epochs, tc.linear, n)
			s, err := optim.NewSWALR(opt, tc.swa, tc.epochs, tc.linear)
			if err != nil {
				t.Fatal(err)
			}
			for step := 0; step <= n; step++ {
				if step > 0 {
					s.Step()
				}
				got := []float64{opt.GroupLR(0), opt.GroupLR(1)}
				checkValues(t, fmt.Sprintf("rates at step %d", step), got, want[step], 1e-12)
			}
		})
	}
}

// TestSWALRFromAChangedRate checks that SWALR anneals from a rate other
// code set, by PyTorch's rule, and that a loaded state resumes the rates.
func TestSWALRFromAChangedRate(t *testing.T) {
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := optim.NewSWALR(opt, []float64{0.01}, 5, false)
	if err != nil {
		t.Fatal(err)
	}
	s.Step()
	s.Step()
	opt.SetLR(0.3)
	s.Step()
	ref := func(lr float64, step int) float64 { // one get_lr of step from lr
		anneal := func(t float64) float64 { return (1 - math.Cos(math.Pi*t)) / 2 }
		pa := anneal(math.Max(0, math.Min(1, float64(step-1)/5)))
		a := anneal(math.Max(0, math.Min(1, float64(step)/5)))
		prev := 0.01
		if pa != 1 {
			prev = (lr - pa*0.01) / (1 - pa)
		}
		return 0.01*a + prev*(1-a)
	}
	lr := ref(0.3, 3)
	checkValues(t, "rate at step 3", []float64{opt.LR()}, []float64{lr}, 1e-12)
	st := s.State()
	for e := 4; e <= 7; e++ {
		s.Step()
		lr = ref(lr, e)
		checkValues(t, fmt.Sprintf("rate at step %d", e), []float64{opt.LR()}, []float64{lr}, 1e-12)
	}
	if lr != 0.01 {
		t.Errorf("rate after annealing %v, want 0.01", lr)
	}
	opt2, _ := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 0.1})
	s2, err := optim.NewSWALR(opt2, []float64{0.01}, 5, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.LoadState(st); err != nil {
		t.Fatal(err)
	}
	lr = ref(0.3, 3)
	for e := 4; e <= 7; e++ {
		s2.Step()
		lr = ref(lr, e)
		checkValues(t, fmt.Sprintf("resumed rate at step %d", e), []float64{opt2.LR()}, []float64{lr}, 1e-12)
	}
}

func TestSWALRRefusesBadSettings(t *testing.T) {
	p, q := vram.Zeros(vram.Shape{2}, vram.WithGrad()), vram.Zeros(vram.Shape{2}, vram.WithGrad())
	opt, err := optim.NewAdamGroups([]optim.ParamGroup{optim.Group([]*vram.Tensor{p}), optim.Group([]*vram.Tensor{q})}, optim.AdamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		opt    optim.Optimizer
		swa    []float64
		epochs int
	}{
		{"nil optimizer", nil, []float64{0.1}, 10},
		{"no swa_lr", opt, nil, 10},
		{"three rates for two groups", opt, []float64{0.1, 0.1, 0.1}, 10},
		{"negative swa_lr", opt, []float64{-0.1}, 10},
		{"NaN swa_lr", opt, []float64{0.1, math.NaN()}, 10},
		{"infinite swa_lr", opt, []float64{math.Inf(1)}, 10},
		{"negative anneal epochs", opt, []float64{0.1}, -1},
	}
	for _, tc := range tests {
		if _, err := optim.NewSWALR(tc.opt, tc.swa, tc.epochs, false); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("%s: got %v, want vram.ErrArgument", tc.name, err)
		}
		if got := []float64{opt.GroupLR(0), opt.GroupLR(1)}; got[0] != 1e-3 || got[1] != 1e-3 {
			t.Errorf("%s: rates changed to %v", tc.name, got)
		}
	}
}

// TestSWALRAfterCosine checks that an SWALR made after another schedule
// anneals from the rate that schedule left, as PyTorch's does.
func TestSWALRAfterCosine(t *testing.T) {
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	cos, err := optim.NewCosineAnnealingLR(opt, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		cos.Step()
	}
	want := refSWALR([]float64{opt.LR()}, []float64{0.01}, 3, false, 5)
	s, err := optim.NewSWALR(opt, []float64{0.01}, 3, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i <= 5; i++ {
		if i > 0 {
			s.Step()
		}
		checkValues(t, fmt.Sprintf("rate at step %d", i), []float64{opt.LR()}, want[i], 1e-12)
	}
}
