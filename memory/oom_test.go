package memory

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestOutOfMemoryMessage(t *testing.T) {
	sim := NewSimArena(512 * mib)
	if err := sim.SetOtherProcesses([]ProcessMemory{{PID: 4242, Name: "python3", Bytes: 12 * mib}}); err != nil {
		t.Fatal(err)
	}
	a := New(sim, Config{Policy: PolicyPyTorch})
	var all []*Block
	for i := 0; i < 100; i++ {
		region := "forward"
		if i >= 60 {
			region = "backward"
		}
		all = append(all, mustAllocRegion(t, a, 5*mib, region))
	}
	for i, b := range all {
		if i%4 != 0 {
			a.Free(b)
		}
	}
	_, err := a.Alloc(30*mib, 0, "optimizer")
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatalf("got %v, want an OutOfMemoryError", err)
	}
	if oom.FixConfig != "policy:vram" || oom.CheckedBy != "history" || oom.LiveBlocks != 25 || oom.Unallocated != 375*mib ||
		oom.LargestFree != 15*mib || oom.Memory.OutsideAllocator() != 12*mib || oom.Memory.Free != 0 || oom.Memory.OtherProcesses() != 12*mib || len(oom.TopRegions) != 2 {
		t.Fatalf("fields: %+v", oom)
	}
	got := err.Error()
	const golden = "testdata/oom_golden.txt"
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got+"\n" != string(want) {
		t.Fatalf("message differs from %s (go test -run TestOutOfMemoryMessage -update rewrites it):\n%s\nwant:\n%s", golden, got, want)
	}
	// The allocator keeps working.
	check(t, a, sim)
	// The same program under the suggested setting does fit, and under
	// expandable segments it does not (its 20 MiB units cannot be taken
	// out of 15 MiB holes).
	for conf, fits := range map[string]bool{oom.FixConfig: true, "policy:pytorch,expandable_segments:True": false} {
		sim := NewSimArena(500 * mib)
		cfg, _ := ParseConfig(conf)
		b := New(sim, cfg)
		var all []*Block
		for i := 0; i < 100; i++ {
			all = append(all, mustAllocRegion(t, b, 5*mib, ""))
		}
		for i, blk := range all {
			if i%4 != 0 {
				b.Free(blk)
			}
		}
		if _, err := b.Alloc(30*mib, 0, ""); (err == nil) != fits {
			t.Errorf("%s: the 30 MiB request fits: %v, want %v", conf, err == nil, fits)
		}
	}
}

func TestOutOfMemoryRecentHistory(t *testing.T) {
	sim := NewSimArena(512 * mib)
	a := New(sim, Config{Policy: PolicyPyTorch})
	early := mustAllocRegion(t, a, 5*mib, "") // live from before the log's window
	for i := 0; i < oomLogSize; i++ {         // push the start out of the log
		a.Free(mustAllocRegion(t, a, 4096, ""))
	}
	var all []*Block
	for i := 0; i < 99; i++ {
		all = append(all, mustAllocRegion(t, a, 5*mib, ""))
	}
	for i, b := range all {
		if i%4 != 3 {
			a.Free(b)
		}
	}
	_, err := a.Alloc(40*mib, 0, "")
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatal(err)
	}
	if oom.CheckedBy != "recent history" || oom.FixConfig != "policy:vram" {
		t.Fatalf("checked by %q, fix %q", oom.CheckedBy, oom.FixConfig)
	}
	if !strings.Contains(err.Error(), "its last 16384 allocations and frees") {
		t.Fatal(err)
	}
	a.Free(early)
	check(t, a, sim)
}

