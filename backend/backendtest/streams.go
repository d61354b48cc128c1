package backendtest

import (
	"errors"
	"sync"
	"testing"

	"github.com/vramgo/vram/backend"
)

// testStreams checks the stream and event contract: work on a new stream,
// ordering through events, queries, timing, priorities, the device-wide
// synchronize, RecordStream, streams of another device, and the pinned
// copies of an AsyncCopier.
func (h *harness) testStreams(t *testing.T) {
	d := h.dev
	lowest, highest := d.StreamPriorities()
	if highest > lowest {
		t.Fatalf("StreamPriorities() = %d, %d: the highest priority must be a number no greater than the lowest", lowest, highest)
	}

	t.Run("OrderOnOneStream", func(t *testing.T) {
		s := h.newStream(t, 0)
		x := NewView(t, d, backend.Float32, []int{1000}, filled(1000, 0))
		for range 10 {
			h.ok(t, "Scalar", d.Scalar(s, backend.Add, x, x, 1, false))
		}
		h.ok(t, "Synchronize", s.Synchronize())
		expect(t, "ten adds on one stream", backend.Float32, ReadView(t, d, x), filled(1000, 10))
	})

	t.Run("EventOrdersStreams", func(t *testing.T) {
		a, b := h.newStream(t, 0), h.newStream(t, highest)
		x := NewView(t, d, backend.Float32, []int{4096}, filled(4096, 1))
		y := NewView(t, d, backend.Float32, []int{4096}, filled(4096, 0))
		for range 8 {
			h.ok(t, "Binary", d.Binary(a, backend.Add, x, x, x)) // x doubles: 256
		}
		e := h.newEvent(t, false)
		h.ok(t, "Record", e.Record(a))
		h.ok(t, "WaitEvent", b.WaitEvent(e))
		h.ok(t, "Scalar", d.Scalar(b, backend.Add, y, x, 1, false))
		h.ok(t, "Synchronize", b.Synchronize())
		if done, err := e.Query(); err != nil || !done {
			t.Errorf("event Query after the waiting stream finished = %v, %v; want true", done, err)
		}
		expect(t, "y = x + 1 after waiting for x", backend.Float32, ReadView(t, d, y), filled(4096, 257))
		h.ok(t, "Synchronize", a.Synchronize())
	})

	t.Run("QueryAndSynchronize", func(t *testing.T) {
		s := h.newStream(t, lowest)
		x := NewView(t, d, backend.Float32, []int{256}, filled(256, 2))
		h.ok(t, "Unary", d.Unary(s, backend.Square, x, x, 0))
		for range 3 {
			if _, err := s.Query(); err != nil {
				t.Fatalf("Query: %v", err)
			}
		}
		h.ok(t, "device Synchronize", d.Synchronize())
		if done, err := s.Query(); err != nil || !done {
			t.Errorf("Query after the device synchronized = %v, %v; want true", done, err)
		}
		expect(t, "square", backend.Float32, ReadView(t, d, x), filled(256, 4))
		e := h.newEvent(t, false)
		if done, err := e.Query(); err != nil || !done {
			t.Errorf("Query of an event never recorded = %v, %v; want true", done, err)
		}
		h.ok(t, "WaitEvent on an event never recorded", s.WaitEvent(e))
		h.ok(t, "Synchronize of an event never recorded", e.Synchronize())
	})

	t.Run("Timing", func(t *testing.T) {
		s := h.newStream(t, 0)
		start, end := h.newEvent(t, true), h.newEvent(t, true)
		x := NewView(t, d, backend.Float32, []int{1 << 16}, filled(1<<16, 1))
		h.ok(t, "Record", start.Record(s))
		h.ok(t, "Scalar", d.Scalar(s, backend.Mul, x, x, 2, false))
		h.ok(t, "Record", end.Record(s))
		h.ok(t, "Synchronize", end.Synchronize())
		el, err := end.Elapsed(start)
		if err != nil || el < 0 {
			t.Errorf("Elapsed = %v, %v; want a non-negative time", el, err)
		}
		plain := h.newEvent(t, false)
		h.ok(t, "Record", plain.Record(s))
		h.ok(t, "Synchronize", plain.Synchronize())
		if _, err := plain.Elapsed(start); err == nil {
			t.Error("Elapsed of an event without timing succeeded")
		}
	})

	t.Run("Priorities", func(t *testing.T) {
		for _, p := range []int{lowest + 100, lowest, highest, highest - 100} {
			s := h.newStream(t, p)
			want := max(highest, min(lowest, p))
			if got := s.Priority(); got != want {
				t.Errorf("NewStream(%d).Priority() = %d, want %d (clamped to %d..%d)", p, got, want, highest, lowest)
			}
		}
	})

	t.Run("RecordStream", func(t *testing.T) {
		a, b := h.newStream(t, 0), h.newStream(t, 0)
		buf, err := d.Alloc(4096*4, a, "")
		h.ok(t, "Alloc", err)
		x := backend.View{Buf: buf, DType: backend.Float32, Shape: []int{4096}, Strides: []int{1}}
		h.ok(t, "Fill", d.Fill(a, x, 3))
		e := h.newEvent(t, false)
		h.ok(t, "Record", e.Record(a))
		h.ok(t, "WaitEvent", b.WaitEvent(e))
		y := NewView(t, d, backend.Float32, []int{4096}, filled(4096, 0))
		h.ok(t, "Copy", d.Copy(b, y, x))
		d.RecordStream(buf, b)
		d.Free(buf, a)
		// New work on a may get other memory; the copy on b still reads x.
		z, err := d.Alloc(4096*4, a, "")
		h.ok(t, "Alloc", err)
		zv := backend.View{Buf: z, DType: backend.Float32, Shape: []int{4096}, Strides: []int{1}}
		h.ok(t, "Fill", d.Fill(a, zv, -1))
		h.ok(t, "device Synchronize", d.Synchronize())
		expect(t, "copy of a buffer freed after RecordStream", backend.Float32, ReadView(t, d, y), filled(4096, 3))
		d.Free(z, a)
	})

	t.Run("ForeignStream", func(t *testing.T) {
		x := NewView(t, d, backend.Float32, []int{4}, filled(4, 0))
		if err := d.Fill(foreignStream{}, x, 1); !errors.Is(err, backend.ErrStreamDevice) {
			t.Errorf("Fill on a stream of another device: %v, want an error wrapping ErrStreamDevice", err)
		}
		e := h.newEvent(t, false)
		if err := e.Record(foreignStream{}); !errors.Is(err, backend.ErrStreamDevice) {
			t.Errorf("Record on a stream of another device: %v, want an error wrapping ErrStreamDevice", err)
		}
	})

	t.Run("ConcurrentStreams", func(t *testing.T) {
		// Goroutines each drive their own stream; events chain them.
		const workers = 4
		var wg sync.WaitGroup
		outs := make([]backend.View, workers)
		for i := range outs {
			outs[i] = NewView(t, d, backend.Float32, []int{512}, filled(512, 0))
		}
		for i := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := d.NewStream(0)
				if err != nil {
					t.Error(err)
					return
				}
				defer s.Destroy()
				for range 20 {
					if err := d.Scalar(s, backend.Add, outs[i], outs[i], float64(i+1), false); err != nil {
						t.Error(err)
						return
					}
				}
				if err := s.Synchronize(); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		for i := range workers {
			expect(t, "per-stream sums", backend.Float32, ReadView(t, d, outs[i]), filled(512, float64(20*(i+1))))
		}
	})

	if ac, ok := d.(backend.AsyncCopier); ok {
		t.Run("PinnedCopies", func(t *testing.T) { h.testPinned(t, ac) })
	}
}

