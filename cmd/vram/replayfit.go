package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"

	"github.com/vramgo/vram/internal/printable"
	"github.com/vramgo/vram/internal/units"
)

// fitAuto is the value of a bare --fit: search the smallest capacity only.
const fitAuto = "smallest"

// fitReport is the answer of vram replay --fit for one input.
type fitReport struct {
	// On is the capacity of --fit SIZE, 0 for a bare --fit.
	On int64 `json:"on_bytes,omitempty"`
	// Policies holds one answer per setting, keyed as in --compare.
	Policies map[string]fitPolicy `json:"policies"`
	// Recorded is what the history's own segment events say.
	Recorded *memory.Recorded `json:"recorded,omitempty"`
	// Reproduce is the replay that reproduces the recorded run's mid-run
	// segment frees, when it had some that made room.
	Reproduce *reproduceReport `json:"reproduce,omitempty"`
}

type fitPolicy struct {
	Config string `json:"config"`
	// Fits answers --fit SIZE (absent for a bare --fit).
	Fits *bool `json:"fits,omitempty"`
	// PeakReservedOn is the peak reserved on --fit SIZE.
	PeakReservedOn int64 `json:"peak_reserved_on_bytes,omitempty"`
	memory.Fit
}

// reproduceReport is a replay on the capacity that the recorded reserve
// peaked at, with PyTorch's policy of the recorded run.
type reproduceReport struct {
	Capacity      int64  `json:"capacity_bytes"`
	Config        string `json:"config"`
	SegmentAllocs int64  `json:"segment_allocs"`
	SegmentFrees  int64  `json:"segment_frees"`
	OOMs          int64  `json:"ooms"`
}

// fitFlag interprets --fit: not given (set false), fitAuto, or a capacity;
// an empty value given explicitly is a bad capacity. A bare
// --fit followed by a size and a file ("--fit 24GB run.trace.gz") takes the
// size from the arguments, when no file of that name exists. An argument
// after a bare --fit that names no file and is no size is a usage error,
// not a missing input, when it was meant as a size: it looks like one
// ("24QB", "0", "2.5.GB"), or more arguments follow it ("--fit lots
// run.trace.gz"). It returns the capacity (0 for fitAuto) and the
// remaining arguments.
func fitFlag(value string, set bool, args []string) (bool, int64, []string, error) {
	if value == "" && !set {
		return false, 0, args, nil
	}
	if value == fitAuto {
		if len(args) == 0 {
			return true, 0, args, nil
		}
		if _, statErr := os.Stat(args[0]); statErr == nil || args[0] == stdinArg {
			return true, 0, args, nil
		}
		n, err := units.ParseBytes(args[0])
		switch {
		case err == nil && len(args) == 1:
			return false, 0, nil, usagef("--fit %s: no input file after the size", args[0])
		case err == nil:
			return true, n, args[1:], nil
		case len(args) > 1 || looksLikeSize(args[0]):
			return false, 0, nil, usagef("--fit %q: no such input file, and not a size: %v; --fit takes an optional SIZE before the inputs (--fit 24GB FILE, or --fit=24GB FILE)", args[0], sizeReason(err))
		}
		return true, 0, args, nil
	}
	n, err := units.ParseBytes(value)
	if err != nil {
		return false, 0, nil, usagef("--fit: %v", err)
	}
	return true, n, args, nil
}

// looksLikeSize reports whether s, which names no file, was likely meant
// as a size: it starts with a digit or a point.
func looksLikeSize(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && (s[0] >= '0' && s[0] <= '9' || s[0] == '.')
}

// sizeReason returns why units.ParseBytes refused a size, without the
// input it quotes, or err's text when it is no *units.ParseError.
func sizeReason(err error) string {
	var pe *units.ParseError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return err.Error()
}

