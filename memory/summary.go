package memory

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vramgo/vram/internal/printable"
	"github.com/vramgo/vram/internal/units"
)

// summaryWidth is the width of the Summary table in characters.
const summaryWidth = 81

// summaryRegions is how many regions the Summary lists by name; the rest
// are summed on one line.
const summaryRegions = 12

// Summary returns a table of the allocator's statistics in the manner of
// torch.cuda.memory_summary(): for allocated, active, requested, reserved
// and inactive-split memory and the matching block counts, the current and
// peak values and the totals allocated and freed, split by pool; the
// oversize counts; then the live allocations by region label, retries,
// OOMs, device calls and driver time. Bytes are in binary units.
func (a *Allocator) Summary() string {
	a.mu.Lock()
	s := a.stats
	policy := a.effectivePolicy()
	regions := a.regionsLocked()
	a.mu.Unlock()
	return formatSummary(&s, policy, regions)
}

// regionsLocked returns the live allocations (allocated blocks) by region
// label, largest first, then by label.
func (a *Allocator) regionsLocked() []RegionUsage {
	by := map[string]*RegionUsage{}
	for _, seg := range a.segs {
		for b := seg.first; b != nil; b = b.next {
			if b.state != stateAllocated {
				continue
			}
			r := by[b.region]
			if r == nil {
				r = &RegionUsage{Region: b.region}
				by[b.region] = r
			}
			r.Bytes += b.size
			r.Count++
		}
	}
	out := make([]RegionUsage, 0, len(by))
	for _, r := range by {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Region < out[j].Region
	})
	return out
}

// regionName returns how messages show a region label: "(unlabelled)" for
// "", control characters escaped, at most max characters (cut with "...").
func regionName(r string, max int) string {
	if r == "" {
		return "(unlabelled)"
	}
	r = printable.String(r)
	if rs := []rune(r); len(rs) > max {
		r = string(rs[:max-3]) + "..."
	}
	return r
}

func formatSummary(s *Stats, policy string, regions []RegionUsage) string {
	var b strings.Builder
	rule := func(c byte) { b.WriteString("|" + strings.Repeat(string(c), summaryWidth-2) + "|\n") }
	line := func(text string) { fmt.Fprintf(&b, "| %-*s |\n", summaryWidth-4, text) }
	rule('=')
	line(center("vram memory summary", summaryWidth-4))
	rule('-')
	line(fmt.Sprintf("policy: %s", policy))
	line(fmt.Sprintf("OOMs: %-10d alloc retries (cache flushed): %d", s.NumOOMs, s.NumAllocRetries))
	rule('=')
	row := func(name string, v [4]string) {
		fmt.Fprintf(&b, "| %-21s | %11s | %11s | %11s | %11s |\n", name, v[0], v[1], v[2], v[3])
	}
	row("Metric", [4]string{"Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed"})
	bytes := func(st Stat) [4]string {
		return [4]string{units.Bytes(st.Current), units.Bytes(st.Peak), units.Bytes(st.Allocated), units.Bytes(st.Freed)}
	}
	count := func(st Stat) [4]string {
		return [4]string{fmt.Sprint(st.Current), fmt.Sprint(st.Peak), fmt.Sprint(st.Allocated), fmt.Sprint(st.Freed)}
	}
	groups := []struct {
		name string
		a    *StatArray
		f    func(Stat) [4]string
	}{
		{"Allocated memory", &s.AllocatedBytes, bytes},
		{"Active memory", &s.ActiveBytes, bytes},
		{"Requested memory", &s.RequestedBytes, bytes},
		{"Reserved memory", &s.ReservedBytes, bytes},
		{"Inactive split memory", &s.InactiveSplitBytes, bytes},
		{"Allocations", &s.Allocation, count},
		{"Active allocs", &s.Active, count},
		{"Reserved segments", &s.Segment, count},
		{"Inactive split blocks", &s.InactiveSplit, count},
	}
	for _, g := range groups {
		rule('-')
		row(g.name, g.f(g.a[StatAll]))
		row("      from large pool", g.f(g.a[StatLargePool]))
		row("      from small pool", g.f(g.a[StatSmallPool]))
	}
	rule('-')
	row("Oversize allocations", count(s.OversizeAllocations))
	rule('-')
	row("Oversize GPU segments", count(s.OversizeSegments))
	rule('=')
	line("Live allocations by region")
	if len(regions) == 0 {
		line("  (none)")
	}
	for i, r := range regions {
		if i == summaryRegions-1 && len(regions) > summaryRegions {
			var rest RegionUsage
			for _, o := range regions[i:] {
				rest.Bytes += o.Bytes
				rest.Count += o.Count
			}
			line(fmt.Sprintf("  %-45s %11s in %7d blocks", fmt.Sprintf("%d more regions", len(regions)-i), units.Bytes(rest.Bytes), rest.Count))
			break
		}
		line(fmt.Sprintf("  %-45s %11s in %7d blocks", regionName(r.Region, 45), units.Bytes(r.Bytes), r.Count))
	}
	rule('-')
	line(fmt.Sprintf("device allocs: %d   device frees: %d   maps: %d   unmaps: %d",
		s.NumDeviceAlloc, s.NumDeviceFree, s.NumMaps, s.NumUnmaps))
	line(fmt.Sprintf("driver time: %.3f ms", float64(s.DriverTime.Microseconds())/1000))
	rule('=')
	return b.String()
}

// center pads s with blanks to width, s in the middle.
func center(s string, width int) string {
	pad := width - len(s)
	if pad <= 0 {
		return s
	}
	return strings.Repeat(" ", pad/2) + s + strings.Repeat(" ", pad-pad/2)
}