// testPinned checks non-blocking copies through pinned host memory.
func (h *harness) testPinned(t *testing.T, ac backend.AsyncCopier) {
	d := h.dev
	const n = 1 << 12
	src, err := ac.AllocPinned(n * 4)
	h.ok(t, "AllocPinned", err)
	defer ac.FreePinned(src)
	if p, ok := src.(backend.Pinned); !ok || p.PinnedBy() != d {
		t.Errorf("AllocPinned returned %T, want a backend.Pinned of this device", src)
	}
	vals := gen([]float64{-4, 4}, n, 11)
	vals = quantizeAll(backend.Float32, vals)
	copy(src.Host(), Encode(backend.Float32, vals))
	s := h.newStream(t, 0)
	hv := backend.View{Buf: src, DType: backend.Float32, Shape: []int{n}, Strides: []int{1}}
	dv := NewView(t, d, backend.Float32, []int{n}, filled(n, 0))
	h.ok(t, "CopyFromPinned", ac.CopyFromPinned(s, dv, hv))
	h.ok(t, "Scalar", d.Scalar(s, backend.Mul, dv, dv, 2, false))
	dst, err := ac.AllocPinned(n * 4)
	h.ok(t, "AllocPinned", err)
	defer ac.FreePinned(dst)
	ov := backend.View{Buf: dst, DType: backend.Float32, Shape: []int{n}, Strides: []int{1}}
	h.ok(t, "CopyToPinned", ac.CopyToPinned(s, ov, dv))
	h.ok(t, "Synchronize", s.Synchronize())
	want := make([]float64, n)
	for i, v := range vals {
		want[i] = 2 * v
	}
	expect(t, "pinned round trip", backend.Float32, Decode(backend.Float32, dst.Host()), want)
	// Pageable memory is not pinned: the copy must say so.
	pageable := NewView(t, d, backend.Float32, []int{4}, filled(4, 0))
	cpuBuf := hostBuffer(make([]byte, 16))
	err = ac.CopyFromPinned(s, pageable, backend.View{Buf: cpuBuf, DType: backend.Float32, Shape: []int{4}, Strides: []int{1}})
	if !errors.Is(err, backend.ErrNotImplemented) {
		t.Errorf("CopyFromPinned from pageable memory: %v, want an error wrapping ErrNotImplemented", err)
	}
}

type hostBuffer []byte

func (b hostBuffer) Bytes() int64 { return int64(len(b)) }
func (b hostBuffer) Host() []byte { return b }

// foreignStream is a stream of no device of any backend.
type foreignStream struct{}

func (foreignStream) Synchronize() error            { return nil }
func (foreignStream) Query() (bool, error)          { return true, nil }
func (foreignStream) WaitEvent(backend.Event) error { return nil }
func (foreignStream) Priority() int                 { return 0 }
func (foreignStream) Destroy() error                { return nil }

func (h *harness) newStream(t *testing.T, priority int) backend.Stream {
	t.Helper()
	s, err := h.dev.NewStream(priority)
	if err != nil {
		t.Fatalf("NewStream(%d): %v", priority, err)
	}
	t.Cleanup(func() {
		if err := s.Destroy(); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
	return s
}

func (h *harness) newEvent(t *testing.T, timing bool) backend.Event {
	t.Helper()
	e, err := h.dev.NewEvent(timing)
	if err != nil {
		t.Fatalf("NewEvent: %v", err)
	}
	t.Cleanup(func() { e.Destroy() })
	return e
}
