package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vramgo/vram/analyze"

	"github.com/vramgo/vram/internal/printable"
	"github.com/vramgo/vram/internal/units"
)

func newAnalyzeCmd() *cobra.Command {
	var (
		asJSON   bool
		html     string
		top      int
		maxInput string
		limit    string
		budget   int64
	)
	cmd := &cobra.Command{
		Use:   "analyze FILE",
		Short: "Explain a memory snapshot or trace: fragmentation, largest allocations, OOMs; --html draws it",
		Long: `Analyze reads a vram JSON snapshot (vram.MemorySnapshot, or an analyze.Recorder's
recording), a PyTorch snapshot, pickled (torch.cuda.memory._dump_snapshot) or saved as
JSON (json.dump of torch.cuda.memory._snapshot()), or a text trace, and reports per
device: fragmentation (waste inside blocks from rounding and splitting; memory reserved
but not allocated; the largest free block), the largest live allocations by region and
by the frame of your code that allocated them, each out-of-memory event with what was
asked and what was free (the first --top of them, and how many more there were), and
the peaks of the history. A text trace is read from the file as a stream, in memory
that grows with the blocks live at once, not with its length; snapshots, and text
traces from a pipe (<(zcat run.trace.gz)), are read whole, up to --max-input bytes
after decompression.

Each out-of-memory event gets a checked fix: the history up to the failed allocation
is replayed, with that allocation, under the limit the run had (--limit, else the
snapshot's settings, else inferred from the event and the history, and the report says
how), first with the recorded settings, which must fail as the run did, then with
expandable_segments:True, max_split_size_mb, garbage_collection_threshold and
roundup_power2_divisions values and vram's own policy; the report says which of them
fits and at what peak, or how much memory is missing. --replay-events bounds the work.
Stacks are attributed to the innermost frame of the program's own code, skipping C++
frames, torch, installed packages and the standard library.

--html OUT writes one self-contained page (nothing is fetched when it is opened): the
memory timeline stacked by region or by the allocating code, with the allocation under the
cursor on hover, out-of-memory markers, and the segment map. --html - writes the page to
standard output in place of the report; FILE - reads the input from standard input.
--json prints the report as one JSON object, an analyze.Report: each of its fields is
documented with it (go doc github.com/vramgo/vram/analyze.Report).

  vram analyze snapshot.pickle
  vram analyze --html run.html run.json
  vram analyze --json snapshot.json
  vram analyze --html - snapshot.pickle > page.html`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if top < 1 {
				return usagef("analyze: --top must be at least 1")
			}
			lim, err := inputLimits(maxInput)
			if err != nil {
				return err
			}
			opts := analyze.Options{Top: top, Limits: lim, ReplayEvents: budget}
			if limit != "" || cmd.Flags().Changed("limit") {
				b, err := units.ParseBytes(limit)
				if err != nil {
					return usagef("analyze: --limit %q: %s; want a positive size such as 40GiB (the memory the run was allowed: set_per_process_memory_fraction times the device's memory)", limit, sizeReason(err))
				}
				if b > analyze.MaxLimit {
					return usagef("analyze: --limit %q: more than any device: the fix checks replay up to %s; want the memory the run was allowed, such as 40GiB", limit, units.Bytes(analyze.MaxLimit))
				}
				opts.Limit = b
			}
			if cmd.Flags().Changed("html") && html == "" {
				return usagef("analyze: --html needs a file name to write the page to")
			}
			pageOut := html == stdinArg // the page in place of the report
			if pageOut && asJSON {
				return usagef("analyze: --html - and --json both write to standard output: give --html a file name")
			}
			if html != "" && !pageOut {
				if err := checkPagePath(html, args[0]); err != nil {
					return err
				}
			}
			if budget < 0 {
				return usagef("analyze: --replay-events must not be negative")
			}
			if budget == 0 {
				opts.ReplayEvents = -1 // off
			}
			if args[0] == stdinArg {
				if err := terminalInput("analyze", "-", "vram analyze - < snapshot.pickle", cmd.InOrStdin()); err != nil {
					return err
				}
			}
			rep, err := untilInterrupted(cmd.Context(), "analyzing "+printable.String(args[0]), func() (*analyze.Report, error) {
				f, err := openInput(lim, args[0], cmd.InOrStdin())
				if err != nil {
					return nil, err
				}
				return analyze.Analyze(f, opts)
			})
			if err != nil {
				return cmdError("analyze", err)
			}
			if pageOut {
				return analyze.WriteHTML(cmd.OutOrStdout(), rep)
			}
			if html != "" {
				if err := analyze.WriteHTMLFile(html, rep); err != nil {
					return cmdError("analyze", err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "vram analyze: wrote %s\n", printable.String(html))
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			return rep.WriteText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.StringVar(&html, "html", "", "also write the page to `OUT`")
	f.IntVar(&top, "top", 10, "list the first `N` (at least 1) regions, stacks, allocations and out-of-memory events")
	f.StringVar(&limit, "limit", "", "the memory the run was allowed when it ran out, a `SIZE` such as 40GiB, at most 1TiB (set_per_process_memory_fraction times the device's memory); default: from the snapshot, or inferred")
	f.Int64Var(&budget, "replay-events", analyze.DefaultReplayEvents, "bound the out-of-memory fix checks of a device to `N` replayed events, and those of all the devices of a file to 4N; 0 turns them off")
	f.StringVar(&maxInput, "max-input", "1GiB", "refuse snapshots larger than `SIZE` after decompression (they are read whole); text traces in files are streamed")
	return cmd
}

// checkPagePath refuses an --html path that would lose data or cannot be
// written: the input file itself (the page would replace the snapshot), a
// directory, or a path in a directory that does not exist or in a file. It
// is checked before the input is read, so that a long analysis does not
// end in the error.
func checkPagePath(page, input string) error {
	pi, err := os.Stat(page)
	if err != nil {
		dir := filepath.Dir(page)
		di, dirErr := os.Stat(dir)
		switch {
		case dirErr == nil && !di.IsDir():
			return usagef("analyze: --html %s: %s is a file, not a directory; give the path of a page in a directory", printable.String(page), printable.String(dir))
		case errors.Is(dirErr, fs.ErrNotExist):
			return usagef("analyze: --html %s: there is no directory %s; create it, or give a path in a directory that exists", printable.String(page), printable.String(dir))
		}
		return nil // a new file; other failures (permissions, a full disk) show when it is written
	}
	if pi.IsDir() {
		return usagef("analyze: --html %s is a directory; give the name of the page to write, such as %s", printable.String(page), printable.String(filepath.Join(page, "memory.html")))
	}
	if ii, err := os.Stat(input); err == nil && os.SameFile(pi, ii) {
		other := strings.TrimSuffix(page, filepath.Ext(page)) + ".html"
		if other == page {
			other = strings.TrimSuffix(page, ".html") + "-memory.html"
		}
		return usagef("analyze: --html %s is the input file; the page would replace it: give another name, such as %s", printable.String(page), printable.String(other))
	}
	return nil
}
