package analyze

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vramgo/vram/memory/trace"

	"github.com/vramgo/vram/internal/units"
)

// Timeline is an allocator's allocated and reserved memory over its
// history, thinned to at most Options.TimelinePoints points.
type Timeline struct {
	// Axis is "time_us" when every event has a time (X is microseconds
	// since the first event) and "event" otherwise (X is the event's
	// index).
	Axis string `json:"axis"`
	// Points are in history order. Allocated memory counts requested
	// sizes, as histories record them.
	Points []Point `json:"points"`
	// Start, peak and end values over the whole history, in bytes.
	StartAllocatedBytes int64 `json:"start_allocated_bytes"`
	StartReservedBytes  int64 `json:"start_reserved_bytes"`
	PeakAllocatedBytes  int64 `json:"peak_allocated_bytes"`
	PeakReservedBytes   int64 `json:"peak_reserved_bytes"`
	EndAllocatedBytes   int64 `json:"end_allocated_bytes"`
	EndReservedBytes    int64 `json:"end_reserved_bytes"`
}

// Point is the allocator's memory just after one history event.
type Point struct {
	X              int64 `json:"x"`               // on the Timeline's Axis
	Event          int   `json:"event"`           // the event's index in the history
	AllocatedBytes int64 `json:"allocated_bytes"` // requested sizes of the held blocks
	ReservedBytes  int64 `json:"reserved_bytes"`  // segments held from the device
}

// stackedTimeline splits a timeline's allocated memory by category, for
// the HTML view.
type stackedTimeline struct {
	names  []string  // categories, bottom first; "other" last when used
	values [][]int64 // [point][category] bytes
	allocs [][]span  // per category, its largest allocations
}

// span is one allocation's life on the timeline.
type span struct {
	size       int64
	start, end int64 // X of its alloc and free (end = last X+1 if never freed)
	label      string
}

// maxCategories bounds the colours of a stacked timeline.
const maxCategories = 12

// spansPerCategory is how many allocations per category the HTML view
// keeps for its hover text.
const spansPerCategory = 24

type liveEntry struct {
	size int64
	cat  [2]int
	span int // index in spans, -1 for blocks from before the history
}

