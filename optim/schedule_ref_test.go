package optim_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// recursive is one of PyTorch's chainable get_lr rules: the rate of step
// e (last_epoch, from 1) from the rate of step e−1 and the base rate.
type recursive func(lr, base float64, e int) float64

// multFactor is the factor of the MultiplicativeLR of
// TestSchedulesMatchRecursiveRules.
func multFactor(e int) float64 {
	if e%2 == 1 {
		return 0.9
	}
	return 1.05
}

// TestSchedulesMatchRecursiveRules runs each schedule for 30 steps on two
// parameter groups (base rates 0.1 and 0.003) and compares every rate with
// the one PyTorch's recursive get_lr would give, applied step by step.
func TestSchedulesMatchRecursiveRules(t *testing.T) {
	const steps = 30
	tests := []struct {
		name  string
		make  func(optim.Optimizer) (*optim.Schedule, error)
		first func(base float64) float64 // the rate at step 0
		rule  recursive
	}{
		{"StepLR(4, 0.7)", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewStepLR(o, 4, 0.7) },
			func(b float64) float64 { return b },
			func(lr, _ float64, e int) float64 {
				if e%4 != 0 {
					return lr
				}
				return lr * 0.7
			}},
		{"MultiStepLR([3 3 10 25], 0.5)", func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewMultiStepLR(o, []int{25, 3, 10, 3}, 0.5)
		}, func(b float64) float64 { return b },
			func(lr, _ float64, e int) float64 {
				switch e {
				case 3:
					return lr * 0.25
				case 10, 25:
					return lr * 0.5
				}
				return lr
			}},
		{"ExponentialLR(0.93)", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewExponentialLR(o, 0.93) },
			func(b float64) float64 { return b },
			func(lr, _ float64, _ int) float64 { return lr * 0.93 }},
		{"CosineAnnealingLR(7, 1e-4)", func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewCosineAnnealingLR(o, 7, 1e-4)
		}, func(b float64) float64 { return b },
			func(lr, base float64, e int) float64 {
				const tMax, etaMin = 7.0, 1e-4
				if (e-1-7)%14 == 0 {
					return lr + (base-etaMin)*(1-math.Cos(math.Pi/tMax))/2
				}
				return (1+math.Cos(math.Pi*float64(e)/tMax))/(1+math.Cos(math.Pi*float64(e-1)/tMax))*(lr-etaMin) + etaMin
			}},
		{"LinearLR(0.2, 0.9, 12)", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewLinearLR(o, 0.2, 0.9, 12) },
			func(b float64) float64 { return b * 0.2 },
			func(lr, _ float64, e int) float64 {
				const start, end, total = 0.2, 0.9, 12.0
				if float64(e) > total {
					return lr
				}
				return lr * (1 + (end-start)/(total*start+float64(e-1)*(end-start)))
			}},
		{"LambdaLR(0.95^e)", func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewLambdaLR(o, func(e int) float64 { return math.Pow(0.95, float64(e)) })
		}, func(b float64) float64 { return b },
			func(_, base float64, e int) float64 { return base * math.Pow(0.95, float64(e)) }},
		{"ConstantLR(0.3, 6)", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewConstantLR(o, 0.3, 6) },
			func(b float64) float64 { return b * 0.3 },
			func(lr, _ float64, e int) float64 {
				if e != 6 {
					return lr
				}
				return lr * (1 / 0.3)
			}},
		{"MultiplicativeLR(0.9 odd, 1.05 even)", func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewMultiplicativeLR(o, multFactor)
		}, func(b float64) float64 { return b },
			func(lr, _ float64, e int) float64 { return lr * multFactor(e) }},
		{"PolynomialLR(9, 1.7)", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewPolynomialLR(o, 9, 1.7) },
			func(b float64) float64 { return b },
			func(lr, _ float64, e int) float64 {
				const total, power = 9.0, 1.7
				if float64(e) > total {
					return lr
				}
				return lr * math.Pow((1-float64(e)/total)/(1-float64(e-1)/total), power)
			}},
	}
	// Each schedule runs alone (its closed form) and as the one part of a
	// ChainedScheduler (its chainable rule, step after step).
	var cases []struct {
		name  string
		make  func(optim.Optimizer) (*optim.Schedule, error)
		first func(base float64) float64
		rule  recursive
	}
	for _, tc := range tests {
		cases = append(cases, tc)
		mk := tc.make
		tc.name = "chained " + tc.name
		tc.make = func(o optim.Optimizer) (*optim.Schedule, error) {
			s, err := mk(o)
			if err != nil {
				return nil, err
			}
			return optim.NewChainedScheduler([]*optim.Schedule{s})
		}
		cases = append(cases, tc)
	}
	bases := []float64{0.1, 0.003}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := []*vram.Tensor{vram.Zeros(vram.Shape{1}, vram.WithGrad()), vram.Zeros(vram.Shape{1}, vram.WithGrad())}
			defer ps[0].Release()
			defer ps[1].Release()
			opt, err := optim.NewSGDGroups([]optim.ParamGroup{optim.Group(ps[:1]), optim.Group(ps[1:], optim.WithLR(bases[1]))},
				optim.SGDConfig{LR: bases[0], Momentum: 0.9})
			if err != nil {
				t.Fatal(err)
			}
			s, err := tc.make(opt)
			if err != nil {
				t.Fatal(err)
			}
			want := []float64{tc.first(bases[0]), tc.first(bases[1])}
			for e := 0; e <= steps; e++ {
				if e > 0 {
					s.Step()
					for k := range want {
						want[k] = tc.rule(want[k], bases[k], e)
					}
				}
				checkValues(t, fmt.Sprintf("rates at step %d", e), s.LRs(), want, 1e-12)
			}
			checkValues(t, "base rates", s.BaseLRs(), bases, 0)
		})
	}
}

