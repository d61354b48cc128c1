package analyze

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"

	"github.com/vramgo/vram/internal/units"
)

// Options tune [Analyze]. The zero value gives the defaults.
type Options struct {
	// Top is how many groups, allocations, timeline categories and
	// explained out-of-memory events to keep; 0 means 10.
	Top int
	// TimelinePoints is the most points of a timeline; 0 means 600.
	// Each point is the moment of highest allocated memory within its
	// stretch of the history, so peaks survive the thinning.
	TimelinePoints int
	// Limits bound what [File] reads of a snapshot, which it holds whole;
	// text traces are streamed from the file.
	Limits trace.Limits
	// Limit is the memory, in bytes, the allocator was allowed when the
	// history ran out of memory (PyTorch's set_per_process_memory_fraction
	// times the device's memory): the fix check of each out-of-memory
	// event replays under it. 0 takes it from the snapshot, or infers it
	// from the history and says how.
	Limit int64
	// ReplayEvents bounds the fix checks of one device: the events all
	// their replays may take together, each replay also counting one
	// event per 2 MiB of the limit it replays under; the devices of one
	// file share four times that, the later ones' fixes saying when it is
	// spent. 0 means [DefaultReplayEvents]; a negative value turns the
	// checks off.
	ReplayEvents int64
}

func (o Options) top() int {
	if o.Top <= 0 {
		return 10
	}
	return o.Top
}

func (o Options) points() int {
	if o.TimelinePoints <= 0 {
		return 600
	}
	return o.TimelinePoints
}

// Report is what [Analyze] finds in one file.
type Report struct {
	// File names the input.
	File string `json:"file"`
	// Format is the detected format: "json" (vram snapshot), "pickle"
	// (PyTorch snapshot), "pytorch-json" (PyTorch snapshot saved as JSON)
	// or "text" (text trace).
	Format string `json:"format"`
	// Devices holds one analysis per device in the file.
	Devices []*Device `json:"devices"`
}

// Device is the analysis of one device's allocator: its state at the
// snapshot (for snapshots) and its history.
type Device struct {
	// Device is the device index.
	Device int `json:"device"`
	// CapacityBytes is the device's memory, 0 if the file does not say.
	CapacityBytes int64 `json:"capacity_bytes,omitempty"`
	// Config is the allocator's settings string, if recorded: for a
	// PyTorch snapshot, its PYTORCH_CUDA_ALLOC_CONF, or the settings its
	// allocator_settings entries and that string give together where the
	// entries say otherwise (memory.Config.WithSnapshotSettings).
	Config string `json:"config,omitempty"`
	// NotModelled lists the recorded settings that vram accepts but does
	// not model (memory.Config.NotModelled): the replays of the fix check
	// run without their effect.
	NotModelled []string `json:"not_modelled,omitempty"`
	// Source is who wrote the file ("pytorch", "vram", ...), if recorded.
	Source string `json:"source,omitempty"`
	// HasState reports that the file holds the allocator's segments and
	// blocks (a snapshot), not only events (a text trace).
	HasState bool `json:"has_state"`
	// Segments and Blocks count the snapshot's segments and blocks.
	Segments int `json:"segments"`
	Blocks   int `json:"blocks"`
	// HistoryEvents is the number of events in the history.
	HistoryEvents int `json:"history_events"`
	// HistoryTruncated reports that the history does not start at the
	// allocator's creation, so the timeline starts from the blocks held
	// then rather than from zero.
	HistoryTruncated bool `json:"history_truncated"`
	// SettingsChanged reports a PyTorch snapshot that holds both fixed and
	// expandable segments: expandable_segments changed while the run went
	// on, which no one setting reproduces. The fix checks replay the
	// settings recorded last (Config).
	SettingsChanged bool `json:"settings_changed_mid_run,omitempty"`
	// Fragmentation describes the snapshot's memory (or, for a text
	// trace, the state at its end).
	Fragmentation Fragmentation `json:"fragmentation"`
	// ByRegion and ByStack group the live allocations by region label and
	// by the frame of the user's code that allocated them (see
	// [Group]), largest first, at most Options.Top each.
	ByRegion []Group `json:"by_region"`
	ByStack  []Group `json:"by_stack"`
	// ByRegionRest and ByStackRest sum the groups left out of ByRegion
	// and ByStack by Options.Top, so that the groups listed and the rest
	// add up to the live allocations.
	ByRegionRest Rest `json:"by_region_rest"`
	ByStackRest  Rest `json:"by_stack_rest"`
	// Largest are the largest live allocations, at most Options.Top.
	Largest []Allocation `json:"largest"`
	// OOMs explains the first Options.Top out-of-memory events of the
	// history; OOMEvents counts them all.
	OOMs      []OOM `json:"ooms"`
	OOMEvents int   `json:"oom_events"`
	// Timeline is allocated and reserved memory over the history.
	Timeline Timeline `json:"timeline"`
	// Samples are the periodic samples of a [Recorder] that wrote the
	// file, if any.
	Samples []Sample `json:"samples,omitempty"`
	// SamplesError says why the samples a Recorder stored could not be
	// read (Samples is then empty); "" when they were, or there are none.
	SamplesError string `json:"samples_error,omitempty"`
	// Advice lists concrete settings or changes suggested by the numbers.
	Advice []string `json:"advice,omitempty"`

	snap     *trace.Snapshot // nil for text traces
	stacked  [2]stackedTimeline
	replayed int64 // what the fix checks took of the replay budget
}

