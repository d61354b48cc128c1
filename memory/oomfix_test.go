package memory

import (
	"errors"
	"strings"
	"testing"
)

// oomDevice is a simulated device for the fix scenarios: its capacity,
// whether it has virtual memory, the memory other processes hold, and the
// machine's other devices.
type oomDevice struct {
	capacity int64
	plain    bool // no virtual memory
	others   []ProcessMemory
	peers    []DeviceMemory
	own      int64 // this process outside the allocator (its context)
}

// simInfo is a DeviceInfo with peers and this process's own memory: the
// arena's use plus a simulated context of own bytes, which the arena
// holds as another process and which simInfo hides from the others.
type simInfo struct {
	*SimArena
	peers  []DeviceMemory
	own    int64
	others []ProcessMemory
}

func (s simInfo) Peers() ([]DeviceMemory, error) { return s.peers, nil }

// MemoryInfo reports the arena with the context counted as this process's
// memory.
func (s simInfo) MemoryInfo() (DeviceMemory, error) {
	m, err := s.SimArena.MemoryInfo()
	m.ThisProcess, m.Others = s.Used()+s.own, s.others
	return m, err
}

// allocator returns a fresh allocator with conf on the device.
func (d oomDevice) allocator(t *testing.T, conf string) *Allocator {
	t.Helper()
	cfg, err := ParseConfig(conf)
	if err != nil {
		t.Fatalf("ParseConfig(%q): %v", conf, err)
	}
	sim := NewSimArena(d.capacity)
	if d.own > 0 {
		if err := sim.SetOtherProcesses(append(d.others, ProcessMemory{PID: 1, Name: "context", Bytes: d.own})); err != nil {
			t.Fatal(err)
		}
	} else if err := sim.SetOtherProcesses(d.others); err != nil {
		t.Fatal(err)
	}
	var arena Arena = sim
	if d.plain {
		arena = plainArena{sim}
	}
	others := append([]ProcessMemory{}, d.others...)
	return New(arena, cfg, WithDeviceInfo(simInfo{SimArena: sim, peers: d.peers, own: d.own, others: others}))
}

// oomProgram runs a workload on a and returns the OutOfMemoryError of its
// failing allocation, or nil when everything fits.
type oomProgram func(t *testing.T, a *Allocator) *OutOfMemoryError

// allocs allocates the sizes in order, keeping every block.
func allocs(sizes ...int64) oomProgram {
	return func(t *testing.T, a *Allocator) *OutOfMemoryError {
		for _, n := range sizes {
			if _, err := a.Alloc(n, 0, "work"); err != nil {
				var oom *OutOfMemoryError
				if !errors.As(err, &oom) {
					t.Fatal(err)
				}
				return oom
			}
		}
		return nil
	}
}

// fragmented leaves one 5 MiB block in four live, then asks for 30 MiB.
func fragmented(t *testing.T, a *Allocator) *OutOfMemoryError {
	var all []*Block
	for i := 0; i < 100; i++ {
		b, err := a.Alloc(5*mib, 0, "work")
		if err != nil {
			t.Fatalf("setting up the fragmentation: %v", err)
		}
		all = append(all, b)
	}
	for i, b := range all {
		if i%4 != 0 {
			a.Free(b)
		}
	}
	return allocs(30*mib)(t, a)
}

// splitBig caches a 200 MiB block, lets a 50 MiB request split it, then
// asks for 200 MiB again.
func splitBig(t *testing.T, a *Allocator) *OutOfMemoryError {
	b, err := a.Alloc(200*mib, 0, "work")
	if err != nil {
		t.Fatal(err)
	}
	a.Free(b)
	return allocs(50*mib, 200*mib)(t, a)
}

// candidateConfigs returns every setting that the fix check may consider,
// with the per-process fraction at most 1: what "no setting makes it fit"
// must hold for.
func candidateConfigs(base Config) []string {
	var out []string
	for _, policy := range []string{"policy:vram", "policy:pytorch", "policy:pytorch,expandable_segments:True"} {
		for _, split := range []string{"", ",max_split_size_mb:64", ",max_split_size_mb:256", ",max_split_size_mb:1024"} {
			for _, frac := range []string{"", ",per_process_memory_fraction:1"} {
				c := policy + split + frac
				if base.GarbageCollectionThreshold != 0 {
					cfg, _ := ParseConfig(c)
					cfg.GarbageCollectionThreshold = base.GarbageCollectionThreshold
					c = cfg.String()
				}
				out = append(out, c)
			}
		}
	}
	return out
}

