package memory

// The allocator in brief (PyTorch's CUDA caching allocator, in Go).
//
// Requests are rounded up to kMinBlockSize (or to a power-of-two division,
// with roundup_power2_divisions). Rounded requests up to kSmallSize come from
// the small pool, larger ones from the large pool; each pool keeps its free
// blocks per stream, ordered by size, and a request takes the smallest free
// block of its stream that fits (best fit), splitting off the rest when the
// rest is worth keeping. A freed block merges with free neighbours in its
// segment. A block that another stream used (RecordStream) returns to the
// pool only when events recorded on those streams at Free have completed.
//
// When no free block fits, Alloc climbs a ladder, each step only if the
// previous one failed:
//  1. process completed events and search the pool;
//  2. with garbage_collection_threshold, release least recently used cached
//     memory while the reserve is above the threshold;
//  3. get new memory: a fixed segment from Arena.Alloc (kSmallBuffer for
//     small requests, kLargeBuffer below kMinLargeAlloc, else the request
//     rounded to kRoundLarge), or mapped pages of a virtual segment
//     (expandable.go, vrampolicy.go);
//  4. release cached memory that would make room for the request, and
//     retry step 3;
//  5. release every cached block, and retry step 3;
//  6. call the OnOOM hook without the lock (the root package runs Go's GC
//     there, whose cleanups free device memory through this allocator),
//     then retry from step 1 once;
//  7. return an *OutOfMemoryError.
//
// Locking: one mutex guards everything below it in Allocator. Every
// exported method takes it and none calls another exported method. The
// lock is dropped in exactly two places, both in Alloc: around the OnOOM
// hook (step 6), and while the OutOfMemoryError checks its suggested fix by
// replaying a copy of the state through other allocators.

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"sync"
	"time"

	"github.com/google/btree"

	"github.com/vramgo/vram/memory/trace"

	"github.com/vramgo/vram/internal/units"
)

// Sizes of PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp),
// in bytes.
const (
	// kMinBlockSize: every block size is a multiple of 512 bytes.
	kMinBlockSize = 512
	// kSmallSize: requests of at most 1 MiB go to the small pool.
	kSmallSize = 1 << 20
	// kSmallBuffer: the small pool's segments are 2 MiB.
	kSmallBuffer = 2 << 20
	// kMinLargeAlloc: large requests below 10 MiB share kLargeBuffer
	// segments.
	kMinLargeAlloc = 10 << 20
	// kLargeBuffer: 20 MiB segments for large requests below
	// kMinLargeAlloc; also how far above its request an unsplittable
	// (max_split_size_mb) block may serve it.
	kLargeBuffer = 20 << 20
	// kRoundLarge: segments for requests of kMinLargeAlloc and more are
	// rounded up to 2 MiB.
	kRoundLarge = 2 << 20
)

// MaxAllocSize is the largest request, in bytes, that [Allocator.Alloc]
// accepts: 4 EiB, more than any device has, and small enough that rounding a
// request (to 512 bytes, to a power-of-two division, to 2 MiB segments or to
// the mapping granularity) cannot overflow an int64. Larger requests fail
// with an error wrapping [ErrTooLarge].
const MaxAllocSize = 1 << 62

// ErrTooLarge is wrapped by the error of an [Allocator.Alloc] of more than
// [MaxAllocSize] bytes. No device holds that much, so the size most likely
// comes from a wrong computation (an overflowing shape, a corrupt trace).
var ErrTooLarge = errors.New("memory: request larger than any device")

// mode is how the allocator gets memory, fixed at New from the policy and
// the arena.
type mode uint8

const (
	modeFixed      mode = iota // PyTorch's fixed segments (Arena.Alloc)
	modeExpandable             // PyTorch's expandable segments
	modeVRAM                   // vram's policy
)

// errLimit reports that memory would exceed the allocator's limit
// (per_process_memory_fraction); the ladder treats it like a full arena.
// Without a fraction the arena alone decides.
var errLimit = errors.New("memory: allocation would exceed the per-process memory limit")

// isOOM reports whether err means "no memory": the ladder should go on.
func isOOM(err error) bool { return err == errLimit || errors.Is(err, ErrArenaFull) }

