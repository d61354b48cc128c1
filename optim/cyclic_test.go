package optim_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

func TestCyclicLR(t *testing.T) {
	tests := []struct {
		name string
		o    optim.CyclicOptions
		want []float64 // rates of steps 0, 1, ...
	}{
		{"triangular 2 up 3 down", optim.CyclicOptions{StepSizeUp: 2, StepSizeDown: 3},
			[]float64{0.1, 0.55, 1, 0.7, 0.4, 0.1, 0.55, 1, 0.7}},
		{"triangular2", optim.CyclicOptions{StepSizeUp: 2, StepSizeDown: 2, Mode: optim.Triangular2},
			[]float64{0.1, 0.55, 1, 0.55, 0.1, 0.325, 0.55, 0.325, 0.1, 0.2125}},
		{"exp_range", optim.CyclicOptions{StepSizeUp: 2, Mode: optim.ExpRange, Gamma: 0.9},
			[]float64{0.1, 0.1 + 0.45*0.9, 0.1 + 0.9*0.81, 0.1 + 0.45*0.729, 0.1, 0.1 + 0.45*math.Pow(0.9, 5)}},
		{"scale_fn by cycle", optim.CyclicOptions{StepSizeUp: 1, ScaleFn: func(x float64) float64 { return 1 / x }},
			[]float64{0.1, 1, 0.1, 0.55, 0.1, 0.4}},
		// The sum of the two sizes is past int's range: the rate still
		// climbs from the base, by a 2^62th of the range a step.
		{"huge step sizes", optim.CyclicOptions{StepSizeUp: math.MaxInt64 / 2, StepSizeDown: math.MaxInt64},
			[]float64{0.1, 0.1 + 0.9/(math.MaxInt64/2), 0.1 + 1.8/(math.MaxInt64/2)}},
		{"scale_fn by iterations", optim.CyclicOptions{StepSizeUp: 1, ScaleFn: func(x float64) float64 { return 1 / (1 + x) }, ScaleByIterations: true},
			[]float64{0.1, 0.55, 0.1, 0.325, 0.1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := twoGroups(t, []float64{3, 0.5})
			s, err := optim.NewCyclicLR(o, 0.1, 1, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			checkValues(t, "base rates", s.BaseLRs(), []float64{0.1, 0.1}, 0)
			for i, w := range tc.want {
				if i > 0 {
					s.Step()
				}
				checkValues(t, fmt.Sprintf("step %d", i), groupLRs(o), []float64{w, w}, 1e-12)
			}
		})
	}
}

func TestCyclicLRRefusesBadSettings(t *testing.T) {
	o := twoGroups(t, []float64{3, 0.5})
	tests := map[string]func() (*optim.Schedule, error){
		"nil optimizer": func() (*optim.Schedule, error) { return optim.NewCyclicLR(nil, 0.1, 1, optim.CyclicOptions{}) },
		"negative base": func() (*optim.Schedule, error) { return optim.NewCyclicLR(o, -0.1, 1, optim.CyclicOptions{}) },
		"infinite max":  func() (*optim.Schedule, error) { return optim.NewCyclicLR(o, 0.1, math.Inf(1), optim.CyclicOptions{}) },
		"negative step size": func() (*optim.Schedule, error) {
			return optim.NewCyclicLR(o, 0.1, 1, optim.CyclicOptions{StepSizeUp: -1})
		},
		"negative gamma": func() (*optim.Schedule, error) { return optim.NewCyclicLR(o, 0.1, 1, optim.CyclicOptions{Gamma: -1}) },
		"unknown mode":   func() (*optim.Schedule, error) { return optim.NewCyclicLR(o, 0.1, 1, optim.CyclicOptions{Mode: 7}) },
		"NaN scale at step 0": func() (*optim.Schedule, error) {
			return optim.NewCyclicLR(o, 0.1, 1, optim.CyclicOptions{ScaleFn: func(float64) float64 { return math.NaN() }})
		},
	}
	for name, mk := range tests {
		if s, err := mk(); !errors.Is(err, vram.ErrArgument) || s != nil {
			t.Errorf("%s: got %v, %v; want an error matching vram.ErrArgument", name, s, err)
		}
		checkValues(t, name+": rates", groupLRs(o), []float64{3, 0.5}, 0)
	}
}
