package main

import (
	"fmt"
	"os"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
	"github.com/vramgo/vram/tune"
)

// findBatchOptions bound the search on a 141 GB H200 to well under a
// minute: from batch 4096, doubling to at most 2^21 rows (10 trials; the
// MLP step needs roughly 100-200 KB a row, so the first failure comes
// near 2^20), then six bisections, which place the answer within 1/64 of
// the last doubling. Each trial is one step of at most a few hundred
// TFLOP at the card's bf16 rate: about a second.
var findBatchOptions = tune.Options{Mode: tune.BinSearch, Init: 4096, MaxBatch: 1 << 21, MaxTrials: 16}

// findBatchResult is what the FindBatchSize benchmark reports.
type findBatchResult struct {
	batch  int
	report tune.Report
	search time.Duration
	stepMs float64 // one step at the batch found, after the search
}

// findBatchRun searches on dev for the largest batch of the MLP training
// step of benchMLP (4 × Linear 4096 + ReLU, MSE, AdamW) under bf16
// autocast with float32 master weights, then runs and times one step at
// that batch; sync waits for dev. It returns the search's error, or the
// step's at the batch found.
func findBatchRun(dev vram.Device, opts tune.Options, sync func()) (findBatchResult, error) {
	const width = 4096
	g := vram.NewGenerator(1)
	var mods []nn.Module
	for i := range 4 {
		mods = append(mods, nn.NewLinear(width, width, dev, vram.WithGenerator(g)))
		if i < 3 {
			mods = append(mods, nn.NewReLU())
		}
	}
	model := nn.NewSequential(mods...)
	opt, err := optim.NewAdamW(model.Parameters(), optim.AdamConfig{LR: 1e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
	must(err)
	step := func(batch int) error {
		opt.ZeroGrad() // a trial that ran out of memory may leave some
		// Inputs made on the device (no host copy of gigabytes), released
		// by the search's Tidy.
		x := vram.Full(vram.Shape{batch, width}, 0.5, dev)
		y := vram.Zeros(vram.Shape{batch, width}, dev)
		var loss *vram.Tensor
		amp.Autocast(vram.BFloat16, func() { loss = nn.MSELoss(model.Forward(x), y) })
		loss.Backward()
		opt.Step()
		opt.ZeroGrad()
		sync()
		return nil
	}
	defer func() {
		opt.ZeroGrad()
		opt.Release()
		nn.Release(model)
		vram.EmptyCache(dev)
	}()
	t0 := time.Now()
	batch, rep, err := tune.FindBatchSize(dev, step, opts)
	res := findBatchResult{batch: batch, report: rep, search: time.Since(t0)}
	if err != nil {
		return res, err
	}
	t0 = time.Now()
	if err := vram.Catch(func() { vram.Tidy(func() { _ = step(batch) }) }); err != nil {
		return res, fmt.Errorf("the step at batch %d, after the search: %w", batch, err)
	}
	res.stepMs = float64(time.Since(t0).Microseconds()) / 1000
	return res, nil
}

// benchFindBatch runs the FindBatchSize search on cuda:0 and reports the
// batch it found, how long the search took and one step at that batch.
func benchFindBatch() {
	dev := vram.CUDA(0)
	r, err := findBatchRun(dev, findBatchOptions, func() { must(vram.Synchronize(dev)) })
	if err != nil {
		// Reported, not fatal: the benchmarks after this one still run.
		fmt.Fprintf(os.Stderr, "vram-bench: findbatch: %v (trials: %+v)\n", err, r.report.Trials)
		return
	}
	// The smallest batch that ran out of memory bounds the answer from above.
	fail := 0
	for _, t := range r.report.Trials {
		if !t.Fit && (fail == 0 || t.Batch < fail) {
			fail = t.Batch
		}
	}
	emit("findbatch_mlp_bf16_batch", float64(r.batch), "rows", fmt.Sprintf(
		"largest batch of the bf16-autocast MLP step (4 x Linear 4096 + ReLU, MSE, AdamW) that fit; smallest that did not: %d (0: none); binsearch from 4096, at most 2^21, 16 trials, stopped at the trial limit: %v",
		fail, r.report.Exhausted))
	emit("findbatch_mlp_bf16_trials", float64(len(r.report.Trials)), "steps", "trials the search ran")
	emit("findbatch_mlp_bf16_search", r.search.Seconds(), "s", "wall time of tune.FindBatchSize")
	emit("findbatch_mlp_bf16_step_at_batch", r.stepMs, "ms", "one step at the batch found, after the search")
}
