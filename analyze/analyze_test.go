package analyze

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

func analyzeFile(t *testing.T, name string) *Report {
	t.Helper()
	r, err := File(filepath.Join("testdata", name), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSimSnapshot(t *testing.T) {
	r := analyzeFile(t, "sim_train.json")
	if r.Format != "json" || len(r.Devices) != 1 {
		t.Fatalf("format %s, %d devices", r.Format, len(r.Devices))
	}
	d := r.Devices[0]
	f, err := trace.Open(filepath.Join("testdata", "sim_train.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Snapshots[0]
	fr := d.Fragmentation
	if fr.ReservedBytes != s.Reserved() || fr.AllocatedBytes != s.Allocated() || fr.RequestedBytes != s.Requested() {
		t.Errorf("totals %+v, snapshot reserved %d allocated %d requested %d", fr, s.Reserved(), s.Allocated(), s.Requested())
	}
	if fr.InternalBytes != fr.AllocatedBytes-fr.RequestedBytes || fr.ExternalBytes != fr.ReservedBytes-fr.AllocatedBytes {
		t.Errorf("fragmentation arithmetic: %+v", fr)
	}
	if fr.ExternalBytes != fr.PendingFreeBytes+fr.SplitFreeBytes+fr.ReleasableBytes {
		t.Errorf("external %d != pending %d + split free %d + releasable %d", fr.ExternalBytes, fr.PendingFreeBytes, fr.SplitFreeBytes, fr.ReleasableBytes)
	}
	if fr.FreeBlocks == 0 || fr.LargestFreeBlockBytes <= 0 || fr.LargestFreeBlockBytes > fr.ExternalBytes {
		t.Errorf("free blocks: %+v", fr)
	}
	if len(d.ByRegion) == 0 || d.ByRegion[0].Key != "optimizer" || d.ByRegion[0].Bytes != 240<<20 || d.ByRegion[0].Count != 12 {
		t.Errorf("by region: %+v", d.ByRegion)
	}
	if len(d.ByStack) == 0 || !strings.Contains(d.ByStack[0].Key, "simRun.optimizerStep (analyze/gen_test.go:") {
		t.Errorf("by stack: %+v", d.ByStack)
	}
	var sum int64
	for _, g := range d.ByRegion {
		sum += g.Bytes
	}
	if sum != fr.AllocatedBytes {
		t.Errorf("regions sum to %d, allocated %d", sum, fr.AllocatedBytes)
	}
	if len(d.Largest) != 10 || d.Largest[0].SizeBytes < d.Largest[9].SizeBytes || len(d.Largest[0].Frames) == 0 {
		t.Errorf("largest: %+v", d.Largest)
	}
	if len(d.OOMs) != 1 {
		t.Fatalf("OOMs: %+v", d.OOMs)
	}
	o := d.OOMs[0]
	if o.RequestedBytes != 656828160 || o.Region != "eval" || o.DeviceFreeBytes <= 0 || o.RequestedBytes <= o.DeviceFreeBytes ||
		o.RequestedBytes > o.DeviceFreeBytes+o.CachedBytes || !strings.Contains(o.Explanation, "in pieces") || !strings.Contains(o.Explanation, "expandable_segments:True") {
		t.Errorf("OOM %+v", o)
	}
	tl := d.Timeline
	if tl.Axis != "time_us" || len(tl.Points) == 0 || len(tl.Points) > 600 || tl.StartAllocatedBytes != 0 || tl.StartReservedBytes != 0 {
		t.Errorf("timeline: axis %s, %d points, start %d/%d", tl.Axis, len(tl.Points), tl.StartAllocatedBytes, tl.StartReservedBytes)
	}
	if tl.EndReservedBytes != s.Reserved() || tl.PeakReservedBytes < tl.EndReservedBytes || tl.PeakAllocatedBytes < tl.EndAllocatedBytes {
		t.Errorf("timeline reserved end %d (snapshot %d), peaks %d/%d", tl.EndReservedBytes, s.Reserved(), tl.PeakAllocatedBytes, tl.PeakReservedBytes)
	}
	if tl.EndAllocatedBytes != s.Requested() {
		t.Errorf("timeline ends at %d allocated, the snapshot's held blocks asked for %d", tl.EndAllocatedBytes, s.Requested())
	}
	for g := range 2 {
		st := d.stacked[g]
		if len(st.values) != len(tl.Points) {
			t.Fatalf("group %d: %d value rows for %d points", g, len(st.values), len(tl.Points))
		}
		for i, row := range st.values {
			var sum int64
			for _, v := range row {
				sum += v
			}
			if sum != tl.Points[i].AllocatedBytes {
				t.Fatalf("group %d, point %d: categories sum to %d, allocated %d", g, i, sum, tl.Points[i].AllocatedBytes)
			}
		}
	}
	if len(d.Advice) == 0 {
		t.Error("no advice for a fragmented snapshot with an OOM")
	}
}

func TestPyTorchPickle(t *testing.T) {
	r := analyzeFile(t, "snapshot_p4.pickle")
	if r.Format != "pickle" || len(r.Devices) != 2 {
		t.Fatalf("format %s, %d devices", r.Format, len(r.Devices))
	}
	d0, d1 := r.Devices[0], r.Devices[1]
	if d0.Source != "pytorch" || d0.HistoryTruncated || d0.Fragmentation.ReservedBytes != 23068672 || d0.Fragmentation.AllocatedBytes != 10524160 {
		t.Errorf("device 0: %+v", d0.Fragmentation)
	}
	// The innermost frame is the allocator's C++ code: the key skips it.
	if len(d0.ByStack) == 0 || strings.HasPrefix(d0.ByStack[0].Key, "c10::") {
		t.Errorf("by stack: %+v", d0.ByStack)
	}
	if !d1.HistoryTruncated || d1.Timeline.StartAllocatedBytes == 0 {
		t.Errorf("device 1: truncated %v, start %d", d1.HistoryTruncated, d1.Timeline.StartAllocatedBytes)
	}
}

func TestTextTrace(t *testing.T) {
	r := analyzeFile(t, "resnet50_train.trace.gz")
	if r.Format != "text" || len(r.Devices) != 1 {
		t.Fatalf("format %s, %d devices", r.Format, len(r.Devices))
	}
	d := r.Devices[0]
	tl := d.Timeline
	if d.HasState || tl.Axis != "event" || tl.PeakAllocatedBytes <= 0 || tl.PeakReservedBytes < tl.PeakAllocatedBytes || tl.EndReservedBytes != tl.PeakReservedBytes {
		t.Errorf("timeline %+v", tl)
	}
	if d.Fragmentation.ReservedBytes != tl.EndReservedBytes || len(d.OOMs) != 0 || len(d.ByRegion) != 0 {
		t.Errorf("device %+v", d)
	}
}

func TestUnreadableFiles(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, nil, 0o644)
	binary := filepath.Join(dir, "weights.bin")
	os.WriteFile(binary, []byte{0, 1, 2, 3, 0xff, 0xfe, 0, 0}, 0o644)
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte(`{"format": "something-else", "version": 1}`), 0o644)
	for _, p := range []string{filepath.Join("testdata", "corrupt.pickle"), empty, binary, other, filepath.Join(dir, "missing.pickle")} {
		_, err := File(p, Options{})
		if err == nil || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line naming the file", p, err)
		}
	}
}

// htmlNode is a parsed element of the page.
type htmlNode struct {
	name  string
	attrs map[string]string
	text  string
}

// parseHTML reads the page with encoding/xml in its lenient HTML mode.
// Script bodies are raw text in HTML, not markup: their '<' and '&' are
// escaped first so that the XML decoder reads them as text.
func parseHTML(t *testing.T, page []byte) []htmlNode {
	t.Helper()
	var esc bytes.Buffer
	rest := page
	for {
		i := bytes.Index(rest, []byte("<script"))
		if i < 0 {
			esc.Write(rest)
			break
		}
		j := i + bytes.IndexByte(rest[i:], '>') + 1
		k := bytes.Index(rest[j:], []byte("</script>"))
		if k < 0 {
			t.Fatal("unterminated script element")
		}
		esc.Write(rest[:j])
		body := strings.NewReplacer("&", "&amp;", "<", "&lt;").Replace(string(rest[j : j+k]))
		esc.WriteString(body)
		rest = rest[j+k:]
	}
	dec := xml.NewDecoder(&esc)
	dec.Strict = false
	dec.AutoClose = xml.HTMLAutoClose
	dec.Entity = xml.HTMLEntity
	var nodes []htmlNode
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the page does not parse: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			n := htmlNode{name: strings.ToLower(tk.Name.Local), attrs: map[string]string{}}
			for _, a := range tk.Attr {
				n.attrs[strings.ToLower(a.Name.Local)] = a.Value
			}
			nodes = append(nodes, n)
		case xml.CharData:
			if len(nodes) > 0 {
				nodes[len(nodes)-1].text += string(tk)
			}
		}
	}
	return nodes
}

