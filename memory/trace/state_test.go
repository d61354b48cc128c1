package trace

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestStartsEmpty(t *testing.T) {
	const a, b = 1 << 20, 4 << 20
	seg := []Segment{{Addr: a, Size: 2 << 20}}
	tests := []struct {
		name     string
		history  []Event
		segments []Segment
		want     bool
	}{
		{"nothing", nil, nil, true},
		{"segments without history", nil, seg, false},
		{"blocks only", []Event{{Action: ActionAlloc, Addr: a, Size: 1}, {Action: ActionFreeRequested, Addr: a}, {Action: ActionFreeCompleted, Addr: a}}, nil, true},
		{"free of unknown", []Event{{Action: ActionFreeCompleted, Addr: a}}, nil, false},
		{"free_requested twice", []Event{{Action: ActionAlloc, Addr: a}, {Action: ActionFreeRequested, Addr: a}, {Action: ActionFreeRequested, Addr: a}}, nil, false},
		{"double alloc", []Event{{Action: ActionAlloc, Addr: a}, {Action: ActionAlloc, Addr: a}}, nil, false},
		{"complete", []Event{{Action: ActionSegmentAlloc, Addr: a, Size: 2 << 20}, {Action: ActionAlloc, Addr: a + 512, Size: 100}}, seg, true},
		{"alloc outside segments", []Event{{Action: ActionSegmentAlloc, Addr: a, Size: 2 << 20}, {Action: ActionAlloc, Addr: b, Size: 100}}, seg, false},
		{"segment not in history", []Event{{Action: ActionSegmentAlloc, Addr: b, Size: 2 << 20}}, seg, false},
		{"segment freed in history", []Event{{Action: ActionSegmentAlloc, Addr: a, Size: 2 << 20}, {Action: ActionSegmentFree, Addr: a, Size: 2 << 20}}, seg, false},
		{"free of unknown segment", []Event{{Action: ActionSegmentFree, Addr: a, Size: 2 << 20}}, nil, false},
		{"overlapping segments", []Event{{Action: ActionSegmentAlloc, Addr: a, Size: 2 << 20}, {Action: ActionSegmentAlloc, Addr: a + 4096, Size: 2 << 20}}, nil, false},
		{"expandable grows and shrinks", []Event{
			{Action: ActionSegmentMap, Addr: a, Size: 2 << 20},
			{Action: ActionSegmentMap, Addr: a + 2<<20, Size: 2 << 20},
			{Action: ActionAlloc, Addr: a + 1<<20, Size: 2 << 20}, // spans both mappings
			{Action: ActionSegmentUnmap, Addr: a + 3<<20, Size: 1 << 20},
		}, []Segment{{Addr: a, Size: 3 << 20}}, true},
		{"unmap of unmapped", []Event{{Action: ActionSegmentMap, Addr: a, Size: 2 << 20}, {Action: ActionSegmentUnmap, Addr: a + 1<<20, Size: 2 << 20}}, nil, false},
		{"oom and snapshot ignored", []Event{{Action: ActionOOM, Addr: 5, Size: 1 << 40}, {Action: ActionSnapshot}}, nil, true},
		{"alloc before the first segment", []Event{{Action: ActionAlloc, Addr: a, Size: 1}, {Action: ActionSegmentAlloc, Addr: a, Size: 2 << 20}}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := StartsEmpty(tc.history, tc.segments); got != tc.want {
				t.Errorf("StartsEmpty = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIntervals(t *testing.T) {
	var s intervals
	steps := []struct {
		add      bool
		lo, size int64
		ok       bool
		want     intervals
	}{
		{true, 100, 10, true, intervals{{100, 110}}},
		{true, 120, 10, true, intervals{{100, 110}, {120, 130}}},
		{true, 110, 10, true, intervals{{100, 130}}},
		{true, 90, 10, true, intervals{{90, 130}}},
		{true, 129, 5, false, intervals{{90, 130}}},
		{true, 50, 41, false, intervals{{90, 130}}},
		{true, 10, 10, true, intervals{{10, 20}, {90, 130}}},
		{true, 20, 70, true, intervals{{10, 130}}},
		{false, 40, 10, true, intervals{{10, 40}, {50, 130}}},
		{false, 10, 30, true, intervals{{50, 130}}},
		{false, 120, 10, true, intervals{{50, 120}}},
		{false, 45, 10, false, intervals{{50, 120}}},
		{false, 50, 70, true, intervals{}},
		{true, 0, 0, false, intervals{}},
	}
	for i, st := range steps {
		var ok bool
		if st.add {
			ok = s.add(uint64(st.lo), st.size)
		} else {
			ok = s.remove(uint64(st.lo), st.size)
		}
		if ok != st.ok || len(s) != len(st.want) || (len(s) > 0 && !reflect.DeepEqual(s, st.want)) {
			t.Fatalf("step %d: ok=%v set=%v, want ok=%v set=%v", i, ok, s, st.ok, st.want)
		}
	}
}

func TestStateAt(t *testing.T) {
	snaps, err := ReadPickle(bytes.NewReader(readFile(t, "snapshot_p4.pickle")))
	if err != nil {
		t.Fatal(err)
	}
	s := snaps[0]
	const A, C = 139638008184832, 139650000000000
	end, err := StateAt(s, len(s.History))
	if err != nil {
		t.Fatal(err)
	}
	var held []Block
	for _, seg := range s.Segments {
		for _, b := range seg.Blocks {
			if b.State != StateInactive {
				held = append(held, b)
			}
		}
	}
	if !reflect.DeepEqual(end, held) {
		t.Errorf("StateAt(end) = %+v, want the snapshot's held blocks %+v", end, held)
	}
	start, err := StateAt(s, 0)
	if err != nil || len(start) != 0 {
		t.Errorf("StateAt(0) = %+v, %v; want nothing held before a complete history", start, err)
	}
	// Just before the free_requested of the 1000-byte block (event 4):
	// it is allocated, and known only from history.
	mid, err := StateAt(s, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{Addr: A, Size: 37888, Requested: 37632, State: StateActiveAllocated, Region: "conv1", Frames: s.Segments[0].Blocks[0].Frames},
		{Addr: A + 37888, Size: 512, Requested: 256, State: StateActiveAllocated, Frames: s.Segments[0].Blocks[1].Frames},
		{Addr: A + 38400, Size: 1000, Requested: 1000, State: StateActiveAllocated, Frames: s.History[3].Frames},
	}
	if !reflect.DeepEqual(mid, want) {
		t.Errorf("StateAt(4) =\n %+v\nwant\n %+v", mid, want)
	}
	// C's block: allocated before its free_requested (event 8), pending
	// before its free_completed (9), gone after.
	mid, err = StateAt(s, 8)
	if err != nil || len(mid) != 3 || mid[2].Addr != C || mid[2].State != StateActiveAllocated || mid[2].Size != 15_000_000 {
		t.Errorf("StateAt(8) = %+v, %v", mid, err)
	}
	mid, err = StateAt(s, 9)
	if err != nil || len(mid) != 3 || mid[2].Addr != C || mid[2].State != StateActivePendingFree {
		t.Errorf("StateAt(9) = %+v, %v", mid, err)
	}
	mid, err = StateAt(s, 10)
	if err != nil || len(mid) != 2 {
		t.Errorf("StateAt(10) = %+v, %v", mid, err)
	}

	// A truncated history: device 1 frees a block it never allocated, so
	// that block was held when its history starts.
	t1 := snaps[1]
	start, err = StateAt(t1, 0)
	if err != nil {
		t.Fatal(err)
	}
	want = []Block{{Addr: 139710000000000, Size: 64, Requested: 64, State: StateActiveAllocated}}
	if !reflect.DeepEqual(start, want) {
		t.Errorf("StateAt(truncated, 0) = %+v, want %+v", start, want)
	}

	for _, n := range []int{-1, len(s.History) + 1} {
		if _, err := StateAt(s, n); err == nil {
			t.Errorf("StateAt(%d) succeeded", n)
		}
	}
}

func TestStateAtContradiction(t *testing.T) {
	base := func() *Snapshot {
		return &Snapshot{Segments: []Segment{{Addr: 4096, Size: 1024, Pool: PoolSmall, Blocks: []Block{
			{Addr: 4096, Size: 512, Requested: 500, State: StateActiveAllocated},
			{Addr: 4608, Size: 512, State: StateInactive},
		}}}}
	}
	tests := []struct {
		name    string
		history []Event
	}{
		{"alloc of a free block", []Event{{Action: ActionAlloc, Addr: 4608, Size: 10}}},
		{"free_requested of an allocated block", []Event{{Action: ActionFreeRequested, Addr: 4096, Size: 500}}},
		{"free_completed of a held block", []Event{{Action: ActionFreeCompleted, Addr: 4096, Size: 500}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			s.History = tc.history
			_, err := StateAt(s, 0)
			var ie *InvalidSnapshotError
			if !errors.As(err, &ie) || ie.Event != 0 {
				t.Errorf("err = %v, want *InvalidSnapshotError at event 0", err)
			}
		})
	}
}
