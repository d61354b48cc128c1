package analyze

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

// TestSharedStacksCostTheirInput checks that the work and the report of an
// analysis follow what a snapshot holds, not how often it refers to it: a
// pickle refers to one stack or one name from every block and event for a
// few bytes each, so that a small hostile file held a deep stack or a
// huge name in thousands of places and the analysis took minutes (a 3 MB
// pickle of 2,000 blocks sharing a 100,000-frame stack, 200 s; 2,000
// stacks sharing a 1 MiB name, 80 s, with a 10 MB text report).
func TestSharedStacksCostTheirInput(t *testing.T) {
	const blocks = 300
	const hugeName = 4 << 20
	deep := make([]trace.Frame, 20000)
	for i := range deep {
		deep[i] = trace.Frame{Function: fmt.Sprintf("c10::detail::f%d<int>(int)", i), File: "??"}
	}
	long := strings.Repeat("a", hugeName)
	longFunc, longFile := long+"::f", `C:\Users\u\`+long+".py"
	sharedLong := []trace.Frame{{Function: longFunc, File: "??"}}
	tests := []struct {
		name   string
		frames func(i int) []trace.Frame
		region string
	}{
		{"one deep stack", func(int) []trace.Frame { return deep }, ""},
		{"one stack with a huge name", func(int) []trace.Frame { return sharedLong }, ""},
		{"stacks sharing a huge name", func(i int) []trace.Frame {
			return []trace.Frame{{Function: longFunc, File: longFile, Line: i + 1}}
		}, ""},
		{"a huge region", func(int) []trace.Frame { return nil }, long},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := sharedStackSnapshot(blocks, tc.frames, tc.region)
			f := &trace.File{Name: "hostile.pickle", Kind: trace.KindPickle, Snapshots: []*trace.Snapshot{s}}
			var text, page bytes.Buffer
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			rep, err := Analyze(f, Options{ReplayEvents: -1})
			if err != nil {
				t.Fatal(err)
			}
			if err := rep.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if err := WriteHTML(&page, rep); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			allocs := after.Mallocs - before.Mallocs
			bytesAlloc := after.TotalAlloc - before.TotalAlloc
			// Each block and event refers to the stack: the work must
			// not be that of walking it, or the name, once for each.
			if allocs > 2_000_000 || bytesAlloc > 256<<20 {
				t.Errorf("the analysis made %d allocations of %d MiB in all for %d blocks and events sharing their stacks", allocs, bytesAlloc>>20, 2*blocks)
			}
			if text.Len() > 1<<20 {
				t.Errorf("the text report is %d bytes", text.Len())
			}
			// The report's stacks and regions (--json) hold no huge name.
			d := rep.Devices[0]
			var stacks [][]trace.Frame
			for _, g := range d.ByStack {
				stacks = append(stacks, g.Frames)
			}
			for _, a := range d.Largest {
				stacks = append(stacks, a.Frames)
				if len(a.Region) > maxFrameScan+64 {
					t.Errorf("an allocation's region is %d bytes", len(a.Region))
				}
			}
			for _, fr := range stacks {
				for _, f := range fr {
					if len(f.Function) > maxFrameScan+64 || len(f.File) > maxFrameScan+64 {
						t.Fatalf("a reported frame has a function of %d bytes and a file of %d", len(f.Function), len(f.File))
					}
				}
			}
		})
	}
}

// sharedStackSnapshot returns a snapshot of n blocks of 512 bytes in one
// segment, each allocated by an event of the history, with the stack
// frames(i) and the region.
func sharedStackSnapshot(n int, frames func(i int) []trace.Frame, region string) *trace.Snapshot {
	const base = 0x7f0000000000
	size := int64(n) * 512
	total := (size/(2<<20) + 1) * (2 << 20)
	seg := trace.Segment{Addr: base, Size: total, Pool: trace.PoolLarge}
	s := &trace.Snapshot{Meta: map[string]string{trace.MetaSource: "pytorch"}}
	s.History = append(s.History, trace.Event{Action: trace.ActionSegmentAlloc, Addr: base, Size: total})
	for i := range n {
		addr := base + uint64(i)*512
		fr := frames(i)
		seg.Blocks = append(seg.Blocks, trace.Block{Addr: addr, Size: 512, Requested: 500, State: trace.StateActiveAllocated, Region: region, Frames: fr})
		s.History = append(s.History, trace.Event{Action: trace.ActionAlloc, Addr: addr, Size: 500, Region: region, Frames: fr, TimeUS: int64(i + 1)})
	}
	seg.Blocks = append(seg.Blocks, trace.Block{Addr: base + uint64(size), Size: total - size, State: trace.StateInactive})
	s.Segments = []trace.Segment{seg}
	return s
}