// Fragmentation describes how an allocator's reserved memory is used, in
// bytes. Reserved = Allocated + PendingFree + Inactive; Allocated =
// Requested + InternalBytes.
type Fragmentation struct {
	// ReservedBytes is what the allocator holds from the device.
	ReservedBytes int64 `json:"reserved_bytes"`
	// AllocatedBytes is held by callers, at the allocator's rounded sizes.
	AllocatedBytes int64 `json:"allocated_bytes"`
	// RequestedBytes is what callers asked for.
	RequestedBytes int64 `json:"requested_bytes"`
	// InternalBytes is waste inside held blocks, from rounding sizes up
	// and from splitting (AllocatedBytes - RequestedBytes).
	InternalBytes int64 `json:"internal_bytes"`
	// InternalFraction is InternalBytes / AllocatedBytes.
	InternalFraction float64 `json:"internal_fraction"`
	// ExternalBytes is reserved but not allocated: cached free blocks and
	// blocks waiting for a stream (ReservedBytes - AllocatedBytes).
	ExternalBytes int64 `json:"external_bytes"`
	// ExternalFraction is ExternalBytes / ReservedBytes.
	ExternalFraction float64 `json:"external_fraction"`
	// PendingFreeBytes is freed by callers but still in use by a stream.
	PendingFreeBytes int64 `json:"pending_free_bytes"`
	// FreeBlocks counts cached free (inactive) blocks.
	FreeBlocks int `json:"free_blocks"`
	// LargestFreeBlockBytes is the largest cached free block outside
	// private pools: the largest request the allocator can serve without
	// asking the device (a private pool's blocks serve only the CUDA
	// graph or MemPool that owns them).
	LargestFreeBlockBytes int64 `json:"largest_free_block_bytes"`
	// SplitFreeBytes is free memory that EmptyCache cannot return to the
	// device: in segments that also hold live blocks, except the pages
	// of expandable segments counted in ReleasableBytes.
	SplitFreeBytes int64 `json:"split_free_bytes"`
	// ReleasableBytes is free memory that EmptyCache would return to the
	// device: wholly free segments and, in PyTorch's expandable segments
	// (and vram's under policy:pytorch), the whole pages inside free
	// blocks (2 MiB in the small pool, 20 MiB in the large one, counted
	// from the segment's address), which PyTorch unmaps. Segments of
	// private pools are left out: torch.cuda.empty_cache keeps their free
	// memory for the CUDA graph or MemPool that owns them.
	ReleasableBytes int64 `json:"releasable_bytes"`
	// PrivatePoolBytes is the part of ReservedBytes in segments of
	// private pools ([trace.Segment.PrivatePool]: CUDA graphs' and
	// torch.cuda.MemPool's), which serve only their own pool's
	// allocations; PrivatePoolAllocatedBytes is the part of
	// AllocatedBytes held there.
	PrivatePoolBytes          int64 `json:"private_pool_bytes,omitempty"`
	PrivatePoolAllocatedBytes int64 `json:"private_pool_allocated_bytes,omitempty"`
}