// Allocator is a caching allocator of device memory over an [Arena]: it
// keeps freed blocks for reuse instead of returning them to the device, as
// PyTorch's CUDA caching allocator does. Create one with [New]. It is safe
// for concurrent use.
type Allocator struct {
	arena  Arena
	varena VirtualArena // non-nil when the mode maps memory
	ranger RangeMapper  // non-nil when varena maps runs of chunks at once
	timer  DriverTimer  // non-nil when the arena prices its calls
	events EventSource  // nil: events complete at once
	info   DeviceInfo   // nil: unknown
	device int
	cfg    Config
	cfgErr error
	mode   mode
	gran   int64 // mapping granularity (virtual modes)
	// oversize is max_split_size_mb in bytes, MaxInt64 without it: blocks
	// and segments of this size or more count as oversize in the stats.
	oversize int64
	start    time.Time
	// quickOOM skips the fix check of OutOfMemoryError, and the capture
	// of the blocks it needs: set for the allocators of replays, which
	// would otherwise replay recursively, and which only count the error.
	quickOOM bool

	mu            sync.Mutex
	blocks        blockCache
	pools         [2]*pool
	segs          map[uint64]*segment  // by address
	chunks        *btree.BTreeG[chunk] // mappings of virtual segments
	chunkGen      uint64               // changes with every change of chunks; never 0
	stats         Stats
	limit         int64   // the most the allocator may reserve; MaxInt64 without a fraction
	fraction      float64 // the per-process memory fraction, 0 if none or set to 0
	limited       bool    // a fraction is in force (SetMemoryFraction(0) included)
	highWater     int64   // highest reserve since New or EmptyCache (policy:vram)
	peakAlloc     int64   // highest allocated bytes since New or EmptyCache (policy:vram)
	freedOnce     bool    // a block has been freed since New (policy:vram's loading ends)
	tick          uint64  // allocation clock, for least-recently-used order
	pendingEvents []pendingEvent
	hist          *history
	log           opLog // latest operations, for the OOM fix check (not with quickOOM)
	onOOM         func()
	timeBase      time.Duration   // DriverTimer reading at the last reset
	kept          map[Stream]bool // private pools whose memory is kept (private.go)
	holds         int             // HoldReleases calls not yet undone (private.go)
	nextPrivate   Stream          // the last private pool's key
	// recentSizes are the rounded sizes of the last requests, latest
	// first, and lifetimes the lifetime in ticks last seen per role
	// (policy:vram's lifetime prediction, vrampolicy.go).
	recentSizes [vramRoleDepth]int64
	lifetimes   map[uint64]uint64
	// lowAlloc is the fewest allocated bytes seen since the first free
	// (what a server's weights hold between requests; valid once
	// lowSeen), aboveMid whether the allocated bytes have been above
	// halfway from there to the peak since they last came back below
	// it, and newRequest whether they came back and no request has
	// taken step 1's lowest block yet (policy:vram's request boundary).
	lowAlloc   int64
	lowSeen    bool
	aboveMid   bool
	newRequest bool
	// fixCheckTime is the time the fix checks of OutOfMemoryError took so
	// far (see fixCheckShare).
	fixCheckTime time.Duration
}

// pendingEvent is an event a block freed while in use on another stream
// waits for.
type pendingEvent struct {
	b *Block
	e Event
}

// Option configures an [Allocator] beyond its [Config].
type Option func(*Allocator)

// WithEvents sets the source of events for cross-stream frees. Without one,
// every event counts as complete at once: blocks return to the pool at
// Free, whatever RecordStream said.
func WithEvents(src EventSource) Option { return func(a *Allocator) { a.events = src } }

// WithDeviceInfo sets the hook that reports free memory and other processes
// for the [OutOfMemoryError] message, in place of the arena's own.
func WithDeviceInfo(info DeviceInfo) Option { return func(a *Allocator) { a.info = info } }

// WithDevice sets the device index reported in snapshots (default 0).
func WithDevice(index int) Option { return func(a *Allocator) { a.device = index } }

// withQuickOOM makes OOM errors skip the fix check (replays).
func withQuickOOM() Option { return func(a *Allocator) { a.quickOOM = true } }

// New returns an allocator over arena with settings cfg. When cfg cannot be
// used with arena (see [Config.Check]) the allocator is still returned, and
// every Alloc fails with that [*ConfigError]; so does every Alloc of an
// allocator over a nil arena, with an error saying so. policy:vram on an arena that is
// not a [VirtualArena] falls back to the PyTorch policy with fixed segments.
func New(arena Arena, cfg Config, opts ...Option) *Allocator {
	a := &Allocator{
		arena:    arena,
		cfg:      cfg,
		start:    time.Now(),
		segs:     make(map[uint64]*segment),
		chunks:   newChunkTree(),
		chunkGen: 1,
		pools:    [2]*pool{newPool(poolSmall), newPool(poolLarge)},
	}
	a.cfgErr = cfg.Check(arena)
	if info, ok := arena.(DeviceInfo); ok {
		a.info = info
	}
	if t, ok := arena.(DriverTimer); ok {
		a.timer = t
		a.timeBase = t.DriverTime()
	}
	for _, o := range opts {
		o(a)
	}
	va, virtual := arena.(VirtualArena)
	switch {
	case cfg.Policy == PolicyVRAM && virtual:
		a.mode = modeVRAM
	case cfg.Policy == PolicyPyTorch && cfg.ExpandableSegments && virtual:
		a.mode = modeExpandable
	default:
		a.mode = modeFixed
	}
	if a.mode != modeFixed {
		a.varena = va
		a.ranger, _ = va.(RangeMapper)
		a.gran = va.Granularity()
		if a.gran <= 0 || a.gran%kMinBlockSize != 0 {
			a.cfgErr = fmt.Errorf("memory: arena granularity %d is not a positive multiple of %d", a.gran, kMinBlockSize)
		}
	}
	if arena == nil {
		a.cfgErr = errors.New("memory: nil arena")
	}
	a.fraction = cfg.PerProcessMemoryFraction
	a.limited = a.fraction > 0
	a.setLimit()
	a.oversize = cfg.maxSplitSize()
	a.stats.MaxSplitSize = -1
	if cfg.MaxSplitSizeMB != 0 {
		a.stats.MaxSplitSize = cfg.maxSplitSize()
	}
	return a
}

// setLimit derives the reserve limit from the capacity and the fraction.
func (a *Allocator) setLimit() {
	if a.limited {
		// The product rounds to 2^63 for capacities near MaxInt64, which
		// int64 cannot hold.
		if l := float64(a.arena.Capacity()) * a.fraction; l < math.MaxInt64 {
			a.limit = int64(l)
		} else {
			a.limit = math.MaxInt64
		}
	} else {
		a.limit = math.MaxInt64
	}
}

