package analyze

import (
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/vramgo/vram/memory/trace"

	"github.com/vramgo/vram/internal/units"
)

// The page's parts, hand-written for this package: a template, a style
// sheet and a small script. Nothing is fetched when the page is viewed.
var (
	//go:embed page.html.tmpl
	pageTemplate string
	//go:embed page.css
	pageCSS string
	//go:embed page.js
	pageJS string
)

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"bytes": units.Compact,
	"pct":   func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"frame": frameString,
	"framefull": func(f trace.Frame) string {
		fn, file := clipText(f.Function, maxFrameText), clipText(f.File, maxFrameText)
		if f.File == "" || f.File == "??" {
			return fn
		}
		if f.Line > 0 {
			return fmt.Sprintf("%s (%s:%d)", fn, file, f.Line)
		}
		return fmt.Sprintf("%s (%s)", fn, file)
	},
	"headframes": func(fs []trace.Frame) []trace.Frame { return fs[:min(len(fs), maxStackFrames)] },
	"moreframes": func(fs []trace.Frame) int { return max(len(fs)-maxStackFrames, 0) },
	"clip":       func(s string) string { return clipText(s, maxFrameText) },
	"hex":        func(a uint64) string { return fmt.Sprintf("0x%x", a) },
}).Parse(pageTemplate))

// palette colours the categories of a stacked timeline and of the segment
// map, bottom first; the last entries are for "other" and for memory held
// before the history began.
var palette = []string{
	"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
	"#b07aa1", "#ff9da7", "#9c755f", "#86bcb6", "#8cd17d", "#d4a6c8",
}

const (
	colorOther  = "#a9a9a9"
	colorBefore = "#6b6b6b"
)

// Geometry of the charts, in CSS pixels.
const (
	chartW      = 1240
	timelineH   = 340
	samplesH    = 200
	marginL     = 78
	marginR     = 16
	marginT     = 14
	marginB     = 36
	segRowH     = 12
	segRowGap   = 4
	segLabelW   = 190
	segMinW     = 140
	maxSegments = 400
	// maxBlockRects bounds the blocks the segment map draws one by one:
	// past it, blocks narrower than a cell of the row are drawn merged,
	// a rect for each run of them, so the map holds at most about
	// maxBlockRects+maxSegments rects whatever the file holds.
	maxBlockRects = 5000
	// maxStackFrames bounds the frames a page lists of one stack; a
	// longer stack says how many more --json gives.
	maxStackFrames = 500
	// maxFrameText bounds the characters of a frame's text on the page.
	maxFrameText = 400
	// maxSamplePoints bounds the samples of a Recorder drawn one by one:
	// past it, each pixel column draws its least and most value.
	maxSamplePoints = 2 * (chartW - marginL - marginR)
)

// WriteHTML writes r as one self-contained HTML page: for each device the
// memory timeline stacked by region or by allocating code (hover shows the
// largest live allocation under the cursor), out-of-memory markers, the
// segment map (each segment a bar, its blocks coloured by state and
// category), and the tables of the text report. The page loads nothing:
// its style, script and data are inline, its charts inline SVG.
//
// The page's size is bounded whatever the file holds: past 5000 blocks the
// segment map draws runs of blocks too narrow to see as one rect each, the
// chart of a Recorder's samples draws at most two points (the least and
// the most) per pixel column, a stack lists at most 500 frames (and how
// many more there are), and a name or file longer than 400 bytes is cut; with the default Options a
// page stays within a few MiB.
func WriteHTML(w io.Writer, r *Report) error {
	v := pageView{File: r.File, Format: r.Format, CSS: template.CSS(pageCSS + categoryCSS()), JS: template.JS(pageJS)}
	data := map[string]any{}
	for i, d := range r.Devices {
		dv, dd := deviceView(i, d)
		v.Devices = append(v.Devices, dv)
		data[dv.ID] = dd
	}
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	v.Data = template.JS(b) // json.Marshal escapes <, > and &: safe inside a script element
	return pageTmpl.Execute(w, v)
}

// WriteHTMLFile writes the page of [WriteHTML] to path. A regular file
// is replaced whole (through a temporary file renamed over it), keeping
// its permissions; a symbolic link's target is written and the link kept;
// a device or named pipe (/dev/stdout) is written in place.
func WriteHTMLFile(path string, r *Report) error {
	return writeFileAtomic(path, func(w io.Writer) error { return WriteHTML(w, r) })
}