// Group is the live memory allocated under one key (a region label, or a
// stack frame).
type Group struct {
	// Key is the region label, or the frame that allocated,
	// "function (file:line)": the innermost frame of the user's own code,
	// skipping C++ frames (PyTorch's stacks="all" records them), torch,
	// installed packages and the standard library; the innermost Python
	// frame when the stack has no frame of the user's code; for a stack
	// of C++ frames alone (what autograd's threads allocate in backward),
	// the autograd function ("AddmmBackward0 (autograd backward)"), else
	// the outermost ATen operator ("aten::mm"), else the innermost frame
	// that is not the allocator's or the thread's machinery. Blocks
	// without a stack go under "(no stack recorded)", or, in a PyTorch
	// snapshot whose history has stacks (stacks="python" records none
	// for a thread that runs no Python), under "(no Python frames: a
	// C++ thread, such as the autograd engine in backward)".
	Key   string `json:"key"`
	Bytes int64  `json:"bytes"` // rounded sizes of its live blocks
	Count int    `json:"count"` // live blocks
	// LargestBytes is its largest block.
	LargestBytes int64 `json:"largest_bytes"`
	// Frames is the whole stack of its largest block, innermost first,
	// for a group by stack; nil for a group by region.
	Frames []trace.Frame `json:"frames,omitempty"`
}

// Rest sums the groups that a list leaves out.
type Rest struct {
	Groups int   `json:"groups"` // groups left out
	Bytes  int64 `json:"bytes"`  // their live bytes, at rounded sizes
	Count  int   `json:"count"`  // their live blocks
}

// Allocation is one live block.
type Allocation struct {
	Address        uint64 `json:"address"`          // the block's first byte on the device
	SizeBytes      int64  `json:"size_bytes"`       // the block's size, rounded by the allocator
	RequestedBytes int64  `json:"requested_bytes"`  // what the caller asked for
	Stream         uint64 `json:"stream"`           // the stream of its segment
	Region         string `json:"region,omitempty"` // the region label, if any
	// Site is the frame of the user's code that allocated it, as
	// [Group.Key] names it; "" when no stack was recorded.
	Site   string        `json:"site,omitempty"`
	Frames []trace.Frame `json:"frames,omitempty"` // the whole stack, innermost first
}

