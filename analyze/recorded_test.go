package analyze

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

// recordedScript is how the report shows the file of the user's code in
// the snapshots of memory/testdata/record_snapshots.py.
const recordedScript = "(testdata/record_snapshots.py:"

// TestRecordedPyTorch checks what a PyTorch user sees on the snapshots
// that PyTorch 2.11 recorded on an H200 with the default
// _record_memory_history() (stacks="all"; record_snapshots.py): every
// allocation attributed to a line of the script or, for the memory that
// autograd's threads allocate in backward, to the autograd function; the
// OOM to the script's line; and, under the limit the run had
// (pytorch_snapshots.json's allowed_bytes), the fix check's verdict in
// PYTORCH_CUDA_ALLOC_CONF's terms.
func TestRecordedPyTorch(t *testing.T) {
	tests := []struct {
		file    string
		oomSite string   // the OOM's Site, "" for a run without one
		live    []string // keys of live memory by allocating code
		text    []string // lines of the text report
		fix     []string // substrings of the fix under the recorded limit
		config  string   // its FixConfig
		missing int64    // its MissingBytes
	}{
		{file: "pytorch_oom_fragmented.pickle.gz", oomSite: "mib " + recordedScript + "59)",
			text: []string{"at mib " + recordedScript + "59)", "at run " + recordedScript + "109)"},
			fix: []string{"where policy:pytorch with PyTorch's default settings fails as the run did",
				"with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run peaks at 1.82 GiB, under the 2.00 GiB allowed",
				"max_split_size_mb:128 fits (peak 1.81 GiB)"},
			config: "expandable_segments:True"},
		{file: "pytorch_oom_missing.pickle.gz", oomSite: "mib " + recordedScript + "59)",
			text: []string{"at run " + recordedScript + "113)"},
			fix:  []string{"no setting can fit it: the tensors live at this point and this request take 2.25 GiB, more than the 2.00 GiB allowed", "252.00 MiB more memory is missing"},
			// 1200 and 600 MiB live and 500 MiB asked, under 2048 MiB
			missing: 252 * mib},
		{file: "pytorch_oom_train.pickle.gz", oomSite: "train_step " + recordedScript + "70)",
			live: []string{"train_step " + recordedScript + "70)", "AddmmBackward0 (autograd backward)"},
			text: []string{"at train_step " + recordedScript + "70)", "AddmmBackward0 (autograd backward)"},
			// The run gave 24 segments back under its limit: the replay
			// follows it only with the recorded segment addresses.
			fix:    []string{"where policy:pytorch with PyTorch's default settings fails as the run did", "with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run peaks at 1.48 GiB, under the 1.50 GiB allowed"},
			config: "expandable_segments:True"},
		{file: "pytorch_train_default.pickle.gz",
			live: []string{"train_step " + recordedScript + "70)", "AddmmBackward0 (autograd backward)"},
			text: []string{"train_step " + recordedScript + "70)", "AddmmBackward0 (autograd backward)"}},
	}
	meta := stacksAllSnapshots(t)
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			m, ok := meta[tc.file]
			if !ok {
				t.Fatalf("%s is not in testdata/pytorch_snapshots.json", tc.file)
			}
			path := filepath.Join("testdata", tc.file)
			f, err := trace.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			// Every allocation of the history: a line of the script, or
			// what ran in backward.
			for i, e := range f.Snapshots[0].History {
				if e.Action != trace.ActionAlloc {
					continue
				}
				site := siteString(e.Frames)
				if !strings.Contains(site, recordedScript) && !strings.HasSuffix(site, backwardNote) {
					t.Errorf("event %d (%d bytes) attributed to %q", i, e.Size, site)
				}
			}
			r, err := File(path, Options{Limit: m.AllowedBytes})
			if err != nil {
				t.Fatal(err)
			}
			d := r.Devices[0]
			keys := map[string]bool{}
			for _, g := range d.ByStack {
				keys[g.Key] = true
			}
			for _, k := range tc.live {
				if !keys[k] {
					t.Errorf("no live memory attributed to %q; groups %v", k, keys)
				}
			}
			var text bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.text {
				if !strings.Contains(text.String(), w) {
					t.Errorf("the text report lacks %q:\n%s", w, text.String())
				}
			}
			if tc.oomSite == "" {
				if len(d.OOMs) != 0 {
					t.Errorf("%d OOMs, want none", len(d.OOMs))
				}
				return
			}
			if len(d.OOMs) != 1 {
				t.Fatalf("%d OOMs, want 1", len(d.OOMs))
			}
			o := d.OOMs[0]
			if o.Site != tc.oomSite {
				t.Errorf("the OOM attributed to %q (before it %q), want %q", o.Site, o.PrevSite, tc.oomSite)
			}
			if o.LimitBytes != m.AllowedBytes {
				t.Errorf("limit %d, want the recorded %d", o.LimitBytes, m.AllowedBytes)
			}
			for _, w := range tc.fix {
				if !strings.Contains(o.Fix, w) {
					t.Errorf("the fix lacks %q:\n%s", w, o.Fix)
				}
			}
			if o.FixConfig != tc.config || o.MissingBytes != tc.missing {
				t.Errorf("FixConfig %q, MissingBytes %d; want %q, %d\n%s", o.FixConfig, o.MissingBytes, tc.config, tc.missing, o.Fix)
			}
			checkClaims(t, path, o)
		})
	}
}