// allowed returns the most the allocator can reserve: the limit, or the
// device's capacity without one.
func (a *Allocator) allowed() int64 { return min(a.limit, a.arena.Capacity()) }

// Config returns the settings in force: those the allocator was created
// with, PerProcessMemoryFraction as [Allocator.SetMemoryFraction] last set
// it. A fraction set to 0 reads as 0 here, as no fraction does (the zero
// Config has no limit); [Allocator.Limit] tells the two apart.
func (a *Allocator) Config() Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.configLocked()
}

// configLocked is Config with the lock held.
func (a *Allocator) configLocked() Config {
	c := a.cfg
	c.PerProcessMemoryFraction = a.fraction
	return c
}

// Capacity returns the arena's capacity in bytes.
func (a *Allocator) Capacity() int64 { return a.arena.Capacity() }

// Limit returns the most memory, in bytes, that the allocator may reserve:
// the per-process memory fraction of the capacity, or the capacity without
// a fraction. It is 0 after SetMemoryFraction(0).
func (a *Allocator) Limit() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.allowed()
}

// SetMemoryFraction limits the memory the allocator reserves to fraction of
// the device's capacity, as torch.cuda.set_per_process_memory_fraction
// does; it overrides per_process_memory_fraction. Memory already reserved
// is kept; later requests that would pass the limit fail after the
// allocator has released its cache. fraction must be in [0, 1]; as in
// PyTorch, 0 lets the allocator reserve nothing more, so that only blocks
// it has cached and zero-byte requests can still be served (the Config
// string of a Snapshot cannot say so: per_process_memory_fraction takes
// values above 0). Out of range (NaN included), it returns an error and the
// limit stays as it was.
func (a *Allocator) SetMemoryFraction(fraction float64) error {
	if !(fraction >= 0 && fraction <= 1) {
		return fmt.Errorf("memory: SetMemoryFraction(%v): the fraction must be from 0 to 1", fraction)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fraction = fraction
	a.limited = true
	a.setLimit()
	return nil
}

// OnOOM sets a function the allocator calls when it has released its whole
// cache and the device still has no room for a request; the request is
// retried once after it returns. The function runs without the allocator's
// lock, so it may free blocks through the allocator (or wait for code that
// does); it may run on several goroutines at once. nil removes the hook.
func (a *Allocator) OnOOM(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.onOOM = f
}

// Alloc returns a block of at least size bytes for use on stream, labelled
// with region for stats, snapshots and OOM messages ("" for none). The
// caller owns the block until it passes it to [Allocator.Free].
//
// A size of 0 takes no memory, as in PyTorch, whose allocator hands a
// zero-byte request a null pointer: the block has size 0 and address 0, it
// is in no segment, no statistic, snapshot or history counts it, and it
// never fails for lack of memory. Free and RecordStream accept it and do
// nothing else with it.
//
// When the device has no room even after the allocator released its cache
// and ran the OnOOM hook, the error is an [*OutOfMemoryError]; the failure
// leaves every block and statistic exact (only the cache may have been
// released) and the allocator keeps working. Other errors: a negative size,
// a size above [MaxAllocSize] (wrapping [ErrTooLarge]; nothing changes and
// it is not counted as an OOM), a [*ConfigError] from New, or an arena
// failure other than [ErrArenaFull], wrapped.
func (a *Allocator) Alloc(size int64, stream Stream, region string) (*Block, error) {
	if size < 0 {
		return nil, fmt.Errorf("memory: Alloc of a negative size (%d bytes)", size)
	}
	if size > MaxAllocSize {
		return nil, fmt.Errorf("%w: Alloc of %d bytes (%s); requests above %s (memory.MaxAllocSize) cannot be served, so check how the size was computed",
			ErrTooLarge, size, units.Bytes(size), units.Bytes(MaxAllocSize))
	}
	if a.cfgErr != nil {
		return nil, a.cfgErr
	}
	if size == 0 {
		return &Block{stream: stream, state: stateAllocated, region: region}, nil
	}
	a.mu.Lock()
	var retried bool // num_alloc_retries counts this call once
	b, err := a.allocLocked(size, stream, region, &retried)
	if err == nil || !isOOM(err) {
		a.mu.Unlock()
		return b, err
	}
	if hook := a.onOOM; hook != nil {
		// The lock is dropped here: the hook may free through a.
		a.mu.Unlock()
		hook()
		a.mu.Lock()
		b, err = a.allocLocked(size, stream, region, &retried)
		if err == nil || !isOOM(err) {
			a.mu.Unlock()
			return b, err
		}
	}
	oom := a.newOOMLocked(size, stream, region, err)
	check := !a.quickOOM && a.fixCheckDueLocked()
	a.mu.Unlock()
	switch {
	case check:
		// The lock is dropped here too: checking a fix replays a copy of
		// the state through fresh allocators.
		t0 := time.Now()
		oom.checkFix(fixCheckTimeout)
		a.mu.Lock()
		a.fixCheckTime += time.Since(t0)
		a.mu.Unlock()
	case !a.quickOOM:
		oom.CheckedBy = ""
		oom.Fix = fmt.Sprintf("not checked: out-of-memory errors came too fast to replay each (fix checks are held to 1/%d of the allocator's running time); an earlier error's check applies if the program has not changed what it allocates since", fixCheckShare)
	}
	return nil, oom
}

// fixCheckShare bounds the time the fix checks of OutOfMemoryError take:
// an allocator checks an error's fix only while its checks so far took at
// most 1/fixCheckShare of the time since it was created. One check replays
// up to oomLogSize operations under a dozen or more settings (tens of
// milliseconds); a program that runs out of memory in a loop (a search for
// the largest batch, a server catching the error per request) would
// otherwise spend nearly all its time in them. The first error is always
// checked.
const fixCheckShare = 10

// fixCheckDueLocked reports whether the next OutOfMemoryError gets a fix
// check (see fixCheckShare).
func (a *Allocator) fixCheckDueLocked() bool {
	return a.fixCheckTime <= time.Since(a.start)/fixCheckShare
}

// allocLocked runs steps 1 to 5 of the ladder. *retried tells whether an
// earlier pass of the same Alloc call already counted a retry (step 5),
// which the call counts once however many passes reach it.
func (a *Allocator) allocLocked(size int64, stream Stream, region string, retried *bool) (*Block, error) {
	rounded := a.roundSize(size)
	p := a.pools[poolFor(rounded)]
	a.tick++
	if len(a.pendingEvents) > 0 {
		a.processEvents(false)
	}
	var life lifePrediction
	var b *Block
	if a.mode == modeVRAM {
		life = a.predictLife(rounded)
		if b, high := a.findAnchored(p, stream, rounded, life); b != nil {
			blk := a.carve(b, rounded, size, region, high)
			life.set(blk, a.tick)
			return blk, nil
		}
		b = a.findRequestStart(p, stream, rounded)
	}
	if b == nil {
		b = a.findFree(p, stream, rounded)
	}
	if b == nil {
		var err error
		if b, err = a.getMemory(p, stream, rounded, retried); err != nil {
			return nil, err
		}
	}
	blk := a.carve(b, rounded, size, region, false)
	if a.mode == modeVRAM {
		life.set(blk, a.tick)
	}
	return blk, nil
}

// getMemory runs steps 2 to 5 of the ladder: it returns a free block of at
// least size bytes, in pool p. It counts the retry of step 5 in
// num_alloc_retries unless *retried says that the Alloc call it serves
// already did, and sets *retried.
func (a *Allocator) getMemory(p *pool, stream Stream, size int64, retried *bool) (*Block, error) {
	if a.cfg.GarbageCollectionThreshold > 0 {
		a.garbageCollect()
	}
	b, err := a.grow(p, stream, size)
	if err == nil || !isOOM(err) {
		return b, err
	}
	if a.releaseAvailable(p, stream, size) {
		if b, err = a.grow(p, stream, size); err == nil || !isOOM(err) {
			return b, err
		}
	}
	a.releaseCached()
	if !*retried {
		a.stats.NumAllocRetries++
		*retried = true
	}
	return a.grow(p, stream, size)
}

// grow gets new memory for a request by the allocator's mode.
func (a *Allocator) grow(p *pool, stream Stream, size int64) (*Block, error) {
	if size > a.allowed() {
		// No memory the allocator may hold can serve it: fail before
		// asking the arena, which in the virtual modes would first
		// reserve an address range as large as the request.
		return nil, a.beyondAllowed(size)
	}
	switch a.mode {
	case modeExpandable:
		return a.growExpandable(p, stream, size)
	case modeVRAM:
		return a.growVRAM(p, stream, size)
	}
	return a.allocSegment(p, stream, allocationSize(size))
}

// poolFor returns the pool of a rounded request size.
func poolFor(size int64) poolKind {
	if size <= kSmallSize {
		return poolSmall
	}
	return poolLarge
}

// allocationSize returns the size of a fixed segment for a rounded request
// (PyTorch's get_allocation_size).
func allocationSize(size int64) int64 {
	switch {
	case size <= kSmallSize:
		return kSmallBuffer
	case size < kMinLargeAlloc:
		return kLargeBuffer
	}
	return alignUp(size, kRoundLarge)
}

// roundSize rounds a request to a block size (PyTorch's round_size).
func (a *Allocator) roundSize(size int64) int64 {
	if size < kMinBlockSize {
		return kMinBlockSize
	}
	if d := a.divisions(size); d > 1 && size > kMinBlockSize*int64(d) {
		return roundupPower2Division(size, int64(d))
	}
	return alignUp(size, kMinBlockSize)
}

// divisions returns the roundup_power2_divisions entry for size.
func (a *Allocator) divisions(size int64) int {
	logSize := 63 - leadingZeros(uint64(size))
	idx := 0
	if logSize > 20 { // 2^20: the intervals start at 1 MiB
		idx = logSize - 20
	}
	return a.cfg.RoundupPower2Divisions[min(idx, kRoundUpPowerOfTwoIntervals-1)]
}

// roundupPower2Division rounds size up to the next of d equal steps between
// the powers of two around it (PyTorch's roundup_power2_next_division).
func roundupPower2Division(size, d int64) int64 {
	if size&(size-1) == 0 {
		return size
	}
	floor := int64(1) << (63 - leadingZeros(uint64(size)))
	step := floor / d
	if step == 0 {
		return floor << 1
	}
	r := size &^ (step - 1)
	if r == size {
		return size
	}
	return alignUp(r+step, kMinBlockSize)
}

// findFree returns the best-fitting free block of stream in p for a
// rounded request, or nil (PyTorch's get_free_block).
func (a *Allocator) findFree(p *pool, stream Stream, size int64) *Block {
	var b *Block
	if a.mode == modeFixed {
		if b = p.lowerBound(stream, size); b == nil {
			return nil
		}
	} else {
		// In a virtual segment a free block that unmapped space follows
		// counts as big as it can grow: among blocks that fit, walk on
		// while the next one grows less (as PyTorch does for expandable
		// segments). Small requests then leave the block at the edge of
		// the mapped memory to the large ones that would otherwise have
		// to map more.
		grows := func(b *Block) int64 {
			if b.next != nil && b.next.state == stateUnmapped {
				return b.size + b.next.size
			}
			return b.size
		}
		for c := p.lowerBound(stream, size); c != nil && c.stream == stream; c = nextIn(c) {
			if b != nil && grows(c) >= grows(b) {
				break
			}
			b = c
		}
		if b == nil {
			return nil
		}
	}
	if ms := a.cfg.maxSplitSize(); ms != math.MaxInt64 {
		// Do not give an oversize block to a small request, nor a much
		// larger oversize block to a large one.
		if size < ms && b.size >= ms || size >= ms && b.size >= size+a.cfg.maxNonSplitRounding() {
			return nil
		}
	}
	return b
}

// shouldSplit reports whether carving size bytes from the free block b
// leaves a remainder worth keeping as a free block (PyTorch's should_split).
func (a *Allocator) shouldSplit(b *Block, size int64) bool {
	rest := b.size - size
	if b.seg.kind == poolSmall || b.seg.virtual {
		return rest >= kMinBlockSize
	}
	return size < a.cfg.maxSplitSize() && rest > kSmallSize
}

// carve takes size bytes off the front of the free block b (off its end
// when high) and returns them as a new allocated block; the rest, when
// worth keeping, stays in the pool (re-keyed in place), else b leaves the
// pool.
func (a *Allocator) carve(b *Block, size, requested int64, region string, high bool) *Block {
	p := a.pools[b.seg.kind]
	a.account(b, -1)
	var blk *Block
	if a.shouldSplit(b, size) {
		if high {
			blk = a.blocks.splitOff(b, b.size-size)
		} else {
			blk = a.blocks.cutFront(b, size)
		}
		p.free.rekeyed(b)
		a.account(b, 1)
	} else {
		p.removeFree(b)
		blk = a.blocks.replace(b)
	}
	blk.state = stateAllocated
	blk.requested = requested
	blk.region = region
	a.account(blk, 1)
	if blk.size >= a.oversize {
		a.stats.OversizeAllocations.inc(1)
	}
	if !a.quickOOM {
		a.log.add(replayOp{addr: blk.addr, size: requested, stream: blk.stream})
	}
	if a.hist != nil {
		blk.pcs = a.hist.callers()
		a.recordBlock(trace.ActionAlloc, blk, blk.pcs)
	}
	return blk
}

// Free returns b to the allocator. The memory is cached for reuse on b's
// stream, at once, or, when [Allocator.RecordStream] recorded other streams
// and the allocator has an [EventSource], once those streams are done.
// Free panics if b is not a block this allocator handed out and that is
// still allocated (a double free).
func (a *Allocator) Free(b *Block) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if b != nil && b.seg == nil && b.state == stateAllocated {
		// A zero-byte block (see Alloc): nothing to return.
		b.state = stateDead
		return
	}
	if msg := a.misuse(b, "freed twice?"); msg != "" {
		panic("memory: Free of " + msg)
	}
	a.account(b, -1)
	if a.mode == modeVRAM {
		a.learnLife(b)
	}
	if b.size >= a.oversize {
		a.stats.OversizeAllocations.update(-1)
	}
	var pcs []uintptr
	if a.hist != nil {
		pcs = a.hist.callers()
		a.recordBlock(trace.ActionFreeRequested, b, pcs)
	}
	if len(b.uses) > 0 && a.events != nil {
		b.state = statePending
		for _, s := range b.uses {
			a.pendingEvents = append(a.pendingEvents, pendingEvent{b, a.events.Record(s)})
			b.pending++
		}
		b.uses = nil
		a.account(b, 1)
		return
	}
	a.freeBlock(b, pcs)
}