// OOM explains one out-of-memory event of a history.
type OOM struct {
	// Event is the event's index in the history.
	Event int `json:"event"`
	// TimeUS is its time, 0 if unknown.
	TimeUS int64 `json:"time_us,omitempty"`
	// RequestedBytes is the allocation that failed.
	RequestedBytes int64 `json:"requested_bytes"`
	// DeviceFreeBytes is what the device had free at that moment.
	DeviceFreeBytes int64 `json:"device_free_bytes"`
	// AllocatedBytes and ReservedBytes are the allocator's, just before
	// (allocated counts requested sizes, as the history records them).
	AllocatedBytes int64 `json:"allocated_bytes"`
	ReservedBytes  int64 `json:"reserved_bytes"`
	// CachedBytes is reserved but not allocated at that moment.
	CachedBytes int64 `json:"cached_bytes"`
	// Region and Frames (the whole stack, innermost first) say what
	// asked, when recorded; Site is the frame of the user's code in
	// Frames, as [Group.Key] names it.
	Region string        `json:"region,omitempty"`
	Site   string        `json:"site,omitempty"`
	Frames []trace.Frame `json:"frames,omitempty"`
	// PrevSite is, when the event's stack holds no frame of Python or of
	// the user's code, the Site of the last allocation before it: most
	// likely the same code. Site is then what the C++ frames say (the
	// autograd function of an OOM in the backward pass), or "" when they
	// are the allocator's own (older versions of PyTorch recorded only
	// those for an OOM).
	PrevSite string `json:"prev_site,omitempty"`
	// Explanation says in words why it failed and what to try.
	Explanation string `json:"explanation"`
	// LimitBytes is the memory the allocator was allowed, as the fix
	// check replayed under it, and LimitHow says where it comes from:
	// given (Options.Limit), the snapshot's settings, or inferred from
	// the history; 0 and "" when no replay was made.
	LimitBytes int64  `json:"limit_bytes,omitempty"`
	LimitHow   string `json:"limit_how,omitempty"`
	// LimitMaxBytes is the most the limit can have been: LimitBytes when
	// the limit is known, more when it was inferred within a range.
	LimitMaxBytes int64 `json:"limit_max_bytes,omitempty"`
	// Fix is what the fix check found, in words: a setting under which
	// a replay of the history up to this allocation fits under the same
	// limit and at what peak, or how much memory is missing, or why
	// nothing was checked. See the package documentation, "# Fix checks".
	Fix string `json:"fix,omitempty"`
	// FixConfig is the setting of Fix that fits, as [FixTrial.Config]
	// spells it; "" when none does.
	FixConfig string `json:"fix_config,omitempty"`
	// MissingBytes is, when nothing fits, how much more memory than
	// LimitMaxBytes the run needs: the least limit (to
	// memory.FitResolution) under which a replay with the recorded
	// settings or one tried serves the request, less LimitMaxBytes. When
	// the limit was inferred as a range, the run lacked between
	// MissingBytes and that least limit less LimitBytes.
	MissingBytes int64 `json:"missing_bytes,omitempty"`
	// Trials are the settings replayed, in the order tried.
	Trials []FixTrial `json:"fix_trials,omitempty"`

	stream             uint64 // the request's stream
	peakReservedBefore int64  // the most reserved before the event
}

// Analyze analyzes every device of a file read by package trace. A text
// trace opened with [trace.OpenStream] is read from its file twice, in
// memory that grows with the blocks live at once rather than with its
// length. It fails when the history cannot be read, or when its sizes add
// up past what int64 holds (8 EiB: no device has that; the file is
// corrupt). A nil f is an error.
func Analyze(f *trace.File, opts Options) (*Report, error) {
	if f == nil {
		return nil, fmt.Errorf("analyze: nil file")
	}
	r := &Report{File: f.Name, Format: f.Kind.String()}
	switch f.Kind {
	case trace.KindText:
		d, err := analyzeEvents(f.History(), nil, opts)
		if err != nil {
			return nil, fmt.Errorf("analyze: %w", trace.InFile(f.Name, err))
		}
		r.Devices = append(r.Devices, d)
	case trace.KindJSON, trace.KindPickle, trace.KindPyTorchJSON:
		// The devices share maxFileReplays times the budget of one.
		per := opts.ReplayEvents
		if per == 0 {
			per = DefaultReplayEvents
		}
		left := int64(math.MaxInt64)
		if per <= math.MaxInt64/maxFileReplays {
			left = per * maxFileReplays
		}
		for _, s := range f.Snapshots {
			o := opts
			if per > 0 {
				o.ReplayEvents = max(min(per, left), 1) // 1: spent, the fixes say so
			}
			d, err := analyzeSnapshot(s, o)
			if err != nil {
				return nil, fmt.Errorf("analyze: %s: device %d: %w", f.Name, s.Device, err)
			}
			left -= d.replayed
			r.Devices = append(r.Devices, d)
		}
	default:
		return nil, fmt.Errorf("analyze: %s: unknown format", f.Name)
	}
	if len(r.Devices) == 0 {
		if f.Kind.PyTorch() {
			// PyTorch writes such a snapshot when its caching allocator
			// holds nothing: before any work on the GPU, after
			// empty_cache() with no history, or with
			// PYTORCH_NO_CUDA_MEMORY_CACHING=1, which bypasses it.
			return nil, fmt.Errorf("analyze: %s: the snapshot holds no device: PyTorch's caching allocator held no memory and recorded no history (was it taken before the work ran, after torch.cuda.empty_cache() with no history recording, or with PYTORCH_NO_CUDA_MEMORY_CACHING=1 set, which bypasses the caching allocator so that nothing is recorded? Call torch.cuda.memory._record_memory_history() before the work, without that variable)", f.Name)
		}
		return nil, fmt.Errorf("analyze: %s: the snapshot holds no device (no segments and no history)", f.Name)
	}
	for _, d := range r.Devices {
		emptyLists(d)
	}
	return r, nil
}

