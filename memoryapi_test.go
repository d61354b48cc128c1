package vram

import (
	"errors"
	"strings"
	"testing"

	"github.com/vramgo/vram/memory"
)

// sim:3 (256 MiB) is left to these tests.
var tight = Sim(3)

func TestMemoryCallsOnSim(t *testing.T) {
	EmptyCache(tight)
	base := MemoryReserved(tight)
	x := Zeros(Shape{1 << 20}, tight) // 4 MiB
	if got := MemoryAllocated(tight); got < 4<<20 {
		t.Fatalf("allocated %d after a 4 MiB tensor", got)
	}
	reserved := MemoryReserved(tight)
	if reserved <= base {
		t.Fatalf("reserved did not grow: %d -> %d", base, reserved)
	}
	x.Release()
	if MemoryAllocated(tight) != 0 || MemoryReserved(tight) != reserved {
		t.Fatalf("after Release: allocated %d, reserved %d (want 0 and %d: the cache keeps it)",
			MemoryAllocated(tight), MemoryReserved(tight), reserved)
	}
	EmptyCache(tight)
	if MemoryReserved(tight) != base {
		t.Fatalf("after EmptyCache reserved %d, want %d", MemoryReserved(tight), base)
	}
	if MaxMemoryAllocated(tight) < 4<<20 || MaxMemoryReserved(tight) < 4<<20 {
		t.Fatalf("peaks: %d %d", MaxMemoryAllocated(tight), MaxMemoryReserved(tight))
	}
	ResetPeakMemoryStats(tight)
	if MaxMemoryAllocated(tight) != 0 {
		t.Fatalf("peak after reset: %d", MaxMemoryAllocated(tight))
	}
	s := MemoryStats(tight).Map()
	if _, ok := s["allocated_bytes.all.peak"]; !ok {
		t.Fatalf("stats lack PyTorch's names: %v", s)
	}
	if !strings.Contains(MemorySummary(tight), "Reserved") && !strings.Contains(MemorySummary(tight), "reserved") {
		t.Fatalf("summary:\n%s", MemorySummary(tight))
	}
	if MemoryStats(CPU) != (memory.Stats{}) || MemorySnapshot(CPU) != nil {
		t.Fatal("the CPU has no caching allocator")
	}
	if err := RecordMemoryHistory(CPU, true, 10, false); err == nil {
		t.Fatal("recording on the CPU should fail")
	}
}

func TestRegionsInSnapshot(t *testing.T) {
	if err := RecordMemoryHistory(tight, true, 1000, true); err != nil {
		t.Fatal(err)
	}
	defer RecordMemoryHistory(tight, false, 0, false)
	w := Ones(Shape{64, 64}, tight, WithGrad())
	var act, loss *Tensor
	Region("forward", func() {
		act = w.MatMul(w).Tanh()
		loss = act.Sum()
	})
	loss.Backward()
	snap := MemorySnapshot(tight)
	regions := map[string]bool{}
	for _, seg := range snap.Segments {
		for _, b := range seg.Blocks {
			if b.State == "active_allocated" {
				regions[b.Region] = true
			}
		}
	}
	if !regions["forward"] || !regions["backward"] {
		t.Fatalf("live blocks by region: %v, want forward and backward", regions)
	}
	found := false
	for _, e := range snap.History {
		for _, f := range e.Frames {
			if strings.Contains(f.File, "memoryapi_test.go") {
				found = true
			}
		}
	}
	if !found {
		t.Error("history frames do not reach the user's code")
	}
	for _, x := range []*Tensor{w, act, loss} {
		x.Release()
	}
}

func TestOutOfMemoryOnSim(t *testing.T) {
	var held []*Tensor
	defer func() {
		for _, x := range held {
			x.Release()
		}
		EmptyCache(tight)
	}()
	err := Catch(func() {
		for range 100 {
			held = append(held, Empty(Shape{16 << 20}, tight)) // 64 MiB each, 256 MiB device
		}
	})
	var oom *memory.OutOfMemoryError
	if !errors.Is(err, ErrOutOfMemory) || !errors.As(err, &oom) {
		t.Fatalf("got %v, want an out-of-memory error", err)
	}
	if len(held) != 4 {
		t.Fatalf("%d tensors of 64 MiB fit in 256 MiB, want exactly 4", len(held))
	}
	// Nothing is lost: after releasing, the memory is usable again.
	for _, x := range held {
		x.Release()
	}
	held = held[:0]
	if MemoryAllocated(tight) != 0 {
		t.Fatalf("allocated %d after releasing everything", MemoryAllocated(tight))
	}
	held = append(held, Empty(Shape{16 << 20}, tight))
}

// Tensors dropped without Release still hold device memory until Go's
// garbage collector finds them; the allocator's last resort before an OOM
// runs the collector, so their memory is reclaimed.
func TestOutOfMemoryReclaimsUnreleasedTensors(t *testing.T) {
	defer EmptyCache(tight)
	for range 20 {
		Empty(Shape{16 << 20}, tight) // 64 MiB, never released
	}
	if MemoryAllocated(tight) > 256<<20 {
		t.Fatal("impossible")
	}
}

func TestDeviceMemoryOnSim(t *testing.T) {
	x := Empty(Shape{8 << 20}, tight) // 32 MiB
	defer func() { x.Release(); EmptyCache(tight) }()
	m, err := DeviceMemory(tight)
	if err != nil {
		t.Fatal(err)
	}
	if m.Total != 256<<20 || m.Reserved < 32<<20 || m.Used != m.Reserved || m.ProcessOther != 0 || m.OtherProcs != 0 || m.Unattributed != 0 {
		t.Fatalf("breakdown: %+v", m)
	}
	if !strings.Contains(MemorySummary(tight), "allocator reserve") {
		t.Errorf("summary lacks the device breakdown:\n%s", MemorySummary(tight))
	}
	if _, err := DeviceMemory(CPU); err == nil {
		t.Error("the CPU has no device memory information")
	}
}
