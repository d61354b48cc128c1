package memory

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram/memory/trace"
)

func TestCheckSimCapacity(t *testing.T) {
	tests := []struct {
		capacity, limit int64
		ok              bool
	}{
		{0, 0, true},
		{80 << 30, 0, true},
		{MaxSimCapacity, 0, true},
		{MaxSimCapacity + 1, 0, false},
		{math.MaxInt64, 0, false},
		{4194304 << 40, 0, false}, // --capacity 4194304TiB
		{1 << 40, 512 << 30, false},
		{141e9, 100 << 30, false}, // --max-capacity 100GiB --capacity 141GB
		{2, 1, false},
		{math.MaxInt64, math.MaxInt64, true},
	}
	for _, tc := range tests {
		err := CheckSimCapacity(tc.capacity, tc.limit, "--capacity")
		if (err == nil) != tc.ok {
			t.Errorf("CheckSimCapacity(%d, %d) = %v, want ok %v", tc.capacity, tc.limit, err, tc.ok)
			continue
		}
		var ce *CapacityError
		if err != nil && (!errors.As(err, &ce) || ce.Capacity != tc.capacity) {
			t.Errorf("err = %#v, want a *CapacityError", err)
		}
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, "--capacity") || !strings.Contains(msg, "MaxSimCapacity") ||
				!strings.Contains(msg, "--max-capacity") {
				t.Errorf("message %q: want one line naming the source, the limit and how to raise it", msg)
			}
			// Under a limit lowered below MaxSimCapacity (vram replay
			// --max-capacity 64GiB), a device over it may be a real one.
			if real := strings.Contains(msg, "larger than any real one"); real != (tc.limit == 0 || tc.limit >= MaxSimCapacity) {
				t.Errorf("CheckSimCapacity(%d, %d): message %q", tc.capacity, tc.limit, msg)
			}
		}
	}
}

