package analyze

import (
	"container/heap"
	"fmt"
	"math"
	"math/bits"
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
	seq        int   // its alloc's order among the allocs of the history
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
	// For blocks allocated in the history: the alloc's position on the
	// axis, its order among the allocs and what it was labelled with;
	// seq is -1 for blocks from before the history.
	start  int64
	seq    int
	region string
	frames []trace.Frame
}

// errOverflow reports a sum of sizes beyond int64: sizes no device has,
// from a corrupt or hostile history.
type errOverflow struct {
	event int    // the history event, -1 for the blocks before it
	what  string // the sum
}

func (e *errOverflow) Error() string {
	where := "the blocks held before the history"
	if e.event >= 0 {
		where = fmt.Sprintf("history event %d", e.event)
	}
	return fmt.Sprintf("%s: %s pass 2^63-1 bytes (8 EiB), more than any device holds: the history is corrupt", where, e.what)
}

// sum adds sizes, remembering the first overflow: a history of sizes
// that no device has must fail rather than print a negative peak.
type sum struct {
	event int // the event being added, for the error
	err   error
}

// add returns a+b, or a and records an error naming what if that
// overflows.
func (c *sum) add(a, b int64, what string) int64 {
	r := a + b
	if (b > 0 && r < a) || (b < 0 && r > a) {
		if c.err == nil {
			c.err = &errOverflow{event: c.event, what: what}
		}
		return a
	}
	return r
}

// sub returns a-b, like add.
func (c *sum) sub(a, b int64, what string) int64 {
	if b == math.MinInt64 {
		if c.err == nil {
			c.err = &errOverflow{event: c.event, what: what}
		}
		return a
	}
	return c.add(a, -b, what)
}

// spanHeap keeps the spansPerCategory largest spans of a category: a heap
// whose root is the one to drop first (the smallest, and of equal sizes
// the latest allocated), so that the result is the same whatever order
// the spans end in.
type spanHeap []span

