package vram

import (
	"errors"
	"strings"
	"testing"

	"github.com/vramgo/vram/backend/cpu"
)

// TestCPUMemoryLimit runs in a process of its own whose environment sets
// VRAM_CPU_MEMORY_LIMIT to 1 MiB: tensors on the CPU, and the data of
// tensors on sim devices, fit under it; one that would pass it is an
// ErrOutOfMemory error naming what was asked, what is live and the limit,
// after tensors dropped without Release were reclaimed; and releasing
// gives the memory back.
func TestCPUMemoryLimit(t *testing.T) {
	if !inChild(t, EnvCPUMemory+"=1MiB") {
		return
	}
	const limit = 1 << 20
	Zeros(Shape{1}).Release() // the first use applies the environment
	if got := cpu.MemoryLimit(); got != limit {
		t.Fatalf("cpu.MemoryLimit() = %d, want %d from %s", got, limit, EnvCPUMemory)
	}
	base := cpu.LiveBytes()
	const quarter = limit / 4 / 4 // float32 elements in a quarter of the limit
	tests := []struct {
		name    string
		held    Shape  // a tensor held on the CPU during the case
		make    func() // allocates, and leaves its tensors to the collector
		wantOOM bool
	}{
		{"fits", Shape{quarter}, func() { Zeros(Shape{2 * quarter}) }, false},
		{"past the limit", Shape{3 * quarter}, func() { Zeros(Shape{2 * quarter}) }, true},
		{"sim data counts", Shape{3 * quarter}, func() { Zeros(Shape{2 * quarter}, Sim(0)) }, true},
		{"dropped tensors are reclaimed", Shape{quarter}, func() {
			for range 8 {
				Zeros(Shape{2 * quarter}) // dropped without Release
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			held := Zeros(tt.held)
			err := Catch(tt.make)
			held.Release()
			if !tt.wantOOM {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			var ve *Error
			var oom *cpu.OutOfMemoryError
			if !errors.As(err, &ve) || ve.Kind != ErrOutOfMemory || !errors.As(err, &oom) {
				t.Fatalf("got %v, want an ErrOutOfMemory *Error wrapping a *cpu.OutOfMemoryError", err)
			}
			if oom.Requested != 2*quarter*4 || oom.Limit != limit || !oom.Configured || oom.Live < int64(tt.held.NumElements()*4) || oom.Live+oom.Requested <= limit {
				t.Errorf("%+v: want %d bytes asked beside at least %d live, limit %d", *oom, 2*quarter*4, tt.held.NumElements()*4, limit)
			}
			for _, part := range []string{"out of memory", "512.00 KiB", "1048576 bytes", "configured limit"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("%q does not say %q", err, part)
				}
			}
		})
	}
	settle(CPU, Sim(0))
	if got := cpu.LiveBytes(); got != base {
		t.Errorf("%d bytes live after every tensor was released or collected, %d before", got, base)
	}
}