// clipText cuts s to at most n bytes, at a rune boundary, marking the cut
// with an ellipsis and the bytes left out.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return fmt.Sprintf("%s… (%d more bytes)", s[:i], len(s)-i)
}

// categoryCSS colours category k of mode m: .mode{m} .k{m}-{k}.
func categoryCSS() string {
	var b strings.Builder
	for m := range 2 {
		for k := 0; k <= maxCategories+2; k++ {
			fmt.Fprintf(&b, ".mode%d .k%d-%d{fill:%s}\n", m, m, k, categoryColor(k))
		}
	}
	return b.String()
}

// categoryColor is the colour of category k: the palette, then "other"
// (k == maxCategories) and "before the history" (k > maxCategories).
func categoryColor(k int) string {
	switch {
	case k < len(palette) && k < maxCategories:
		return palette[k]
	case k == maxCategories:
		return colorOther
	}
	return colorBefore
}

// colorIndex maps a category's position in a stacked timeline's names to
// its colour index.
func colorIndex(names []string, i int) int {
	switch names[i] {
	case "other":
		return maxCategories
	case "(before the history)":
		return maxCategories + 1
	}
	return i
}

type pageView struct {
	File, Format string
	Devices      []deviceViewT
	CSS          template.CSS
	JS           template.JS
	Data         template.JS
}

type deviceViewT struct {
	ID       string
	D        *Device
	Cards    []card
	Timeline timelineView
	Legends  [2][]legendItem
	Segments segmapView
	Samples  *samplesView
	OOMs     []OOM
}

type card struct{ Label, Value, Note string }

type legendItem struct {
	Class, Label, Peak string
}

type tick struct {
	Pos   float64
	Label string
}

type areaView struct {
	D, Class string
}

type markerView struct {
	X   float64
	Tip string
}

type timelineView struct {
	W, H, PlotX, PlotY, PlotW, PlotH float64
	Areas                            [2][]areaView
	Reserved, Allocated              string
	YTicks, XTicks                   []tick
	OOMs                             []markerView
	XLabel                           string
	Empty                            bool
}

type blockView struct {
	X, W  float64
	Class string
	Tip   string
}

type segRow struct {
	Y, W   float64
	Label  string
	Tip    string
	Blocks []blockView
}

type segmapView struct {
	W, H float64
	Rows []segRow
	More int
	None string
}

type samplesView struct {
	W, H, PlotX, PlotY, PlotW, PlotH float64
	Allocated, Reserved              string
	YTicks, XTicks                   []tick
	Count                            int
}

// deviceData is what the page's script reads for one device's hover text.
type deviceData struct {
	PlotX  float64     `json:"plotX"`
	PlotW  float64     `json:"plotW"`
	PlotY  float64     `json:"plotY"`
	PlotH  float64     `json:"plotH"`
	XMax   float64     `json:"xmax"`
	YMax   float64     `json:"ymax"`
	Axis   string      `json:"axis"`
	X      []int64     `json:"x"`
	Alloc  []int64     `json:"alloc"`
	Res    []int64     `json:"res"`
	Groups []groupData `json:"groups"`
}

type groupData struct {
	Names  []string     `json:"names"`
	Colors []int        `json:"colors"`
	Values [][]int64    `json:"values"`
	Spans  [][]spanData `json:"spans"`
}

type spanData struct {
	Size  int64  `json:"s"`
	Start int64  `json:"a"`
	End   int64  `json:"b"`
	Label string `json:"l"`
}

