package amp_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	"github.com/vramgo/vram/data"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// trainer is everything a training run keeps between steps: a model with
// dropout, an optimizer, a schedule (or a plateau scheduler), a loss
// scaler, and a shuffling loader with a generator of its own.
type trainer struct {
	model   *nn.Sequential
	opt     optim.Optimizer
	sched   *optim.Schedule
	plateau *optim.ReduceLROnPlateau
	scaler  *amp.GradScaler
	loader  *data.Loader
	gen     *vram.Generator // the loader's
	steps   int
	// the epoch in progress: the loader's generator's state when it
	// began, the batches done, the sum of their losses
	epochStart []byte
	batch      int
	epochLoss  float64
	rngEnd     []byte // the CPU's default generator's state after train
	devRNGEnd  []byte // the device's default generator's state after train
	dev        vram.Device
}

// resumeCase is one optimizer and schedule of the resume test.
type resumeCase struct {
	name  string
	opt   func(ps []*vram.Tensor) (optim.Optimizer, error)
	sched func(opt optim.Optimizer) (*optim.Schedule, error) // nil: ReduceLROnPlateau
}

// extraState is what a checkpoint holds beside the model's and the
// optimizer's files.
type extraState struct {
	Sched   *optim.ScheduleState `json:"scheduler,omitempty"`
	Plateau *optim.PlateauState  `json:"plateau,omitempty"`
	Scaler  amp.GradScalerState  `json:"scaler"`
	RNG     []byte               `json:"rng_state"`
	DevRNG  []byte               `json:"device_rng_state"` // the device's own generator (dropout there)
	Loader  []byte               `json:"loader_rng_state"` // from the start of the epoch
	Batch   int                  `json:"batch"`            // batches done of the epoch
	Loss    float64              `json:"epoch_loss"`
	Steps   int                  `json:"steps"`
}

