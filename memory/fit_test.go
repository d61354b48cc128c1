package memory

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

// TestSmallestCapacity checks the bisection on recorded and synthetic
// traces under each policy: the trace fits on the capacity found, not on
// FitResolution less, and the capacity lies between the peak allocated
// and the peak reserved of a replay on a large device.
func TestSmallestCapacity(t *testing.T) {
	for _, name := range []string{"resnet50_train.trace.gz", "synth_resnet50_infer_varbatch.trace.gz"} {
		ev := loadTrace(t, name)
		for _, conf := range []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", "policy:vram"} {
			t.Run(name+"/"+conf, func(t *testing.T) {
				cfg, err := ParseConfig(conf)
				if err != nil {
					t.Fatal(err)
				}
				run := func(c int64) (Result, error) { return Replay(ev, NewSimArena(c), cfg) }
				free, err := run(80 << 30)
				if err != nil {
					t.Fatal(err)
				}
				fit, err := SmallestCapacity(run, free, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("smallest %d (peak allocated %d, reserved %d), %d replays", fit.Capacity, free.PeakAllocated, free.PeakReserved, fit.Replays)
				if fit.Capacity < free.PeakAllocated || fit.Capacity > alignUp(free.PeakReserved, FitResolution) || fit.Capacity%FitResolution != 0 {
					t.Fatalf("capacity %d outside [%d, %d] or not a multiple of %d", fit.Capacity, free.PeakAllocated, free.PeakReserved, FitResolution)
				}
				if fit.Replays > maxFitReplays {
					t.Errorf("%d replays, more than %d", fit.Replays, maxFitReplays)
				}
				if fit.Result.NumOOMs != 0 {
					t.Errorf("result on the capacity found has %d OOMs", fit.Result.NumOOMs)
				}
				if r, _ := run(fit.Capacity); r.NumOOMs != 0 {
					t.Errorf("the trace does not fit on the capacity found: %+v", r)
				}
				if r, _ := run(fit.Capacity - FitResolution); r.NumOOMs == 0 {
					t.Errorf("the trace fits on %d, less than the capacity found", fit.Capacity-FitResolution)
				}
			})
		}
	}
}

func TestSmallestCapacityLimit(t *testing.T) {
	ev := []trace.Event{{Action: trace.ActionAlloc, Addr: 1, Size: 100 << 20}}
	run := func(c int64) (Result, error) { return Replay(ev, NewSimArena(c), Config{Policy: PolicyPyTorch}) }
	free, _ := run(1 << 30)
	fit, err := SmallestCapacity(run, free, 50<<20)
	if err != nil || fit.Capacity != 0 {
		t.Fatalf("a trace larger than the limit: %+v, %v; want capacity 0", fit, err)
	}
	if _, err := SmallestCapacity(run, Result{NumOOMs: 1}, 0); err == nil {
		t.Fatal("a reference replay with OOMs must be refused")
	}
	fit, err = SmallestCapacity(run, free, 0)
	if err != nil || fit.Capacity != 100<<20 {
		t.Fatalf("one 100 MiB request: %+v, %v", fit, err)
	}
}

