package vram

import (
	"fmt"
	"testing"

	"github.com/vramgo/vram/internal/fuzztest"
)

// TestFuzzSeeds checks the committed seed corpora of this package (run with
// -update-fuzz-seeds to rewrite them): device strings as flags, environment
// variables and code write them, and near misses.
func TestFuzzSeeds(t *testing.T) {
	var seeds []fuzztest.Seed
	for i, s := range []string{"cpu", "cpu:0", "cuda", "cuda:0", "cuda:7", " sim:3 ", "sim", "CUDA:0", "cuda:01",
		"cuda:-1", "cuda:+1", "cuda:0:1", "cuda:9223372036854775807", "cuda:99999999999999999999", "gpu:0", "mps", ":0", "sim:\x1b[31m"} {
		seeds = append(seeds, fuzztest.Seed{Name: fmt.Sprintf("%02d", i), Args: []any{s}})
	}
	fuzztest.Check(t, "FuzzParseDevice", seeds, 256)
}
