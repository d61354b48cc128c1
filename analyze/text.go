package analyze

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/vramgo/vram/memory/trace"

	"github.com/vramgo/vram/internal/printable"
	"github.com/vramgo/vram/internal/units"
)

// WriteText writes r as a plain-text report: per device, the
// fragmentation figures, advice, out-of-memory events, the live memory by
// region and by stack, and the largest allocations. Names from the file
// (regions, stack frames) are printed with control characters escaped.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s: %s, %d device(s)\n", printable.String(r.File), r.Format, len(r.Devices))
	for _, d := range r.Devices {
		writeDevice(bw, d)
	}
	return bw.Flush()
}

func writeDevice(w *bufio.Writer, d *Device) {
	fmt.Fprintf(w, "\nDevice %d", d.Device)
	if d.CapacityBytes > 0 {
		fmt.Fprintf(w, ", %s card", units.Compact(d.CapacityBytes))
	}
	if d.Source != "" {
		fmt.Fprintf(w, ", from %s", printable.String(clipText(d.Source, maxFrameText)))
	}
	if d.Config != "" {
		fmt.Fprintf(w, ", %s", printable.String(clipText(d.Config, maxFrameText)))
	}
	fmt.Fprintf(w, ": %s, %s, %s", nOf(d.Segments, "segment", "segments"), nOf(d.Blocks, "block", "blocks"), nOf(d.HistoryEvents, "history event", "history events"))
	if d.HistoryTruncated {
		fmt.Fprint(w, " (truncated history)")
	}
	fmt.Fprintln(w)
	if d.SettingsChanged {
		fmt.Fprintln(w, "  expandable_segments changed while the run went on: the snapshot holds both fixed and expandable segments, which no one setting reproduces; the replays here use the settings recorded last")
	}
	if len(d.NotModelled) > 0 {
		fmt.Fprintf(w, "  not modelled by vram, no effect on the replays here: %s\n", printable.String(strings.Join(d.NotModelled, ", ")))
	}
	f := d.Fragmentation
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	if d.HasState {
		fmt.Fprintf(tw, "  reserved\t%s\t\n", units.Compact(f.ReservedBytes))
		fmt.Fprintf(tw, "  allocated\t%s\t(requested %s)\n", units.Compact(f.AllocatedBytes), units.Compact(f.RequestedBytes))
		fmt.Fprintf(tw, "  internal fragmentation\t%s\t%.1f%% of allocated: rounding and splitting\n", units.Compact(f.InternalBytes), 100*f.InternalFraction)
		fmt.Fprintf(tw, "  external fragmentation\t%s\t%.1f%% of reserved is not allocated (pending free %s)\n", units.Compact(f.ExternalBytes), 100*f.ExternalFraction, units.Compact(f.PendingFreeBytes))
		fmt.Fprintf(tw, "  free blocks\t%d\tlargest %s; %s split among live blocks, %s releasable by EmptyCache\n",
			f.FreeBlocks, units.Compact(f.LargestFreeBlockBytes), units.Compact(f.SplitFreeBytes), units.Compact(f.ReleasableBytes))
		if f.PrivatePoolBytes > 0 {
			fmt.Fprintf(tw, "  private pools\t%s\treserved by CUDA graphs or torch.cuda.MemPool, %s of it held; empty_cache keeps the rest for them\n",
				units.Compact(f.PrivatePoolBytes), units.Compact(f.PrivatePoolAllocatedBytes))
		}
	}
	t := d.Timeline
	if len(t.Points) > 0 {
		fmt.Fprintf(tw, "  history peak\t%s\tallocated (requested sizes); reserved peak %s\n", units.Compact(t.PeakAllocatedBytes), units.Compact(t.PeakReservedBytes))
		if !d.HasState {
			fmt.Fprintf(tw, "  at the end\t%s\tallocated; reserved %s\n", units.Compact(t.EndAllocatedBytes), units.Compact(t.EndReservedBytes))
		}
	}
	tw.Flush()
	if d.SamplesError != "" {
		fmt.Fprintf(w, "  samples: %s\n", printable.String(d.SamplesError))
	}
	for _, a := range d.Advice {
		fmt.Fprintf(w, "  advice: %s\n", printable.String(a))
	}
	for _, o := range d.OOMs {
		fmt.Fprintf(w, "  out of memory at event %d: %s\n", o.Event, printable.String(o.Explanation))
		if o.Fix != "" {
			fmt.Fprintf(w, "    fix: %s\n", printable.String(o.Fix))
		}
		if o.Region != "" {
			fmt.Fprintf(w, "    region %s\n", printable.String(clipText(o.Region, maxFrameText)))
		}
		if o.Site == "" && len(o.Frames) > 0 {
			fmt.Fprintf(w, "    the stack holds only the allocator's C++ frames")
			if o.PrevSite != "" {
				fmt.Fprintf(w, "; the allocation before it was at %s", printable.String(o.PrevSite))
			}
			fmt.Fprintln(w)
		}
		var shown []trace.Frame
		if i := userFrame(o.Frames); o.Site != "" && i >= 0 && classifyFrame(o.Frames[i]) == frameNative {
			// C++ frames alone: what they say, and the code before.
			fmt.Fprintf(w, "    at %s\n", printable.String(o.Site))
			if o.PrevSite != "" && o.PrevSite != o.Site {
				fmt.Fprintf(w, "    the allocation before it was at %s\n", printable.String(o.PrevSite))
			}
			shown = o.Frames[i : i+1]
		} else if o.Site != "" {
			shown = userFrames(o.Frames, 4)
		}
		for _, fr := range shown {
			if o.Site != "" && classifyFrame(fr) == frameNative {
				break
			}
			fmt.Fprintf(w, "    at %s\n", printable.String(frameString(fr)))
		}
		if rest := len(o.Frames) - len(shown); rest > 0 && len(shown) > 0 {
			fmt.Fprintf(w, "    (%s in the stack: --json or --html shows them all)\n", nOf(rest, "more frame", "more frames"))
		} else if rest > 0 {
			fmt.Fprintf(w, "    (%s in the stack: --json or --html shows the stack)\n", nOf(rest, "frame", "frames"))
		}
	}
	if more := d.OOMEvents - len(d.OOMs); more > 0 {
		fmt.Fprintf(w, "  %s not shown (--top, Options.Top, lists more)\n", nOf(more, "more out-of-memory event", "more out-of-memory events"))
	}
	if !d.HasState {
		return
	}
	groups := func(title string, gs []Group, rest Rest) {
		if len(gs) == 0 {
			return
		}
		fmt.Fprintf(w, "  live memory by %s:\n", title)
		tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', tabwriter.AlignRight)
		for _, g := range gs {
			fmt.Fprintf(tw, "    %s\t%s\t%s\t\t%s\n", units.Compact(g.Bytes), share(g.Bytes, d.Fragmentation.AllocatedBytes), nOf(g.Count, "block", "blocks"), printable.String(g.Key))
		}
		if rest.Groups > 0 {
			fmt.Fprintf(tw, "    %s\t%s\t%s\t\t%d more (--top, Options.Top, lists more)\n", units.Compact(rest.Bytes), share(rest.Bytes, d.Fragmentation.AllocatedBytes), nOf(rest.Count, "block", "blocks"), rest.Groups)
		}
		tw.Flush()
	}
	groups("region", d.ByRegion, d.ByRegionRest)
	groups("allocating code", d.ByStack, d.ByStackRest)
	if len(d.Largest) > 0 {
		fmt.Fprintln(w, "  largest live allocations:")
		for _, a := range d.Largest {
			where := ""
			if a.Site != "" {
				where = " at " + printable.String(a.Site)
			}
			region := ""
			if a.Region != "" {
				region = " [" + printable.String(clipText(a.Region, maxFrameText)) + "]"
			}
			fmt.Fprintf(w, "    %10s  0x%x%s%s\n", units.Compact(a.SizeBytes), a.Address, region, where)
		}
	}
}

// share formats part as a percentage of whole ("" when whole is 0).
func share(part, whole int64) string {
	if whole <= 0 {
		return ""
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

// nOf returns n followed by the noun for that many: one for 1, many
// otherwise ("1 block", "2 blocks", "0 blocks").
func nOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