func TestHTML(t *testing.T) {
	for _, name := range []string{"sim_train.json", "snapshot_p4.pickle", "resnet50_train.trace.gz"} {
		t.Run(name, func(t *testing.T) {
			r := analyzeFile(t, name)
			var buf bytes.Buffer
			if err := WriteHTML(&buf, r); err != nil {
				t.Fatal(err)
			}
			page := buf.Bytes()
			for _, bad := range []string{"http:", "https:", "//cdn", "@import", "file:", "data:"} {
				if bytes.Contains(page, []byte(bad)) {
					t.Errorf("the page contains %q: it must not load anything", bad)
				}
			}
			// CSS may refer to the page's own pattern, url(#id), only.
			for _, m := range regexp.MustCompile(`url\(([^)]*)\)`).FindAllSubmatch(page, -1) {
				if !bytes.HasPrefix(m[1], []byte("#")) {
					t.Errorf("the page refers to url(%s)", m[1])
				}
			}
			nodes := parseHTML(t, page)
			count := map[string]int{}
			var blocks, tips, bands int
			var data string
			for _, n := range nodes {
				count[n.name]++
				switch n.name {
				case "script":
					if _, ok := n.attrs["src"]; ok {
						t.Error("a script with src")
					}
					if n.attrs["id"] == "vram-data" {
						data = n.text
					}
				case "link", "img", "iframe", "object", "embed":
					t.Errorf("a <%s> element", n.name)
				case "rect":
					if strings.Contains(n.attrs["class"], "blk") {
						blocks++
					}
				case "path":
					if strings.Contains(n.attrs["class"], "band") {
						bands++
					}
				}
				if _, ok := n.attrs["data-tip"]; ok {
					tips++
				}
				for k, v := range n.attrs {
					if k == "href" || k == "src" || strings.HasPrefix(k, "on") {
						t.Errorf("<%s %s=%q>", n.name, k, v)
					}
				}
			}
			var want int
			for _, d := range r.Devices {
				want += d.Blocks
			}
			if blocks != want {
				t.Errorf("%d block rects, the file has %d blocks", blocks, want)
			}
			if count["section"] != len(r.Devices) || count["svg"] < len(r.Devices) || count["style"] != 1 || count["script"] != 2 {
				t.Errorf("element counts %v", count)
			}
			if bands == 0 || tips < blocks {
				t.Errorf("%d stacked bands, %d hover texts", bands, tips)
			}
			var parsed map[string]deviceData
			if err := json.Unmarshal([]byte(data), &parsed); err != nil || len(parsed) != len(r.Devices) {
				t.Errorf("page data: %v, %d devices", err, len(parsed))
			}
			if name == "sim_train.json" && count["circle"] != 1 {
				t.Errorf("%d OOM markers, want 1", count["circle"])
			}
		})
	}
}

