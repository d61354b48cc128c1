package memory

import (
	"errors"
	"strings"
	"testing"
)

// TestParseConfigQuotesWholeEntry checks that an error about a malformed
// entry quotes all of it as written, up to the next ',' outside brackets,
// escaped for a terminal, rather than the token the parser stopped at.
func TestParseConfigQuotesWholeEntry(t *testing.T) {
	tests := []struct {
		in, key, value, want string
	}{
		{"policy:x\x1b[31m", "policy", "x\x1b[31m", `policy:x\x1b[31m: unknown policy`},
		{"policy:vram\x1b[0m", "policy", "vram\x1b[0m", `policy:vram\x1b[0m: unknown policy`},
		{"roundup_power2_divisions:[>:4]", "roundup_power2_divisions", "[>:4]", `roundup_power2_divisions:[>:4]: '>' must follow at least one size`},
		{"roundup_power2_divisions:[256:1,3:2]", "roundup_power2_divisions", "[256:1,3:2]", `roundup_power2_divisions:[256:1,3:2]: each size must be a power of two in MiB (1, 2, 4, ...) or '>' (at 3)`},
		{"roundup_power2_divisions:[256:3],policy:vram", "roundup_power2_divisions", "[256:3]", `roundup_power2_divisions:[256:3]: divisions must be 0 or a power of two up to 1048576 (at 3)`},
		{"expandable_segments:Tr[ue]", "expandable_segments", "Tr[ue]", `expandable_segments:Tr[ue]: expected True or False`},
		{"max_split_size_mb:512]x,policy:vram", "max_split_size_mb", "512]x", `max_split_size_mb:512]x: expected ','`},
		{"policy:vram expandable_segments:True", "policy", "vram expandable_segments:True", `policy:vram expandable_segments:True: expected ','`},
		{" garbage_collection_threshold:0.6\a[ , policy:vram", "garbage_collection_threshold", "0.6\a[ , policy:vram", `garbage_collection_threshold:0.6\x07[ , policy:vram: `},
		{"[x]:1", "", "[x]:1", `VRAM_ALLOC_CONF: expected a key, got "[" in "[x]:1"`},
		{"policy:,max_split_size_mb:512", "policy", "", `VRAM_ALLOC_CONF: policy: missing value`},
		{"policy::vram", "policy", ":vram", `VRAM_ALLOC_CONF: policy::vram: missing value`},
		{"policy[x]:vram", "policy", "", `policy: expected ':' and a value after the key (in policy[x]:vram)`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			base := Config{MaxSplitSizeMB: 64}
			c, err := base.With(tt.in)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("With(%q) = %v, want a *ConfigError", tt.in, err)
			}
			if ce.Key != tt.key || ce.Value != tt.value {
				t.Errorf("error has key %q, value %q, want %q, %q", ce.Key, ce.Value, tt.key, tt.value)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %q does not contain %q", msg, tt.want)
			}
			if strings.ContainsAny(msg, "\x1b\a") {
				t.Errorf("error %q holds a control character", msg)
			}
			if c != base {
				t.Errorf("With returned %q, want the Config it was given", c.String())
			}
		})
	}
}
