package analyze

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

// samplesPage analyses a vram snapshot holding samples and returns the
// page and the samples chart's allocated line.
func samplesPage(t *testing.T, samples string) (string, string) {
	t.Helper()
	s := &trace.Snapshot{Meta: map[string]string{MetaSamples: samples}}
	r, err := Analyze(&trace.File{Name: "rec.json", Kind: trace.KindJSON, Snapshots: []*trace.Snapshot{s}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)<svg class="chart samples".*?<path class="line alloc" d="([^"]*)"`).FindStringSubmatch(page.String())
	if m == nil {
		t.Fatal("the page has no samples chart")
	}
	return page.String(), m[1]
}

// TestSamplesChartBounded checks that the samples chart of the page draws
// a bounded number of points however many samples a recording holds,
// keeping each column's least and most value: a Recorder sampling every
// millisecond for an hour keeps 3.6 million samples, and the page, which
// says it stays within a few MiB whatever the file holds, drew each one
// (200,000 samples made a 6 MB page).
func TestSamplesChartBounded(t *testing.T) {
	const n = 200_000
	var b strings.Builder
	for i := range n {
		alloc := int64(1 << 30)
		if i == n/3 {
			alloc = 16 << 30 // one spike, to the top of the chart, which it must keep
		}
		fmt.Fprintf(&b, "%d:%d:%d:%d ", i*1000, alloc, 8<<30, alloc)
	}
	page, line := samplesPage(t, b.String())
	if len(page) > 1<<20 {
		t.Errorf("a page of %d bytes for %d samples", len(page), n)
	}
	points := strings.Count(line, "L") + 1
	if points > 4*chartW {
		t.Errorf("%d points drawn for %d samples", points, n)
	}
	// The spike reaches the top of the plot: y = marginT.
	if !strings.Contains(line, fmt.Sprintf(" %.1f", float64(marginT))) {
		t.Errorf("the spike to 16 GiB is lost: %.300s", line)
	}
}

// TestSamplesChartSmall checks that a few samples are drawn one by one, in
// the order of their times.
func TestSamplesChartSmall(t *testing.T) {
	_, line := samplesPage(t, "0:0:0:0 2000:100:100:100 1000:50:50:50")
	if got := strings.Count(line, "L") + 1; got != 3 {
		t.Fatalf("%d points, want 3: %s", got, line)
	}
	var xs []float64
	for _, m := range regexp.MustCompile(`[ML](-?[0-9.]+) `).FindAllStringSubmatch(line, -1) {
		x, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		xs = append(xs, x)
	}
	if len(xs) != 3 || !(xs[0] < xs[1] && xs[1] < xs[2]) {
		t.Errorf("points not in time order: %s", line)
	}
}

// TestSamplesUnreadable checks that a recording whose samples cannot be
// read says so, in the text, --json and the page, instead of dropping
// them without a word, and that the message is short and quotes the bad
// entry with its control characters escaped; negative times and sizes
// are unreadable too.
func TestSamplesUnreadable(t *testing.T) {
	tests := []struct{ name, samples, want string }{
		{"not a number", "0:1:2:3 1:2:x:4", `sample 2 "1:2:x:4"`},
		{"three fields", "0:1:2", `sample 1 "0:1:2": want time_us:allocated:reserved:requested`},
		{"negative size", "0:1:2:3 5:-1:2:3", `sample 2 "5:-1:2:3": negative`},
		{"negative time", "-5:1:2:3", `sample 1 "-5:1:2:3": negative`},
		{"long entry", "0:1:2:3 " + strings.Repeat("9", 1<<20) + ":\x1b", `more bytes`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &trace.Snapshot{Meta: map[string]string{MetaSamples: tc.samples}}
			r, err := Analyze(&trace.File{Name: "rec.json", Kind: trace.KindJSON, Snapshots: []*trace.Snapshot{s}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			d := r.Devices[0]
			if len(d.Samples) != 0 {
				t.Fatalf("%d samples kept", len(d.Samples))
			}
			if !strings.Contains(d.SamplesError, tc.want) || len(d.SamplesError) > 600 || strings.ContainsRune(d.SamplesError, 0x1b) {
				t.Fatalf("SamplesError %.700q, want it short, escaped, with %q", d.SamplesError, tc.want)
			}
			var text, page bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if err := WriteHTML(&page, r); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), "samples: "+d.SamplesError) {
				t.Errorf("the text does not say the samples are unreadable:\n%s", text.String())
			}
			if !strings.Contains(page.String(), htmlEscape(d.SamplesError)) {
				t.Error("the page does not say the samples are unreadable")
			}
		})
	}
}
