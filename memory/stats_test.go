package memory

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// statArenas are the two kinds of arena the stats tests run on: one with
// virtual memory (expandable segments and policy:vram work) and one
// without (every policy then uses fixed segments).
var statArenas = []struct {
	name string
	new  func(capacity int64) Arena
}{
	{"virtual", func(c int64) Arena { return NewSimArena(c) }},
	{"plain", func(c int64) Arena { return plainArena{NewSimArena(c)} }},
}

// statConfigs are the settings the stats tests cycle through: every policy
// and the options that change how blocks split.
var statConfigs = []string{
	"",
	"policy:pytorch",
	"policy:pytorch,expandable_segments:True",
	"policy:pytorch,max_split_size_mb:40",
	"max_split_size_mb:40",
	"policy:pytorch,roundup_power2_divisions:4,garbage_collection_threshold:0.5",
}

// statAllocator returns an allocator with conf over arena kind k, or skips
// when the arena cannot honour conf.
func statAllocator(t *testing.T, conf string, k int, capacity int64, opts ...Option) (*Allocator, Arena) {
	t.Helper()
	cfg, err := ParseConfig(conf)
	if err != nil {
		t.Fatal(err)
	}
	arena := statArenas[k].new(capacity)
	if cfg.Check(arena) != nil {
		t.Skipf("%s does not run on a %s arena", conf, statArenas[k].name)
	}
	return New(arena, cfg, opts...), arena
}

// freeBytes returns the cached memory: reserved bytes in no active block.
func freeBytes(s Stats) int64 {
	return s.ReservedBytes[StatAll].Current - s.ActiveBytes[StatAll].Current
}

