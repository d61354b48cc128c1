package analyze

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"
)

func TestRecorderRoundTrip(t *testing.T) {
	a := memory.New(memory.NewSimArena(128<<20), memory.Config{})
	rec := NewRecorder(a.Stats, nil, time.Millisecond) // samples only
	rec.Start()
	rec.Start() // a second Start does nothing
	b, err := a.Alloc(8<<20, 0, "x")
	if err != nil {
		t.Fatal(err)
	}
	rec.Sample()
	a.Free(b)
	time.Sleep(5 * time.Millisecond)
	rec.Stop()
	rec.Stop()
	ss := rec.Samples()
	if len(ss) < 3 || ss[0].AllocatedBytes != 0 {
		t.Fatalf("samples %+v", ss)
	}
	var peak int64
	for i, s := range ss {
		peak = max(peak, s.AllocatedBytes)
		if i > 0 && s.TimeUS < ss[i-1].TimeUS {
			t.Errorf("samples out of order: %+v", ss)
		}
	}
	if peak != 8<<20 {
		t.Errorf("peak allocated %d in the samples", peak)
	}
	var buf bytes.Buffer
	if err := rec.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := trace.Read(bytes.NewReader(buf.Bytes()), "recording.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Analyze(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := r.Devices[0]
	if len(d.Samples) != len(ss) || d.Samples[len(ss)-1] != ss[len(ss)-1] || d.Source != "vram analyze.Recorder" {
		t.Errorf("read back %d samples (%v), source %q", len(d.Samples), d.Samples, d.Source)
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), `<svg class="chart samples"`) || !strings.Contains(page.String(), "no allocation history") {
		t.Error("the page lacks the samples chart or the note on the missing history")
	}
}

func TestDecodeSamples(t *testing.T) {
	for _, bad := range []string{"1:2:3", "a:b:c:d", "1:2:3:4:5"} {
		if _, err := decodeSamples(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
	if samplesFromMeta(map[string]string{MetaSamples: "1:2:x:4"}) != nil {
		t.Error("malformed samples were kept")
	}
	ss, err := decodeSamples(encodeSamples([]Sample{{1, 2, 3, 4}, {5, 6, 7, 8}}))
	if err != nil || len(ss) != 2 || ss[1] != (Sample{5, 6, 7, 8}) {
		t.Errorf("%v %v", ss, err)
	}
}