func TestReadRecorded(t *testing.T) {
	const M = 1 << 20
	e := func(a trace.Action, addr uint64, size int64) trace.Event {
		return trace.Event{Action: a, Addr: addr, Size: size}
	}
	tests := []struct {
		name string
		ev   []trace.Event
		want Recorded
	}{
		{"no segment events", []trace.Event{e(trace.ActionAlloc, 1, 10)}, Recorded{}},
		{"frees at the end only", []trace.Event{
			e(trace.ActionSegmentAlloc, 1, 20*M), e(trace.ActionAlloc, 1, M), e(trace.ActionSegmentAlloc, 2, 20*M),
			e(trace.ActionSegmentFree, 1, 20*M), e(trace.ActionSegmentFree, 2, 20*M),
		}, Recorded{SegmentAllocs: 2, SegmentFrees: 2, PeakReserved: 40 * M}},
		{"room made for a new segment, then empty_cache", []trace.Event{
			e(trace.ActionSegmentAlloc, 1, 20*M), e(trace.ActionSegmentAlloc, 2, 20*M), e(trace.ActionAlloc, 1, M),
			e(trace.ActionSegmentFree, 2, 20*M), e(trace.ActionSegmentAlloc, 3, 30*M), e(trace.ActionAlloc, 3, 30*M),
			e(trace.ActionSegmentFree, 3, 30*M), e(trace.ActionAlloc, 4, M),
		}, Recorded{SegmentAllocs: 3, SegmentFrees: 2, MidRunFrees: 2, RoomBursts: 1, OtherBursts: 1, PeakReserved: 50 * M}},
		{"expandable, an OOM", []trace.Event{
			e(trace.ActionSegmentMap, 1, 20*M), e(trace.ActionAlloc, 1, M), e(trace.ActionSegmentUnmap, 1, 20*M),
			e(trace.ActionOOM, 0, 40*M), e(trace.ActionAlloc, 2, M),
		}, Recorded{Maps: 1, Unmaps: 1, MidRunFrees: 1, RoomBursts: 1, OOMs: 1, PeakReserved: 20 * M, Expandable: true}},
		// torch.cuda.graph empties the cache before its capture takes
		// a segment of its own; garbage_collection_threshold frees
		// cached blocks before a new segment too: both while the run
		// held less than it did at its peak, which a cap allowed.
		{"frees before a new segment, below the peak reserve", []trace.Event{
			e(trace.ActionSegmentAlloc, 1, 20*M), e(trace.ActionSegmentAlloc, 2, 20*M), e(trace.ActionAlloc, 1, M),
			e(trace.ActionSegmentFree, 2, 20*M), e(trace.ActionSegmentAlloc, 3, 2*M), e(trace.ActionAlloc, 3, M),
			e(trace.ActionSegmentAlloc, 4, 40*M), e(trace.ActionAlloc, 4, 40*M),
		}, Recorded{SegmentAllocs: 4, SegmentFrees: 1, MidRunFrees: 1, OtherBursts: 1, PeakReserved: 62 * M}},
		{"frees before a new segment, the reserve reaching as much later", []trace.Event{
			e(trace.ActionSegmentAlloc, 1, 20*M), e(trace.ActionSegmentAlloc, 2, 20*M), e(trace.ActionAlloc, 1, M),
			e(trace.ActionSegmentFree, 2, 20*M), e(trace.ActionSegmentAlloc, 3, 2*M), e(trace.ActionAlloc, 3, M),
			e(trace.ActionSegmentAlloc, 4, 20*M), e(trace.ActionAlloc, 4, 20*M),
		}, Recorded{SegmentAllocs: 4, SegmentFrees: 1, MidRunFrees: 1, OtherBursts: 1, PeakReserved: 42 * M}},
		// One growth of an expandable segment, mapped in pieces.
		{"frees before a growth in pieces", []trace.Event{
			e(trace.ActionSegmentMap, 1, 50*M), e(trace.ActionAlloc, 1, 40*M), e(trace.ActionSegmentUnmap, 1, 10*M),
			e(trace.ActionAlloc, 2, M), e(trace.ActionSegmentUnmap, 1, 5*M), e(trace.ActionSegmentMap, 1, 5*M),
			e(trace.ActionSegmentMap, 1, 20*M), e(trace.ActionAlloc, 3, 20*M),
		}, Recorded{Maps: 3, Unmaps: 2, MidRunFrees: 2, RoomBursts: 1, OtherBursts: 1, PeakReserved: 60 * M, Expandable: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadRecorded(trace.Events(tt.ev))
			if err != nil || got != tt.want {
				t.Fatalf("ReadRecorded = %+v, %v\nwant %+v", got, err, tt.want)
			}
		})
	}
}

// TestRecordedCapReproduced records a run of the ResNet-50 trace under a
// cap with the PyTorch policy (the allocator's own history, as PyTorch's
// would be), and checks that ReadRecorded sees the frees that made room and
// that a replay on the recorded peak reserve reproduces every segment
// allocation and free.
func TestRecordedCapReproduced(t *testing.T) {
	ev := loadTrace(t, "resnet50_train.trace.gz")
	for _, tt := range []struct {
		conf string
		cap  int64
	}{{"policy:pytorch", 5900 << 20}, {"policy:pytorch,expandable_segments:True", 5650 << 20}} {
		t.Run(tt.conf, func(t *testing.T) {
			cfg, _ := ParseConfig(tt.conf)
			r := newReplayer(NewSimArena(tt.cap), cfg)
			r.al.SetHistory(true, 1<<20, false)
			if _, err := r.run(trace.Events(ev), trace.ActionFreeCompleted); err != nil {
				t.Fatal(err)
			}
			recorded := r.al.Snapshot().History
			rec, err := ReadRecorded(trace.Events(recorded))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", rec)
			if rec.MidRunFrees == 0 || rec.RoomBursts == 0 || rec.OtherBursts != 0 || rec.Expandable != cfg.ExpandableSegments {
				t.Fatalf("a capped run should show frees that made room: %+v", rec)
			}
			got, err := Replay(recorded, NewSimArena(rec.PeakReserved), cfg)
			if err != nil {
				t.Fatal(err)
			}
			// The history leaves out mappings undone when a growth failed
			// half way (PyTorch's does too), which the counts include.
			want := r.result()
			if got.DeviceAllocs != want.DeviceAllocs || got.DeviceFrees != want.DeviceFrees || got.PeakReserved != rec.PeakReserved ||
				got.DeviceAllocs < rec.SegmentAllocs+rec.Maps || got.DeviceFrees < rec.SegmentFrees+rec.Unmaps {
				t.Errorf("replay on %d: %d allocs, %d frees, peak %d; recorded run %d, %d, %d (history: %d, %d)", rec.PeakReserved,
					got.DeviceAllocs, got.DeviceFrees, got.PeakReserved, want.DeviceAllocs, want.DeviceFrees, rec.PeakReserved,
					rec.SegmentAllocs+rec.Maps, rec.SegmentFrees+rec.Unmaps)
			}
		})
	}
}

