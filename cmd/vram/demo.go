package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend"
	cudabackend "github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/internal/dataset"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"

	"github.com/vramgo/vram/internal/units"
)

// Defaults of "vram demo". With these the classifier reaches about 97-99%
// held-out accuracy on the default spirals (whatever the seed), in a few
// seconds on two cores.
const (
	demoSteps  = 600  // optimizer steps
	demoBatch  = 64   // examples per step
	demoHidden = 64   // width of both hidden layers
	demoLR     = 0.01 // AdamW's peak learning rate, decayed to zero along a cosine
)

// demoOptions are the flags of "vram demo".
type demoOptions struct {
	device string
	steps  int
	batch  int
	seed   uint64
	json   bool
}

// demoResult is what "vram demo" reports; --json prints it as is.
type demoResult struct {
	Device       string `json:"device"`
	DeviceReason string `json:"device_reason"`
	Steps        int    `json:"steps"`
	Batch        int    `json:"batch"` // examples per step, as trained
	// BatchRequested is the --batch asked for when it was more than the
	// training examples, and so cut to them; 0 otherwise.
	BatchRequested int    `json:"batch_requested,omitempty"`
	Seed           uint64 `json:"seed"`
	Model          string `json:"model"`
	Parameters     int    `json:"parameters"`
	TrainExamples  int    `json:"train_examples"`
	TestExamples   int    `json:"test_examples"`
	// ShapeOnly is set when the device keeps no data (a sim device with
	// VRAM_SIM_SHAPE_ONLY=1): only memory is measured, and the loss and
	// accuracies are null.
	ShapeOnly     bool     `json:"shape_only"`
	FinalLoss     *float64 `json:"final_loss"`     // mean loss of the last step's batch
	TrainAccuracy *float64 `json:"train_accuracy"` // on the whole training split
	Accuracy      *float64 `json:"accuracy"`       // on the held-out test split
	// Notes say where the run differs from what was asked.
	Notes      []string `json:"notes,omitempty"`
	DurationMS int64    `json:"duration_ms"` // data, training and evaluation
	// KernelModules is how many CUDA kernel modules NVRTC compiled during
	// the run (0 when the disk cache had them all, and on other devices);
	// KernelCompileMS the CPU time that took, summed over threads.
	KernelModules   int        `json:"kernel_modules_compiled"`
	KernelCompileMS int64      `json:"kernel_compile_ms"`
	PeakBytes       int64      `json:"peak_bytes"` // highest live storage of any phase
	Phases          demoPhases `json:"phases"`
	// StepEndBytes is the live storage after the first and after the last
	// step's Tidy: equal when memory stays flat.
	StepEndBytes struct {
		First int64 `json:"first"`
		Last  int64 `json:"last"`
	} `json:"step_end_bytes"`
	LeakedStorages int64 `json:"leaked_storages"` // freed by the GC backstop rather than Release
}

// demoPhases holds the memory of each phase of a training step, and of the
// evaluation.
type demoPhases struct {
	Forward   phaseMemory `json:"forward"`
	Backward  phaseMemory `json:"backward"`
	Optimizer phaseMemory `json:"optimizer"`
	Eval      phaseMemory `json:"eval"`
}

// phaseMemory is vram's accounting of live storage bytes around one phase.
type phaseMemory struct {
	PeakBytes   int64 `json:"peak_bytes"`   // highest live storage during the phase, over all steps
	BeforeBytes int64 `json:"before_bytes"` // live storage when the phase started, last step
	AfterBytes  int64 `json:"after_bytes"`  // live storage when the phase ended, last step
}

// measure runs fn as one phase on dev and records its memory in m.
func (m *phaseMemory) measure(dev vram.Device, fn func()) {
	vram.ResetPeakMemoryStats(dev)
	m.BeforeBytes = vram.MemoryAllocated(dev)
	fn()
	m.AfterBytes = vram.MemoryAllocated(dev)
	m.PeakBytes = max(m.PeakBytes, vram.MaxMemoryAllocated(dev))
}

