package trace

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestActionNames(t *testing.T) {
	for a := ActionAlloc; a <= ActionSnapshot; a++ {
		got, err := ParseAction(a.String())
		if err != nil || got != a {
			t.Errorf("ParseAction(%q) = %v, %v", a.String(), got, err)
		}
		b, err := a.MarshalText()
		if err != nil || string(b) != a.String() {
			t.Errorf("MarshalText(%v) = %q, %v", a, b, err)
		}
		var u Action
		if err := u.UnmarshalText(b); err != nil || u != a {
			t.Errorf("UnmarshalText(%q) = %v, %v", b, u, err)
		}
	}
	if ActionSnapshot.String() != "snapshot" || ActionOOM.String() != "oom" || ActionSegmentUnmap.String() != "segment_unmap" {
		t.Error("names differ from PyTorch's")
	}
	for _, a := range []Action{0, ActionSnapshot + 1, 255} {
		if a.Valid() || !strings.HasPrefix(a.String(), "Action(") {
			t.Errorf("%d: Valid() = %v, String() = %q", uint8(a), a.Valid(), a.String())
		}
		if _, err := a.MarshalText(); err == nil {
			t.Errorf("MarshalText(%d) succeeded", uint8(a))
		}
	}
	if _, err := ParseAction("Alloc"); err == nil || err.Error() != `trace: unknown action "Alloc"` {
		t.Errorf("ParseAction(Alloc) error = %v", err)
	}
}

func TestValidate(t *testing.T) {
	if err := sampleSnapshot().Validate(); err != nil {
		t.Fatalf("sample: %v", err)
	}
	if err := (&Snapshot{}).Validate(); err != nil {
		t.Fatalf("zero snapshot: %v", err)
	}
	tests := []struct {
		name     string
		edit     func(s *Snapshot)
		seg, blk int
		want     string
	}{
		{"negative device", func(s *Snapshot) { s.Device = -1 }, -1, -1, "negative device"},
		{"negative capacity", func(s *Snapshot) { s.Capacity = -1 }, -1, -1, "negative capacity"},
		{"over capacity", func(s *Snapshot) { s.Capacity = 1 << 20 }, -1, -1, "more than the capacity"},
		{"empty segment", func(s *Snapshot) { s.Segments[1].Size = 0 }, 1, -1, "not positive"},
		{"wraps", func(s *Snapshot) { s.Segments[1].Addr = 1<<64 - 100 }, 1, -1, "wraps around"},
		{"unsorted", func(s *Snapshot) { s.Segments[0], s.Segments[1] = s.Segments[1], s.Segments[0] }, 1, -1, "sorted and disjoint"},
		{"overlap", func(s *Snapshot) {
			s.Segments[1] = s.Segments[0]
			s.Segments[1].Blocks = append([]Block(nil), s.Segments[0].Blocks...)
			s.Segments[1].Addr += 1 << 20
			for i := range s.Segments[1].Blocks {
				s.Segments[1].Blocks[i].Addr += 1 << 20
			}
		}, 1, -1, "starts before the previous segment ends"},
		{"pool", func(s *Snapshot) { s.Segments[0].Pool = "" }, 0, -1, "pool"},
		{"no blocks", func(s *Snapshot) { s.Segments[0].Blocks = nil }, 0, -1, "blocks cover"},
		{"gap at end", func(s *Snapshot) { s.Segments[0].Blocks[2].Size-- }, 0, -1, "blocks cover"},
		{"gap", func(s *Snapshot) { s.Segments[0].Blocks[0].Size-- }, 0, 1, "want 0x"},
		{"past end", func(s *Snapshot) { s.Segments[0].Blocks[2].Size++ }, 0, 2, "past the segment's end"},
		{"zero block", func(s *Snapshot) {
			b := s.Segments[0].Blocks
			s.Segments[0].Blocks = append([]Block{{Addr: b[0].Addr, State: StateInactive}}, b...)
		}, 0, 0, "not positive"},
		{"state", func(s *Snapshot) { s.Segments[0].Blocks[2].State = "free" }, 0, 2, `unknown state "free"`},
		{"requested too much", func(s *Snapshot) { s.Segments[0].Blocks[0].Requested = 513 }, 0, 0, "requested 513 bytes of a 512-byte block"},
		{"requested negative", func(s *Snapshot) { s.Segments[0].Blocks[1].Requested = -1 }, 0, 1, "requested -1"},
		{"event action", func(s *Snapshot) { s.History[2].Action = 0 }, -1, -1, "history event 2: invalid action 0"},
		{"event size", func(s *Snapshot) { s.History[3].Size = -1 }, -1, -1, "history event 3: negative size"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := sampleSnapshot()
			tc.edit(s)
			err := s.Validate()
			var ie *InvalidSnapshotError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v, want *InvalidSnapshotError", err)
			}
			if ie.Segment != tc.seg || ie.Block != tc.blk || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q (segment %d, block %d), want %q at segment %d, block %d", err, ie.Segment, ie.Block, tc.want, tc.seg, tc.blk)
			}
			if !strings.HasPrefix(err.Error(), "trace: invalid snapshot: ") {
				t.Errorf("err = %q", err)
			}
		})
	}
}

