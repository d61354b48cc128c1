package vram

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
	if m.Device != tight.String() || m.Total != 256<<20 || m.Reserved < 32<<20 || m.Used() != m.Reserved || m.ThisProcess != m.Reserved ||
		m.ProcessOther() != 0 || m.OtherProcesses() != 0 || m.Unattributed() != 0 || m.Others == nil {
		t.Fatalf("breakdown: %+v", m)
	}
	if !strings.Contains(MemorySummary(tight), "allocator reserve") {
		t.Errorf("summary lacks the device breakdown:\n%s", MemorySummary(tight))
	}
	if _, err := DeviceMemory(CPU); err == nil {
		t.Error("the CPU has no device memory information")
	}
}

// TestDeviceMemoryWhileAllocating reads DeviceMemory while other
// goroutines allocate and free (run it with -race): every reading must be
// a consistent breakdown.
func TestDeviceMemoryWhileAllocating(t *testing.T) {
	defer EmptyCache(tight)
	done := make(chan struct{})
	errs := make(chan error, 4)
	for g := 0; g < 3; g++ {
		go func() {
			errs <- Catch(func() {
				for i := 0; i < 40; i++ {
					x := Empty(Shape{(i%7 + 1) << 18}, tight) // 1 to 7 MiB
					x.Release()
				}
			})
		}()
	}
	go func() {
		defer close(done)
		for i := 0; i < 100; i++ {
			m, err := DeviceMemory(tight)
			if err != nil {
				errs <- err
				return
			}
			if m.Total != 256<<20 || m.Free < 0 || m.Used() < 0 || m.Reserved < 0 || m.Unattributed() < 0 || m.OtherProcesses() != 0 {
				errs <- errors.New("inconsistent breakdown: " + m.String())
				return
			}
		}
	}()
	for g := 0; g < 3; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	<-done
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

func TestResetAccumulatedMemoryStats(t *testing.T) {
	x := Zeros(Shape{1 << 18}, tight) // 1 MiB
	y := Zeros(Shape{1 << 18}, tight)
	y.Release()
	before, st := MemoryStats(tight), Storage(tight)
	if before.Allocation[memory.StatAll].Allocated == 0 || st.Allocs == 0 {
		t.Fatalf("test setup: nothing counted: %+v %+v", before.Allocation[memory.StatAll], st)
	}
	ResetAccumulatedMemoryStats(tight)
	after, st2 := MemoryStats(tight), Storage(tight)
	for _, f := range []memory.Stat{after.Allocation[memory.StatAll], after.AllocatedBytes[memory.StatAll], after.Segment[memory.StatAll]} {
		if f.Allocated != 0 || f.Freed != 0 {
			t.Errorf("accumulated sums survive the reset: %+v", f)
		}
	}
	if after.NumDeviceAlloc != 0 || after.NumSyncAllStreams != 0 || after.NumOOMs != 0 || st2.Allocs != 0 || st2.Frees != 0 {
		t.Errorf("counters survive the reset: %+v, storage %+v", after, st2)
	}
	if after.AllocatedBytes[memory.StatAll].Current != before.AllocatedBytes[memory.StatAll].Current ||
		after.AllocatedBytes[memory.StatAll].Peak != before.AllocatedBytes[memory.StatAll].Peak ||
		st2.LiveBytes != st.LiveBytes || st2.PeakBytes != st.PeakBytes {
		t.Errorf("current values or peaks changed: %+v -> %+v, storage %+v -> %+v",
			before.AllocatedBytes[memory.StatAll], after.AllocatedBytes[memory.StatAll], st, st2)
	}
	x.Release()
	if s := MemoryStats(tight); s.Allocation[memory.StatAll].Freed != 1 {
		t.Errorf("after one release: freed %d, want 1", s.Allocation[memory.StatAll].Freed)
	}
	// A cleanup between the reset and the read would count a free.
	settle(CPU)
	ResetAccumulatedMemoryStats(CPU) // no allocator: only the storage counts
	if s := Storage(CPU); s.Allocs != 0 || s.Frees != 0 {
		t.Errorf("CPU storage counts after the reset: %+v", s)
	}
}

func TestRegionsInSummary(t *testing.T) {
	var w *Tensor
	Region("summary test weights", func() { w = Zeros(Shape{1 << 18}, tight) })
	defer w.Release()
	s := MemorySummary(tight)
	if !strings.Contains(s, "Live allocations by region") || !strings.Contains(s, "summary test weights") {
		t.Fatalf("summary does not list the region:\n%s", s)
	}
}

// TestMemoryControlsNameTheDevice: the memory calls that return an error
// say that a device is missing rather than that it has no allocator.
func TestMemoryControlsNameTheDevice(t *testing.T) {
	missing := Sim(SimDeviceCount() + 3)
	for _, tt := range []struct {
		name        string
		call        func() error
		unavailable bool
	}{
		{"fraction on a missing device", func() error { return SetPerProcessMemoryFraction(0.5, missing) }, true},
		{"history on a missing device", func() error { return RecordMemoryHistory(missing, true, 10, false) }, true},
		{"fraction on the CPU", func() error { return SetPerProcessMemoryFraction(0.5, CPU) }, false},
		{"history on the CPU", func() error { return RecordMemoryHistory(CPU, true, 10, false) }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrUnavailable) != tt.unavailable {
				t.Fatalf("error %v: matches ErrUnavailable %v, want %v", err, !tt.unavailable, tt.unavailable)
			}
			if tt.unavailable && strings.Contains(err.Error(), "caching allocator") {
				t.Fatalf("error %v speaks of an allocator of a device that does not exist", err)
			}
		})
	}
}

