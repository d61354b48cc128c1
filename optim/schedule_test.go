package optim_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// newSGD returns an SGD optimizer of one parameter with learning rate lr.
func newSGD(t *testing.T, lr float64) *optim.SGD {
	t.Helper()
	p := vram.Zeros(vram.Shape{1}, vram.WithGrad())
	t.Cleanup(p.Release)
	opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: lr})
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

// TestSchedules checks each schedule's rates against PyTorch's own
// recursive rules (lr_scheduler's get_lr), applied step by step from a
// base rate of 0.1.
func TestSchedules(t *testing.T) {
	tests := []struct {
		name string
		make func(optim.Optimizer) (*optim.Schedule, error)
		want []float64 // the rate after 0, 1, 2, ... steps
	}{
		{"StepLR(3, 0.5)", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewStepLR(o, 3, 0.5) },
			[]float64{0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125}},
		{"MultiStepLR([5 2 5], 0.1)", func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewMultiStepLR(o, []int{5, 2, 5}, 0.1)
		}, []float64{0.1, 0.1, 0.01, 0.01, 0.01, 0.0001, 0.0001, 0.0001}},
		{"ExponentialLR(0.9)", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewExponentialLR(o, 0.9) },
			[]float64{0.1, 0.09, 0.081, 0.0729, 0.06561, 0.059049}},
		{"CosineAnnealingLR(4, 0.001)", func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewCosineAnnealingLR(o, 4, 0.001)
		}, []float64{0.1, 0.0855017856687341, 0.0505, 0.0154982143312659, 0.001, 0.015498214331265896,
			0.0505, 0.08550178566873413, 0.1, 0.08550178566873413, 0.0505}},
		{"LinearLR(1/3, 1, 5)", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewLinearLR(o, 1.0/3, 1, 5) },
			[]float64{0.03333333333333333, 0.04666666666666667, 0.06, 0.07333333333333335, 0.08666666666666668, 0.1, 0.1, 0.1}},
		{"LinearLR(1, 0, 4)", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewLinearLR(o, 1, 0, 4) },
			[]float64{0.1, 0.075, 0.05, 0.025, 0, 0}},
		{"LambdaLR(1/(step+1))", func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewLambdaLR(o, func(step int) float64 { return 1 / float64(step+1) })
		}, []float64{0.1, 0.05, 0.1 / 3, 0.025}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opt := newSGD(t, 0.1)
			s, err := tc.make(opt)
			if err != nil {
				t.Fatal(err)
			}
			for step, want := range tc.want {
				if step > 0 {
					s.Step()
				}
				if got := opt.LR(); math.Abs(got-want) > 1e-12*max(1, math.Abs(want)) || s.LR() != got {
					t.Errorf("after %d steps: rate %v (Schedule says %v), want %v", step, got, s.LR(), want)
				}
			}
			if s.Steps() != len(tc.want)-1 || s.BaseLR() != 0.1 {
				t.Errorf("Steps %d, BaseLR %v", s.Steps(), s.BaseLR())
			}
		})
	}
}

// TestScheduleErrors checks that bad arguments are refused with an error
// that leaves the optimizer's rate as it was.
func TestScheduleErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name string
		make func(optim.Optimizer) (*optim.Schedule, error)
	}{
		{"StepLR size 0", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewStepLR(o, 0, 0.5) }},
		{"StepLR gamma NaN", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewStepLR(o, 1, nan) }},
		{"StepLR gamma negative", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewStepLR(o, 1, -0.5) }},
		{"MultiStepLR milestone 0", func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewMultiStepLR(o, []int{3, 0}, 0.1)
		}},
		{"ExponentialLR gamma Inf", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewExponentialLR(o, inf) }},
		{"CosineAnnealingLR T_max 0", func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewCosineAnnealingLR(o, 0, 0)
		}},
		{"CosineAnnealingLR eta_min NaN", func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewCosineAnnealingLR(o, 10, nan)
		}},
		{"LinearLR start 0", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewLinearLR(o, 0, 1, 5) }},
		{"LinearLR end 2", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewLinearLR(o, 0.5, 2, 5) }},
		{"LinearLR iterations 0", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewLinearLR(o, 0.5, 1, 0) }},
		{"LambdaLR nil", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewLambdaLR(o, nil) }},
		{"LambdaLR negative at 0", func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewLambdaLR(o, func(int) float64 { return -1 })
		}},
		{"nil optimizer", func(optim.Optimizer) (*optim.Schedule, error) { return optim.NewExponentialLR(nil, 0.9) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opt := newSGD(t, 0.1)
			if s, err := tc.make(opt); err == nil {
				t.Fatalf("accepted: %+v", s)
			}
			if opt.LR() != 0.1 {
				t.Errorf("the rate changed to %v", opt.LR())
			}
		})
	}
	// A factor that turns bad later panics in Step, as SetLR does.
	opt := newSGD(t, 0.1)
	s, err := optim.NewLambdaLR(opt, func(step int) float64 { return 1 - float64(step) })
	if err != nil {
		t.Fatal(err)
	}
	s.Step() // factor 0
	err = vram.Catch(s.Step)
	if !errors.Is(err, vram.ErrArgument) || opt.LR() != 0 {
		t.Errorf("a negative rate: %v, rate %v", err, opt.LR())
	}
}

