package memory

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vramgo/vram/memory/trace"

	"github.com/vramgo/vram/internal/printable"
	"github.com/vramgo/vram/internal/units"
)

// OutOfMemoryError is the error of an [Allocator.Alloc] that found no room
// even after releasing the allocator's cache and running the OnOOM hook.
// Use errors.As to get it. Its message says what was asked, what the device
// has, what this process holds and how much of that is fragmented, where
// the memory went by region, what other processes hold, and one fix that
// the allocator checked by replaying (see the package documentation, "# Out
// of memory").
type OutOfMemoryError struct {
	Requested int64  // bytes asked of Alloc
	Rounded   int64  // bytes after the allocator's rounding
	Stream    Stream // stream of the request
	Region    string // region label of the request

	Capacity int64 // the device's total memory
	Limit    int64 // the most this allocator may reserve (per-process fraction), Capacity without a limit
	// DeviceFree is the memory free on the device as the driver reports
	// it; -1 when unknown (no DeviceInfo).
	DeviceFree int64

	Reserved  int64 // bytes this allocator holds from the device
	Allocated int64 // bytes of blocks held by callers
	// Unallocated is Reserved minus Allocated: memory reserved but not
	// handed out (fragmentation, and blocks waiting for other streams).
	Unallocated int64
	LargestFree int64           // the largest free cached block, bytes
	TopRegions  []RegionUsage   // live allocations by region label, largest first (at most 5)
	Others      []ProcessMemory // other processes on the device, largest first; nil if unknown
	OthersBytes int64           // what the device reports used beyond this allocator's reserve, -1 if unknown
	LiveBlocks  int             // blocks held by callers
	// Fix is the suggestion, one sentence: a setting under which the
	// replay fits, or how much memory is missing; "" when the replay could
	// not reproduce the failure.
	Fix string
	// FixConfig is the VRAM_ALLOC_CONF under which the replay fits; "" if
	// none does.
	FixConfig string
	// NeededBytes is, when no setting fits, how much more memory the
	// replay needs under the most compact setting; else 0.
	NeededBytes int64
	// CheckedBy says what the fix check replayed: "history" when the
	// allocator's recent-operations log covers everything since its
	// creation, else "recent history" (the last allocations and frees,
	// after the blocks that were live before them).
	CheckedBy string
	Err       error // the arena's or the limit's refusal

	cfg        Config
	virtual    bool  // the arena supports virtual memory
	gran       int64 // its granularity
	usable     int64 // memory this process can use: capacity minus others, capped by the limit
	ops        []replayOp
	pendingSum int64 // bytes of blocks waiting for events
}

// oomLogSize is how many of its latest allocations and frees an allocator
// keeps for the fix check of an OutOfMemoryError (opLog). Each fix check
// replays them once per setting tried and a dozen times to size what is
// missing: 16,384 keeps an OutOfMemoryError to tens of milliseconds, and
// the log to 512 KiB. It must be a power of two.
const oomLogSize = 16384

// opLog is a ring of an allocator's latest allocations and frees, kept at
// all times (a few nanoseconds an operation) so that an OutOfMemoryError
// can replay what the program did rather than guess it from the layout.
type opLog struct {
	ring  []replayOp
	next  int    // where the next operation goes
	n     int    // operations stored
	total uint64 // operations ever logged
}

// add logs one operation.
func (l *opLog) add(op replayOp) {
	if l.ring == nil {
		l.ring = make([]replayOp, oomLogSize)
	}
	l.ring[l.next] = op
	l.next = (l.next + 1) & (oomLogSize - 1) // oomLogSize is a power of two
	l.n = min(l.n+1, len(l.ring))
	l.total++
}

// ops returns the logged operations, oldest first.
func (l *opLog) ops() []replayOp {
	out := make([]replayOp, 0, l.n)
	for i := l.n; i > 0; i-- {
		out = append(out, l.ring[(l.next-i+len(l.ring))%len(l.ring)])
	}
	return out
}

