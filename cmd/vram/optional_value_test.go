package main

import (
	"strings"
	"testing"
)

// TestOptionalValueStartingWithDash gives --fit, whose SIZE is optional,
// a value that starts with '-' as a separate word. pflag reads that word as
// shorthand flags; the usage error says what is wrong with the value, as
// it does for --fit=VALUE, instead of naming a shorthand flag that no one
// meant.
func TestOptionalValueStartingWithDash(t *testing.T) {
	negative := "a size cannot be negative"
	tests := []struct {
		args []string
		want string // in the message after "vram: "
	}{
		{[]string{"replay", "--fit", "-1GB", "x.trace"}, `replay: --fit: bad size "-1GB": ` + negative},
		{[]string{"replay", "--fit", "-24GiB", "x.trace"}, `replay: --fit: bad size "-24GiB": ` + negative},
		{[]string{"replay", "--fit", "-.5GB", "x.trace"}, `replay: --fit: bad size "-.5GB": ` + negative},
		{[]string{"replay", "--fit", "-0", "x.trace"}, `replay: --fit: bad size "-0"`},
		// Another unknown shorthand after --fit is still that.
		{[]string{"replay", "--fit", "-q", "x.trace"}, "replay: unknown shorthand flag: 'q' in -q"},
		// Without --fit before it, a negative number is an unknown flag.
		{[]string{"replay", "-1GB", "x.trace"}, "replay: unknown shorthand flag: '1' in -1GB"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if stdout != "" {
				t.Errorf("stdout not empty:\n%s", stdout)
			}
			if !strings.HasPrefix(stderr, "vram: "+tc.want) {
				t.Errorf("stderr %q\nwant   %q...", stderr, "vram: "+tc.want)
			}
		})
	}
}