func newDemoCmd() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Train a small classifier on generated spirals and report accuracy, time and memory per phase",
		Long: `Demo trains a multilayer perceptron (two hidden layers of 64 ReLU units) with AdamW
and cross-entropy on three interleaved spirals with two distractor features, then
reports the held-out accuracy, the time taken and the memory of each phase of a
training step (forward, backward, optimizer) by vram's own accounting of live
tensor storage. Every step runs inside vram.Tidy, so memory stays flat.

The same --seed gives the same loss and accuracy on any number of cores.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.device, "device", "auto", "`DEVICE` to train on: \"auto\" (cuda:0 when CUDA is available, else cpu), cpu, cuda, cuda:N, sim:N")
	f.IntVar(&o.steps, "steps", demoSteps, "take `N` optimizer steps (> 0)")
	f.IntVar(&o.batch, "batch", demoBatch, "train on `N` examples per step (> 0; more than the training examples trains on all of them, with a note)")
	f.Uint64Var(&o.seed, "seed", 1, "seed the data, the initial weights and the batch order with `N` (0 or more)")
	f.BoolVar(&o.json, "json", false, "print one JSON object on stdout and no progress bar")
	return cmd
}

// chooseDevice resolves the --device flag to a usable device and says why
// it was chosen. A device that is not there is a usage error (a sim index
// past those configured, a GPU index past the machine's), except a GPU on
// a machine without CUDA, which fails as replay --device does.
func chooseDevice(flag string) (vram.Device, string, error) {
	if strings.TrimSpace(flag) == "auto" {
		if vram.CUDAAvailable() {
			return vram.CUDA(0), "CUDA is available: " + count(vram.DeviceCount(), "GPU", "GPUs"), nil
		}
		return vram.CPU, "no CUDA device found", nil
	}
	d, err := parseDeviceFlag(flag)
	if err != nil {
		return vram.Device{}, "", err
	}
	if err := d.Check(); err != nil {
		// The backend's own reason when it gives one (no driver, a bad
		// setting), else vram's (the index is out of range).
		why := err.Error()
		var ve *vram.Error
		if errors.As(err, &ve) {
			why = strings.TrimPrefix(ve.Detail, d.String()+": ")
			if ve.Err != nil {
				why = ve.Err.Error()
			}
		}
		err = fmt.Errorf("demo: --device %s: device not available: %s (available here: %s)", d, why, strings.Join(availableDevices(), ", "))
		if d.IsCUDA() && !vram.CUDAAvailable() {
			// No GPU on this machine: no command line would give one.
			return vram.Device{}, "", err
		}
		return vram.Device{}, "", &usageError{err}
	}
	return d, "--device " + flag, nil
}

// parseDeviceFlag parses a --device other than "auto"; a malformed one is
// a usage error.
func parseDeviceFlag(flag string) (vram.Device, error) {
	d, err := vram.ParseDevice(flag)
	if err != nil {
		return vram.Device{}, usagef("demo: --device: %s", strings.TrimPrefix(err.Error(), "vram: "))
	}
	return d, nil
}

// availableDevices lists the devices this program can use: those that
// open, so that the list agrees with what --device accepts.
func availableDevices() []string {
	out := []string{vram.CPU.String()}
	for i := range vram.DeviceCount() {
		if vram.CUDA(i).Available() {
			out = append(out, vram.CUDA(i).String())
		}
	}
	for i := range vram.SimDeviceCount() {
		if vram.Sim(i).Available() {
			out = append(out, vram.Sim(i).String())
		}
	}
	return out
}

// shapeOnly reports whether dev keeps no data (a sim device with
// VRAM_SIM_SHAPE_ONLY=1), so that values read from it are not computed.
func shapeOnly(dev vram.Device) bool {
	b, ok := backend.Lookup(dev.Kind)
	if !ok {
		return false
	}
	bd, err := b.Device(dev.Index)
	so, ok := bd.(interface{ ShapeOnly() bool })
	return err == nil && ok && so.ShapeOnly()
}

func runDemo(ctx context.Context, o demoOptions, stdout, stderr io.Writer) error {
	if o.steps <= 0 {
		return usagef("demo: --steps must be positive, got %d", o.steps)
	}
	if o.batch <= 0 {
		return usagef("demo: --batch must be positive, got %d", o.batch)
	}
	// A malformed --device is a bad command line whatever the environment;
	// whether the device is there depends on the settings checked next.
	if strings.TrimSpace(o.device) != "auto" {
		if _, err := parseDeviceFlag(o.device); err != nil {
			return err
		}
	}
	// The demo allocates on a device: its settings must be valid.
	if err := checkEnvironment(); err != nil {
		return cmdError("demo", err)
	}
	dev, reason, err := chooseDevice(o.device)
	if err != nil {
		return err
	}
	var bar *progressbar.ProgressBar
	if !o.json && isTerminal(stderr) {
		bar = progressbar.NewOptions(o.steps,
			progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription("training"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	var res *demoResult
	// Tensor operations panic with vram's typed errors; Catch turns them
	// back into an error for this command to report.
	if cerr := vram.Catch(func() { res, err = train(ctx, o, dev, bar) }); cerr != nil {
		err = cerr
	}
	if bar != nil {
		bar.Exit()
	}
	if err != nil {
		return err
	}
	res.DeviceReason = reason
	if o.json {
		return writeJSON(stdout, res)
	}
	return printDemo(stdout, res)
}

// train runs the demo on dev and returns its result.
func train(ctx context.Context, o demoOptions, dev vram.Device, bar *progressbar.ProgressBar) (*demoResult, error) {
	start := time.Now()
	modsBefore, tookBefore := cudabackend.CompileStats()
	leakedBefore := vram.Storage(dev).Leaked
	trainSet, testSet, err := dataset.Spirals(dataset.Config{Seed: o.seed})
	if err != nil {
		return nil, err
	}
	// Every random number of the run comes from the seed: the data above,
	// the initial weights here and the batch order below.
	vram.ManualSeed(o.seed)
	nf, nc := trainSet.NumFeatures, trainSet.NumClasses
	model := nn.NewSequential(
		nn.NewLinear(nf, demoHidden, dev),
		nn.NewReLU(),
		nn.NewLinear(demoHidden, demoHidden, dev),
		nn.NewReLU(),
		nn.NewLinear(demoHidden, nc, dev),
	)
	defer nn.Release(model)
	params := model.Parameters()
	opt, err := optim.NewAdamW(params, optim.AdamConfig{LR: demoLR})
	if err != nil {
		return nil, err
	}
	defer opt.Release()
	res := &demoResult{
		Device: dev.String(), Steps: o.steps, Batch: o.batch, Seed: o.seed,
		Model:         fmt.Sprintf("MLP %d-%d-%d-%d, ReLU, AdamW lr %g with cosine decay", nf, demoHidden, demoHidden, nc, demoLR),
		TrainExamples: trainSet.Len(), TestExamples: testSet.Len(),
		ShapeOnly: shapeOnly(dev),
	}
	if n := trainSet.Len(); o.batch > n {
		// A batch holds each training example at most once.
		res.Batch, res.BatchRequested = n, o.batch
		res.Notes = append(res.Notes, fmt.Sprintf("--batch %d is more than the %d training examples: each step trained on all %d", o.batch, n, n))
	}
	if res.ShapeOnly {
		res.Notes = append(res.Notes, fmt.Sprintf("%s is shape-only (it keeps no data): memory is measured, but the loss and accuracy are not computed", dev))
	}
	for _, p := range params {
		res.Parameters += p.NumElements()
	}

	sampler := dataset.NewSampler(trainSet.Len(), res.Batch, o.seed)
	ph := &res.Phases
	for step := 1; step <= o.steps; step++ {
		if ctx.Err() != nil {
			if cause := context.Cause(ctx); !errors.Is(cause, errInterrupted) {
				return nil, fmt.Errorf("demo: stopped at step %d of %d: %w", step, o.steps, cause)
			}
			return nil, fmt.Errorf("demo: %w at step %d of %d", errInterrupted, step, o.steps)
		}
		opt.SetLR(demoLR * 0.5 * (1 + math.Cos(math.Pi*float64(step-1)/float64(o.steps))))
		var loss float64
		vram.Tidy(func() {
			opt.ZeroGrad()
			x, y := trainSet.Batch(sampler.Next(), dev)
			var l *vram.Tensor
			ph.Forward.measure(dev, func() { l = nn.CrossEntropyLoss(model.Forward(x), y) })
			ph.Backward.measure(dev, func() { l.Backward() })
			ph.Optimizer.measure(dev, func() { opt.Step() })
			loss = l.Item()
		})
		if !res.ShapeOnly {
			res.FinalLoss = &loss
		}
		if step == 1 {
			res.StepEndBytes.First = vram.MemoryAllocated(dev)
		}
		if step == o.steps {
			res.StepEndBytes.Last = vram.MemoryAllocated(dev)
		}
		if bar != nil && !res.ShapeOnly {
			bar.Describe(fmt.Sprintf("loss %.4f", loss))
			bar.Add(1)
		}
	}
	opt.ZeroGrad()

	model.Eval()
	ph.Eval.measure(dev, func() {
		train, test := accuracy(model, trainSet, dev), accuracy(model, testSet, dev)
		if !res.ShapeOnly {
			res.TrainAccuracy, res.Accuracy = &train, &test
		}
	})
	res.PeakBytes = max(ph.Forward.PeakBytes, ph.Backward.PeakBytes, ph.Optimizer.PeakBytes, ph.Eval.PeakBytes)
	res.LeakedStorages = vram.Storage(dev).Leaked - leakedBefore
	res.DurationMS = time.Since(start).Milliseconds()
	mods, took := cudabackend.CompileStats()
	res.KernelModules, res.KernelCompileMS = mods-modsBefore, (took - tookBefore).Milliseconds()
	return res, nil
}

// accuracy returns the share of set that model classifies correctly. It
// runs without recording gradients and releases everything it creates.
func accuracy(model nn.Module, set *dataset.Set, dev vram.Device) float64 {
	var acc float64
	vram.NoGrad(func() {
		vram.Tidy(func() {
			x, y := set.Tensors(dev)
			pred := model.Forward(x).ArgMax(1, false)
			acc = pred.Eq(y).Float().Mean().Item()
		})
	})
	return acc
}

// printDemo writes the result for a person to read.
func printDemo(w io.Writer, r *demoResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "device:\t%s (%s)\n", r.Device, r.DeviceReason)
	fmt.Fprintf(tw, "model:\t%s, %s\n", r.Model, count(r.Parameters, "parameter", "parameters"))
	fmt.Fprintf(tw, "training:\t%s of %s, seed %d, %s\n", count(r.Steps, "step", "steps"), count(r.Batch, "example", "examples"), r.Seed, count(r.TrainExamples, "training example", "training examples"))
	if r.FinalLoss != nil && r.Accuracy != nil && r.TrainAccuracy != nil {
		fmt.Fprintf(tw, "final loss:\t%.4f (last batch)\n", *r.FinalLoss)
		fmt.Fprintf(tw, "accuracy:\t%.2f%% on %s (%.2f%% on the training split)\n", 100**r.Accuracy, count(r.TestExamples, "held-out example", "held-out examples"), 100**r.TrainAccuracy)
	} else {
		fmt.Fprintf(tw, "final loss:\tnot computed (%s keeps no data)\n", r.Device)
		fmt.Fprintf(tw, "accuracy:\tnot computed (%s keeps no data)\n", r.Device)
	}
	fmt.Fprintf(tw, "time:\t%s\n", (time.Duration(r.DurationMS) * time.Millisecond).String())
	if r.KernelModules > 0 {
		fmt.Fprintf(tw, "\t(first run on this machine: %s compiled, in %s; they are cached for the next runs)\n",
			count(r.KernelModules, "CUDA kernel module", "CUDA kernel modules"), (time.Duration(r.KernelCompileMS) * time.Millisecond).String())
	}
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "note:\t%s\n", n)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nmemory on %s by vram's accounting of live tensor storage\n", r.Device)
	fmt.Fprintf(w, "(peak: the highest during the phase over all steps; before, after: in the last step)\n")
	fmt.Fprintf(w, "  %-16s%12s%12s%12s\n", "phase", "peak", "before", "after")
	for _, p := range []struct {
		name string
		m    phaseMemory
	}{
		{"forward", r.Phases.Forward},
		{"backward", r.Phases.Backward},
		{"optimizer step", r.Phases.Optimizer},
		{"evaluation", r.Phases.Eval},
	} {
		fmt.Fprintf(w, "  %-16s%12s%12s%12s\n", p.name, units.Bytes(p.m.PeakBytes), units.Bytes(p.m.BeforeBytes), units.Bytes(p.m.AfterBytes))
	}
	flat := "flat"
	if r.StepEndBytes.First != r.StepEndBytes.Last {
		flat = "NOT flat"
	}
	fmt.Fprintf(w, "  overall peak %s; after each step %s (first) and %s (last): %s\n",
		units.Bytes(r.PeakBytes), units.Bytes(r.StepEndBytes.First), units.Bytes(r.StepEndBytes.Last), flat)
	if r.LeakedStorages > 0 {
		fmt.Fprintf(w, "  %s never released and freed by the garbage collector\n", count(r.LeakedStorages, "storage was", "storages were"))
	}
	return nil
}