// TestMemoryControlErrorKinds: the memory calls that return an error return
// a vram *Error whose kind says what was wrong, and a refused fraction
// leaves the limit as it was.
func TestMemoryControlErrorKinds(t *testing.T) {
	missing := Sim(SimDeviceCount() + 3)
	for _, tt := range []struct {
		name string
		call func() error
		kind error // nil: no error
	}{
		{"fraction 1", func() error { return SetPerProcessMemoryFraction(1, tight) }, nil},
		{"fraction -0.01", func() error { return SetPerProcessMemoryFraction(-0.01, tight) }, ErrArgument},
		{"fraction -0.5", func() error { return SetPerProcessMemoryFraction(-0.5, tight) }, ErrArgument},
		{"fraction 1.5", func() error { return SetPerProcessMemoryFraction(1.5, tight) }, ErrArgument},
		{"fraction NaN", func() error { return SetPerProcessMemoryFraction(math.NaN(), tight) }, ErrArgument},
		{"fraction +Inf", func() error { return SetPerProcessMemoryFraction(math.Inf(1), tight) }, ErrArgument},
		{"fraction on the CPU", func() error { return SetPerProcessMemoryFraction(0.5, CPU) }, ErrArgument},
		{"fraction on a missing device", func() error { return SetPerProcessMemoryFraction(0.5, missing) }, ErrUnavailable},
		{"history on the CPU", func() error { return RecordMemoryHistory(CPU, true, 10, false) }, ErrArgument},
		{"history on a missing device", func() error { return RecordMemoryHistory(missing, true, 10, false) }, ErrUnavailable},
		{"device memory of a sim device", func() error { _, err := DeviceMemory(tight); return err }, nil},
		{"device memory of the CPU", func() error { _, err := DeviceMemory(CPU); return err }, ErrArgument},
		{"device memory of a missing device", func() error { _, err := DeviceMemory(missing); return err }, ErrUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if tt.kind == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ve *Error
			if !errors.As(err, &ve) || !errors.Is(err, tt.kind) {
				t.Fatalf("error %v (%T), want a *vram.Error of kind %v", err, err, tt.kind)
			}
			if ve.Op == "device" || ve.Op == "" {
				t.Errorf("error %v does not name the call", err)
			}
		})
	}
	// The refusals left the limit at 1: 200 MiB of the 256 fit.
	defer EmptyCache(tight)
	if err := Catch(func() { Empty(Shape{50 << 20}, Float32, tight).Release() }); err != nil {
		t.Fatalf("after the refused fractions: %v", err)
	}
}

