package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vramgo/vram"
)

func TestRun(t *testing.T) {
	devs := []vram.Device{vram.CPU}
	if vram.CUDAAvailable() {
		devs = append(devs, vram.CUDA(0))
	}
	for _, dev := range devs {
		var b strings.Builder
		if err := run(&b, dev, 300); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if !strings.Contains(out, "skipped: inf/NaN gradients") || !strings.Contains(out, "grown after") {
			t.Errorf("%v: no overflow skipped or no growth shown:\n%s", dev, out)
		}
		m := regexp.MustCompile(`(\d+) of 300 steps skipped; loss ([0-9.]+) -> ([0-9.]+); final scale (\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%v: no summary line:\n%s", dev, out)
		}
		skipped, _ := strconv.Atoi(m[1])
		first, _ := strconv.ParseFloat(m[2], 64)
		last, _ := strconv.ParseFloat(m[3], 64)
		if skipped < 8 || skipped > 30 {
			t.Errorf("%v: %d steps skipped; want the 8 back-offs from 2^24 to 2^16 and a few more", dev, skipped)
		}
		if !(last < first/100) {
			t.Errorf("%v: loss %v -> %v: did not train", dev, first, last)
		}
	}
}
