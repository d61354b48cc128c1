package cpu

import (
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/internal/units"
)

// Options are the settings of the CPU device, given with [Configure].
type Options struct {
	// MemoryLimit bounds the bytes of the device's live buffers: an
	// allocation that would take their total past it fails with an
	// [*OutOfMemoryError]. 0, the default, is the machine's physical
	// memory (RAM without swap), or no limit where that is unknown.
	// Negative values are invalid.
	MemoryLimit int64
}

// Validate returns an error for options that [Configure] refuses.
func (o Options) Validate() error {
	if o.MemoryLimit < 0 {
		return fmt.Errorf("cpu: a negative memory limit (%d bytes)", o.MemoryLimit)
	}
	return nil
}

// Configure sets the CPU device's options; vram.Configure calls it. It may
// be called at any time: a lower limit than the memory already live
// refuses new allocations until enough is freed, and frees nothing.
// Invalid options are an error from [Options.Validate] and change nothing.
func Configure(opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	host.setLimit(opts.MemoryLimit)
	return nil
}

// MemoryLimit returns the limit in force on the bytes of the CPU device's
// live buffers (see [Options.MemoryLimit]), 0 when there is none.
func MemoryLimit() int64 { return host.limit() }

// LiveBytes returns the bytes of the CPU device's buffers allocated and not
// yet freed (or handed to the garbage collector with [Device.Abandon]).
func LiveBytes() int64 { return host.live.Load() }

// OutOfMemoryError is the error of a [Device.Alloc] that would take the
// bytes of live buffers past the limit ([Options.MemoryLimit]). Use
// errors.As to get it.
type OutOfMemoryError struct {
	Requested int64 // bytes asked of Alloc
	Live      int64 // bytes of live buffers when it was asked
	Limit     int64 // the limit in force
	// Configured is true when the limit was set with [Configure], false
	// when it is the machine's physical memory.
	Configured bool
}

// Error says what was asked, what is live and what the limit is.
func (e *OutOfMemoryError) Error() string {
	asked := "bytes"
	if e.Requested == 1 {
		asked = "byte"
	}
	source := "the machine's physical memory"
	if e.Configured {
		source = "the configured limit"
	}
	return fmt.Sprintf("cpu: out of memory: tried to allocate %s (%d %s asked) with %s of host memory live (%d bytes); the limit is %s (%d bytes, %s)",
		units.BytesUp(e.Requested), e.Requested, asked, units.Bytes(e.Live), e.Live, units.Bytes(e.Limit), e.Limit, source)
}

// budget counts the bytes of live buffers against a limit. Its methods
// are safe for concurrent use: concurrent takes never carry the total past
// the limit.
type budget struct {
	live       atomic.Int64
	max        atomic.Int64 // the limit in force, 0 for none
	configured atomic.Bool  // max was set with Configure
	byDefault  int64        // the limit when none is configured, 0 for none
}

// newBudget returns a budget whose default limit is byDefault bytes (0
// for none).
func newBudget(byDefault int64) *budget {
	b := &budget{byDefault: byDefault}
	b.max.Store(byDefault)
	return b
}

// host is the CPU device's budget: the machine's physical memory unless
// configured.
var host = newBudget(physicalMemory())

// setLimit sets the configured limit, 0 for the default.
func (b *budget) setLimit(n int64) {
	b.configured.Store(n > 0)
	if n == 0 {
		n = b.byDefault
	}
	b.max.Store(n)
}

// limit returns the limit in force, 0 for none.
func (b *budget) limit() int64 { return b.max.Load() }

// take counts n more live bytes, or returns an *OutOfMemoryError and
// counts nothing when that would pass the limit.
func (b *budget) take(n int64) error {
	limit := b.max.Load()
	for {
		live := b.live.Load()
		if limit > 0 && n > limit-live {
			return &OutOfMemoryError{Requested: n, Live: live, Limit: limit, Configured: b.configured.Load()}
		}
		if b.live.CompareAndSwap(live, live+n) {
			return nil
		}
	}
}

// give counts n fewer live bytes.
func (b *budget) give(n int64) { b.live.Add(-n) }

// Abandon gives the bytes of buf back to the limit when the garbage
// collector reclaims it, rather than when it is freed: for a buffer that
// work still uses when its owner drops it, so that [Device.Free] cannot be
// called. Freeing buf afterwards drops it without giving its bytes back
// twice.
func (*Device) Abandon(buf backend.Buffer) {
	b, ok := buf.(*Buffer)
	if !ok || b == nil || len(b.bytes) == 0 || b.abandoned {
		return
	}
	b.abandoned = true
	runtime.AddCleanup(b, host.give, int64(len(b.bytes)))
}
