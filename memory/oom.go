package memory

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

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
	// Memory is the device's memory when the allocation failed, from the
	// [DeviceInfo], with this allocator's reserve as Reserved. Without a
	// DeviceInfo (or when it failed) Total is Capacity and the rest is
	// unknown: Free and ThisProcess -1, Others nil.
	Memory DeviceMemory

	Reserved  int64 // bytes this allocator holds from the device
	Allocated int64 // bytes of blocks held by callers
	// Unallocated is Reserved minus Allocated: memory reserved but not
	// handed out (fragmentation, and blocks waiting for other streams).
	Unallocated int64
	LargestFree int64         // the largest free cached block outside other private pools than the request's, bytes
	TopRegions  []RegionUsage // live allocations by region label, largest first (at most oomRegions)
	// MoreRegions is how many regions beyond TopRegions hold live
	// allocations, and OtherRegions their sum (its Region is "").
	MoreRegions  int
	OtherRegions RegionUsage
	// Peers are the machine's other devices with their memory
	// ([PeerInfo]); nil if unknown.
	Peers      []DeviceMemory
	LiveBlocks int // blocks held by callers
	// Fix is the suggestion, one sentence: a setting under which the
	// replay fits, or, when none does, how much memory is missing and what
	// else would help; "" when the replay could not reproduce the failure.
	Fix string
	// FixConfig is the VRAM_ALLOC_CONF under which the replay fits; "" if
	// none does.
	FixConfig string
	// NeededBytes is, when no setting fits, how much memory the replay
	// lacks under the most compact setting, beyond what this process could
	// have with per_process_memory_fraction at 1: what must be freed on the
	// device (or the size of a larger one); else 0.
	NeededBytes int64
	// FitsNow is, when no setting fits, the largest request that the
	// replay fits under the current settings (0 when none does, or when
	// not checked).
	FitsNow int64
	// CheckedBy says what the fix check replayed: "history" when the
	// allocator's recent-operations log covers everything since its
	// creation, else "recent history" (the last allocations and frees,
	// after the blocks that were live before them); "" when the fix was
	// not checked, which Fix then says with the reason: the check ran
	// past its time bound, or the allocator's errors came too fast to
	// check each (see the package documentation, "# Out of memory").
	CheckedBy string
	Err       error // the arena's or the limit's refusal

	cfg        Config
	virtual    bool  // the arena supports virtual memory
	gran       int64 // its granularity
	usable     int64 // memory this process can use: capacity minus others, capped by the limit
	room       int64 // memory it could use with no limit: capacity minus others
	ops        []replayOp
	pendingSum int64 // bytes of blocks waiting for events
	// deadline ends the fix check's replays (see fixCheckTimeout);
	// expired is set when a replay ran past it.
	deadline time.Time
	expired  bool
}

// oomRegions is how many regions an OutOfMemoryError names; the others
// are summed.
const oomRegions = 8

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

// newOOMLocked counts an OOM and captures the state for its error. With
// quickOOM it captures only the totals: a replay counts the error and goes
// on, and walking every held block at each of many failures would make it
// quadratic.
func (a *Allocator) newOOMLocked(size int64, stream Stream, region string, cause error) *OutOfMemoryError {
	a.stats.NumOOMs++
	e := &OutOfMemoryError{
		Requested:  size,
		Rounded:    a.roundSize(size),
		Stream:     stream,
		Region:     region,
		Capacity:   a.arena.Capacity(),
		Limit:      a.allowed(),
		Reserved:   a.stats.ReservedBytes[StatAll].Current,
		Allocated:  a.stats.AllocatedBytes[StatAll].Current,
		LiveBlocks: int(a.stats.Allocation[StatAll].Current),
		Err:        cause,
		cfg:        a.configLocked(), // with the fraction SetMemoryFraction set
		gran:       SimGranularity,
	}
	if va, ok := a.arena.(VirtualArena); ok {
		e.virtual = true
		e.gran = va.Granularity()
	}
	e.Unallocated = e.Reserved - e.Allocated
	e.usable, e.room = e.Limit, e.Capacity
	e.Memory = DeviceMemory{Total: e.Capacity, Free: -1, ThisProcess: -1, Reserved: e.Reserved}
	if a.info != nil {
		if m, err := a.info.MemoryInfo(); err == nil && m.Free >= 0 {
			e.Memory = m
			e.Memory.Reserved = e.Reserved
			e.room = min(e.Capacity, m.Total-e.Memory.OutsideAllocator())
			e.usable = min(e.Limit, e.room)
		}
		if pi, ok := a.info.(PeerInfo); ok {
			if peers, err := pi.Peers(); err == nil {
				e.Peers = peers
			}
		}
	}
	if !a.quickOOM {
		a.captureLocked(e)
	}
	var freeAt uint64
	if e.Memory.Free >= 0 {
		freeAt = uint64(e.Memory.Free)
	}
	a.record(trace.ActionOOM, freeAt, size, stream, region)
	return e
}