// TestVRAMPeakResetByEmptyCache checks that policy:vram's slack follows
// the peak allocation since the last EmptyCache, not since New: after
// EmptyCache a smaller workload is held to a budget of its own size.
func TestVRAMPeakResetByEmptyCache(t *testing.T) {
	a := New(NewSimArena(4<<30), Config{})
	b, err := a.Alloc(1<<30, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	a.Free(b)
	if a.peakAlloc != 1<<30 {
		t.Fatalf("peak allocation %d, want 1 GiB", a.peakAlloc)
	}
	a.EmptyCache()
	if a.peakAlloc != 0 || a.highWater != 0 {
		t.Fatalf("after EmptyCache: peak %d, high-water mark %d; want 0", a.peakAlloc, a.highWater)
	}
	b, err = a.Alloc(100<<20, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if a.peakAlloc != 100<<20 {
		t.Fatalf("peak allocation %d after EmptyCache and 100 MiB, want 100 MiB", a.peakAlloc)
	}
	a.Free(b)
}

// TestWithFailedRequests checks that the request of an oom event is
// replayed, alloc then free, on both free actions, and that a history
// without one replays as before.
func TestWithFailedRequests(t *testing.T) {
	base := []trace.Event{
		{Action: trace.ActionAlloc, Addr: 0x1000, Size: 300 << 20},
		{Action: trace.ActionOOM, Addr: 100 << 20, Size: 500 << 20},
		{Action: trace.ActionOOM, Addr: 100 << 20}, // no size: nothing to replay
	}
	for _, tc := range []struct {
		name string
		free trace.Action
	}{
		{"free_completed", trace.ActionFreeCompleted},
		{"free_requested", trace.ActionFreeRequested},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := append(slices.Clone(base), trace.Event{Action: tc.free, Addr: 0x1000, Size: 300 << 20})
			h, err := WithFailedRequests(trace.Events(events))
			if err != nil {
				t.Fatal(err)
			}
			var got []trace.Event
			h.Each(func(e *trace.Event) error { got = append(got, *e); return nil })
			if len(got) != len(events)+2 || got[2].Action != trace.ActionAlloc || got[2].Size != 500<<20 || got[3].Action != tc.free || got[3].Addr != got[2].Addr {
				t.Fatalf("history %+v", got)
			}
			cfg := Config{Policy: PolicyPyTorch}
			without, err := Replay(events, NewSimArena(1<<40), cfg)
			if err != nil {
				t.Fatal(err)
			}
			with, err := ReplayHistory(h, NewSimArena(1<<40), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if without.PeakRequested != 300<<20 || with.PeakRequested != 800<<20 || with.UnmatchedFrees != 0 {
				t.Errorf("peak requested %d without the failed request, %d with (unmatched frees %d)", without.PeakRequested, with.PeakRequested, with.UnmatchedFrees)
			}
			s := SnapshotWithFailedRequests(&trace.Snapshot{History: events})
			if len(s.History) != len(got) {
				t.Errorf("snapshot history has %d events, want %d", len(s.History), len(got))
			}
		})
	}
}

// TestSmallestCapacityBounds checks the search with a limit that is not a
// multiple of FitResolution (it stops at the largest multiple below, after
// one replay there, rather than replaying it up to maxFitReplays times) and
// with a reference result whose peaks are beyond any device (no overflow
// into a negative capacity).
func TestSmallestCapacityBounds(t *testing.T) {
	replayOf := func(size int64) func(int64) (Result, error) {
		evs := []trace.Event{{Action: trace.ActionAlloc, Addr: 1, Size: size}}
		return func(c int64) (Result, error) {
			if c < 0 {
				return Result{}, fmt.Errorf("replay on a negative capacity %d", c)
			}
			return Replay(evs, NewSimArena(min(c, MaxSimCapacity)), Config{})
		}
	}
	tests := []struct {
		name       string
		size       int64 // the trace's one request
		free       *Result
		limit      int64
		wantCap    int64 // -1: any (the search stops at maxFitReplays)
		maxReplays int
	}{
		{"limit of 1 byte", 1 << 20, nil, 1, 0, 1},
		{"limit below FitResolution", 1 << 20, nil, FitResolution - 1, 0, 1},
		{"limit of FitResolution", 1 << 20, nil, FitResolution, FitResolution, 1},
		{"limit off a multiple, too small", 200 << 20, nil, 101<<20 + 1, 0, 2},
		{"limit off a multiple, large enough", 100 << 20, nil, 101<<20 + 1, 100 << 20, 2},
		{"limit off a multiple above the bisection's floor", 200 << 20, &Result{PeakAllocated: 1 << 20, PeakReserved: 300 << 20}, 101<<20 + 1, 0, 1},
		{"reference peaks at MaxInt64", 100 << 20, &Result{PeakAllocated: math.MaxInt64, PeakReserved: math.MaxInt64}, 0, -1, maxFitReplays},
		{"reference peak near MaxInt64", 100 << 20, &Result{PeakAllocated: 1 << 20, PeakReserved: math.MaxInt64 - FitResolution/2}, 0, -1, maxFitReplays},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			replay := replayOf(tc.size)
			var free Result
			if tc.free != nil {
				free = *tc.free
			} else {
				var err error
				if free, err = replay(1 << 30); err != nil {
					t.Fatal(err)
				}
			}
			var f Fit
			var err error
			if msg := panicMessage(func() { f, err = SmallestCapacity(replay, free, tc.limit) }); msg != "" {
				t.Fatalf("panicked: %s", msg)
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantCap >= 0 && f.Capacity != tc.wantCap {
				t.Errorf("capacity %d, want %d", f.Capacity, tc.wantCap)
			}
			if f.Capacity < 0 || f.Capacity%FitResolution != 0 {
				t.Errorf("capacity %d: negative or not a multiple of FitResolution", f.Capacity)
			}
			if f.Replays > tc.maxReplays {
				t.Errorf("%d replays, want at most %d", f.Replays, tc.maxReplays)
			}
		})
	}
}

