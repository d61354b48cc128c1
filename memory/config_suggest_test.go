package memory

import (
	"errors"
	"strings"
	"testing"
)

// TestParseConfigSuggests checks that a key or value a PyTorch user
// misspells is refused with the accepted words and the one meant, and that
// a word near none of them gets no guess.
func TestParseConfigSuggests(t *testing.T) {
	tests := []struct {
		in      string
		key     string // the key the error names
		suggest string // the word of "did you mean", "" for none
	}{
		{"expandable_segment:True", "expandable_segment", "expandable_segments"},
		{"max_split_size:128", "max_split_size", "max_split_size_mb"},
		{"Expandable_Segments:True", "Expandable_Segments", "expandable_segments"},
		{"MAX_SPLIT_SIZE_MB:128", "MAX_SPLIT_SIZE_MB", "max_split_size_mb"},
		{"garbage_collection_treshold:0.6", "garbage_collection_treshold", "garbage_collection_threshold"},
		{"roundup_power_2_divisions:4", "roundup_power_2_divisions", "roundup_power2_divisions"},
		{"release_lock_on_cuda_malloc:True", "release_lock_on_cuda_malloc", "release_lock_on_cudamalloc"},
		{"pinned_num_register_thread:8", "pinned_num_register_thread", "pinned_num_register_threads"},
		{"expandable:True", "expandable", "expandable_segments"},
		{"backends:native", "backends", "backend"},
		{"policy:PyTorch", "policy", "pytorch"},
		{"policy:vrm", "policy", "vram"},
		{"backend:Native", "backend", "native"},
		{"pinned:True", "pinned", ""}, // a prefix of four keys
		{"unknown_key:1", "unknown_key", ""},
		{"x:1", "x", ""},
		{"backend:cudaMallocAsync", "backend", ""},
		{strings.Repeat("k", 10000) + ":1", strings.Repeat("k", 10000), ""},
		{"max_split_size_mb" + strings.Repeat("x", 10000) + ":1", "max_split_size_mb" + strings.Repeat("x", 10000), "max_split_size_mb"},
		{"ëxpandable_segments:True", "ëxpandable_segments", "expandable_segments"},
	}
	for _, tt := range tests {
		name := tt.in
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig(tt.in)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseConfig = %v, want a *ConfigError", err)
			}
			if ce.Key != tt.key {
				t.Errorf("error names key %.50q, want %.50q", ce.Key, tt.key)
			}
			msg := err.Error()
			if tt.suggest == "" {
				if strings.Contains(msg, "did you mean") {
					t.Errorf("error %q guesses; want no guess", msg)
				}
				return
			}
			if want := `did you mean "` + tt.suggest + `"?`; !strings.Contains(msg, want) {
				t.Errorf("error %q lacks %s", msg, want)
			}
			if !strings.Contains(msg, "allowed:") {
				t.Errorf("error %q does not list the accepted words", msg)
			}
		})
	}
}

// TestConfigWith checks that With puts a string's settings over a Config,
// keeping the fields the string leaves out, and that an invalid string
// leaves the Config as it was.
func TestConfigWith(t *testing.T) {
	user := Config{MaxSplitSizeMB: 128, GarbageCollectionThreshold: 0.6}
	user.RoundupPower2Divisions[3] = 4
	pytorch := user
	pytorch.Policy = PolicyPyTorch
	expandable := pytorch
	expandable.ExpandableSegments = true
	tests := []struct {
		name    string
		base    Config
		s       string
		want    Config
		wantErr bool
	}{
		{"empty", user, "", user, false},
		{"blanks", user, " \t", user, false},
		{"policy", user, "policy:pytorch", pytorch, false},
		{"two keys and a trailing comma", user, "policy:pytorch,expandable_segments:True,", expandable, false},
		{"a key of the base again", expandable, "max_split_size_mb:256", func() Config { c := expandable; c.MaxSplitSizeMB = 256; return c }(), false},
		{"divisions of one size", user, "roundup_power2_divisions:[1:2]", func() Config {
			c := user
			c.RoundupPower2Divisions[0] = 2
			return c
		}(), false},
		{"divisions of every size", user, "roundup_power2_divisions:2", func() Config {
			c := user
			c.RoundupPower2Divisions = [16]int{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}
			return c
		}(), false},
		{"bad value after a good key", user, "policy:pytorch,max_split_size_mb:-1", user, true},
		{"bad key", user, "expandable_segment:True", user, true},
		{"lone comma", user, ",", user, true},
		{"huge number", user, "max_split_size_mb:99999999999999999999999", user, true},
		{"NaN", user, "garbage_collection_threshold:NaN", user, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.base.With(tt.s)
			if (err != nil) != tt.wantErr {
				t.Fatalf("With(%q) error = %v, want error %v", tt.s, err, tt.wantErr)
			}
			var ce *ConfigError
			if err != nil && !errors.As(err, &ce) {
				t.Errorf("error %v is not a *ConfigError", err)
			}
			if got != tt.want {
				t.Errorf("With(%q) = %q, want %q", tt.s, got.String(), tt.want.String())
			}
		})
	}
}