func deviceView(i int, d *Device) (deviceViewT, deviceData) {
	v := deviceViewT{ID: fmt.Sprintf("dev%d", i), D: d, OOMs: d.OOMs}
	f := d.Fragmentation
	v.Cards = []card{
		{"Reserved", units.Compact(f.ReservedBytes), "held from the device"},
		{"Allocated", units.Compact(f.AllocatedBytes), "held by live tensors"},
		{"Internal waste", units.Compact(f.InternalBytes), pctOf(f.InternalFraction) + " of allocated: rounding, splitting"},
		{"Reserved, unallocated", units.Compact(f.ExternalBytes), pctOf(f.ExternalFraction) + " of reserved: cache, pending frees"},
		{"Largest free block", units.Compact(f.LargestFreeBlockBytes), fmt.Sprintf("%d free blocks", f.FreeBlocks)},
		{"Peak allocated", units.Compact(d.Timeline.PeakAllocatedBytes), "over the history (requested sizes)"},
		{"Peak reserved", units.Compact(d.Timeline.PeakReservedBytes), "over the history"},
		{"Out of memory", fmt.Sprint(d.OOMEvents), "events in the history"},
	}
	if !d.HasState {
		v.Cards = append(v.Cards[5:7], v.Cards[7])
	} else if f.PrivatePoolBytes > 0 {
		v.Cards = append(v.Cards, card{"Private pools", units.Compact(f.PrivatePoolBytes),
			units.Compact(f.PrivatePoolAllocatedBytes) + " held: CUDA graphs, MemPool"})
	}
	var dd deviceData
	v.Timeline, dd = timelineChart(d)
	for g := range 2 {
		st := &d.stacked[g]
		for k := len(st.names) - 1; k >= 0; k-- { // legend top-down, like the stack
			var peak int64
			for _, vals := range st.values {
				peak = max(peak, vals[k])
			}
			v.Legends[g] = append(v.Legends[g], legendItem{
				Class: fmt.Sprintf("k%d-%d", g, colorIndex(st.names, k)), Label: st.names[k], Peak: units.Compact(peak)})
		}
	}
	v.Segments = segmentMap(d)
	v.Samples = samplesChart(d.Samples)
	return v, dd
}

func pctOf(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// niceStep returns a round step (1, 2 or 5 times a power of ten, or a
// power of two times 1 MiB for bytes) for about n ticks over span.
func niceStep(span float64, n int, binary bool) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	if binary {
		step := float64(1 << 20)
		for step < raw {
			step *= 2
		}
		return step
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// xLabel formats an x value of the axis: microseconds as µs, ms, s or
// minutes, event indexes as numbers.
func xLabel(axis string, x float64) string {
	if axis != "time_us" {
		return fmt.Sprintf("%.0f", x)
	}
	r3 := func(v float64) float64 { return math.Round(v*1000) / 1000 }
	switch {
	case x == 0:
		return "0"
	case x < 1e3:
		return fmt.Sprintf("%g µs", r3(x))
	case x < 1e6:
		return fmt.Sprintf("%g ms", r3(x/1e3))
	case x < 120e6:
		return fmt.Sprintf("%g s", r3(x/1e6))
	}
	return fmt.Sprintf("%.1f min", x/60e6)
}

func timelineChart(d *Device) (timelineView, deviceData) {
	tv := timelineView{W: chartW, H: timelineH, PlotX: marginL, PlotY: marginT,
		PlotW: chartW - marginL - marginR, PlotH: timelineH - marginT - marginB}
	tl := d.Timeline
	tv.XLabel = "event"
	if tl.Axis == "time_us" {
		tv.XLabel = "time"
	}
	dd := deviceData{PlotX: tv.PlotX, PlotW: tv.PlotW, PlotY: tv.PlotY, PlotH: tv.PlotH, Axis: tl.Axis}
	if len(tl.Points) == 0 {
		tv.Empty = true
		return tv, dd
	}
	xmax := float64(tl.Points[len(tl.Points)-1].X)
	if xmax <= 0 {
		xmax = 1
	}
	ymax := float64(max(tl.PeakReservedBytes, tl.PeakAllocatedBytes, 1))
	step := niceStep(ymax, 5, true)
	ymax = math.Ceil(ymax/step) * step
	px := func(x float64) float64 { return tv.PlotX + x/xmax*tv.PlotW }
	py := func(y float64) float64 { return tv.PlotY + tv.PlotH - y/ymax*tv.PlotH }
	for y := 0.0; y <= ymax+1; y += step {
		tv.YTicks = append(tv.YTicks, tick{Pos: round1(py(y)), Label: units.Compact(int64(y))})
	}
	xs := niceStep(xmax, 8, false)
	for x := 0.0; x <= xmax; x += xs {
		tv.XTicks = append(tv.XTicks, tick{Pos: round1(px(x)), Label: xLabel(tl.Axis, x)})
	}
	dd.XMax, dd.YMax = xmax, ymax
	for _, p := range tl.Points {
		dd.X = append(dd.X, p.X)
		dd.Alloc = append(dd.Alloc, p.AllocatedBytes)
		dd.Res = append(dd.Res, p.ReservedBytes)
	}

	// Stacked areas: each category's band between the sum below it and
	// the sum including it, drawn as steps (memory holds until the next
	// point).
	for g := range 2 {
		st := &d.stacked[g]
		gd := groupData{Names: st.names, Values: st.values}
		lower := make([]float64, len(tl.Points))
		for k := range st.names {
			upper := make([]float64, len(tl.Points))
			var any bool
			for i := range tl.Points {
				upper[i] = lower[i] + float64(st.values[i][k])
				any = any || st.values[i][k] > 0
			}
			if any {
				tv.Areas[g] = append(tv.Areas[g], areaView{
					D:     bandPath(tl.Points, lower, upper, px, py, xmax),
					Class: fmt.Sprintf("band k%d-%d", g, colorIndex(st.names, k)),
				})
			}
			lower = upper
			gd.Colors = append(gd.Colors, colorIndex(st.names, k))
			var spans []spanData
			for _, sp := range st.allocs[k] {
				spans = append(spans, spanData{Size: sp.size, Start: sp.start, End: sp.end, Label: sp.label})
			}
			gd.Spans = append(gd.Spans, spans)
		}
		dd.Groups = append(dd.Groups, gd)
	}
	tv.Reserved = stepLine(tl.Points, func(p Point) int64 { return p.ReservedBytes }, px, py, xmax)
	tv.Allocated = stepLine(tl.Points, func(p Point) int64 { return p.AllocatedBytes }, px, py, xmax)
	for _, o := range d.OOMs {
		x := 0.0
		if tl.Axis == "time_us" && d.HistoryEvents > 0 {
			// Find the point of the OOM's event, or the nearest before it.
			i := sort.Search(len(tl.Points), func(i int) bool { return tl.Points[i].Event > o.Event }) - 1
			if i >= 0 {
				x = float64(tl.Points[i].X)
			}
		} else {
			x = float64(o.Event)
		}
		tv.OOMs = append(tv.OOMs, markerView{X: round1(px(x)), Tip: oomTip(o)})
	}
	return tv, dd
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// bandPath draws the region between lower and upper as a closed step
// path.
func bandPath(pts []Point, lower, upper []float64, px, py func(float64) float64, xmax float64) string {
	var b strings.Builder
	next := func(i int) float64 {
		if i+1 < len(pts) {
			return float64(pts[i+1].X)
		}
		return xmax
	}
	for i, p := range pts {
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&b, "%s%.1f %.1fH%.1f", cmd, px(float64(p.X)), py(upper[i]), px(next(i)))
	}
	for i := len(pts) - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "L%.1f %.1fH%.1f", px(next(i)), py(lower[i]), px(float64(pts[i].X)))
	}
	b.WriteString("Z")
	return b.String()
}