// emptyCacheChecked empties the cache and checks that what it gave back is
// exactly the cached memory that was not inactive split, and that all the
// cached memory left is inactive split. There must be no pending events.
func emptyCacheChecked(t *testing.T, a *Allocator) {
	t.Helper()
	before := a.Stats()
	a.EmptyCache()
	after := a.Stats()
	released := before.ReservedBytes[StatAll].Current - after.ReservedBytes[StatAll].Current
	if want := freeBytes(before) - before.InactiveSplitBytes[StatAll].Current; released != want {
		t.Fatalf("EmptyCache released %d bytes; before it %d were cached, %d of them inactive split: want %d released",
			released, freeBytes(before), before.InactiveSplitBytes[StatAll].Current, want)
	}
	if got, want := after.InactiveSplitBytes[StatAll].Current, freeBytes(after); got != want {
		t.Fatalf("after EmptyCache: %d bytes cached but %d inactive split; all of it cannot be released", want, got)
	}
	if after.NumSyncAllStreams != before.NumSyncAllStreams+1 {
		t.Fatalf("EmptyCache: num_sync_all_streams went from %d to %d", before.NumSyncAllStreams, after.NumSyncAllStreams)
	}
	if err := a.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestInactiveSplitIsUnreleasable runs random allocations and frees under
// every policy on both kinds of arena and checks the definition of
// inactive split memory after every step (checkInvariants recomputes it
// from the blocks: free bytes in units of release that are not wholly
// free), at every EmptyCache (it is what EmptyCache cannot release), and
// with nothing allocated (it is 0, before EmptyCache as after).
func TestInactiveSplitIsUnreleasable(t *testing.T) {
	n := 1500
	if testing.Short() || raceOn {
		n = 400
	}
	for k, ar := range statArenas {
		for i, conf := range statConfigs {
			t.Run(ar.name+"/"+conf, func(t *testing.T) {
				a, _ := statAllocator(t, conf, k, 256*mib, withQuickOOM())
				rng := rand.New(rand.NewPCG(uint64(i), uint64(k)))
				var live []*Block
				for j := 0; j < n; j++ {
					switch r := rng.IntN(20); {
					case r < 10 && len(live) < 40:
						b, err := a.Alloc(sizeFor(byte(rng.IntN(4)), byte(rng.IntN(256))), Stream(rng.IntN(2)), "")
						var oom *OutOfMemoryError
						if err != nil && !errors.As(err, &oom) {
							t.Fatal(err)
						}
						if err == nil {
							live = append(live, b)
						}
					case r < 19 && len(live) > 0:
						x := rng.IntN(len(live))
						a.Free(live[x])
						live[x] = live[len(live)-1]
						live = live[:len(live)-1]
					default:
						emptyCacheChecked(t, a)
					}
					if err := a.checkInvariants(); err != nil {
						t.Fatalf("step %d: %v", j, err)
					}
					if len(live) == 0 {
						if s := a.Stats(); s.InactiveSplit[StatAll].Current != 0 || s.InactiveSplitBytes[StatAll].Current != 0 {
							t.Fatalf("step %d: nothing allocated, yet %d bytes of inactive split memory in %d blocks",
								j, s.InactiveSplitBytes[StatAll].Current, s.InactiveSplit[StatAll].Current)
						}
					}
				}
				for _, b := range live {
					a.Free(b)
				}
				s := a.Stats()
				if s.InactiveSplit[StatAll].Current != 0 || s.InactiveSplitBytes[StatAll].Current != 0 {
					t.Fatalf("all freed: %d bytes of inactive split memory in %d blocks", s.InactiveSplitBytes[StatAll].Current, s.InactiveSplit[StatAll].Current)
				}
				emptyCacheChecked(t, a)
				if s := a.Stats(); s.ReservedBytes[StatAll].Current != 0 {
					t.Fatalf("%d bytes reserved after freeing everything and EmptyCache", s.ReservedBytes[StatAll].Current)
				}
			})
		}
	}
}

// TestInactiveSplitExamples pins the statistic on layouts whose answer is
// known, for each policy on each arena.
func TestInactiveSplitExamples(t *testing.T) {
	for k, ar := range statArenas {
		for _, conf := range statConfigs {
			t.Run(ar.name+"/"+conf, func(t *testing.T) {
				a, _ := statAllocator(t, conf, k, 512*mib)
				// The case: a few tensors made and freed; nothing
				// is allocated, so nothing is inactive split.
				x := mustAlloc(t, a, 6*mib, 0)
				y := mustAlloc(t, a, 4*mib, 0)
				a.Free(x)
				a.Free(y)
				if s := a.Stats(); s.InactiveSplitBytes[StatAll].Current != 0 || s.InactiveSplit[StatAll].Current != 0 {
					t.Fatalf("nothing allocated: %d bytes in %d inactive split blocks", s.InactiveSplitBytes[StatAll].Current, s.InactiveSplit[StatAll].Current)
				}
				// A small block pins its small segment (fixed) or its
				// mapping (virtual), 2 MiB under every policy: the rest
				// of that unit cannot be released and is inactive split;
				// what policy:vram maps ahead of it is a mapping of its
				// own and can, as can the large pool's free memory.
				small := mustAlloc(t, a, 4096, 0)
				s := a.Stats()
				if got, want := s.InactiveSplitBytes[StatSmallPool].Current, int64(kSmallBuffer)-small.Size(); got != want {
					t.Fatalf("one small block: %d bytes of the small pool inactive split, want the %d bytes around it (%d reserved)",
						got, want, s.ReservedBytes[StatSmallPool].Current)
				}
				if got := s.InactiveSplitBytes[StatLargePool].Current; got != 0 {
					t.Fatalf("empty large pool: %d bytes inactive split", got)
				}
				emptyCacheChecked(t, a)
				a.Free(small)
				emptyCacheChecked(t, a)
				if s := a.Stats(); s.ReservedBytes[StatAll].Current != 0 || s.InactiveSplitBytes[StatAll].Current != 0 {
					t.Fatalf("after freeing everything and EmptyCache: %+v", s.ReservedBytes[StatAll])
				}
			})
		}
	}
}

// TestMemoryStatsKeys checks that Map has every key of PyTorch's
// torch.cuda.memory_stats() and vram's own ones, and nothing else.
func TestMemoryStatsKeys(t *testing.T) {
	var want []string
	for _, f := range []string{"allocation", "segment", "active", "inactive_split", "allocated_bytes",
		"reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes"} {
		for _, pool := range []string{"all", "small_pool", "large_pool"} {
			for _, m := range []string{"current", "peak", "allocated", "freed"} {
				want = append(want, f+"."+pool+"."+m)
			}
		}
	}
	for _, f := range []string{"oversize_allocations", "oversize_segments"} {
		for _, m := range []string{"current", "peak", "allocated", "freed"} {
			want = append(want, f+"."+m)
		}
	}
	want = append(want, "num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
		"num_device_free", "max_split_size", // PyTorch's
		"num_maps", "num_unmaps", "driver_time_us") // vram's
	m := (Stats{}).Map()
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Errorf("Map lacks %q", k)
		}
	}
	if len(m) != len(want) {
		t.Errorf("Map has %d keys, want %d", len(m), len(want))
	}
}

