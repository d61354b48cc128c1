package trace

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// seedTestdata adds every fixture in testdata (and, for gzip files, their
// decompressed content) to the fuzzer's corpus.
func seedTestdata(f *testing.F) {
	paths, err := filepath.Glob("testdata/*")
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || filepath.Ext(p) == ".py" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if filepath.Base(p) == filepath.Base(resnetTrace) {
			// Seed a prefix of the decompressed trace: the whole one is
			// too long for a useful fuzz input.
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				f.Fatal(err)
			}
			plain, _ := io.ReadAll(zr)
			f.Add(plain[:2000])
			b = b[:min(len(b), 4000)]
		}
		f.Add(b)
	}
	f.Add([]byte("alloc 1 2 3 4\nfree_completed 1 2 3\n# c\n"))
	f.Add([]byte{0x80, 2, ']', '(', 'K', 1, 'e', '.'})
}

func FuzzReadText(f *testing.F) {
	seedTestdata(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := ReadTextAll(bytes.NewReader(data))
		if err != nil {
			return
		}
		// What parses writes back and parses to the same events.
		var buf bytes.Buffer
		if err := WriteText(&buf, events); err != nil {
			t.Fatalf("WriteText of parsed events: %v", err)
		}
		again, err := ReadTextAll(&buf)
		if err != nil || len(again) != len(events) {
			t.Fatalf("re-read: %d events, %v; want %d", len(again), err, len(events))
		}
		for i := range events {
			if !reflect.DeepEqual(again[i], events[i]) {
				t.Fatalf("event %d: %+v became %+v", i, events[i], again[i])
			}
		}
	})
}

func FuzzReadJSON(f *testing.F) {
	seedTestdata(f)
	var buf bytes.Buffer
	if err := WriteJSON(&buf, sampleSnapshot()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadJSON(bytes.NewReader(data))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := WriteJSON(&out, s); err != nil {
			t.Fatalf("WriteJSON of a snapshot ReadJSON accepted: %v", err)
		}
		if _, err := ReadJSON(&out); err != nil {
			t.Fatalf("re-read: %v", err)
		}
	})
}

func FuzzReadPickle(f *testing.F) {
	seedTestdata(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		snaps, err := ReadPickle(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, s := range snaps {
			if err := s.Validate(); err != nil {
				t.Fatalf("ReadPickle returned an invalid snapshot: %v", err)
			}
			if _, err := StateAt(s, len(s.History)); err != nil {
				t.Fatalf("StateAt(end): %v", err)
			}
			var out bytes.Buffer
			if err := WriteJSON(&out, s); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func FuzzOpen(f *testing.F) {
	seedTestdata(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Read(bytes.NewReader(data), "fuzz")
		if err != nil {
			if file != nil {
				t.Fatal("Read returned a File with an error")
			}
			return
		}
		for _, s := range file.Snapshots {
			StateAt(s, 0)
			StartsEmpty(s.History, s.Segments)
		}
		StartsEmpty(file.Events, nil)
	})
}
