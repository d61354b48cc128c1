package trace_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vramgo/vram/memory/trace"
)

func ExampleOpen() {
	f, err := trace.Open("testdata/resnet50_train.trace.gz")
	if err != nil {
		fmt.Println(err)
		return
	}
	var peak, live int64
	for _, e := range f.Events {
		switch e.Action {
		case trace.ActionAlloc:
			live += e.Size
			peak = max(peak, live)
		case trace.ActionFreeCompleted:
			live -= e.Size
		}
	}
	fmt.Printf("%s, gzipped=%v: %d events, peak requested %.2f GB\n", f.Kind, f.Gzipped, len(f.Events), float64(peak)/1e9)
	// Output: text, gzipped=true: 8504 events, peak requested 5.83 GB
}

func ExampleNewTextReader() {
	in := `# action addr size stream
segment_alloc 4096 2097152 0
alloc 4096 100 0
free_requested 4096 100 0
free_completed 4096 100 0
`
	r, err := trace.NewTextReader(strings.NewReader(in))
	if err != nil {
		fmt.Println(err)
		return
	}
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(e.Action, e.Addr, e.Size)
	}
	// Output:
	// segment_alloc 4096 2097152
	// alloc 4096 100
	// free_requested 4096 100
	// free_completed 4096 100
}

func ExampleReadTextAll_error() {
	_, err := trace.ReadTextAll(strings.NewReader("alloc 4096 100 0\nallocx 4096 100 0\n"))
	fmt.Println(err)
	var pe *trace.ParseError
	if errors.As(err, &pe) {
		fmt.Println("line", pe.Line)
	}
	// Output:
	// trace: line 2: unknown action "allocx"
	// line 2
}

func ExampleWriteJSON() {
	s := &trace.Snapshot{
		Device: 0,
		Segments: []trace.Segment{{
			Addr: 4096, Size: 2 << 20, Pool: trace.PoolSmall,
			Blocks: []trace.Block{
				{Addr: 4096, Size: 512, Requested: 100, State: trace.StateActiveAllocated, Region: "embed"},
				{Addr: 4608, Size: 2<<20 - 512, State: trace.StateInactive},
			},
		}},
		History: []trace.Event{
			{Action: trace.ActionSegmentAlloc, Addr: 4096, Size: 2 << 20},
			{Action: trace.ActionAlloc, Addr: 4096, Size: 100, Region: "embed"},
		},
	}
	if err := trace.WriteJSON(os.Stdout, s); err != nil {
		fmt.Println(err)
	}
	// Output:
	// {
	//   "format": "vram-memory-snapshot",
	//   "version": 1,
	//   "device": 0,
	//   "capacity_bytes": 0,
	//   "config": "",
	//   "meta": {},
	//   "history_truncated": false,
	//   "segments": [
	//     {"address": 4096, "size": 2097152, "stream": 0, "pool": "small", "expandable": false, "blocks": [
	//       {"address": 4096, "size": 512, "requested_size": 100, "state": "active_allocated", "region": "embed"},
	//       {"address": 4608, "size": 2096640, "requested_size": 0, "state": "inactive"}]}
	//   ],
	//   "history": [
	//     {"action": "segment_alloc", "address": 4096, "size": 2097152, "stream": 0},
	//     {"action": "alloc", "address": 4096, "size": 100, "stream": 0, "region": "embed"}
	//   ]
	// }
}

func ExampleReadPickle() {
	f, err := os.Open("testdata/snapshot_p4.pickle")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	snaps, err := trace.ReadPickle(f)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range snaps {
		fmt.Printf("device %d: %d segments, reserved %d, allocated %d, %d events, truncated=%v\n",
			s.Device, len(s.Segments), s.Reserved(), s.Allocated(), len(s.History), s.Truncated)
	}
	// Output:
	// device 0: 2 segments, reserved 23068672, allocated 10524160, 17 events, truncated=false
	// device 1: 1 segments, reserved 2097152, allocated 512, 3 events, truncated=true
}

func ExampleStateAt() {
	f, err := trace.Open("testdata/snapshot_p4.pickle")
	if err != nil {
		fmt.Println(err)
		return
	}
	s := f.Snapshots[1] // device 1: its history starts mid-way
	held, err := trace.StateAt(s, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("truncated:", s.Truncated)
	for _, b := range held {
		fmt.Printf("held at the start: %d bytes at %#x (%s)\n", b.Size, b.Addr, b.State)
	}
	// Output:
	// truncated: true
	// held at the start: 64 bytes at 0x7f10c4ebec00 (active_allocated)
}