// stepLine draws one series as a step line.
func stepLine(pts []Point, val func(Point) int64, px, py func(float64) float64, xmax float64) string {
	var b strings.Builder
	for i, p := range pts {
		end := xmax
		if i+1 < len(pts) {
			end = float64(pts[i+1].X)
		}
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&b, "%s%.1f %.1fH%.1f", cmd, px(float64(p.X)), py(float64(val(p))), px(end))
	}
	return b.String()
}

// segmentMap lays out a snapshot's segments, one bar per segment in
// address order, each as wide as its size allows (at least segMinW), its
// blocks coloured by state and, when allocated, by category.
func segmentMap(d *Device) segmapView {
	v := segmapView{W: chartW}
	s := d.snap
	if s == nil {
		v.None = "A text trace holds events only: there is no segment map to draw."
		return v
	}
	if len(s.Segments) == 0 {
		v.None = "The snapshot holds no segment: the allocator reserved nothing."
		return v
	}
	memo := newStackMemo(s)
	var maxSize int64
	for _, seg := range s.Segments {
		maxSize = max(maxSize, seg.Size)
	}
	segs := s.Segments
	if len(segs) > maxSegments {
		v.More = len(segs) - maxSegments
		segs = segs[:maxSegments]
	}
	catOf := [2]map[string]int{{}, {}}
	for g := range 2 {
		for k, n := range d.stacked[g].names {
			catOf[g][n] = colorIndex(d.stacked[g].names, k)
		}
	}
	lookup := func(g int, key string) int {
		if k, ok := catOf[g][key]; ok {
			return k
		}
		return maxCategories // drawn as "other"
	}
	avail := float64(chartW - segLabelW - marginR)
	width := func(seg trace.Segment) float64 {
		return math.Max(avail*float64(seg.Size)/float64(maxSize), segMinW)
	}
	// cell is the width under which blocks are merged: 0 (none merged)
	// when every block fits the budget.
	var blocks int
	var rowsW float64
	for _, seg := range segs {
		blocks += len(seg.Blocks)
		rowsW += width(seg)
	}
	cell := 0.0
	if blocks > maxBlockRects {
		cell = 2 * rowsW / maxBlockRects
	}
	y := 0.0
	for _, seg := range segs {
		w := width(seg)
		row := segRow{Y: y, W: round1(w),
			Label: fmt.Sprintf("%s %s%s", units.Compact(seg.Size), seg.Pool, map[bool]string{true: " exp", false: ""}[seg.Expandable]),
			Tip:   fmt.Sprintf("segment at 0x%x\n%s, %s pool, stream %d%s", seg.Addr, units.Compact(seg.Size), seg.Pool, seg.Stream, map[bool]string{true: ", expandable", false: ""}[seg.Expandable])}
		scale := w / float64(seg.Size)
		draw := func(b trace.Block) blockView {
			bv := blockView{X: round1(float64(b.Addr-seg.Addr) * scale), W: math.Max(float64(b.Size)*scale, 0.6)}
			bv.W = math.Round(bv.W*100) / 100
			switch b.State {
			case trace.StateActiveAllocated:
				bv.Class = fmt.Sprintf("blk a k0-%d k1-%d", lookup(0, regionKey(b.Region)), lookup(1, memo.blockKey(b)))
				bv.Tip = blockTip("allocated", b, memo)
			case trace.StateActivePendingFree:
				bv.Class = "blk p"
				bv.Tip = blockTip("freed, waiting for a stream", b, memo)
			default:
				bv.Class = "blk f"
				bv.Tip = fmt.Sprintf("free (cached)\n%s at 0x%x", units.Compact(b.Size), b.Addr)
			}
			return bv
		}
		var run []trace.Block // narrow blocks not drawn yet
		flush := func() {
			switch len(run) {
			case 0:
				return
			case 1:
				row.Blocks = append(row.Blocks, draw(run[0]))
			default:
				row.Blocks = append(row.Blocks, mergedBlocks(run, seg.Addr, scale, draw))
			}
			run = run[:0]
		}
		for _, b := range seg.Blocks {
			if cell == 0 {
				row.Blocks = append(row.Blocks, draw(b))
				continue
			}
			if float64(b.Size)*scale >= cell {
				flush()
				row.Blocks = append(row.Blocks, draw(b))
				continue
			}
			run = append(run, b)
			if float64(b.Addr+uint64(b.Size)-run[0].Addr)*scale >= cell {
				flush()
			}
		}
		flush()
		v.Rows = append(v.Rows, row)
		y += segRowH + segRowGap
	}
	v.H = y
	return v
}

