package analyze

import (
	"bytes"
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

// variantScript is how the report shows the file of the user's code in
// the snapshots of memory/testdata/record_snapshot_variants.py.
const variantScript = "(testdata/record_snapshot_variants.py:"

// snapshotVariant is an entry of testdata/pytorch_snapshot_variants.json,
// written by memory/testdata/record_snapshot_variants.py on a GPU machine.
type snapshotVariant struct {
	AllocConf     string         `json:"alloc_conf"`
	History       map[string]any `json:"history"` // nil: none recorded
	AllowedBytes  int64          `json:"allowed_bytes"`
	ReservedBytes int64          `json:"reserved_bytes"`
	NumOOMs       int            `json:"num_ooms"`
	Segments      int            `json:"snapshot_segments"`
	Note          string         `json:"note"`
}

// snapshotVariants reads testdata/pytorch_snapshot_variants.json.
func snapshotVariants(t *testing.T) map[string]snapshotVariant {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "pytorch_snapshot_variants.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]snapshotVariant
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("testdata/pytorch_snapshot_variants.json: %v", err)
	}
	if len(v) == 0 {
		t.Fatal("testdata/pytorch_snapshot_variants.json lists no snapshot")
	}
	return v
}

// completeHistory reports that the history of h's arguments holds every
// event of the run: recorded from the start, and not a ring that wrapped.
func (v snapshotVariant) completeHistory(file string) bool {
	if v.History == nil {
		return false
	}
	if _, ok := v.History["max_entries"]; ok {
		return false
	}
	// record_snapshot_variants.py stops and starts the history of this
	// one mid-run.
	return !strings.Contains(file, "history_restarted")
}

// stacks reports that the history's events carry stacks: the default
// stacks="all", or "python", with events recorded in full
// (context="state" records stacks of the snapshot's blocks alone).
func (v snapshotVariant) stacks() bool {
	if v.History == nil || v.History["context"] == "state" {
		return false
	}
	s, ok := v.History["stacks"]
	return !ok || s == "all" || s == "python"
}

