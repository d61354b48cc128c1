package main

import (
	"github.com/vramgo/vram/internal/units"
	"github.com/vramgo/vram/memory/trace"
)

// sizeFlag parses the value of a size flag such as --max-input, which
// must be positive; the usage error names the flag, says what is wrong
// with the value and gives example.
func sizeFlag(flag, value, example string) (int64, error) {
	n, err := units.ParseBytes(value)
	if err != nil {
		return 0, usagef("%s %q: %s; want a positive size such as %s", flag, value, sizeReason(err), example)
	}
	return n, nil
}

// inputLimits parses --max-input of replay and analyze: the most bytes of
// a snapshot, after decompression, that they read whole.
func inputLimits(maxInput string) (trace.Limits, error) {
	n, err := sizeFlag("--max-input", maxInput, "1GiB")
	if err != nil {
		return trace.Limits{}, err
	}
	return trace.Limits{MaxBytes: n}, nil
}
