package analyze

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"

	"github.com/vramgo/vram/internal/units"
)

// The fix check of an out-of-memory event.
//
// An OOM of a recorded history says what failed, not what would have
// worked. The check replays the history up to the failed allocation, then
// that allocation, through vram's allocator on a simulated device as large
// as the memory the run was allowed (which places fixed segments where the
// run's driver placed them: see addrarena.go): first under policy:pytorch with the
// recorded settings, which must fail as the run did (else the replay does
// not reproduce it and nothing is concluded), then under each setting to
// try. A setting fits when every allocation of the replay succeeds; its
// peak is the replay's peak reserve. The limit is the one given
// (Options.Limit), else the snapshot's own (per_process_memory_fraction
// of its capacity), else inferred from the event: when the device had
// less free than the allocator needed, the memory this process reserved
// plus what was free; when the device had room, a limit of the allocator
// stopped it (torch.cuda.set_per_process_memory_fraction), and that limit
// is at least the most the run reserved before and less than what it held
// at the OOM plus what it needed more; the check uses the least value.

// FixTrial is one setting the fix check of an out-of-memory event replayed.
type FixTrial struct {
	// Config is the setting, as the run's allocator spells it: the
	// PYTORCH_CUDA_ALLOC_CONF value for a PyTorch history ("policy:vram"
	// for vram's own policy), the VRAM_ALLOC_CONF value for vram's.
	Config string `json:"config"`
	// Fits reports that the replay under the limit served every
	// allocation, the failed one included.
	Fits bool `json:"fits"`
	// PeakReservedBytes is the replay's peak reserve up to and with the
	// failed allocation, when it fits.
	PeakReservedBytes int64 `json:"peak_reserved_bytes,omitempty"`
	// MinLimitBytes is, when the limit is known only within a range and
	// the setting fits under its most but not its least, the least limit
	// found under which it fits (see MinLimitSearched); PeakReservedBytes
	// is then its peak under that limit.
	MinLimitBytes int64 `json:"min_limit_bytes,omitempty"`
	// MinLimitSearched reports that MinLimitBytes was searched for, by
	// bisection to within 2 MiB or a 128th of the range; otherwise it is
	// only a limit under which the setting fits (the range's most, or the
	// peak of the replay under it), and the least may be lower: the text
	// and the page then say "or less".
	MinLimitSearched bool `json:"min_limit_searched,omitempty"`
	// Skipped reports that it was not replayed: the replay budget
	// (Options.ReplayEvents) was spent.
	Skipped bool `json:"skipped,omitempty"`

	vram bool // vram's own policy
}

// DefaultReplayEvents is the replay budget of one device's fix checks
// when Options.ReplayEvents is 0: about ten seconds of replay on one core.
const DefaultReplayEvents = 20_000_000

// maxFileReplays bounds the fix checks of all the devices of one file
// together to this many times Options.ReplayEvents: a PyTorch snapshot may
// hold up to trace.MaxDevices devices, and a budget for each alone would
// let a small file take hours.
const maxFileReplays = 4

// MaxLimit is the largest limit a fix check replays under, 1 TiB: no
// device has that much memory (the largest have a few hundred GiB). An
// Options.Limit, or a limit a file gives, above it leaves the fix
// unchecked.
const MaxLimit = 1 << 40

// maxFixLimit bounds the simulated device of a fix check.
const maxFixLimit = MaxLimit

// replayPage is the unit in which a replay's simulated device counts
// toward the budget: a replay may map each 2 MiB of it once (as PyTorch's
// expandable segments do), so that a history that claims a huge device
// cannot make its checks take time and memory beyond the budget.
const replayPage = 2 << 20

// driverHeadroom is how much more than a request the device must report
// free before an out-of-memory error can be blamed on a limit rather than
// on the device: 64 MiB. The CUDA driver keeps part of what
// cudaMemGetInfo reports free for page tables and its own growth, so an
// allocation that leaves less than that fails on a full device (on an
// H100, PyTorch 2.11's cudaMalloc of 1 GiB failed with 1 GiB and 192 KiB
// free, 2026-12-06).
const driverHeadroom = 64 << 20

// deviceFull reports whether the device itself could not give what the
// allocator asked for: it reported need bytes or less free, or so little
// more that the driver's own share left too little.
func deviceFull(need, free int64) bool {
	return free < satAdd(need, driverHeadroom)
}

// fixer replays one device's history for the fix checks.
type fixer struct {
	h       trace.History
	start   []trace.Event // allocs of the blocks held before the history
	budget  int64         // events that may still be replayed
	initial int64         // the budget at the start
	pytorch bool          // the history is PyTorch's: settings in its terms
	spent   bool          // a replay was refused for the budget
	segs    segmentAddrs  // the recorded segments' addresses, which replays follow
}

