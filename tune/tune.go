// Package tune finds settings that fit a device: [FindBatchSize] searches
// for the largest batch whose training step does not run out of memory
// (Lightning's batch-size finder, in its "power" and "binsearch" modes).
package tune

import (
	"errors"
	"fmt"
	"math"
	"runtime"

	"github.com/vramgo/vram"
)

// Mode is how [FindBatchSize] searches.
type Mode int

const (
	// BinSearch doubles the batch until the first out-of-memory, then
	// bisects between the last batch that fit and the first that did not,
	// down to the exact largest batch that fits. It is the default.
	BinSearch Mode = iota
	// Power doubles the batch until the first out-of-memory and returns the
	// last batch that fit: fewer trials, a coarser answer. That is a
	// power-of-two multiple of Init, or MaxBatch, which is tried in place
	// of the first doubling past it; when Init itself does not fit, it is
	// the first of Init/2, Init/4, ... (rounded down) that does.
	Power
)

// String returns "binsearch" or "power".
func (m Mode) String() string {
	switch m {
	case BinSearch:
		return "binsearch"
	case Power:
		return "power"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Options tunes [FindBatchSize]. The zero value is a binsearch from batch
// 1 with no upper bound, at most 25 trials, and no margin.
type Options struct {
	Mode Mode
	// Init is the first batch tried (default 1).
	Init int
	// MaxBatch, when positive, is the largest batch tried.
	MaxBatch int
	// MaxTrials bounds the number of steps run (default 25).
	MaxTrials int
	// Margin, in (0, 1], is the fraction of the largest fitting batch
	// returned, to leave room for what the search did not see (longer
	// sequences, fragmentation later on): 0.9 returns 90% of it. 0 means 1.
	Margin float64
}

// Trial is one step the search ran.
type Trial struct {
	Batch int
	// Fit reports whether the step ran without running out of memory.
	Fit bool
	// Err is the out-of-memory error of a step that did not fit, or, in
	// the last trial of a search that a step's other error ended, that
	// error (Fit is false then, though the batch may fit).
	Err error
}

// Report says how a search went.
type Report struct {
	Trials []Trial
	// Largest is the largest batch that fit; Batch is Largest after the
	// margin, the value FindBatchSize returns.
	Largest, Batch int
	// Exhausted reports that the search stopped at MaxTrials before it
	// had narrowed the answer down.
	Exhausted bool
}

// FindBatchSize runs step(batch) on growing batches until the first one
// that runs out of memory on dev, then (in [BinSearch] mode) bisects between
// the last batch that fit and the first that did not, and returns the
// largest batch that fit, scaled by the margin, with a report of every
// trial. A step runs out of memory when it returns an error, or panics
// with one, that matches vram.ErrOutOfMemory; any other error, returned
// or panicked with, ends the search and is returned. A runtime error (a
// nil dereference, an index out of range) or a panic whose value is not
// an error is a bug in the step: it goes on, after the step's tensors are
// released and dev's cache emptied.
//
// Each step runs inside vram.Tidy, so the tensors it creates and does not
// Keep are released even when it panics; after each step the search frees
// what the collector can reach and empties dev's cache (vram.EmptyCache),
// so that a trial starts from the memory the previous one found and the
// allocator is left as clean as before the search, however the search
// ends (a step that panics or stops its goroutine too). A step should
// release what it keeps (a model's gradients: zero them) before returning.
//
// To stop a search early (a deadline, a signal), let the step return its
// context's error: like any error that is not an out-of-memory one, it
// ends the search and is returned, with the trials so far in the report.
//
// It returns an *vram.Error of kind vram.ErrArgument for a nil step or bad
// options, of kind vram.ErrUnavailable (from [vram.Device.Check]) for a
// device that cannot be used, and of kind vram.ErrOutOfMemory when not
// even batch 1 fits.
func FindBatchSize(dev vram.Device, step func(batch int) error, opts Options) (int, Report, error) {
	var rep Report
	if err := check(step, &opts); err != nil {
		return 0, rep, err
	}
	if err := dev.Check(); err != nil {
		return 0, rep, err
	}
	trial := func(b int) (bool, error) {
		// Deferred, so that a step that panics with a bug or stops its
		// goroutine leaves no cached memory behind either.
		defer clean(dev)
		err := run(step, b)
		rep.Trials = append(rep.Trials, Trial{Batch: b, Fit: err == nil, Err: err})
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, vram.ErrOutOfMemory):
			return false, nil
		}
		return false, err
	}
	low, high := 0, 0 // largest fit, smallest failure (0: none yet)
	limit := opts.MaxBatch
	if limit == 0 {
		limit = math.MaxInt // doubling stops there rather than overflowing
	}
	b := opts.Init
	for {
		if len(rep.Trials) == opts.MaxTrials {
			rep.Exhausted = true
			break
		}
		fit, err := trial(b)
		if err != nil {
			return 0, rep, err
		}
		if fit {
			low = b
		} else {
			high = b
		}
		if opts.Mode == Power && low > 0 && high > 0 {
			break // grown to a failure, or halved down to a fit
		}
		if low == limit {
			break
		}
		if high == 0 {
			if b > limit/2 {
				b = limit
			} else {
				b *= 2
			}
			continue
		}
		if high-low <= 1 {
			break
		}
		b = low + (high-low)/2
	}
	if low == 0 {
		last := rep.Trials[len(rep.Trials)-1]
		detail := fmt.Sprintf("no batch fits on %s: batch %d ran out of memory; make the model or its inputs smaller", dev, last.Batch)
		if last.Batch > 1 {
			// The trials ran out before the search reached batch 1.
			detail = fmt.Sprintf("no batch fit on %s in %d trials: the smallest tried, %d, ran out of memory; allow more trials (MaxTrials) or start lower (Init)", dev, len(rep.Trials), last.Batch)
		}
		return 0, rep, &vram.Error{Op: "find batch size", Kind: vram.ErrOutOfMemory, Detail: detail, Err: last.Err}
	}
	rep.Largest = low
	rep.Batch = low
	if f := float64(low) * opts.Margin; f < float64(low) {
		rep.Batch = max(1, int(f)) // below low, so within an int
	}
	return rep.Batch, rep, nil
}

