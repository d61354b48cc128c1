package optim_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/safetensors"
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

// TestLoadRefusesCraftedState checks that Load refuses a file edited to
// hold a state no optimizer saves, for optimizers of every kind, with an
// error matching vram.ErrArgument, and changes nothing: the optimizer
// saves the same file before and after.
func TestLoadRefusesCraftedState(t *testing.T) {
	dir := t.TempDir()
	makers := map[string]func(a, b []*vram.Tensor) (optim.Optimizer, error){}
	for _, tc := range roundTripCases() {
		makers[tc.name] = tc.make
	}
	f64 := func(v float64) safetensors.Tensor {
		return safetensors.Tensor{DType: "F64", Data: binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))}
	}
	type edit func(ts map[string]safetensors.Tensor, md map[string]string)
	setKey := func(key string, st safetensors.Tensor) edit {
		return func(ts map[string]safetensors.Tensor, _ map[string]string) { ts[key] = st }
	}
	replace := func(old, new string) edit {
		return func(_ map[string]safetensors.Tensor, md map[string]string) {
			if !strings.Contains(md["param_groups"], old) {
				panic(fmt.Sprintf("no %s in %s", old, md["param_groups"]))
			}
			md["param_groups"] = strings.Replace(md["param_groups"], old, new, 1)
		}
	}
	tests := []struct {
		name, opt string
		edit      edit
		want      string
	}{
		{"negative mu_product", "NAdam", setKey("state.0.mu_product", f64(-0.5)), "mu_product -0.5"},
		{"NaN mu_product", "NAdam", setKey("state.0.mu_product", f64(math.NaN())), "mu_product NaN"},
		{"negative eta", "ASGD", setKey("state.2.eta", f64(-0.01)), "eta -0.01"},
		{"negative mu", "ASGD", setKey("state.0.mu", f64(-1)), "mu -1"},
		{"infinite mu", "ASGD", setKey("state.0.mu", f64(math.Inf(1))), "mu +Inf"},
		{"mu_product of shape [1]", "NAdam", setKey("state.0.mu_product", safetensors.Tensor{DType: "F64", Shape: []int{1}, Data: make([]byte, 8)}),
			`"state.0.mu_product" has shape [1]`},
		{"step above 2^53", "Adagrad", setKey("state.0.step", f64(1<<53+2)), "not a whole number of steps"},
		{"NaN step", "RAdam", setKey("state.2.step", f64(math.NaN())), "not a whole number of steps"},
		{"state of another optimizer", "RMSprop", func(ts map[string]safetensors.Tensor, md map[string]string) {
			ts["state.0.momentum_buffer"] = ts["state.0.square_avg"]
			md["optimizer"] = "SGD"
		}, `"SGD", not of RMSprop`},
		{"grad_avg missing", "RMSprop", func(ts map[string]safetensors.Tensor, _ map[string]string) { delete(ts, "state.2.grad_avg") },
			`missing key "state.2.grad_avg"`},
		{"step_size misshapen", "Rprop", func(ts map[string]safetensors.Tensor, _ map[string]string) {
			ts["state.1.step_size"] = ts["state.0.step_size"]
		}, `"state.1.step_size" has shape [3], want [2, 2]`},
		{"beta2 of 1", "NAdam", replace(`"betas":[0.9,0.999]`, `"betas":[0.9,1]`), "invalid beta2 1"},
		{"one beta", "Adamax", replace(`"betas":[0.9,0.999]`, `"betas":[0.9]`), "1 values, want 2"},
		{"negative momentum", "SGD", replace(`"momentum":0.9`, `"momentum":-0.9`), "invalid momentum -0.9"},
		{"huge momentum", "RMSprop", replace(`"momentum":0.5`, `"momentum":1e400`), "momentum"},
		{"rho above 1", "Adadelta", replace(`"rho":0.8`, `"rho":1.5`), "rho"},
		{"one group for two", "Adam", func(_ map[string]safetensors.Tensor, md map[string]string) {
			var groups []map[string]any
			if err := json.Unmarshal([]byte(md["param_groups"]), &groups); err != nil {
				panic(err)
			}
			groups[0]["params"] = []int{0, 1, 2}
			b, err := json.Marshal(groups[:1])
			if err != nil {
				panic(err)
			}
			md["param_groups"] = string(b)
		}, "the file has 1 parameter groups, the optimizer 2"},
		{"parameters of the groups swapped", "AdamW", replace(`"params":[2]`, `"params":[0]`), "parameter 0 is numbered 0, want 2"},
		{"option of another optimizer", "Adagrad", replace(`"lr_decay":0.01`, `"lr_decay":0.01,"momentum":0.9`), `no hyper-parameter "momentum"`},
		{"more parameters", "Rprop", func(_ map[string]safetensors.Tensor, md map[string]string) { md["params"] = "4" },
			"for 4 parameters, the optimizer has 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			newRun := func(seed int) optim.Optimizer {
				ps := []*vram.Tensor{
					vram.Zeros(vram.Shape{3}, vram.WithGrad()),
					vram.Zeros(vram.Shape{2, 2}, vram.WithGrad()),
					vram.Zeros(vram.Shape{2}, vram.WithGrad()),
				}
				t.Cleanup(func() {
					for _, p := range ps {
						p.Release()
					}
				})
				o, err := makers[tc.opt](ps[:2], ps[2:])
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { optim.Release(o) })
				for s := range 2 {
					vram.Tidy(func() {
						for k, p := range ps {
							vals := make([]float64, p.NumElements())
							for i := range vals {
								vals[i] = math.Cos(float64(seed+5*s+3*k+i)) + 0.2
							}
							setGrad(p, vals...)
						}
						o.Step()
						o.ZeroGrad()
					})
				}
				return o
			}
			src := newRun(0)
			good := filepath.Join(dir, tc.opt+".safetensors")
			if err := optim.Save(src, good); err != nil {
				t.Fatal(err)
			}
			ts, md := readCheckpoint(t, good)
			tc.edit(ts, md)
			bad := filepath.Join(dir, "bad.safetensors")
			writeCheckpoint(t, bad, ts, md)

			o := newRun(11)
			before := filepath.Join(dir, "before.safetensors")
			if err := optim.Save(o, before); err != nil {
				t.Fatal(err)
			}
			mem := vram.MemoryAllocated(vram.CPU)
			var err error
			if p := vram.Catch(func() { err = optim.Load(o, bad) }); p != nil {
				t.Fatalf("Load panicked: %v", p)
			}
			if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: got %v, want an error about %q matching vram.ErrArgument", err, tc.want)
			}
			// Finalizers of tensors dropped by earlier tests may free
			// memory meanwhile, but none is left allocated.
			if got := vram.MemoryAllocated(vram.CPU); got > mem {
				t.Errorf("the refused load left %d bytes allocated, %d before", got, mem)
			}
			after := filepath.Join(dir, "after.safetensors")
			if err := optim.Save(o, after); err != nil {
				t.Fatal(err)
			}
			b1, err := os.ReadFile(before)
			if err != nil {
				t.Fatal(err)
			}
			b2, err := os.ReadFile(after)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b1, b2) {
				t.Errorf("the refused load changed the optimizer's state")
			}
		})
	}
}

// writeCheckpoint writes tensors and metadata to path as a safetensors
// file.
func writeCheckpoint(t *testing.T, path string, ts map[string]safetensors.Tensor, md map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(f, ts, md); err != nil {
		f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