// captureLocked records in e what the OOM's explanation and fix check
// need of the allocator's blocks: the largest free block, the bytes
// pending free, the operations to replay and the regions holding memory.
func (a *Allocator) captureLocked(e *OutOfMemoryError) {
	segs := make([]*segment, 0, len(a.segs))
	for _, seg := range a.segs {
		segs = append(segs, seg)
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].addr < segs[j].addr })
	var held []replayOp // blocks held now, in address order
	for _, seg := range segs {
		for b := seg.first; b != nil; b = b.next {
			switch b.state {
			case stateFree:
				// Another private pool's blocks serve only its own
				// graph: never this request.
				if !IsPrivatePool(b.stream) || b.stream == e.Stream {
					e.LargestFree = max(e.LargestFree, b.size)
				}
			case statePending:
				e.pendingSum += b.size
				held = append(held, replayOp{addr: b.addr, size: b.requested, stream: b.stream})
			case stateAllocated:
				held = append(held, replayOp{addr: b.addr, size: b.requested, stream: b.stream})
			}
		}
	}
	e.ops, e.CheckedBy = replayScript(a.log.ops(), held), "recent history"
	if a.log.total == uint64(a.log.n) {
		e.CheckedBy = "history"
	}
	e.TopRegions = a.regionsLocked()
	if n := len(e.TopRegions); n > oomRegions {
		for _, r := range e.TopRegions[oomRegions:] {
			e.OtherRegions.Bytes += r.Bytes
			e.OtherRegions.Count += r.Count
		}
		e.MoreRegions = n - oomRegions
		e.TopRegions = e.TopRegions[:oomRegions]
	}
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
	return e.replay(cfg, capacity, e.Requested)
}