// buildTimeline computes d.Timeline, d.OOMs and the stacked timelines
// from a history; s is the snapshot it ends in, or nil.
func buildTimeline(d *Device, events []trace.Event, s *trace.Snapshot, opts Options) {
	d.Timeline.Axis = "event"
	d.OOMs = []OOM{}
	useTime := len(events) > 0
	for i, e := range events {
		if e.TimeUS == 0 || i > 0 && e.TimeUS < events[i-1].TimeUS {
			useTime = false
			break
		}
	}
	x := func(i int) int64 { return int64(i) }
	if useTime {
		d.Timeline.Axis = "time_us"
		t0 := events[0].TimeUS
		x = func(i int) int64 { return events[i].TimeUS - t0 }
	}

	// Where the history starts: the blocks held then and the reserve.
	var start []trace.Block
	if s != nil && s.Truncated && len(events) > 0 {
		if bs, err := trace.StateAt(s, 0); err == nil {
			start = bs
		}
	}
	var reserved0 int64
	if s != nil {
		reserved0 = s.Reserved()
		for _, e := range events {
			reserved0 -= segmentDelta(e)
		}
		reserved0 = max(reserved0, 0)
	}

	// Categories: by region (0) and by top stack frame (1).
	type catTable struct {
		ids   map[string]int
		names []string
		cur   []int64
		peak  []int64
		area  []float64 // sum of cur over the events: the average's numerator
	}
	var cats [2]catTable
	intern := func(g int, key string) int {
		t := &cats[g]
		if t.ids == nil {
			t.ids = map[string]int{}
		}
		id, ok := t.ids[key]
		if !ok {
			id = len(t.names)
			t.ids[key] = id
			t.names = append(t.names, key)
			t.cur = append(t.cur, 0)
			t.peak = append(t.peak, 0)
			t.area = append(t.area, 0)
		}
		return id
	}
	keys := func(region string, frames []trace.Frame) [2]string {
		return [2]string{regionKey(region), stackKey(frames)}
	}
	startKeys := make([][2]int, len(start))
	var alloc0 int64
	for i, b := range start {
		k := keys(b.Region, b.Frames)
		startKeys[i] = [2]int{intern(0, k[0]), intern(1, k[1])}
		alloc0 += blockBytes(b)
	}

	// Pass 1: the peak of every category, to pick the ones to draw.
	live := map[uint64]liveEntry{}
	addLive := func(addr uint64, e liveEntry) {
		if old, ok := live[addr]; ok { // a free the history lost
			for g := range 2 {
				cats[g].cur[old.cat[g]] -= old.size
			}
		}
		live[addr] = e
		for g := range 2 {
			t := &cats[g]
			t.cur[e.cat[g]] += e.size
			t.peak[e.cat[g]] = max(t.peak[e.cat[g]], t.cur[e.cat[g]])
		}
	}
	freeLive := func(addr uint64) (liveEntry, bool) {
		e, ok := live[addr]
		if ok {
			delete(live, addr)
			for g := range 2 {
				cats[g].cur[e.cat[g]] -= e.size
			}
		}
		return e, ok
	}
	for i, b := range start {
		addLive(b.Addr, liveEntry{size: blockBytes(b), cat: startKeys[i], span: -1})
	}
	for _, e := range events {
		switch e.Action {
		case trace.ActionAlloc:
			k := keys(e.Region, e.Frames)
			addLive(e.Addr, liveEntry{size: e.Size, cat: [2]int{intern(0, k[0]), intern(1, k[1])}})
		case trace.ActionFreeCompleted:
			freeLive(e.Addr)
		}
		for g := range 2 {
			for c, v := range cats[g].cur {
				if v != 0 {
					cats[g].area[c] += float64(v)
				}
			}
		}
	}
	top := min(opts.top(), maxCategories)
	var remap [2][]int // category id -> index in the drawn list
	for g := range 2 {
		t := &cats[g]
		order := make([]int, len(t.names))
		for i := range order {
			order[i] = i
		}
		// Draw the largest peaks; stack them by average, the memory that
		// stays (weights, optimizer state) at the bottom and what comes
		// and goes on top.
		sort.SliceStable(order, func(a, b int) bool { return t.peak[order[a]] > t.peak[order[b]] })
		if len(order) > top {
			sort.SliceStable(order[:top], func(a, b int) bool { return t.area[order[a]] > t.area[order[b]] })
		} else {
			sort.SliceStable(order, func(a, b int) bool { return t.area[order[a]] > t.area[order[b]] })
		}
		remap[g] = make([]int, len(t.names))
		st := &d.stacked[g]
		st.names = nil
		for rank, id := range order {
			if rank < top {
				remap[g][id] = rank
				st.names = append(st.names, t.names[id])
			} else {
				remap[g][id] = top
			}
		}
		if len(order) > top {
			st.names = append(st.names, "other")
		}
		st.allocs = make([][]span, len(st.names))
	}

	// Pass 2: the values, thinned to one point per stretch of the axis.
	n := len(events)
	var xmax int64
	if n > 0 {
		xmax = x(n - 1)
	}
	buckets := int64(opts.points())
	bucketOf := func(xv int64) int64 {
		if xmax <= 0 {
			return 0
		}
		return xv * buckets / (xmax + 1)
	}
	var spans []span
	spanCat := [][2]int{}
	live = map[uint64]liveEntry{}
	cur := [2][]int64{make([]int64, len(d.stacked[0].names)), make([]int64, len(d.stacked[1].names))}
	allocated, reserved := alloc0, reserved0
	for i, b := range start {
		e := liveEntry{size: blockBytes(b), cat: [2]int{remap[0][startKeys[i][0]], remap[1][startKeys[i][1]]}, span: -1}
		live[b.Addr] = e
		cur[0][e.cat[0]] += e.size
		cur[1][e.cat[1]] += e.size
	}
	tl := &d.Timeline
	tl.StartAllocatedBytes, tl.StartReservedBytes = allocated, reserved
	tl.PeakAllocatedBytes, tl.PeakReservedBytes = allocated, reserved
	var minAlloc, minRes int64
	bestBucket := int64(-1)
	var best Point
	var bestVals [2][]int64
	flush := func() {
		if bestBucket < 0 {
			return
		}
		tl.Points = append(tl.Points, best)
		for g := range 2 {
			d.stacked[g].values = append(d.stacked[g].values, append([]int64(nil), bestVals[g]...))
		}
	}
	for i, e := range events {
		switch e.Action {
		case trace.ActionAlloc:
			if old, ok := live[e.Addr]; ok {
				allocated -= old.size
				cur[0][old.cat[0]] -= old.size
				cur[1][old.cat[1]] -= old.size
				if old.span >= 0 {
					spans[old.span].end = x(i)
				}
			}
			k := keys(e.Region, e.Frames)
			c := [2]int{remap[0][cats[0].ids[k[0]]], remap[1][cats[1].ids[k[1]]]}
			spans = append(spans, span{size: e.Size, start: x(i), end: -1, label: allocLabel(e)})
			spanCat = append(spanCat, c)
			live[e.Addr] = liveEntry{size: e.Size, cat: c, span: len(spans) - 1}
			allocated += e.Size
			cur[0][c[0]] += e.Size
			cur[1][c[1]] += e.Size
		case trace.ActionFreeCompleted:
			if old, ok := live[e.Addr]; ok {
				delete(live, e.Addr)
				allocated -= old.size
				cur[0][old.cat[0]] -= old.size
				cur[1][old.cat[1]] -= old.size
				if old.span >= 0 {
					spans[old.span].end = x(i)
				}
			}
		case trace.ActionOOM:
			d.OOMs = append(d.OOMs, OOM{Event: i, TimeUS: e.TimeUS, RequestedBytes: e.Size, DeviceFreeBytes: int64(e.Addr),
				AllocatedBytes: allocated, ReservedBytes: reserved, CachedBytes: max(0, reserved-allocated),
				Region: e.Region, Frames: topFrames(e.Frames, 8)})
		default:
			reserved += segmentDelta(e)
		}
		tl.PeakAllocatedBytes = max(tl.PeakAllocatedBytes, allocated)
		tl.PeakReservedBytes = max(tl.PeakReservedBytes, reserved)
		minAlloc, minRes = min(minAlloc, allocated), min(minRes, reserved)
		b := bucketOf(x(i))
		if b != bestBucket {
			flush()
			bestBucket = b
			best.AllocatedBytes = -1
		}
		if allocated > best.AllocatedBytes || e.Action == trace.ActionOOM {
			best = Point{X: x(i), Event: i, AllocatedBytes: allocated, ReservedBytes: reserved}
			for g := range 2 {
				bestVals[g] = append(bestVals[g][:0], cur[g]...)
			}
		}
	}
	flush()
	tl.EndAllocatedBytes, tl.EndReservedBytes = allocated, reserved

	// A history without a snapshot may start mid-way: lift it so that
	// nothing goes below zero.
	if minAlloc < 0 || minRes < 0 {
		tl.StartAllocatedBytes -= minAlloc
		tl.StartReservedBytes -= minRes
		tl.PeakAllocatedBytes -= minAlloc
		tl.PeakReservedBytes -= minRes
		tl.EndAllocatedBytes -= minAlloc
		tl.EndReservedBytes -= minRes
		for i := range tl.Points {
			tl.Points[i].AllocatedBytes -= minAlloc
			tl.Points[i].ReservedBytes -= minRes
		}
		for i := range d.OOMs {
			d.OOMs[i].AllocatedBytes -= minAlloc
			d.OOMs[i].ReservedBytes -= minRes
		}
		if minAlloc < 0 {
			for g := range 2 { // the unknown start goes to its own category
				st := &d.stacked[g]
				st.names = append(st.names, "(before the history)")
				st.allocs = append(st.allocs, nil)
				for i := range st.values {
					st.values[i] = append(st.values[i], -minAlloc)
				}
			}
		}
	}
	for i := range d.OOMs {
		d.OOMs[i].CachedBytes = max(0, d.OOMs[i].ReservedBytes-d.OOMs[i].AllocatedBytes)
		d.OOMs[i].Explanation = explainOOM(d.OOMs[i], d.capacity(s))
	}

	// The largest allocations of each category, for the hover text.
	end := xmax + 1
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return spans[order[a]].size > spans[order[b]].size })
	for _, i := range order {
		sp := spans[i]
		if sp.end < 0 {
			sp.end = end
		}
		for g := range 2 {
			c := spanCat[i][g]
			if len(d.stacked[g].allocs[c]) < spansPerCategory {
				d.stacked[g].allocs[c] = append(d.stacked[g].allocs[c], sp)
			}
		}
	}
}