func TestWriteText(t *testing.T) {
	r := analyzeFile(t, "sim_train.json")
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"internal fragmentation", "external fragmentation", "out of memory at event", "live memory by region", "optimizer", "largest live allocations"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}

func TestOptions(t *testing.T) {
	r, err := File(filepath.Join("testdata", "sim_train.json"), Options{Top: 3, TimelinePoints: 50})
	if err != nil {
		t.Fatal(err)
	}
	d := r.Devices[0]
	if len(d.ByRegion) > 3 || len(d.Largest) != 3 || len(d.Timeline.Points) > 50 || len(d.stacked[0].names) > 4 {
		t.Errorf("top 3 / 50 points: %d regions, %d largest, %d points, %d categories", len(d.ByRegion), len(d.Largest), len(d.Timeline.Points), len(d.stacked[0].names))
	}
}

// TestFragmentationExpandable checks what EmptyCache can return from
// expandable segments: the whole pages (2 MiB small, 20 MiB large, from
// the segment's address) inside free blocks, as PyTorch unmaps them; and
// that the advice does not suggest expandable segments to a run that has
// them.
func TestFragmentationExpandable(t *testing.T) {
	const mib = 1 << 20
	const base = 0x7f0000000000
	seg := func(pool string, expandable bool, blocks ...trace.Block) trace.Segment {
		s := trace.Segment{Addr: base, Pool: pool, Expandable: expandable, Blocks: blocks}
		addr := uint64(base)
		for i := range s.Blocks {
			s.Blocks[i].Addr = addr
			addr += uint64(s.Blocks[i].Size)
			s.Size += s.Blocks[i].Size
		}
		return s
	}
	live := func(size int64) trace.Block {
		return trace.Block{Size: size, Requested: size, State: trace.StateActiveAllocated}
	}
	free := func(size int64) trace.Block { return trace.Block{Size: size, State: trace.StateInactive} }
	tests := []struct {
		name              string
		source, policy    string
		seg               trace.Segment
		split, releasable int64
		advice            string // a piece of the first advice, "" for none
	}{
		{"pytorch large, pages inside", "pytorch", "", seg(trace.PoolLarge, true, live(20*mib), free(960*mib), live(20*mib)),
			0, 960 * mib, "would return it"},
		{"pytorch large, page shared with live blocks", "pytorch", "", seg(trace.PoolLarge, true, live(10*mib), free(600*mib), live(30*mib)),
			20 * mib, 580 * mib, "would return it"},
		{"pytorch large, no whole page", "pytorch", "", seg(trace.PoolLarge, true, live(15*mib), free(19*mib), live(6*mib)),
			19 * mib, 0, ""},
		{"pytorch small, 2 MiB pages", "pytorch", "", seg(trace.PoolSmall, true, live(mib), free(5*mib), live(2*mib)),
			mib, 4 * mib, ""},
		{"pytorch wholly free", "pytorch", "", seg(trace.PoolLarge, true, free(400*mib)), 0, 400 * mib, "would return it"},
		{"vram under policy:pytorch", "vram", "pytorch+expandable_segments", seg(trace.PoolLarge, true, live(20*mib), free(960*mib), live(20*mib)),
			0, 960 * mib, "would return it"},
		{"vram's policy: mappings unknown", "vram", "vram", seg(trace.PoolLarge, true, live(20*mib), free(960*mib), live(20*mib)),
			960 * mib, 0, "already expandable"},
		{"fixed segment", "pytorch", "", seg(trace.PoolLarge, false, live(20*mib), free(960*mib), live(20*mib)),
			960 * mib, 0, "expandable_segments:True"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &trace.Snapshot{Segments: []trace.Segment{tc.seg}, Truncated: true,
				Meta: map[string]string{trace.MetaSource: tc.source}}
			if tc.policy != "" {
				s.Meta["vram.policy"] = tc.policy
			}
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			d, err := analyzeSnapshot(s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			f := d.Fragmentation
			if f.SplitFreeBytes != tc.split || f.ReleasableBytes != tc.releasable {
				t.Errorf("split free %d, releasable %d; want %d, %d", f.SplitFreeBytes, f.ReleasableBytes, tc.split, tc.releasable)
			}
			if f.ExternalBytes != f.PendingFreeBytes+f.SplitFreeBytes+f.ReleasableBytes {
				t.Errorf("external %d != pending %d + split free %d + releasable %d", f.ExternalBytes, f.PendingFreeBytes, f.SplitFreeBytes, f.ReleasableBytes)
			}
			switch {
			case tc.advice == "" && len(d.Advice) > 0:
				t.Errorf("advice %q, want none", d.Advice)
			case tc.advice != "" && (len(d.Advice) == 0 || !strings.Contains(d.Advice[0], tc.advice)):
				t.Errorf("advice %q, want it to say %q", d.Advice, tc.advice)
			}
			if tc.seg.Expandable {
				for _, a := range d.Advice {
					if strings.Contains(a, "expandable_segments:True") {
						t.Errorf("advice %q suggests expandable segments to segments that are expandable", a)
					}
				}
			}
		})
	}
}