func TestSimArenaAddressSpace(t *testing.T) {
	s := NewSimArena(1 << 30)
	// A range taken and given back again and again reuses its addresses.
	next := s.next
	for range 1000 {
		base, err := s.Reserve(1 << 30)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Unreserve(base, 1<<30); err != nil {
			t.Fatal(err)
		}
		a, err := s.Alloc(4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Free(a, 4096); err != nil {
			t.Fatal(err)
		}
	}
	if s.next != next {
		t.Errorf("the address space moved from 0x%x to 0x%x", next, s.next)
	}
	// At the end of the address space, calls fail rather than wrap.
	s.next = math.MaxUint64 - 3<<20
	if _, err := s.Reserve(4 << 20); err == nil || !strings.Contains(err.Error(), "address space is used up") {
		t.Errorf("Reserve past 2^64: %v", err)
	}
	if _, err := s.Alloc(4 << 20); err == nil || !strings.Contains(err.Error(), "address space is used up") {
		t.Errorf("Alloc past 2^64: %v", err)
	}
	if s.Used() != 0 {
		t.Errorf("failed calls took %d bytes", s.Used())
	}
}

func TestSimArenaSaturates(t *testing.T) {
	s := NewSimArena(1 << 30)
	s.cost = math.MaxInt64 - 10
	s.addCost(time.Hour)
	if s.DriverTime() != math.MaxInt64 {
		t.Errorf("driver time wrapped to %v", s.DriverTime())
	}
	if c := allocCost(math.MaxInt64); c <= 0 || c > 366*24*time.Hour {
		t.Errorf("cost of the largest cuMemAlloc: %v", c)
	}
	if err := s.SetOtherProcesses([]ProcessMemory{{PID: 1, Bytes: math.MaxInt64}, {PID: 2, Bytes: math.MaxInt64}}); !errors.Is(err, ErrArenaFull) {
		t.Errorf("other processes holding 2^64 bytes: %v", err)
	}
}

func TestStatSaturates(t *testing.T) {
	var s Stat
	for range 3 {
		s.inc(math.MaxInt64 / 2)
		s.dec(math.MaxInt64 / 2)
	}
	if s.Allocated != math.MaxInt64 || s.Freed != math.MaxInt64 || s.Current != 0 || s.Peak != math.MaxInt64/2 {
		t.Errorf("after 3 x 2^62 bytes in and out: %+v", s)
	}
}

// genHistory is a long synthetic history made as it is read, never held:
// allocs and frees of at most live blocks at once. It records the highest
// heap it sees.
type genHistory struct {
	n, live  int
	freeOn   trace.Action // the free action it writes
	passes   int          // calls of Each
	read     int          // events read, over all passes
	heapHigh uint64
}

func (g *genHistory) Each(fn func(*trace.Event) error) error {
	g.passes++
	rng := rand.New(rand.NewPCG(5, 6))
	var ms runtime.MemStats
	var e trace.Event
	live := make([]uint64, 0, g.live)
	next := uint64(1 << 40)
	for i := range g.n {
		if i%(1<<16) == 0 {
			runtime.ReadMemStats(&ms)
			g.heapHigh = max(g.heapHigh, ms.HeapAlloc)
		}
		if len(live) == g.live || len(live) > 0 && rng.IntN(2) == 0 {
			k := rng.IntN(len(live))
			e = trace.Event{Action: g.freeOn, Addr: live[k]}
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
		} else {
			e = trace.Event{Action: trace.ActionAlloc, Addr: next, Size: int64(512 + rng.IntN(8<<20))}
			live = append(live, next)
			next += 16 << 20
		}
		g.read++
		if err := fn(&e); err != nil {
			return err
		}
	}
	return nil
}

// collect returns the events of h.
func collect(t *testing.T, h trace.History) []trace.Event {
	var out []trace.Event
	if err := h.Each(func(e *trace.Event) error { out = append(out, *e); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReplayHistoryStreams replays a history much longer than memory
// could hold as events: the heap stays at the live blocks' size.
func TestReplayHistoryStreams(t *testing.T) {
	for _, freeOn := range []trace.Action{trace.ActionFreeCompleted, trace.ActionFreeRequested} {
		small := &genHistory{n: 20000, live: 300, freeOn: freeOn}
		want, err := Replay(collect(t, small), NewSimArena(1<<40), Config{})
		if err != nil {
			t.Fatal(err)
		}
		small.passes = 0
		got, err := ReplayHistory(small, NewSimArena(1<<40), Config{})
		if err != nil || got != want {
			t.Fatalf("%v: ReplayHistory = %+v, %v\nReplay of the events = %+v", freeOn, got, err, want)
		}
		if small.passes != 2 {
			t.Errorf("%v: %d passes, want 2", freeOn, small.passes)
		}
	}

	n := 1_000_000
	if raceOn {
		n = 200_000
	}
	g := &genHistory{n: n, live: 1000, freeOn: trace.ActionFreeCompleted}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	res, err := ReplayHistory(g, NewSimArena(1<<40), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != int64(n) || res.UnmatchedFrees != 0 || res.NumOOMs != 0 {
		t.Errorf("result %+v", res)
	}
	// The first pass stops at the first free_completed.
	if g.read > n+10 {
		t.Errorf("read %d events for a replay of %d", g.read, n)
	}
	held := uint64(n) * uint64(unsafeSizeofEvent)
	if grew := g.heapHigh - min(base, g.heapHigh); grew > 24<<20 || grew > held/3 {
		t.Errorf("heap grew by %d MB replaying %d events (%d MB if held)", grew>>20, n, held>>20)
	}
}

const unsafeSizeofEvent = 80 // bytes of a trace.Event on 64-bit platforms

// TestReplayHugeRequests replays requests no device can serve, on large
// simulated devices: each is an out-of-memory event, in little memory,
// under every policy.
func TestReplayHugeRequests(t *testing.T) {
	for _, conf := range []string{"policy:vram", "policy:pytorch", "policy:pytorch,expandable_segments:True"} {
		capacity := int64(MaxSimCapacity)
		if strings.Contains(conf, "expandable") {
			if raceOn {
				continue // hundreds of thousands of 20 MiB mappings: slow under the race detector
			}
			// The default of vram replay: each failed request maps 20 MiB
			// pieces until the device is full, as PyTorch does.
			capacity = 1 << 40
		}
		events := []trace.Event{
			{Action: trace.ActionAlloc, Addr: 1 << 20, Size: math.MaxInt64},
			{Action: trace.ActionAlloc, Addr: 2 << 20, Size: 1 << 62},
			{Action: trace.ActionAlloc, Addr: 3 << 20, Size: 1 << 60}, // 1 EiB
			{Action: trace.ActionAlloc, Addr: 4 << 20, Size: capacity / 2},
			{Action: trace.ActionFreeCompleted, Addr: 1 << 20},
			{Action: trace.ActionFreeCompleted, Addr: 4 << 20},
		}
		cfg, err := ParseConfig(conf)
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		res, err := Replay(events, NewSimArena(capacity), cfg)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", conf, err)
		}
		if res.NumOOMs != 3 || res.PeakRequested != capacity/2 {
			t.Errorf("%s: %+v, want 3 OOMs and a peak of %d", conf, res, capacity/2)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 256<<20 {
			t.Errorf("%s: allocated %d MB", conf, n>>20)
		}
	}
}