// newTrainer builds a run from scratch on dev; seed sets the default
// generator first, so that runs built with different seeds start with
// different weights.
func newTrainer(t *testing.T, dev vram.Device, c resumeCase, ds data.Dataset, seed uint64) *trainer {
	t.Helper()
	vram.ManualSeed(seed)
	model := nn.NewSequential(nn.NewLinear(4, 8), nn.NewReLU(), nn.NewDropout(0.25), nn.NewLinear(8, 1))
	model.To(dev)
	tr := &trainer{model: model, gen: vram.NewGenerator(seed + 1), dev: dev}
	var err error
	if tr.opt, err = c.opt(model.Parameters()); err != nil {
		t.Fatal(err)
	}
	if c.sched != nil {
		if tr.sched, err = c.sched(tr.opt); err != nil {
			t.Fatal(err)
		}
	} else {
		cfg := optim.DefaultPlateauConfig()
		cfg.Patience, cfg.Factor = 1, 0.5
		if tr.plateau, err = optim.NewReduceLROnPlateau(tr.opt, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if tr.scaler, err = amp.NewGradScaler(amp.GradScalerConfig{InitScale: 1024, GrowthInterval: 3}); err != nil {
		t.Fatal(err)
	}
	if tr.loader, err = data.NewLoader(ds, 4, data.Options{Shuffle: true, Generator: tr.gen, Device: dev}); err != nil {
		t.Fatal(err)
	}
	return tr
}

func (tr *trainer) release() {
	nn.Release(tr.model)
	if r, ok := tr.opt.(interface{ Release() }); ok {
		r.Release()
	}
}

// train runs steps more steps, resuming the epoch where the run stopped.
func (tr *trainer) train(t *testing.T, steps int) {
	t.Helper()
	params := tr.model.Parameters()
	for steps > 0 {
		if tr.batch == 0 {
			// The loader draws an epoch's order from its generator when
			// the epoch starts: keep its state from then, to resume the
			// epoch.
			tr.epochStart = tr.gen.State()
		}
		for b, err := range tr.loader.AllFrom(tr.batch) {
			if err != nil {
				t.Fatal(err)
			}
			vram.Tidy(func() {
				tr.opt.ZeroGrad()
				var loss *vram.Tensor
				amp.Autocast(vram.BFloat16, func() {
					loss = nn.MSELoss(tr.model.Forward(b.Tensors[0]), b.Tensors[1])
				})
				tr.scaler.Scale(loss).Backward()
				tr.scaler.Step(tr.opt, params)
				tr.scaler.Update()
				if tr.sched != nil {
					tr.sched.Step()
				}
				tr.epochLoss += loss.Item()
			})
			tr.steps++
			tr.batch++
			if steps--; steps == 0 {
				break
			}
		}
		if tr.batch == tr.loader.Len() {
			if tr.plateau != nil {
				tr.plateau.Step(tr.epochLoss)
			}
			tr.batch, tr.epochLoss = 0, 0
		}
	}
	tr.rngEnd = vram.RNGState()
	tr.devRNGEnd = mustRNGStateDevice(t, tr.dev)
}

// save writes a checkpoint to dir, as a user would.
func (tr *trainer) save(t *testing.T, dir string) {
	t.Helper()
	if err := nn.Save(tr.model, filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	if err := optim.Save(tr.opt, filepath.Join(dir, "optim.safetensors")); err != nil {
		t.Fatal(err)
	}
	ex := extraState{Scaler: tr.scaler.State(), RNG: vram.RNGState(), DevRNG: mustRNGStateDevice(t, tr.dev), Loader: tr.gen.State(), Steps: tr.steps}
	if tr.batch > 0 {
		ex.Loader, ex.Batch, ex.Loss = tr.epochStart, tr.batch, tr.epochLoss
	}
	if tr.sched != nil {
		st := tr.sched.State()
		ex.Sched = &st
	} else {
		st := tr.plateau.State()
		ex.Plateau = &st
	}
	b, err := json.Marshal(ex)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "extra.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// load reads a checkpoint from dir into a run built afresh.
func (tr *trainer) load(t *testing.T, c resumeCase, dir string) {
	t.Helper()
	if err := nn.Load(tr.model, filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	if err := optim.Load(tr.opt, filepath.Join(dir, "optim.safetensors")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "extra.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ex extraState
	if err := json.Unmarshal(b, &ex); err != nil {
		t.Fatal(err)
	}
	if c.sched != nil {
		// The schedule is made again after the optimizer is loaded.
		if tr.sched, err = c.sched(tr.opt); err != nil {
			t.Fatal(err)
		}
		if err := tr.sched.LoadState(*ex.Sched); err != nil {
			t.Fatal(err)
		}
	} else if err := tr.plateau.LoadState(*ex.Plateau); err != nil {
		t.Fatal(err)
	}
	if err := tr.scaler.LoadState(ex.Scaler); err != nil {
		t.Fatal(err)
	}
	if err := vram.SetRNGState(ex.RNG); err != nil {
		t.Fatal(err)
	}
	if err := vram.SetRNGStateDevice(tr.dev, ex.DevRNG); err != nil {
		t.Fatal(err)
	}
	if err := tr.gen.SetState(ex.Loader); err != nil {
		t.Fatal(err)
	}
	tr.steps, tr.batch, tr.epochLoss = ex.Steps, ex.Batch, ex.Loss
}

// optimBytes returns the contents of the optimizer's checkpoint of tr.
func optimBytes(t *testing.T, tr *trainer) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "o.safetensors")
	if err := optim.Save(tr.opt, p); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestResumeTraining: a run saved after N steps and resumed in objects
// built afresh from the files (model, optimizer, schedule, loss scaler,
// random states) ends bit for bit where the run that never stopped ends
// after 2N: the same weights, optimizer state, rates, scale, and next
// random draws of the default and the loader's generators.
func TestResumeTraining(t *testing.T) {
	defer vram.ManualSeed(0)
	g := vram.NewGenerator(100)
	x := vram.Randn(vram.Shape{12, 4}, vram.WithGenerator(g))
	y := vram.Randn(vram.Shape{12, 1}, vram.WithGenerator(g))
	defer x.Release()
	defer y.Release()
	ds, err := data.NewTensorDataset(x, y)
	if err != nil {
		t.Fatal(err)
	}
	adamw := func(ps []*vram.Tensor) (optim.Optimizer, error) {
		return optim.NewAdamW(ps, optim.AdamConfig{LR: 1e-2, WeightDecay: 0.01})
	}
	cases := []resumeCase{
		{"AdamW/StepLR", adamw, func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewStepLR(o, 2, 0.5) }},
		{"AdamW/Cosine", adamw, func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewCosineAnnealingLR(o, 10, 1e-4) }},
		{"AdamW/OneCycle", adamw, func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewOneCycleLR(o, 5e-2, 12, optim.OneCycleOptions{})
		}},
		{"AdamW/Sequential", adamw, func(o optim.Optimizer) (*optim.Schedule, error) {
			warm, err := optim.NewLinearLR(o, 0.1, 1, 4)
			if err != nil {
				return nil, err
			}
			cos, err := optim.NewCosineAnnealingLR(o, 8, 0)
			if err != nil {
				return nil, err
			}
			return optim.NewSequentialLR(o, []*optim.Schedule{warm, cos}, []int{4})
		}},
		{"AdamW/Chained", adamw, func(o optim.Optimizer) (*optim.Schedule, error) {
			c, err := optim.NewConstantLR(o, 0.5, 5)
			if err != nil {
				return nil, err
			}
			e, err := optim.NewExponentialLR(o, 0.9)
			if err != nil {
				return nil, err
			}
			return optim.NewChainedScheduler([]*optim.Schedule{c, e})
		}},
		{"AdamW/Plateau", adamw, nil},
		{"SGD momentum/MultiStep", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 1e-2, Momentum: 0.9, Nesterov: true})
		}, func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewMultiStepLR(o, []int{3, 7}, 0.5) }},
		{"RMSprop/Cyclic", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewRMSprop(ps, optim.RMSpropConfig{LR: 1e-3, Alpha: 0.99, Eps: 1e-8, Momentum: 0.5, Centered: true})
		}, func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewCyclicLR(o, 1e-3, 1e-2, optim.CyclicOptions{StepSizeUp: 3})
		}},
		{"Adagrad/Polynomial", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdagrad(ps, optim.AdagradConfig{LR: 1e-2, LRDecay: 0.01, Eps: 1e-10})
		}, func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewPolynomialLR(o, 10, 2) }},
	}
	// Epochs have 3 steps: stop within the second epoch on the CPU, at the
	// end of the first on sim.
	for _, at := range []struct {
		dev  vram.Device
		stop int
	}{{vram.CPU, 4}, {vram.Sim(0), 3}} {
		dev := at.dev
		for i, c := range cases {
			if dev != vram.CPU && i%3 != 0 {
				continue // a third of the cases suffice on sim
			}
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				whole := newTrainer(t, dev, c, ds, 1)
				defer whole.release()
				whole.train(t, 2*at.stop)

				dir := t.TempDir()
				first := newTrainer(t, dev, c, ds, 1)
				first.train(t, at.stop)
				first.save(t, dir)
				first.release()
				vram.ManualSeed(12345) // whatever the new process draws

				resumed := newTrainer(t, dev, c, ds, 7)
				defer resumed.release()
				resumed.load(t, c, dir)
				resumed.train(t, at.stop)

				compareRuns(t, whole, resumed)
			})
		}
	}
}

