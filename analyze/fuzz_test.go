package analyze

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/vramgo/vram/internal/fuzztest"
	"github.com/vramgo/vram/memory/trace"
)

// maxFuzzAnalyze bounds the inputs FuzzAnalyze reads, as the reader targets
// of the trace package do.
const maxFuzzAnalyze = 4 << 10

// fuzzPoints is the timeline resolution of FuzzAnalyze: small, so that an
// execution stays fast.
const fuzzPoints = 32

// fuzzReplayEvents is the replay budget of FuzzAnalyze's fix checks.
const fuzzReplayEvents = 50_000

// FuzzAnalyze analyses any input `vram analyze` would read, with a --top
// of 1 to 8, and checks the report: byte counts are never negative (sums
// that overflow are a bug), fractions are in [0, 1], peaks bound the start
// and the end, lists and out-of-memory paragraphs respect --top, memory
// follows the input, and the text report is plain text without control
// characters from the file. Seeds are in testdata/fuzz/FuzzAnalyze.
func FuzzAnalyze(f *testing.F) {
	f.Add([]byte("alloc 4096 512 0\nalloc 8192 1048576 0\noom 0 1099511627776 0\nfree_completed 4096 512 0\n"), byte(0))
	f.Fuzz(func(t *testing.T, data []byte, top byte) {
		if len(data) > maxFuzzAnalyze {
			return
		}
		file, err := trace.Read(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		// A small replay budget: the fix checks replay the sizes the
		// input claims, which are bounded by the budget, not the input.
		opts := Options{Top: 1 + int(top%8), TimelinePoints: fuzzPoints, ReplayEvents: fuzzReplayEvents}
		before := fuzztest.HeapAllocated()
		r, err := Analyze(file, opts)
		fuzztest.CheckAllocated(t, "Analyze", len(data), before, 16<<20, 4<<10)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "analyze: fuzz: ") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		for _, d := range r.Devices {
			checkDevice(t, d, opts)
		}
		var out bytes.Buffer
		if err := r.WriteText(&out); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		if n := strings.Count(text, "  out of memory at event "); n > opts.Top*len(r.Devices) {
			t.Fatalf("%d out-of-memory paragraphs with --top %d: repeated output must be capped", n, opts.Top)
		}
		if i := strings.IndexFunc(text, func(c rune) bool { return c < 0x20 && c != '\n' && c != '\t' || c == 0x7f }); i >= 0 {
			t.Fatalf("the text report holds control character %q from the input (at byte %d)", text[i], i)
		}
	})
}

// checkDevice fails t if a device report holds an impossible figure.
func checkDevice(t *testing.T, d *Device, opts Options) {
	t.Helper()
	f, tl := d.Fragmentation, d.Timeline
	for name, v := range map[string]int64{
		"reserved": f.ReservedBytes, "allocated": f.AllocatedBytes, "requested": f.RequestedBytes,
		"internal": f.InternalBytes, "external": f.ExternalBytes, "pending free": f.PendingFreeBytes,
		"largest free block": f.LargestFreeBlockBytes, "split free": f.SplitFreeBytes, "releasable": f.ReleasableBytes,
		"timeline start allocated": tl.StartAllocatedBytes, "timeline start reserved": tl.StartReservedBytes,
		"timeline peak allocated": tl.PeakAllocatedBytes, "timeline peak reserved": tl.PeakReservedBytes,
		"timeline end allocated": tl.EndAllocatedBytes, "timeline end reserved": tl.EndReservedBytes,
	} {
		if v < 0 {
			t.Fatalf("device %d: %s bytes %d is negative", d.Device, name, v)
		}
	}
	for name, v := range map[string]float64{"internal": f.InternalFraction, "external": f.ExternalFraction} {
		if !(v >= 0 && v <= 1) {
			t.Fatalf("device %d: %s fragmentation fraction %v is not in [0, 1]", d.Device, name, v)
		}
	}
	if len(tl.Points) > 0 {
		if tl.PeakAllocatedBytes < max(tl.StartAllocatedBytes, tl.EndAllocatedBytes) ||
			tl.PeakReservedBytes < max(tl.StartReservedBytes, tl.EndReservedBytes) {
			t.Fatalf("device %d: timeline peaks %d/%d below its start %d/%d or end %d/%d", d.Device,
				tl.PeakAllocatedBytes, tl.PeakReservedBytes, tl.StartAllocatedBytes, tl.StartReservedBytes,
				tl.EndAllocatedBytes, tl.EndReservedBytes)
		}
	}
	for _, p := range tl.Points {
		if p.AllocatedBytes < 0 || p.ReservedBytes < 0 || p.AllocatedBytes > tl.PeakAllocatedBytes || p.ReservedBytes > tl.PeakReservedBytes {
			t.Fatalf("device %d: timeline point %+v outside [0, peak %d/%d]", d.Device, p, tl.PeakAllocatedBytes, tl.PeakReservedBytes)
		}
	}
	if len(tl.Points) > 2*opts.TimelinePoints+2 {
		t.Fatalf("device %d: %d timeline points for a resolution of %d", d.Device, len(tl.Points), opts.TimelinePoints)
	}
	for name, n := range map[string]int{"by region": len(d.ByRegion), "by stack": len(d.ByStack), "largest": len(d.Largest)} {
		if n > opts.Top {
			t.Fatalf("device %d: %d entries %s with --top %d", d.Device, n, name, opts.Top)
		}
	}
	for _, g := range append(append([]Group(nil), d.ByRegion...), d.ByStack...) {
		if g.Bytes < 0 || g.Count < 0 || g.LargestBytes < 0 || g.LargestBytes > g.Bytes {
			t.Fatalf("device %d: group %+v", d.Device, g)
		}
	}
	for _, o := range d.OOMs {
		if o.RequestedBytes < 0 || o.AllocatedBytes < 0 || o.ReservedBytes < 0 || o.CachedBytes < 0 {
			t.Fatalf("device %d: out-of-memory event %+v has negative bytes", d.Device, o)
		}
	}
}

