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