// replayFit answers --fit for one input: for each setting of --compare,
// the smallest capacity without an out-of-memory error, and whether the
// trace fits on o.fitOn. recorded is the setting the input says its run
// had ("" when it says none); the capacity that reproduces a capped run
// is checked under it.
func replayFit(run func(memory.Arena, memory.Config) (memory.Result, error), h trace.History, recorded string, base memory.Config, o replayOptions) (*fitReport, error) {
	ref := min(defaultReplayCapacity, o.maxCapacity)
	rep := &fitReport{On: o.fitOn, Policies: map[string]fitPolicy{}}
	for _, p := range comparePolicies {
		cfg, err := base.With(p.conf)
		if err != nil {
			return nil, err
		}
		free, err := run(memory.NewSimArena(ref), cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		if free.NumOOMs != 0 {
			if ref < defaultReplayCapacity {
				return nil, fmt.Errorf("%s: the trace runs out of memory even on %s, the most --max-capacity allows: raise it to search further", p.name, units.Bytes(ref))
			}
			return nil, fmt.Errorf("%s: the trace runs out of memory even on %s; a request larger than any device?", p.name, units.Bytes(ref))
		}
		fit, err := memory.SmallestCapacity(func(c int64) (memory.Result, error) {
			return run(memory.NewSimArena(c), cfg)
		}, free, o.maxCapacity)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		fp := fitPolicy{Config: cfg.String(), Fit: fit}
		if o.fitOn > 0 {
			r, err := run(memory.NewSimArena(o.fitOn), cfg)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
			yes := r.NumOOMs == 0
			fp.Fits, fp.PeakReservedOn = &yes, r.PeakReserved
		}
		rep.Policies[p.name] = fp
	}
	if h == nil {
		return rep, nil
	}
	rec, err := memory.ReadRecorded(h)
	if err != nil {
		return nil, err
	}
	if rec.SegmentAllocs+rec.Maps+rec.SegmentFrees+rec.Unmaps+rec.OOMs == 0 {
		return rep, nil
	}
	rep.Recorded = &rec
	if rec.RoomBursts > 0 && rec.PeakReserved > 0 {
		s := "policy:pytorch"
		if rec.Expandable {
			s += ",expandable_segments:True"
		}
		cfg, err := memory.ParseConfig(s)
		if err != nil {
			return nil, err
		}
		if recorded != "" {
			// The snapshot's own settings (max_split_size_mb,
			// roundup_power2_divisions...) reproduce it more closely.
			if rc, err := memory.ParseConfig(recorded); err == nil && rc.ExpandableSegments == rec.Expandable {
				cfg = rc
			}
		}
		r, err := run(memory.NewSimArena(rec.PeakReserved), cfg)
		if err != nil {
			return nil, err
		}
		rr := &reproduceReport{Capacity: rec.PeakReserved, Config: cfg.String(), OOMs: r.NumOOMs,
			SegmentAllocs: r.DeviceAllocs, SegmentFrees: r.DeviceFrees}
		rep.Reproduce = rr
	}
	return rep, nil
}

// printFit writes the answer of --fit for one input: one device of file.
func printFit(w io.Writer, file string, device int, f *fitReport) {
	fmt.Fprintf(w, "%s (device %d)\n", printable.String(file), device)
	if f.On > 0 {
		var parts []string
		for _, p := range comparePolicies {
			fp := f.Policies[p.name]
			ans := "no"
			if fp.Fits != nil && *fp.Fits {
				ans = "yes"
			}
			parts = append(parts, fmt.Sprintf("%s with %s", ans, policyLabel(p.name)))
		}
		fmt.Fprintf(w, "  fits on %s: %s\n", units.Bytes(f.On), strings.Join(parts, ", "))
	}
	var parts []string
	for _, p := range comparePolicies {
		fp := f.Policies[p.name]
		c := "more than " + units.Bytes(fp.Result.PeakReserved)
		if fp.Capacity > 0 {
			c = units.Bytes(fp.Capacity)
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", c, policyLabel(p.name)))
	}
	fmt.Fprintf(w, "  smallest capacity: %s\n", strings.Join(parts, ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  \tsmallest capacity\tpeak reserved there\talloc retries there\tpeak requested\treplays\t\n")
	for _, p := range comparePolicies {
		fp := f.Policies[p.name]
		c := "none found"
		if fp.Capacity > 0 {
			c = units.Bytes(fp.Capacity)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%d\t\n", p.name, c, units.Bytes(fp.Result.PeakReserved),
			fp.Result.NumAllocRetries, units.Bytes(fp.Result.PeakRequested), fp.Replays)
	}
	tw.Flush()
	fmt.Fprintf(w, "  (memory the allocator may use, to %s: a real card also holds the CUDA context and libraries, and other processes' memory)\n",
		units.Bytes(memory.FitResolution))
	if r := f.Recorded; r != nil && r.MidRunFrees > 0 {
		what := count(r.MidRunFrees, "segment", "segments")
		if r.Expandable {
			what = count(r.MidRunFrees, "mapping", "mappings")
		}
		fmt.Fprintf(w, "  the recorded run gave %s back while it ran", what)
		if r.RoomBursts > 0 {
			fmt.Fprintf(w, ", %s right before taking a new one: it ran out of room (a set_per_process_memory_fraction cap or a full device)", count(r.RoomBursts, "time", "times"))
		}
		if r.OtherBursts > 0 {
			fmt.Fprintf(w, "; %s not for lack of room (empty_cache(), garbage_collection_threshold or a CUDA graph's capture)", count(r.OtherBursts, "time", "times"))
		}
		fmt.Fprintln(w)
		if rr := f.Reproduce; rr != nil {
			fmt.Fprintf(w, "  its reserve peaked at %s: `vram replay --capacity %d --conf %s` reproduces it with %s and %s (recorded: %d and %d)\n",
				units.Bytes(rr.Capacity), rr.Capacity, rr.Config, count(rr.SegmentAllocs, "segment allocation", "segment allocations"), count(rr.SegmentFrees, "free", "frees"),
				r.SegmentAllocs+r.Maps, r.SegmentFrees+r.Unmaps)
		}
	}
	if r := f.Recorded; r != nil && r.OOMs > 0 {
		fmt.Fprintf(w, "  the recorded run hit %s; the capacities above also serve the %s that failed, so the run goes on past %s\n",
			count(r.OOMs, "out-of-memory error", "out-of-memory errors"), plural(r.OOMs, "request", "requests"), plural(r.OOMs, "it", "them"))
	}
}

// policyLabel names a --compare setting as a user writes it.
func policyLabel(name string) string {
	switch name {
	case "pytorch":
		return "policy:pytorch"
	case "pytorch+expandable":
		return "expandable_segments:True"
	}
	return "policy:" + name
}
