package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	cudabackend "github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/internal/printable"
	"github.com/vramgo/vram/memory"
)

// deviceFlag parses --device: "cuda:N" or "cuda" (GPU 0); -1 when not
// given (set false). An empty value given explicitly is an error, not the
// simulated device.
func deviceFlag(value string, set bool) (int, error) {
	if value == "" && !set {
		return -1, nil
	}
	if value == "cuda" {
		return 0, nil
	}
	if rest, ok := strings.CutPrefix(value, "cuda:"); ok {
		if n, err := strconv.Atoi(rest); err == nil && n >= 0 && n < 1<<16 {
			return n, nil
		}
	}
	return 0, usagef("--device %q: want cuda:N, such as cuda:0 (a replay runs on the real GPU only)", value)
}

// openReplayDevice checks that GPU index is there, for a clear error
// before any input is read.
func openReplayDevice(index int) (string, int64, error) {
	n, err := cudabackend.Probe()
	if n == 0 {
		return "", 0, fmt.Errorf("--device cuda:%d: no CUDA GPU here (%v); without --device the replay runs on a simulated device", index, err)
	}
	if index >= n {
		return "", 0, fmt.Errorf("--device cuda:%d: this machine has %s, cuda:0 to cuda:%d", index, count(n, "GPU", "GPUs"), n-1)
	}
	d, err := cudabackend.Open(index)
	if err != nil {
		return "", 0, fmt.Errorf("--device cuda:%d: %w", index, err)
	}
	m, err := d.MemoryInfo()
	if err != nil {
		return "", 0, fmt.Errorf("--device cuda:%d: %w", index, err)
	}
	return d.Name(), m.Total, nil
}

// deviceResult is one replay on the real GPU: what the allocator did,
// the driver time measured, what the cost model says the same calls cost,
// and what a simulated replay of the same trace and setting models.
type deviceResult struct {
	Config string        `json:"config"`
	Result memory.Result `json:"result"`
	// MeasuredUS is the wall time of every driver call, microseconds;
	// MeasuredModelledUS that of the calls the model prices.
	MeasuredUS         int64 `json:"measured_us"`
	MeasuredModelledUS int64 `json:"measured_modelled_calls_us"`
	// ModelUS is the cost model's time for the same calls.
	ModelUS int64 `json:"model_us"`
	// ModelError is (model - measured) / measured over the modelled calls.
	ModelError float64 `json:"model_error"`
	// SimModelUS is the driver time of a replay on a simulated device of
	// the GPU's capacity: the figure vram replay prints without --device.
	SimModelUS int64 `json:"sim_model_us"`
	// Calls are the measured calls by kind and size class.
	Calls []memory.CallRow `json:"calls"`
	// CloseCalls are the calls that gave back what the replay held at its
	// end, measured apart: in no figure above.
	CloseCalls []memory.CallRow `json:"close_calls"`
}

// deviceReport is the answer of --device for one input.
type deviceReport struct {
	Device   string                  `json:"device"`
	Name     string                  `json:"name"`
	Total    int64                   `json:"total_bytes"`
	Policies map[string]deviceResult `json:"policies"`
}

// replayDevice replays one input on the real GPU o.device under each
// setting of --compare (or base alone), adding every measured call to all.
func replayDevice(run func(memory.Arena, memory.Config) (memory.Result, error), base memory.Config, o replayOptions, all *memory.CallTimes) (*deviceReport, error) {
	rep := &deviceReport{Device: fmt.Sprintf("cuda:%d", o.device), Name: o.deviceName, Total: o.deviceTotal, Policies: map[string]deviceResult{}}
	settings := []struct{ name, conf string }{{"default", ""}}
	if o.compare {
		settings = comparePolicies
	}
	for _, p := range settings {
		cfg := base
		if p.conf != "" {
			var err error
			if cfg, err = base.With(p.conf); err != nil {
				return nil, err
			}
		}
		ra, err := cudabackend.NewReplayArena(o.device)
		if err != nil {
			return nil, err
		}
		res, err := run(ra.Arena(), cfg)
		closeErr := ra.Close()
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", p.name, rep.Device, err)
		}
		if closeErr != nil {
			return nil, closeErr
		}
		sim, err := run(memory.NewSimArena(o.deviceTotal), cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		measured, model, same := ra.Times().Total()
		all.Merge(ra.Times())
		all.Merge(ra.CloseTimes())
		dr := deviceResult{Config: cfg.String(), Result: res, MeasuredUS: measured.Microseconds(),
			MeasuredModelledUS: same.Microseconds(), ModelUS: model.Microseconds(), SimModelUS: sim.DriverTimeUS,
			Calls: ra.Times().Rows(), CloseCalls: ra.CloseTimes().Rows()}
		if same > 0 {
			dr.ModelError = float64(model-same) / float64(same)
		}
		rep.Policies[p.name] = dr
	}
	return rep, nil
}

