package analyze

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

// writeText writes a text trace to a temporary file and returns its path.
func writeText(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.trace")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOverflowingSums analyzes histories whose sizes add up past int64:
// each is a clear error naming the event, never a negative peak.
func TestOverflowingSums(t *testing.T) {
	const big = 1 << 62
	tests := []struct {
		name, text string
		event      int
		what       string
	}{
		{"two 2^62 allocs", fmt.Sprintf("alloc 4096 %d 0\nalloc 8192 %d 0\n", big, big), 1, "the allocated bytes"},
		{"largest allocs", fmt.Sprintf("alloc 4096 %d 0\nalloc 8192 1 0\n", int64(math.MaxInt64)), 1, "the allocated bytes"},
		{"segments", fmt.Sprintf("segment_alloc 4096 %d 0\nsegment_alloc %d %d 0\n", big, uint64(big)*2, big), 1, "the reserved bytes"},
		{"segment frees", fmt.Sprintf("segment_free 4096 %d 0\nsegment_free 8192 %d 0\nsegment_free 12288 %d 0\n", int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64)), 1, "the reserved bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := File(writeText(t, tc.text), Options{})
			want := fmt.Sprintf("history event %d: %s pass 2^63-1 bytes", tc.event, tc.what)
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line with %q", err, want)
			}
		})
	}
	// The same in a snapshot's history, and sizes that fit stay exact.
	s := &trace.Snapshot{History: []trace.Event{
		{Action: trace.ActionAlloc, Addr: 4096, Size: big},
		{Action: trace.ActionAlloc, Addr: 8192, Size: big},
	}}
	if _, err := Analyze(&trace.File{Name: "s.json", Kind: trace.KindJSON, Snapshots: []*trace.Snapshot{s}}, Options{}); err == nil ||
		!strings.Contains(err.Error(), "analyze: s.json: device 0: history event 1: the allocated bytes pass 2^63-1") {
		t.Errorf("snapshot: %v", err)
	}
	s.History[1].Size = big - 1
	r, err := Analyze(&trace.File{Name: "s.json", Kind: trace.KindJSON, Snapshots: []*trace.Snapshot{s}}, Options{})
	if err != nil || r.Devices[0].Timeline.PeakAllocatedBytes != math.MaxInt64 {
		t.Errorf("2^62 + 2^62-1: %v, %+v", err, r)
	}
}

// TestOOMsCapped analyzes a history of many out-of-memory events: only the
// first Top are explained, the rest counted and said to be there.
func TestOOMsCapped(t *testing.T) {
	path := writeText(t, strings.Repeat("oom 0 4096 0\n", 5000))
	for _, top := range []int{0, 3, 10000} {
		r, err := File(path, Options{Top: top})
		if err != nil {
			t.Fatal(err)
		}
		d := r.Devices[0]
		want := min(Options{Top: top}.top(), 5000)
		if len(d.OOMs) != want || d.OOMEvents != 5000 || d.OOMs[0].Event != 0 || d.OOMs[want-1].Event != want-1 {
			t.Fatalf("top %d: %d OOMs explained, %d counted", top, len(d.OOMs), d.OOMEvents)
		}
		var text bytes.Buffer
		if err := r.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		paragraphs := strings.Count(text.String(), "out of memory at event")
		more := fmt.Sprintf("%d more out-of-memory events not shown", 5000-want)
		if paragraphs != want || strings.Contains(text.String(), more) != (want < 5000) {
			t.Errorf("top %d: %d paragraphs; says %q: %v", top, paragraphs, more, strings.Contains(text.String(), more))
		}
		b, _ := json.Marshal(d)
		if !strings.Contains(string(b), `"oom_events":5000`) {
			t.Errorf("JSON lacks the count: %.200s", b)
		}
	}
}

// genHistory is a long synthetic history made as it is read: allocs and
// frees of at most live blocks, with region labels and an OOM now and then.
// It records the highest heap it sees.
type genHistory struct {
	n, live  int
	heapHigh uint64
}