// replay is fitsWith with request bytes asked at the end in place of the
// failed request.
func (e *OutOfMemoryError) replay(cfg Config, capacity, request int64) (bool, int64) {
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
	for i, op := range e.ops {
		if e.expired || i%256 == 0 && !e.deadline.IsZero() && time.Now().After(e.deadline) {
			e.expired = true
			return false, 0
		}
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
	_, err := al.Alloc(request, e.Stream, "")
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

// fixCheckTimeout bounds one fix check: its replays stop once it has run
// this long, and the error then says it was not checked. A check takes
// milliseconds to a few hundred of them; a history of thousands of
// streams, each with memory cached that the others cannot use, makes
// every replayed allocation slow.
const fixCheckTimeout = time.Second

// checkFix finds the first change of settings under which the replay
// fits, or else how much memory is missing and what else would help,
// within timeout (fixCheckTimeout). It runs without the allocator's lock.
func (e *OutOfMemoryError) checkFix(timeout time.Duration) {
	e.deadline = time.Now().Add(timeout)
	e.findFix()
	if e.expired {
		e.FixConfig, e.NeededBytes, e.FitsNow, e.CheckedBy = "", 0, 0, ""
		e.Fix = fmt.Sprintf("not checked: replaying the history took more than %v", timeout)
	}
}

// findFix is checkFix without the time bound.
func (e *OutOfMemoryError) findFix() {
	if e.fits(e.cfg, e.usable) {
		// The replay does not reproduce the failure (other processes or
		// streams changed what was free): nothing to conclude.
		return
	}
	if e.Rounded > e.room {
		// Larger than all the device has for this process: no setting and
		// no fraction can make it fit, and replays of such a request on a
		// device large enough for it would cost what it claims.
		e.noSetting()
		return
	}
	alts := e.alternatives()
	for _, t := range alts {
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
	if e.room > e.usable { // the per-process fraction binds
		for _, t := range append([]Config{e.cfg}, alts...) {
			if f, ok := e.fractionThatFits(t); ok {
				t.PerProcessMemoryFraction = f
				e.FixConfig = configString(t)
				e.Fix = fmt.Sprintf("raise per_process_memory_fraction to %s (SetPerProcessMemoryFraction, or VRAM_ALLOC_CONF=%q) and this allocation fits",
					strconv.FormatFloat(f, 'f', -1, 64), e.FixConfig)
				return
			}
		}
	}
	e.noSetting()
}

// alternatives returns the settings other than e.cfg that the fix check
// tries, most likely to help first: expandable segments and policy:vram
// where the device has virtual memory, max_split_size_mb values where
// fixed segments are in use, and plain rounding when
// roundup_power2_divisions is set.
func (e *OutOfMemoryError) alternatives() []Config {
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
	if c.RoundupPower2Divisions != ([kRoundUpPowerOfTwoIntervals]int{}) {
		t := c
		t.RoundupPower2Divisions = [kRoundUpPowerOfTwoIntervals]int{}
		tries = append(tries, t)
	}
	return tries
}

// fractionThatFits returns the smallest per_process_memory_fraction, in
// hundredths, under which the replay with cfg fits, if any does within
// what the device has for this process. It bisects over the hundredths
// (at most 7 replays), computing each limit as the allocator does, on the
// assumption that more memory never makes the replay fail.
func (e *OutOfMemoryError) fractionThatFits(cfg Config) (float64, bool) {
	if e.Capacity <= 0 || !e.fits(cfg, e.room) {
		return 0, false
	}
	limit := func(k int) int64 {
		l := float64(e.Capacity) * (float64(k) / 100)
		if l >= float64(e.room) {
			return e.room
		}
		return int64(l)
	}
	lo, hi := 0, 100 // in hundredths: lo does not fit (or is 0), hi does
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if l := limit(mid); l > e.usable && e.fits(cfg, l) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return float64(hi) / 100, true
}

// noSetting writes the fix when no setting makes the replay fit: how much
// memory the most compact setting lacks, who holds memory, the largest
// request that fits now, and the devices that have room.
func (e *OutOfMemoryError) noSetting() {
	// How much memory is missing? Replay on a device large enough for
	// anything; its peak reserve fits for sure. Then search below it, in
	// granules (capacities in between behave alike), for the smallest
	// device that fits: at most 8 replays more.
	best := e.cfg
	if e.virtual {
		best.Policy, best.ExpandableSegments = PolicyVRAM, false
	}
	if e.room > e.usable {
		// The need is counted beyond the room of a fraction of 1, which
		// the message says; a suggested string keeping the fraction that
		// binds would contradict it.
		best.PerProcessMemoryFraction = 0
	}
	g := e.gran
	atLeast := ""
	if e.Rounded > e.room {
		// No replay: the request alone is more than the device has for
		// this process, and what it needs is at least the request and the
		// memory live now, less that room.
		e.NeededBytes = max(satAdd(e.Rounded, e.Allocated)-e.room, 0)
		atLeast = "at least "
	} else {
		ok, peak := e.fitsWith(best, max(satMul(4, e.room), satAdd(satMul(2, satAdd(e.Reserved, e.Rounded)), 64<<20)))
		if !ok {
			return
		}
		lo, hi := e.room/g, alignUp(peak, g)/g
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
		e.NeededBytes = max(hi*g-e.room, 0)
	}
	e.FitsNow = e.largestFit()
	var b strings.Builder
	b.WriteString("no setting makes it fit: it needs ")
	b.WriteString(atLeast)
	b.WriteString(units.BytesUp(e.NeededBytes))
	b.WriteString(" more memory")
	if best.Policy != e.cfg.Policy || best.ExpandableSegments != e.cfg.ExpandableSegments {
		fmt.Fprintf(&b, " even with VRAM_ALLOC_CONF=%q", configString(best))
	} else {
		b.WriteString(" under the current settings")
	}
	if e.room > e.usable {
		b.WriteString(" and per_process_memory_fraction at 1")
	}
	if others := e.Memory.OutsideAllocator() - max(e.Memory.ProcessOther(), 0); others > 0 && len(e.Memory.Others) > 0 {
		fmt.Fprintf(&b, "; free that much (release tensors, or stop other processes on the device: they hold %s)", units.Bytes(others))
	} else {
		b.WriteString("; release tensors")
	}
	if e.FitsNow > 0 {
		fmt.Fprintf(&b, ", or ask for at most %s", units.BytesDown(e.FitsNow))
	}
	if room := e.roomElsewhere(); len(room) > 0 {
		fmt.Fprintf(&b, ", or use %s, which has %s free", printable.String(room[0].Device), units.BytesDown(room[0].Free))
	} else {
		b.WriteString(", or use a larger device")
	}
	e.Fix = b.String()
}

// largestFit returns the largest request that the replay fits under the
// current settings in the memory this process may use, as a multiple of
// the granularity for requests of 16 granules or more (of 512 bytes for
// smaller ones), to within 1/16384 of the failed request or of that
// memory, whichever is less; 0 if none fits.
func (e *OutOfMemoryError) largestFit() int64 {
	unit := int64(kMinBlockSize)
	if e.Requested >= 16*e.gran {
		unit = e.gran
	}
	// In units: lo fits (or is 0), hi does not. hi rounds the failed
	// request up: rounded down it may well fit (225 MiB fails where
	// 224 MiB is free, and 224 MiB is what fits). Nothing above what
	// this process may use fits, so a request far beyond it (4 TiB asked
	// of a 256 MiB device) is searched below that, not below the request,
	// where 14 halvings would end far from the answer or at 0.
	lo, hi := int64(0), min((e.Requested+unit-1)/unit, e.usable/unit+1)
	if hi > 1 {
		// Often all but the last unit fits: one replay says so.
		if ok, _ := e.replay(e.cfg, e.usable, (hi-1)*unit); ok {
			return (hi - 1) * unit
		}
		hi--
	}
	for i := 0; i < 14 && hi-lo > 1; i++ {
		mid := lo + (hi-lo)/2
		if ok, _ := e.replay(e.cfg, e.usable, mid*unit); ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo * unit
}

// roomElsewhere returns the peer devices with free memory for the work:
// the smallest device the replay fits on when the check found it, else
// this process's allocations and the request; most free first.
func (e *OutOfMemoryError) roomElsewhere() []DeviceMemory {
	need := e.Allocated + e.Rounded
	if e.NeededBytes > 0 {
		need = max(need, e.room+e.NeededBytes)
	}
	var out []DeviceMemory
	for _, p := range e.Peers {
		if p.Free >= need {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Free > out[j].Free })
	return out
}

// writeOutside writes the lines on the device memory held outside this
// allocator: other processes by pid and name, this process's own memory
// outside the allocator, and what neither accounts for.
func (e *OutOfMemoryError) writeOutside(b *strings.Builder) {
	m := e.Memory
	outside, own := m.OutsideAllocator(), m.ProcessOther()
	if m.Others == nil && own < 0 {
		if outside > 0 {
			fmt.Fprintf(b, "  held outside this allocator (other processes, contexts): %s\n", units.Bytes(outside))
		}
		return
	}
	rest := outside
	if len(m.Others) > 0 {
		b.WriteString("  other processes:")
		for i, p := range m.Others {
			if i > 0 {
				b.WriteString(",")
			}
			name := printable.String(p.Name)
			if name == "" {
				name = "?"
			}
			fmt.Fprintf(b, " pid %d (%s) %s", p.PID, name, bytesOrUnknown(p.Bytes))
			rest -= max(p.Bytes, 0)
		}
		b.WriteString("\n")
	}
	if own > 0 {
		fmt.Fprintf(b, "  this process outside the allocator (CUDA context, libraries): %s\n", units.Bytes(own))
		rest -= own
	}
	if outside >= 0 && rest > 0 {
		what := "not attributed"
		if m.Others == nil {
			what = "not attributed (the process list is not visible)"
		}
		fmt.Fprintf(b, "  held outside this allocator, %s: %s\n", what, units.Bytes(rest))
	}
}

// bytesOrUnknown formats n bytes, or "unknown size" when n is negative.
func bytesOrUnknown(n int64) string {
	if n < 0 {
		return "unknown size"
	}
	return units.Bytes(n)
}

// configString is c.String() with the policy always named ("policy:vram"
// rather than "" for the default, and first in any longer string), so that
// a suggested VRAM_ALLOC_CONF never changes the policy unseen.
func configString(c Config) string {
	s := c.String()
	switch {
	case s == "":
		return "policy:vram"
	case !strings.HasPrefix(s, "policy:"):
		// Name the default policy too: a user running another one would
		// not see that the suggestion changes it.
		return "policy:vram," + s
	}
	return s
}

// blocks returns "1 block" or "n blocks".
func blocks(n int) string {
	if n == 1 {
		return "1 block"
	}
	return strconv.Itoa(n) + " blocks"
}

// Error returns the multi-line diagnosis described at [OutOfMemoryError].
func (e *OutOfMemoryError) Error() string {
	var b strings.Builder
	asked := "bytes"
	if e.Requested == 1 {
		asked = "byte"
	}
	fmt.Fprintf(&b, "memory: out of memory: tried to allocate %s (%d %s asked", units.BytesUp(e.Rounded), e.Requested, asked)
	if e.Region != "" {
		fmt.Fprintf(&b, ", region %q", e.Region)
	}
	fmt.Fprintf(&b, ", %s)\n", StreamName(e.Stream))
	fmt.Fprintf(&b, "  device: %s total", units.Bytes(e.Capacity))
	if e.Memory.Free >= 0 {
		fmt.Fprintf(&b, ", %s free", units.BytesDown(e.Memory.Free))
	}
	if e.Limit < e.Capacity {
		fmt.Fprintf(&b, "; this process is limited to %s (per_process_memory_fraction)", units.BytesDown(e.Limit))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  this process: %s reserved, %s allocated, %s reserved but unallocated; largest free block %s\n",
		units.Bytes(e.Reserved), units.Bytes(e.Allocated), units.Bytes(e.Unallocated), units.BytesDown(e.LargestFree))
	if len(e.TopRegions) > 0 {
		b.WriteString("  live allocations by region:")
		for i, r := range e.TopRegions {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %s %s in %s", regionName(r.Region, 80), units.Bytes(r.Bytes), blocks(r.Count))
		}
		if e.MoreRegions > 0 {
			fmt.Fprintf(&b, ", %d more regions %s in %s", e.MoreRegions, units.Bytes(e.OtherRegions.Bytes), blocks(e.OtherRegions.Count))
		}
		b.WriteString("\n")
	}
	e.writeOutside(&b)
	if e.FixConfig == "" {
		if room := e.roomElsewhere(); len(room) > 0 {
			b.WriteString("  other devices with room:")
			for i, p := range room {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, " %s (%s free of %s)", printable.String(p.Device), units.BytesDown(p.Free), units.Bytes(p.Total))
			}
			b.WriteString("\n")
		}
	}
	what := "the allocator's history"
	if e.CheckedBy != "history" {
		what = fmt.Sprintf("its last %d allocations and frees after the blocks live before them", oomLogSize)
	}
	switch {
	case e.CheckedBy == "" && e.Fix != "": // not checked, and why
		fmt.Fprintf(&b, "  fix: %s", e.Fix)
	case e.Fix != "":
		fmt.Fprintf(&b, "  fix (checked by replaying %s): %s", what, e.Fix)
	default:
		fmt.Fprintf(&b, "  fix: none found; replaying %s did not reproduce the failure", what)
	}
	return b.String()
}

// satMul returns k·a for k > 0 and a >= 0, saturating at the int64 maximum.
func satMul(k, a int64) int64 {
	if a > math.MaxInt64/k {
		return math.MaxInt64
	}
	return k * a
}
