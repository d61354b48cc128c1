package analyze

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"
)

// TestRecordedSettings checks that a PyTorch snapshot's allocator settings
// are those its allocator_settings entries record where they differ from
// the PYTORCH_CUDA_ALLOC_CONF string beside them (PyTorch records the last
// string it was given, which leaves out what code set with
// torch.cuda.memory._set_allocator_settings): the device reports them, and
// the fix check starts from them, so that it does not offer
// expandable_segments:True to a run that had it.
func TestRecordedSettings(t *testing.T) {
	snap := func(source, conf string, entries map[string]string) *trace.Snapshot {
		meta := map[string]string{trace.MetaSource: source}
		for k, v := range entries {
			meta[trace.MetaAllocatorSettingsPrefix+k] = v
		}
		return &trace.Snapshot{Config: conf, Meta: meta}
	}
	tests := []struct {
		name   string
		s      *trace.Snapshot
		config string // Device.Config
		base   memory.Config
	}{
		{"string only", snap("pytorch", "max_split_size_mb:64", nil), "max_split_size_mb:64",
			memory.Config{Policy: memory.PolicyPyTorch, MaxSplitSizeMB: 64}},
		{"entries agree", snap("pytorch", "max_split_size_mb:64", map[string]string{"max_split_size": "67108864", "expandable_segments": "False"}),
			"max_split_size_mb:64", memory.Config{Policy: memory.PolicyPyTorch, MaxSplitSizeMB: 64}},
		{"expandable set in code", snap("pytorch", "", map[string]string{"max_split_size": "-1", "expandable_segments": "True"}),
			"expandable_segments:True", memory.Config{Policy: memory.PolicyPyTorch, ExpandableSegments: true}},
		{"split limit reset by a later string", snap("pytorch", "garbage_collection_threshold:0.6,max_split_size_mb:64",
			map[string]string{"max_split_size": "-1", "garbage_collection_threshold": "0.6"}),
			"garbage_collection_threshold:0.6", memory.Config{Policy: memory.PolicyPyTorch, GarbageCollectionThreshold: 0.6}},
		{"vram snapshot", snap("vram", "policy:pytorch,expandable_segments:True", nil), "policy:pytorch,expandable_segments:True",
			memory.Config{Policy: memory.PolicyPyTorch, ExpandableSegments: true}},
		{"settings vram does not read keep the string", snap("pytorch", "backend:cudaMallocAsync", map[string]string{"expandable_segments": "True"}),
			"backend:cudaMallocAsync", memory.Config{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := analyzeSnapshot(tt.s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if d.Config != tt.config {
				t.Errorf("Device.Config = %q, want %q", d.Config, tt.config)
			}
			base, _, err := baseConfig(d)
			if tt.base == (memory.Config{}) {
				if err == nil {
					t.Errorf("baseConfig = %+v, want an error", base)
				}
				return
			}
			if err != nil || base != tt.base {
				t.Errorf("baseConfig = %+v, %v; want %+v", base, err, tt.base)
			}
		})
	}
}

// TestRecordedSettingsAgree checks the snapshots PyTorch 2.11 recorded
// under the settings users change, each set through PYTORCH_CUDA_ALLOC_CONF
// alone: their allocator_settings entries agree with the string, so the
// device reports the string as written.
func TestRecordedSettingsAgree(t *testing.T) {
	paths, err := filepath.Glob("testdata/pytorch_v_*.pickle.gz")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recorded snapshots: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := trace.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range f.Snapshots {
				if s.Meta[trace.MetaAllocatorSettingsPrefix+"expandable_segments"] == "" {
					t.Fatalf("device %d: no allocator_settings entries: %v", s.Device, s.Meta)
				}
				if got, _ := recordedConfig(s); got != s.Config {
					t.Errorf("device %d: reports %q, recorded %q", s.Device, got, s.Config)
				}
				want, err := memory.Config{Policy: memory.PolicyPyTorch}.With(s.Config)
				if err != nil {
					t.Fatal(err)
				}
				if got, err := (memory.Config{Policy: memory.PolicyPyTorch}).WithSnapshotSettings(s); err != nil || got != want {
					t.Errorf("device %d: settings %+v, %v; want %+v", s.Device, got, err, want)
				}
			}
		})
	}
}

// TestRecordedSettingsNotModelled checks that the recorded settings vram
// accepts but does not model are reported as such, in the device and in
// the text report, whether the string or the allocator_settings entries
// hold them.
func TestRecordedSettingsNotModelled(t *testing.T) {
	tests := []struct {
		name    string
		s       *trace.Snapshot
		want    []string
		wantCfg string
	}{
		{"none", &trace.Snapshot{Config: "max_split_size_mb:64", Meta: map[string]string{trace.MetaSource: "pytorch"}}, nil, "max_split_size_mb:64"},
		{"in the string", &trace.Snapshot{Config: "release_lock_on_cudamalloc:True,pinned_reserve_segment_size_mb:64",
			Meta: map[string]string{trace.MetaSource: "pytorch"}},
			[]string{"release_lock_on_cudamalloc:True", "pinned_reserve_segment_size_mb:64"}, "release_lock_on_cudamalloc:True,pinned_reserve_segment_size_mb:64"},
		{"in the entries", &trace.Snapshot{Meta: map[string]string{trace.MetaSource: "pytorch",
			trace.MetaAllocatorSettingsPrefix + "pinned_num_register_threads": "8"}},
			[]string{"pinned_num_register_threads:8"}, "pinned_num_register_threads:8"},
		{"vram snapshot", &trace.Snapshot{Config: "policy:pytorch,graph_capture_record_stream_reuse:True", Meta: map[string]string{trace.MetaSource: "vram"}},
			[]string{"graph_capture_record_stream_reuse:True"}, "policy:pytorch,graph_capture_record_stream_reuse:True"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := analyzeSnapshot(tt.s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(d.NotModelled, tt.want) || d.Config != tt.wantCfg {
				t.Errorf("Config %q, NotModelled %q; want %q, %q", d.Config, d.NotModelled, tt.wantCfg, tt.want)
			}
			var b strings.Builder
			if err := (&Report{File: "x.pickle", Format: "pickle", Devices: []*Device{d}}).WriteText(&b); err != nil {
				t.Fatal(err)
			}
			line := "not modelled by vram, no effect on the replays here: " + strings.Join(tt.want, ", ")
			if got := strings.Contains(b.String(), line); got != (tt.want != nil) {
				t.Errorf("line %q shown: %v, want %v:\n%s", line, got, tt.want != nil, b.String())
			}
		})
	}
}