func ExampleNewLinearLR() {
	// Five steps of linear warm-up to the optimizer's rate of 0.1.
	p := vram.Zeros(vram.Shape{1}, vram.WithGrad())
	defer p.Release()
	opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 0.1})
	if err != nil {
		panic(err)
	}
	warmup, err := optim.NewLinearLR(opt, 0.2, 1, 4)
	if err != nil {
		panic(err)
	}
	for range 6 {
		fmt.Printf("%.3f ", opt.LR())
		// ... a training step: opt.Step() ...
		warmup.Step()
	}
	fmt.Println()
	// Output: 0.020 0.040 0.060 0.080 0.100 0.100
}

// TestScheduleState checks that a Schedule made again after a restart and
// given the state of the one that stopped goes on with the same rates,
// although the optimizer's rates it starts from are already scheduled.
func TestScheduleState(t *testing.T) {
	tests := []struct {
		name string
		make func(optim.Optimizer) (*optim.Schedule, error)
	}{
		{"StepLR", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewStepLR(o, 2, 0.5) }},
		{"CosineAnnealingLR", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewCosineAnnealingLR(o, 6, 0.001) }},
		{"LinearLR", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewLinearLR(o, 0.25, 1, 5) }},
	}
	newOpt := func(t *testing.T) *optim.SGD {
		ps := []*vram.Tensor{vram.Zeros(vram.Shape{1}, vram.WithGrad()), vram.Zeros(vram.Shape{1}, vram.WithGrad())}
		o, err := optim.NewSGDGroups([]optim.ParamGroup{optim.Group(ps[:1]), optim.Group(ps[1:], optim.WithLR(0.01))}, optim.SGDConfig{LR: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o1 := newOpt(t)
			s1, err := tc.make(o1)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				s1.Step()
			}
			data, err := json.Marshal(s1.State())
			if err != nil {
				t.Fatal(err)
			}
			// The restarted run: the optimizer's rates come from its
			// checkpoint, already scheduled.
			o2 := newOpt(t)
			for k := range 2 {
				o2.SetGroupLR(k, o1.GroupLR(k))
			}
			s2, err := tc.make(o2)
			if err != nil {
				t.Fatal(err)
			}
			var st optim.ScheduleState
			if err := json.Unmarshal(data, &st); err != nil {
				t.Fatal(err)
			}
			if err := s2.LoadState(st); err != nil {
				t.Fatal(err)
			}
			for step := range 5 {
				checkValues(t, fmt.Sprintf("rates %d steps after resuming", step), s2.LRs(), s1.LRs(), 0)
				s1.Step()
				s2.Step()
			}
			if s2.Steps() != s1.Steps() {
				t.Fatalf("%d steps, want %d", s2.Steps(), s1.Steps())
			}
		})
	}
	bad := []struct {
		name string
		st   optim.ScheduleState
	}{
		{"negative steps", optim.ScheduleState{Steps: -1, BaseLRs: []float64{0.1, 0.01}}},
		{"one base for two groups", optim.ScheduleState{Steps: 1, BaseLRs: []float64{0.1}}},
		{"NaN base", optim.ScheduleState{Steps: 1, BaseLRs: []float64{0.1, math.NaN()}}},
		{"infinite base", optim.ScheduleState{Steps: 1, BaseLRs: []float64{math.Inf(1), 0.1}}},
		{"negative base", optim.ScheduleState{Steps: 1, BaseLRs: []float64{0.1, -0.01}}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			o := newOpt(t)
			s, err := optim.NewStepLR(o, 1, 0.5)
			if err != nil {
				t.Fatal(err)
			}
			s.Step()
			before := s.State()
			if err := s.LoadState(tc.st); !errors.Is(err, vram.ErrArgument) {
				t.Fatalf("LoadState: %v", err)
			}
			if after := s.State(); after.Steps != before.Steps || !slices.Equal(after.BaseLRs, before.BaseLRs) || o.GroupLR(0) != 0.05 || o.GroupLR(1) != 0.005 {
				t.Fatalf("the refused state changed the schedule: %+v, rates %v, %v", after, o.GroupLR(0), o.GroupLR(1))
			}
		})
	}
}
