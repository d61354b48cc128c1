package models

import (
	"errors"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend/cpu"
	"github.com/vramgo/vram/internal/memtest"
)

// TestResNetRefusedBeforeAllocating builds ResNets whose block counts or
// number of classes cannot fit in memory: NewResNet refuses them with an
// ErrOutOfMemory error naming the counts and the bytes, before it
// allocates a thing. It allocated block after block until the memory ran
// out, or built every block before the fully connected layer failed. It
// runs in a process of its own under a low host memory limit, so that a
// model that is not refused stops at the limit.
func TestResNetRefusedBeforeAllocating(t *testing.T) {
	if !memtest.InChild(t) {
		return
	}
	memtest.Settle(vram.CPU)
	if err := cpu.Configure(cpu.Options{MemoryLimit: cpu.LiveBytes() + 4<<20}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cpu.Configure(cpu.Options{}); err != nil {
			t.Error(err)
		}
	}()
	tests := []struct {
		name   string
		kind   BlockKind
		layers [4]int
		cfg    Config
		want   []string
	}{
		{"2^40 basic blocks in stage 1", BasicKind, [4]int{1 << 40, 1, 1, 1}, Config{}, []string{"layers [1099511627776 1 1 1] of BasicBlock blocks"}},
		{"2^40 bottlenecks in stage 4", BottleneckKind, [4]int{1, 1, 1, 1 << 40}, Config{}, []string{"layers [1 1 1 1099511627776] of Bottleneck blocks"}},
		{"2^40 blocks in every stage", BasicKind, [4]int{1 << 40, 1 << 40, 1 << 40, 1 << 40}, Config{}, []string{"1099511627776"}},
		{"2^40 classes", BasicKind, [4]int{1, 1, 1, 1}, Config{NumClasses: 1 << 40}, []string{"1099511627776 classes"}},
		{"2^62 classes", BottleneckKind, [4]int{1, 1, 1, 1}, Config{NumClasses: 1 << 62}, []string{"int64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := vram.MemoryAllocated(vram.CPU)
			err := vram.Catch(func() { NewResNet(tt.kind, tt.layers, tt.cfg, vram.CPU) })
			var e *vram.Error
			if !errors.As(err, &e) || e.Kind != vram.ErrOutOfMemory || e.Op != "resnet" {
				t.Fatalf("got %v, want an ErrOutOfMemory *vram.Error of resnet", err)
			}
			for _, part := range append(tt.want, "bytes", "nothing was allocated") {
				if !strings.Contains(e.Detail, part) {
					t.Errorf("%q does not say %q", e.Detail, part)
				}
			}
			if after := vram.MemoryAllocated(vram.CPU); after != before {
				t.Errorf("%d bytes allocated on the CPU before, %d after", before, after)
			}
		})
	}
}
