package analyze

import (
	"errors"
	"testing"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"
)

// TestAddrArena checks that the arena of fix-check replays hands out the
// recorded segment addresses in order, size by size, never two ranges
// that overlap (it places a segment elsewhere when the recorded range is
// taken), accounts memory on the simulated device, and refuses what the
// device cannot hold or what it did not hand out.
func TestAddrArena(t *testing.T) {
	const hi = uint64(0x7fc300000000)
	recorded, err := recordedSegments(trace.Events{
		{Action: trace.ActionSegmentAlloc, Addr: hi, Size: 20 * mib},
		{Action: trace.ActionSegmentAlloc, Addr: hi - 32*mib, Size: 20 * mib}, // falling, as cudaMalloc hands them out
		{Action: trace.ActionSegmentAlloc, Addr: hi + 64*mib, Size: 2 * mib},
		{Action: trace.ActionAlloc, Addr: hi, Size: 100},
		{Action: trace.ActionSegmentFree, Addr: hi, Size: 20 * mib},
		{Action: trace.ActionSegmentAlloc, Addr: hi, Size: 20 * mib}, // the freed range again
	})
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		free    uint64 // Free this address (with size), else Alloc size
		size    int64
		want    uint64 // the address, 0 for one of the arena's own
		wantErr error  // for Alloc: errors.Is; for Free: any error when non-nil
	}
	tests := []struct {
		name     string
		capacity int64
		steps    []step
	}{
		{"in recorded order, size by size", 1 << 30, []step{
			{size: 2 * mib, want: hi + 64*mib},
			{size: 20 * mib, want: hi},
			{size: 20 * mib, want: hi - 32*mib},
		}},
		{"a freed range handed out again", 1 << 30, []step{
			{size: 20 * mib, want: hi},
			{size: 20 * mib, want: hi - 32*mib},
			{free: hi, size: 20 * mib},
			{size: 20 * mib, want: hi},
		}},
		{"recorded range still taken: one of its own", 1 << 30, []step{
			{size: 20 * mib, want: hi},
			{size: 20 * mib, want: hi - 32*mib},
			{size: 20 * mib, want: 0}, // hi again, but the replay did not free it
			{size: 20 * mib, want: 0}, // no more recorded
			{size: 4 * mib, want: 0},  // a size never recorded
		}},
		{"beyond the device", 30 * mib, []step{
			{size: 20 * mib, want: hi},
			{size: 20 * mib, wantErr: memory.ErrArenaFull},
			{free: hi, size: 20 * mib},
			{size: 20 * mib, want: hi - 32*mib}, // the failed one took nothing
		}},
		{"frees it did not hand out", 1 << 30, []step{
			{size: 20 * mib, want: hi},
			{free: hi - 32*mib, size: 20 * mib, wantErr: errors.New("any")},
			{free: hi, size: 2 * mib, wantErr: errors.New("any")},
			{free: hi, size: 20 * mib},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAddrArena(tc.capacity, recorded)
			type rng struct{ addr, end uint64 }
			live := map[uint64]rng{}
			for i, s := range tc.steps {
				if s.free != 0 {
					err := a.Free(s.free, s.size)
					if (err != nil) != (s.wantErr != nil) {
						t.Fatalf("step %d: Free(0x%x, %d) = %v", i, s.free, s.size, err)
					}
					if err == nil {
						delete(live, s.free)
					}
					continue
				}
				addr, err := a.Alloc(s.size)
				if s.wantErr != nil {
					if !errors.Is(err, s.wantErr) {
						t.Fatalf("step %d: Alloc(%d) = 0x%x, %v; want %v", i, s.size, addr, err, s.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: Alloc(%d): %v", i, s.size, err)
				}
				if s.want != 0 && addr != s.want {
					t.Errorf("step %d: Alloc(%d) = 0x%x, want 0x%x", i, s.size, addr, s.want)
				}
				end := addr + uint64(s.size)
				for _, r := range live {
					if addr < r.end && r.addr < end {
						t.Errorf("step %d: 0x%x..0x%x overlaps 0x%x..0x%x", i, addr, end, r.addr, r.end)
					}
				}
				live[addr] = rng{addr, end}
			}
			var used int64
			for _, r := range live {
				used += int64(r.end - r.addr)
			}
			if got := a.sim.Used(); got != used {
				t.Errorf("the simulated device holds %d bytes, the arena handed out %d", got, used)
			}
		})
	}
}

// TestAddrArenaHostile checks recorded addresses no driver returns: 0,
// ranges that wrap around the address space, and ranges that overlap:
// the arena hands out ranges that lie in the address space and never
// overlap.
func TestAddrArenaHostile(t *testing.T) {
	const top = ^uint64(0)
	recorded, err := recordedSegments(trace.Events{
		{Action: trace.ActionSegmentAlloc, Addr: 0, Size: 2 * mib},
		{Action: trace.ActionSegmentAlloc, Addr: top - mib, Size: 2 * mib},
		{Action: trace.ActionSegmentAlloc, Addr: 1 << 40, Size: 20 * mib},
		{Action: trace.ActionSegmentAlloc, Addr: 1<<40 + mib, Size: 20 * mib},
		{Action: trace.ActionSegmentAlloc, Addr: top - 40*mib, Size: 20 * mib},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := newAddrArena(1<<30, recorded)
	type rng struct{ addr, end uint64 }
	var live []rng
	for _, size := range []int64{2 * mib, 2 * mib, 20 * mib, 20 * mib, 20 * mib, 20 * mib, 2 * mib} {
		addr, err := a.Alloc(size)
		if err != nil {
			t.Fatalf("Alloc(%d): %v", size, err)
		}
		end := addr + uint64(size)
		if addr == 0 || end < addr {
			t.Fatalf("Alloc(%d) = 0x%x: outside the address space", size, addr)
		}
		for _, r := range live {
			if addr < r.end && r.addr < end {
				t.Fatalf("0x%x..0x%x overlaps 0x%x..0x%x", addr, end, r.addr, r.end)
			}
		}
		live = append(live, rng{addr, end})
	}
	for _, r := range live {
		if err := a.Free(r.addr, int64(r.end-r.addr)); err != nil {
			t.Error(err)
		}
	}
	if a.sim.Used() != 0 {
		t.Errorf("%d bytes still held", a.sim.Used())
	}
}