// freeBlock makes the allocated or pending block b, not accounted, free:
// merged with free neighbours, in its pool, accounted. pcs is the stack
// recorded with the event (history on).
func (a *Allocator) freeBlock(b *Block, pcs []uintptr) {
	if !a.quickOOM {
		a.log.add(replayOp{free: true, addr: b.addr, size: b.requested, stream: b.stream})
	}
	if a.hist != nil {
		a.recordBlock(trace.ActionFreeCompleted, b, pcs)
	}
	b.state = stateFree
	b.uses, b.region, b.pcs = nil, "", nil
	b.requested = 0
	b.freedAt = a.tick
	a.freedOnce = true
	p := a.pools[b.seg.kind]
	// b takes the tree position of a free neighbour it absorbs, and is
	// re-keyed in place: usually no tree surgery at all.
	inTree := false
	if pr := b.prev; pr != nil && pr.state == stateFree {
		a.account(pr, -1)
		p.free.replace(pr, b)
		inTree = true
		a.blocks.absorbPrev(b)
	}
	if nx := b.next; nx != nil && nx.state == stateFree {
		a.account(nx, -1)
		if inTree {
			p.removeFree(nx)
		} else {
			p.free.replace(nx, b)
			inTree = true
		}
		a.blocks.absorbNext(b)
	}
	if inTree {
		p.free.rekeyed(b)
	} else {
		p.insertFree(b)
	}
	a.account(b, 1)
}

