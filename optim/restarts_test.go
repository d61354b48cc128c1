package optim_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// refWarmRestarts returns the rates of steps 0 to n of PyTorch's
// CosineAnnealingWarmRestarts for the base rate base, stepping T_cur and
// T_i one step at a time as its step() does.
func refWarmRestarts(base, etaMin float64, t0, tMult, n int) []float64 {
	tCur, tI := 0, t0
	out := []float64{etaMin + (base-etaMin)*(1+math.Cos(0))/2}
	for range n {
		tCur++
		if tCur >= tI {
			tCur -= tI
			tI *= tMult
		}
		out = append(out, etaMin+(base-etaMin)*(1+math.Cos(math.Pi*float64(tCur)/float64(tI)))/2)
	}
	return out
}

func TestCosineAnnealingWarmRestarts(t *testing.T) {
	tests := []struct {
		name         string
		t0, tMult    int
		etaMin       float64
		want0, want1 []float64 // by hand, rates of steps 0, 1, ... of the groups; nil: the reference only
		steps        int
	}{
		{"t0 2", 2, 1, 0, []float64{3, 1.5, 3, 1.5, 3}, []float64{0.5, 0.25, 0.5, 0.25, 0.5}, 4},
		{"t0 1 doubling", 1, 2, 0.1, []float64{3, 3, 1.55, 3, 0.1 + 1.45*(1+math.Sqrt2/2), 1.55, 0.1 + 1.45*(1-math.Sqrt2/2), 3}, nil, 7},
		{"t0 3", 3, 1, 0.01, nil, nil, 20},
		{"t0 2 tripling", 2, 3, 0, nil, nil, 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := twoGroups(t, []float64{3, 0.5})
			s, err := optim.NewCosineAnnealingWarmRestarts(o, tc.t0, tc.tMult, tc.etaMin)
			if err != nil {
				t.Fatal(err)
			}
			ref0 := refWarmRestarts(3, tc.etaMin, tc.t0, tc.tMult, tc.steps)
			ref1 := refWarmRestarts(0.5, tc.etaMin, tc.t0, tc.tMult, tc.steps)
			for i := range tc.steps + 1 {
				if i > 0 {
					s.Step()
				}
				checkValues(t, fmt.Sprintf("step %d", i), groupLRs(o), []float64{ref0[i], ref1[i]}, 1e-12)
				if tc.want0 != nil {
					checkValues(t, fmt.Sprintf("step %d, by hand", i), groupLRs(o)[:1], tc.want0[i:i+1], 1e-12)
				}
				if tc.want1 != nil {
					checkValues(t, fmt.Sprintf("step %d, by hand", i), groupLRs(o)[1:], tc.want1[i:i+1], 1e-12)
				}
			}
		})
	}
}

func TestCosineAnnealingWarmRestartsResumes(t *testing.T) {
	o := twoGroups(t, []float64{3, 0.5})
	s, err := optim.NewCosineAnnealingWarmRestarts(o, 2, 2, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		s.Step()
	}
	st := s.State()
	o2 := twoGroups(t, []float64{3, 0.5})
	s2, err := optim.NewCosineAnnealingWarmRestarts(o2, 2, 2, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.LoadState(st); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		checkValues(t, fmt.Sprintf("resumed step %d", 5+i), groupLRs(o2), groupLRs(o), 1e-12)
		s.Step()
		s2.Step()
	}
	// A step count far along, with periods too long to end, is quick.
	done := time.Now()
	st.Steps = 1 << 53 // the most LoadState takes
	if err := s2.LoadState(st); err != nil {
		t.Fatal(err)
	}
	if lrs := groupLRs(o2); !(lrs[0] >= 0.1 && lrs[0] <= 3) || time.Since(done) > time.Second {
		t.Errorf("rates %v at step %d, after %v", lrs, st.Steps, time.Since(done))
	}
}

func TestCosineAnnealingWarmRestartsRefusesBadSettings(t *testing.T) {
	tests := []struct {
		name      string
		t0, tMult int
		etaMin    float64
	}{
		{"t0 0", 0, 1, 0},
		{"negative t0", -2, 1, 0},
		{"tMult 0", 2, 0, 0},
		{"negative eta_min", 2, 1, -0.1},
		{"NaN eta_min", 2, 1, math.NaN()},
		{"infinite eta_min", 2, 1, math.Inf(1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := twoGroups(t, []float64{3, 0.5})
			s, err := optim.NewCosineAnnealingWarmRestarts(o, tc.t0, tc.tMult, tc.etaMin)
			if err == nil || !errors.Is(err, vram.ErrArgument) || s != nil {
				t.Fatalf("got %v, %v; want an error matching vram.ErrArgument", s, err)
			}
			checkValues(t, "rates", groupLRs(o), []float64{3, 0.5}, 0)
		})
	}
	if _, err := optim.NewCosineAnnealingWarmRestarts(nil, 2, 1, 0); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("nil optimizer: %v", err)
	}
}

func ExampleNewCosineAnnealingWarmRestarts() {
	p := vram.Zeros(vram.Shape{1}, vram.WithGrad())
	defer p.Release()
	opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 1})
	if err != nil {
		panic(err)
	}
	// Periods of 2, 4, 8, ... epochs, each starting again at the base rate.
	sched, err := optim.NewCosineAnnealingWarmRestarts(opt, 2, 2, 0)
	if err != nil {
		panic(err)
	}
	for epoch := range 7 {
		fmt.Printf("epoch %d: lr %.3f\n", epoch, opt.LR())
		// ... train an epoch ...
		sched.Step()
	}
	// Output:
	// epoch 0: lr 1.000
	// epoch 1: lr 0.500
	// epoch 2: lr 1.000
	// epoch 3: lr 0.854
	// epoch 4: lr 0.500
	// epoch 5: lr 0.146
	// epoch 6: lr 1.000
}