// TestTimelineWithoutHistory checks that a snapshot without history has a
// timeline that starts, peaks and ends at its own state, allocated memory
// as well as reserved.
func TestTimelineWithoutHistory(t *testing.T) {
	const mib = 1 << 20
	seg := trace.Segment{Addr: 1 << 30, Size: 20 * mib, Pool: trace.PoolLarge, Blocks: []trace.Block{
		{Addr: 1 << 30, Size: 2 * mib, Requested: 3 * mib / 2, State: trace.StateActiveAllocated},
		{Addr: 1<<30 + 2*mib, Size: 18 * mib, State: trace.StateInactive},
	}}
	tests := []struct {
		name                string
		history             []trace.Event
		allocated, reserved int64
	}{
		{"no history", nil, 3 * mib / 2, 20 * mib},
		{"empty history", []trace.Event{}, 3 * mib / 2, 20 * mib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &trace.Snapshot{Segments: []trace.Segment{seg}, History: tc.history, Truncated: true}
			d, err := analyzeSnapshot(s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			tl := d.Timeline
			for _, v := range []struct {
				name      string
				allocated int64
				reserved  int64
			}{
				{"start", tl.StartAllocatedBytes, tl.StartReservedBytes},
				{"peak", tl.PeakAllocatedBytes, tl.PeakReservedBytes},
				{"end", tl.EndAllocatedBytes, tl.EndReservedBytes},
			} {
				if v.allocated != tc.allocated || v.reserved != tc.reserved {
					t.Errorf("%s: allocated %d, reserved %d; want %d, %d", v.name, v.allocated, v.reserved, tc.allocated, tc.reserved)
				}
			}
		})
	}
}

