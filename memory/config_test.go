package memory

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseConfig(t *testing.T) {
	divs := func(d ...int) (a [kRoundUpPowerOfTwoIntervals]int) {
		copy(a[:], d)
		return a
	}
	all := func(v int) (a [kRoundUpPowerOfTwoIntervals]int) {
		for i := range a {
			a[i] = v
		}
		return a
	}
	tests := []struct {
		name string
		in   string
		want Config
	}{
		{"empty", "", Config{}},
		{"blanks", "  ", Config{}},
		{"policy pytorch", "policy:pytorch", Config{Policy: PolicyPyTorch}},
		{"policy vram", "policy:vram", Config{}},
		{"expandable", "policy:pytorch,expandable_segments:True", Config{Policy: PolicyPyTorch, ExpandableSegments: true}},
		{"expandable lowercase", "expandable_segments:true", Config{ExpandableSegments: true}},
		{"expandable false", "expandable_segments:False", Config{}},
		{"spaces", " policy : pytorch , max_split_size_mb : 512 ", Config{Policy: PolicyPyTorch, MaxSplitSizeMB: 512}},
		{"every ascii blank", "\tpolicy\v:\fpytorch\r,\nexpandable_segments:True\v\f", Config{Policy: PolicyPyTorch, ExpandableSegments: true}},
		{"max split", "max_split_size_mb:21", Config{MaxSplitSizeMB: 21}},
		{"max split at the large segment", "max_split_size_mb:20", Config{MaxSplitSizeMB: 20}},
		{"non-split rounding", "max_split_size_mb:100,max_non_split_rounding_mb:20", Config{MaxSplitSizeMB: 100, MaxNonSplitRoundingMB: 20}},
		{"non-split rounding large", "max_non_split_rounding_mb:4096", Config{MaxNonSplitRoundingMB: 4096}},
		{"gc", "garbage_collection_threshold:0.6", Config{GarbageCollectionThreshold: 0.6}},
		{"fraction", "per_process_memory_fraction:0.5", Config{PerProcessMemoryFraction: 0.5}},
		{"fraction one", "per_process_memory_fraction:1", Config{PerProcessMemoryFraction: 1}},
		{"ignored keys", "release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:True",
			Config{ReleaseLockOnCUDAMalloc: true, PinnedUseCUDAHostRegister: true}},
		{"backend native", "backend:native", Config{}},
		{"host allocator threads", "pinned_num_register_threads:8,expandable_segments:True", Config{ExpandableSegments: true, PinnedNumRegisterThreads: 8}},
		{"host allocator threads max", "pinned_num_register_threads:128", Config{PinnedNumRegisterThreads: 128}},
		{"host allocator reserve", "pinned_reserve_segment_size_mb:64,expandable_segments:True", Config{ExpandableSegments: true, PinnedReserveSegmentSizeMB: 64}},
		{"host allocator background threads", "pinned_use_background_threads:True", Config{PinnedUseBackgroundThreads: true}},
		{"graph capture reuse", "graph_capture_record_stream_reuse:False,max_split_size_mb:64", Config{MaxSplitSizeMB: 64}},
		{"graph capture reuse on", "graph_capture_record_stream_reuse:True", Config{GraphCaptureRecordStreamReuse: true}},
		{"rocm spellings", "release_lock_on_hipmalloc:True,pinned_use_hip_host_register:True",
			Config{ReleaseLockOnCUDAMalloc: true, PinnedUseCUDAHostRegister: true}},
		{"every pytorch key", "backend:native,max_split_size_mb:512,max_non_split_rounding_mb:64,garbage_collection_threshold:0.6," +
			"roundup_power2_divisions:[64:8,256:4,1024:4,>:1],expandable_segments:True,pinned_use_background_threads:True," +
			"release_lock_on_cudamalloc:False,pinned_use_cuda_host_register:True,pinned_num_register_threads:8," +
			"pinned_reserve_segment_size_mb:128,graph_capture_record_stream_reuse:True",
			Config{MaxSplitSizeMB: 512, MaxNonSplitRoundingMB: 64, GarbageCollectionThreshold: 0.6,
				RoundupPower2Divisions: divs(8, 8, 8, 8, 8, 8, 8, 0, 4, 0, 4, 1, 1, 1, 1, 1), ExpandableSegments: true,
				PinnedUseCUDAHostRegister: true, PinnedUseBackgroundThreads: true, PinnedNumRegisterThreads: 8,
				PinnedReserveSegmentSizeMB: 128, GraphCaptureRecordStreamReuse: true}},
		{"last wins", "max_split_size_mb:100,max_split_size_mb:200", Config{MaxSplitSizeMB: 200}},
		{"divisions single", "roundup_power2_divisions:4", Config{RoundupPower2Divisions: all(4)}},
		{"divisions per size", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
			Config{RoundupPower2Divisions: divs(1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8)}},
		{"divisions one key", "roundup_power2_divisions:[64:2]",
			Config{RoundupPower2Divisions: divs(2, 2, 2, 2, 2, 2, 2)}},
		{"divisions huge key", "roundup_power2_divisions:[1:2,65536:4]",
			Config{RoundupPower2Divisions: divs(2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4)}},
		{"everything", "policy:pytorch,expandable_segments:True,max_split_size_mb:300,roundup_power2_divisions:2,garbage_collection_threshold:0.8,per_process_memory_fraction:0.9",
			Config{Policy: PolicyPyTorch, ExpandableSegments: true, MaxSplitSizeMB: 300, RoundupPower2Divisions: all(2),
				GarbageCollectionThreshold: 0.8, PerProcessMemoryFraction: 0.9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig(tt.in)
			if err != nil {
				t.Fatalf("ParseConfig(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseConfig(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			back, err := ParseConfig(got.String())
			if err != nil || back != got {
				t.Fatalf("round trip of %q through %q: %+v, %v", tt.in, got.String(), back, err)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		in      string
		key     string // the key the error must name
		mention string // a word of the explanation
	}{
		{"unknown_key:1", "unknown_key", "allowed"},
		{"policy:tensorflow", "policy", "pytorch, vram"},
		{"policy", "policy", "':'"},
		{"policy:", "policy", "missing value"},
		{"expandable_segments:yes", "expandable_segments", "True or False"},
		{"max_split_size_mb:19", "max_split_size_mb", "at least 20"},
		{"max_split_size_mb:0", "max_split_size_mb", "at least 20"},
		{"max_split_size_mb:-5", "max_split_size_mb", "at least 20"},
		{"max_split_size_mb:1.5", "max_split_size_mb", "whole number"},
		{"max_non_split_rounding_mb:19", "max_non_split_rounding_mb", "at least 20"},
		{"max_non_split_rounding_mb:-1", "max_non_split_rounding_mb", "at least 20"},
		{"max_non_split_rounding_mb:2e3", "max_non_split_rounding_mb", "whole number"},
		{"garbage_collection_threshold:1", "garbage_collection_threshold", "less than 1"},
		{"garbage_collection_threshold:0", "garbage_collection_threshold", "greater than 0"},
		{"garbage_collection_threshold:NaN", "garbage_collection_threshold", "greater than 0"},
		{"per_process_memory_fraction:1.5", "per_process_memory_fraction", "at most 1"},
		{"per_process_memory_fraction:0", "per_process_memory_fraction", "greater than 0"},
		{"roundup_power2_divisions:3", "roundup_power2_divisions", "power of two"},
		{"roundup_power2_divisions:[100:2]", "roundup_power2_divisions", "power of two in MiB"},
		{"roundup_power2_divisions:[256:2,128:4]", "roundup_power2_divisions", "increase"},
		{"roundup_power2_divisions:[>:2]", "roundup_power2_divisions", "follow"},
		{"roundup_power2_divisions:[]", "roundup_power2_divisions", "empty list"},
		{"roundup_power2_divisions:[ ]", "roundup_power2_divisions", "empty list"},
		{"roundup_power2_divisions:[256:2,]", "roundup_power2_divisions", "',' before ']'"},
		{"roundup_power2_divisions:[256:2,>:4,]", "roundup_power2_divisions", "last entry"},
		{"roundup_power2_divisions:[256:2,,512:4]", "roundup_power2_divisions", "size_mb:divisions"},
		{"roundup_power2_divisions:[", "roundup_power2_divisions", "size_mb:divisions"},
		{"roundup_power2_divisions:", "roundup_power2_divisions", "power of two"},
		{"roundup_power2_divisions:[256:2", "roundup_power2_divisions", "']'"},
		{"roundup_power2_divisions:[256:1,>:2,1024:4]", "roundup_power2_divisions", "last entry"},
		{"roundup_power2_divisions:[256:1,>:2,>:4]", "roundup_power2_divisions", "last entry"},
		{"roundup_power2_divisions:[32768:2,>:4]", "roundup_power2_divisions", "set nothing"},
		{"roundup_power2_divisions:[1:2,65536:4,>:8]", "roundup_power2_divisions", "set nothing"},
		{"roundup_power2_divisions:[65536:2,131072:4]", "roundup_power2_divisions", "last interval"},
		{"roundup_power2_divisions:[32768:2,32768:4]", "roundup_power2_divisions", "last interval"},
		{"backend:cudaMallocAsync", "backend", "native"},
		{"policy:vram max_split_size_mb:100", "policy", "','"},
		{":x", "", "expected a key"},
		{"max_split_size_mb:51 2", "max_split_size_mb", "','"},
		{"max_split_size_mb:51 2", "max_split_size_mb", `reads "51 2" as "512"`},
		{"expandable_segments:True max_split_size_mb:512", "expandable_segments", "expected ',' before the next key"},
		{"max_split_size_mb=512", "max_split_size_mb=512", "max_split_size_mb:512"},
		{"expandable_segments=True,max_split_size_mb:512", "expandable_segments=True", "expandable_segments:True"},
		{"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments", "without PYTORCH_CUDA_ALLOC_CONF="},
		{"PYTORCH_ALLOC_CONF=max_split_size_mb:128", "PYTORCH_ALLOC_CONF=max_split_size_mb", "without PYTORCH_ALLOC_CONF="},
		{"VRAM_ALLOC_CONF=policy:pytorch", "VRAM_ALLOC_CONF=policy", "without VRAM_ALLOC_CONF="},
		{"max_split _size_mb:512", "max_split", "':'"},
		{"release_lock_on_cudamalloc:maybe", "release_lock_on_cudamalloc", "True or False"},
		{"pinned_num_register_threads:3", "pinned_num_register_threads", "power of two"},
		{"pinned_num_register_threads:256", "pinned_num_register_threads", "up to 128"},
		{"pinned_num_register_threads:0", "pinned_num_register_threads", "power of two"},
		{"pinned_reserve_segment_size_mb:0", "pinned_reserve_segment_size_mb", "above 0"},
		{"pinned_reserve_segment_size_mb:-1", "pinned_reserve_segment_size_mb", "above 0"},
		{"pinned_reserve_segment_size_mb:99999999999999999999", "pinned_reserve_segment_size_mb", "at most"},
		{"pinned_use_background_threads:2", "pinned_use_background_threads", "True or False"},
		{"graph_capture_record_stream_reuse:", "graph_capture_record_stream_reuse", "missing value"},
		{"release_lock_on_hipmalloc:yes", "release_lock_on_hipmalloc", "True or False"},
		{"pinned_use_hip_host_register:on", "pinned_use_hip_host_register", "True or False"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseConfig(tt.in)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseConfig(%q) = %v, want a *ConfigError", tt.in, err)
			}
			if ce.Key != tt.key {
				t.Errorf("error names key %q, want %q (%v)", ce.Key, tt.key, err)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not mention %q", err, tt.mention)
			}
			if !strings.HasPrefix(err.Error(), "memory: VRAM_ALLOC_CONF: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestConfigCheck(t *testing.T) {
	cfg := Config{Policy: PolicyPyTorch, ExpandableSegments: true}
	plain := plainArena{NewSimArena(64 * mib)}
	var ce *ConfigError
	if err := cfg.Check(plain); !errors.As(err, &ce) || ce.Key != "expandable_segments" {
		t.Fatalf("Check on a plain arena = %v, want a ConfigError for expandable_segments", err)
	}
	if err := cfg.Check(NewSimArena(64 * mib)); err != nil {
		t.Fatalf("Check on a virtual arena: %v", err)
	}
	a := New(plain, cfg)
	if _, err := a.Alloc(10, 0, ""); !errors.As(err, &ce) {
		t.Fatalf("Alloc with a bad config = %v, want the ConfigError", err)
	}
	// policy:vram on a plain arena falls back to fixed segments.
	v := New(plain, Config{})
	b, err := v.Alloc(mib, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if s := v.Stats(); s.NumMaps != 0 || s.NumDeviceAlloc != 1 || s.ReservedBytes[StatAll].Current != kSmallBuffer {
		t.Fatalf("fallback did not use a fixed 2 MiB segment: %+v", s)
	}
	v.Free(b)
	if err := v.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// maxFuzzConfig bounds the strings FuzzParseConfig parses: real settings
// are a few dozen bytes.
const maxFuzzConfig = 1 << 10

// FuzzParseConfig checks that every VRAM_ALLOC_CONF string either fails
// with a one-line *ConfigError or gives a Config whose values are in range,
// whose String form parses back to it (and is a fixed point), and with which
// an allocator works. Seeds are in testdata/fuzz/FuzzParseConfig.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"", "policy:pytorch", "expandable_segments:True,max_split_size_mb:512",
		"roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", "roundup_power2_divisions:[1:2,65536:4]",
		"garbage_collection_threshold:0.6,per_process_memory_fraction:0.25", ":", "[,]", "policy:vram,",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxFuzzConfig {
			return
		}
		c, err := ParseConfig(s)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseConfig(%q) error %v is not a *ConfigError", s, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "memory: VRAM_ALLOC_CONF: ") {
				t.Fatalf("ParseConfig(%q): error %q lacks the prefix", s, msg)
			}
			if strings.ContainsFunc(msg, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Fatalf("ParseConfig(%q): error %q holds control characters (not one clean line)", s, msg)
			}
			return
		}
		checkConfigRanges(t, s, c)
		if err := c.Validate(); err != nil {
			t.Fatalf("Validate of ParseConfig(%q) = %+v: %v", s, c, err)
		}
		str := c.String()
		back, err := ParseConfig(str)
		if err != nil {
			t.Fatalf("ParseConfig(%q).String() = %q does not parse: %v", s, str, err)
		}
		if back != c {
			t.Fatalf("round trip of %q: %+v became %+v via %q", s, c, back, str)
		}
		if again := back.String(); again != str {
			t.Fatalf("String is not canonical: %q, then %q", str, again)
		}
		// The settings work: a small and a large allocation on a device
		// with virtual memory, and on one without when Check allows it.
		for _, arena := range []Arena{NewSimArena(64 * mib), plainArena{NewSimArena(64 * mib)}} {
			a := New(arena, c, withQuickOOM())
			if err := c.Check(arena); err != nil {
				if _, err2 := a.Alloc(1, 0, ""); err2 == nil || err2.Error() != err.Error() {
					t.Fatalf("%q: Check says %v, Alloc says %v", s, err, err2)
				}
				continue
			}
			small, err := a.Alloc(1000, 0, "")
			var oom *OutOfMemoryError
			if errors.As(err, &oom) && oom.Limit < 2*mib {
				continue // a fraction below the small pool's 2 MiB segment
			}
			if err != nil {
				t.Fatalf("%q: Alloc(1000): %v", s, err)
			}
			large, err := a.Alloc(12*mib, 1, "")
			if errors.As(err, &oom) && oom.Limit < 24*mib {
				// A small fraction leaves no room for 12 MiB next to the
				// small pool's 2 MiB segment (and a 20 MiB expandable unit):
				// an out-of-memory error is the right answer there.
				a.Free(small)
				continue
			}
			if err != nil {
				t.Fatalf("%q: Alloc(12 MiB): %v", s, err)
			}
			a.Free(small)
			a.Free(large)
			a.EmptyCache()
			if err := a.checkInvariants(); err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			if r := a.Stats().ReservedBytes[StatAll].Current; r != 0 {
				t.Fatalf("%q: %d bytes reserved after freeing everything and EmptyCache", s, r)
			}
		}
	})
}

// checkConfigRanges fails t if a Config that ParseConfig(s) returned holds a
// value ParseConfig promises to refuse.
func checkConfigRanges(t *testing.T, s string, c Config) {
	t.Helper()
	if c.Policy != PolicyVRAM && c.Policy != PolicyPyTorch {
		t.Fatalf("%q: policy %v", s, c.Policy)
	}
	if c.MaxSplitSizeMB != 0 && (c.MaxSplitSizeMB < kLargeBuffer>>20 || c.MaxSplitSizeMB > maxSplitSizeMBLimit) {
		t.Fatalf("%q: max_split_size_mb %d out of range", s, c.MaxSplitSizeMB)
	}
	if g := c.GarbageCollectionThreshold; g != 0 && !(g > 0 && g < 1) {
		t.Fatalf("%q: garbage_collection_threshold %v out of (0, 1)", s, g)
	}
	if f := c.PerProcessMemoryFraction; f != 0 && !(f > 0 && f <= 1) {
		t.Fatalf("%q: per_process_memory_fraction %v out of (0, 1]", s, f)
	}
	for i, d := range c.RoundupPower2Divisions {
		if d < 0 || d > 1<<20 || d&(d-1) != 0 {
			t.Fatalf("%q: roundup_power2_divisions entry %d is %d, not 0 or a power of two up to 2^20", s, i, d)
		}
	}
	if n := c.PinnedNumRegisterThreads; n != 0 && (n < 0 || n > maxRegisterThreads || n&(n-1) != 0) {
		t.Fatalf("%q: pinned_num_register_threads %d, not 0 or a power of two up to %d", s, n, maxRegisterThreads)
	}
	if n := c.PinnedReserveSegmentSizeMB; n < 0 || n > maxPinnedReserveMB {
		t.Fatalf("%q: pinned_reserve_segment_size_mb %d out of range", s, n)
	}
}

// TestConfigNotModelled checks that the settings vram accepts from
// PYTORCH_CUDA_ALLOC_CONF but does not act on are kept and listed, as
// written back, so that a tool can say they had no effect rather than
// drop them unseen.
func TestConfigNotModelled(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"policy:pytorch,expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6,per_process_memory_fraction:0.5,backend:native", nil},
		{"release_lock_on_cudamalloc:False,pinned_use_background_threads:False,graph_capture_record_stream_reuse:False", nil},
		{"release_lock_on_cudamalloc:True", []string{"release_lock_on_cudamalloc:True"}},
		{"release_lock_on_hipmalloc:True", []string{"release_lock_on_cudamalloc:True"}},
		{"expandable_segments:True,pinned_use_cuda_host_register:True,pinned_num_register_threads:8",
			[]string{"pinned_use_cuda_host_register:True", "pinned_num_register_threads:8"}},
		{"pinned_reserve_segment_size_mb:2048,pinned_use_background_threads:True,graph_capture_record_stream_reuse:True",
			[]string{"pinned_reserve_segment_size_mb:2048", "pinned_use_background_threads:True", "graph_capture_record_stream_reuse:True"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			c, err := ParseConfig(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.NotModelled(); !slices.Equal(got, tt.want) {
				t.Errorf("NotModelled() = %q, want %q", got, tt.want)
			}
			for _, kv := range c.NotModelled() {
				if !strings.Contains(c.String(), kv) {
					t.Errorf("String() = %q leaves out %s", c.String(), kv)
				}
			}
		})
	}
}

// TestConfigValidate gives Validate a Config with each field out of the
// range ParseConfig accepts: the error names the field and its key, and the
// same value written as a string is refused by ParseConfig too.
func TestConfigValidate(t *testing.T) {
	divs := func(i, v int) (c Config) {
		c.RoundupPower2Divisions[i] = v
		return c
	}
	tests := []struct {
		name  string
		c     Config
		field string
	}{
		{"policy", Config{Policy: 7}, "Policy"},
		{"split negative", Config{MaxSplitSizeMB: -1}, "MaxSplitSizeMB"},
		{"split below the large segment", Config{MaxSplitSizeMB: 19}, "MaxSplitSizeMB"},
		{"split huge", Config{MaxSplitSizeMB: 1<<40 + 1}, "MaxSplitSizeMB"},
		{"non-split rounding small", Config{MaxNonSplitRoundingMB: 19}, "MaxNonSplitRoundingMB"},
		{"non-split rounding negative", Config{MaxNonSplitRoundingMB: -20}, "MaxNonSplitRoundingMB"},
		{"divisions three", divs(3, 3), "RoundupPower2Divisions[3]"},
		{"divisions negative", divs(0, -2), "RoundupPower2Divisions[0]"},
		{"divisions huge", divs(15, 1<<21), "RoundupPower2Divisions[15]"},
		{"gc one", Config{GarbageCollectionThreshold: 1}, "GarbageCollectionThreshold"},
		{"gc negative", Config{GarbageCollectionThreshold: -0.5}, "GarbageCollectionThreshold"},
		{"gc NaN", Config{GarbageCollectionThreshold: math.NaN()}, "GarbageCollectionThreshold"},
		{"fraction above one", Config{PerProcessMemoryFraction: 1.5}, "PerProcessMemoryFraction"},
		{"fraction Inf", Config{PerProcessMemoryFraction: math.Inf(1)}, "PerProcessMemoryFraction"},
		{"register threads three", Config{PinnedNumRegisterThreads: 3}, "PinnedNumRegisterThreads"},
		{"register threads many", Config{PinnedNumRegisterThreads: 256}, "PinnedNumRegisterThreads"},
		{"register threads negative", Config{PinnedNumRegisterThreads: -1}, "PinnedNumRegisterThreads"},
		{"pinned reserve negative", Config{PinnedReserveSegmentSizeMB: -1}, "PinnedReserveSegmentSizeMB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("Validate: %v, want a *ConfigError for field %s", err, tc.field)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "memory: Config."+tc.field+" = ") || !strings.Contains(msg, ce.Key) {
				t.Errorf("message %q does not name Config.%s and key %s", msg, tc.field, ce.Key)
			}
			if err := tc.c.Check(NewSimArena(1 << 30)); !errors.As(err, &ce) || ce.Field != tc.field {
				t.Errorf("Check: %v, want the Validate error", err)
			}
			if _, err := ParseConfig(tc.c.String()); err == nil {
				t.Errorf("ParseConfig(%q) accepts what Validate refuses", tc.c.String())
			}
		})
	}
	for _, c := range []Config{{}, {Policy: PolicyPyTorch, MaxSplitSizeMB: 21, GarbageCollectionThreshold: 0.5, PerProcessMemoryFraction: 1}, {MaxSplitSizeMB: 20}, divs(2, 1<<20)} {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", c, err)
		}
	}
}

