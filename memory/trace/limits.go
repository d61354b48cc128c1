package trace

import (
	"fmt"
	"io"
	"unsafe"

	"github.com/vramgo/vram/internal/pickle"
	"github.com/vramgo/vram/internal/units"
)

// DefaultMaxBytes is the default of [Limits.MaxBytes]: 1 GiB of
// decompressed input. A PyTorch snapshot pickle of 1,000,000 trace entries
// (ten times the history torch.cuda.memory._record_memory_history keeps by
// default) with 10-30 frame stacks is 145 MB (see the package documentation,
// "# PyTorch pickles"), so the default admits about seven million entries.
const DefaultMaxBytes = 1 << 30

// Memory spent reading a pickle, per byte of (decompressed) pickle: past
// pickleFloorBytes, reading fails once the values decoded so far, and then
// the snapshots converted from them, take more than pickleExpansion bytes
// per byte of input by the reader's count. PyTorch-like pickles take about
// 10.7 bytes per byte when every call stack is distinct (5.2 to decode, 5.5
// to convert) and 5.8 when 300 stacks repeat (syntheticPickle of
// bench_test.go, 200,000 entries, 2026-12-05, counting the arrays that
// growing slices leave behind); a pickle of nothing but one-byte
// EMPTY_LIST opcodes would take about 70, and one of one-byte NONE opcodes,
// each a slot of a stack that grows by copying, about 80, so that a small
// gzip file of them could otherwise expand into tens of gigabytes.
const (
	pickleExpansion  = 16
	pickleFloorBytes = 64 << 20
)

// Heap bytes of the unpickler's containers, for its count of memory.
const (
	sizeofAny   = pickle.SizeofAny
	sizeofList  = int64(unsafe.Sizeof(pyList{}))
	sizeofDict  = int64(unsafe.Sizeof(pyDict{}))
	sizeofSlice = pickle.SizeofSlice
)

// Limits bound the memory reading one input may take. Text traces streamed
// with [NewTextReader] or [OpenStream] need memory independent of their
// length and are not limited; everything read whole is: JSON snapshots and
// pickles (trees, held in memory until they are converted), and text
// traces read by [Read], [Open] or [ReadTextAll], whose events are
// collected in a slice. The zero value gives the defaults. Beyond a limit,
// readers fail with a [*ParseError] wrapping a [*LimitError].
type Limits struct {
	// MaxBytes is the most bytes a reader reads of an input it holds
	// whole, counted after decompression, so that a small gzip file cannot
	// expand without bound. 0 means DefaultMaxBytes; a negative value
	// means no limit.
	MaxBytes int64
}

// maxBytes returns the effective MaxBytes, or -1 for none.
func (l Limits) maxBytes() int64 {
	switch {
	case l.MaxBytes == 0:
		return DefaultMaxBytes
	case l.MaxBytes < 0:
		return -1
	}
	return l.MaxBytes
}

// Read is [Read] under these limits.
func (l Limits) Read(r io.Reader, name string) (*File, error) {
	f, err := read(r, l)
	if err != nil {
		kind := KindUnknown
		if f != nil {
			kind = f.Kind
		}
		return nil, withFile(err, name, kind)
	}
	f.Name = name
	return f, nil
}

// Open is [Open] under these limits.
func (l Limits) Open(path string) (*File, error) {
	return openWith(path, func(r io.Reader) (*File, error) { return l.Read(r, path) })
}

// LimitError reports an input that exceeds one of the [Limits].
type LimitError struct {
	// Limit is the limit that was reached, in bytes.
	Limit int64
	// Pickle reports that the limit is the decoder's memory per byte of
	// pickle, or of a PyTorch snapshot saved as JSON, rather than
	// Limits.MaxBytes.
	Pickle bool
	// Used is, for a pickle or JSON, the memory its values took when
	// decoding stopped, and Read the bytes of input read by then.
	Used, Read int64

	json bool // the input is JSON rather than a pickle
}

// Error says which limit was reached and how to raise it.
func (e *LimitError) Error() string { return "trace: " + e.detail() }

func (e *LimitError) detail() string {
	if e.Pickle && e.json {
		return fmt.Sprintf("JSON: its values take %s of memory after %s of input, more than %d bytes per byte: not a real snapshot (a corrupt or hostile JSON file of many tiny values)",
			units.Bytes(e.Used), units.Bytes(e.Read), pickleExpansion)
	}
	if e.Pickle {
		return fmt.Sprintf("pickle: its values take %s of memory after %s of input, more than %d bytes per byte: not a real snapshot (a corrupt or hostile pickle of many tiny objects)",
			units.Bytes(e.Used), units.Bytes(e.Read), pickleExpansion)
	}
	return fmt.Sprintf("input larger than %s after decompression, the most read whole (trace.Limits.MaxBytes, default %s; --max-input of vram replay and vram analyze raises it)",
		units.Bytes(e.Limit), units.Bytes(DefaultMaxBytes))
}

// limitReader reads at most n bytes from r and fails with a *LimitError
// when r has more.
type limitReader struct {
	r     io.Reader
	left  int64
	limit int64
	err   error // sticky: the *LimitError once returned
}

// limited returns r limited to l's MaxBytes, or r itself without a limit.
func limited(r io.Reader, l Limits) io.Reader {
	n := l.maxBytes()
	if n < 0 {
		return r
	}
	return &limitReader{r: r, left: n, limit: n}
}

func (lr *limitReader) Read(p []byte) (int, error) {
	if lr.err != nil {
		return 0, lr.err
	}
	if lr.left <= 0 {
		// One byte more tells a file of exactly the limit from a larger one.
		var b [1]byte
		n, err := lr.r.Read(b[:])
		if n > 0 {
			lr.err = &LimitError{Limit: lr.limit}
			return 0, lr.err
		}
		return 0, err
	}
	if int64(len(p)) > lr.left {
		p = p[:lr.left]
	}
	n, err := lr.r.Read(p)
	lr.left -= int64(n)
	return n, err
}