// emptyLists makes the lists of d that have nothing to list empty rather
// than nil, so that its JSON holds [] for them, never null.
func emptyLists(d *Device) {
	if d.ByRegion == nil {
		d.ByRegion = []Group{}
	}
	if d.ByStack == nil {
		d.ByStack = []Group{}
	}
	if d.Largest == nil {
		d.Largest = []Allocation{}
	}
	if d.OOMs == nil {
		d.OOMs = []OOM{}
	}
	if d.Timeline.Points == nil {
		d.Timeline.Points = []Point{}
	}
}

// File opens the file at path with [trace.Limits.OpenStream] (opts.Limits)
// and analyzes it: a text trace is streamed from the file, a snapshot read
// whole. Errors name the file.
func File(path string, opts Options) (*Report, error) {
	f, err := opts.Limits.OpenStream(path)
	if err != nil {
		return nil, err
	}
	return Analyze(f, opts)
}

// analyzeSnapshot analyzes one device's snapshot.
func analyzeSnapshot(s *trace.Snapshot, opts Options) (*Device, error) {
	d, err := analyzeEvents(trace.Events(s.History), s, opts)
	if err != nil {
		return nil, err
	}
	d.Device = s.Device
	d.CapacityBytes = s.Capacity
	d.Config, d.NotModelled = recordedConfig(s)
	d.Source = s.Meta[trace.MetaSource]
	d.HasState = true
	d.Segments = len(s.Segments)
	for _, seg := range s.Segments {
		d.Blocks += len(seg.Blocks)
	}
	d.Fragmentation = fragmentation(s)
	d.ByRegion, d.ByRegionRest, d.ByStack, d.ByStackRest, d.Largest = liveGroups(s, opts.top())
	if d.Samples, err = readSamples(s.Meta); err != nil {
		d.Samples, d.SamplesError = nil, err.Error()
	}
	d.Advice = advice(d)
	return d, nil
}

// recordedConfig returns the allocator settings string Device.Config
// reports for the snapshot s: s.Config, or, for a PyTorch snapshot whose
// allocator_settings entries say otherwise than that string (PyTorch
// records the last string it was given, which leaves out settings made in
// code with torch.cuda.memory._set_allocator_settings or kept from an
// earlier string), the settings the entries and the string give together
// (memory.Config.WithSnapshotSettings), in PYTORCH_CUDA_ALLOC_CONF syntax;
// and the settings among them that vram does not model. Settings that vram
// cannot read are reported as recorded.
func recordedConfig(s *trace.Snapshot) (string, []string) {
	if vramSource(s.Meta[trace.MetaSource]) {
		c, err := memory.ParseConfig(s.Config)
		if err != nil {
			return s.Config, nil
		}
		return s.Config, c.NotModelled()
	}
	start := memory.Config{Policy: memory.PolicyPyTorch}
	str, err := start.With(s.Config)
	if err != nil {
		return s.Config, nil
	}
	all, err := start.WithSnapshotSettings(s)
	if err != nil {
		return s.Config, str.NotModelled()
	}
	if all == str {
		return s.Config, all.NotModelled()
	}
	all.Policy = memory.PolicyVRAM // String leaves the default policy out
	return all.String(), all.NotModelled()
}

