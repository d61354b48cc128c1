package cuda

import (
	"testing"
	"unsafe"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/cuda"
)

var (
	_ memory.RangeMapper = (*virtualArena)(nil)
	_ memory.RangeMapper = replayVirtual{}
)

// TestMapRangeGPU maps a run of three chunks with one cuMemSetAccess over
// all of them, through the device's arena and through a replay arena: the
// whole run must be writable and readable across the chunks' boundaries,
// each chunk must unmap on its own, and the replay arena must time one
// cuMemSetAccess for the run and a cuMemCreate and cuMemMap per chunk.
func TestMapRangeGPU(t *testing.T) {
	d := gpu(t, 0)
	va, ok := d.arena.(*virtualArena)
	if !ok {
		t.Skip("the GPU has no virtual memory management")
	}
	ra, err := NewReplayArena(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	g := va.gran
	sizes := []int64{g, 4 * g, 2 * g}
	var total int64
	for _, s := range sizes {
		total += s
	}
	arenas := []struct {
		name  string
		arena memory.VirtualArena
	}{{"device arena", va}, {"replay arena", ra.Arena().(memory.VirtualArena)}}
	for _, tc := range arenas {
		t.Run(tc.name, func(t *testing.T) {
			base, err := tc.arena.Reserve(total)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.arena.(memory.RangeMapper).MapRange(base, sizes); err != nil {
				t.Fatalf("MapRange of %v at %#x: %v", sizes, base, err)
			}
			if err := d.enter(); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, total)
			err = cuda.MemsetD8(cuda.DevicePtr(base), 0x5a, uint64(total))
			if err == nil {
				err = cuda.MemcpyDtoH(unsafe.Pointer(&buf[0]), cuda.DevicePtr(base), uint64(total))
			}
			d.exit()
			if err != nil {
				t.Fatalf("writing and reading the mapped run (one cuMemSetAccess over %d chunks): %v", len(sizes), err)
			}
			for i, b := range buf {
				if b != 0x5a {
					t.Fatalf("byte %d of the run reads %#x after a memset to 0x5a (chunk boundaries at %d and %d)", i, b, sizes[0], sizes[0]+sizes[1])
				}
			}
			at := base
			for _, s := range sizes {
				if err := tc.arena.Unmap(at, s); err != nil {
					t.Errorf("Unmap of the chunk [%#x, +%d) of the run: %v", at, s, err)
				}
				at += uint64(s)
			}
			if err := tc.arena.Unreserve(base, total); err != nil {
				t.Error(err)
			}
		})
	}
	counts := map[string]int64{}
	for _, row := range ra.Times().Rows() {
		counts[row.Call] += row.Count
	}
	if counts["cuMemSetAccess"] != 1 || counts["cuMemCreate"] != 3 || counts["cuMemMap"] != 3 || counts["cuMemUnmap"] != 3 {
		t.Errorf("replay arena timed %v, want 1 cuMemSetAccess and 3 of cuMemCreate, cuMemMap and cuMemUnmap", counts)
	}
}
