package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/rivo/uniseg"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/vramgo/vram/monitor"
)

// Terminal control sequences of the live view (ANSI/xterm, understood by
// tmux and screen): the alternate screen keeps the user's scrollback
// intact, and each frame is drawn from the top-left corner, every line
// cleared to its end, then the rest of the screen cleared.
const (
	ansiEnter = "\x1b[?1049h\x1b[?25l" // alternate screen, hide the cursor
	ansiLeave = "\x1b[?25h\x1b[?1049l" // show the cursor, main screen
	ansiHome  = "\x1b[H"
	ansiEOL   = "\x1b[K"
	ansiEOS   = "\x1b[J"
	ansiBold  = "\x1b[1m"
	ansiReset = "\x1b[0m"
)

// Layout of the live view.
const (
	watchDefaultWidth = 100 // columns when the output is not a terminal
	watchMinSpark     = 10  // narrowest history shown, in samples
	watchLabelWidth   = 13  // "   memory    " before a history line
	watchValueWidth   = 8   // the value after it
)

// sparkLevels draws a value from 0 to 1 in one character.
var sparkLevels = []rune("▁▂▃▄▅▆▇█")

func newWatchCmd() *cobra.Command {
	var (
		interval time.Duration
		count    int
		source   string
		pidList  string
	)
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Live view of every GPU's memory and utilization, with history, and per-process memory",
		Long: `Watch redraws, every interval, each GPU's memory in use and the share of time kernels
ran, with their history as sparklines, and the memory each process holds. It draws with
plain ANSI sequences on the alternate screen, so it works in any terminal and inside tmux
or screen; q or Ctrl-C quits (Ctrl-C only, when the input is not a terminal), and so do
SIGTERM and SIGHUP, with status 0. When the output is not a terminal, it prints one
frame per interval without control sequences.

With --pids it shows only the GPUs that those processes, or processes started by them,
hold memory on (and GPUs whose processes it cannot see): give it the pids that
"vram run" prints at start, or the pid of vram run itself, to watch every GPU of a job.
The list is separated by commas or white space; an empty one is an error.

  vram watch
  vram watch --interval 250ms
  vram watch --pids "$(pgrep -d, -f 'vram run')"  # the GPUs of a job
  vram watch --source readings.json --count 5   # recorded readings, five frames`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval < 10*time.Millisecond {
				return usagef("watch: --interval must be at least 10ms")
			}
			if count < 0 {
				return usagef("watch: --count must not be negative")
			}
			pids, err := parsePIDs(pidList, cmd.Flags().Changed("pids"))
			if err != nil {
				return err
			}
			src, err := openSource("watch", source, cmd.Flags().Changed("source"), cmd.InOrStdin())
			if err != nil {
				return err
			}
			defer src.Close()
			return runWatch(cmd.Context(), cmd.OutOrStdout(), src, interval, count, pids)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&interval, "interval", time.Second, "time between readings, a `DURATION` of at least 10ms, such as 250ms or 2s")
	f.IntVar(&count, "count", 0, "stop after `N` frames (0: until q or Ctrl-C)")
	f.StringVar(&source, "source", "", "play recorded readings from `FILE` instead of the GPUs (- reads them from standard input)")
	f.StringVar(&pidList, "pids", "", "show only the GPUs used by the processes `PID,PID,...` and their children")
	return cmd
}

// parsePIDs parses the --pids list: process ids separated by commas or
// white space (pgrep's lines). A list that was given holds at least one:
// an empty one, from a pgrep that found no job, would show every GPU.
func parsePIDs(list string, given bool) ([]int, error) {
	var pids []int
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		// A process id is a positive pid_t, 32 bits wide.
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil || n <= 0 {
			return nil, usagef("watch: --pids: %q is not a process id", f)
		}
		pids = append(pids, int(n))
	}
	if given && len(pids) == 0 {
		return nil, usagef("watch: --pids: no process id in %q (is the job running?)", list)
	}
	return pids, nil
}