// analyzeEvents analyzes a history; s, when not nil, is the snapshot it
// ends in.
func analyzeEvents(h trace.History, s *trace.Snapshot, opts Options) (*Device, error) {
	d := &Device{snap: s}
	if s != nil {
		d.Source = s.Meta[trace.MetaSource]
		d.Config, d.NotModelled = recordedConfig(s)
		d.SettingsChanged = !vramSource(d.Source) && s.MixedSegments()
	}
	if err := buildTimeline(d, h, s, opts); err != nil {
		return nil, err
	}
	if err := checkFixes(d, h, s, opts); err != nil {
		return nil, err
	}
	if s == nil {
		d.Fragmentation = Fragmentation{ReservedBytes: d.Timeline.EndReservedBytes, AllocatedBytes: d.Timeline.EndAllocatedBytes,
			RequestedBytes: d.Timeline.EndAllocatedBytes}
		d.Fragmentation.ExternalBytes = max(0, d.Fragmentation.ReservedBytes-d.Fragmentation.AllocatedBytes)
		if d.Fragmentation.ReservedBytes > 0 {
			d.Fragmentation.ExternalFraction = float64(d.Fragmentation.ExternalBytes) / float64(d.Fragmentation.ReservedBytes)
		}
		d.Advice = advice(d)
	}
	return d, nil
}

// fragmentation measures a snapshot's reserved memory.
func fragmentation(s *trace.Snapshot) Fragmentation {
	var f Fragmentation
	for _, seg := range s.Segments {
		f.ReservedBytes += seg.Size
		page := expandablePage(s, seg)
		var live, free, pages int64
		for _, b := range seg.Blocks {
			switch b.State {
			case trace.StateActiveAllocated:
				f.AllocatedBytes += b.Size
				f.RequestedBytes += b.Requested
				live += b.Size
				if seg.PrivatePool != [2]uint64{} {
					f.PrivatePoolAllocatedBytes += b.Size
				}
			case trace.StateActivePendingFree:
				f.PendingFreeBytes += b.Size
				live += b.Size
			default:
				f.FreeBlocks++
				free += b.Size
				if seg.PrivatePool == [2]uint64{} {
					f.LargestFreeBlockBytes = max(f.LargestFreeBlockBytes, b.Size)
				}
				if page > 0 {
					pages += wholePages(b.Addr-seg.Addr, b.Size, page)
				}
			}
		}
		private := seg.PrivatePool != [2]uint64{}
		if private {
			f.PrivatePoolBytes += seg.Size
			pages = 0
		}
		switch {
		case live > 0:
			f.SplitFreeBytes += free - pages
			f.ReleasableBytes += pages
		case !private:
			f.ReleasableBytes += free
		}
	}
	f.InternalBytes = f.AllocatedBytes - f.RequestedBytes
	f.ExternalBytes = f.ReservedBytes - f.AllocatedBytes
	if f.AllocatedBytes > 0 {
		f.InternalFraction = float64(f.InternalBytes) / float64(f.AllocatedBytes)
	}
	if f.ReservedBytes > 0 {
		f.ExternalFraction = float64(f.ExternalBytes) / float64(f.ReservedBytes)
	}
	return f
}

// expandablePage returns the unit in which EmptyCache unmaps the free
// memory of seg, an expandable segment of PyTorch's (or of vram's under
// policy:pytorch, which follows it): the pool's segment size, kSmallBuffer
// or kLargeBuffer. It returns 0 for other segments, which are released
// whole, and for vram's own policy, whose mappings the snapshot does not
// record.
func expandablePage(s *trace.Snapshot, seg trace.Segment) int64 {
	if !seg.Expandable || s.Meta[trace.MetaSource] != "pytorch" && s.Meta["vram.policy"] != "pytorch+expandable_segments" {
		return 0
	}
	if seg.Pool == trace.PoolSmall {
		return 2 << 20
	}
	return 20 << 20
}

