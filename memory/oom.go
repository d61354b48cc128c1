package memory

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vramgo/vram/memory/trace"
)

// OutOfMemoryError is the error of an [Allocator.Alloc] that found no room
// even after releasing the allocator's cache and running the OnOOM hook.
// Use errors.As to get it. Its message says what was asked, what the device
// has, what this process holds and how much of that is fragmented, where
// the memory went by region, what other processes hold, and one fix that
// the allocator checked by replaying its own live blocks, then the failed
// request, through a fresh allocator on a simulated device of the same size
// under other settings.
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
	LiveBlocks  int             // blocks held by callers, replayed to check the fix
	Fix         string          // the checked suggestion, one sentence
	FixConfig   string          // the VRAM_ALLOC_CONF that fits, "" if none
	NeededBytes int64           // when no setting fits: memory missing under the current settings, else 0
	Err         error           // the arena's or limit's refusal

	cfg        Config
	virtual    bool // the arena supports virtual memory
	gran       int64
	usable     int64 // memory this process can use: capacity minus others, capped by the limit
	live       []liveBlock
	pendingSum int64 // bytes of blocks waiting for events
}

// RegionUsage is the live memory allocated under one region label.
type RegionUsage struct {
	Region string // the label, "" for unlabelled allocations
	Bytes  int64  // bytes of its live blocks (rounded sizes)
	Count  int    // number of live blocks
}