// errBudget refuses a replay that would pass the budget.
var errBudget = errors.New("replay budget spent")

// requestAddr is the address the failed allocation is replayed at: no
// real block has it.
const requestAddr = math.MaxUint64

// prefix is a history's first n events after the start blocks, then an
// alloc of the failed request when it has a size.
type prefix struct {
	f   *fixer
	n   int
	req trace.Event
}

// stopPrefix ends a pass over the history after the prefix.
var stopPrefix = errors.New("end of the prefix")

func (p prefix) Each(fn func(e *trace.Event) error) error {
	for i := range p.f.start {
		e := p.f.start[i]
		if err := fn(&e); err != nil {
			return err
		}
	}
	i := 0
	err := p.f.h.Each(func(e *trace.Event) error {
		if i >= p.n {
			return stopPrefix
		}
		i++
		return fn(e)
	})
	if err != nil && err != stopPrefix {
		return err
	}
	if p.req.Size > 0 {
		req := p.req
		return fn(&req)
	}
	return nil
}

// replay runs the first n events of the history, then (when req > 0) an
// allocation of req bytes on stream, under cfg on a simulated device of
// limit bytes. It reports whether every allocation succeeded and the peak
// reserve.
func (f *fixer) replay(n int, req int64, stream uint64, cfg memory.Config, limit int64) (bool, int64, error) {
	res, err := f.replayResult(n, req, stream, cfg, limit)
	if err != nil {
		return false, 0, err
	}
	return res.NumOOMs == 0, res.PeakReserved, nil
}

// replayResult is replay with all that the replay measured.
func (f *fixer) replayResult(n int, req int64, stream uint64, cfg memory.Config, limit int64) (memory.Result, error) {
	cost := f.cost(n, limit)
	if cost > f.budget {
		f.spent = true
		return memory.Result{}, errBudget
	}
	f.budget -= cost
	p := prefix{f: f, n: n, req: trace.Event{Action: trace.ActionAlloc, Addr: requestAddr, Size: req, Stream: stream}}
	return memory.ReplayHistory(p, replayArena(cfg, limit, f.segs), cfg)
}

// cost is what a replay of the first n events under limit takes of the
// budget.
func (f *fixer) cost(n int, limit int64) int64 {
	return int64(len(f.start)) + int64(n) + 1 + limit/replayPage
}

// releases counts the segments the recorded run gave back to the device
// in the first n events of its history, but for those right at the end:
// segment_free events, or segment_unmap events when it used expandable
// segments.
func (f *fixer) releases(n int, expandable bool) (int64, error) {
	if int64(n) > f.budget {
		return 0, errBudget
	}
	f.budget -= int64(n)
	want := trace.ActionSegmentFree
	if expandable {
		want = trace.ActionSegmentUnmap
	}
	var count, trailing int64
	i := 0
	err := f.h.Each(func(e *trace.Event) error {
		if i >= n {
			return stopPrefix
		}
		i++
		if e.Action == want {
			count++
			trailing++
		} else {
			trailing = 0
		}
		return nil
	})
	if err != nil && err != stopPrefix {
		return 0, err
	}
	// The releases right before the OOM were the failed request's own:
	// a replay of the history before it does not make them.
	return count - trailing, nil
}

// narrowByReleases narrows a limit known within [lo, hi] with the
// segments the run gave back before the OOM: PyTorch releases cached
// segments when a reservation would pass its limit, and a replay of the
// recorded settings releases as many as the run did only under a limit
// close to the run's (more under a lower one, fewer under a higher one).
// When the replay under lo releases at least as many, the run's limit is
// at least the least limit under which it releases no more than the run,
// and below the least under which it releases fewer. It returns the new
// bounds and whether they changed.
func (f *fixer) narrowByReleases(o *OOM, base memory.Config, lo, hi int64) (int64, int64, bool, error) {
	want, err := f.releases(o.Event, base.ExpandableSegments)
	if err != nil || want == 0 {
		return lo, hi, false, err
	}
	released := func(c int64) (int64, error) {
		res, err := f.replayResult(o.Event, 0, o.stream, base, c)
		if base.ExpandableSegments {
			return res.DeviceUnmaps, err
		}
		return res.DeviceFrees, err
	}
	atLo, err := released(lo)
	if err != nil || atLo < want {
		return lo, hi, false, err // releases the replay cannot explain (empty_cache calls)
	}
	// least reports the least limit in (a, b] where cond holds, b+1 if none,
	// assuming that cond holds from some limit on.
	least := func(a, b int64, cond func(int64) bool) int64 {
		if !cond(b) {
			return b + 1
		}
		for i := 0; i < 10 && b-a > replayPage; i++ {
			mid := a + (b-a)/2
			if cond(mid) {
				b = mid
			} else {
				a = mid
			}
		}
		return b
	}
	var ferr error
	count := func(c int64) int64 {
		n, err := released(c)
		if err != nil && ferr == nil {
			ferr = err
		}
		return n
	}
	newLo, newHi := lo, hi
	if atLo > want {
		newLo = least(lo, hi, func(c int64) bool { return count(c) <= want })
	}
	if first := least(newLo, hi, func(c int64) bool { return count(c) < want }); first <= hi {
		newHi = first - 1
	}
	if ferr != nil || newLo > newHi {
		return lo, hi, false, nil // keep what is sure; the budget or an odd history
	}
	return newLo, newHi, newLo != lo || newHi != hi, nil
}

