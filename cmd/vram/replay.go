package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"

	"github.com/vramgo/vram/internal/printable"
	"github.com/vramgo/vram/internal/units"
)

// defaultReplayCapacity is the simulated device size when neither
// --capacity nor the input names one: large enough that nothing runs out, so
// that the peaks say how much memory the run needed.
const defaultReplayCapacity = 1 << 40 // bytes: 1 TiB

// comparePolicies are the settings --compare replays side by side.
var comparePolicies = []struct{ name, conf string }{
	{"pytorch", "policy:pytorch"},
	{"pytorch+expandable", "policy:pytorch,expandable_segments:True"},
	{"vram", "policy:vram"},
}

// replayReport is the result for one input (one device of a snapshot).
type replayReport struct {
	File          string `json:"file"`
	Device        int    `json:"device"`
	CapacityBytes int64  `json:"capacity_bytes"`
	// CapacityDefault reports that CapacityBytes is vram's default
	// (defaultReplayCapacity), neither given nor recorded.
	CapacityDefault bool   `json:"capacity_default,omitempty"`
	Config          string `json:"config,omitempty"`
	// AsRecorded is, for a PyTorch snapshot replayed under vram's
	// default, the setting that replays it as PyTorch ran it:
	// policy:pytorch with the snapshot's allocator settings.
	AsRecorded string `json:"as_recorded_conf,omitempty"`
	// The fields of memory.Result, for a replay under one setting.
	*memory.Result
	// Fragmentation is peak reserved over peak requested.
	Fragmentation float64 `json:"fragmentation,omitempty"`
	// Policies holds one result per setting with --compare.
	Policies map[string]policyResult `json:"policies,omitempty"`
	// Fit is the answer of --fit.
	Fit *fitReport `json:"fit,omitempty"`
	// GPU is the answer of --device.
	GPU *deviceReport `json:"gpu,omitempty"`
	// HistoryTruncated reports a snapshot whose history does not start
	// with the run (trace.Snapshot.Truncated): the replay starts from the
	// blocks live when it starts, and HistoryEvents counts its events.
	HistoryTruncated bool `json:"history_truncated,omitempty"`
	HistoryEvents    int  `json:"history_events,omitempty"`
	// SettingsChanged reports a PyTorch snapshot that holds both fixed
	// and expandable segments outside private pools: expandable_segments
	// changed while it ran (torch.cuda.memory._set_allocator_settings),
	// which a replay under one setting does not reproduce.
	SettingsChanged bool `json:"settings_changed_mid_run,omitempty"`
	// NotModelled lists the settings of --conf that vram accepts from
	// PYTORCH_CUDA_ALLOC_CONF but does not model (memory.Config.NotModelled):
	// they have no effect on the replay.
	NotModelled []string `json:"not_modelled,omitempty"`
}

type policyResult struct {
	memory.Result
	Config        string  `json:"config"`
	Fragmentation float64 `json:"fragmentation"`
}

