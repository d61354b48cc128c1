package analyze

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vramgo/vram/internal/units"
)

// TestTrialLimitsAgree checks that the text report, --json and the page
// say alike whether a setting's least limit was searched for or is only a
// limit under which it fits: the text said "fits under a limit of 2.10 GiB
// or less" where the page said "fits with a limit of 2.10 GiB" and --json
// gave min_limit_bytes, documented as the least limit, with nothing to
// tell the two apart.
func TestTrialLimitsAgree(t *testing.T) {
	r := analyzeFile(t, "pytorch_oom_fragmented.pickle.gz")
	var text, page bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	searched, upper := 0, 0
	for i, d := range r.Devices {
		for j, o := range d.OOMs {
			for k, tr := range o.Trials {
				if tr.MinLimitBytes == 0 {
					continue
				}
				if got := back.Devices[i].OOMs[j].Trials[k].MinLimitSearched; got != tr.MinLimitSearched {
					t.Errorf("%s: --json min_limit_searched %v, want %v", tr.Config, got, tr.MinLimitSearched)
				}
				cell := "<td><code>" + htmlEscape(tr.Config) + "</code></td><td>fits with a limit of " + units.Compact(tr.MinLimitBytes)
				if tr.MinLimitSearched {
					searched++
					if !strings.Contains(page.String(), cell+"</td>") {
						t.Errorf("%s: the page does not say it fits with a limit of %s", tr.Config, units.Compact(tr.MinLimitBytes))
					}
					continue
				}
				upper++
				if !strings.Contains(page.String(), cell+" or less</td>") {
					t.Errorf("%s: the page does not say %s or less, as the text does", tr.Config, units.Compact(tr.MinLimitBytes))
				}
				if !strings.Contains(text.String(), tr.Config+" fits under a limit of "+units.Bytes(tr.MinLimitBytes)+" or less") {
					t.Errorf("%s: the text does not say %s or less", tr.Config, units.Bytes(tr.MinLimitBytes))
				}
			}
		}
	}
	if searched == 0 || upper == 0 {
		t.Fatalf("%d trials searched, %d with a limit that fits only: the file no longer has both", searched, upper)
	}
}