// TestParseConfigErrorsAreShort parses settings whose keys or values are
// a megabyte long: the error quotes them cut short, and keeps them whole
// in its fields.
func TestParseConfigErrorsAreShort(t *testing.T) {
	long := strings.Repeat("9", 1<<20)
	tests := []struct {
		name, in, value string
	}{
		{"long value", "max_split_size_mb:" + long, long},
		{"long unknown key", "x" + long + ":1", ""},
		{"long word where a key goes", ":" + long, ""},
		{"long policy", "policy:" + strings.Repeat("é", 1<<19), strings.Repeat("é", 1<<19)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(tt.in)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseConfig = %.200v, want a *ConfigError", err)
			}
			if msg := err.Error(); len(msg) > 1000 || !utf8.ValidString(msg) {
				t.Errorf("error of %d bytes: %.300s", len(msg), msg)
			}
			if tt.value != "" && ce.Value != tt.value {
				t.Errorf("Value holds %d bytes, want all %d", len(ce.Value), len(tt.value))
			}
		})
	}
}

// TestMaxSplitSizeAtLargeSegment runs the PyTorch policy with
// max_split_size_mb:20, the smallest value PyTorch takes: the 20 MiB
// segments of requests between 1 and 10 MiB are then oversize, so a freed
// one does not serve a smaller request, and the allocator's bookkeeping
// holds throughout.
func TestMaxSplitSizeAtLargeSegment(t *testing.T) {
	cfg, err := ParseConfig("policy:pytorch,max_split_size_mb:20")
	if err != nil {
		t.Fatal(err)
	}
	a := New(NewSimArena(1<<30), cfg)
	var held []*Block
	for _, size := range []int64{5 * mib, 2 * mib, 30 * mib, 9 * mib} {
		b, err := a.Alloc(size, 0, "")
		if err != nil {
			t.Fatalf("Alloc(%d): %v", size, err)
		}
		held = append(held, b)
		if err := a.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range held {
		a.Free(b)
	}
	if err := a.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	b, err := a.Alloc(5*mib, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if s := a.Stats(); s.OversizeSegments.Current == 0 {
		t.Errorf("no oversize segment with max_split_size_mb:20: %+v", s.OversizeSegments)
	}
	a.Free(b)
	if err := a.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}
