package optim_test

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// within runs f and fails the test when it panics or has not returned
// after a few seconds (a state that makes a load loop for hours).
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	type result struct {
		err   error
		panic any
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			r.panic = recover()
			done <- r
		}()
		r.err = f()
	}()
	select {
	case r := <-done:
		if r.panic != nil {
			t.Fatalf("%s panicked: %v", what, r.panic)
		}
		return r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10s", what)
		return nil
	}
}

// TestScheduleLoadStateRefusesHugeSteps checks that a step count no run
// reaches is refused, changing nothing: one that later Steps would count
// past the largest int from, and, of the schedules that replay every
// step to compute a rate, one that would keep LoadState replaying for
// hours.
func TestScheduleLoadStateRefusesHugeSteps(t *testing.T) {
	makers := []struct {
		name    string
		replays bool
		make    func(o optim.Optimizer) (*optim.Schedule, error)
	}{
		{"StepLR", false, func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewStepLR(o, 3, 0.5) }},
		{"LinearLR", false, func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewLinearLR(o, 0.1, 1, 5) }},
		{"CosineAnnealingWarmRestarts", false, func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewCosineAnnealingWarmRestarts(o, 3, 2, 0)
		}},
		{"SequentialLR", false, func(o optim.Optimizer) (*optim.Schedule, error) {
			a, err := optim.NewLinearLR(o, 0.1, 1, 3)
			if err != nil {
				return nil, err
			}
			b, err := optim.NewCosineAnnealingLR(o, 10, 0)
			if err != nil {
				return nil, err
			}
			return optim.NewSequentialLR(o, []*optim.Schedule{a, b}, []int{3})
		}},
		{"MultiplicativeLR", true, func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewMultiplicativeLR(o, func(int) float64 { return 0.99 })
		}},
		{"ChainedScheduler", true, func(o optim.Optimizer) (*optim.Schedule, error) {
			a, err := optim.NewExponentialLR(o, 0.9)
			if err != nil {
				return nil, err
			}
			b, err := optim.NewConstantLR(o, 0.5, 3)
			if err != nil {
				return nil, err
			}
			return optim.NewChainedScheduler([]*optim.Schedule{a, b})
		}},
		{"SequentialLR of a MultiplicativeLR", true, func(o optim.Optimizer) (*optim.Schedule, error) {
			a, err := optim.NewConstantLR(o, 0.5, 2)
			if err != nil {
				return nil, err
			}
			b, err := optim.NewMultiplicativeLR(o, func(int) float64 { return 0.99 })
			if err != nil {
				return nil, err
			}
			return optim.NewSequentialLR(o, []*optim.Schedule{a, b}, []int{2})
		}},
	}
	for _, mk := range makers {
		steps := []int{math.MaxInt, math.MaxInt - 1, 1<<53 + 1}
		if mk.replays {
			steps = append(steps, 1<<40, 1<<26+1)
		}
		for _, n := range steps {
			t.Run(mk.name, func(t *testing.T) {
				o := twoGroups(t, []float64{0.1, 0.01})
				s, err := mk.make(o)
				if err != nil {
					t.Fatal(err)
				}
				s.Step()
				before, rates := s.State(), groupLRs(o)
				err = within(t, "LoadState", func() error {
					return s.LoadState(optim.ScheduleState{Steps: n, BaseLRs: []float64{0.1, 0.01}})
				})
				if !errors.Is(err, vram.ErrArgument) {
					t.Fatalf("LoadState of %d steps: got %v, want vram.ErrArgument", n, err)
				}
				after := s.State()
				if after.Steps != before.Steps || !slices.Equal(after.BaseLRs, before.BaseLRs) || !slices.Equal(groupLRs(o), rates) {
					t.Fatalf("the refused state changed the schedule: %+v, rates %v; was %+v, %v", after, groupLRs(o), before, rates)
				}
			})
		}
	}
	// The largest count taken steps on.
	o := twoGroups(t, []float64{0.1, 0.01})
	s, err := optim.NewLinearLR(o, 0.1, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.LoadState(optim.ScheduleState{Steps: 1 << 53, BaseLRs: []float64{0.1, 0.01}}); err != nil {
		t.Fatal(err)
	}
	if err := within(t, "Step", func() error { s.Step(); return nil }); err != nil {
		t.Fatal(err)
	}
	if got := groupLRs(o); !slices.Equal(got, []float64{0.1, 0.01}) {
		t.Fatalf("rates %v after the warm-up, want [0.1 0.01]", got)
	}
}

// TestPlateauLoadStateRefusesHugeCounts checks that ReduceLROnPlateau
// refuses counts that its Step would count past the largest int from,
// changing nothing.
func TestPlateauLoadStateRefusesHugeCounts(t *testing.T) {
	o := twoGroups(t, []float64{0.1, 0.01})
	r, err := optim.NewReduceLROnPlateau(o, optim.DefaultPlateauConfig())
	if err != nil {
		t.Fatal(err)
	}
	r.Step(1)
	for _, st := range []optim.PlateauState{
		{Best: 1, Steps: math.MaxInt},
		{Best: 1, Steps: 1<<53 + 1},
		{Best: 1, NumBadEpochs: math.MaxInt},
	} {
		before := r.State()
		if err := r.LoadState(st); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("LoadState(%+v): got %v, want vram.ErrArgument", st, err)
		}
		if r.State() != before {
			t.Errorf("LoadState(%+v) changed the state", st)
		}
	}
}