// TestBackwardOOMSite checks the site of an OOM in the backward pass,
// whose stack PyTorch records on autograd's thread with C++ frames alone:
// the autograd function that asked, with the allocation before it, in
// the report, the text and the page. The stack is one that PyTorch 2.11
// recorded for an allocation of the backward pass, given to the OOM of
// pytorch_oom_train.pickle.gz.
func TestBackwardOOMSite(t *testing.T) {
	f, err := trace.Open(filepath.Join("testdata", "pytorch_oom_train.pickle.gz"))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Snapshots[0]
	var backward []trace.Frame
	for _, e := range s.History {
		if e.Action == trace.ActionAlloc && strings.HasPrefix(siteString(e.Frames), "AddmmBackward0") {
			backward = e.Frames
			break
		}
	}
	if backward == nil {
		t.Fatal("no allocation of AddmmBackward0 in the history")
	}
	oom := -1
	for i := range s.History {
		if s.History[i].Action == trace.ActionOOM {
			s.History[i].Frames = backward
			oom = i
		}
	}
	r, err := Analyze(f, Options{Limit: 3 << 29})
	if err != nil {
		t.Fatal(err)
	}
	o := r.Devices[0].OOMs[0]
	prev := ""
	for j := oom - 1; j >= 0; j-- {
		if s.History[j].Action == trace.ActionAlloc {
			prev = siteString(s.History[j].Frames)
			break
		}
	}
	if o.Site != "AddmmBackward0 (autograd backward)" || prev == "" || o.PrevSite != prev {
		t.Errorf("site %q, before it %q; want AddmmBackward0 (autograd backward), %q", o.Site, o.PrevSite, prev)
	}
	var text, page bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", text.String())
	for _, w := range []string{"    at AddmmBackward0 (autograd backward)\n", "    the allocation before it was at " + prev + "\n"} {
		if !strings.Contains(text.String(), w) {
			t.Errorf("the text lacks %q:\n%s", w, text.String())
		}
	}
	if strings.Contains(text.String(), "at torch::autograd") || strings.Contains(text.String(), "only the allocator's") {
		t.Errorf("the text names a C++ frame or says the stack is the allocator's:\n%s", text.String())
	}
	if !strings.Contains(page.String(), "at <code>AddmmBackward0 (autograd backward)</code>") {
		t.Error("the page does not name the autograd function")
	}
}

// TestRecordedPyTorchJSON checks that a PyTorch snapshot saved with
// json.dump (testdata/pickles_to_json.py) gets the report, text and HTML,
// of the pickle of the same dict, but for the format it names, and with
// the limit given as with none.
func TestRecordedPyTorchJSON(t *testing.T) {
	for _, name := range []string{"pytorch_oom_fragmented", "pytorch_v_oom_fragmented_python", "pytorch_v_oom_train_expandable", "pytorch_v_train_ring_wrapped"} {
		for _, opts := range []Options{{}, {Limit: 2 << 30}} {
			t.Run(name, func(t *testing.T) {
				report := func(file string) (*Report, string, string) {
					t.Helper()
					r, err := File(filepath.Join("testdata", file), opts)
					if err != nil {
						t.Fatal(err)
					}
					var text, page bytes.Buffer
					if err := r.WriteText(&text); err != nil {
						t.Fatal(err)
					}
					if err := WriteHTML(&page, r); err != nil {
						t.Fatal(err)
					}
					return r, text.String(), page.String()
				}
				pr, ptext, ppage := report(name + ".pickle.gz")
				jr, jtext, jpage := report(name + ".json.gz")
				if pr.Format != "pickle" || jr.Format != "pytorch-json" {
					t.Errorf("formats %q and %q", pr.Format, jr.Format)
				}
				if len(jr.Devices) == 0 || len(jr.Devices[0].OOMs) != len(pr.Devices[0].OOMs) {
					t.Fatalf("%d devices", len(jr.Devices))
				}
				same := func(s string) string {
					s = strings.ReplaceAll(s, name+".json.gz", name+".pickle.gz")
					return strings.ReplaceAll(s, "pytorch-json", "pickle")
				}
				if same(jtext) != ptext {
					t.Errorf("text report\n%s\nof the pickle:\n%s", jtext, ptext)
				}
				if same(jpage) != ppage {
					t.Errorf("the HTML pages differ")
				}
			})
		}
	}
}