func TestReplayScript(t *testing.T) {
	logged := []replayOp{
		{free: true, addr: 0x900, size: 7}, // allocated before the log
		{addr: 0x100, size: 1},
		{addr: 0x200, size: 2},
		{free: true, addr: 0x100, size: 1},
	}
	held := []replayOp{{addr: 0x200, size: 2}, {addr: 0x50, size: 5}}
	got := replayScript(logged, held)
	want := []replayOp{{addr: 0x50, size: 5}, {addr: 0x900, size: 7}}
	want = append(want, logged...)
	if len(got) != len(want) {
		t.Fatalf("script %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("step %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func mustAllocRegion(t *testing.T, a *Allocator, size int64, region string) *Block {
	t.Helper()
	b, err := a.Alloc(size, 0, region)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOutOfMemoryNeedsMore(t *testing.T) {
	a, _ := newTestAllocator(t, "", 64*mib)
	mustAllocRegion(t, a, 40*mib, "weights")
	_, err := a.Alloc(40*mib, 0, "")
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatal(err)
	}
	if oom.NeededBytes != 16*mib || oom.FixConfig != "" || !strings.Contains(oom.Fix, "needs 16.00 MiB more memory under the current settings") {
		t.Fatalf("needed %d, fix %q", oom.NeededBytes, oom.Fix)
	}
	if !strings.Contains(err.Error(), "weights 40.00 MiB in 1") {
		t.Fatalf("message lacks the region: %v", err)
	}
}

// TestOutOfMemoryBoundsRounded checks that the diagnosis of a request
// just above what is free does not print the free memory, or the largest
// request that fits, as the size of the request: amounts that bound what
// fits are rounded down, the request and what is missing up.
func TestOutOfMemoryBoundsRounded(t *testing.T) {
	tests := []struct {
		name     string
		conf     string
		capacity int64
		held     int64 // allocated first
		ask      int64
		want     []string
	}{
		{"2 MiB short of 8 GiB", "", 8 << 30, 1 << 20, 8 << 30,
			[]string{"tried to allocate 8.00 GiB", "7.99 GiB free", "ask for at most 7.99 GiB"}},
		{"pytorch policy", "policy:pytorch", 8 << 30, 1 << 20, 8 << 30,
			[]string{"tried to allocate 8.00 GiB", "7.99 GiB free", "ask for at most 7.99 GiB"}},
		{"a request of 1 byte more than 1 GiB", "", 1<<30 + 2<<20, 2 << 20, 1<<30 + 1,
			[]string{"tried to allocate 1.01 GiB", "1.00 GiB free"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newTestAllocator(t, tc.conf, tc.capacity)
			mustAllocRegion(t, a, tc.held, "held")
			_, err := a.Alloc(tc.ask, 0, "")
			var oom *OutOfMemoryError
			if !errors.As(err, &oom) {
				t.Fatalf("Alloc(%d) = %v, want an out-of-memory error", tc.ask, err)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q:\n%s", w, msg)
				}
			}
		})
	}
}

func TestOutOfMemoryMaxSplitFix(t *testing.T) {
	// Without virtual memory the fix must be a setting of fixed segments.
	arena := plainArena{NewSimArena(512 * mib)}
	a := New(arena, Config{Policy: PolicyPyTorch})
	var all []*Block
	for i := 0; i < 100; i++ {
		all = append(all, mustAllocRegion(t, a, 5*mib, ""))
	}
	for i, b := range all {
		if i%4 != 0 {
			a.Free(b)
		}
	}
	_, err := a.Alloc(30*mib, 0, "")
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatal(err)
	}
	if strings.Contains(oom.Fix, "expandable") || strings.Contains(oom.Fix, "vram") {
		t.Fatalf("suggested virtual memory on an arena without it: %s", oom.Fix)
	}
}

// TestOutOfMemoryMessageEscapesNames checks that region labels and process
// names, which a replayed file or another process chooses, reach the
// message with their control characters escaped.
func TestOutOfMemoryMessageEscapesNames(t *testing.T) {
	sim := NewSimArena(64 * mib)
	if err := sim.SetOtherProcesses([]ProcessMemory{{PID: 7, Name: "py\x1b]0;pwned\x07thon\r", Bytes: 8 * mib}}); err != nil {
		t.Fatal(err)
	}
	a := New(sim, Config{Policy: PolicyPyTorch})
	mustAllocRegion(t, a, 40*mib, "fwd\x1b[2J\u202e")
	_, err := a.Alloc(30*mib, 0, "bwd\x1b[31m")
	if err == nil {
		t.Fatal("no out-of-memory error")
	}
	msg := err.Error()
	for _, r := range msg {
		if r < 0x20 && r != '\n' || r == '\u202e' {
			t.Fatalf("message holds %U:\n%q", r, msg)
		}
	}
	for _, want := range []string{`fwd\x1b[2J\u202e`, `py\x1b]0;pwned\x07thon\r`} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
}

// TestOutOfMemoryHugeRequests asks, under every policy, for more than the
// whole device with blocks live: the diagnosis must say that no setting
// fits without replaying a device of the claimed size (which would take
// the host's memory and minutes), and name a lower bound of what is missing.
func TestOutOfMemoryHugeRequests(t *testing.T) {
	confs := []string{"", "policy:pytorch", "expandable_segments:True", "policy:pytorch,expandable_segments:True", "max_split_size_mb:64", "per_process_memory_fraction:0.5"}
	sizes := []int64{1 << 40, 1 << 50, 1 << 60, MaxAllocSize}
	for _, conf := range confs {
		for _, size := range sizes {
			t.Run(fmt.Sprintf("%s/%d", conf, size), func(t *testing.T) {
				cfg, err := ParseConfig(conf)
				if err != nil {
					t.Fatal(err)
				}
				a := New(NewSimArena(256<<20), cfg)
				live, err := a.Alloc(8<<20, 0, "weights")
				if err != nil {
					t.Fatal(err)
				}
				defer a.Free(live)
				_, err = a.Alloc(size, 0, "huge")
				var oom *OutOfMemoryError
				if !errors.As(err, &oom) {
					t.Fatalf("got %v, want an OutOfMemoryError", err)
				}
				if !strings.Contains(oom.Fix, "no setting makes it fit: it needs at least") || oom.NeededBytes < size-(256<<20) {
					t.Errorf("fix %q, needed %d: want no setting and at least %d missing", oom.Fix, oom.NeededBytes, size-(256<<20))
				}
			})
		}
	}
}

// TestOutOfMemorySmallestFraction checks that a suggested
// per_process_memory_fraction is the smallest hundredth that fits: with it
// the allocation succeeds, and with one hundredth less it fails.
func TestOutOfMemorySmallestFraction(t *testing.T) {
	tests := []struct {
		conf string
		size int64
	}{
		{"per_process_memory_fraction:0.02", 1000},
		{"per_process_memory_fraction:0.1", 12 * mib},
		{"per_process_memory_fraction:0.25,expandable_segments:True", 30 * mib},
		{"per_process_memory_fraction:0.5,policy:pytorch", 40 * mib},
	}
	for _, tc := range tests {
		t.Run(tc.conf, func(t *testing.T) {
			cfg, err := ParseConfig(tc.conf)
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(NewSimArena(64*mib), cfg).Alloc(tc.size, 0, "")
			var oom *OutOfMemoryError
			if !errors.As(err, &oom) || !strings.Contains(oom.Fix, "raise per_process_memory_fraction to ") {
				t.Fatalf("got %v, want advice to raise the fraction", err)
			}
			fixed, err := ParseConfig(oom.FixConfig)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := New(NewSimArena(64*mib), fixed).Alloc(tc.size, 0, ""); err != nil {
				t.Fatalf("the suggested %q does not fit: %v", oom.FixConfig, err)
			}
			less := fixed
			less.PerProcessMemoryFraction = math.Round(fixed.PerProcessMemoryFraction*100-1) / 100
			if _, err := New(NewSimArena(64*mib), less, withQuickOOM()).Alloc(tc.size, 0, ""); err == nil {
				t.Errorf("fraction %v fits too, but %v was suggested", less.PerProcessMemoryFraction, fixed.PerProcessMemoryFraction)
			}
		})
	}
}

// TestConfigStringNamesThePolicy checks that a suggested VRAM_ALLOC_CONF
// always names its policy, so that a user of another one sees the change.
func TestConfigStringNamesThePolicy(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "policy:vram"},
		{Config{PerProcessMemoryFraction: 0.5}, "policy:vram,per_process_memory_fraction:0.5"},
		{Config{Policy: PolicyPyTorch}, "policy:pytorch"},
		{Config{Policy: PolicyPyTorch, ExpandableSegments: true}, "policy:pytorch,expandable_segments:True"},
	} {
		got := configString(tc.cfg)
		if got != tc.want {
			t.Errorf("configString(%+v) = %q, want %q", tc.cfg, got, tc.want)
		}
		back, err := ParseConfig(got)
		if err != nil || back.Policy != tc.cfg.Policy || back.PerProcessMemoryFraction != tc.cfg.PerProcessMemoryFraction {
			t.Errorf("%q parses to %+v, %v", got, back, err)
		}
	}
}