func TestSums(t *testing.T) {
	s := sampleSnapshot()
	if got, want := s.Reserved(), int64(22<<20); got != want {
		t.Errorf("Reserved() = %d, want %d", got, want)
	}
	if got, want := s.Allocated(), int64(512+20<<20); got != want {
		t.Errorf("Allocated() = %d, want %d (pending-free blocks excluded)", got, want)
	}
	if got, want := s.Requested(), int64(100+20<<20); got != want {
		t.Errorf("Requested() = %d, want %d", got, want)
	}
}

func TestInFile(t *testing.T) {
	parse := &ParseError{File: "run.trace", Line: 3, Offset: -1, Msg: "unknown action"}
	other := &ParseError{File: "other.trace", Line: 3, Offset: -1, Msg: "unknown action"}
	plain := errors.New("disk on fire")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"names it", parse, "trace: run.trace: line 3: unknown action"},
		{"names it, wrapped", fmt.Errorf("pytorch: %w", parse), "pytorch: trace: run.trace: line 3: unknown action"},
		{"names another", other, "run.trace: trace: other.trace: line 3: unknown action"},
		{"names none", plain, "run.trace: disk on fire"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := InFile("run.trace", tc.err)
			if tc.err == nil {
				if got != nil {
					t.Fatalf("InFile(nil) = %v", got)
				}
				return
			}
			if got.Error() != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("%v does not wrap %v", got, tc.err)
			}
		})
	}
}

func TestMixedSegments(t *testing.T) {
	seg := func(expandable bool, pool [2]uint64) Segment {
		return Segment{Expandable: expandable, PrivatePool: pool}
	}
	graph := [2]uint64{1, 0}
	tests := []struct {
		name string
		segs []Segment
		want bool
	}{
		{"none", nil, false},
		{"fixed", []Segment{seg(false, [2]uint64{}), seg(false, [2]uint64{})}, false},
		{"expandable", []Segment{seg(true, [2]uint64{})}, false},
		{"both", []Segment{seg(false, [2]uint64{}), seg(true, [2]uint64{})}, true},
		// A CUDA graph's or MemPool's pool has segments of its own kind.
		{"fixed private pool", []Segment{seg(false, graph), seg(true, [2]uint64{})}, false},
		{"expandable private pool", []Segment{seg(false, [2]uint64{}), seg(true, graph)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Snapshot{Segments: tc.segs}
			if got := s.MixedSegments(); got != tc.want {
				t.Errorf("MixedSegments() = %v, want %v", got, tc.want)
			}
		})
	}
}