// TestOutOfMemoryAdvice checks the fix of an OutOfMemoryError over
// scenarios that each need another remedy. For every scenario, whatever
// the text: a suggested configuration makes the same program fit on the
// same device; "no setting makes it fit" is said only when no setting the
// check could suggest does; FitsNow is an allocation that succeeds at once
// on the failed allocator.
func TestOutOfMemoryAdvice(t *testing.T) {
	peer := []DeviceMemory{{Device: "sim:1", Free: 900 * mib, Total: 1024 * mib, ThisProcess: -1}, {Device: "sim:2", Free: 10 * mib, Total: 1024 * mib, ThisProcess: -1}}
	tests := []struct {
		name    string
		dev     oomDevice
		conf    string
		program oomProgram
		want    []string // substrings of the message
		avoid   []string // and what it must not say
	}{
		{"fragmented fixed segments: policy:vram",
			oomDevice{capacity: 512 * mib}, "policy:pytorch", fragmented,
			[]string{`with VRAM_ALLOC_CONF="policy:vram" this allocation fits`}, []string{"no setting"}},
		{"a cached block split by a small request, no virtual memory: max_split_size_mb",
			oomDevice{capacity: 300 * mib, plain: true}, "policy:pytorch", splitBig,
			[]string{`with VRAM_ALLOC_CONF="policy:pytorch,max_split_size_mb:64" this allocation fits`}, []string{"no setting", "expandable", "vram"}},
		{"fragmented, no virtual memory: no setting",
			oomDevice{capacity: 512 * mib, plain: true}, "policy:pytorch", fragmented,
			[]string{"no setting makes it fit: it needs 18.00 MiB more memory under the current settings"}, []string{"expandable", "vram"}},
		{"the fraction binds: raise it",
			oomDevice{capacity: 512 * mib}, "per_process_memory_fraction:0.5", allocs(200*mib, 100*mib),
			[]string{"raise per_process_memory_fraction to 0.59", "this process is limited to 256.00 MiB"}, []string{"no setting", "larger device"}},
		{"the fraction binds under SetMemoryFraction",
			oomDevice{capacity: 512 * mib}, "policy:pytorch", func(t *testing.T, a *Allocator) *OutOfMemoryError {
				if a.Config().PerProcessMemoryFraction == 0 { // not when rerun under the fix
					if err := a.SetMemoryFraction(0.25); err != nil {
						t.Fatal(err)
					}
				}
				return allocs(100*mib, 100*mib)(t, a)
			},
			[]string{"raise per_process_memory_fraction to 0.4"}, []string{"no setting"}},
		{"the fraction binds and other processes too: raise it as far as they allow",
			oomDevice{capacity: 512 * mib, others: []ProcessMemory{{PID: 77, Name: "python3", Bytes: 200 * mib}}},
			"per_process_memory_fraction:0.3", allocs(100*mib, 100*mib),
			[]string{"raise per_process_memory_fraction to 0.4", "pid 77 (python3) 200.00 MiB"}, []string{"no setting"}},
		{"other processes hold the memory: no setting, name them",
			oomDevice{capacity: 512 * mib, others: []ProcessMemory{{PID: 4242, Name: "python3", Bytes: 300 * mib}}},
			"per_process_memory_fraction:0.9", allocs(150*mib, 100*mib),
			[]string{"no setting makes it fit: it needs 38.00 MiB more memory under the current settings;",
				"free that much (release tensors, or stop other processes on the device: they hold 300.00 MiB)", "pid 4242 (python3) 300.00 MiB", "ask for at most 62.00 MiB"},
			[]string{"raise"}},
		{"the fraction binds, but even all the device has left is too little",
			oomDevice{capacity: 512 * mib, others: []ProcessMemory{{PID: 77, Name: "python3", Bytes: 200 * mib}}},
			"per_process_memory_fraction:0.5", allocs(200*mib, 200*mib),
			[]string{"no setting makes it fit: it needs 88.00 MiB more memory under the current settings and per_process_memory_fraction at 1",
				"free that much (release tensors, or stop other processes on the device: they hold 200.00 MiB)"},
			[]string{"raise"}},
		{"the fraction binds, and neither policy:vram nor all the device has left is enough",
			oomDevice{capacity: 512 * mib, others: []ProcessMemory{{PID: 77, Name: "python3", Bytes: 200 * mib}}},
			"policy:pytorch,per_process_memory_fraction:0.5", allocs(200*mib, 200*mib),
			[]string{`no setting makes it fit: it needs 88.00 MiB more memory even with VRAM_ALLOC_CONF="policy:vram" and per_process_memory_fraction at 1;`},
			[]string{"raise", `per_process_memory_fraction:0.5"`}},
		{"policy:vram is not enough, the fraction does not bind and stays in the string",
			oomDevice{capacity: 512 * mib, others: []ProcessMemory{{PID: 4242, Name: "python3", Bytes: 300 * mib}}},
			"policy:pytorch,per_process_memory_fraction:0.9", allocs(150*mib, 100*mib),
			[]string{`no setting makes it fit: it needs 38.00 MiB more memory even with VRAM_ALLOC_CONF="policy:vram,per_process_memory_fraction:0.9";`},
			[]string{"raise", "at 1"}},
		{"nothing fits here, another device has room",
			oomDevice{capacity: 256 * mib, peers: peer}, "", allocs(200*mib, 100*mib),
			[]string{"no setting makes it fit: it needs 44.00 MiB more memory", "or use sim:1, which has 900.00 MiB free",
				"other devices with room: sim:1 (900.00 MiB free of 1.00 GiB)"},
			[]string{"sim:2", "larger device"}},
		{"nothing fits and no device has room",
			oomDevice{capacity: 256 * mib, peers: peer[1:]}, "policy:pytorch", allocs(200*mib, 200*mib),
			[]string{"no setting makes it fit", "or use a larger device", "ask for at most 56.00 MiB"},
			[]string{"other devices with room", "sim:2"}},
		{"rounding that wastes memory: plain rounding fits",
			oomDevice{capacity: 72 * mib, plain: true}, "policy:pytorch,roundup_power2_divisions:4", allocs(33*mib, 33*mib),
			[]string{`with VRAM_ALLOC_CONF="policy:pytorch" this allocation fits`}, []string{"no setting"}},
		{"this process's context is named apart from other processes",
			oomDevice{capacity: 512 * mib, others: []ProcessMemory{{PID: 9, Name: "trainer", Bytes: 100 * mib}}, own: 30 * mib},
			"", allocs(300*mib, 100*mib),
			[]string{"pid 9 (trainer) 100.00 MiB", "this process outside the allocator (CUDA context, libraries): 30.00 MiB", "no setting"},
			[]string{"pid 1", "not attributed", "raise"}},
		{"escape sequences in process names are not written raw",
			oomDevice{capacity: 256 * mib, others: []ProcessMemory{{PID: 5, Name: "evil\x1b[2J", Bytes: 10 * mib}}},
			"", allocs(200*mib, 100*mib),
			[]string{`pid 5 (evil\x1b[2J) 10.00 MiB`}, []string{"\x1b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.dev.allocator(t, tc.conf)
			oom := tc.program(t, a)
			if oom == nil {
				t.Fatal("the program fits: no OutOfMemoryError to check")
			}
			msg := oom.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q:\n%s", w, msg)
				}
			}
			for _, w := range tc.avoid {
				if strings.Contains(msg, w) {
					t.Errorf("message says %q:\n%s", w, msg)
				}
			}
			if oom.Fix == "" {
				t.Fatalf("no fix:\n%s", msg)
			}
			if oom.FixConfig != "" {
				if again := tc.program(t, tc.dev.allocator(t, oom.FixConfig)); again != nil {
					t.Errorf("the program does not fit under the suggested VRAM_ALLOC_CONF=%q:\n%v", oom.FixConfig, again)
				}
			}
			if strings.HasPrefix(oom.Fix, "no setting") {
				if oom.NeededBytes <= 0 {
					t.Errorf("no setting fits, but NeededBytes is %d", oom.NeededBytes)
				}
				for _, c := range candidateConfigs(oom.cfg) {
					if tc.dev.plain && strings.Contains(c, "expandable") {
						continue
					}
					if again := tc.program(t, tc.dev.allocator(t, c)); again == nil {
						t.Errorf("the fix says no setting makes it fit, but VRAM_ALLOC_CONF=%q does", c)
					}
				}
			}
			if oom.FitsNow > 0 {
				b, err := a.Alloc(oom.FitsNow, oom.Stream, "")
				if err != nil {
					t.Errorf("FitsNow is %d bytes, but allocating it fails: %v", oom.FitsNow, err)
				} else {
					a.Free(b)
				}
			}
			if err := a.checkInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOutOfMemoryRegions checks that the error names the largest regions
// and sums the others, so that a small region such as the cuBLASLt
// workspace shows when few regions are live and the total stays exact.
func TestOutOfMemoryRegions(t *testing.T) {
	a, _ := newTestAllocator(t, "", 256*mib)
	mustAllocRegion(t, a, 32*mib, "cublaslt workspace")
	var total int64 = 32 * mib
	for i := 0; i < oomRegions+3; i++ {
		mustAllocRegion(t, a, int64(i+1)*mib, "layer"+string(rune('a'+i)))
		total += int64(i+1) * mib
	}
	_, err := a.Alloc(512*mib, 0, "")
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatal(err)
	}
	if len(oom.TopRegions) != oomRegions || oom.TopRegions[0].Region != "cublaslt workspace" || oom.MoreRegions != 4 {
		t.Fatalf("top regions %+v, %d more", oom.TopRegions, oom.MoreRegions)
	}
	sum := oom.OtherRegions.Bytes
	for _, r := range oom.TopRegions {
		sum += r.Bytes
	}
	if sum != total || !strings.Contains(err.Error(), "cublaslt workspace 32.00 MiB in 1") || !strings.Contains(err.Error(), ", 4 more regions 10.00 MiB in 4") {
		t.Fatalf("regions sum to %d, want %d:\n%v", sum, total, err)
	}
}

// TestOutOfMemoryFitsNowIsTheLargest: the request the message says fits is
// the largest that does, to the unit of the search (the granularity for
// large requests, 512 bytes for small ones), not one unit less when the
// failed request is not a multiple of that unit.
func TestOutOfMemoryFitsNowIsTheLargest(t *testing.T) {
	for _, tt := range []struct {
		name     string
		conf     string
		capacity int64
		held     []int64
		request  int64
		want     int64
	}{
		{"policy:vram, 224 MiB free, 225 MiB asked", "", 256 * mib, []int64{16 * mib, 16 * mib}, 225 * mib, 224 * mib},
		{"policy:pytorch, 224 MiB free, 225 MiB asked", "policy:pytorch", 256 * mib, []int64{16 * mib, 16 * mib}, 225 * mib, 224 * mib},
		{"48 MiB free, a byte more asked", "", 64 * mib, []int64{16 * mib}, 48*mib + 1, 48 * mib},
		{"in 512-byte units: 8 MiB free, 100 bytes more asked", "", 24 * mib, []int64{16 * mib}, 8*mib + 100, 8 * mib},
		{"a multiple of the unit", "", 256 * mib, []int64{16 * mib, 16 * mib}, 226 * mib, 224 * mib},
		// Requests far beyond the device: the search runs below what this
		// process may use, not below the request, so it stays exact.
		{"policy:vram, 4 TiB asked of 256 MiB", "", 256 * mib, nil, 4 << 40, 256 * mib},
		{"policy:pytorch, 1.2 GiB asked of 256 MiB", "policy:pytorch", 256 * mib, nil, 1200 * mib, 256 * mib},
		{"expandable, 1 PiB asked, 32 MiB held (in 40 MiB mapped)", "policy:pytorch,expandable_segments:True", 256 * mib, []int64{32 * mib}, 1 << 50, 208 * mib},
		{"policy:vram, 64 GiB asked, a quarter of 256 MiB allowed", "per_process_memory_fraction:0.25", 256 * mib, []int64{16 * mib}, 64 << 30, 48 * mib},
		{"in 512-byte units: a small segment held, the request beyond the rest", "", 8 * mib, []int64{mib}, 30*mib + 512, 6 * mib},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := newTestAllocator(t, tt.conf, tt.capacity)
			for _, n := range tt.held {
				mustAlloc(t, a, n, 0)
			}
			_, err := a.Alloc(tt.request, 0, "")
			var oom *OutOfMemoryError
			if !errors.As(err, &oom) {
				t.Fatalf("Alloc(%d): %v, want an out-of-memory error", tt.request, err)
			}
			if oom.FitsNow != tt.want {
				t.Fatalf("FitsNow = %d, want %d:\n%v", oom.FitsNow, tt.want, err)
			}
			b, err := a.Alloc(oom.FitsNow, 0, "")
			if err != nil {
				t.Fatalf("allocating FitsNow: %v", err)
			}
			a.Free(b)
			unit := int64(kMinBlockSize)
			if tt.request >= 16*SimGranularity {
				unit = SimGranularity
			}
			a.EmptyCache()
			if b, err := a.Alloc(oom.FitsNow+unit, 0, ""); err == nil {
				t.Errorf("FitsNow + %d bytes fits too: FitsNow is not the largest", unit)
				a.Free(b)
			}
		})
	}
}