// TestWriteHTMLFileErrors checks that a page that cannot be written names
// the file asked for (not a temporary one) and leaves nothing behind.
func TestWriteHTMLFileErrors(t *testing.T) {
	dir := t.TempDir()
	rep := &Report{}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"no name", "", "no file name"},
		{"missing directory", filepath.Join(dir, "missing", "run.html"), filepath.Join(dir, "missing", "run.html")},
		{"a directory", dir, dir + ": is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteHTMLFile(tc.path, rep)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), ".html.") {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestGroupsAddUp checks that the groups listed by region and by
// allocating code, with the rest that Options.Top leaves out, add up to
// the live allocations, and that the text report says what was left out.
func TestGroupsAddUp(t *testing.T) {
	tests := []struct {
		file string
		top  int
	}{
		{"sim_train.json", 1},
		{"sim_train.json", 2},
		{"sim_train.json", 1000},
		{"pytorch_train_default.pickle.gz", 1},
		{"pytorch_train_default.pickle.gz", 3},
		{"pytorch_oom_train.pickle.gz", 2},
		{"snapshot_p4.pickle", 1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/top%d", tc.file, tc.top), func(t *testing.T) {
			r, err := File(filepath.Join("testdata", tc.file), Options{Top: tc.top})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range r.Devices {
				if !d.HasState {
					continue
				}
				for _, l := range []struct {
					name string
					gs   []Group
					rest Rest
				}{{"region", d.ByRegion, d.ByRegionRest}, {"stack", d.ByStack, d.ByStackRest}} {
					sum := l.rest.Bytes
					for _, g := range l.gs {
						sum += g.Bytes
					}
					if sum != d.Fragmentation.AllocatedBytes {
						t.Errorf("device %d by %s: groups and rest sum to %d, allocated is %d", d.Device, l.name, sum, d.Fragmentation.AllocatedBytes)
					}
					if len(l.gs) > tc.top || (l.rest.Groups > 0 && len(l.gs) != tc.top) {
						t.Errorf("device %d by %s: %d listed, rest %+v, top %d", d.Device, l.name, len(l.gs), l.rest, tc.top)
					}
				}
				var buf bytes.Buffer
				if err := r.WriteText(&buf); err != nil {
					t.Fatal(err)
				}
				if more := d.ByStackRest.Groups; more > 0 && !strings.Contains(buf.String(), fmt.Sprintf("%d more (--top", more)) {
					t.Errorf("the text report does not say %d groups were left out:\n%s", more, buf.String())
				}
			}
		})
	}
}

// TestAnalyzeNilFile: a nil file is an error, not a panic.
func TestAnalyzeNilFile(t *testing.T) {
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("panicked: %v", r)
			}
		}()
		_, err = Analyze(nil, Options{})
	}()
	if err == nil || !strings.Contains(err.Error(), "nil file") {
		t.Fatalf("Analyze(nil): %v, want an error saying the file is nil", err)
	}
}
