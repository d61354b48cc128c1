package memory

import (
	"errors"
	"sync"
	"testing"
	"time"
)

var (
	_ VirtualArena = (*SimArena)(nil)
	_ DeviceInfo   = (*SimArena)(nil)
	_ DriverTimer  = (*SimArena)(nil)
	_ Arena        = plainArena{}
)

func TestSimArenaAlloc(t *testing.T) {
	s := NewSimArena(100 * mib)
	a, err := s.Alloc(60 * mib)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Alloc(50 * mib); !errors.Is(err, ErrArenaFull) {
		t.Fatalf("Alloc beyond capacity: %v", err)
	}
	b, err := s.Alloc(10 * mib)
	if err != nil {
		t.Fatal(err)
	}
	if b < a+60*mib || a%512 != 0 || b%512 != 0 {
		t.Fatalf("addresses 0x%x and 0x%x overlap or are misaligned", a, b)
	}
	if s.Used() != 70*mib || s.PeakUsed() != 70*mib {
		t.Fatalf("used %d peak %d", s.Used(), s.PeakUsed())
	}
	if err := s.Free(a, 50*mib); err == nil {
		t.Fatal("Free with the wrong size accepted")
	}
	if err := s.Free(a+512, 60*mib); err == nil {
		t.Fatal("Free of an unknown address accepted")
	}
	if err := s.Free(a, 60*mib); err != nil {
		t.Fatal(err)
	}
	if err := s.Free(a, 60*mib); err == nil {
		t.Fatal("double Free accepted")
	}
	c := s.Counts()
	if c.Alloc != 2 || c.Free != 1 || c.Refused != 1 {
		t.Fatalf("counts %+v", c)
	}
	// 77 µs (60 MiB) + 77 µs (10 MiB) + 122 µs (free of 60 MiB).
	if got := s.DriverTime(); got != (77+77+122)*time.Microsecond {
		t.Fatalf("driver time %v", got)
	}
}

