package vram

import (
	"errors"
	"strings"
	"testing"
)

// TestParseDTypeErrors checks that a dtype name ParseDType does not know
// gives an error of vram's own (prefix "vram:", kind ErrArgument) that
// quotes the name, lists the names it takes, and says how to write
// PyTorch's spelling.
func TestParseDTypeErrors(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"complex64", []string{`"complex64"`, "float32", "bfloat16", "bool"}},
		{"Float32", []string{`"Float32"`, "float32"}},
		{"torch.float16", []string{`"torch.float16"`, `without "torch."`}},
		{"", []string{`""`, "float32"}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			d, err := ParseDType(tc.in)
			if !errors.Is(err, ErrArgument) || !strings.HasPrefix(err.Error(), "vram: ") {
				t.Fatalf("ParseDType(%q) = %v, %v, want a vram error of kind ErrArgument", tc.in, d, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ParseDType(%q) = %q, want it to contain %q", tc.in, err, w)
				}
			}
		})
	}
}
