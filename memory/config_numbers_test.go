package memory

import (
	"errors"
	"strings"
	"testing"
)

// TestParseConfigNumbers checks the numeric values of VRAM_ALLOC_CONF as a
// class: decimal digits only, every out-of-range, non-finite or malformed
// number a *ConfigError naming the key, and accepted values exact.
func TestParseConfigNumbers(t *testing.T) {
	valid := []struct {
		in   string
		want Config
	}{
		{"max_split_size_mb:20", Config{MaxSplitSizeMB: 20}},
		{"max_split_size_mb:21", Config{MaxSplitSizeMB: 21}},
		{"max_split_size_mb:0512", Config{MaxSplitSizeMB: 512}},
		{"max_split_size_mb:1099511627776", Config{MaxSplitSizeMB: 1 << 40}},
		{"garbage_collection_threshold:0.6", Config{GarbageCollectionThreshold: 0.6}},
		{"garbage_collection_threshold:6e-1", Config{GarbageCollectionThreshold: 0.6}},
		{"garbage_collection_threshold:.5", Config{GarbageCollectionThreshold: 0.5}},
		{"garbage_collection_threshold:0.999999", Config{GarbageCollectionThreshold: 0.999999}},
		{"per_process_memory_fraction:1", Config{PerProcessMemoryFraction: 1}},
		{"per_process_memory_fraction:1.0", Config{PerProcessMemoryFraction: 1}},
		{"per_process_memory_fraction:1e-3", Config{PerProcessMemoryFraction: 0.001}},
		{"per_process_memory_fraction:0.25", Config{PerProcessMemoryFraction: 0.25}},
		{"roundup_power2_divisions:0", Config{}},
		{"roundup_power2_divisions:1048576", Config{RoundupPower2Divisions: fill(1 << 20)}},
		{"roundup_power2_divisions:[1:0016,>:16]", Config{RoundupPower2Divisions: fill(16)}},
	}
	for _, tt := range valid {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseConfig(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("ParseConfig(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
	bad := map[string][]string{
		"max_split_size_mb": {"NaN", "Inf", "-0", "+512", "-512", "0", "19", "1e3", "512.0", "0x200", "5_12",
			"1099511627777", "9223372036854775808", "99999999999999999999999", "1e30", "½"},
		"garbage_collection_threshold": {"NaN", "nan", "Inf", "+Inf", "-Inf", "infinity", "-0", "0", "0.0", "1", "1.0",
			"1.5", "-0.5", "+0.5", "1e30", "1e-400", "0x1p-1", "0.5_0", "5e", "0.5.5", "0,5", "50%"},
		"per_process_memory_fraction": {"NaN", "Inf", "-Inf", "-0", "0", "1.0000001", "2", "-1", "+1", "1e30",
			"1e-400", "0x1p-1", "1_0", "1e", "half"},
		"roundup_power2_divisions": {"NaN", "-0", "+4", "-4", "3", "4.0", "1e2", "0x4", "2097152",
			"9223372036854775808", "[256:+2]", "[256:-0]", "[256:3]", "[256:NaN]"},
	}
	for key, vals := range bad {
		for _, v := range vals {
			in := key + ":" + v
			t.Run(in, func(t *testing.T) {
				c, err := ParseConfig(in)
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("ParseConfig(%q) = %+v, %v; want a *ConfigError", in, c, err)
				}
				if ce.Key != key {
					t.Errorf("error names key %q, want %q: %v", ce.Key, key, err)
				}
				if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "expected") && !strings.Contains(msg, "must") {
					t.Errorf("message %q does not say what is accepted on one line", msg)
				}
			})
		}
	}
}

func fill(v int) (a [kRoundUpPowerOfTwoIntervals]int) {
	for i := range a {
		a[i] = v
	}
	return a
}
