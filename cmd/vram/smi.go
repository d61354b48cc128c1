package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rivo/uniseg"
	"github.com/spf13/cobra"

	"github.com/vramgo/vram/internal/printable"
	"github.com/vramgo/vram/monitor"
	"github.com/vramgo/vram/native/load"
)

// openMonitor opens the machine's GPUs through NVML; tests replace it.
var openMonitor = func() (monitor.Source, error) { return monitor.OpenNVML() }

// openSource returns the recorded readings in file, those read from stdin
// for the file "-" (as analyze and replay read it), or the machine's GPUs
// when --source was not given (given is false). cmd names the command in
// errors: without a driver the error is one line saying so. An empty
// --source (an unset variable in a script) is a usage error rather than
// the GPUs.
func openSource(cmd, file string, given bool, stdin io.Reader) (monitor.Source, error) {
	if given && file == "" {
		return nil, usagef("%s: --source needs a FILE of recorded readings (leave it out to read the GPUs)", cmd)
	}
	if file == stdinArg {
		if err := terminalInput(cmd, "--source -", "vram "+cmd+" --source - < readings.json", stdin); err != nil {
			return nil, err
		}
		rs, err := monitor.ReadRecording(stdin)
		if err != nil {
			return nil, sourceError(cmd, "standard input", err)
		}
		return monitor.NewRecorded(rs), nil
	}
	if file != "" {
		src, err := monitor.OpenRecorded(file)
		if err != nil {
			// OpenRecorded's error is "monitor: FILE: " and the reason,
			// or "monitor: " and the error opening FILE.
			if inner := errors.Unwrap(err); inner != nil && strings.HasPrefix(err.Error(), "monitor: ") {
				err = inner
			}
			return nil, sourceError(cmd, "--source "+file, err)
		}
		return src, nil
	}
	src, err := openMonitor()
	if err != nil {
		var nf *load.NotFoundError
		var nd *monitor.NoDriverError
		switch {
		case errors.As(err, &nf):
			return nil, fmt.Errorf("%s: no NVIDIA driver found (libnvidia-ml.so.1 not loadable): %s; %s", cmd, nf.Reason(), noGPUHint)
		case errors.As(err, &nd):
			return nil, fmt.Errorf("%s: no usable NVIDIA driver: %w; %s", cmd, nd.Err, noGPUHint)
		case errors.Is(err, monitor.ErrNoGPU):
			// "monitor: no NVIDIA GPU: the driver reports 0 devices"
			why := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "monitor: "), monitor.ErrNoGPU.Error()+": ")
			return nil, fmt.Errorf("%s: no NVIDIA GPU found: %s; %s", cmd, why, noGPUHint)
		}
		return nil, cmdError(cmd, err)
	}
	return src, nil
}

// noGPUHint ends the error of smi, watch and exporter on a machine where
// they find no GPU to read: what to do.
const noGPUHint = "vram doctor says what is missing, and --source FILE shows readings recorded elsewhere"

// sourceError is the error of a --source that could not be read as
// readings, named by what (the flag and its file, or standard input): the
// reason alone where it is one of the file system ("no such file or
// directory", "is a directory"), without the file named again, and what
// --source reads where the input is not that.
func sourceError(cmd, what string, err error) error {
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe):
		return fmt.Errorf("%s: %s: %w", cmd, what, pe.Err)
	case errors.Is(err, monitor.ErrInvalidRecording):
		return fmt.Errorf("%s: %s: %w; want readings as \"vram smi --json\" prints them or monitor.WriteRecording writes them", cmd, what, err)
	}
	return fmt.Errorf("%s: %s: %w", cmd, what, err)
}