// RegionUsage is the live memory allocated under one region label.
type RegionUsage struct {
	Region string // the label, "" for unlabelled allocations
	Bytes  int64  // bytes of its live blocks (rounded sizes)
	Count  int    // number of live blocks
}

// replayOp is one step of the fix check's replay: allocate size bytes for
// addr on stream, or (free) free the block allocated for addr (size is
// then what that block had been asked for).
type replayOp struct {
	free   bool
	addr   uint64
	size   int64
	stream Stream
}

// Unwrap returns the arena's or the limit's error.
func (e *OutOfMemoryError) Unwrap() error { return e.Err }

// newOOMLocked counts an OOM and captures the state for its error.
func (a *Allocator) newOOMLocked(size int64, stream Stream, region string, cause error) *OutOfMemoryError {
	a.stats.NumOOMs++
	e := &OutOfMemoryError{
		Requested:   size,
		Rounded:     a.roundSize(size),
		Stream:      stream,
		Region:      region,
		Capacity:    a.arena.Capacity(),
		Limit:       a.allowed(),
		DeviceFree:  -1,
		OthersBytes: -1,
		Reserved:    a.stats.ReservedBytes[StatAll].Current,
		Allocated:   a.stats.AllocatedBytes[StatAll].Current,
		LiveBlocks:  int(a.stats.Allocation[StatAll].Current),
		Err:         cause,
		cfg:         a.cfg,
		gran:        SimGranularity,
	}
	if va, ok := a.arena.(VirtualArena); ok {
		e.virtual = true
		e.gran = va.Granularity()
	}
	e.Unallocated = e.Reserved - e.Allocated
	e.usable = e.Limit
	if a.info != nil {
		if free, total, err := a.info.FreeMemory(); err == nil {
			e.DeviceFree = free
			e.OthersBytes = max(total-free-e.Reserved, 0)
			e.usable = min(e.Limit, total-e.OthersBytes)
		}
		if procs, err := a.info.OtherProcesses(); err == nil {
			e.Others = procs
		}
	}
	segs := make([]*segment, 0, len(a.segs))
	for _, seg := range a.segs {
		segs = append(segs, seg)
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].addr < segs[j].addr })
	regions := map[string]*RegionUsage{}
	var held []replayOp // blocks held now, in address order
	for _, seg := range segs {
		for b := seg.first; b != nil; b = b.next {
			switch b.state {
			case stateFree:
				e.LargestFree = max(e.LargestFree, b.size)
			case statePending:
				e.pendingSum += b.size
				held = append(held, replayOp{addr: b.addr, size: b.requested, stream: b.stream})
			case stateAllocated:
				held = append(held, replayOp{addr: b.addr, size: b.requested, stream: b.stream})
				r := regions[b.region]
				if r == nil {
					r = &RegionUsage{Region: b.region}
					regions[b.region] = r
				}
				r.Bytes += b.size
				r.Count++
			}
		}
	}
	e.ops, e.CheckedBy = replayScript(a.log.ops(), held), "recent history"
	if a.log.total == uint64(a.log.n) {
		e.CheckedBy = "history"
	}
	for _, r := range regions {
		e.TopRegions = append(e.TopRegions, *r)
	}
	sort.Slice(e.TopRegions, func(i, j int) bool {
		if e.TopRegions[i].Bytes != e.TopRegions[j].Bytes {
			return e.TopRegions[i].Bytes > e.TopRegions[j].Bytes
		}
		return e.TopRegions[i].Region < e.TopRegions[j].Region
	})
	if len(e.TopRegions) > 5 {
		e.TopRegions = e.TopRegions[:5]
	}
	var freeAt uint64
	if e.DeviceFree >= 0 {
		freeAt = uint64(e.DeviceFree)
	}
	a.record(trace.ActionOOM, freeAt, size, stream, region)
	return e
}