// RecordStream tells the allocator that b is also used on stream s, so
// that when b is freed its memory is not reused before the work queued on
// s by then has finished (torch.Tensor.record_stream). Recording b's own
// stream does nothing, and so does recording a private pool's key
// ([Allocator.NewPrivatePool]): it names no stream, so no work is queued
// on it. It panics if b is not allocated by this allocator.
func (a *Allocator) RecordStream(b *Block, s Stream) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if b != nil && b.seg == nil && b.state == stateAllocated {
		return // a zero-byte block: no memory to keep from reuse
	}
	if msg := a.misuse(b, "freed?"); msg != "" {
		panic("memory: RecordStream on " + msg)
	}
	if s == b.stream || IsPrivatePool(s) {
		return
	}
	for _, u := range b.uses {
		if u == s {
			return
		}
	}
	b.uses = append(b.uses, s)
}

// misuse says what is wrong with a block passed to Free or RecordStream
// ("a nil block", "a block of another allocator", "a block that is not
// allocated" followed by hint in parentheses), or returns "" for one this
// allocator handed out that is still allocated. A zero-byte block, in no segment, has no owner; the
// callers accept it while it is allocated.
func (a *Allocator) misuse(b *Block, hint string) string {
	switch {
	case b == nil:
		return "a nil block"
	case b.seg != nil && b.seg.owner != a:
		return "a block of another allocator"
	case b.state != stateAllocated || b.seg == nil:
		return "a block that is not allocated (" + hint + ")"
	}
	return ""
}