// fixOption is a setting the check tries: its Config, and how it is named.
type fixOption struct {
	cfg  memory.Config
	name string // as Config of a FixTrial
	vram bool   // vram's own policy, which PyTorch does not have
}

// confName names cfg in the run's terms: PYTORCH_CUDA_ALLOC_CONF's value
// without vram's policy key for PyTorch, VRAM_ALLOC_CONF's for vram.
func (f *fixer) confName(cfg memory.Config) string {
	if f.pytorch && cfg.Policy == memory.PolicyPyTorch {
		c := cfg
		c.Policy = memory.PolicyVRAM // String leaves the default policy out
		return c.String()
	}
	s := cfg.String()
	switch {
	case s == "":
		return "policy:vram"
	case f.pytorch && cfg.Policy == memory.PolicyVRAM:
		// Not PyTorch's default: the policy is what the setting changes.
		return "policy:vram," + s
	}
	return s
}

// options returns the settings to try after base, most likely to help
// (and simplest to set) first: expandable segments, max_split_size_mb
// values where fixed segments are in use, a garbage collection threshold,
// a change of roundup_power2_divisions, and vram's policy.
func (f *fixer) options(base memory.Config) []fixOption {
	var out []fixOption
	add := func(c memory.Config) { out = append(out, fixOption{cfg: c, name: f.confName(c)}) }
	if base.Policy == memory.PolicyPyTorch {
		if !base.ExpandableSegments {
			c := base
			c.ExpandableSegments = true
			add(c)
			for _, mb := range []int64{128, 256, 512} {
				if base.MaxSplitSizeMB == 0 || mb < base.MaxSplitSizeMB {
					c := base
					c.MaxSplitSizeMB = mb
					add(c)
				}
			}
		}
		if base.GarbageCollectionThreshold == 0 {
			c := base
			c.GarbageCollectionThreshold = 0.8
			add(c)
		}
		c := base
		if base.RoundupPower2Divisions == ([16]int{}) {
			for i := range c.RoundupPower2Divisions {
				c.RoundupPower2Divisions[i] = 4
			}
		} else {
			c.RoundupPower2Divisions = [16]int{}
		}
		add(c)
		v := base
		v.Policy, v.ExpandableSegments, v.MaxSplitSizeMB = memory.PolicyVRAM, false, 0
		out = append(out, fixOption{cfg: v, name: f.confName(v), vram: true})
	} else {
		c := base
		c.Policy, c.ExpandableSegments = memory.PolicyPyTorch, true
		add(c)
	}
	return out
}