func (d *Device) capacity(s *trace.Snapshot) int64 {
	if s != nil {
		return s.Capacity
	}
	return 0
}

// blockBytes is a held block's size as a history counts it: requested.
func blockBytes(b trace.Block) int64 {
	if b.Requested > 0 {
		return b.Requested
	}
	return b.Size
}

// segmentDelta is the change of reserved memory an event makes.
func segmentDelta(e trace.Event) int64 {
	switch e.Action {
	case trace.ActionSegmentAlloc, trace.ActionSegmentMap:
		return e.Size
	case trace.ActionSegmentFree, trace.ActionSegmentUnmap:
		return -e.Size
	}
	return 0
}

// allocLabel describes an alloc event for the hover text.
func allocLabel(e trace.Event) string {
	var b strings.Builder
	if e.Region != "" {
		fmt.Fprintf(&b, "region %s\n", e.Region)
	}
	for i, f := range e.Frames {
		if i == 6 {
			fmt.Fprintf(&b, "  ... %d more frames\n", len(e.Frames)-i)
			break
		}
		fmt.Fprintf(&b, "  %s\n", frameString(f))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// explainOOM says why an allocation failed and what to try.
func explainOOM(o OOM, capacity int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Asked for %s; the device had %s free, and this allocator held %s reserved, %s of it allocated and %s cached but free.",
		units.Compact(o.RequestedBytes), units.Compact(o.DeviceFreeBytes), units.Compact(o.ReservedBytes), units.Compact(o.AllocatedBytes), units.Compact(o.CachedBytes))
	if capacity > 0 {
		if others := capacity - o.ReservedBytes - o.DeviceFreeBytes; others > 64<<20 {
			fmt.Fprintf(&b, " Of the card's %s, %s was held outside this allocator (other processes, CUDA contexts, libraries).", units.Compact(capacity), units.Compact(others))
		}
	}
	switch {
	case o.RequestedBytes <= o.DeviceFreeBytes:
		b.WriteString(" The device had room: the allocator's own limit stopped it (per_process_memory_fraction), or the device's free memory was not in one piece.")
	case o.RequestedBytes <= o.DeviceFreeBytes+o.CachedBytes:
		fmt.Fprintf(&b, " Free memory was enough in total (%s) but in pieces: the cached blocks could not serve it and could not be merged with the device's free memory. Try expandable_segments:True, max_split_size_mb to keep large blocks whole, or freeing the cache (EmptyCache) before this allocation.",
			units.Compact(o.DeviceFreeBytes+o.CachedBytes))
	default:
		fmt.Fprintf(&b, " It needed %s more than the device and the cache had together: the program needs more memory than the card offers here. Release tensors earlier, use a smaller batch or lower precision (bf16), or a card with more memory.",
			units.Compact(o.RequestedBytes-o.DeviceFreeBytes-o.CachedBytes))
	}
	return b.String()
}