func newSmiCmd() *cobra.Command {
	var (
		asJSON bool
		list   bool
		source string
	)
	cmd := &cobra.Command{
		Use:   "smi",
		Short: "Show every GPU's memory, utilization, temperature, power and processes, like nvidia-smi",
		Long: `Smi reads every GPU through NVML (libnvidia-ml.so.1, installed with the driver) and
prints a table of memory (used, total, the driver's reserve, in MiB as nvidia-smi shows
them), utilization (the share of time kernels ran, and the share of time device memory
was read or written: neither is the share of memory in use), temperature, power and
clocks, then the processes holding memory on each GPU ("unknown" for a process whose
name cannot be read). Where NVML cannot see the processes (inside a container with its
own PID namespace, say) it says so instead of showing an empty list. Without a GPU to
show (no driver, a driver that reports none, a recorded reading of none) smi, -L and
--json alike say so on standard error and exit with status 1.

  vram smi
  vram smi --json          # the monitor.Reading struct as JSON, memory in bytes
  vram smi -L              # one line per GPU with its UUID, like nvidia-smi -L
  vram smi --source r.json # readings recorded earlier (vram smi --json output)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && list {
				return usagef("smi: --json and --list (-L) print different things: give one")
			}
			src, err := openSource("smi", source, cmd.Flags().Changed("source"), cmd.InOrStdin())
			if err != nil {
				return err
			}
			defer src.Close()
			r, err := src.Read()
			if err != nil {
				return cmdError("smi", err)
			}
			if len(r.GPUs) == 0 {
				// Fail as on a machine whose driver reports no GPU, in
				// every form, rather than list nothing (-L) or print
				// empty tables, with status 0.
				return errors.New("smi: " + noGPUs)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return cmdError("smi", writeJSON(out, r)) // JSON escapes control characters itself
			}
			r = printableReading(r)
			if list {
				ew := &errWriter{w: out}
				for _, g := range r.GPUs {
					fmt.Fprintf(ew, "GPU %d: %s (UUID: %s)\n", g.Index, g.Name, g.UUID)
				}
				return cmdError("smi", ew.err)
			}
			return cmdError("smi", writeSmi(out, r))
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the reading as one JSON object")
	f.BoolVarP(&list, "list", "L", false, "list the GPUs with their UUIDs")
	f.StringVar(&source, "source", "", "read recorded readings from `FILE` instead of the GPUs (- reads them from standard input)")
	return cmd
}

// printableReading returns a copy of r whose strings (GPU and process
// names, which any process or a recorded file can choose, notes, errors)
// have their control characters escaped, for printing on a terminal.
func printableReading(r monitor.Reading) monitor.Reading {
	r.DriverVersion = printable.String(r.DriverVersion)
	r.CUDAVersion = printable.String(r.CUDAVersion)
	r.NVMLVersion = printable.String(r.NVMLVersion)
	gpus := make([]monitor.GPU, len(r.GPUs))
	for i, g := range r.GPUs {
		g.Name = printable.String(g.Name)
		g.UUID = printable.String(g.UUID)
		g.PCIBusID = printable.String(g.PCIBusID)
		g.ProcessesNote = printable.String(g.ProcessesNote)
		g.Processes = slices.Clone(g.Processes)
		for j := range g.Processes {
			g.Processes[j].Name = printable.String(g.Processes[j].Name)
		}
		g.Errors = slices.Clone(g.Errors)
		for j := range g.Errors {
			g.Errors[j] = printable.String(g.Errors[j])
		}
		gpus[i] = g
	}
	r.GPUs = gpus
	return r
}

// writeSmi prints a reading of at least one GPU as the smi table and
// process list; its strings must have been made printable
// (printableReading). It returns the first error writing to w.
func writeSmi(out io.Writer, r monitor.Reading) error {
	w := &errWriter{w: out}
	head := []string{"vram smi"}
	if r.DriverVersion != "" {
		head = append(head, "driver "+r.DriverVersion)
	}
	if r.CUDAVersion != "" {
		head = append(head, "CUDA "+r.CUDAVersion)
	}
	if !r.Time.IsZero() {
		head = append(head, r.Time.Local().Format(time.DateTime))
	}
	fmt.Fprintf(w, "%s\n\n", strings.Join(head, "   "))
	rows := [][]string{{"GPU", "NAME", "MEMORY USED / TOTAL", "DRIVER RESERVE", "KERNELS RAN", "MEMORY BUSY", "TEMP", "POWER / LIMIT", "SM CLOCK"}}
	for _, g := range r.GPUs {
		m := g.Memory
		mem := "?"
		if used := m.Used(); used != monitor.Unknown {
			mem = fmt.Sprintf("%s / %s (%.0f%%)", mib(used), mib(m.TotalBytes), 100*m.UsedFraction())
		}
		rows = append(rows, []string{strconv.Itoa(g.Index), g.Name, mem, mib(m.ReservedBytes),
			percent(g.Utilization.ComputePercent), percent(g.Utilization.MemoryBandwidthPercent),
			unit(g.TemperatureC, "°C"), power(g.Power), clock(g.Clocks)})
	}
	writeColumns(w, rows)
	fmt.Fprintln(w, "\nMEMORY USED: held by processes and contexts, the driver reserve apart; KERNELS RAN: share of time a kernel was\n"+
		"running; MEMORY BUSY: share of time device memory was read or written.")

	fmt.Fprintln(w, "\nPROCESSES")
	rows = [][]string{{"GPU", "PID", "NAME", "GPU MEMORY"}}
	var notes []string
	for _, g := range r.GPUs {
		for _, p := range g.Processes {
			rows = append(rows, []string{strconv.Itoa(g.Index), strconv.Itoa(p.PID), monitor.ProcessName(p), mib(p.Bytes)})
		}
		switch {
		case !g.ProcessesVisible:
			notes = append(notes, fmt.Sprintf("GPU %d: processes not visible: %s", g.Index, g.ProcessesNote))
		case g.ProcessesNote != "":
			notes = append(notes, fmt.Sprintf("GPU %d: %s", g.Index, g.ProcessesNote))
		case len(g.Processes) == 0:
			notes = append(notes, fmt.Sprintf("GPU %d: no process is using it", g.Index))
		}
	}
	writeColumns(w, rows)
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	for _, g := range r.GPUs {
		for _, e := range g.Errors {
			fmt.Fprintf(w, "GPU %d: query failed: %s\n", g.Index, e)
		}
	}
	return w.err
}

// writeColumns writes rows as a table: each cell padded to the width of
// its column's widest cell, two blanks between columns, the last cell of a
// row unpadded. Widths are counted in terminal columns, not characters or
// bytes as text/tabwriter counts them: a CJK name takes two columns a
// character, a combining accent none, and the columns after it stay in
// line.
func writeColumns(w io.Writer, rows [][]string) {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], uniseg.StringWidth(cell))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		b.Reset()
		for i, cell := range row {
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-uniseg.StringWidth(cell)+2))
			}
		}
		b.WriteByte('\n')
		io.WriteString(w, b.String())
	}
}

// noGPUs is what smi and watch say of a reading without GPUs, as
// nvidia-smi says "No devices were found": smi as its error, watch in its
// frame.
const noGPUs = "no GPU in this reading"

// gib prints bytes as GiB with one decimal.
func gib(n int64) string {
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// mib prints bytes as whole MiB, rounded down, the unit nvidia-smi shows
// device memory in, so that the numbers of both tools can be compared; a
// negative (unknown) value reads "?". --json gives exact bytes.
func mib(n int64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

func percent(v int) string { return unit(v, "%") }

func unit(v int, u string) string {
	if v == monitor.Unknown {
		return "?"
	}
	return fmt.Sprintf("%d%s", v, u)
}

func power(p monitor.Power) string {
	if p.DrawW == monitor.Unknown {
		return "?"
	}
	if p.LimitW == monitor.Unknown {
		return fmt.Sprintf("%.0f W", p.DrawW)
	}
	return fmt.Sprintf("%.0f / %.0f W", p.DrawW, p.LimitW)
}

func clock(c monitor.Clocks) string {
	if c.SMMHz == monitor.Unknown {
		return "?"
	}
	if c.MaxSMMHz != monitor.Unknown {
		return fmt.Sprintf("%d / %d MHz", c.SMMHz, c.MaxSMMHz)
	}
	return fmt.Sprintf("%d MHz", c.SMMHz)
}