// processEvents returns to the pool the pending blocks whose events have
// all completed; with wait, it first waits for every event when the source
// can (EventWaiter).
func (a *Allocator) processEvents(wait bool) {
	w, canWait := a.events.(EventWaiter)
	kept := a.pendingEvents[:0]
	for _, pe := range a.pendingEvents {
		if wait && canWait {
			w.Wait(pe.e)
		} else if !a.events.Query(pe.e) {
			kept = append(kept, pe)
			continue
		}
		if pe.b.pending--; pe.b.pending == 0 {
			a.account(pe.b, -1)
			a.freeBlock(pe.b, nil)
		}
	}
	clear(a.pendingEvents[len(kept):])
	a.pendingEvents = kept
}

// EmptyCache returns every cached block it can to the device: fixed
// segments that are wholly free, and the mappings inside free blocks of
// virtual segments (torch.cuda.empty_cache). Blocks still in use, and
// blocks waiting for another stream's events, stay.
func (a *Allocator) EmptyCache() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pendingEvents) > 0 {
		a.processEvents(false)
	}
	a.releaseCached()
	a.highWater = a.stats.ReservedBytes[StatAll].Current
	a.peakAlloc = a.stats.AllocatedBytes[StatAll].Current
	a.lowSeen, a.aboveMid, a.newRequest = false, false, false
}

// releaseCached releases every free fixed segment and every mapping inside
// a free block of a virtual segment (PyTorch's release_cached_blocks).
func (a *Allocator) releaseCached() {
	if a.holds > 0 {
		return // releasing would wait for the device (private.go)
	}
	a.stats.NumSyncAllStreams++
	if len(a.pendingEvents) > 0 {
		a.processEvents(true)
	}
	var whole []*Block
	for _, p := range a.pools {
		p.free.each(func(b *Block) bool {
			if !b.seg.virtual && b.prev == nil && b.next == nil {
				whole = append(whole, b)
			}
			return true
		})
	}
	for _, b := range whole {
		a.releaseSegment(b) // an arena error leaves the segment cached
	}
	if a.mode != modeFixed {
		a.releaseVirtualFree()
	}
}

// releaseAvailable releases cached memory that makes room for a request of
// size bytes on stream (step 4) and reports whether it released any.
// Fixed segments: as PyTorch's release_available_cached_blocks, only with
// max_split_size_mb, the smallest unsplittable free block of the stream
// that is at least as large as the request, else such blocks from the
// largest down until their sum suffices. policy:vram unmaps free chunks
// worth the request. Expandable segments: nothing (as PyTorch).
func (a *Allocator) releaseAvailable(p *pool, stream Stream, size int64) bool {
	switch a.mode {
	case modeVRAM:
		return a.reclaim(size, nil, 0, 0) > 0
	case modeExpandable:
		return false
	}
	ms := a.cfg.maxSplitSize()
	if ms == math.MaxInt64 {
		return false
	}
	key := max(size, ms)
	if b := p.lowerBound(stream, key); b != nil {
		return a.releaseSegment(b) == nil
	}
	var big []*Block
	start := p.free.seek(stream, key, 0) // the largest block below key comes before it
	if start == nil {
		start = p.free.last()
	} else {
		start = prevIn(start)
	}
	for b := start; b != nil && b.stream == stream && b.size >= ms; b = prevIn(b) {
		if !b.seg.virtual && !b.isSplit() {
			big = append(big, b)
		}
	}
	var got int64
	for _, b := range big {
		if got >= key {
			break
		}
		s := b.size
		if a.releaseSegment(b) == nil {
			got += s
		}
	}
	return got >= key
}