// oneCycleRef is PyTorch's OneCycleLR.get_lr for one step, written out
// for the default two phases with cosine annealing.
func oneCycleRef(maxLR float64, total int, pct float64, step int) float64 {
	initial := maxLR / 25
	final := initial / 1e4
	cos := func(from, to, p float64) float64 { return to + (from-to)/2*(1+math.Cos(math.Pi*p)) }
	end1 := pct*float64(total) - 1
	if float64(step) <= end1 {
		return cos(initial, maxLR, float64(step)/end1)
	}
	return cos(maxLR, final, (float64(step)-end1)/(float64(total-1)-end1))
}

func TestOneCycleLR(t *testing.T) {
	tests := []struct {
		name  string
		total int
		o     optim.OneCycleOptions
		want  func(step int) float64 // nil: oneCycleRef with o.PctStart
		check map[int]float64        // rates known by hand
	}{
		{"default", 30, optim.OneCycleOptions{}, nil,
			map[int]float64{0: 0.04, 8: 1, 29: 0.04 / 1e4}},
		{"pct_start 0.5", 20, optim.OneCycleOptions{PctStart: 0.5}, nil,
			map[int]float64{0: 0.04, 9: 1, 19: 0.04 / 1e4}},
		{"linear three phases", 30, optim.OneCycleOptions{PctStart: 0.25, Linear: true, ThreePhase: true, DivFactor: 10, FinalDivFactor: 100},
			func(step int) float64 {
				// phases end at 6.5, 13 and 29: 0.1 → 1 → 0.1 → 0.001
				switch s := float64(step); {
				case s <= 6.5:
					return 0.1 + 0.9*s/6.5
				case s <= 13:
					return 1 - 0.9*(s-6.5)/6.5
				default:
					return 0.1 - 0.099*min(s-13, 16)/16 // held at the final rate past the end
				}
			}, map[int]float64{0: 0.1, 13: 0.1, 29: 0.001}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opt := newSGD(t, 0.5)
			s, err := optim.NewOneCycleLR(opt, 1, tc.total, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == nil {
				pct := tc.o.PctStart
				if pct == 0 {
					pct = 0.3
				}
				want = func(step int) float64 { return oneCycleRef(1, tc.total, pct, step) }
			}
			for step := 0; step <= tc.total; step++ {
				if step > 0 {
					s.Step()
				}
				checkValues(t, fmt.Sprintf("rate at step %d", step), []float64{opt.LR()}, []float64{want(step)}, 1e-12)
				if v, ok := tc.check[step]; ok {
					checkValues(t, fmt.Sprintf("hand value at step %d", step), []float64{opt.LR()}, []float64{v}, 1e-12)
				}
			}
			lr := opt.LR()
			if err := vram.Catch(s.Step); !errors.Is(err, vram.ErrArgument) || opt.LR() != lr || s.Steps() != tc.total {
				t.Errorf("a step past the end: %v, rate %v, steps %d", err, opt.LR(), s.Steps())
			}
			if err := s.LoadState(optim.ScheduleState{Steps: tc.total + 1, BaseLRs: s.BaseLRs()}); !errors.Is(err, vram.ErrArgument) {
				t.Errorf("loading a step count past the end: %v", err)
			}
			if err := s.LoadState(optim.ScheduleState{Steps: 5, BaseLRs: s.BaseLRs()}); err != nil {
				t.Fatal(err)
			}
			checkValues(t, "rate after loading step 5", []float64{opt.LR()}, []float64{want(5)}, 1e-12)
		})
	}
}

func TestOneCycleLRErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name  string
		max   float64
		total int
		o     optim.OneCycleOptions
	}{
		{"total steps 0", 1, 0, optim.OneCycleOptions{}},
		{"total steps negative", 1, -3, optim.OneCycleOptions{}},
		{"max rate 0", 0, 10, optim.OneCycleOptions{}},
		{"max rate NaN", nan, 10, optim.OneCycleOptions{}},
		{"max rate Inf", inf, 10, optim.OneCycleOptions{}},
		{"pct_start negative", 1, 10, optim.OneCycleOptions{PctStart: -0.1}},
		{"pct_start above 1", 1, 10, optim.OneCycleOptions{PctStart: 1.5}},
		{"div factor negative", 1, 10, optim.OneCycleOptions{DivFactor: -2}},
		{"final div factor NaN", 1, 10, optim.OneCycleOptions{FinalDivFactor: nan}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opt := newSGD(t, 0.1)
			if s, err := optim.NewOneCycleLR(opt, tc.max, tc.total, tc.o); !errors.Is(err, vram.ErrArgument) {
				t.Fatalf("got %v, %v; want an error of kind ErrArgument", s, err)
			}
			if opt.LR() != 0.1 {
				t.Errorf("the rate changed to %v", opt.LR())
			}
		})
	}
}

func ExampleNewOneCycleLR() {
	p := vram.Zeros(vram.Shape{1}, vram.WithGrad())
	defer p.Release()
	opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 0.1})
	if err != nil {
		panic(err)
	}
	sched, err := optim.NewOneCycleLR(opt, 1, 10, optim.OneCycleOptions{})
	if err != nil {
		panic(err)
	}
	for step := range 10 {
		fmt.Printf("%d: %.4f\n", step, sched.LR())
		// ... a batch: opt.Step() ...
		sched.Step()
	}
	// Output:
	// 0: 0.0400
	// 1: 0.5200
	// 2: 1.0000
	// 3: 0.9505
	// 4: 0.8117
	// 5: 0.6113
	// 6: 0.3887
	// 7: 0.1883
	// 8: 0.0495
	// 9: 0.0000
}