// limitFor decides the limit the check replays under, and says how it
// was found. lo is the limit to replay under, hi the most it can be
// (equal to lo when known).
func limitFor(o *OOM, opts Options, s *trace.Snapshot, base memory.Config, frac float64) (lo, hi int64, how string) {
	if opts.Limit > 0 {
		how := "as given with --limit"
		if o.peakReservedBefore > opts.Limit {
			how += fmt.Sprintf(", although the run reserved %s before this point, more than that", units.Bytes(o.peakReservedBefore))
		}
		return opts.Limit, opts.Limit, how
	}
	// room caps a limit from the snapshot's settings with what the device
	// had for this process, when the event says what was free.
	room := func(l int64, how string) (int64, int64, string) {
		if r := satAdd(o.ReservedBytes, o.DeviceFreeBytes); o.DeviceFreeBytes > 0 && r < l {
			return r, r, fmt.Sprintf("%s, less what other processes held: this process held %s and the device had %s free", how, units.Bytes(o.ReservedBytes), units.Bytes(o.DeviceFreeBytes))
		}
		return l, l, how
	}
	if s != nil && s.Capacity > 0 && frac > 0 && frac <= 1 {
		return room(int64(frac*float64(s.Capacity)), fmt.Sprintf("per_process_memory_fraction %s of the %s device", strconv.FormatFloat(frac, 'g', -1, 64), units.Bytes(s.Capacity)))
	}
	if s != nil && s.Capacity > 0 && vramSource(s.Meta[trace.MetaSource]) {
		// vram's snapshots record the device: its allocator could have
		// all of it but what other processes held.
		return room(s.Capacity, "the device's capacity, from the snapshot")
	}
	need := pytorchSegmentSize(o.RequestedBytes, base.ExpandableSegments)
	upper := satAdd(o.ReservedBytes, need) - 1
	if deviceFull(need, o.DeviceFreeBytes) {
		// The device did not have what the allocator asked for: this
		// process could have what it held and what was free.
		usable, than := o.DeviceFreeBytes, "less than"
		if need <= usable {
			// It could not give need bytes: the driver kept its share.
			usable, than = max(0, usable-driverHeadroom), "too little beside the driver's own share for"
		}
		l := max(satAdd(o.ReservedBytes, usable), o.peakReservedBefore)
		return l, l, fmt.Sprintf("inferred from the event: this process held %s and the device had %s free, %s the %s the allocator asked for",
			units.Bytes(o.ReservedBytes), units.BytesDown(o.DeviceFreeBytes), than, units.BytesUp(need))
	}
	l := max(o.peakReservedBefore, o.ReservedBytes)
	if l > upper {
		upper = l
	}
	return l, upper, fmt.Sprintf("inferred from the history, as the snapshot does not record it: the run reserved %s before without failing, and failed to reserve %s more while it held %s although the device had %s free",
		units.Bytes(o.peakReservedBefore), units.Bytes(need), units.Bytes(o.ReservedBytes), units.Bytes(o.DeviceFreeBytes))
}

// pytorchSegmentSize is the most PyTorch's allocator asks of the device
// for a request of size bytes (rounded): a 2 MiB segment for up to 1 MiB,
// 20 MiB for less than 10 MiB, else the size rounded up to 2 MiB; with
// expandable segments, the request mapped in pages of 2 MiB (small pool)
// or 20 MiB (large pool).
func pytorchSegmentSize(size int64, expandable bool) int64 {
	const mib = 1 << 20
	step := int64(2 * mib)
	switch {
	case size <= mib:
		return 2 * mib
	case expandable:
		step = 20 * mib
	case size < 10*mib:
		return 20 * mib
	}
	if size > math.MaxInt64-step {
		return math.MaxInt64
	}
	return (size + step - 1) / step * step
}

// satAdd adds two non-negative sizes, saturating.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// newFixer prepares the fix checks of a device; nil with the reason when
// its history cannot be replayed.
func newFixer(d *Device, h trace.History, s *trace.Snapshot, opts Options) (*fixer, string) {
	budget := opts.ReplayEvents
	if budget == 0 {
		budget = DefaultReplayEvents
	}
	if budget < 0 {
		return nil, ""
	}
	f := &fixer{h: h, budget: budget, initial: budget, pytorch: !vramSource(d.Source)}
	segs, err := recordedSegments(h)
	if err != nil {
		return nil, "none checked: " + err.Error()
	}
	f.segs = segs
	if d.HistoryTruncated {
		if s == nil {
			return nil, "none checked: the history does not start at the allocator's creation and the file holds no snapshot to start a replay from"
		}
		held, err := trace.StateAt(s, 0)
		if err != nil {
			return nil, "none checked: " + err.Error()
		}
		streams := map[uint64]uint64{}
		for _, seg := range s.Segments {
			for _, b := range seg.Blocks {
				streams[b.Addr] = seg.Stream
			}
		}
		for i := len(s.History) - 1; i >= 0; i-- {
			if _, ok := streams[s.History[i].Addr]; !ok && s.History[i].Action == trace.ActionFreeCompleted {
				streams[s.History[i].Addr] = s.History[i].Stream
			}
		}
		for _, b := range held {
			size := b.Requested
			if size == 0 {
				size = b.Size
			}
			f.start = append(f.start, trace.Event{Action: trace.ActionAlloc, Addr: b.Addr, Size: size, Stream: streams[b.Addr]})
		}
	}
	return f, ""
}