// TestMemorySummaryNamesTheDevicesState: the summary of a device that is
// not available says so and why, rather than that it has no caching
// allocator; the CPU's says it has none.
func TestMemorySummaryNamesTheDevicesState(t *testing.T) {
	for _, tt := range []struct {
		name string
		d    Device
		want []string
		not  []string
	}{
		{"missing sim device", Sim(SimDeviceCount() + 3), []string{"is not available", "sim devices"}, []string{"caching allocator"}},
		{"negative index", Sim(-1), []string{"is not available"}, []string{"caching allocator"}},
		{"cpu", CPU, []string{"has no caching allocator"}, []string{"not available"}},
		{"sim device", tight, []string{"Allocated memory"}, []string{"not available", "has no caching allocator"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := MemorySummary(tt.d)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("MemorySummary(%v) = %q, want it to say %q", tt.d, got, w)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(got, w) {
					t.Errorf("MemorySummary(%v) = %q, should not say %q", tt.d, got, w)
				}
			}
		})
	}
}

// TestStoragePeakCoversLive: the peak of Storage never stays below its
// live bytes, for tensors in pinned host memory too, and when peaks are
// reset while other goroutines allocate (run it with -race).
func TestStoragePeakCoversLive(t *testing.T) {
	src := Ones(Shape{1024}, CPU)
	defer src.Release()
	for _, tt := range []struct {
		name string
		d    Device
		make func() *Tensor
	}{
		{"pinned host memory", CPU, func() *Tensor { return src.PinMemory(Sim(0)) }},
		{"cpu tensors", CPU, func() *Tensor { return Ones(Shape{1024}, CPU) }},
		{"sim tensors", quiet, func() *Tensor { return Ones(Shape{1024}, quiet) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var wg sync.WaitGroup
			var mu sync.Mutex
			var held []*Tensor
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 50 {
						if g == 0 && i%5 == 0 {
							ResetPeakMemoryStats(tt.d)
						}
						x := tt.make()
						mu.Lock()
						held = append(held, x)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			s := Storage(tt.d)
			for _, x := range held {
				x.Release()
			}
			if s.PeakBytes < s.LiveBytes {
				t.Fatalf("peak %d bytes below the %d live", s.PeakBytes, s.LiveBytes)
			}
		})
	}
}

// An out-of-memory error with nothing for the collector to reclaim (every
// tensor released, as a batch-size search provokes them) comes without
// waiting out reclaim's whole bound: at most one of five errors ran a wait
// out (a machine loaded enough may delay a cleanup that long), and the
// median of them takes less than a collection on this machine now plus
// the bound. (A loaded machine slows the collection and wakes sleepers
// late; counting the waits that ran out keeps that out of the verdict.)
func TestOutOfMemoryWithNothingToReclaimIsPrompt(t *testing.T) {
	if testing.Short() {
		// CI's -short run is its race-detector run, where a collection
		// takes many times as long: the plain run checks the timing.
		t.Skip("timing; checked without -short")
	}
	held := Empty(Shape{50 << 20}, tight) // 200 MiB of the 256
	defer func() { held.Release(); EmptyCache(tight) }()
	var took, gc []time.Duration
	timeouts := reclaimTimeouts.Load()
	for range 5 {
		start := time.Now()
		<-collect()
		gc = append(gc, time.Since(start))
		start = time.Now()
		err := Catch(func() { Empty(Shape{25 << 20}, tight) }) // 100 MiB more
		took = append(took, time.Since(start))
		if !errors.Is(err, ErrOutOfMemory) {
			t.Fatalf("100 MiB with 56 MiB free: %v", err)
		}
	}
	slices.Sort(took)
	slices.Sort(gc)
	if n := reclaimTimeouts.Load() - timeouts; n > 1 {
		t.Errorf("reclaim waited out its bound of %v %d times in 5 out-of-memory errors (they took %v)", reclaimWait, n, took)
	}
	if took[2] >= gc[2]+reclaimWait {
		t.Errorf("out-of-memory errors took %v, the median not under a collection's %v plus reclaim's bound of %v", took, gc[2], reclaimWait)
	}
}

// TestMemoryCallsRaceAllocations drives every memory call of the package
// (stats, peaks, summary, snapshot, history, limit, cache) from goroutines
// of their own while others allocate and release tensors in regions; run
// it with -race. Every reading must be consistent (nothing negative, peaks
// at least the current values, reserved at least allocated), and once
// everything is released and the cache emptied, allocated and reserved
// are back to zero.
func TestMemoryCallsRaceAllocations(t *testing.T) {
	d := tight
	EmptyCache(d)
	defer func() {
		_ = RecordMemoryHistory(d, false, 0, false)
		_ = SetPerProcessMemoryFraction(1, d)
		EmptyCache(d)
	}()
	var (
		mu       sync.Mutex
		firstErr string
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == "" {
			firstErr = fmt.Sprintf(format, args...)
		}
	}
	consistent := func(s memory.Stats) {
		for name, f := range map[string]memory.StatArray{
			"allocated_bytes": s.AllocatedBytes, "reserved_bytes": s.ReservedBytes, "active_bytes": s.ActiveBytes,
			"requested_bytes": s.RequestedBytes, "inactive_split_bytes": s.InactiveSplitBytes,
			"allocation": s.Allocation, "segment": s.Segment, "active": s.Active, "inactive_split": s.InactiveSplit,
		} {
			for i, st := range f {
				if st.Current < 0 || st.Peak < st.Current {
					report("%s[%d] = %+v", name, i, st)
				}
			}
		}
		if r, a := s.ReservedBytes[memory.StatAll].Current, s.AllocatedBytes[memory.StatAll].Current; r < a {
			report("reserved %d < allocated %d", r, a)
		}
	}
	steps := 100
	if testing.Short() {
		steps = 24
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	for _, call := range []func(){
		func() { consistent(MemoryStats(d)) },
		func() {
			if a, m := MemoryAllocated(d), MaxMemoryAllocated(d); a < 0 || m < 0 {
				report("allocated %d, max %d", a, m)
			}
		},
		func() { _ = MemorySnapshot(d) },
		func() { _ = MemorySummary(d) },
		func() { ResetPeakMemoryStats(d) },
		func() { ResetAccumulatedMemoryStats(d) },
		func() { EmptyCache(d) },
		func() { _ = RecordMemoryHistory(d, true, 64, true) },
		func() { _ = SetPerProcessMemoryFraction(0.9, d) },
	} {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					call()
					// Leave the workers most of the two cores CI has.
					time.Sleep(200 * time.Microsecond)
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range steps {
				// Mostly the small pool; every eighth in the large one.
				n := 1 + (i*7919+g*104729)%(1<<14)
				if i%8 == g {
					n += 1 << 19
				}
				Region(fmt.Sprint("worker ", g), func() {
					x := Zeros(Shape{n}, d)
					y := x.AddScalar(1)
					x.Release()
					y.Release()
				})
			}
		}()
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	if firstErr != "" {
		t.Fatal(firstErr)
	}
	EmptyCache(d)
	if a, r := MemoryAllocated(d), MemoryReserved(d); a != 0 || r != 0 {
		t.Fatalf("after releasing everything and EmptyCache: allocated %d, reserved %d; want 0 and 0", a, r)
	}
}