// garbageCollect releases least recently used cached memory while the
// reserve is above garbage_collection_threshold of the limit (step 2).
// Candidates are wholly free fixed segments and free blocks of virtual
// segments with whole mappings inside, oldest first.
func (a *Allocator) garbageCollect() {
	threshold := int64(a.cfg.GarbageCollectionThreshold * float64(a.allowed()))
	if a.stats.ReservedBytes[StatAll].Current <= threshold {
		return
	}
	var cands []*Block
	for _, p := range a.pools {
		p.free.each(func(b *Block) bool {
			if a.releasable(b) {
				cands = append(cands, b)
			}
			return true
		})
	}
	sortByAge(cands)
	for _, b := range cands {
		if a.stats.ReservedBytes[StatAll].Current <= threshold {
			break
		}
		a.release(b)
	}
}

// account adds (sign 1) or removes (sign -1) b's contribution to the
// block statistics. It is on the cached path, hence the unrolled updates.
func (a *Allocator) account(b *Block, sign int64) {
	k := b.seg.kind
	s := &a.stats
	switch b.state {
	case stateAllocated:
		if sign > 0 {
			s.Allocation.inc(k, 1)
			s.AllocatedBytes.inc(k, b.size)
			if c := s.AllocatedBytes[StatAll].Current; c > a.peakAlloc {
				a.peakAlloc = c
			}
			s.RequestedBytes.inc(k, b.requested)
			s.Active.inc(k, 1)
			s.ActiveBytes.inc(k, b.size)
		} else if s.Allocation.dec(k, 1)|s.AllocatedBytes.dec(k, b.size)|s.RequestedBytes.dec(k, b.requested)|
			s.Active.dec(k, 1)|s.ActiveBytes.dec(k, b.size) < 0 {
			negativeStat(-1)
		}
	case statePending:
		s.Active.update(k, sign)
		s.ActiveBytes.update(k, sign*b.size)
	case stateFree:
		if sign > 0 {
			if n := a.unreleasable(b); n > 0 {
				b.unrel = n
				s.InactiveSplit.inc(k, 1)
				s.InactiveSplitBytes.inc(k, n)
			}
		} else if n := b.unrel; n > 0 {
			b.unrel = 0
			if s.InactiveSplit.dec(k, 1)|s.InactiveSplitBytes.dec(k, n) < 0 {
				negativeStat(-1)
			}
		}
	}
}

// unreleasable returns the bytes of the free block b that releasing the
// whole cache would keep (PyTorch's inactive split memory): all of b when
// it shares its fixed segment with other blocks, none when it is the whole
// segment. In a virtual segment memory is given back by the mapping, so
// they are the parts of b in the (at most two) mappings at its ends that
// b shares with allocated or pending blocks; the mappings in between lie
// wholly inside b.
func (a *Allocator) unreleasable(b *Block) int64 {
	if !b.seg.virtual {
		if b.isSplit() {
			return b.size
		}
		return 0
	}
	head := a.chunkOf(b, b.addr)
	tail := a.chunkOf(b, b.end()-1)
	b.hc, b.tc = chunkRef{head, a.chunkGen}, chunkRef{tail, a.chunkGen}
	if head.addr == tail.addr { // one mapping holds all of b
		if head.addr == b.addr && head.size == b.size {
			return 0
		}
		return b.size
	}
	var n int64
	if head.addr != b.addr {
		n += int64(head.addr + uint64(head.size) - b.addr)
	}
	if te := tail.addr + uint64(tail.size); te != b.end() {
		n += int64(b.end() - tail.addr)
	}
	return n
}

// chunkOf returns the mapping that holds the byte at addr of the block b
// of a virtual segment: one that b remembers, if current, else from the
// tree.
func (a *Allocator) chunkOf(b *Block, addr uint64) chunk {
	if b.hc.gen == a.chunkGen && b.hc.holds(addr) {
		return b.hc.chunk
	}
	if b.tc.gen == a.chunkGen && b.tc.holds(addr) {
		return b.tc.chunk
	}
	var c chunk
	a.chunks.DescendLessOrEqual(chunk{addr: addr}, func(x chunk) bool {
		c = x
		return false
	})
	if !c.holds(addr) {
		panic("vram: internal: block of a virtual segment outside its mappings")
	}
	return c
}

// addReserved changes the reserve by delta bytes.
func (a *Allocator) addReserved(k poolKind, delta int64) {
	a.stats.ReservedBytes.update(k, delta)
	if r := a.stats.ReservedBytes[StatAll].Current; r > a.highWater {
		a.highWater = r
	}
}

// beyondAllowed returns the error of a rounded request of size bytes
// larger than a.allowed(): errLimit when the limit binds, else one wrapping
// ErrArenaFull.
func (a *Allocator) beyondAllowed(size int64) error {
	if c := a.arena.Capacity(); size > c {
		return fmt.Errorf("memory: a block of %d bytes is larger than the device's %d: %w", size, c, ErrArenaFull)
	}
	return errLimit
}

// checkLimit fails with errLimit if reserving extra more bytes would pass
// the limit.
func (a *Allocator) checkLimit(extra int64) error {
	if extra > a.limit-a.stats.ReservedBytes[StatAll].Current {
		return errLimit
	}
	return nil
}