// TestWithFailedRequestsAddresses checks that a failed request replayed
// by WithFailedRequests takes an address no block of the history holds at
// that point: it took the highest address, then the next one down, and a
// history holding a block there (a text trace may) lost that block, as a
// replay frees the block at an address allocated again, so that --fit
// under-counted the memory the run needed.
func TestWithFailedRequestsAddresses(t *testing.T) {
	const top = math.MaxUint64
	events := []trace.Event{
		{Action: trace.ActionAlloc, Addr: top, Size: 300 << 20},
		{Action: trace.ActionAlloc, Addr: top - 1, Size: 100 << 20},
		{Action: trace.ActionOOM, Addr: 100 << 20, Size: 500 << 20},
		{Action: trace.ActionOOM, Addr: 100 << 20, Size: 600 << 20},
		{Action: trace.ActionFreeCompleted, Addr: top, Size: 300 << 20},
		{Action: trace.ActionFreeCompleted, Addr: top - 1, Size: 100 << 20},
	}
	h, err := WithFailedRequests(trace.Events(events))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Policy: PolicyPyTorch}
	with, err := ReplayHistory(h, NewSimArena(1<<40), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if with.PeakRequested != 1000<<20 || with.UnmatchedFrees != 0 {
		t.Errorf("peak requested %d MiB, want 1000 MiB (400 held and the 600 that failed), unmatched frees %d", with.PeakRequested>>20, with.UnmatchedFrees)
	}
	s := SnapshotWithFailedRequests(&trace.Snapshot{History: events})
	snap, err := Replay(s.History, NewSimArena(1<<40), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if snap.PeakRequested != with.PeakRequested || snap.UnmatchedFrees != 0 {
		t.Errorf("snapshot: peak requested %d MiB, unmatched frees %d; the history gave %d MiB", snap.PeakRequested>>20, snap.UnmatchedFrees, with.PeakRequested>>20)
	}
}