// replayScript returns the operations the fix check replays: the blocks
// that were live before the logged operations (held now but not allocated
// by them, or freed by them but allocated earlier), in address order, then
// the logged operations themselves.
func replayScript(logged, held []replayOp) []replayOp {
	var before []replayOp
	live := map[uint64]bool{} // allocated by the log and not freed since
	for _, op := range logged {
		switch {
		case !op.free:
			live[op.addr] = true
		case live[op.addr]:
			delete(live, op.addr)
		default: // allocated before the log began
			before = append(before, replayOp{addr: op.addr, size: op.size, stream: op.stream})
		}
	}
	for _, h := range held {
		if !live[h.addr] {
			before = append(before, h)
		}
	}
	sort.Slice(before, func(i, j int) bool { return before[i].addr < before[j].addr })
	return append(before, logged...)
}

// fitsWith replays e.ops, then the failed request, through a fresh allocator
// with cfg on a simulated device of capacity bytes (with virtual memory
// only if the real arena has it), and reports whether everything fits and
// the peak reserve of the replay.
func (e *OutOfMemoryError) fitsWith(cfg Config, capacity int64) (bool, int64) {
	if capacity <= 0 {
		return false, 0
	}
	sim := NewSimArenaGranularity(capacity, e.gran)
	var arena Arena = sim
	if !e.virtual {
		arena = plainArena{sim}
	}
	cfg.PerProcessMemoryFraction = 0 // capacity is already the limit
	al := New(arena, cfg, withQuickOOM())
	live := make(map[uint64]*Block, len(e.ops))
	for _, op := range e.ops {
		if op.free {
			if b, ok := live[op.addr]; ok {
				al.Free(b)
				delete(live, op.addr)
			}
			continue
		}
		if old, ok := live[op.addr]; ok {
			al.Free(old)
		}
		b, err := al.Alloc(op.size, op.stream, "")
		if err != nil {
			return false, 0
		}
		live[op.addr] = b
	}
	_, err := al.Alloc(e.Requested, e.Stream, "")
	return err == nil, al.MaxReserved()
}

// fits is fitsWith without the peak.
func (e *OutOfMemoryError) fits(cfg Config, capacity int64) bool {
	ok, _ := e.fitsWith(cfg, capacity)
	return ok
}

// plainArena hides the virtual memory of a SimArena, to replay a device
// without it.
type plainArena struct{ s *SimArena }

func (p plainArena) Alloc(size int64) (uint64, error)   { return p.s.Alloc(size) }
func (p plainArena) Free(addr uint64, size int64) error { return p.s.Free(addr, size) }
func (p plainArena) Capacity() int64                    { return p.s.Capacity() }

// checkFix finds the first other setting under which the replay fits, or
// else how much memory is missing. It runs without the allocator's lock.
func (e *OutOfMemoryError) checkFix() {
	if e.fits(e.cfg, e.usable) {
		// The replay does not reproduce the failure (other processes or
		// streams changed what was free): nothing to conclude.
		return
	}
	var tries []Config
	c := e.cfg
	if e.virtual && c.Policy == PolicyPyTorch {
		if !c.ExpandableSegments {
			t := c
			t.ExpandableSegments = true
			tries = append(tries, t)
		}
		t := c
		t.Policy, t.ExpandableSegments = PolicyVRAM, false
		tries = append(tries, t)
	}
	if c.Policy == PolicyPyTorch && !c.ExpandableSegments || !e.virtual {
		for _, mb := range []int64{64, 128, 256, 512, 1024} {
			if c.MaxSplitSizeMB == 0 || mb < c.MaxSplitSizeMB {
				t := c
				t.MaxSplitSizeMB = mb
				tries = append(tries, t)
			}
		}
	}
	for _, t := range tries {
		if e.fits(t, e.usable) {
			e.FixConfig = configString(t)
			e.Fix = fmt.Sprintf("with VRAM_ALLOC_CONF=%q this allocation fits", e.FixConfig)
			return
		}
	}
	if e.pendingSum > 0 && e.Requested <= e.usable-e.Allocated-e.pendingSum {
		e.Fix = fmt.Sprintf("%s of freed blocks are still in use on other streams: synchronize those streams before allocating", units.Bytes(e.pendingSum))
		return
	}
	// How much memory is missing? Replay on a device large enough for
	// anything; its peak reserve fits for sure. Then search below it, in
	// granules (capacities in between behave alike), for the smallest
	// device that fits: at most 8 replays more.
	best := e.cfg
	if e.virtual {
		best.Policy, best.ExpandableSegments = PolicyVRAM, false
	}
	g := e.gran
	ok, peak := e.fitsWith(best, max(4*e.usable, 2*(e.Reserved+e.Rounded)+(64<<20)))
	if !ok {
		return
	}
	lo, hi := e.usable/g, alignUp(peak, g)/g
	if !e.fits(best, hi*g) {
		return
	}
	for i := 0; i < 8 && hi-lo > 1; i++ {
		mid := lo + (hi-lo)/2
		if e.fits(best, mid*g) {
			hi = mid
		} else {
			lo = mid
		}
	}
	e.NeededBytes = max(hi*g-e.usable, 0)
	under := "under the current settings"
	if best != e.cfg {
		under = fmt.Sprintf("even with VRAM_ALLOC_CONF=%q", configString(best))
	}
	e.Fix = fmt.Sprintf("no setting makes it fit: it needs %s more memory %s; release tensors or use a larger device",
		units.Bytes(e.NeededBytes), under)
}