func (h spanHeap) Len() int           { return len(h) }
func (h spanHeap) Less(i, j int) bool { return worse(h[i], h[j]) }
func (h spanHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *spanHeap) Push(x any)        { *h = append(*h, x.(span)) }
func (h *spanHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// worse orders spans for the hover text: larger first, then earlier.
func worse(a, b span) bool {
	if a.size != b.size {
		return a.size < b.size
	}
	return a.seq > b.seq
}

// keeps reports whether h would keep a span of size and seq.
func (h spanHeap) keeps(size int64, seq int) bool {
	return len(h) < spansPerCategory || worse(h[0], span{size: size, seq: seq})
}

// offer keeps sp if it is among the largest.
func (h *spanHeap) offer(sp span) {
	if len(*h) < spansPerCategory {
		heap.Push(h, sp)
		return
	}
	(*h)[0] = sp
	heap.Fix(h, 0)
}

// sorted returns the kept spans, largest first.
func (h spanHeap) sorted() []span {
	out := append([]span(nil), h...)
	sort.Slice(out, func(i, j int) bool { return worse(out[j], out[i]) })
	return out
}

// buildTimeline computes d.Timeline, d.OOMs and the stacked timelines
// from a history; s is the snapshot it ends in, or nil. It reads the
// history twice, and its memory grows with the blocks live at once and
// the categories, not with the length of the history. It fails when the
// history cannot be read or its sizes overflow.
func buildTimeline(d *Device, h trace.History, s *trace.Snapshot, opts Options) error {
	d.Timeline.Axis = "event"
	d.OOMs = []OOM{}
	var ck sum

	// Where the history starts: the blocks held then.
	var start []trace.Block
	if s != nil && s.Truncated {
		if bs, err := trace.StateAt(s, 0); err == nil {
			start = bs
		}
	}

	// Categories: by region (0) and by allocating code (1).
	type catTable struct {
		ids   map[string]int
		names []string
		cur   []int64
		peak  []int64
		area  []float64 // sum of cur over the events: the average's numerator
		since []int     // the event from which cur has held its value
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
			t.since = append(t.since, 0)
		}
		return id
	}
	memo := newStackMemo(s)
	keys := func(region string, frames []trace.Frame) [2]string {
		return [2]string{regionKey(region), memo.stackKey(frames)}
	}
	startKeys := make([][2]int, len(start))
	var alloc0 int64
	ck.event = -1
	for i, b := range start {
		k := keys(b.Region, b.Frames)
		startKeys[i] = [2]int{intern(0, k[0]), intern(1, k[1])}
		alloc0 = ck.add(alloc0, blockBytes(b), "the allocated bytes")
	}

	// Pass 1: the axis, the reserve at the start, and the peak and
	// average of every category, to pick the ones to draw. The average
	// of a category is summed when its value changes: area gains the old
	// value once for each event it lasted.
	var (
		n          int // events
		useTime    = true
		t0, tPrev  int64 // times of the first and the previous event
		segDelta   int64 // the reserve's change over the history
		event      int   // the event being read, for the averages
		checkStart *trace.StartChecker
	)
	if s == nil {
		checkStart = trace.NewStartChecker(nil)
	}
	live := map[uint64]liveEntry{}
	change := func(e liveEntry, sign int64) {
		for g := range 2 {
			t := &cats[g]
			c := e.cat[g]
			t.area[c] += float64(t.cur[c]) * float64(event-t.since[c])
			t.since[c] = event
			if sign > 0 {
				t.cur[c] = ck.add(t.cur[c], e.size, "the allocated bytes")
			} else {
				t.cur[c] -= e.size
			}
			t.peak[c] = max(t.peak[c], t.cur[c])
		}
	}
	for i, b := range start {
		e := liveEntry{size: blockBytes(b), cat: startKeys[i], seq: -1}
		live[b.Addr] = e
		change(e, 1)
	}
	err := h.Each(func(e *trace.Event) error {
		ck.event = n
		event = n
		if n == 0 {
			t0 = e.TimeUS
		}
		if e.TimeUS == 0 || n > 0 && e.TimeUS < tPrev {
			useTime = false
		}
		tPrev = e.TimeUS
		n++
		if checkStart != nil {
			checkStart.Add(e)
		}
		switch e.Action {
		case trace.ActionAlloc:
			if old, ok := live[e.Addr]; ok { // a free the history lost
				change(old, -1)
			}
			k := keys(e.Region, e.Frames)
			le := liveEntry{size: e.Size, cat: [2]int{intern(0, k[0]), intern(1, k[1])}}
			live[e.Addr] = le
			change(le, 1)
		case trace.ActionFreeCompleted:
			if old, ok := live[e.Addr]; ok {
				delete(live, e.Addr)
				change(old, -1)
			}
		default:
			if s != nil {
				segDelta = ck.add(segDelta, segmentDelta(*e), "the reserved bytes")
			}
		}
		return ck.err
	})
	if err != nil {
		return err
	}
	for g := range 2 {
		t := &cats[g]
		for c := range t.cur {
			t.area[c] += float64(t.cur[c]) * float64(n-t.since[c])
		}
	}
	d.HistoryEvents = n
	if s != nil {
		d.HistoryTruncated = s.Truncated
	} else {
		d.HistoryTruncated = !checkStart.StartsEmpty()
	}
	// The time axis needs every time, and the span of times must fit.
	useTime = useTime && n > 0 && !(t0 < 0 && tPrev > math.MaxInt64+t0)
	x := func(i int, e *trace.Event) int64 { return int64(i) }
	var xmax int64
	if n > 0 {
		xmax = int64(n - 1)
	}
	if useTime {
		d.Timeline.Axis = "time_us"
		x = func(i int, e *trace.Event) int64 { return e.TimeUS - t0 }
		xmax = tPrev - t0
	}
	var reserved0 int64
	if s != nil {
		reserved0 = max(ck.sub(s.Reserved(), segDelta, "the reserved bytes"), 0)
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
	}

	// Pass 2: the values, thinned to one point per stretch of the axis.
	buckets := int64(opts.points())
	bucketOf := func(xv int64) int64 {
		if xmax <= 0 {
			return 0
		}
		// xv * buckets / (xmax + 1), in 128 bits: 0 <= xv <= xmax.
		hi, lo := bits.Mul64(uint64(xv), uint64(buckets))
		q, _ := bits.Div64(hi, lo, uint64(xmax)+1)
		return int64(q)
	}
	spans := [2][]spanHeap{make([]spanHeap, len(d.stacked[0].names)), make([]spanHeap, len(d.stacked[1].names))}
	offer := func(e liveEntry, end int64) {
		if e.seq < 0 {
			return
		}
		var sp span
		built := false
		for g := range 2 {
			hp := &spans[g][e.cat[g]]
			if !hp.keeps(e.size, e.seq) {
				continue
			}
			if !built {
				sp = span{size: e.size, start: e.start, end: end, seq: e.seq, label: allocLabel(e.region, e.frames, memo)}
				built = true
			}
			hp.offer(sp)
		}
	}
	live = map[uint64]liveEntry{}
	cur := [2][]int64{make([]int64, len(d.stacked[0].names)), make([]int64, len(d.stacked[1].names))}
	allocated, reserved := alloc0, reserved0
	for i, b := range start {
		e := liveEntry{size: blockBytes(b), cat: [2]int{remap[0][startKeys[i][0]], remap[1][startKeys[i][1]]}, seq: -1}
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
	keepOOMs := opts.top()
	var lastAlloc []trace.Frame // the stack of the latest alloc
	i, seq := 0, 0
	err = h.Each(func(e *trace.Event) error {
		ck.event = i
		xi := x(i, e)
		switch e.Action {
		case trace.ActionAlloc:
			if old, ok := live[e.Addr]; ok {
				allocated -= old.size
				cur[0][old.cat[0]] -= old.size
				cur[1][old.cat[1]] -= old.size
				offer(old, xi)
			}
			k := keys(e.Region, e.Frames)
			c := [2]int{remap[0][cats[0].ids[k[0]]], remap[1][cats[1].ids[k[1]]]}
			live[e.Addr] = liveEntry{size: e.Size, cat: c, start: xi, seq: seq, region: e.Region, frames: e.Frames}
			lastAlloc = e.Frames
			seq++
			allocated = ck.add(allocated, e.Size, "the allocated bytes")
			cur[0][c[0]] = ck.add(cur[0][c[0]], e.Size, "the allocated bytes")
			cur[1][c[1]] = ck.add(cur[1][c[1]], e.Size, "the allocated bytes")
		case trace.ActionFreeCompleted:
			if old, ok := live[e.Addr]; ok {
				delete(live, e.Addr)
				allocated -= old.size
				cur[0][old.cat[0]] -= old.size
				cur[1][old.cat[1]] -= old.size
				offer(old, xi)
			}
		case trace.ActionOOM:
			d.OOMEvents++
			if len(d.OOMs) < keepOOMs {
				site, native := oomSite(e.Frames)
				prev := ""
				if native || len(e.Frames) == 0 {
					prev = memo.siteString(lastAlloc)
				}
				d.OOMs = append(d.OOMs, OOM{Event: i, TimeUS: e.TimeUS, RequestedBytes: e.Size, DeviceFreeBytes: int64(min(e.Addr, math.MaxInt64)),
					AllocatedBytes: allocated, ReservedBytes: reserved, Region: clipText(e.Region, maxFrameScan), Site: site, PrevSite: prev, Frames: boundFrames(e.Frames),
					stream: e.Stream, peakReservedBefore: tl.PeakReservedBytes})
			}
		default:
			reserved = ck.add(reserved, segmentDelta(*e), "the reserved bytes")
		}
		if ck.err != nil {
			return ck.err
		}
		tl.PeakAllocatedBytes = max(tl.PeakAllocatedBytes, allocated)
		tl.PeakReservedBytes = max(tl.PeakReservedBytes, reserved)
		minAlloc, minRes = min(minAlloc, allocated), min(minRes, reserved)
		b := bucketOf(xi)
		if b != bestBucket {
			flush()
			bestBucket = b
			best.AllocatedBytes = -1
		}
		if allocated > best.AllocatedBytes || e.Action == trace.ActionOOM {
			best = Point{X: xi, Event: i, AllocatedBytes: allocated, ReservedBytes: reserved}
			for g := range 2 {
				bestVals[g] = append(bestVals[g][:0], cur[g]...)
			}
		}
		i++
		return nil
	})
	if err != nil {
		return err
	}
	if i != n {
		return fmt.Errorf("the history changed between two readings (%d events, then %d)", n, i)
	}
	flush()
	tl.EndAllocatedBytes, tl.EndReservedBytes = allocated, reserved

	// A history without a snapshot may start mid-way: lift it so that
	// nothing goes below zero.
	if minAlloc < 0 || minRes < 0 {
		ck.event = n - 1
		lift := func(v *int64, by int64) { *v = ck.sub(*v, by, "the lifted bytes") }
		lift(&tl.StartAllocatedBytes, minAlloc)
		lift(&tl.StartReservedBytes, minRes)
		lift(&tl.PeakAllocatedBytes, minAlloc)
		lift(&tl.PeakReservedBytes, minRes)
		lift(&tl.EndAllocatedBytes, minAlloc)
		lift(&tl.EndReservedBytes, minRes)
		for i := range tl.Points {
			lift(&tl.Points[i].AllocatedBytes, minAlloc)
			lift(&tl.Points[i].ReservedBytes, minRes)
		}
		for i := range d.OOMs {
			lift(&d.OOMs[i].AllocatedBytes, minAlloc)
			lift(&d.OOMs[i].ReservedBytes, minRes)
		}
		if ck.err != nil {
			return ck.err
		}
		if minAlloc < 0 {
			for g := range 2 { // the unknown start goes to its own category
				st := &d.stacked[g]
				st.names = append(st.names, "(before the history)")
				spans[g] = append(spans[g], nil)
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
	for _, e := range live {
		offer(e, xmax+1)
	}
	for g := range 2 {
		st := &d.stacked[g]
		st.allocs = make([][]span, len(st.names))
		for c := range spans[g] {
			st.allocs[c] = spans[g][c].sorted()
		}
	}
	return nil
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

// allocLabel describes an alloc event for the hover text: its region
// and the frames of the user's code that allocated it.
func allocLabel(region string, frames []trace.Frame, memo *stackMemo) string {
	var b strings.Builder
	if region != "" {
		fmt.Fprintf(&b, "region %s\n", clipText(region, maxFrameText))
	}
	writeStackLines(&b, frames, 6, memo)
	return strings.TrimSuffix(b.String(), "\n")
}

// writeStackLines writes up to n frames of the user's code (userFrames,
// remembered in memo), one per line, indented, and how many other frames
// the stack has.
func writeStackLines(b *strings.Builder, frames []trace.Frame, n int, memo *stackMemo) {
	shown := memo.userFrames(frames, n)
	for _, f := range shown {
		fmt.Fprintf(b, "  %s\n", clipText(frameString(f), maxFrameText))
	}
	if rest := len(frames) - len(shown); rest > 0 {
		fmt.Fprintf(b, "  (%s in the stack)\n", nOf(rest, "more frame", "more frames"))
	}
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
	// Free and cached together, saturating: a corrupt history may record
	// sizes near 2^63.
	avail := o.DeviceFreeBytes + o.CachedBytes
	if avail < o.DeviceFreeBytes {
		avail = math.MaxInt64
	}
	switch {
	case !deviceFull(o.RequestedBytes, o.DeviceFreeBytes):
		b.WriteString(" The device had room: a limit on this allocator stopped it (torch.cuda.set_per_process_memory_fraction, or vram's per_process_memory_fraction).")
	case o.RequestedBytes <= o.DeviceFreeBytes && o.CachedBytes < o.RequestedBytes:
		fmt.Fprintf(&b, " The device was full: it had only %s more free than asked, and the CUDA driver keeps part of what it reports free for its own use (page tables), so an allocation this close to the free memory fails. Release tensors earlier, use a smaller batch or lower precision (bf16), or a card with more memory.",
			units.Compact(o.DeviceFreeBytes-o.RequestedBytes))
	case o.RequestedBytes <= avail:
		fmt.Fprintf(&b, " Free memory was enough in total (%s) but in pieces: the cached blocks could not serve it and could not be merged with the device's free memory. Try expandable_segments:True, max_split_size_mb to keep large blocks whole, or freeing the cache (EmptyCache) before this allocation.",
			units.Compact(avail))
	default:
		fmt.Fprintf(&b, " It needed %s more than the device and the cache had together: the program needs more memory than the card offers here. Release tensors earlier, use a smaller batch or lower precision (bf16), or a card with more memory.",
			units.Compact(o.RequestedBytes-avail))
	}
	return b.String()
}