// TestSnapshotVariants checks the snapshots that PyTorch 2.11 recorded on
// an H100 under the settings users change (record_snapshot_variants.py)
// against what PyTorch itself counted when it dumped each one
// (pytorch_snapshot_variants.json): the reserved memory, the allocator
// setting, the out-of-memory errors, who allocated, and the fix check's
// verdicts for the two runs out of memory whose causes differ most.
func TestSnapshotVariants(t *testing.T) {
	// What each out-of-memory snapshot's OOM and fix say, under the
	// limit the run had, beside what every file gets.
	ooms := map[string]struct {
		explanation []string // substrings of the explanation
		notExpl     []string // substrings it must not have
		fix         []string // substrings of the fix
		notFix      []string // substrings it must not have
		config      string   // its FixConfig
	}{
		"pytorch_v_oom_device_capacity.pickle.gz": {
			explanation: []string{"The device was full"},
			notExpl:     []string{"a limit on this allocator stopped it", "The device had room"},
			fix:         []string{"no setting can fit it"},
		},
		// The device nearly full and 2.07 GiB cached in five 424 MiB
		// pieces beside live 600 MiB tensors: PyTorch's classic
		// "reserved but unallocated" OOM, which expandable segments fix.
		"pytorch_v_oom_device_fragmented.pickle.gz": {
			explanation: []string{"Free memory was enough in total (3.07 GiB) but in pieces"},
			notExpl:     []string{"a limit on this allocator stopped it", "The device had room"},
			fix: []string{"where policy:pytorch with PyTorch's default settings fails as the run did",
				"with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run peaks at 77.68 GiB, under the 78.66 GiB allowed"},
			config: "expandable_segments:True",
		},
		// Backward needs 2 MiB more than the 2 GiB - 1 B it was allowed:
		// nothing fits, and the sizes in the fix read apart.
		"pytorch_v_oom_backward.pickle.gz": {
			explanation: []string{"a limit on this allocator stopped it"},
			fix:         []string{"no setting can fit it: the tensors live at this point and this request take 2049.38 MiB, more than the 2048.00 MiB allowed", "2.00 MiB more memory is missing"},
		},
		// 130 KiB requests of the small pool under 512 MiB: its 2 MiB
		// segments keep freed pieces that the next size misses.
		"pytorch_v_oom_small_pool.pickle.gz": {
			explanation: []string{"a limit on this allocator stopped it"},
			fix:         []string{"with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run peaks at"},
			config:      "expandable_segments:True",
		},
		"pytorch_v_oom_fragmented_python.pickle.gz": {
			explanation: []string{"The device had room: a limit on this allocator stopped it"},
			fix:         []string{"with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run peaks at 1.82 GiB, under the 2.00 GiB allowed"},
			config:      "expandable_segments:True",
		},
		// The recorded garbage_collection_threshold:0.6 fails; vram's
		// policy with it fits, and is named so.
		"pytorch_v_oom_train_gc_threshold.pickle.gz": {
			explanation: []string{"The device had room: a limit on this allocator stopped it"},
			fix: []string{"where policy:pytorch with the recorded garbage_collection_threshold:0.6 fails as the run did",
				"with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,garbage_collection_threshold:0.6 this run peaks at 1.47 GiB, under the 1.50 GiB allowed",
				"policy:vram,garbage_collection_threshold:0.6 fits"},
			notFix: []string{"Also: garbage_collection_threshold:0.6 fits"},
			config: "expandable_segments:True,garbage_collection_threshold:0.6",
		},
	}
	variants := snapshotVariants(t)
	for file, v := range variants {
		t.Run(file, func(t *testing.T) {
			path := filepath.Join("testdata", file)
			f, err := trace.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if v.Segments == 0 && len(f.Snapshots) == 0 {
				// PYTORCH_NO_CUDA_MEMORY_CACHING=1: PyTorch's allocator
				// is bypassed and records nothing; the error says why
				// that may be.
				_, err := File(path, Options{})
				if err == nil || !strings.Contains(err.Error(), "PYTORCH_NO_CUDA_MEMORY_CACHING=1") {
					t.Errorf("an empty PyTorch snapshot: error %v, want one that names PYTORCH_NO_CUDA_MEMORY_CACHING=1", err)
				}
				return
			}
			if len(f.Snapshots) != 1 {
				t.Fatalf("%d devices, want 1", len(f.Snapshots))
			}
			s := f.Snapshots[0]
			if v.stacks() {
				memo := newStackMemo(s)
				for i, e := range s.History {
					if e.Action != trace.ActionAlloc {
						continue
					}
					if len(e.Frames) == 0 && v.History["stacks"] == "python" {
						// stacks="python" records no frame for
						// what autograd's thread allocates.
						if k := memo.stackKey(e.Frames); k != noPythonFrames {
							t.Errorf("event %d (%d bytes, no frames) attributed to %q", i, e.Size, k)
						}
						continue
					}
					site := siteString(e.Frames)
					if !strings.Contains(site, variantScript) && !strings.HasSuffix(site, backwardNote) {
						t.Errorf("event %d (%d bytes) attributed to %q", i, e.Size, site)
					}
				}
			}
			opts := Options{}
			if _, ok := ooms[file]; ok {
				opts.Limit = v.AllowedBytes
			}
			r, err := File(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Devices) != 1 {
				t.Fatalf("%d devices, want 1", len(r.Devices))
			}
			d := r.Devices[0]
			var text, page bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if err := WriteHTML(&page, r); err != nil {
				t.Fatal(err)
			}
			if text.Len() == 0 || page.Len() == 0 {
				t.Fatalf("text %d bytes, page %d bytes", text.Len(), page.Len())
			}
			if d.Segments != v.Segments {
				t.Errorf("%d segments, want the %d PyTorch listed", d.Segments, v.Segments)
			}
			// Only the run that switched expandable_segments on midway
			// holds segments of both kinds, and the report says so.
			changed := strings.Contains(file, "settings_changed")
			const changedNote = "expandable_segments changed while the run went on"
			if d.SettingsChanged != changed || strings.Contains(text.String(), changedNote) != changed ||
				strings.Contains(page.String(), changedNote) != changed {
				t.Errorf("SettingsChanged %v, in the text %v, on the page %v; want %v",
					d.SettingsChanged, strings.Contains(text.String(), changedNote), strings.Contains(page.String(), changedNote), changed)
			}
			// The dump came right after the stats, nothing in between,
			// except in the one dumped later (its note).
			if v.Note == "" && d.Fragmentation.ReservedBytes != v.ReservedBytes {
				t.Errorf("reserved %d, want PyTorch's %d", d.Fragmentation.ReservedBytes, v.ReservedBytes)
			}
			if v.AllocConf != "" {
				if d.Config != v.AllocConf {
					t.Errorf("config %q, want the recorded %q", d.Config, v.AllocConf)
				}
				header, _, _ := strings.Cut(text.String()[strings.Index(text.String(), "Device 0"):], "\n")
				if !strings.Contains(header, v.AllocConf) {
					t.Errorf("the device's header %q does not name %q", header, v.AllocConf)
				}
			}
			if v.completeHistory(file) && d.OOMEvents != v.NumOOMs {
				t.Errorf("%d OOM events, PyTorch counted %d", d.OOMEvents, v.NumOOMs)
			}
			if v.NumOOMs == 0 || v.History == nil {
				return
			}
			if len(d.OOMs) == 0 {
				t.Fatal("no OOM explained")
			}
			o := d.OOMs[0]
			if !strings.Contains(o.Site, variantScript) && !strings.HasSuffix(o.Site, backwardNote) {
				t.Errorf("the OOM attributed to %q (before it %q), not to the script or to backward", o.Site, o.PrevSite)
			}
			want, ok := ooms[file]
			if !ok {
				return
			}
			for _, w := range want.explanation {
				if !strings.Contains(o.Explanation, w) {
					t.Errorf("the explanation lacks %q:\n%s", w, o.Explanation)
				}
			}
			for _, w := range want.notExpl {
				if strings.Contains(o.Explanation, w) {
					t.Errorf("the explanation says %q:\n%s", w, o.Explanation)
				}
			}
			for _, w := range want.fix {
				if !strings.Contains(o.Fix, w) {
					t.Errorf("the fix lacks %q:\n%s", w, o.Fix)
				}
			}
			for _, w := range want.notFix {
				if strings.Contains(o.Fix, w) {
					t.Errorf("the fix says %q:\n%s", w, o.Fix)
				}
			}
			if o.FixConfig != want.config {
				t.Errorf("FixConfig %q, want %q\n%s", o.FixConfig, want.config, o.Fix)
			}
			checkClaims(t, path, o)
		})
	}
	for file := range ooms {
		if _, ok := variants[file]; !ok {
			t.Errorf("%s is not in testdata/pytorch_snapshot_variants.json", file)
		}
	}
}

