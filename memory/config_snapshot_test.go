package memory

import (
	"strings"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

// zeroDivisions is allocator_settings' roundup_power2_divisions of a run
// that did not set it, as PyTorch 2.11 records it.
const zeroDivisions = "{1: 0, 2: 0, 4: 0, 8: 0, 16: 0, 32: 0, 64: 0, 128: 0, 256: 0, 512: 0, 1024: 0, 2048: 0, 4096: 0, 8192: 0, 16384: 0, 32768: 0}"

// recordedSettings returns the Meta of a PyTorch 2.11 snapshot whose
// allocator_settings hold PyTorch's defaults, with the entries of over
// (names without the prefix) put over them.
func recordedSettings(over map[string]string) map[string]string {
	m := map[string]string{
		"source":                            "pytorch",
		"max_split_size":                    "-1",
		"garbage_collection_threshold":      "0.0",
		"expandable_segments":               "False",
		"pinned_num_register_threads":       "1",
		"release_lock_on_cudamalloc":        "False",
		"pinned_use_cuda_host_register":     "False",
		"graph_capture_record_stream_reuse": "False",
		"roundup_power2_divisions":          zeroDivisions,
	}
	for k, v := range over {
		m[k] = v
	}
	meta := map[string]string{}
	for k, v := range m {
		if k == trace.MetaSource {
			meta[k] = v
			continue
		}
		meta[trace.MetaAllocatorSettingsPrefix+k] = v
	}
	return meta
}

// TestConfigWithSnapshotSettings checks that the settings a PyTorch
// snapshot records beside its configuration string decide the Config where
// the two differ: PyTorch records the last string it was given, which
// torch.cuda.memory._set_allocator_settings replaces and which leaves out
// expandable_segments set by an earlier one, while the entries are what
// its allocator ran with.
func TestConfigWithSnapshotSettings(t *testing.T) {
	divs := func(d ...int) (a [kRoundUpPowerOfTwoIntervals]int) {
		copy(a[:], d)
		return a
	}
	pt := Config{Policy: PolicyPyTorch}
	tests := []struct {
		name   string
		config string
		meta   map[string]string // nil: no allocator_settings entries
		want   Config
	}{
		{"no entries", "max_split_size_mb:64", nil, Config{Policy: PolicyPyTorch, MaxSplitSizeMB: 64}},
		{"defaults", "", recordedSettings(nil), pt},
		{"string and entries agree", "max_split_size_mb:64",
			recordedSettings(map[string]string{"max_split_size": "67108864"}),
			Config{Policy: PolicyPyTorch, MaxSplitSizeMB: 64}},
		{"expandable set in code, string empty", "",
			recordedSettings(map[string]string{"expandable_segments": "True"}),
			Config{Policy: PolicyPyTorch, ExpandableSegments: true}},
		{"expandable kept from an earlier string", "max_split_size_mb:64",
			recordedSettings(map[string]string{"max_split_size": "67108864", "expandable_segments": "True"}),
			Config{Policy: PolicyPyTorch, MaxSplitSizeMB: 64, ExpandableSegments: true}},
		{"expandable unsupported on the platform", "expandable_segments:True", recordedSettings(nil), pt},
		{"split limit reset by a later string", "max_split_size_mb:64", recordedSettings(nil), pt},
		{"split limit at the large segment", "",
			recordedSettings(map[string]string{"max_split_size": "20971520"}),
			Config{Policy: PolicyPyTorch, MaxSplitSizeMB: 20}},
		{"split limit beyond any device", "",
			recordedSettings(map[string]string{"max_split_size": "2097152000000000000"}), pt},
		{"split limit past int64", "",
			recordedSettings(map[string]string{"max_split_size": "-1048576"}), pt},
		{"gc threshold", "",
			recordedSettings(map[string]string{"garbage_collection_threshold": "0.6"}),
			Config{Policy: PolicyPyTorch, GarbageCollectionThreshold: 0.6}},
		{"divisions", "",
			recordedSettings(map[string]string{"roundup_power2_divisions": "{1: 1, 2: 1, 4: 1, 8: 1, 16: 1, 32: 1, 64: 1, 128: 1, 256: 1, 512: 2, 1024: 4, 2048: 8, 4096: 8, 8192: 8, 16384: 8, 32768: 8}"}),
			Config{Policy: PolicyPyTorch, RoundupPower2Divisions: divs(0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 4, 8, 8, 8, 8, 8)}},
		{"divisions of a list the string gives", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
			recordedSettings(map[string]string{"roundup_power2_divisions": "{1: 1, 2: 1, 4: 1, 8: 1, 16: 1, 32: 1, 64: 1, 128: 1, 256: 1, 512: 2, 1024: 4, 2048: 8, 4096: 8, 8192: 8, 16384: 8, 32768: 8}"}),
			Config{Policy: PolicyPyTorch, RoundupPower2Divisions: divs(1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8)}},
		{"divisions partly recorded", "",
			map[string]string{trace.MetaAllocatorSettingsPrefix + "roundup_power2_divisions": "{1: 0, 2: 0, 4: 4}"},
			Config{Policy: PolicyPyTorch, RoundupPower2Divisions: divs(0, 0, 4)}},
		{"divisions of 1 round as 0", "roundup_power2_divisions:[2:1,4:4]",
			map[string]string{trace.MetaAllocatorSettingsPrefix + "roundup_power2_divisions": "{1: 0, 2: 0, 4: 4, 8: 1, 16: 0}"},
			Config{Policy: PolicyPyTorch, RoundupPower2Divisions: divs(1, 1, 4)}},
		{"keys the entries do not record come from the string", "max_non_split_rounding_mb:64,per_process_memory_fraction:0.5",
			recordedSettings(nil), Config{Policy: PolicyPyTorch, MaxNonSplitRoundingMB: 64, PerProcessMemoryFraction: 0.5}},
		{"ignored keys", "",
			recordedSettings(map[string]string{"release_lock_on_cudamalloc": "True", "pinned_use_cuda_host_register": "True"}),
			Config{Policy: PolicyPyTorch, ReleaseLockOnCUDAMalloc: true, PinnedUseCUDAHostRegister: true}},
		{"rocm spellings", "",
			map[string]string{trace.MetaAllocatorSettingsPrefix + "release_lock_on_hipmalloc": "True", trace.MetaAllocatorSettingsPrefix + "pinned_use_hip_host_register": "True"},
			Config{Policy: PolicyPyTorch, ReleaseLockOnCUDAMalloc: true, PinnedUseCUDAHostRegister: true}},
		{"entries of settings vram does not model", "",
			recordedSettings(map[string]string{"pinned_num_register_threads": "8", "graph_capture_record_stream_reuse": "True"}),
			Config{Policy: PolicyPyTorch, PinnedNumRegisterThreads: 8, GraphCaptureRecordStreamReuse: true}},
		{"register threads of the string, PyTorch's default recorded", "pinned_num_register_threads:1",
			recordedSettings(nil), Config{Policy: PolicyPyTorch, PinnedNumRegisterThreads: 1}},
		{"entries this package does not know", "",
			recordedSettings(map[string]string{"some_future_setting": "[1, 2]"}), pt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &trace.Snapshot{Config: tt.config, Meta: tt.meta}
			got, err := pt.WithSnapshotSettings(s)
			if err != nil {
				t.Fatalf("WithSnapshotSettings: %v", err)
			}
			if got != tt.want {
				t.Fatalf("WithSnapshotSettings = %q %+v, want %q %+v", got, got, tt.want, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestConfigWithSnapshotSettingsErrors checks that a configuration string
// or an allocator_settings entry that no PyTorch run records is an error
// that names it, and that c comes back unchanged with it.
func TestConfigWithSnapshotSettingsErrors(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		meta    map[string]string
		mention string
	}{
		{"bad string", "max_split_size_mb:1", nil, "max_split_size_mb"},
		{"split limit not whole MiB", "", recordedSettings(map[string]string{"max_split_size": "1000"}), "max_split_size"},
		{"split limit below the large segment", "", recordedSettings(map[string]string{"max_split_size": "1048576"}), "max_split_size"},
		{"split limit not a number", "", recordedSettings(map[string]string{"max_split_size": "None"}), "max_split_size"},
		{"gc threshold out of range", "", recordedSettings(map[string]string{"garbage_collection_threshold": "1.5"}), "garbage_collection_threshold"},
		{"register threads not a power of two", "", recordedSettings(map[string]string{"pinned_num_register_threads": "3"}), "pinned_num_register_threads"},
		{"expandable not a bool", "", recordedSettings(map[string]string{"expandable_segments": "1"}), "expandable_segments"},
		{"divisions not a dict", "", recordedSettings(map[string]string{"roundup_power2_divisions": "[1, 2]"}), "roundup_power2_divisions"},
		{"divisions without the opening brace", "", recordedSettings(map[string]string{"roundup_power2_divisions": "1: 2}"}), "roundup_power2_divisions"},
		{"divisions size not a power of two", "", recordedSettings(map[string]string{"roundup_power2_divisions": "{3: 2}"}), "roundup_power2_divisions"},
		{"divisions not a power of two", "", recordedSettings(map[string]string{"roundup_power2_divisions": "{1: 3}"}), "roundup_power2_divisions"},
	}
	base := Config{Policy: PolicyPyTorch, MaxSplitSizeMB: 128}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := base.WithSnapshotSettings(&trace.Snapshot{Config: tt.config, Meta: tt.meta})
			if err == nil {
				t.Fatalf("WithSnapshotSettings = %+v, want an error", got)
			}
			if !strings.Contains(err.Error(), tt.mention) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line naming %s", err, tt.mention)
			}
			if got != base {
				t.Errorf("Config with the error = %+v, want the receiver %+v", got, base)
			}
		})
	}
}

// FuzzSnapshotSettings checks that any allocator_settings entries either
// give an error or a valid Config that String writes back exactly.
func FuzzSnapshotSettings(f *testing.F) {
	f.Add("max_split_size_mb:64", "67108864", "0.0", "False", zeroDivisions, "1")
	f.Add("", "-1", "0.6", "True", "{1: 1, 2: 2, 4: 4}", "8")
	f.Add("expandable_segments:True", "1000", "1.5", "1", "{3: 2}", "3")
	f.Add("", "20971520", "nan", "True", "{1: 0,, 2: 0}", "")
	f.Fuzz(func(t *testing.T, conf, split, gc, expandable, divisions, threads string) {
		if len(conf)+len(split)+len(gc)+len(expandable)+len(divisions)+len(threads) > maxFuzzConfig {
			return
		}
		meta := map[string]string{}
		for k, v := range map[string]string{"max_split_size": split, "garbage_collection_threshold": gc,
			"expandable_segments": expandable, "roundup_power2_divisions": divisions, "pinned_num_register_threads": threads} {
			if v != "" {
				meta[trace.MetaAllocatorSettingsPrefix+k] = v
			}
		}
		base := Config{Policy: PolicyPyTorch}
		c, err := base.WithSnapshotSettings(&trace.Snapshot{Config: conf, Meta: meta})
		if err != nil {
			if c != base {
				t.Fatalf("error %v with a changed Config %+v", err, c)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q is not one line", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if back, err := ParseConfig(c.String()); err != nil || back != c {
			t.Fatalf("round trip of %+v through %q: %+v, %v", c, c.String(), back, err)
		}
	})
}