// baseConfig is the recorded run's allocator settings, and its
// per_process_memory_fraction (which the check takes as its limit): a
// snapshot's string with the allocator_settings entries PyTorch records
// beside it put over it (memory.Config.WithSnapshotSettings).
func baseConfig(d *Device) (memory.Config, float64, error) {
	var start memory.Config
	if !vramSource(d.Source) {
		start.Policy = memory.PolicyPyTorch // a PyTorch run: its settings under PyTorch's policy
	}
	var cfg memory.Config
	var err error
	if d.snap != nil {
		cfg, err = start.WithSnapshotSettings(d.snap)
	} else {
		cfg, err = start.With(d.Config)
	}
	if err != nil {
		return cfg, 0, err
	}
	frac := cfg.PerProcessMemoryFraction
	cfg.PerProcessMemoryFraction = 0 // the simulated device is the limit
	return cfg, frac, nil
}

// checkFixes runs the fix check of each explained OOM of d, within the
// replay budget.
func checkFixes(d *Device, h trace.History, s *trace.Snapshot, opts Options) error {
	if len(d.OOMs) == 0 {
		return nil
	}
	f, why := newFixer(d, h, s, opts)
	if f == nil {
		for i := range d.OOMs {
			d.OOMs[i].Fix = why
		}
		return nil
	}
	defer func() { d.replayed = f.initial - f.budget }()
	base, frac, err := baseConfig(d)
	if err != nil {
		for i := range d.OOMs {
			d.OOMs[i].Fix = "none checked: the recorded allocator settings are not all known to vram's replay: " + err.Error()
		}
		return nil
	}
	for i := range d.OOMs {
		if err := f.check(&d.OOMs[i], opts, s, base, frac); err != nil {
			return fmt.Errorf("fix check of the out-of-memory event %d: %w", d.OOMs[i].Event, err)
		}
	}
	return nil
}

// check runs the fix check of one OOM and writes its Fix.
func (f *fixer) check(o *OOM, opts Options, s *trace.Snapshot, base memory.Config, frac float64) error {
	if o.RequestedBytes <= 0 {
		return nil
	}
	lo, hi, how := limitFor(o, opts, s, base, frac)
	o.LimitBytes, o.LimitMaxBytes, o.LimitHow = lo, hi, how
	need := satAdd(o.AllocatedBytes, o.RequestedBytes) // what must be live at once
	missing := func() {
		o.MissingBytes = need - hi
		var least string
		if l, name, ok := f.leastLimit(o, base, need); ok {
			o.MissingBytes = l - hi
			least = fmt.Sprintf("; the least limit under which the run gets past this point is %s, with %s", units.Bytes(l), name)
		}
		if lo == hi {
			n, h := distinctBytes(need, hi)
			o.Fix = fmt.Sprintf("no setting can fit it: the tensors live at this point and this request take %s, more than the %s allowed (%s)%s: %s more memory is missing. Release tensors before this point, use a smaller batch or lower precision, or allow this process more memory.",
				n, h, how, least, units.Bytes(o.MissingBytes))
		} else {
			n, h := distinctBytes(need, satAdd(hi, 1))
			o.Fix = fmt.Sprintf("no setting can fit it: the tensors live at this point and this request take %s, more than the limit can have been, which was less than %s (%s)%s. Release tensors before this point, use a smaller batch or lower precision, or allow this process more memory.",
				n, h, how, least)
		}
	}
	if need > hi {
		missing()
		return nil
	}
	if lo <= 0 {
		o.Fix = "none checked: the event leaves no memory for the allocator (nothing reserved and nothing free on the device): pass the limit with --limit"
		return nil
	}
	if hi > maxFixLimit {
		o.Fix = fmt.Sprintf("none checked: a limit of %s is beyond any device", units.Bytes(hi))
		return nil
	}
	// The recorded settings must fail as the run did: the history up to
	// the OOM fits, the request does not. Their replay narrows a limit
	// known only within a range: the run's limit let the history up to
	// here fit, and did not let the request fit.
	// The budget goes to the settings first: the searches that narrow the
	// limit and find the least limit of a setting run only when it allows
	// several dozen replays.
	afford := f.budget / max(f.cost(o.Event, hi), 1)
	search := 0
	if afford >= 40 {
		search = 8
	}
	pre, err := f.minFit(o.Event, 0, o.stream, base, lo, hi, search)
	if err != nil {
		return f.fail(o, err)
	}
	if !pre.fitsHi {
		o.Fix = fmt.Sprintf("none checked: replaying the history under %s runs out of memory before this point under a limit of %s (%s)", f.baseName(base), units.Bytes(hi), how)
		return nil
	}
	if pre.limit > lo {
		lo = pre.limit
		how += fmt.Sprintf("; the replay needs %s before this point", units.Bytes(lo))
	}
	rec, err := f.minFit(o.Event, o.RequestedBytes, o.stream, base, lo, hi, search)
	if err != nil {
		return f.fail(o, err)
	}
	if rec.fitsLo {
		o.Fix = fmt.Sprintf("none checked: replaying the history under %s serves this request too (peak %s reserved under a limit of %s: %s), so the failure came from memory the history does not show (other streams' pending frees, CUDA graphs, another allocator on the device)",
			f.baseName(base), units.Bytes(rec.peak), units.Bytes(lo), how)
		return nil
	}
	if rec.fitsHi && rec.limit-1 < hi {
		hi = rec.limit - 1 // the run failed: its limit was below what serves the request
		how += fmt.Sprintf("; a replay of the recorded settings serves the request under a limit of %s, so the run's was lower", units.Bytes(rec.limit))
	}
	if lo < hi && afford >= 80 {
		nlo, nhi, ok, err := f.narrowByReleases(o, base, lo, hi)
		if err != nil && !errors.Is(err, errBudget) {
			return f.fail(o, err)
		}
		if ok {
			lo, hi = nlo, nhi
			how += fmt.Sprintf("; the run gave segments back to the device before this point, as PyTorch does when a reservation would pass its limit, and a replay gives back as many only under a limit from %s to %s", units.Bytes(lo), units.Bytes(hi))
		}
	}
	o.LimitBytes, o.LimitMaxBytes, o.LimitHow = lo, hi, how
	if need > hi {
		missing()
		return nil
	}
	exact := lo == hi

	tries := f.options(base)
	bisections := 2 // settings whose least limit is searched within the range
	if search == 0 {
		bisections = 0
	}
	for _, op := range tries {
		t := FixTrial{Config: op.name}
		steps := 0
		if bisections > 0 {
			steps = 7
		}
		r, err := f.minFit(o.Event, o.RequestedBytes, o.stream, op.cfg, lo, hi, steps)
		switch {
		case errors.Is(err, errBudget):
			t.Skipped = true
		case err != nil:
			return f.fail(o, err)
		case r.fitsLo:
			t.Fits, t.PeakReservedBytes = true, r.peak
		case r.fitsHi:
			t.MinLimitBytes, t.PeakReservedBytes, t.MinLimitSearched = r.limit, r.peak, r.bisected
			if r.bisected {
				bisections--
			}
		}
		t.vram = op.vram
		o.Trials = append(o.Trials, t)
	}
	o.Fix = f.describe(o, base, lo, hi, exact, need, tries)
	return nil
}