// mergedBlocks draws a run of adjacent blocks too narrow to draw one by
// one as a single rect, coloured as the largest of them, its hover text
// counting the run's blocks and bytes by state and describing the
// largest.
func mergedBlocks(run []trace.Block, segAddr uint64, scale float64, draw func(trace.Block) blockView) blockView {
	var largest trace.Block
	var n, bytes [3]int64 // allocated, pending free, free
	for _, b := range run {
		i := 2
		switch b.State {
		case trace.StateActiveAllocated:
			i = 0
		case trace.StateActivePendingFree:
			i = 1
		}
		n[i]++
		bytes[i] += b.Size
		if b.Size > largest.Size || largest.Size == 0 {
			largest = b
		}
	}
	bv := draw(largest)
	last := run[len(run)-1]
	bv.X = round1(float64(run[0].Addr-segAddr) * scale)
	bv.W = math.Round(math.Max(float64(last.Addr+uint64(last.Size)-run[0].Addr)*scale, 0.6)*100) / 100
	bv.Tip = fmt.Sprintf("%s too small to draw one by one, from 0x%x: %d allocated (%s), %d freed waiting for a stream (%s), %d free (%s); the largest:\n%s",
		nOf(len(run), "block", "blocks"), run[0].Addr, n[0], units.Compact(bytes[0]), n[1], units.Compact(bytes[1]), n[2], units.Compact(bytes[2]), bv.Tip)
	return bv
}