// compareRuns fails t unless the runs a and b are in the same state.
func compareRuns(t *testing.T, a, b *trainer) {
	t.Helper()
	pa, pb := a.model.Parameters(), b.model.Parameters()
	for i := range pa {
		wa, wb := pa[i].Float32s(), pb[i].Float32s()
		if !slices.EqualFunc(wa, wb, func(u, v float32) bool { return math.Float32bits(u) == math.Float32bits(v) }) {
			t.Errorf("parameter %d: resumed %v, want %v", i, wb, wa)
		}
	}
	if !bytes.Equal(optimBytes(t, a), optimBytes(t, b)) {
		t.Errorf("the optimizers' states differ")
	}
	if la, lb := a.opt.LR(), b.opt.LR(); la != lb {
		t.Errorf("learning rate: resumed %v, want %v", lb, la)
	}
	if a.sched != nil {
		if sa, sb := a.sched.State(), b.sched.State(); !slices.Equal(sa.LastLRs, sb.LastLRs) || sa.Steps != sb.Steps {
			t.Errorf("schedule: resumed %+v, want %+v", sb, sa)
		}
	} else if sa, sb := a.plateau.State(), b.plateau.State(); sa != sb {
		t.Errorf("plateau: resumed %+v, want %+v", sb, sa)
	}
	if sa, sb := a.scaler.State(), b.scaler.State(); sa != sb {
		t.Errorf("scaler: resumed %+v, want %+v", sb, sa)
	}
	if a.steps != b.steps || a.batch != b.batch {
		t.Errorf("steps, batch of the epoch: resumed %d, %d, want %d, %d", b.steps, b.batch, a.steps, a.batch)
	}
	// The next random draws: the runs drew from the default generator in
	// turn, so compare its states at the end of each run.
	if !bytes.Equal(a.rngEnd, b.rngEnd) {
		t.Errorf("the default generator's states differ")
	}
	if !bytes.Equal(a.devRNGEnd, b.devRNGEnd) {
		t.Errorf("the %s default generator's states differ", a.dev)
	}
	if !bytes.Equal(a.gen.State(), b.gen.State()) {
		t.Errorf("the loaders' generators differ")
	}
}

// mustRNGStateDevice returns the state of dev's default generator.
func mustRNGStateDevice(t *testing.T, dev vram.Device) []byte {
	t.Helper()
	st, err := vram.RNGStateDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