// distinctBytes formats a and b as units.Bytes does, in MiB with two
// decimals where that would print two different sizes alike, and in bytes
// where even those agree: "peaks at 1.49 GiB, under the 1.49 GiB allowed"
// reads as a contradiction.
func distinctBytes(a, b int64) (string, string) {
	sa, sb := units.Bytes(a), units.Bytes(b)
	if sa != sb || a == b {
		return sa, sb
	}
	sa, sb = fmt.Sprintf("%.2f MiB", float64(a)/(1<<20)), fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
	if sa != sb {
		return sa, sb
	}
	return fmt.Sprintf("%d bytes", a), fmt.Sprintf("%d bytes", b)
}

// describe writes the Fix of a checked OOM from its trials.
func (f *fixer) describe(o *OOM, base memory.Config, lo, hi int64, exact bool, need int64, tries []fixOption) string {
	var b strings.Builder
	allowed := units.Bytes(lo)
	if exact {
		fmt.Fprintf(&b, "checked by replaying the history up to this allocation under the same limit, %s (%s), where %s fails as the run did: ", allowed, o.LimitHow, f.baseName(base))
	} else {
		fmt.Fprintf(&b, "checked by replaying the history up to this allocation under the limit the run had, at least %s and at most %s (%s), where %s fails as the run did: ",
			allowed, units.Bytes(hi), o.LimitHow, f.baseName(base))
	}
	// The first setting that fits for sure (under the least limit), a
	// PyTorch one before vram's; else the first that fits under a limit
	// within the range.
	find := func(vram, sure bool) int {
		for i, t := range o.Trials {
			if t.vram == vram && (sure && t.Fits || !sure && !t.Fits && t.MinLimitBytes > 0) {
				return i
			}
		}
		return -1
	}
	// under says how a peak compares with the limit, in figures that
	// differ when the two do.
	under := func(peak int64) (string, string) {
		p, l := distinctBytes(peak, lo)
		word := "under"
		if peak >= lo {
			word = "within" // exactly the limit: fits, with nothing to spare
		}
		if !exact {
			return p, word + " the " + l + " the run had at least"
		}
		return p, word + " the " + l + " allowed"
	}
	chosen := -1
	if i := find(false, true); i >= 0 {
		chosen = i
		t := o.Trials[i]
		o.FixConfig = t.Config
		p, u := under(t.PeakReservedBytes)
		fmt.Fprintf(&b, "with %s=%s this run peaks at %s, %s.", f.envName(), t.Config, p, u)
	} else if i := find(true, true); i >= 0 {
		chosen = i
		t := o.Trials[i]
		o.FixConfig = t.Config
		p, u := under(t.PeakReservedBytes)
		fmt.Fprintf(&b, "no %s setting tried fits, but vram's own allocator policy (VRAM_ALLOC_CONF=%s) peaks at %s, %s.", f.envName(), t.Config, p, u)
	} else if i := find(false, false); i >= 0 || find(true, false) >= 0 {
		if i < 0 {
			i = find(true, false)
		}
		chosen = i
		t := o.Trials[i]
		env := f.envName()
		if t.vram {
			env = "VRAM_ALLOC_CONF"
		}
		orLess := ""
		if !t.MinLimitSearched {
			orLess = " or less"
		}
		fmt.Fprintf(&b, "none fits under %s, the least the limit can have been; with %s=%s this run fits under a limit of %s%s (it peaks at %s), so it fits if the process is allowed that much; give the exact limit with --limit (the fraction given to set_per_process_memory_fraction times the device's memory) to check.",
			allowed, env, t.Config, units.Bytes(t.MinLimitBytes), orLess, units.Bytes(t.PeakReservedBytes))
	} else {
		// Nothing fits: the least limit under which some setting a user
		// of the run's allocator can set gets past this point.
		fmt.Fprintf(&b, "no setting tried fits (%d tried)", len(o.Trials))
		if l, name, ok := f.leastLimit(o, base, max(need, satAdd(hi, 1))); ok && l > hi {
			o.MissingBytes = l - hi
			n, h := distinctBytes(need, hi)
			if exact {
				fmt.Fprintf(&b, ". The tensors live at this point and this request take %s, within the %s allowed, but not laid out in it: with %s the run needs a limit of %s, %s more.",
					n, h, name, units.Bytes(l), units.Bytes(o.MissingBytes))
			} else {
				// The run's limit is known only to lie in [lo, hi]:
				// so is what it lacked.
				fmt.Fprintf(&b, ". The tensors live at this point and this request take %s, within the at most %s the run had, but not laid out in it: with %s the run needs a limit of %s, %s to %s more than the run had.",
					n, h, name, units.Bytes(l), units.Bytes(o.MissingBytes), units.Bytes(l-lo))
			}
			b.WriteString(" Allow this process that much more memory (set_per_process_memory_fraction), or release tensors before this point.")
		} else {
			b.WriteString(".")
		}
	}
	var also []string
	for i, t := range o.Trials {
		if i == chosen {
			continue
		}
		switch {
		case t.Fits:
			also = append(also, fmt.Sprintf("%s fits (peak %s)", t.Config, units.Bytes(t.PeakReservedBytes)))
		case t.MinLimitBytes > 0 && t.MinLimitSearched:
			also = append(also, fmt.Sprintf("%s fits under a limit of %s", t.Config, units.Bytes(t.MinLimitBytes)))
		case t.MinLimitBytes > 0:
			also = append(also, fmt.Sprintf("%s fits under a limit of %s or less", t.Config, units.Bytes(t.MinLimitBytes)))
		}
	}
	if len(also) > 0 {
		fmt.Fprintf(&b, " Also: %s.", strings.Join(also, "; "))
	}
	f.noteSkipped(&b, o)
	return b.String()
}