// TestReplayOOMCost checks that an out-of-memory error in a replay's
// allocator costs about the same whatever the number of blocks held: a
// replay on a device too small for its trace meets thousands of them, and
// capturing the held blocks at each one made it quadratic. The counts may
// differ by a few allocations (the race detector drops sync.Pool items at
// random, and the ordered maps grow a level), never by the blocks held.
func TestReplayOOMCost(t *testing.T) {
	want := map[Policy]float64{} // allocations of a failed request with 10 blocks held
	for _, held := range []int{10, 1000, 20000} {
		for _, policy := range []Policy{PolicyPyTorch, PolicyVRAM} {
			a := New(NewSimArena(64<<20), Config{Policy: policy}, withQuickOOM())
			for range held {
				if _, err := a.Alloc(512, 0, "held"); err != nil {
					t.Fatal(err)
				}
			}
			allocs := testing.AllocsPerRun(20, func() {
				if _, err := a.Alloc(128<<20, 0, "big"); !isOOM(err) {
					t.Fatalf("err = %v, want an out-of-memory error", err)
				}
			})
			if _, ok := want[policy]; !ok {
				want[policy] = allocs
			}
			if allocs > want[policy]+16 {
				t.Errorf("%d blocks held, %s: %v allocations a failed request, want about %v as with 10", held, policy, allocs, want[policy])
			}
		}
	}
}

// TestOutOfMemoryAskedBytes checks the count of bytes asked in the first
// line of the message, which is singular for one byte.
func TestOutOfMemoryAskedBytes(t *testing.T) {
	tests := []struct {
		size int64
		want string
	}{
		{1, "tried to allocate 512 B (1 byte asked, region"},
		{2, "tried to allocate 512 B (2 bytes asked, region"},
		{513, "tried to allocate 1.00 KiB (513 bytes asked, region"},
	}
	for _, tc := range tests {
		a, _ := newTestAllocator(t, "policy:pytorch", 64*mib)
		if err := a.SetMemoryFraction(0); err != nil {
			t.Fatal(err)
		}
		_, err := a.Alloc(tc.size, 0, "r")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Alloc(%d) with nothing allowed: %v; want a message with %q", tc.size, err, tc.want)
		}
	}
}