func (g *genHistory) Each(fn func(*trace.Event) error) error {
	rng := rand.New(rand.NewPCG(7, 8))
	var ms runtime.MemStats
	var e trace.Event
	live := make([]uint64, 0, g.live)
	regions := []string{"weights", "activations", "optimizer", "workspace"}
	next := uint64(1 << 40)
	for i := range g.n {
		if i%(1<<16) == 0 {
			runtime.ReadMemStats(&ms)
			g.heapHigh = max(g.heapHigh, ms.HeapAlloc)
		}
		switch {
		case i%1000 == 999:
			e = trace.Event{Action: trace.ActionOOM, Size: 1 << 40, TimeUS: int64(i + 1)}
		case len(live) == g.live || len(live) > 0 && rng.IntN(2) == 0:
			k := rng.IntN(len(live))
			e = trace.Event{Action: trace.ActionFreeCompleted, Addr: live[k], TimeUS: int64(i + 1)}
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
		default:
			e = trace.Event{Action: trace.ActionAlloc, Addr: next, Size: int64(512 + rng.IntN(8<<20)),
				Region: regions[rng.IntN(len(regions))], TimeUS: int64(i + 1)}
			live = append(live, next)
			next += 16 << 20
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
	return nil
}

// TestAnalyzeStreams analyzes a history far longer than memory could hold
// as events: the heap stays at the live blocks' size, and the result is the
// one of the events held in memory.
func TestAnalyzeStreams(t *testing.T) {
	small := &genHistory{n: 30000, live: 500}
	var events []trace.Event
	small.Each(func(e *trace.Event) error { events = append(events, *e); return nil })
	held, err := analyzeEvents(trace.Events(events), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	streamed, err := analyzeEvents(small, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(held, streamed) {
		t.Errorf("streamed analysis differs from the held one")
	}

	n := 1_000_000
	g := &genHistory{n: n, live: 1000}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	d, err := analyzeEvents(g, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.HistoryEvents != n || d.OOMEvents != n/1000 || len(d.OOMs) != 10 || len(d.Timeline.Points) > 600 || d.Timeline.Axis != "time_us" {
		t.Errorf("%d events, %d OOMs (%d explained), %d points, axis %s", d.HistoryEvents, d.OOMEvents, len(d.OOMs), len(d.Timeline.Points), d.Timeline.Axis)
	}
	if grew := g.heapHigh - min(base, g.heapHigh); grew > 24<<20 {
		t.Errorf("heap grew by %d MB analyzing %d events (%d MB if held)", grew>>20, n, n*80>>20)
	}
}

// TestFileStreamsText checks that a text trace read by File, streamed from
// the file, gives the report of the same trace read whole.
func TestFileStreamsText(t *testing.T) {
	path := filepath.Join("testdata", "resnet50_train.trace.gz")
	streamed, err := File(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := Analyze(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(streamed, whole) {
		t.Error("the streamed report differs from the one of the trace read whole")
	}
	// A snapshot larger than Options.Limits is refused, naming the limit.
	_, err = File(filepath.Join("testdata", "sim_train.json"), Options{Limits: trace.Limits{MaxBytes: 1000}})
	var le *trace.LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "--max-input") {
		t.Errorf("snapshot beyond the limit: %v", err)
	}
}

// TestExplainHugeOOM explains out-of-memory events with sizes near 2^63:
// the sums saturate, so the reasons stay right.
func TestExplainHugeOOM(t *testing.T) {
	text := fmt.Sprintf("segment_alloc 4096 %d 0\noom %d %d 0\noom 5 %d 0\n", int64(math.MaxInt64), uint64(math.MaxUint64), int64(math.MaxInt64), int64(math.MaxInt64))
	r, err := File(writeText(t, text), Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := r.Devices[0].OOMs
	if len(o) != 2 || o[0].DeviceFreeBytes != math.MaxInt64 || !strings.Contains(o[0].Explanation, "The device had room") ||
		!strings.Contains(o[1].Explanation, "Free memory was enough in total") {
		t.Errorf("OOMs %+v", o)
	}
}

// hostileSnapshot is a snapshot of one segment of nBlocks blocks and a
// history of nEvents events, their stacks nFrames deep, the names of
// their files and functions long and full of what HTML, JavaScript and
// attributes must escape.
func hostileSnapshot(nEvents, nBlocks, nFrames, nameLen int) *trace.Snapshot {
	bad := []string{`/home/"q'uote/a.py`, "/x/</script><script>alert(1)</script>.py", "/x/<!--c.py", "/x/\u2028line\u2029.py", "/x/&amp;.py"}
	long := strings.Repeat("x", nameLen)
	stack := func(i int) []trace.Frame {
		fs := make([]trace.Frame, nFrames)
		for j := range fs {
			fs[j] = trace.Frame{Function: "fn</script>" + long, File: bad[(i+j)%len(bad)], Line: j + 1}
		}
		return fs
	}
	s := &trace.Snapshot{Capacity: 1 << 40}
	seg := trace.Segment{Addr: 1 << 20, Size: int64(nBlocks) * 512, Pool: trace.PoolLarge}
	for i := 0; i < nBlocks; i++ {
		state := trace.StateActiveAllocated
		if i%7 == 3 {
			state = trace.StateInactive
		}
		seg.Blocks = append(seg.Blocks, trace.Block{Addr: seg.Addr + uint64(i)*512, Size: 512, Requested: 500, State: state,
			Region: bad[i%len(bad)] + long, Frames: stack(i)})
	}
	s.Segments = []trace.Segment{seg}
	s.History = append(s.History, trace.Event{Action: trace.ActionSegmentAlloc, Addr: seg.Addr, Size: seg.Size})
	for i := 0; i < nEvents; i++ {
		e := trace.Event{Action: trace.ActionAlloc, Addr: seg.Addr + uint64(i%nBlocks)*512, Size: 512, Frames: stack(i), Region: bad[i%len(bad)]}
		if (i/nBlocks)%2 == 1 {
			e.Action = trace.ActionFreeCompleted
		}
		s.History = append(s.History, e)
	}
	return s
}

// TestHTMLBounded writes the page of files with many blocks, deep stacks
// and long names: it stays within a bound whatever the file holds, still
// parses, escapes every name and says what it leaves out; a file of few
// blocks keeps one rect per block.
func TestHTMLBounded(t *testing.T) {
	tests := []struct {
		name                            string
		events, blocks, frames, nameLen int
		maxBytes                        int
		wantRects                       int // 0: at most maxBlockRects+1 segment's worth
		wantMore                        string
	}{
		{"few blocks", 60, 30, 3, 10, 200 << 10, 30, ""},
		{"1e5 events, 2e4 blocks in one segment", 100000, 20000, 4, 10, 8 << 20, 0, "blocks too small to draw one by one"},
		{"deep stacks", 200, 10, 2000, 10, 8 << 20, 10, "1500 more frames: --json lists them all"},
		{"long names", 200, 50, 4, 16 << 10, 2 << 20, 50, "more bytes)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := hostileSnapshot(tc.events, tc.blocks, tc.frames, tc.nameLen)
			r, err := Analyze(&trace.File{Name: `a</script>"b.pickle`, Kind: trace.KindPickle, Snapshots: []*trace.Snapshot{s}}, Options{ReplayEvents: -1})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := WriteHTML(&buf, r); err != nil {
				t.Fatal(err)
			}
			page := buf.String()
			if buf.Len() > tc.maxBytes {
				t.Errorf("the page has %d bytes, want at most %d", buf.Len(), tc.maxBytes)
			}
			for bad, want := range map[string]int{"</script>": 2, "<script": 2, "<!--": 0, "\u2028": -1} {
				if n := strings.Count(page, bad); want >= 0 && n != want {
					t.Errorf("%q occurs %d times in the page, want %d", bad, n, want)
				}
			}
			nodes := parseHTML(t, buf.Bytes())
			rects := 0
			for _, n := range nodes {
				if n.name == "rect" && strings.Contains(n.attrs["class"], "blk") {
					rects++
				}
				if n.name == "script" && n.attrs["id"] == "vram-data" && strings.ContainsAny(n.text, "\u2028\u2029") {
					t.Error("the page's data holds a raw U+2028 or U+2029")
				}
			}
			switch {
			case tc.wantRects > 0 && rects != tc.wantRects:
				t.Errorf("%d block rects, want %d", rects, tc.wantRects)
			case tc.wantRects == 0 && (rects > maxBlockRects+maxSegments || rects == 0):
				t.Errorf("%d block rects, want between 1 and %d", rects, maxBlockRects+maxSegments)
			}
			if tc.wantMore != "" && !strings.Contains(page, tc.wantMore) {
				t.Errorf("the page does not say %q", tc.wantMore)
			}
		})
	}
}