// TestPrivatePools checks the report of pytorch_v_train_cuda_graph, whose
// CUDA graph, still alive at the dump, holds 20 segments of its private
// pool (segment_pool_id (1, 0)): their memory is counted apart, and their
// free memory, which torch.cuda.empty_cache keeps for the graph, is not
// releasable.
func TestPrivatePools(t *testing.T) {
	tests := []struct {
		file                  string
		private, live, freeOK int64 // bytes of private pools, held there, releasable
		text                  string
	}{
		// The shared pools' segments all hold live blocks.
		{"pytorch_v_train_cuda_graph.pickle.gz", 289406976, 82846208, 0,
			"  private pools           276 MiB   reserved by CUDA graphs or torch.cuda.MemPool, 79.0 MiB of it held; empty_cache keeps the rest for them\n"},
		{"pytorch_v_train_python_stacks.pickle.gz", 0, 0, 960 << 20, ""},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			r, err := File(filepath.Join("testdata", tc.file), Options{})
			if err != nil {
				t.Fatal(err)
			}
			f := r.Devices[0].Fragmentation
			if f.PrivatePoolBytes != tc.private || f.PrivatePoolAllocatedBytes != tc.live || f.ReleasableBytes != tc.freeOK {
				t.Errorf("private pools %d, held there %d, releasable %d; want %d, %d, %d",
					f.PrivatePoolBytes, f.PrivatePoolAllocatedBytes, f.ReleasableBytes, tc.private, tc.live, tc.freeOK)
			}
			// The largest free block is the largest request served
			// from the cache: a private pool's blocks serve only its
			// own graph or MemPool.
			snap, err := trace.Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var shared, private int64
			for _, seg := range snap.Snapshots[0].Segments {
				for _, b := range seg.Blocks {
					if b.State != trace.StateInactive {
						continue
					}
					if seg.PrivatePool != [2]uint64{} {
						private = max(private, b.Size)
					} else {
						shared = max(shared, b.Size)
					}
				}
			}
			if f.LargestFreeBlockBytes != shared {
				t.Errorf("largest free block %d, want %d, the largest outside private pools (%d inside)", f.LargestFreeBlockBytes, shared, private)
			}
			var text, page bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if err := WriteHTML(&page, r); err != nil {
				t.Fatal(err)
			}
			if tc.text == "" {
				if strings.Contains(text.String(), "private pools") || strings.Contains(page.String(), "Private pools") {
					t.Errorf("a report without private pools names them:\n%s", text.String())
				}
				return
			}
			if !strings.Contains(text.String(), tc.text) {
				t.Errorf("the text lacks %q:\n%s", tc.text, text.String())
			}
			if !strings.Contains(page.String(), "Private pools") {
				t.Error("the page does not show the private pools")
			}
		})
	}
}

// TestNoPythonFrames checks the memory that autograd's thread allocates
// in a history recorded with stacks="python": PyTorch records it with no
// frame at all, as that thread runs no Python, which the report says
// instead of that no stack was recorded; where none was, it says so.
func TestNoPythonFrames(t *testing.T) {
	tests := []struct {
		file string
		key  string // the key of the blocks without frames
	}{
		{"pytorch_v_train_python_stacks.pickle.gz", noPythonFrames},
		{"pytorch_v_train_no_history.pickle.gz", noStack},
		// 40 MiB allocated after _record_memory_history(enabled=None):
		// no frames, and no history to say it came from a C++ thread.
		{"pytorch_v_train_history_stopped.pickle.gz", noStackUnrecorded},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			r, err := File(filepath.Join("testdata", tc.file), Options{})
			if err != nil {
				t.Fatal(err)
			}
			d := r.Devices[0]
			found := false
			for _, g := range d.ByStack {
				switch g.Key {
				case tc.key:
					found = true
				case noStack, noPythonFrames, noStackUnrecorded:
					t.Errorf("live memory under %q, want %q", g.Key, tc.key)
				}
			}
			if !found {
				t.Errorf("no live memory under %q", tc.key)
			}
			var text, page bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if err := WriteHTML(&page, r); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), tc.key) {
				t.Errorf("the text lacks %q:\n%s", tc.key, text.String())
			}
			if d.HistoryEvents > 0 && !strings.Contains(page.String(), html.EscapeString(tc.key)) {
				t.Errorf("the page's timeline lacks %q", tc.key)
			}
		})
	}
}