// printDevice writes the per-trace table of --device for one device of
// file, as Markdown to paste into BENCHMARKS.md.
func printDevice(w io.Writer, file string, device int, r *deviceReport) {
	fmt.Fprintf(w, "%s (device %d) on %s (%s, %s)\n\n", printable.String(file), device, r.Device, r.Name, gib(r.Total))
	fmt.Fprintln(w, "| policy | peak reserved / requested | allocs / frees | maps / unmaps | measured | model, same calls | model error | model, simulated replay |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, n := range deviceNames(r) {
		d := r.Policies[n]
		fmt.Fprintf(w, "| %s | %.3f | %d / %d | %d / %d | %s | %s | %+.1f%% | %s |\n", n,
			ratio(d.Result.PeakReserved, d.Result.PeakRequested), d.Result.DeviceAllocs-d.Result.DeviceMaps,
			d.Result.DeviceFrees-d.Result.DeviceUnmaps, d.Result.DeviceMaps, d.Result.DeviceUnmaps,
			ms(d.MeasuredUS), ms(d.ModelUS), 100*d.ModelError, ms(d.SimModelUS))
	}
	fmt.Fprintln(w)
}

// printDeviceSummary writes one Markdown table of every input replayed with
// --device, a row per input and setting: the per-trace table of
// BENCHMARKS.md.
func printDeviceSummary(w io.Writer, reports []replayReport) {
	fmt.Fprintf(w, "all %d inputs on %s (%s)\n\n", len(reports), reports[0].GPU.Device, reports[0].GPU.Name)
	fmt.Fprintln(w, "| trace | policy | peak reserved / requested | allocs / frees | maps / unmaps | measured | model, same calls | model error | model, simulated replay |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range reports {
		for _, n := range deviceNames(r.GPU) {
			d := r.GPU.Policies[n]
			fmt.Fprintf(w, "| %s | %s | %.3f | %d / %d | %d / %d | %s | %s | %+.1f%% | %s |\n", printable.String(filepath.Base(r.File)), n,
				ratio(d.Result.PeakReserved, d.Result.PeakRequested), d.Result.DeviceAllocs-d.Result.DeviceMaps,
				d.Result.DeviceFrees-d.Result.DeviceUnmaps, d.Result.DeviceMaps, d.Result.DeviceUnmaps,
				ms(d.MeasuredUS), ms(d.ModelUS), 100*d.ModelError, ms(d.SimModelUS))
		}
	}
	fmt.Fprintln(w)
}

// deviceNames returns the settings of r in the order of --compare.
func deviceNames(r *deviceReport) []string {
	if _, ok := r.Policies["default"]; ok {
		return []string{"default"}
	}
	var names []string
	for _, p := range comparePolicies {
		names = append(names, p.name)
	}
	return names
}

// printCallTable writes the measured cost of each driver call by size
// class, beside the model's, as Markdown: the figures to fit the model's
// constants (memory/sim.go) to. Every kind of call has a row, those never
// made a row with a count of 0, so that a table in BENCHMARKS.md says what
// was not measured. t holds the calls of the replays and those that gave
// back what each replay held at its end.
func printCallTable(w io.Writer, device string, t *memory.CallTimes) {
	rows := t.Rows()
	if len(rows) == 0 {
		return // nothing was replayed
	}
	fmt.Fprintf(w, "driver calls measured on %s (wall time of each call alone; with the calls that gave back what each replay held at its end)\n\n", device)
	fmt.Fprintln(w, "| call | size | calls | median | p90 | mean | min | max | model per call | model error |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range memory.DriverCalls() {
		made := false
		for _, r := range rows {
			if r.Call != c.String() {
				continue
			}
			made = true
			model, errCol := "not modelled", ""
			if r.Modelled {
				per := r.ModelTotal / time.Duration(r.Count)
				model = us(per)
				if r.Total > 0 {
					errCol = fmt.Sprintf("%+.0f%%", 100*float64(r.ModelTotal-r.Total)/float64(r.Total))
				}
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", r.Call, r.SizeClass, r.Count,
				us(r.Median), us(r.P90), us(r.Mean()), us(r.Min), us(r.Max), model, errCol)
		}
		if !made {
			model := "not modelled"
			if c.Modelled() {
				model = "by size"
				if lo, hi := memory.ModelledCost(c, 1), memory.ModelledCost(c, 1<<40); lo == hi {
					model = us(lo)
				}
			}
			fmt.Fprintf(w, "| %s | any | 0 | | | | | | %s | not measured |\n", c, model)
		}
	}
	fmt.Fprintln(w)
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)) }

func ms(usec int64) string { return fmt.Sprintf("%.1f ms", float64(usec)/1000) }