// TestParseConfigColonInValue checks that a value followed by a second ':'
// is refused with the whole value, up to the next ',', and the reason, and the per-size divisions
// written without brackets with the form that has them.
func TestParseConfigColonInValue(t *testing.T) {
	tests := []struct {
		in, key, value, mention string
	}{
		{"expandable_segments:True:False", "expandable_segments", "True:False", "cannot hold ':'"},
		{"policy:pytorch:x", "policy", "pytorch:x", "cannot hold ':'"},
		{"max_split_size_mb:128:256", "max_split_size_mb", "128:256", "cannot hold ':'"},
		{"backend:native:cudaMallocAsync", "backend", "native:cudaMallocAsync", "cannot hold ':'"},
		{"roundup_power2_divisions:256:1", "roundup_power2_divisions", "256:1", "[256:1,512:2,>:4]"},
		{"roundup_power2_divisions:256:1,512:2", "roundup_power2_divisions", "256:1", "brackets"},
		{"roundup_power2_divisions:[256:1]:2", "roundup_power2_divisions", "[256:1]:2", "cannot hold ':'"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			c, err := Config{MaxSplitSizeMB: 64}.With(tt.in)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("With = %v, want a *ConfigError", err)
			}
			if ce.Key != tt.key || ce.Value != tt.value || !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q (key %q, value %q), want key %q, value %q and %q", err, ce.Key, ce.Value, tt.key, tt.value, tt.mention)
			}
			if c != (Config{MaxSplitSizeMB: 64}) {
				t.Errorf("With returned %q, want the Config it was given", c.String())
			}
		})
	}
}

// TestParseConfigDivisionsRepeated checks roundup_power2_divisions given
// twice against PyTorch's parser, which resets the divisions once per
// string: the per-size form sets the intervals its entries cover and the
// others keep what the key set before.
func TestParseConfigDivisionsRepeated(t *testing.T) {
	tests := []struct {
		in   string
		want [16]int
	}{
		{"roundup_power2_divisions:4,roundup_power2_divisions:[256:1,1024:2]",
			[16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 2, 4, 4, 4, 4, 4}},
		{"roundup_power2_divisions:4,roundup_power2_divisions:[256:1,1024:2,>:8]",
			[16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 2, 8, 8, 8, 8, 8}},
		{"roundup_power2_divisions:[1:2,4:8],roundup_power2_divisions:[2:1]",
			[16]int{1, 1, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"roundup_power2_divisions:[1:2,4:8],roundup_power2_divisions:16",
			[16]int{16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16}},
		{"roundup_power2_divisions:[256:1,1024:2]",
			[16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 2, 0, 0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			c, err := ParseConfig(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if c.RoundupPower2Divisions != tt.want {
				t.Errorf("divisions %v, want %v", c.RoundupPower2Divisions, tt.want)
			}
			back, err := ParseConfig(c.String())
			if err != nil || back != c {
				t.Errorf("String %q reads back as %v (%v)", c.String(), back.RoundupPower2Divisions, err)
			}
		})
	}
}

// FuzzConfigWith checks that With of any string over a valid Config gives
// a valid Config, or the one it was given unchanged and a *ConfigError.
func FuzzConfigWith(f *testing.F) {
	for _, s := range []string{
		"", "policy:pytorch", "roundup_power2_divisions:[256:1,>:8]", "max_split_size_mb:99999999999999999999",
		"expandable_segment:True", "policy:pytorch:x", "roundup_power2_divisions:[2:1],", "garbage_collection_threshold:NaN",
	} {
		f.Add(s)
	}
	base := Config{Policy: PolicyPyTorch, MaxSplitSizeMB: 64, GarbageCollectionThreshold: 0.5}
	base.RoundupPower2Divisions[5] = 8
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxFuzzConfig {
			return
		}
		c, err := base.With(s)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("With(%q) error %v is not a *ConfigError", s, err)
			}
			if c != base {
				t.Fatalf("With(%q) failed and changed the Config to %q", s, c.String())
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("With(%q) = %q, which Validate refuses: %v", s, c.String(), err)
		}
	})
}