// TestOversizeStats follows oversize allocations and segments (blocks and
// fixed segments of max_split_size_mb or more) through allocation, free,
// EmptyCache and both resets.
func TestOversizeStats(t *testing.T) {
	for _, tc := range []struct {
		conf             string
		arena            int
		segs             bool // oversize requests get fixed segments that are counted
		oversizeCounting bool
	}{
		{"policy:pytorch,max_split_size_mb:40", 0, true, true},
		{"max_split_size_mb:40", 1, true, true}, // policy:vram's fallback: fixed segments
		{"max_split_size_mb:40", 0, false, true},
		{"policy:pytorch,expandable_segments:True,max_split_size_mb:40", 0, false, true},
		{"policy:pytorch", 0, false, false},
	} {
		t.Run(statArenas[tc.arena].name+"/"+tc.conf, func(t *testing.T) {
			a, _ := statAllocator(t, tc.conf, tc.arena, 512*mib)
			big := mustAlloc(t, a, 50*mib, 0) // 50 MiB >= 40 MiB: oversize
			small := mustAlloc(t, a, 30*mib, 0)
			s := a.Stats()
			wantAlloc, wantSeg := int64(0), int64(0)
			if tc.oversizeCounting {
				wantAlloc = 1
			}
			if tc.segs {
				wantSeg = 1
			}
			if s.OversizeAllocations.Current != wantAlloc || s.OversizeSegments.Current != wantSeg {
				t.Fatalf("oversize allocations %+v, segments %+v; want current %d and %d", s.OversizeAllocations, s.OversizeSegments, wantAlloc, wantSeg)
			}
			a.Free(big)
			s = a.Stats()
			if s.OversizeAllocations.Current != 0 || s.OversizeAllocations.Peak != wantAlloc || s.OversizeAllocations.Freed != wantAlloc {
				t.Fatalf("after the free: %+v", s.OversizeAllocations)
			}
			if s.OversizeSegments.Current != wantSeg {
				t.Fatalf("a cached segment still counts: %+v", s.OversizeSegments)
			}
			a.EmptyCache()
			s = a.Stats()
			if s.OversizeSegments.Current != 0 || s.OversizeSegments.Freed != wantSeg {
				t.Fatalf("after EmptyCache: %+v", s.OversizeSegments)
			}
			if err := a.checkInvariants(); err != nil {
				t.Fatal(err)
			}
			a.ResetAccumulatedStats()
			a.ResetPeakStats()
			s = a.Stats()
			if s.OversizeAllocations != (Stat{}) || s.OversizeSegments != (Stat{}) || s.NumSyncAllStreams != 0 {
				t.Fatalf("after the resets: %+v %+v %d", s.OversizeAllocations, s.OversizeSegments, s.NumSyncAllStreams)
			}
			a.Free(small)
		})
	}
}