// Stats returns a copy of the allocator's statistics.
func (a *Allocator) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

// MaxAllocated returns the peak of allocated bytes since New or
// ResetPeakStats (torch.cuda.max_memory_allocated).
func (a *Allocator) MaxAllocated() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats.AllocatedBytes[StatAll].Peak
}

// MaxReserved returns the peak of reserved bytes since New or
// ResetPeakStats (torch.cuda.max_memory_reserved).
func (a *Allocator) MaxReserved() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats.ReservedBytes[StatAll].Peak
}

// ResetPeakStats sets every peak statistic to its current value
// (torch.cuda.reset_peak_memory_stats).
func (a *Allocator) ResetPeakStats() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats.resetPeaks()
}

// ResetAccumulatedStats zeroes the cumulative statistics: the Allocated and
// Freed sums of every Stat, and the counters (retries, OOMs, syncs, device
// calls, maps, unmaps) and driver time; current values and peaks stay
// (torch.cuda.reset_accumulated_memory_stats).
func (a *Allocator) ResetAccumulatedStats() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats.resetAccumulated()
	if a.timer != nil {
		a.timeBase = a.timer.DriverTime()
	}
}

// Arena calls, counted and timed.

func (a *Allocator) timed(start time.Time) {
	if a.timer != nil {
		a.stats.DriverTime = a.timer.DriverTime() - a.timeBase
	} else {
		a.stats.DriverTime += time.Since(start)
	}
}

func (a *Allocator) now() time.Time {
	if a.timer != nil {
		return time.Time{}
	}
	return time.Now()
}

func (a *Allocator) arenaAlloc(size int64) (uint64, error) {
	t := a.now()
	addr, err := a.arena.Alloc(size)
	a.timed(t)
	if err != nil {
		return 0, err
	}
	a.stats.NumDeviceAlloc++
	return addr, nil
}

func (a *Allocator) arenaFree(addr uint64, size int64) error {
	t := a.now()
	err := a.arena.Free(addr, size)
	a.timed(t)
	if err == nil {
		a.stats.NumDeviceFree++
	}
	return err
}

func (a *Allocator) arenaMap(addr uint64, size int64) error {
	t := a.now()
	err := a.varena.Map(addr, size)
	a.timed(t)
	if err == nil {
		a.stats.NumDeviceAlloc++
		a.stats.NumMaps++
	}
	return err
}

// arenaMapRange maps the adjacent chunks cs (at least one) with one
// MapRange call when the arena has it, else one Map each; on failure
// nothing stays mapped.
func (a *Allocator) arenaMapRange(cs []chunk) error {
	if a.ranger == nil || len(cs) == 1 {
		for i, c := range cs {
			if err := a.arenaMap(c.addr, c.size); err != nil {
				for _, m := range cs[:i] {
					a.arenaUnmap(m.addr, m.size) // best effort; the error is the map failure
				}
				return err
			}
		}
		return nil
	}
	sizes := make([]int64, len(cs))
	for i, c := range cs {
		sizes[i] = c.size
	}
	t := a.now()
	err := a.ranger.MapRange(cs[0].addr, sizes)
	a.timed(t)
	if err == nil {
		a.stats.NumDeviceAlloc += int64(len(cs))
		a.stats.NumMaps += int64(len(cs))
	}
	return err
}

func (a *Allocator) arenaUnmap(addr uint64, size int64) error {
	t := a.now()
	err := a.varena.Unmap(addr, size)
	a.timed(t)
	if err == nil {
		a.stats.NumDeviceFree++
		a.stats.NumUnmaps++
	}
	return err
}

// leadingZeros returns the number of leading zero bits of x.
func leadingZeros(x uint64) int { return bits.LeadingZeros64(x) }

// sortByAge orders free blocks oldest first (least recently freed), larger
// first among equals.
func sortByAge(bs []*Block) {
	sort.Slice(bs, func(i, j int) bool {
		if bs[i].freedAt != bs[j].freedAt {
			return bs[i].freedAt < bs[j].freedAt
		}
		return bs[i].size > bs[j].size
	})
}

// alignDown rounds n down to a multiple of m (m > 0, n >= 0).
func alignDown(n, m int64) int64 { return n / m * m }

// alignUp rounds n up to a multiple of m (m > 0, n >= 0). It cannot
// overflow when the result fits an int64, which holds for requests of at
// most MaxAllocSize and spans of at most maxDefaultSpan.
func alignUp(n, m int64) int64 {
	if r := n % m; r != 0 {
		return n + (m - r)
	}
	return n
}

// satAdd returns a+b for non-negative a and b, or math.MaxInt64 when the
// sum does not fit.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// maxDefaultSpan bounds, in bytes, the address range a virtual segment
// reserves ahead of need (twice the capacity under policy:vram, 9/8 of it
// for expandable segments): 1 PiB, more than any GPU has (an H200 has
// 141 GB), so that a simulated device of absurd capacity still reserves
// ranges whose sum stays far inside the 64-bit address space. A larger
// request reserves its own size.
const maxDefaultSpan = 1 << 50

// scaleSpan returns capacity/den*num (capacity >= 0, num and den > 0), the
// address range a virtual segment reserves ahead of need, at most
// maxDefaultSpan.
func scaleSpan(capacity, num, den int64) int64 {
	if q := capacity / den; q <= maxDefaultSpan/num {
		return q * num
	}
	return maxDefaultSpan
}