// wholePages returns the bytes of the pages of size page, counted from
// offset 0, that lie wholly inside [off, off+size).
func wholePages(off uint64, size, page int64) int64 {
	p := uint64(page)
	lo := off + (p-off%p)%p            // the first page boundary at or after off
	hi := (off + uint64(size)) / p * p // the last one at or before the end
	if hi <= lo {
		return 0
	}
	return int64(hi - lo)
}

// expandable reports whether any of s's segments is expandable.
func expandable(s *trace.Snapshot) bool {
	for _, seg := range s.Segments {
		if seg.Expandable {
			return true
		}
	}
	return false
}

// liveGroups groups a snapshot's allocated blocks by region and by top
// frame, keeping the top largest groups of each and summing the rest, and
// lists the largest allocations.
func liveGroups(s *trace.Snapshot, top int) (byRegion []Group, regionRest Rest, byStack []Group, stackRest Rest, largest []Allocation) {
	regions := map[string]*Group{}
	stacks := map[string]*Group{}
	memo := newStackMemo(s)
	add := func(m map[string]*Group, key string, b trace.Block, frames []trace.Frame) {
		g := m[key]
		if g == nil {
			g = &Group{Key: key}
			m[key] = g
		}
		g.Bytes += b.Size
		g.Count++
		if b.Size > g.LargestBytes || g.Count == 1 {
			g.LargestBytes = b.Size
			g.Frames = frames
		}
	}
	for _, seg := range s.Segments {
		for _, b := range seg.Blocks {
			if b.State != trace.StateActiveAllocated {
				continue
			}
			add(regions, regionKey(b.Region), b, nil)
			site := memo.blockKey(b)
			add(stacks, site, b, b.Frames)
			if len(b.Frames) == 0 {
				site = ""
			}
			largest = append(largest, Allocation{Address: b.Addr, SizeBytes: b.Size, RequestedBytes: b.Requested,
				Stream: seg.Stream, Region: b.Region, Site: site, Frames: b.Frames})
		}
	}
	sort.SliceStable(largest, func(i, j int) bool {
		if largest[i].SizeBytes != largest[j].SizeBytes {
			return largest[i].SizeBytes > largest[j].SizeBytes
		}
		return largest[i].Address < largest[j].Address
	})
	if len(largest) > top {
		largest = largest[:top]
	}
	for i := range largest {
		largest[i].Region = clipText(largest[i].Region, maxFrameScan)
		largest[i].Frames = boundFrames(largest[i].Frames)
	}
	byRegion, regionRest = sortGroups(regions, top)
	byStack, stackRest = sortGroups(stacks, top)
	for i := range byStack {
		byStack[i].Frames = boundFrames(byStack[i].Frames)
	}
	return byRegion, regionRest, byStack, stackRest, largest
}

// sortGroups returns the top largest groups of m, largest first (ties by
// key), and the sum of the others.
func sortGroups(m map[string]*Group, top int) ([]Group, Rest) {
	gs := make([]Group, 0, len(m))
	for _, g := range m {
		gs = append(gs, *g)
	}
	sort.Slice(gs, func(i, j int) bool {
		if gs[i].Bytes != gs[j].Bytes {
			return gs[i].Bytes > gs[j].Bytes
		}
		return gs[i].Key < gs[j].Key
	})
	var rest Rest
	if len(gs) > top {
		for _, g := range gs[top:] {
			rest.Groups++
			rest.Bytes += g.Bytes
			rest.Count += g.Count
		}
		gs = gs[:top]
	}
	return gs, rest
}

// Keys of allocations without a label. noPythonFrames is the key of an
// allocation without frames in a snapshot whose history has them: under
// _record_memory_history(stacks="python") PyTorch records no frame for a
// thread that runs no Python, such as autograd's engine in backward.
const (
	noRegion       = "(no region)"
	noStack        = "(no stack recorded)"
	noPythonFrames = "(no Python frames: a C++ thread, such as the autograd engine in backward)"
	// noStackUnrecorded is the key of a block without frames in such a
	// snapshot that its history does not show allocated: made before the
	// history's window, or while _record_memory_history(enabled=None) had
	// stopped it, it may have had a stack all the same.
	noStackUnrecorded = "(no stack: allocated while the history was not recording, or by a C++ thread)"
)