func TestSimArenaVirtual(t *testing.T) {
	s := NewSimArena(16 * mib)
	g := s.Granularity()
	if g != 2*mib {
		t.Fatalf("granularity %d", g)
	}
	base, err := s.Reserve(64 * mib)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(3 * mib); err == nil {
		t.Fatal("unaligned Reserve accepted")
	}
	tests := []struct {
		name string
		addr uint64
		size int64
		ok   bool
	}{
		{"first chunk", base, 4 * mib, true},
		{"overlap", base + 2*mib, 4 * mib, false},
		{"unaligned", base + mib, 2 * mib, false},
		{"outside", base + 64*mib, 2 * mib, false},
		{"second chunk", base + 4*mib, 8 * mib, true},
		{"beyond capacity", base + 12*mib, 6 * mib, false},
		{"last fit", base + 12*mib, 4 * mib, true},
	}
	for _, tt := range tests {
		if err := s.Map(tt.addr, tt.size); (err == nil) != tt.ok {
			t.Errorf("%s: Map = %v", tt.name, err)
		}
	}
	if s.Used() != 16*mib {
		t.Fatalf("used %d", s.Used())
	}
	if err := s.Unmap(base, 2*mib); err == nil {
		t.Fatal("Unmap of part of a chunk accepted")
	}
	if err := s.Unmap(base, 12*mib); err == nil {
		t.Fatal("Unmap of two chunks at once accepted")
	}
	if err := s.Unreserve(base, 64*mib); err == nil {
		t.Fatal("Unreserve with mappings accepted")
	}
	for _, c := range []struct {
		addr uint64
		size int64
	}{{base, 4 * mib}, {base + 4*mib, 8 * mib}, {base + 12*mib, 4 * mib}} {
		if err := s.Unmap(c.addr, c.size); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Unreserve(base, 64*mib); err != nil {
		t.Fatal(err)
	}
	c := s.Counts()
	if c.Create != 3 || c.Map != 3 || c.SetAccess != 3 || c.Unmap != 3 || c.Release != 3 || c.Reserve != 1 || c.Unreserve != 1 {
		t.Fatalf("counts %+v", c)
	}
	mapped := 3 * (costCreate + costMap + costSetAccess)
	unmapped := 3*(costUnmap+costRelease) + releaseCost(16*mib) - costRelease // 16 MiB released in all
	if got := s.DriverTime(); got != mapped+unmapped {
		t.Fatalf("driver time %v", got)
	}
}

func TestSimArenaOtherProcesses(t *testing.T) {
	s := NewSimArena(100 * mib)
	if err := s.SetOtherProcesses([]ProcessMemory{{PID: 1, Bytes: 10 * mib}, {PID: 2, Bytes: 30 * mib}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Alloc(5 * mib); err != nil {
		t.Fatal(err)
	}
	m, err := s.MemoryInfo()
	if err != nil || m.Free != 55*mib || m.Total != 100*mib || m.ThisProcess != 5*mib || m.Reserved != 0 {
		t.Fatalf("MemoryInfo = %+v, %v", m, err)
	}
	if p := m.Others; len(p) != 2 || p[0].PID != 2 || m.OtherProcesses() != 40*mib {
		t.Fatalf("Others = %+v, want largest first", p)
	}
	m.Others[0].PID = 99 // the caller's copy
	if again, _ := s.MemoryInfo(); again.Others[0].PID != 2 {
		t.Fatal("MemoryInfo returned the arena's own list")
	}
	if _, err := s.Alloc(56 * mib); !errors.Is(err, ErrArenaFull) {
		t.Fatalf("Alloc past the others' share: %v", err)
	}
	if err := s.SetOtherProcesses([]ProcessMemory{{PID: 3, Bytes: 200 * mib}}); err == nil {
		t.Fatal("others beyond capacity accepted")
	}
}

func TestCostModel(t *testing.T) {
	tests := []struct {
		size        int64
		alloc, free time.Duration
	}{
		{2 * mib, 77 * time.Microsecond, 71 * time.Microsecond},
		{20 * mib, 77 * time.Microsecond, 71 * time.Microsecond},
		{20*mib + 1, 77 * time.Microsecond, 122 * time.Microsecond},
		{128 * mib, 77 * time.Microsecond, 122 * time.Microsecond},
		{128*mib + 1, 143 * time.Microsecond, 122 * time.Microsecond},
		{1 << 30, 143 * time.Microsecond, 122 * time.Microsecond},
		{1<<30 + 1, 175 * time.Microsecond, 122 * time.Microsecond},
		{8 << 30, 175 * time.Microsecond, time.Duration((122 + 0.36*7*1024) * 1000)},
	}
	for _, tt := range tests {
		if got := allocCost(tt.size); got != tt.alloc {
			t.Errorf("allocCost(%d) = %v, want %v", tt.size, got, tt.alloc)
		}
		if got := freeCost(tt.size); got != tt.free {
			t.Errorf("freeCost(%d) = %v, want %v", tt.size, got, tt.free)
		}
	}
	// cuMemRelease grows with the allocation; cuMemSetAccess is priced
	// per mapping, the other virtual-memory calls flat.
	for _, tt := range []struct {
		call DriverCall
		size int64
		want time.Duration
	}{
		{CallRelease, 2 * mib, 20*time.Microsecond + 900*time.Nanosecond},
		{CallRelease, 128 * mib, 20*time.Microsecond + 57600*time.Nanosecond},
		{CallSetAccess, 2 * mib, 42 * time.Microsecond},
		{CallSetAccess, 1 << 30, 42 * time.Microsecond},
		{CallCreate, 1 << 30, 21 * time.Microsecond},
		{CallMap, 2 * mib, 3700 * time.Nanosecond},
		{CallUnmap, 64 * mib, 29 * time.Microsecond},
		{CallReserve, 64 * mib, 0},
	} {
		if got := ModelledCost(tt.call, tt.size); got != tt.want {
			t.Errorf("ModelledCost(%v, %d) = %v, want %v", tt.call, tt.size, got, tt.want)
		}
	}
}

// TestCallTimesAddRange checks that a cuMemSetAccess over a run of
// mappings is modelled once per mapping, as the card charges it.
func TestCallTimesAddRange(t *testing.T) {
	var ct CallTimes
	ct.AddRange(CallSetAccess, 24*mib, 3, 100*time.Microsecond)
	ct.AddRange(CallCreate, 8*mib, 3, 20*time.Microsecond) // priced per call
	measured, modelled, _ := ct.Total()
	if measured != 120*time.Microsecond || modelled != 3*costSetAccess+costCreate {
		t.Errorf("measured %v, modelled %v; want 120µs, %v", measured, modelled, 3*costSetAccess+costCreate)
	}
	rows := ct.Rows()
	if len(rows) != 2 || rows[1].Call != "cuMemSetAccess" || rows[1].Count != 1 || rows[1].ModelTotal != 3*costSetAccess {
		t.Errorf("rows %+v", rows)
	}
}

// TestSimMapRange maps runs of chunks with one access grant: the cost is
// a cuMemCreate, a cuMemMap and a cuMemSetAccess's share per chunk, each
// chunk is one mapping to unmap, and a run that cannot be mapped whole
// maps nothing.
func TestSimMapRange(t *testing.T) {
	perChunk := costCreate + costMap + costSetAccess
	tests := []struct {
		name    string
		sizes   []int64
		ok      bool
		full    bool // the error wraps ErrArenaFull
		setAcc  int64
		costUS  int64
		mapping int
	}{
		{"one chunk", []int64{4 * mib}, true, false, 1, perChunk.Microseconds(), 1},
		{"three chunks", []int64{2 * mib, 8 * mib, 4 * mib}, true, false, 1, (3 * perChunk).Microseconds(), 3},
		{"none", nil, false, false, 0, 0, 0},
		{"misaligned second", []int64{2 * mib, 3 * mib}, false, false, 0, 0, 0},
		{"past the reservation", []int64{2 * mib, 64 * mib}, false, false, 0, 0, 0},
		{"past the capacity", []int64{32 * mib, 32 * mib}, false, true, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSimArena(48 * mib)
			base, err := s.Reserve(64 * mib)
			if err != nil {
				t.Fatal(err)
			}
			before := s.DriverTime()
			err = s.MapRange(base, tc.sizes)
			if (err == nil) != tc.ok || errors.Is(err, ErrArenaFull) != tc.full {
				t.Fatalf("MapRange(%v) = %v, want ok %v, full %v", tc.sizes, err, tc.ok, tc.full)
			}
			c := s.Counts()
			if got := (s.DriverTime() - before).Microseconds(); got != tc.costUS || c.SetAccess != tc.setAcc ||
				c.Create != int64(tc.mapping) || c.Map != int64(tc.mapping) {
				t.Errorf("cost %d µs, counts %+v; want %d µs, %d cuMemSetAccess, %d mappings", got, c, tc.costUS, tc.setAcc, tc.mapping)
			}
			if !tc.ok {
				if s.Used() != 0 || s.maps.Len() != 0 {
					t.Errorf("a failed MapRange left %d bytes in %d mappings", s.Used(), s.maps.Len())
				}
				return
			}
			at := base
			for _, size := range tc.sizes {
				if err := s.Unmap(at, size); err != nil {
					t.Errorf("Unmap of one chunk of the run: %v", err)
				}
				at += uint64(size)
			}
			if s.Used() != 0 {
				t.Errorf("%d bytes left after unmapping every chunk", s.Used())
			}
		})
	}
}

// TestCallTimesConcurrent records, reads and merges driver calls from
// many goroutines at once (run under -race in CI): CallTimes is shared by
// an arena's calls and the report that reads it.
func TestCallTimesConcurrent(t *testing.T) {
	var ct, other CallTimes
	other.Add(CallAlloc, 2*mib, time.Microsecond)
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				switch i % 4 {
				case 0:
					ct.Add(CallCreate, int64(w+1)*mib, time.Microsecond)
				case 1:
					ct.AddRange(CallSetAccess, 8*mib, 4, time.Microsecond)
				case 2:
					ct.Rows()
					ct.Total()
				default:
					ct.Merge(&other)
				}
			}
		}()
	}
	wg.Wait()
	var calls int64
	for _, r := range ct.Rows() {
		calls += r.Count
	}
	if want := int64(workers * each * 3 / 4); calls != want {
		t.Errorf("%d calls recorded, want %d", calls, want)
	}
	_, modelled, _ := ct.Total()
	want := workers*each/4*(costCreate+4*costSetAccess) + workers*each/4*ModelledCost(CallAlloc, 2*mib)
	if modelled != want {
		t.Errorf("modelled %v, want %v", modelled, want)
	}
}
