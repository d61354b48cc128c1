package cuda

import (
	"testing"
	"time"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"
)

// replayEvents is a small training-like trace: weights kept, activations
// of changing sizes freed every step, one large block, a few small ones.
func replayEvents() []trace.Event {
	var ev []trace.Event
	addr := uint64(0x1000)
	alloc := func(size int64) uint64 {
		addr += 0x1000
		ev = append(ev, trace.Event{Action: trace.ActionAlloc, Addr: addr, Size: size})
		return addr
	}
	free := func(a uint64) { ev = append(ev, trace.Event{Action: trace.ActionFreeCompleted, Addr: a}) }
	for i := 0; i < 8; i++ {
		alloc(int64(i+1) << 20) // weights
	}
	for step := 0; step < 20; step++ {
		var acts []uint64
		for i := 0; i < 10; i++ {
			acts = append(acts, alloc(int64(1+(step*7+i*3)%40)<<20))
			acts = append(acts, alloc(int64(512+step*100+i)))
		}
		big := alloc(int64(300+10*step) << 20)
		for _, a := range acts {
			free(a)
		}
		free(big)
	}
	return ev
}

// TestReplayArenaGPU replays a trace through the real CUDA arena under the
// three policies: no out-of-memory error, every driver call measured (the
// counts match the allocator's), the cost model's figure for the same
// calls reported, and Close gives every byte back.
func TestReplayArenaGPU(t *testing.T) {
	d := gpu(t, 0)
	freeBefore := deviceFree(t, d)
	for _, conf := range []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", "policy:vram"} {
		t.Run(conf, func(t *testing.T) {
			ra, err := NewReplayArena(0)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := memory.ParseConfig(conf)
			if err != nil {
				t.Fatal(err)
			}
			if !ra.Virtual() && conf != "policy:pytorch" {
				t.Skip("the GPU has no virtual memory management")
			}
			res, err := memory.Replay(replayEvents(), ra.Arena(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.NumOOMs != 0 || res.UnmatchedFrees != 0 {
				t.Fatalf("replay: %+v", res)
			}
			counts := map[string]int64{}
			for _, row := range ra.Times().Rows() {
				counts[row.Call] += row.Count
				t.Logf("%-20s %-9s n=%-5d median %v p90 %v model %v per call", row.Call, row.SizeClass, row.Count, row.Median, row.P90, row.ModelTotal/max(1, timeN(row.Count)))
			}
			if counts["cuMemAlloc"] != res.DeviceAllocs-res.DeviceMaps || counts["cuMemCreate"] != res.DeviceMaps ||
				counts["cuMemMap"] != res.DeviceMaps || counts["cuMemSetAccess"] > res.DeviceMaps ||
				(res.DeviceMaps > 0) != (counts["cuMemSetAccess"] > 0) ||
				counts["cuMemUnmap"] != res.DeviceUnmaps || counts["cuMemRelease"] != res.DeviceUnmaps ||
				counts["cuMemFree"] != res.DeviceFrees-res.DeviceUnmaps {
				t.Errorf("measured calls %v do not match the replay's %+v", counts, res)
			}
			measured, modelled, same := ra.Times().Total()
			t.Logf("measured %v (modelled calls %v), model %v, allocator's driver time %d µs", measured, same, modelled, res.DriverTimeUS)
			if measured <= 0 || modelled <= 0 || res.DriverTimeUS <= 0 {
				t.Errorf("nothing measured: %v %v %d", measured, modelled, res.DriverTimeUS)
			}
			if err := ra.Close(); err != nil {
				t.Fatal(err)
			}
			// Close gives back, timed apart, what the replay held at its end.
			closing := map[string]int64{}
			for _, row := range ra.CloseTimes().Rows() {
				closing[row.Call] += row.Count
			}
			if held := res.DeviceMaps - res.DeviceUnmaps; closing["cuMemUnmap"] != held || closing["cuMemRelease"] != held ||
				closing["cuMemFree"] != (res.DeviceAllocs-res.DeviceMaps)-(res.DeviceFrees-res.DeviceUnmaps) ||
				(res.DeviceMaps > 0) != (closing["cuMemAddressFree"] > 0) {
				t.Errorf("Close's calls %v do not match what the replay %+v held", closing, res)
			}
			if m, _, _ := ra.Times().Total(); m != measured {
				t.Errorf("Close added to the replay's measured time: %v, was %v", m, measured)
			}
			if err := ra.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if _, err := ra.Arena().Alloc(1 << 20); err == nil {
				t.Error("Alloc after Close succeeded")
			}
		})
	}
	// Other processes may take memory meanwhile: allow 64 MiB.
	if after := deviceFree(t, d); after < freeBefore-64<<20 {
		t.Errorf("free memory %d after the replays, %d before: the replay arena leaked", after, freeBefore)
	}
}

func deviceFree(t *testing.T, d *Device) int64 {
	t.Helper()
	m, err := d.MemoryInfo()
	if err != nil {
		t.Fatal(err)
	}
	return m.Free
}

func timeN(n int64) time.Duration { return time.Duration(n) }
