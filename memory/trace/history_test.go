package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// startsEmptyTwoPass is StartsEmpty as first written: a pass to learn
// whether segments are checked, then the check. StartChecker must agree.
func startsEmptyTwoPass(history []Event, segments []Segment) bool {
	checkSegments := segments != nil
	for i := range history {
		if a := history[i].Action; a == ActionSegmentAlloc || a == ActionSegmentMap {
			checkSegments = true
		}
	}
	held := map[uint64]bool{}
	var mapped intervals
	for _, e := range history {
		switch e.Action {
		case ActionAlloc:
			if _, ok := held[e.Addr]; ok || checkSegments && !mapped.covers(e.Addr, max(e.Size, 1)) {
				return false
			}
			held[e.Addr] = false
		case ActionFreeRequested:
			if pending, ok := held[e.Addr]; !ok || pending {
				return false
			}
			held[e.Addr] = true
		case ActionFreeCompleted:
			if _, ok := held[e.Addr]; !ok {
				return false
			}
			delete(held, e.Addr)
		case ActionSegmentAlloc, ActionSegmentMap:
			if e.Size > 0 && !mapped.add(e.Addr, e.Size) {
				return false
			}
		case ActionSegmentFree, ActionSegmentUnmap:
			if e.Size > 0 && !mapped.remove(e.Addr, e.Size) {
				return false
			}
		}
	}
	for _, s := range segments {
		if !mapped.covers(s.Addr, s.Size) {
			return false
		}
	}
	return true
}

func TestStartCheckerAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	actions := []Action{ActionAlloc, ActionAlloc, ActionFreeRequested, ActionFreeCompleted, ActionFreeCompleted,
		ActionSegmentAlloc, ActionSegmentFree, ActionSegmentMap, ActionSegmentUnmap, ActionOOM}
	agree := [2]int{}
	for range 20000 {
		h := make([]Event, rng.IntN(8))
		for i := range h {
			h[i] = Event{Action: actions[rng.IntN(len(actions))], Addr: uint64(rng.IntN(4)) << 20, Size: int64(rng.IntN(3)) << 20}
		}
		var segs []Segment
		if rng.IntN(2) == 0 {
			segs = []Segment{{Addr: uint64(rng.IntN(4)) << 20, Size: 1 << 20}}
		}
		want := startsEmptyTwoPass(h, segs)
		if got := StartsEmpty(h, segs); got != want {
			t.Fatalf("StartsEmpty(%v, %v) = %v, the two-pass check says %v", h, segs, got, want)
		}
		if want {
			agree[1]++
		} else {
			agree[0]++
		}
	}
	if agree[0] == 0 || agree[1] < 100 {
		t.Errorf("random histories too one-sided: %v", agree)
	}
}

// writeTrace writes text (gzip-compressed if gz) to a file in a temporary
// directory and returns its path.
func writeTrace(t *testing.T, name, text string, compress bool) string {
	t.Helper()
	b := []byte(text)
	if compress {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		b = buf.Bytes()
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestOpenStream(t *testing.T) {
	text := "# recorded somewhere\nalloc 4096 100 0 7\nfree_requested 4096 100 0\n\n# a comment\nfree_completed 4096 100 0\noom 5 6 0\n"
	for _, compress := range []bool{false, true} {
		path := writeTrace(t, "t.trace", text, compress)
		f, err := OpenStream(path)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind != KindText || f.Events != nil || f.Gzipped != compress || !reflect.DeepEqual(f.Header, whole.Header) {
			t.Fatalf("OpenStream: %+v", f)
		}
		for pass := range 2 { // a History reads from the start each time
			var got []Event
			if err := f.History().Each(func(e *Event) error { got = append(got, *e); return nil }); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, whole.Events) || !reflect.DeepEqual(Events(got), whole.History()) {
				t.Errorf("pass %d: %v, want %v", pass, got, whole.Events)
			}
		}
		// fn's error stops the pass and comes back as is.
		stop := errors.New("enough")
		n := 0
		if err := f.History().Each(func(*Event) error { n++; return stop }); err != stop || n != 1 {
			t.Errorf("Each with a failing fn: %v after %d events", err, n)
		}
	}

	// A malformed line fails the pass that reaches it, naming file and line.
	path := writeTrace(t, "bad.trace", "alloc 1 2 3\nalloc 4 5 6\nallocx 7 8 9\n", false)
	f, err := OpenStream(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = f.History().Each(func(*Event) error { n++; return nil })
	var pe *ParseError
	if !errors.As(err, &pe) || pe.File != path || pe.Line != 3 || n != 2 {
		t.Errorf("after %d events: %v, want a *ParseError at %s line 3", n, err, path)
	}
	// A first line that is no event fails at once.
	if _, err := OpenStream(writeTrace(t, "worse.trace", "hello world\n", false)); err == nil || !strings.Contains(err.Error(), `line 1: unknown action "hello"`) {
		t.Errorf("OpenStream of a non-trace: %v", err)
	}
	if _, err := OpenStream(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("OpenStream of a missing file: %v", err)
	}

	// Snapshots are read whole, within the limits; they have no History.
	f, err = OpenStream("testdata/snapshot_p4.pickle")
	if err != nil || f.Kind != KindPickle || len(f.Snapshots) != 2 || f.History() != nil {
		t.Fatalf("OpenStream of a pickle: %v, %+v", err, f)
	}
	var le *LimitError
	if _, err := (Limits{MaxBytes: 100}).OpenStream("testdata/snapshot_p4.pickle"); !errors.As(err, &le) {
		t.Errorf("OpenStream beyond the limit: %v", err)
	}
}