// fail turns a replay's error into the OOM's Fix; only an error reading
// the history ends the analysis.
func (f *fixer) fail(o *OOM, err error) error {
	if errors.Is(err, errBudget) {
		o.Fix = "none checked: the replay budget (Options.ReplayEvents, --replay-events) is spent"
		return nil
	}
	var ce *memory.ConfigError
	if errors.As(err, &ce) {
		o.Fix = "none checked: " + err.Error()
		return nil
	}
	return err
}

// noteSkipped says how many settings the budget left out.
func (f *fixer) noteSkipped(b *strings.Builder, o *OOM) {
	n := 0
	for _, t := range o.Trials {
		if t.Skipped {
			n++
		}
	}
	if n > 0 {
		fmt.Fprintf(b, " (%s not replayed: the replay budget, --replay-events, is spent)", nOf(n, "setting", "settings"))
	}
}

// fit is what minFit found for one setting.
type fit struct {
	fitsLo, fitsHi bool  // it fits under the least and the most limit
	limit          int64 // the least limit found under which it fits (when fitsHi)
	peak           int64 // the peak reserve under that limit
	bisected       bool  // limit was searched between the two
}

// minFit replays under the limits lo and hi and, when the setting fits
// under hi only, bisects for the least limit that fits, in at most steps
// more replays, to within 2 MiB or a 128th of the range. It assumes that
// more memory never makes a replay fail.
func (f *fixer) minFit(n int, req int64, stream uint64, cfg memory.Config, lo, hi int64, steps int) (fit, error) {
	var r fit
	ok, peak, err := f.replay(n, req, stream, cfg, lo)
	if err != nil {
		return r, err
	}
	if ok {
		return fit{fitsLo: true, fitsHi: true, limit: lo, peak: peak}, nil
	}
	if hi <= lo {
		return r, nil
	}
	if ok, peak, err = f.replay(n, req, stream, cfg, hi); err != nil || !ok {
		return r, err
	}
	r = fit{fitsHi: true, limit: hi, peak: peak}
	// The peak is the most a fitting replay reserves: under a limit of
	// the peak it makes the same choices, and fits too, most likely.
	if peak > lo && peak < hi {
		ok, p2, err := f.replay(n, req, stream, cfg, peak)
		if err != nil {
			return r, nil
		}
		if ok {
			hi, r.limit, r.peak = peak, peak, p2
		}
	}
	if steps > 0 {
		r.bisected = true
	}
	tol := max(int64(replayPage), (hi-lo)/128)
	for ; steps > 0 && hi-lo > tol; steps-- {
		mid := lo + (hi-lo)/2
		if m := mid &^ (1<<20 - 1); m > lo { // whole MiB: limits people set
			mid = m
		}
		ok, p, err := f.replay(n, req, stream, cfg, mid)
		if err != nil {
			break // the budget: keep what is known
		}
		if ok {
			hi, r.limit, r.peak = mid, mid, p
		} else {
			lo = mid
		}
	}
	return r, nil
}

