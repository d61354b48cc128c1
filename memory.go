package vram

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"

	"github.com/vramgo/vram/internal/units"
)

// The memory calls below follow torch.cuda's: they read and control the
// caching allocator of a device (sim and CUDA devices have one). On a device
// without one (the CPU), stats and snapshots are empty and EmptyCache does
// nothing; MemoryAllocated and MaxMemoryAllocated then report vram's own
// accounting of live storage.

// cachingDevice is implemented by backend devices with a caching allocator.
type cachingDevice interface {
	Allocator() *memory.Allocator
}

// allocatorOf returns d's caching allocator, or nil.
func allocatorOf(d Device) *memory.Allocator {
	s, err := deviceFor(d)
	if err != nil {
		return nil
	}
	if c, ok := s.bd.(cachingDevice); ok {
		return c.Allocator()
	}
	return nil
}

// allocatorFor returns d's caching allocator for the call op that needs
// one (what says what for): the [ErrUnavailable] error of an unavailable
// device, naming why it is unavailable, or an [ErrArgument] error for a
// device without an allocator.
func allocatorFor(op string, d Device, what string) (*memory.Allocator, error) {
	s, err := deviceFor(d)
	if err != nil {
		return nil, opError(op, err)
	}
	if c, ok := s.bd.(cachingDevice); ok {
		return c.Allocator(), nil
	}
	return nil, &Error{Op: op, Kind: ErrArgument, Detail: fmt.Sprintf("%s has no caching allocator to %s", d, what)}
}

// MemoryStats returns the allocator statistics of d, in the families of
// torch.cuda.memory_stats() (see [memory.Stats] and its Map method for
// PyTorch's key names). It is the zero Stats for a device without a caching
// allocator or one that is not available.
func MemoryStats(d Device) memory.Stats {
	if a := allocatorOf(d); a != nil {
		return a.Stats()
	}
	return memory.Stats{}
}

// MemoryReserved returns the bytes d's caching allocator holds from the
// device, in use or cached (torch.cuda.memory_reserved).
func MemoryReserved(d Device) int64 {
	return MemoryStats(d).ReservedBytes[0].Current
}

// MaxMemoryReserved returns the peak of [MemoryReserved] since start or
// [ResetPeakMemoryStats].
func MaxMemoryReserved(d Device) int64 {
	if a := allocatorOf(d); a != nil {
		return a.MaxReserved()
	}
	return 0
}

// MemorySummary returns a table of d's allocator statistics, like
// torch.cuda.memory_summary(). For a device without a caching allocator it
// is one line with vram's count of live storage; for a device that is not
// available, one line that says why.
func MemorySummary(d Device) string {
	if _, err := deviceFor(d); err != nil {
		return fmt.Sprintf("%s is not available: %v\n", d, opError("memory_summary", err))
	}
	if a := allocatorOf(d); a != nil {
		sum := a.Summary()
		if m, err := DeviceMemory(d); err == nil {
			sum += m.String() + "\n"
		}
		return sum
	}
	return fmt.Sprintf("%s has no caching allocator; live tensor storage: %s (peak %s)\n",
		d, units.Bytes(MemoryAllocated(d)), units.Bytes(MaxMemoryAllocated(d)))
}

// EmptyCache returns the memory d's allocator caches but no tensor uses to
// the device (torch.cuda.empty_cache), so that other processes can have it.
// Memory of live tensors stays where it is.
func EmptyCache(d Device) {
	if a := allocatorOf(d); a != nil {
		a.EmptyCache()
	}
}

// MemorySnapshot returns the segments and blocks of d's allocator and, when
// recording is on ([RecordMemoryHistory]), its recent events with the Go
// stack frames and regions that caused them. Save it with the memory/trace
// package; `vram analyze` reads it. It returns nil for a device without a
// caching allocator.
func MemorySnapshot(d Device) *trace.Snapshot {
	if a := allocatorOf(d); a != nil {
		return a.Snapshot()
	}
	return nil
}

// RecordMemoryHistory turns the event history of d's allocator on or off
// (torch.cuda.memory._record_memory_history): a ring buffer of the last
// maxEvents allocations and frees, with Go stack frames when stacks is set.
// It returns an [*Error] of kind [ErrArgument] for a device without a
// caching allocator (the CPU), and of kind [ErrUnavailable] for a device
// that is not available.
func RecordMemoryHistory(d Device, enabled bool, maxEvents int, stacks bool) error {
	a, err := allocatorFor("record_memory_history", d, "record")
	if err != nil {
		return err
	}
	a.SetHistory(enabled, maxEvents, stacks)
	return nil
}

// SetPerProcessMemoryFraction limits d's allocator to fraction (0 to 1) of
// the device's memory (torch.cuda.set_per_process_memory_fraction). As in
// PyTorch, a fraction of 0 lets the allocator reserve nothing more: only
// memory it has cached and tensors with no elements can still be had, and
// any other allocation fails with [ErrOutOfMemory]. Memory already reserved
// is kept under any limit.
// It returns an [*Error] of kind [ErrArgument] for a fraction out of that
// range (NaN included) and for a device without a caching allocator (the
// CPU), and of kind [ErrUnavailable] for a device that is not available;
// the limit is then unchanged.
func SetPerProcessMemoryFraction(fraction float64, d Device) error {
	const op = "set_per_process_memory_fraction"
	a, err := allocatorFor(op, d, "limit")
	if err != nil {
		return err
	}
	if err := a.SetMemoryFraction(fraction); err != nil {
		return &Error{Op: op, Kind: ErrArgument, Detail: d.String(), Err: err}
	}
	return nil
}

