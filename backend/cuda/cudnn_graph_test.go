package cuda

import (
	"strings"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
)

// TestCuDNNGraphSetting checks that NoGraphAPI survives SetCuDNN and
// CuDNN alongside the other switches.
func TestCuDNNGraphSetting(t *testing.T) {
	old := CuDNN()
	defer SetCuDNN(old)
	for _, s := range []CuDNNSettings{{NoGraphAPI: true}, {Benchmark: true, NoGraphAPI: true}, {Benchmark: true}, {}} {
		SetCuDNN(s)
		if got := CuDNN(); got != s {
			t.Errorf("SetCuDNN(%+v) then CuDNN() = %+v", s, got)
		}
	}
}

// TestGraphAlignmentKey checks the alignments a plan is keyed by: the
// largest power of two dividing the pointer, at most 16.
func TestGraphAlignmentKey(t *testing.T) {
	for _, tc := range []struct {
		p    cuda.DevicePtr
		want uint8
	}{{0x1000, 16}, {0x1002, 2}, {0x1001, 1}, {0x1004, 4}, {0x1008, 8}, {0x1010, 16}, {0x7f0000000200, 16}} {
		if got := uint8(min(alignment(tc.p), 16)); got != tc.want {
			t.Errorf("%#x: %d, want %d", tc.p, got, tc.want)
		}
	}
}

// TestGraphFailuresKept checks that the fallback reasons are counted,
// kept once each and bounded.
func TestGraphFailuresKept(t *testing.T) {
	graphStats.mu.Lock()
	saved := graphStats.failures
	graphStats.failures = nil
	graphStats.mu.Unlock()
	t.Cleanup(func() { // leave room for the GPU tests' real reasons
		graphStats.mu.Lock()
		graphStats.failures = saved
		graphStats.mu.Unlock()
	})
	before := CuDNNGraphStatistics()
	graphFailed("test reason a")
	graphFailed("test reason a")
	for i := range 40 {
		graphFailed("test reason " + strings.Repeat("b", i+1))
	}
	after := CuDNNGraphStatistics()
	if n := after.Fallbacks - before.Fallbacks; n != 42 {
		t.Errorf("%d fallbacks counted, want 42", n)
	}
	if len(after.Failures) > 16 {
		t.Errorf("%d reasons kept, want at most 16", len(after.Failures))
	}
	seen := map[string]bool{}
	for _, f := range after.Failures {
		if seen[f] {
			t.Errorf("%q kept twice", f)
		}
		seen[f] = true
	}
}

// TestGraphKeyString checks that a key's description, which fallback
// reasons start with, names the direction, dtype, shapes and layouts.
func TestGraphKeyString(t *testing.T) {
	k := graphKey{conv: convKey{dt: backend.BFloat16, x: [4]int{64, 64, 56, 56}, w: [4]int{64, 64, 3, 3}, y: [4]int{64, 64, 56, 56},
		lx: nhwc, lw: nhwc, ly: nhwc, p: backend.Conv2DParams{Stride: [2]int{1, 1}, Padding: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: 1}},
		dir: dirFilter}
	s := k.String()
	for _, want := range []string{"backward filter", "bfloat16", "[64 64 56 56]", "NHWC", "groups 1"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
}

// TestGraphOpsTable checks that each direction's operation names its own
// descriptor type and attributes, and no two directions share one.
func TestGraphOpsTable(t *testing.T) {
	seen := map[int32]string{}
	for dir, o := range graphOps {
		for _, a := range []int32{int32(o.x), int32(o.w), int32(o.y), int32(o.alpha), int32(o.beta), int32(o.conv)} {
			if prev, dup := seen[a]; dup {
				t.Errorf("attribute %d used by %s and %s", a, prev, convDir(dir))
			}
			seen[a] = convDir(dir).String()
			if a < 700 || a > 717 {
				t.Errorf("%s: attribute %d is not a convolution operation's", convDir(dir), a)
			}
		}
	}
	if graphOps[dirData].typ == graphOps[dirFilter].typ || graphOps[dirForward].typ == graphOps[dirData].typ {
		t.Error("two directions share an operation type")
	}
}