// leastLimit finds, to [memory.FitResolution], the least limit of at
// least floor under which a replay of the history up to o and its request
// succeeds, with the recorded settings or any setting of the run's
// allocator the check tries (vram's policy only for vram's own runs), and
// names the setting as "VAR=value". ok is false when no replay found one
// within the budget.
func (f *fixer) leastLimit(o *OOM, base memory.Config, floor int64) (limit int64, name string, ok bool) {
	cands := []fixOption{{cfg: base, name: f.confName(base)}}
	for _, op := range f.options(base) {
		if !op.vram {
			cands = append(cands, op)
		}
	}
	for _, c := range cands {
		replay := func(l int64) (memory.Result, error) {
			return f.replayResult(o.Event, o.RequestedBytes, o.stream, c.cfg, l)
		}
		top := min(alignUp(satAdd(satAdd(floor, floor), 64<<20)), maxFixLimit)
		free, err := replay(top)
		if err == nil && free.NumOOMs != 0 && top < maxFixLimit {
			free, err = replay(maxFixLimit)
		}
		if err != nil || free.NumOOMs != 0 {
			continue
		}
		// Below floor nothing fits: start the search there.
		free.PeakAllocated = max(free.PeakAllocated, floor)
		fit, err := memory.SmallestCapacity(replay, free, maxFixLimit)
		if err != nil || fit.Capacity == 0 {
			continue
		}
		if !ok || fit.Capacity < limit {
			limit, ok = fit.Capacity, true
			name = "the recorded settings"
			if c.name != "" && c.name != f.confName(base) {
				name = f.envName() + "=" + c.name
			} else if c.name != "" {
				name = "the recorded " + f.envName() + "=" + c.name
			}
		}
	}
	return limit, name, ok
}

// alignUp rounds n up to a multiple of [memory.FitResolution].
func alignUp(n int64) int64 {
	const r = memory.FitResolution
	if n > math.MaxInt64-r {
		return math.MaxInt64 &^ (r - 1)
	}
	return (n + r - 1) / r * r
}

// baseName names the recorded settings for the text.
func (f *fixer) baseName(base memory.Config) string {
	if f.pytorch {
		if n := f.confName(base); n != "" {
			return "policy:pytorch with the recorded " + n
		}
		return "policy:pytorch with PyTorch's default settings"
	}
	return "VRAM_ALLOC_CONF=" + f.confName(base)
}

// envName is the variable a setting goes into.
func (f *fixer) envName() string {
	if f.pytorch {
		return "PYTORCH_CUDA_ALLOC_CONF"
	}
	return "VRAM_ALLOC_CONF"
}

// vramSource reports whether a snapshot's source is vram's own allocator
// ("vram", or "vram (...)" for a tool that says more).
func vramSource(source string) bool {
	return source == "vram" || strings.HasPrefix(source, "vram ")
}