// Region runs fn with allocations made by the calling goroutine labelled
// name, so that memory stats, snapshots and out-of-memory errors attribute
// them ("forward", "attention", "data loading"). Backward labels its
// allocations "backward" and the optimizers of package optim label theirs
// "optimizer". Calls nest; the innermost wins. Like NoGrad, it affects only
// the calling goroutine.
func Region(name string, fn func()) {
	if fn == nil {
		nilFunc("region")
	}
	id, g := enter()
	g.regions = append(g.regions, name)
	defer func() {
		g.regions = g.regions[:len(g.regions)-1]
		leave(id, g)
	}()
	fn()
}

// currentRegion returns the innermost Region label of this goroutine.
func currentRegion() string {
	g := current()
	if g == nil || len(g.regions) == 0 {
		return ""
	}
	return g.regions[len(g.regions)-1]
}

// reclaim is the allocators' last resort before an out-of-memory error: Go's
// garbage collector does not see device memory, so tensors that were
// dropped without Release may still hold it. It runs the collector and waits
// (at most reclaimWait) for the cleanups that free their storage. The
// allocator calls it without holding its lock.
//
// The wait ends as soon as nothing more is coming: a sentinel object made
// unreachable before the collection has its cleanup queued by the same
// cycle as the dropped tensors', so once it has run, every cleanup that can
// free memory has been started, and the wait ends when the count of frees
// has then stayed still for reclaimQuiet. An out-of-memory error with
// nothing to reclaim (every tensor released, as a batch-size search
// provokes them) so costs a collection and a few milliseconds, not the
// whole bound.
func reclaim(ds *devState) {
	ran := collect()
	timer := time.NewTimer(reclaimWait)
	defer timer.Stop()
	select {
	case <-ran:
	case <-timer.C:
		reclaimTimeouts.Add(1)
		return
	}
	deadline := time.Now().Add(reclaimWait)
	for n := ds.frees.Load(); time.Now().Before(deadline); {
		time.Sleep(reclaimQuiet)
		m := ds.frees.Load()
		if m == n {
			return
		}
		n = m
	}
	reclaimTimeouts.Add(1)
}

// reclaimTimeouts counts reclaim's waits that ran out their bound, so
// that a test can tell a prompt reclaim from one that waited the bound
// out, whatever the load of the machine does to the time either takes.
var reclaimTimeouts atomic.Int64

// collect runs Go's garbage collector and returns a channel that closes
// when the cleanup of a sentinel made unreachable before the collection
// has run: the cleanups that collection queued have been started by then.
func collect() <-chan struct{} {
	ran := make(chan struct{})
	func() {
		// Large enough and with a pointer, so that it is not one of the
		// tiny allocations whose cleanups may never run.
		s := &struct {
			p *byte
			_ [24]byte
		}{}
		runtime.AddCleanup(s, func(ch chan struct{}) { close(ch) }, ran)
	}()
	runtime.GC()
	return ran
}

// reclaimWait bounds each of reclaim's two waits (for the sentinel's
// cleanup, then for the cleanups to stop freeing); reclaimQuiet is how long
// the count of frees must stay still for the cleanups to count as done.
const (
	reclaimWait  = 200 * time.Millisecond
	reclaimQuiet = 3 * time.Millisecond
)

// DeviceMemory returns d's memory as its driver reports it, split the way
// a person debugging an out-of-memory error needs it: what d's caching
// allocator reserved, what else this process holds on the device (its
// context, kernels and libraries), what other processes hold, and what is
// free (torch.cuda.mem_get_info and torch.cuda.list_gpu_processes
// together). Parts that the driver's process list cannot attribute (as
// inside some containers) are [memory.DeviceMemory.Unattributed]; unknown
// values are -1. It returns an [*Error] of kind [ErrArgument] for a device
// whose driver reports no memory information (the CPU), of kind
// [ErrUnavailable] for a device that is not available, and of kind
// [ErrBackend] wrapping the driver's error when the query fails.
func DeviceMemory(d Device) (memory.DeviceMemory, error) {
	const op = "device_memory"
	s, err := deviceFor(d)
	if err != nil {
		return memory.DeviceMemory{}, opError(op, err)
	}
	mi, ok := s.bd.(memory.DeviceInfo)
	if !ok {
		return memory.DeviceMemory{}, &Error{Op: op, Kind: ErrArgument, Detail: fmt.Sprintf("%s reports no device memory information", d)}
	}
	m, err := mi.MemoryInfo()
	if err != nil {
		return memory.DeviceMemory{}, &Error{Op: op, Kind: ErrBackend, Detail: "memory information of " + d.String(), Err: err}
	}
	m.Device = d.String()
	m.Reserved = MemoryReserved(d)
	return m, nil
}