// runWatch draws frames on out until ctx ends, the user quits or count
// frames (when count > 0) are drawn.
func runWatch(ctx context.Context, out io.Writer, src monitor.Source, interval time.Duration, count int, pids []int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tty := isTerminal(out)
	width, height := watchDefaultWidth, 0 // height 0: no limit
	termSize := func() {
		if w, h, err := term.GetSize(int(out.(*os.File).Fd())); err == nil && w > 0 && h > 0 {
			width, height = w, h
		}
	}
	quit := "Ctrl-C quits" // q works only where the keys are read
	// End as on q and Ctrl-C when asked to stop, leaving the alternate
	// screen and restoring the terminal, rather than be killed.
	ctx, stop := stopContext(ctx)
	defer stop()
	if tty {
		termSize()
		if term.IsTerminal(int(os.Stdin.Fd())) {
			if old, err := term.MakeRaw(int(os.Stdin.Fd())); err == nil {
				defer term.Restore(int(os.Stdin.Fd()), old)
				go readQuitKeys(os.Stdin, cancel)
				quit = "q quits"
			}
		}
		io.WriteString(out, ansiEnter)
		defer io.WriteString(out, ansiLeave)
	}
	h := newWatchHistory(max(width-watchLabelWidth-watchValueWidth-2, watchMinSpark))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for frame := 1; ; frame++ {
		r, err := src.Read()
		if err != nil {
			return cmdError("watch", err)
		}
		r = printableReading(r)
		// Every GPU's history takes a sample every frame, also while
		// --pids leaves the GPU out, so that its sparkline keeps time.
		h.add(r)
		if pids != nil {
			// Read the process tree every frame: ranks start and end.
			r = r.UsedBy(monitor.ProcessTree(pids))
		}
		if tty {
			termSize() // follow the terminal as it is resized
		}
		lines := h.render(r, width, interval, quit)
		if pids != nil && len(r.GPUs) == 0 {
			lines = append(lines[:1], "", fmt.Sprintf("no GPU holds memory of processes %s or their children", joinInts(pids)))
		}
		if tty {
			// A frame taller than the screen, or a newline after its last
			// line, would scroll the top of the frame away.
			lines = fitHeight(lines, width, height)
			var b strings.Builder
			b.WriteString(ansiHome)
			for i, l := range lines {
				if i == 0 {
					l = ansiBold + l + ansiReset
				} else {
					b.WriteString("\r\n")
				}
				b.WriteString(l + ansiEOL)
			}
			b.WriteString(ansiEOS)
			if _, err := io.WriteString(out, b.String()); err != nil {
				return cmdError("watch", err)
			}
		} else {
			frameText := strings.Join(lines, "\n") + "\n"
			if frame > 1 {
				frameText = "\n" + frameText
			}
			// Output that cannot be written (a full disk) ends the
			// command rather than being dropped frame after frame.
			if _, err := io.WriteString(out, frameText); err != nil {
				return cmdError("watch", err)
			}
		}
		if count > 0 && frame >= count {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// readQuitKeys cancels when the user types q, Q, Ctrl-C or Ctrl-D (in raw
// mode Ctrl-C arrives as a byte, not a signal).
func readQuitKeys(in io.Reader, cancel func()) {
	buf := make([]byte, 16)
	for {
		n, err := in.Read(buf)
		for _, c := range buf[:n] {
			if c == 'q' || c == 'Q' || c == 3 || c == 4 {
				cancel()
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// watchHistory keeps the recent values of each GPU and process.
type watchHistory struct {
	n       int                  // samples kept per series
	memory  map[string][]float64 // by GPU key: fraction of memory in use, -1 unknown
	compute map[string][]float64 // by GPU key: fraction of time kernels ran
	procs   map[string][]float64 // by GPU key and PID: fraction of the GPU's memory
}

func newWatchHistory(n int) *watchHistory {
	return &watchHistory{n: n, memory: map[string][]float64{}, compute: map[string][]float64{}, procs: map[string][]float64{}}
}

func gpuKey(g monitor.GPU) string {
	if g.UUID != "" {
		return g.UUID
	}
	return strconv.Itoa(g.Index)
}

// push appends v to a series, keeping the last n values.
func (h *watchHistory) push(m map[string][]float64, key string, v float64) {
	s := append(m[key], v)
	if len(s) > h.n {
		s = s[len(s)-h.n:]
	}
	m[key] = s
}

func (h *watchHistory) add(r monitor.Reading) {
	seen := map[string]bool{}
	for _, g := range r.GPUs {
		k := gpuKey(g)
		mem := -1.0
		if g.Memory.Used() != monitor.Unknown {
			mem = g.Memory.UsedFraction()
		}
		h.push(h.memory, k, mem)
		comp := -1.0
		if g.Utilization.ComputePercent != monitor.Unknown {
			comp = float64(g.Utilization.ComputePercent) / 100
		}
		h.push(h.compute, k, comp)
		for _, p := range g.Processes {
			pk := k + "/" + strconv.Itoa(p.PID)
			seen[pk] = true
			frac := -1.0
			if p.Bytes != monitor.Unknown && g.Memory.TotalBytes > 0 {
				frac = float64(p.Bytes) / float64(g.Memory.TotalBytes)
			}
			h.push(h.procs, pk, frac)
		}
	}
	for pk := range h.procs { // a process that ended shows no more
		if !seen[pk] {
			delete(h.procs, pk)
		}
	}
}

// sparkline draws the last width values of s, right-aligned.
func sparkline(s []float64, width int) string {
	if len(s) > width {
		s = s[len(s)-width:]
	}
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", width-len(s)))
	for _, v := range s {
		if v < 0 {
			b.WriteRune('·')
			continue
		}
		i := int(v*float64(len(sparkLevels)-1) + 0.5)
		b.WriteRune(sparkLevels[min(max(i, 0), len(sparkLevels)-1)])
	}
	return b.String()
}

// clip cuts s to width terminal columns, marking the cut. Columns are
// counted as a terminal draws them: CJK characters and most emoji take
// two, combining marks none.
func clip(s string, width int) string {
	if uniseg.StringWidth(s) <= width {
		return s
	}
	var b strings.Builder
	used := 0
	g := uniseg.NewGraphemes(s)
	for g.Next() {
		if used+g.Width() > width-1 {
			break
		}
		b.WriteString(g.Str())
		used += g.Width()
	}
	return b.String() + "…"
}

// padRight pads s with blanks to width terminal columns.
func padRight(s string, width int) string {
	return s + strings.Repeat(" ", max(width-uniseg.StringWidth(s), 0))
}

// fitHeight returns the lines of a frame that fit in height rows of width
// columns, the last one saying how many more there are; height 0 means no
// limit.
func fitHeight(lines []string, width, height int) []string {
	if height <= 0 || len(lines) <= height {
		return lines
	}
	if height == 1 {
		return lines[:1]
	}
	more := len(lines) - height + 1
	return append(lines[:height-1:height-1], clip(fmt.Sprintf("… %d more lines (a taller terminal, or --pids, shows them)", more), width))
}

// render draws one frame as lines of at most width columns; quit says in
// the header how to stop.
func (h *watchHistory) render(r monitor.Reading, width int, interval time.Duration, quit string) []string {
	spark := max(width-watchLabelWidth-watchValueWidth-2, watchMinSpark)
	var lines []string
	add := func(s string) { lines = append(lines, clip(s, width)) }
	head := "vram watch  " + count(len(r.GPUs), "GPU", "GPUs")
	if r.DriverVersion != "" {
		head += "  driver " + r.DriverVersion
	}
	if r.CUDAVersion != "" {
		head += "  CUDA " + r.CUDAVersion
	}
	head += fmt.Sprintf("  every %s  %s", interval, quit)
	stamp := r.Time.Local().Format(time.TimeOnly)
	if pad := width - uniseg.StringWidth(head) - len(stamp); pad > 0 {
		head += strings.Repeat(" ", pad) + stamp
	}
	add(head)
	if len(r.GPUs) == 0 {
		return append(lines, "", noGPUs)
	}
	for _, g := range r.GPUs {
		k := gpuKey(g)
		m := g.Memory
		mem := "memory ?"
		if used := m.Used(); used != monitor.Unknown {
			mem = fmt.Sprintf("%s / %s", mib(used), mib(m.TotalBytes))
		}
		add("")
		add(fmt.Sprintf("GPU %d  %s  %s  kernels ran %s  memory busy %s  %s  %s", g.Index, g.Name, mem,
			percent(g.Utilization.ComputePercent), percent(g.Utilization.MemoryBandwidthPercent),
			unit(g.TemperatureC, "°C"), power(g.Power)))
		add(fmt.Sprintf("   %-10s%s %s", "memory", sparkline(h.memory[k], spark), fracLabel(h.memory[k])))
		add(fmt.Sprintf("   %-10s%s %s", "kernels", sparkline(h.compute[k], spark), fracLabel(h.compute[k])))
	}
	add("")
	add("PROCESSES")
	// The process columns start after the widest GPU index: "GPU 10" on
	// a machine of ten GPUs or more.
	idWidth := 1
	for _, g := range r.GPUs {
		idWidth = max(idWidth, len(strconv.Itoa(g.Index)))
	}
	for _, g := range r.GPUs {
		k := gpuKey(g)
		for _, p := range g.Processes {
			name := monitor.ProcessName(p)
			pk := k + "/" + strconv.Itoa(p.PID)
			add(fmt.Sprintf("   GPU %-*d  %-8d %s %10s  %s", idWidth, g.Index, p.PID, padRight(clip(name, 16), 16), mib(p.Bytes),
				sparkline(h.procs[pk], max(spark-40, watchMinSpark))))
		}
		switch {
		case !g.ProcessesVisible:
			add(fmt.Sprintf("   GPU %-*d  processes not visible: %s", idWidth, g.Index, g.ProcessesNote))
		case len(g.Processes) == 0:
			add(fmt.Sprintf("   GPU %-*d  no process", idWidth, g.Index))
		}
	}
	return lines
}

// fracLabel prints the last value of a series as a percentage.
func fracLabel(s []float64) string {
	if len(s) == 0 || s[len(s)-1] < 0 {
		return "?"
	}
	return fmt.Sprintf("%3.0f%%", 100*s[len(s)-1])
}