// run runs step(b) inside vram.Tidy and returns the error it returned or
// panicked with: a panic whose value is an error (a vram error, or any
// other, wrapping vram.ErrOutOfMemory or not) is returned as if step had
// returned it, while a runtime error or a panic with a value that is not
// an error goes on, once the step's tensors are released.
func run(step func(int) error, b int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if _, bug := r.(runtime.Error); !ok || bug {
				panic(r)
			}
			err = e
		}
	}()
	vram.Tidy(func() { err = step(b) })
	return err
}

func check(step func(int) error, o *Options) error {
	bad := func(format string, args ...any) error {
		return &vram.Error{Op: "find batch size", Kind: vram.ErrArgument, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case step == nil:
		return bad("the step function is nil")
	case o.Mode != BinSearch && o.Mode != Power:
		return bad("unknown mode %d; use tune.BinSearch or tune.Power", int(o.Mode))
	case o.Init < 0:
		return bad("Init is %d; it must be a positive batch, or 0 for 1", o.Init)
	case o.MaxBatch < 0:
		return bad("MaxBatch is %d; it must be positive, or 0 for no bound", o.MaxBatch)
	case o.MaxTrials < 0:
		return bad("MaxTrials is %d; it must be positive, or 0 for 25", o.MaxTrials)
	case !(o.Margin >= 0 && o.Margin <= 1):
		return bad("Margin is %v; it must be in (0, 1], or 0 for 1", o.Margin)
	}
	if o.Init == 0 {
		o.Init = 1
	}
	if o.MaxBatch > 0 && o.Init > o.MaxBatch {
		return bad("Init %d is above MaxBatch %d", o.Init, o.MaxBatch)
	}
	if o.MaxTrials == 0 {
		o.MaxTrials = 25
	}
	if o.Margin == 0 {
		o.Margin = 1
	}
	return nil
}

// clean frees what a step left to the collector and returns dev's cached
// memory, so that the next trial starts from a clean allocator.
func clean(dev vram.Device) {
	runtime.GC()
	vram.EmptyCache(dev)
}