// TestFuzzSeeds checks the committed seed corpus of FuzzAnalyze (run with
// -update-fuzz-seeds to rewrite it): text traces and snapshots with
// regions, stacks, out-of-memory events and truncated histories.
func TestFuzzSeeds(t *testing.T) {
	fr := []trace.Frame{{Function: "main.forward", File: "train.py", Line: 42}, {Function: "main.main", File: "train.py", Line: 7}}
	const a, b = 139638008184832, 139640000000000
	snap := &trace.Snapshot{
		Capacity: 80 << 30, Config: "expandable_segments:True",
		Segments: []trace.Segment{
			{Addr: a, Size: 2 << 20, Pool: trace.PoolSmall, Blocks: []trace.Block{
				{Addr: a, Size: 512, Requested: 100, State: trace.StateActiveAllocated, Region: "conv1", Frames: fr},
				{Addr: a + 512, Size: 1024, Requested: 1000, State: trace.StateActivePendingFree},
				{Addr: a + 1536, Size: 2<<20 - 1536, State: trace.StateInactive},
			}},
			{Addr: b, Size: 20 << 20, Pool: trace.PoolLarge, Expandable: true, Blocks: []trace.Block{
				{Addr: b, Size: 12 << 20, Requested: 12 << 20, State: trace.StateActiveAllocated, Region: "attn", Frames: fr[1:]},
				{Addr: b + 12<<20, Size: 8 << 20, State: trace.StateInactive},
			}},
		},
		History: []trace.Event{
			{Action: trace.ActionAlloc, Addr: a, Size: 100, Region: "conv1", Frames: fr, TimeUS: 2},
			{Action: trace.ActionFreeRequested, Addr: a + 512, Size: 1000, TimeUS: 4},
			{Action: trace.ActionSegmentMap, Addr: b, Size: 20 << 20, TimeUS: 5},
			{Action: trace.ActionAlloc, Addr: b, Size: 12 << 20, Region: "attn", Frames: fr[1:], TimeUS: 6},
			{Action: trace.ActionOOM, Addr: 8 << 20, Size: 1 << 40, Region: "attn", Frames: fr, TimeUS: 7},
		},
		Truncated: true,
	}
	var js bytes.Buffer
	if err := trace.WriteJSON(&js, snap); err != nil {
		t.Fatal(err)
	}
	var seeds []fuzztest.Seed
	add := func(name string, data []byte, top byte) {
		seeds = append(seeds, fuzztest.Seed{Name: name, Args: []any{data, top}})
	}
	add("snapshot", js.Bytes(), 2)
	add("training-trace", []byte("# action addr size stream [time_us]\n"+
		"segment_alloc 4096 20971520 0 1\nalloc 4096 1048576 0 2\nalloc 1052672 8388608 0 3\nfree_requested 4096 1048576 0 4\n"+
		"free_completed 4096 1048576 0 5\nalloc 4096 524288 7 6\noom 2097152 1073741824 0 7\nfree_completed 1052672 8388608 0 8\n"), 0)
	var ooms strings.Builder
	for i := range 6 {
		fmt.Fprintf(&ooms, "oom %d %d 0\n", i, 1<<30+i)
	}
	add("ooms", []byte(ooms.String()), 7)
	add("huge-allocation", []byte("alloc 4096 4611686018427387904 0 1\nfree_completed 4096 4611686018427387904 0 2\n"), 4)
	add("frees-only", []byte("free_completed 4096 512 0\nfree_requested 8192 512 0\n"), 1)
	add("empty-snapshot", []byte(`{"format": "vram-memory-snapshot", "version": 1, "device": 3}`), 0)
	// An OOM caused by fragmentation under a limit, with the device's room:
	// the fix check replays it.
	add("fragmented-oom", []byte(fragmentedTrace(1, 70<<30)), 1)
	add("pinned-small-oom", []byte(pinnedSmallTrace(20, 10*mib)), 1)
	fuzztest.Check(t, "FuzzAnalyze", seeds, maxFuzzAnalyze)
}