func regionKey(r string) string {
	if r == "" {
		return noRegion
	}
	return clipText(r, maxFrameText)
}

// stackKey names the frame that best says who allocated (userFrame), or
// noStack.
func stackKey(frames []trace.Frame) string {
	if len(frames) == 0 {
		return noStack
	}
	return siteString(frames)
}

// frameString formats a frame as "function (file:line)", with the file's
// last two path elements and, for C++, the function's name without its
// parameters; a missing name reads "??", and a missing file or line is
// left out. Names and files longer than maxFrameText are cut.
func frameString(f trace.Frame) string {
	f = boundFrame(f)
	if classifyFrame(f) == frameNative {
		f.Function = shortFunction(f.Function)
	}
	if f.Function == "" {
		// A frame recorded without its name (a stripped binary, a
		// hand-made snapshot) reads as PyTorch's symbolizer writes it.
		f.Function = "??"
	}
	f.Function = clipText(f.Function, maxFrameText)
	file := clipText(lastTwo(f.File), maxFrameText)
	switch {
	case file == "" || file == "??":
		return f.Function
	case f.Line > 0:
		return fmt.Sprintf("%s (%s:%d)", f.Function, file, f.Line)
	}
	return fmt.Sprintf("%s (%s)", f.Function, file)
}

// lastTwo returns the last two elements of a path, separated by '/' or,
// in a Windows path, by '\\'.
func lastTwo(file string) string {
	sep := "/"
	if windowsPath(file) {
		sep = `/\`
	}
	i := strings.LastIndexAny(file, sep)
	if i <= 0 {
		return file
	}
	if j := strings.LastIndexAny(file[:i], sep); j >= 0 {
		return file[j+1:]
	}
	return file
}

// advice suggests settings from a device's numbers.
func advice(d *Device) []string {
	var out []string
	f := d.Fragmentation
	const gib = 1 << 30
	if f.ReservedBytes > 0 && f.ExternalFraction > 0.25 && f.ExternalBytes > 256<<20 {
		switch {
		case f.SplitFreeBytes <= f.ReleasableBytes:
		case d.snap != nil && expandable(d.snap):
			// max_split_size_mb does not apply to expandable segments.
			out = append(out, fmt.Sprintf("%s (%.0f%%) of the reserved memory is free but split among live blocks, the largest free piece %s, although the segments are already expandable: no allocator setting joins it; freeing the tensors between the pieces earlier does",
				units.Compact(f.SplitFreeBytes), 100*float64(f.SplitFreeBytes)/float64(f.ReservedBytes), units.Compact(f.LargestFreeBlockBytes)))
		default:
			out = append(out, fmt.Sprintf("%s (%.0f%%) of the reserved memory is free but split among live blocks, the largest free piece %s: expandable_segments:True in VRAM_ALLOC_CONF (PYTORCH_CUDA_ALLOC_CONF) lets segments grow instead, and max_split_size_mb keeps large cached blocks from being split",
				units.Compact(f.SplitFreeBytes), 100*float64(f.SplitFreeBytes)/float64(f.ReservedBytes), units.Compact(f.LargestFreeBlockBytes)))
		}
		if f.ReleasableBytes > 256<<20 {
			out = append(out, fmt.Sprintf("%s sits in wholly free segments or free pages of expandable ones: EmptyCache (torch.cuda.empty_cache) would return it to the device for other processes", units.Compact(f.ReleasableBytes)))
		}
	}
	if f.AllocatedBytes > gib/4 && f.InternalFraction > 0.1 {
		out = append(out, fmt.Sprintf("rounding wastes %s (%.0f%% of allocated): many requests just above a rounding step; roundup_power2_divisions or sizes in multiples of 2 MiB help",
			units.Compact(f.InternalBytes), 100*f.InternalFraction))
	}
	if d.OOMEvents > 0 {
		out = append(out, "see the explanation of each out-of-memory event below")
	}
	return out
}