// configString is c.String(), but "policy:vram" rather than "" for the
// default, so that a message names the setting.
func configString(c Config) string {
	if s := c.String(); s != "" {
		return s
	}
	return "policy:vram"
}

// Error returns the multi-line diagnosis described at [OutOfMemoryError].
func (e *OutOfMemoryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "memory: out of memory: tried to allocate %s (%d bytes asked", units.Bytes(e.Rounded), e.Requested)
	if e.Region != "" {
		fmt.Fprintf(&b, ", region %q", e.Region)
	}
	fmt.Fprintf(&b, ", stream %d)\n", e.Stream)
	fmt.Fprintf(&b, "  device: %s total", units.Bytes(e.Capacity))
	if e.DeviceFree >= 0 {
		fmt.Fprintf(&b, ", %s free", units.Bytes(e.DeviceFree))
	}
	if e.Limit < e.Capacity {
		fmt.Fprintf(&b, "; this process is limited to %s (per_process_memory_fraction)", units.Bytes(e.Limit))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  this process: %s reserved, %s allocated, %s reserved but unallocated; largest free block %s\n",
		units.Bytes(e.Reserved), units.Bytes(e.Allocated), units.Bytes(e.Unallocated), units.Bytes(e.LargestFree))
	if len(e.TopRegions) > 0 {
		b.WriteString("  live allocations by region:")
		for i, r := range e.TopRegions {
			if i > 0 {
				b.WriteString(",")
			}
			name := printable.String(r.Region) // labels can come from a replayed file
			if name == "" {
				name = "(unlabelled)"
			}
			fmt.Fprintf(&b, " %s %s in %d", name, units.Bytes(r.Bytes), r.Count)
		}
		b.WriteString("\n")
	}
	switch {
	case len(e.Others) > 0:
		b.WriteString("  other processes:")
		for i, p := range e.Others {
			if i > 0 {
				b.WriteString(",")
			}
			name := printable.String(p.Name) // a process names itself
			if name == "" {
				name = "?"
			}
			fmt.Fprintf(&b, " pid %d (%s) %s", p.PID, name, units.Bytes(p.Bytes))
		}
		b.WriteString("\n")
	case e.OthersBytes > 0:
		fmt.Fprintf(&b, "  held outside this allocator (other processes, contexts): %s\n", units.Bytes(e.OthersBytes))
	}
	what := "the allocator's history"
	if e.CheckedBy != "history" {
		what = fmt.Sprintf("its last %d allocations and frees after the blocks live before them", oomLogSize)
	}
	if e.Fix != "" {
		fmt.Fprintf(&b, "  fix (checked by replaying %s): %s", what, e.Fix)
	} else {
		fmt.Fprintf(&b, "  fix: none found; replaying %s did not reproduce the failure", what)
	}
	return b.String()
}