// liveBlock is what the fix check replays of one live block.
type liveBlock struct {
	addr      uint64
	requested int64
	stream    Stream
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
		Err:         cause,
		cfg:         a.cfg,
		gran:        SimGranularity,
	}
	if va, ok := a.arena.(VirtualArena); ok {
		e.virtual = true
		e.gran = va.Granularity()
	}
	e.Unallocated = e.Reserved - e.Allocated
	e.usable = min(e.Capacity, e.Limit)
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
	regions := map[string]*RegionUsage{}
	for _, seg := range a.segs {
		for b := seg.first; b != nil; b = b.next {
			switch b.state {
			case stateFree:
				e.LargestFree = max(e.LargestFree, b.size)
			case statePending:
				e.pendingSum += b.size
			case stateAllocated:
				e.live = append(e.live, liveBlock{b.addr, b.requested, b.stream})
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
	sort.Slice(e.live, func(i, j int) bool { return e.live[i].addr < e.live[j].addr })
	e.LiveBlocks = len(e.live)
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

// fitsWith replays the live blocks, in address order, then the failed
// request through a fresh allocator with cfg on a simulated device of
// capacity bytes, and reports whether everything fits.
func (e *OutOfMemoryError) fitsWith(cfg Config, capacity int64) bool {
	if capacity <= 0 {
		return false
	}
	sim := NewSimArenaGranularity(capacity, e.gran)
	var arena Arena = sim
	if !e.virtual {
		arena = plainArena{sim}
	}
	cfg.PerProcessMemoryFraction = 0 // capacity is already the limit
	al := New(arena, cfg, withQuickOOM())
	for _, b := range e.live {
		if _, err := al.Alloc(b.requested, b.stream, ""); err != nil {
			return false
		}
	}
	_, err := al.Alloc(e.Requested, e.Stream, "")
	return err == nil
}

// plainArena hides the virtual memory of a SimArena, to replay a device
// without it.
type plainArena struct{ s *SimArena }

func (p plainArena) Alloc(size int64) (uint64, error)   { return p.s.Alloc(size) }
func (p plainArena) Free(addr uint64, size int64) error { return p.s.Free(addr, size) }
func (p plainArena) Capacity() int64                    { return p.s.Capacity() }

// checkFix finds the first setting under which the live blocks and the
// request fit, or else how much memory is missing. It runs without the
// allocator's lock.
func (e *OutOfMemoryError) checkFix() {
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
	if !e.virtual || c.Policy == PolicyPyTorch && !c.ExpandableSegments {
		for _, mb := range []int64{64, 128, 256, 512, 1024} {
			if c.MaxSplitSizeMB == 0 || mb < c.MaxSplitSizeMB {
				t := c
				t.MaxSplitSizeMB = mb
				tries = append(tries, t)
			}
		}
	}
	for _, t := range tries {
		if e.fitsWith(t, e.usable) {
			e.FixConfig = t.String()
			e.Fix = describeConfig(t) + " this allocation fits"
			return
		}
	}
	if e.pendingSum > 0 && e.Requested <= e.usable-e.Allocated-e.pendingSum {
		e.Fix = fmt.Sprintf("%s of freed blocks are still in use on other streams: synchronize those streams before allocating", formatBytes(e.pendingSum))
	}
	// How much memory is missing? Search the smallest device that fits,
	// to a granule, under the most compact setting available.
	best := e.cfg
	if e.virtual {
		best.Policy, best.ExpandableSegments = PolicyVRAM, false
	}
	// Capacities between multiples of the granularity behave alike, so
	// search in granules.
	g := e.gran
	lo, hi := e.usable/g, max(2*e.usable, e.Allocated+2*e.Rounded+(64<<20))/g+1
	if !e.fitsWith(best, hi*g) {
		return
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if e.fitsWith(best, mid*g) {
			hi = mid
		} else {
			lo = mid
		}
	}
	e.NeededBytes = max(hi*g-e.usable, 0)
	if e.Fix == "" {
		under := "under the current settings"
		if best != e.cfg {
			under = "even " + describeConfig(best)
		}
		e.Fix = fmt.Sprintf("no setting makes it fit: free at least %s of live tensors, or use a device with %s more memory (%s)",
			formatBytes(e.NeededBytes), formatBytes(e.NeededBytes), under)
	}
}

// describeConfig names a configuration for a message.
func describeConfig(c Config) string {
	if s := c.String(); s != "" {
		return fmt.Sprintf("with VRAM_ALLOC_CONF=%q", s)
	}
	return "with vram's default settings"
}

// Error returns the multi-line diagnosis described at [OutOfMemoryError].
func (e *OutOfMemoryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "memory: out of memory: tried to allocate %s (%d bytes asked", formatBytes(e.Rounded), e.Requested)
	if e.Region != "" {
		fmt.Fprintf(&b, ", region %q", e.Region)
	}
	fmt.Fprintf(&b, ", stream %d)\n", e.Stream)
	fmt.Fprintf(&b, "  device: %s total", formatBytes(e.Capacity))
	if e.DeviceFree >= 0 {
		fmt.Fprintf(&b, ", %s free", formatBytes(e.DeviceFree))
	}
	if e.Limit < e.Capacity {
		fmt.Fprintf(&b, "; this process is limited to %s (per_process_memory_fraction)", formatBytes(e.Limit))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  this process: %s reserved, %s allocated, %s reserved but unallocated; largest free block %s\n",
		formatBytes(e.Reserved), formatBytes(e.Allocated), formatBytes(e.Unallocated), formatBytes(e.LargestFree))
	if len(e.TopRegions) > 0 {
		b.WriteString("  live allocations by region:")
		for i, r := range e.TopRegions {
			if i > 0 {
				b.WriteString(",")
			}
			name := r.Region
			if name == "" {
				name = "(unlabelled)"
			}
			fmt.Fprintf(&b, " %s %s in %d", name, formatBytes(r.Bytes), r.Count)
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
			name := p.Name
			if name == "" {
				name = "?"
			}
			fmt.Fprintf(&b, " pid %d (%s) %s", p.PID, name, formatBytes(p.Bytes))
		}
		b.WriteString("\n")
	case e.OthersBytes > 0:
		fmt.Fprintf(&b, "  held outside this allocator (other processes, contexts): %s\n", formatBytes(e.OthersBytes))
	}
	if e.Fix != "" {
		fmt.Fprintf(&b, "  fix (checked by replaying the %d live blocks): %s", e.LiveBlocks, e.Fix)
	} else {
		b.WriteString("  fix: none found by replaying the live blocks under other settings")
	}
	return b.String()
}

// formatBytes writes n in binary units with two decimals ("1.50 GiB").
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	v, exp := float64(n), 0
	for (v >= unit*unit || v <= -unit*unit) && exp < 5 {
		v /= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", v/unit, "KMGTPE"[exp])
}