func blockTip(state string, b trace.Block, memo *stackMemo) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s\n%s at 0x%x (asked %s)", state, units.Compact(b.Size), b.Addr, units.Compact(b.Requested))
	if b.Region != "" {
		fmt.Fprintf(&sb, "\nregion %s", clipText(b.Region, maxFrameText))
	}
	sb.WriteString("\n")
	writeStackLines(&sb, b.Frames, 6, memo)
	return strings.TrimSuffix(sb.String(), "\n")
}

// samplesChart draws a Recorder's samples, nil when there are none.
func samplesChart(ss []Sample) *samplesView {
	if len(ss) == 0 {
		return nil
	}
	ss = slices.SortedStableFunc(slices.Values(ss), func(a, b Sample) int { return cmp.Compare(a.TimeUS, b.TimeUS) })
	v := &samplesView{W: chartW, H: samplesH, PlotX: marginL, PlotY: marginT, PlotW: chartW - marginL - marginR, PlotH: samplesH - marginT - marginB, Count: len(ss)}
	xmin := math.Min(float64(ss[0].TimeUS), 0)
	xmax := math.Max(float64(ss[len(ss)-1].TimeUS), xmin+1)
	var ymax float64 = 1
	for _, s := range ss {
		ymax = math.Max(ymax, float64(max(s.ReservedBytes, s.AllocatedBytes)))
	}
	step := niceStep(ymax, 4, true)
	ymax = math.Ceil(ymax/step) * step
	px := func(x float64) float64 { return v.PlotX + (x-xmin)/(xmax-xmin)*v.PlotW }
	py := func(y float64) float64 { return v.PlotY + v.PlotH - y/ymax*v.PlotH }
	for y := 0.0; y <= ymax+1; y += step {
		v.YTicks = append(v.YTicks, tick{Pos: round1(py(y)), Label: units.Compact(int64(y))})
	}
	xs := niceStep(xmax-xmin, 8, false)
	for x := math.Ceil(xmin/xs) * xs; x <= xmax; x += xs {
		v.XTicks = append(v.XTicks, tick{Pos: round1(px(x)), Label: xLabel("time_us", x)})
	}
	v.Allocated = sampleLine(ss, px, py, func(s Sample) int64 { return s.AllocatedBytes })
	v.Reserved = sampleLine(ss, px, py, func(s Sample) int64 { return s.ReservedBytes })
	return v
}

// sampleLine is the SVG path of val over samples sorted by time. Past
// maxSamplePoints samples it draws, for each pixel column of the plot, the
// column's least and most value in their order, so that the path stays
// bounded and keeps every peak.
func sampleLine(ss []Sample, px, py func(float64) float64, val func(Sample) int64) string {
	var b strings.Builder
	point := func(s Sample) {
		cmd := "L"
		if b.Len() == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&b, "%s%.1f %.1f", cmd, px(float64(s.TimeUS)), py(float64(val(s))))
	}
	if len(ss) <= maxSamplePoints {
		for _, s := range ss {
			point(s)
		}
		return b.String()
	}
	for i := 0; i < len(ss); {
		col := math.Floor(px(float64(ss[i].TimeUS)))
		lo, hi := i, i
		j := i + 1
		for ; j < len(ss) && math.Floor(px(float64(ss[j].TimeUS))) == col; j++ {
			if val(ss[j]) < val(ss[lo]) {
				lo = j
			}
			if val(ss[j]) > val(ss[hi]) {
				hi = j
			}
		}
		point(ss[min(lo, hi)])
		if lo != hi {
			point(ss[max(lo, hi)])
		}
		i = j
	}
	return b.String()
}

// oomTip is the hover text of an out-of-memory marker: what happened,
// where, and the checked fix.
func oomTip(o OOM) string {
	var b strings.Builder
	b.WriteString("Out of memory\n")
	b.WriteString(o.Explanation)
	if o.Site != "" {
		fmt.Fprintf(&b, "\nat %s", o.Site)
		if o.PrevSite != "" && o.PrevSite != o.Site {
			fmt.Fprintf(&b, "\nthe allocation before it was at %s", o.PrevSite)
		}
	} else if o.PrevSite != "" {
		fmt.Fprintf(&b, "\nthe stack holds only the allocator's frames; the allocation before it was at %s", o.PrevSite)
	}
	if o.Fix != "" {
		fmt.Fprintf(&b, "\n\nFix: %s", o.Fix)
	}
	return b.String()
}