func newReplayCmd() *cobra.Command {
	var (
		capacity    string
		maxCapacity string
		maxInput    string
		conf        string
		compare     bool
		asJSON      bool
		fit         string
		device      string
	)
	cmd := &cobra.Command{
		Use:   "replay FILE...",
		Short: "Replay allocation traces and snapshots through the caching allocator",
		Long: `Replay runs recorded allocations through vram's caching allocator on a simulated
device and reports peak requested, allocated and reserved memory, the device calls
it made and what they would cost, retries and out-of-memory errors.

Inputs: text traces (gzip or plain; "action addr size stream" lines), vram JSON
snapshots and PyTorch snapshots, pickled (torch.cuda.memory._dump_snapshot) or saved
as JSON (json.dump of torch.cuda.memory._snapshot()); "-" reads one from standard
input. A snapshot whose history was truncated starts from the blocks its segments
imply, and the report says that its figures do not cover the run before.
Text traces are replayed as they are read, in memory that grows with the blocks
live at once, not with the trace's length; snapshots, and text traces from a pipe
(<(zcat run.trace.gz)), are read whole, up to --max-input bytes after decompression. A simulated device larger than
--max-capacity (4TiB: more than any real one) is refused.

--fit finds, for each policy of --compare, the smallest device on which the trace
runs without an out-of-memory error (bisection to 2 MiB, a few dozen replays at
most); --fit SIZE also answers whether it fits on SIZE. A request that failed in
the recorded run (a snapshot taken at an out-of-memory error) is replayed too, so
the capacity found is one on which the run would have gone on. When the recorded
run gave segments back while it ran (PyTorch does that when cudaMalloc fails under a cap
or on a full device, and on empty_cache(), under garbage_collection_threshold and
before a CUDA graph's capture), it says which of those made room for a new segment
and which capacity reproduces them.

--device cuda:N replays on the real GPU instead, through a fresh arena of real
cuMemAlloc/cuMemFree or cuMemCreate/cuMemMap/cuMemSetAccess/cuMemUnmap/cuMemRelease
calls, each timed, and prints as Markdown tables the driver time measured beside
what vram's cost model (memory.ModelledCost) says the same calls cost, and each call's measured
cost by size class.

--json prints one JSON object per input (per device of a snapshot), one after
another: file, device, capacity_bytes (with capacity_default when it is vram's 1 TiB,
neither given nor recorded) and config; for a replay under one setting, the
fields of memory.Result (events, peak_requested_bytes, peak_allocated_bytes,
peak_reserved_bytes, device_allocs, device_frees, device_maps, device_unmaps,
driver_time_us, num_alloc_retries, num_ooms, unmatched_frees, recorded_ooms) and
fragmentation (peak reserved over peak requested); with --compare, policies, those
fields and config under each setting; with --fit, fit: its policies, each a
memory.Fit with config (and fits and peak_reserved_on_bytes for --fit SIZE), and
recorded (memory.Recorded) and reproduce for a history with segment events; with
--device, gpu. Where they apply: as_recorded_conf (the setting that replays a
PyTorch snapshot as it ran), history_truncated and history_events,
settings_changed_mid_run, and not_modelled (settings of --conf without effect).

  vram replay --compare run.trace.gz
  vram replay --fit 24GB run.trace.gz
  vram replay --device cuda:0 --compare run.trace.gz
  vram replay --capacity 24GiB --conf expandable_segments:True snapshot.pickle`,
		Args: minimumArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fitting, fitOn, rest, err := fitFlag(fit, cmd.Flags().Changed("fit"), args)
			if err != nil {
				return err
			}
			gpu, err := deviceFlag(device, cmd.Flags().Changed("device"))
			if err != nil {
				return err
			}
			if gpu >= 0 && (fitting || cmd.Flags().Changed("capacity")) {
				return usagef("--device replays on the GPU's own memory: leave out --fit and --capacity")
			}
			args = rest
			if fitting && cmd.Flags().Changed("capacity") {
				return usagef("--fit searches the capacity itself: leave out --capacity, or give the size to --fit (--fit 24GB)")
			}
			var capBytes int64 // 0: the snapshot's, else the default
			if cmd.Flags().Changed("capacity") {
				b, err := units.ParseBytes(capacity)
				if err != nil {
					return usagef("--capacity: %v", err)
				}
				capBytes = b
			}
			maxCap, err := sizeFlag("--max-capacity", maxCapacity, "4TiB")
			if err != nil {
				return err
			}
			if err := memory.CheckSimCapacity(capBytes, maxCap, "--capacity"); err != nil {
				return usagef("%v", err)
			}
			lim, err := inputLimits(maxInput)
			if err != nil {
				return err
			}
			if err := memory.CheckSimCapacity(fitOn, maxCap, "--fit"); err != nil {
				return usagef("%v", err)
			}
			if n := countArg(args, stdinArg); n > 1 {
				return usagef("standard input (-) is given %d times; it can be read once", n)
			} else if n == 1 {
				if err := terminalInput("replay", "-", "vram replay - < run.trace.gz", cmd.InOrStdin()); err != nil {
					return err
				}
			}
			opts := replayOptions{capacity: capBytes, maxCapacity: maxCap, limits: lim, compare: compare, fit: fitting, fitOn: fitOn, device: gpu, stdin: cmd.InOrStdin()}
			base, err := memory.ParseConfig(conf)
			if err != nil {
				return confFlagError("replay", conf, err)
			}
			if (compare || fitting) && (strings.Contains(conf, "policy") || strings.Contains(conf, "expandable_segments")) {
				flag := "--compare"
				if fitting {
					flag = "--fit"
				}
				return usagef("%s sets policy and expandable_segments itself; leave them out of --conf", flag)
			}
			if gpu >= 0 {
				// Checked after the flags, before any input is read.
				if opts.deviceName, opts.deviceTotal, err = openReplayDevice(gpu); err != nil {
					return err
				}
				opts.calls = &memory.CallTimes{}
			}
			// A report that cannot be written (a full disk, a closed
			// pipe) fails the command and stops it.
			out := &errWriter{w: cmd.OutOrStdout()}
			var failed []string
			var onGPU []replayReport // for the summary of --device
			for _, path := range args {
				if out.err != nil {
					break // the reports would be lost
				}
				reports, err := untilInterrupted(cmd.Context(), "replaying "+printable.String(path), func() ([]replayReport, error) {
					return replayFile(path, conf, base, opts)
				})
				if ctx := cmd.Context(); err != nil && ctx != nil && ctx.Err() != nil {
					return err // Ctrl-C: stop, without the other inputs
				}
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "vram: replay: %s\n", printable.Text(oneLine(err))) // it can quote the file name
					failed = append(failed, path)
					continue
				}
				for _, r := range reports {
					if asJSON {
						_ = writeJSONLine(out, r) // out keeps the error
					} else if r.GPU != nil {
						printDevice(out, r.File, r.Device, r.GPU)
						printNotModelled(out, r.NotModelled)
						onGPU = append(onGPU, r)
					} else if r.Fit != nil {
						printFit(out, r.File, r.Device, r.Fit)
						printCaveats(out, r)
						printNotModelled(out, r.NotModelled)
					} else {
						printReplay(out, r)
						printCaveats(out, r)
					}
				}
			}
			if opts.calls != nil && !asJSON {
				if len(onGPU) > 1 {
					printDeviceSummary(out, onGPU)
				}
				printCallTable(out, fmt.Sprintf("cuda:%d (%s)", gpu, opts.deviceName), opts.calls)
			}
			if out.err != nil {
				return out.err
			}
			if len(failed) > 0 {
				return fmt.Errorf("%d of %s could not be replayed: %s", len(failed), count(len(args), "input", "inputs"), strings.Join(failed, ", "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&capacity, "capacity", "", "simulated device memory, a `SIZE` such as 80GiB (default: the snapshot's, else 1TiB)")
	f.StringVar(&maxCapacity, "max-capacity", "4TiB", "refuse simulated devices larger than `SIZE` (from --capacity or a snapshot)")
	f.StringVar(&maxInput, "max-input", "1GiB", "refuse snapshots larger than `SIZE` after decompression (they are read whole); text traces in files are streamed")
	f.StringVar(&conf, "conf", "", "allocator `SETTINGS` in VRAM_ALLOC_CONF form, e.g. \"expandable_segments:True\"")
	f.BoolVar(&compare, "compare", false, "replay under policy:pytorch, policy:pytorch with expandable segments, and policy:vram")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per input")
	f.StringVar(&fit, "fit", "", "find the smallest device each policy fits on; --fit `SIZE` also answers whether it fits on SIZE (e.g. 24GB)")
	f.Lookup("fit").NoOptDefVal = fitAuto
	f.StringVar(&device, "device", "", "replay on the real GPU `cuda:N` and measure the driver time, against the cost model")
	return cmd
}

// replayOptions are the flags of vram replay that apply to every input.
type replayOptions struct {
	capacity    int64 // --capacity, 0 if not given
	maxCapacity int64 // --max-capacity
	limits      trace.Limits
	compare     bool
	fit         bool  // --fit
	fitOn       int64 // --fit SIZE, 0 for a bare --fit
	device      int   // --device cuda:N, -1 without
	deviceName  string
	deviceTotal int64
	calls       *memory.CallTimes // every call measured with --device
	stdin       io.Reader         // the input "-"
}

// replayFile replays every history in the file at path, or in standard
// input for "-". A text trace in a regular file is streamed from it;
// snapshots, and text traces from a pipe, are read whole.
func replayFile(path, conf string, base memory.Config, o replayOptions) ([]replayReport, error) {
	file, err := openInput(o.limits, path, o.stdin)
	if err != nil {
		return nil, err
	}
	path = file.Name // "stdin" for "-"
	type input struct {
		device   int
		capacity int64
		source   string // where capacity comes from
		run      func(memory.Arena, memory.Config) (memory.Result, error)
		// fitRun is run with the requests that failed in the recorded
		// run replayed (memory.WithFailedRequests), for --fit.
		fitRun  func(memory.Arena, memory.Config) (memory.Result, error)
		history trace.History // what the segment events are read from
		// asRecorded is what replayReport.AsRecorded says of this input.
		asRecorded string
		// truncated and events are replayReport's HistoryTruncated and
		// HistoryEvents.
		truncated bool
		events    int
		// mixed is replayReport's SettingsChanged.
		mixed bool
	}
	var inputs []input
	if h := file.History(); h != nil {
		inputs = append(inputs, input{history: h,
			run: func(a memory.Arena, c memory.Config) (memory.Result, error) {
				return memory.ReplayHistory(h, a, c)
			},
			fitRun: func(a memory.Arena, c memory.Config) (memory.Result, error) {
				fh, err := memory.WithFailedRequests(h)
				if err != nil {
					return memory.Result{}, err
				}
				return memory.ReplayHistory(fh, a, c)
			}})
	}
	for _, s := range file.Snapshots {
		s := s
		var withFailed *trace.Snapshot // made at the first --fit replay
		inputs = append(inputs, input{device: s.Device, capacity: s.Capacity, asRecorded: asRecorded(file.Kind, s),
			truncated: s.Truncated, events: len(s.History), mixed: file.Kind.PyTorch() && s.MixedSegments(),
			source:  fmt.Sprintf("capacity_bytes of device %d's snapshot", s.Device),
			history: trace.Events(s.History),
			run: func(a memory.Arena, c memory.Config) (memory.Result, error) {
				return memory.ReplayFrom(s, a, c)
			},
			fitRun: func(a memory.Arena, c memory.Config) (memory.Result, error) {
				if withFailed == nil {
					// An error in the history names the event as the
					// file numbers it, before the failed requests are
					// added as events.
					if s.Truncated {
						if _, err := trace.StateAt(s, 0); err != nil {
							return memory.Result{}, fmt.Errorf("memory: replay: %w", err)
						}
					}
					withFailed = memory.SnapshotWithFailedRequests(s)
				}
				return memory.ReplayFrom(withFailed, a, c)
			}})
	}
	if len(inputs) == 0 {
		if file.Kind.PyTorch() {
			return nil, fmt.Errorf("%s: no allocation history or snapshot in the file: PyTorch's caching allocator held no memory and recorded no history (taken before the work ran, or with PYTORCH_NO_CUDA_MEMORY_CACHING=1, which bypasses it? Call torch.cuda.memory._record_memory_history() before the work, without that variable)", path)
		}
		return nil, fmt.Errorf("%s: no allocation history or snapshot in the file", path)
	}
	var reports []replayReport
	for _, in := range inputs {
		c := o.capacity
		if c == 0 {
			c = in.capacity
			if err := memory.CheckSimCapacity(c, o.maxCapacity, in.source); err != nil {
				return nil, trace.InFile(path, err)
			}
		}
		byDefault := c == 0
		if byDefault {
			c = min(defaultReplayCapacity, o.maxCapacity)
		}
		r := replayReport{File: path, Device: in.device, CapacityBytes: c, CapacityDefault: byDefault, HistoryTruncated: in.truncated, SettingsChanged: in.mixed,
			NotModelled: base.NotModelled()}
		if in.truncated {
			r.HistoryEvents = in.events
		}
		if o.device >= 0 {
			g, err := replayDevice(in.run, base, o, o.calls)
			if err != nil {
				return nil, trace.InFile(path, err)
			}
			r.CapacityBytes, r.CapacityDefault, r.GPU = o.deviceTotal, false, g
			reports = append(reports, r)
			continue
		}
		if o.fit {
			f, err := replayFit(in.fitRun, in.history, in.asRecorded, base, o)
			if err != nil {
				return nil, trace.InFile(path, err)
			}
			r.Fit = f
			reports = append(reports, r)
			continue
		}
		if !o.compare {
			res, err := in.run(memory.NewSimArena(c), base)
			if err != nil {
				return nil, trace.InFile(path, err)
			}
			r.Config = base.String()
			if strings.TrimSpace(conf) == "" { // blanks set nothing, as ParseConfig reads them
				r.AsRecorded = in.asRecorded
			}
			r.Result = &res
			r.Fragmentation = ratio(res.PeakReserved, res.PeakRequested)
			reports = append(reports, r)
			continue
		}
		r.Policies = map[string]policyResult{}
		for _, p := range comparePolicies {
			cfg, err := base.With(p.conf)
			if err != nil {
				return nil, err
			}
			res, err := in.run(memory.NewSimArena(c), cfg)
			if err != nil {
				return nil, trace.InFile(path, fmt.Errorf("%s: %w", p.name, err))
			}
			r.Policies[p.name] = policyResult{Result: res, Config: cfg.String(), Fragmentation: ratio(res.PeakReserved, res.PeakRequested)}
		}
		reports = append(reports, r)
	}
	return reports, nil
}

// asRecorded returns the VRAM_ALLOC_CONF setting under which the snapshot
// s, of a file of kind k, replays as PyTorch ran it: its allocator settings
// (the PYTORCH_CUDA_ALLOC_CONF string and the entries recorded beside it,
// memory.Config.WithSnapshotSettings) under PyTorch's policy. It is "" when
// s is not a PyTorch snapshot or its settings are ones vram does not model.
func asRecorded(k trace.Kind, s *trace.Snapshot) string {
	if !k.PyTorch() {
		return ""
	}
	c, err := memory.Config{Policy: memory.PolicyPyTorch}.WithSnapshotSettings(s)
	if err != nil {
		return ""
	}
	return c.String()
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// printCaveats says what the figures printed before do not cover: a run
// whose expandable_segments changed while it went on, and a history that
// does not start with its run.
func printCaveats(w io.Writer, r replayReport) {
	if r.SettingsChanged {
		fmt.Fprintln(w, "  the snapshot holds both fixed and expandable segments: expandable_segments changed while the run went on (torch.cuda.memory._set_allocator_settings), and a replay under one setting from the start does not reproduce what PyTorch reserved; the settings recorded are the last ones")
	}
	switch {
	case !r.HistoryTruncated:
	case r.HistoryEvents == 0:
		fmt.Fprintln(w, "  the snapshot holds no history: the figures above hold its live blocks alone, not the run that made them")
	default:
		fmt.Fprintln(w, "  the history starts mid-run (its ring of entries wrapped, as max_entries allowed, or recording started late): the figures above hold from the blocks live when it starts, not for the run before")
	}
}

// printReplay writes one report as a table, one column per setting.
func printReplay(w io.Writer, r replayReport) {
	type col struct {
		name string
		res  memory.Result
		frag float64
	}
	var cols []col
	if r.Result != nil {
		name := r.Config
		if name == "" {
			name = "policy:vram" // the default, named
		}
		cols = append(cols, col{name, *r.Result, r.Fragmentation})
	}
	for _, p := range comparePolicies {
		if pr, ok := r.Policies[p.name]; ok {
			cols = append(cols, col{p.name, pr.Result, pr.Fragmentation})
		}
	}
	note := ""
	if r.CapacityDefault {
		note = ": none given or recorded, so nothing runs out"
		for _, c := range cols {
			if c.res.NumOOMs > 0 {
				note = ": none given or recorded, and still too small: the run ran out of it"
				break
			}
		}
	}
	fmt.Fprintf(w, "%s (device %d, capacity %s%s)\n", printable.String(r.File), r.Device, units.Bytes(r.CapacityBytes), note)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, f func(c col) string) {
		fmt.Fprintf(tw, "  %s\t", label)
		for _, c := range cols {
			fmt.Fprintf(tw, "%s\t", f(c))
		}
		fmt.Fprintln(tw)
	}
	row("", func(c col) string { return c.name })
	row("events", func(c col) string { return fmt.Sprint(c.res.Events) })
	row("peak requested", func(c col) string { return units.Bytes(c.res.PeakRequested) })
	row("peak allocated", func(c col) string { return units.Bytes(c.res.PeakAllocated) })
	row("peak reserved", func(c col) string { return units.Bytes(c.res.PeakReserved) })
	row("reserved / requested", func(c col) string { return fmt.Sprintf("%.3f", c.frag) })
	row("device allocs / frees", func(c col) string { return fmt.Sprintf("%d / %d", c.res.DeviceAllocs, c.res.DeviceFrees) })
	row("device maps / unmaps", func(c col) string { return fmt.Sprintf("%d / %d", c.res.DeviceMaps, c.res.DeviceUnmaps) })
	row("driver time", func(c col) string { return fmt.Sprintf("%.1f ms", float64(c.res.DriverTimeUS)/1000) })
	row("alloc retries", func(c col) string { return fmt.Sprint(c.res.NumAllocRetries) })
	row("out of memory", func(c col) string { return fmt.Sprint(c.res.NumOOMs) })
	row("unmatched frees", func(c col) string { return fmt.Sprint(c.res.UnmatchedFrees) })
	tw.Flush()
	if len(cols) > 0 && cols[0].res.RecordedOOMs > 0 {
		n := cols[0].res.RecordedOOMs
		fmt.Fprintf(w, "  the recorded run hit %s: %s failed and %s not replayed here, so the peaks above stop short of %s; --fit replays %s too\n",
			count(n, "out-of-memory error", "out-of-memory errors"), plural(n, "its request", "their requests"), plural(n, "is", "are"), plural(n, "it", "them"), plural(n, "it", "them"))
	}
	switch {
	case r.AsRecorded != "" && r.SettingsChanged:
		fmt.Fprintf(w, "  that is vram's default policy; to replay it under the settings PyTorch had last: --conf %s (or --compare)\n", r.AsRecorded)
	case r.AsRecorded != "":
		fmt.Fprintf(w, "  that is vram's default policy; to replay it as PyTorch ran it: --conf %s (or --compare)\n", r.AsRecorded)
	}
	printNotModelled(w, r.NotModelled)
}

// printNotModelled writes the line on settings of --conf that vram accepts
// but does not model, if there are any.
func printNotModelled(w io.Writer, settings []string) {
	if len(settings) > 0 {
		fmt.Fprintf(w, "  not modelled by vram, no effect on this replay: %s\n", strings.Join(settings, ", "))
	}
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