// TestNumSyncAllStreams counts the releases of the whole cache: each
// EmptyCache and each allocation that retried after releasing it.
func TestNumSyncAllStreams(t *testing.T) {
	a, _ := newTestAllocator(t, "policy:pytorch", 64*mib)
	a.EmptyCache()
	a.EmptyCache()
	x := mustAlloc(t, a, 40*mib, 0)
	a.Free(x)
	y := mustAlloc(t, a, 50*mib, 0) // the cached 40 MiB segment goes first: one retry
	s := a.Stats()
	if s.NumSyncAllStreams != 3 || s.NumAllocRetries != 1 {
		t.Fatalf("num_sync_all_streams %d, num_alloc_retries %d; want 3 and 1", s.NumSyncAllStreams, s.NumAllocRetries)
	}
	a.ResetAccumulatedStats()
	if s := a.Stats(); s.NumSyncAllStreams != 0 || s.ReservedBytes[StatAll].Current != 50*mib {
		t.Fatalf("after ResetAccumulatedStats: syncs %d, reserved %d", s.NumSyncAllStreams, s.ReservedBytes[StatAll].Current)
	}
	a.Free(y)
}

// TestSummaryRegions checks the Summary's list of live allocations by
// region: largest first, unlabelled and hostile labels shown safely, long
// labels cut, the table's width kept, and the regions beyond the list
// summed.
func TestSummaryRegions(t *testing.T) {
	a, _ := newTestAllocator(t, "", 1<<30)
	mustAllocRegion(t, a, 3*mib, "parameters")
	mustAllocRegion(t, a, 32*mib, "cublaslt workspace")
	mustAllocRegion(t, a, 100, "")
	mustAllocRegion(t, a, 100, "bad\x1b[31mname")
	mustAllocRegion(t, a, 100, strings.Repeat("注意", 40))
	s := a.Summary()
	for _, want := range []string{"Live allocations by region", "cublaslt workspace", "32.00 MiB in       1 blocks",
		"parameters", "(unlabelled)", `bad\x1b[31mname`, "注意注意...", "Oversize allocations", "Oversize GPU segments"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "\x1b") {
		t.Errorf("summary writes an escape character raw:\n%s", s)
	}
	if i, j := strings.Index(s, "cublaslt workspace"), strings.Index(s, "parameters"); i > j {
		t.Errorf("regions not largest first:\n%s", s)
	}
	for i, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n != summaryWidth {
			t.Errorf("line %d is %d wide, want %d: %q", i, n, summaryWidth, line)
		}
	}
	for i := 0; i < 2*summaryRegions; i++ {
		mustAllocRegion(t, a, 4096, fmt.Sprintf("r%02d", i))
	}
	if s := a.Summary(); !strings.Contains(s, fmt.Sprintf("%d more regions", 2*summaryRegions+5-(summaryRegions-1))) {
		t.Errorf("the regions beyond the list are not summed:\n%s", s)
	}
}

// TestNumAllocRetriesOncePerCall: an allocation that releases the cache,
// runs the OnOOM hook and climbs the ladder again is one retry in
// num_alloc_retries (as PyTorch counts it, once per allocation), whether it
// then succeeds or fails; num_ooms counts the failures.
func TestNumAllocRetriesOncePerCall(t *testing.T) {
	for _, conf := range []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", "policy:vram", "policy:pytorch,max_split_size_mb:40"} {
		for _, tc := range []struct {
			name     string
			freeHeld bool // the hook frees the block that holds the memory
			wantOOMs int64
		}{
			{"hook frees nothing", false, 1},
			{"hook frees the holder", true, 0},
		} {
			t.Run(conf+"/"+tc.name, func(t *testing.T) {
				a, sim := newTestAllocator(t, conf, 100*mib, withQuickOOM())
				held := mustAlloc(t, a, 60*mib, 0)
				a.OnOOM(func() {
					if tc.freeHeld && held != nil {
						a.Free(held)
						held = nil
					}
				})
				b, err := a.Alloc(60*mib, 0, "")
				if (err == nil) != tc.freeHeld {
					t.Fatalf("Alloc: %v", err)
				}
				s := a.Stats()
				if s.NumAllocRetries != 1 || s.NumOOMs != tc.wantOOMs {
					t.Errorf("num_alloc_retries %d, num_ooms %d; want 1 and %d", s.NumAllocRetries, s.NumOOMs, tc.wantOOMs)
				}
				for _, x := range []*Block{b, held} {
					if x != nil {
						a.Free(x)
					}
				}
				check(t, a, sim)
			})
		}
	}
}
