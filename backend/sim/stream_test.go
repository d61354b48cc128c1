package sim

import (
	"errors"
	"sync"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
	"github.com/vramgo/vram/memory"
)

func streamDevice(t *testing.T, index int) *Device {
	t.Helper()
	cpu, _ := backend.Lookup("cpu")
	host, err := cpu.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDevice(host, index, 64<<20, memory.Config{}, false)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func f32(t *testing.T, d *Device, vals ...float64) backend.View {
	return backendtest.NewView(t, d, backend.Float32, []int{len(vals)}, vals)
}

func read(t *testing.T, d *Device, v backend.View) []float64 {
	t.Helper()
	return backendtest.ReadView(t, d, v)
}

func mustStream(t *testing.T, d *Device) backend.Stream {
	t.Helper()
	s, err := d.NewStream(0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSideStreamRunsWhenNeeded: work on a stream other than the default is
// queued, invisible to the default stream until something makes it run,
// as a GPU kernel still running would be.
func TestSideStreamRunsWhenNeeded(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, d *Device, s backend.Stream) error
	}{
		{"stream Synchronize", func(t *testing.T, d *Device, s backend.Stream) error { return s.Synchronize() }},
		{"device Synchronize", func(t *testing.T, d *Device, s backend.Stream) error { return d.Synchronize() }},
		{"event Synchronize", func(t *testing.T, d *Device, s backend.Stream) error {
			e, _ := d.NewEvent(false)
			if err := e.Record(s); err != nil {
				return err
			}
			return e.Synchronize()
		}},
		{"default stream waits on an event", func(t *testing.T, d *Device, s backend.Stream) error {
			e, _ := d.NewEvent(false)
			if err := e.Record(s); err != nil {
				return err
			}
			return d.DefaultStream().WaitEvent(e)
		}},
		{"copy to host on the stream", func(t *testing.T, d *Device, s backend.Stream) error {
			return d.CopyToHost(s, make([]byte, 8), backendtest.NewView(t, d, backend.Float32, []int{2}, []float64{0, 0}))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := streamDevice(t, 0)
			s := mustStream(t, d)
			x := f32(t, d, 1, 2)
			if err := d.Scalar(s, backend.Mul, x, x, 10, false); err != nil {
				t.Fatal(err)
			}
			if got := read(t, d, x); got[0] != 1 || got[1] != 2 {
				t.Fatalf("the default stream sees %v before the side stream ran, want the old [1 2]", got)
			}
			if err := tc.run(t, d, s); err != nil {
				t.Fatal(err)
			}
			if got := read(t, d, x); got[0] != 10 || got[1] != 20 {
				t.Fatalf("after %s the default stream sees %v, want [10 20]", tc.name, got)
			}
		})
	}
}

// TestQueryReportsBusyOnce: a query of a stream or event with queued work
// reports false, and the work then runs, so polling ends.
func TestQueryReportsBusyOnce(t *testing.T) {
	d := streamDevice(t, 0)
	s := mustStream(t, d)
	x := f32(t, d, 3)
	e, _ := d.NewEvent(false)
	d.Fill(s, x, 7)
	e.Record(s)
	if done, _ := e.Query(); done {
		t.Error("event Query with queued work = true, want false")
	}
	if done, _ := e.Query(); !done {
		t.Error("second event Query = false, want true")
	}
	d.Fill(s, x, 8)
	if done, _ := s.Query(); done {
		t.Error("stream Query with queued work = true, want false")
	}
	if done, _ := s.Query(); !done {
		t.Error("second stream Query = false, want true")
	}
	if got := read(t, d, x); got[0] != 8 {
		t.Errorf("x = %v, want 8", got)
	}
}

// TestWaitOrdersAtTheWait: a wait queued on a stream orders only the work
// queued after it, and waits for the event's work as recorded then.
func TestWaitOrdersAtTheWait(t *testing.T) {
	d := streamDevice(t, 0)
	a, b := mustStream(t, d), mustStream(t, d)
	x, y := f32(t, d, 1), f32(t, d, 0)
	d.Fill(a, x, 5)
	e, _ := d.NewEvent(false)
	e.Record(a)
	d.Fill(a, x, 6) // after the event: b's wait does not cover it
	b.WaitEvent(e)
	d.Copy(b, y, x)
	if err := b.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, d, y); got[0] != 5 {
		t.Errorf("y = %v, want 5 (the value at the event)", got)
	}
	if got := read(t, d, x); got[0] != 5 {
		t.Errorf("x on the default stream = %v, want 5: a's work after the event has not run", got)
	}
	a.Synchronize()
	if got := read(t, d, x); got[0] != 6 {
		t.Errorf("x after a ran = %v, want 6", got)
	}
}

// TestWaitAcrossDevices: a stream of one sim device waits on an event of
// another.
func TestWaitAcrossDevices(t *testing.T) {
	d0, d1 := streamDevice(t, 0), streamDevice(t, 1)
	s0, s1 := mustStream(t, d0), mustStream(t, d1)
	x := f32(t, d0, 1)
	d0.Fill(s0, x, 9)
	e, _ := d0.NewEvent(false)
	e.Record(s0)
	if err := s1.WaitEvent(e); err != nil {
		t.Fatal(err)
	}
	y := f32(t, d1, 0)
	d1.Fill(s1, y, 1)
	if err := s1.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, d0, x); got[0] != 9 {
		t.Errorf("x = %v: the wait on sim:1 did not run sim:0's work first", got)
	}
	if err := e.Record(s1); !errors.Is(err, backend.ErrStreamDevice) {
		t.Errorf("recording a sim:0 event on a sim:1 stream: %v, want ErrStreamDevice", err)
	}
	if err := d0.Fill(s1, x, 0); !errors.Is(err, backend.ErrStreamDevice) {
		t.Errorf("a sim:0 kernel on a sim:1 stream: %v, want ErrStreamDevice", err)
	}
}

// TestFreeZeroByteBufferIsNoHazard: a zero-byte buffer has no memory that
// another stream's queued work could see reused, so freeing it without
// RecordStream is not reported, whatever the work queued on it.
func TestFreeZeroByteBufferIsNoHazard(t *testing.T) {
	for _, shape := range [][]int{{0}, {3, 0}, {0, 0, 2}} {
		d := streamDevice(t, 0)
		s := mustStream(t, d)
		buf, err := d.Alloc(0, d.DefaultStream(), "")
		if err != nil {
			t.Fatal(err)
		}
		v := backend.View{Buf: buf, DType: backend.Float32, Shape: shape, Strides: backend.ContiguousStrides(shape)}
		if err := d.Fill(s, v, 1); err != nil {
			t.Fatal(err)
		}
		d.Free(buf, d.DefaultStream())
		if err := d.Synchronize(); err != nil {
			t.Fatalf("shape %v: freeing a zero-byte buffer used on another stream: %v", shape, err)
		}
	}
}

// TestFreeWithoutRecordStream: freeing a buffer that another stream's
// queued work still uses is reported; with RecordStream it is not, and the
// allocator keeps the memory until that stream has run.
func TestFreeWithoutRecordStream(t *testing.T) {
	const size = 1 << 20
	setup := func(t *testing.T) (*Device, backend.Stream, backend.Buffer) {
		d := streamDevice(t, 0)
		s := mustStream(t, d)
		buf, err := d.Alloc(size, d.DefaultStream(), "")
		if err != nil {
			t.Fatal(err)
		}
		v := backend.View{Buf: buf, DType: backend.Float32, Shape: []int{size / 4}, Strides: []int{1}}
		if err := d.Fill(s, v, 1); err != nil { // queued on s
			t.Fatal(err)
		}
		return d, s, buf
	}
	t.Run("unrecorded", func(t *testing.T) {
		d, _, buf := setup(t)
		d.Free(buf, d.DefaultStream())
		err := d.Synchronize()
		var he *HazardError
		if !errors.As(err, &he) || he.UseStream != 1 || he.AllocStream != 0 || he.Bytes != size {
			t.Fatalf("Synchronize after the unsafe free: %v, want a HazardError for stream 1", err)
		}
		if err := d.Synchronize(); err != nil {
			t.Errorf("the hazard is reported once; the second Synchronize returned %v", err)
		}
	})
	t.Run("recorded", func(t *testing.T) {
		d, s, buf := setup(t)
		addr := buf.(*buffer).Addr()
		d.RecordStream(buf, s)
		d.Free(buf, d.DefaultStream())
		again, err := d.Alloc(size, d.DefaultStream(), "")
		if err != nil {
			t.Fatal(err)
		}
		if again.(*buffer).Addr() == addr {
			t.Error("the allocator reused a block recorded on a stream that has not run")
		}
		if err := s.Synchronize(); err != nil {
			t.Fatalf("Synchronize: %v", err)
		}
		d.Free(again, d.DefaultStream())
		third, err := d.Alloc(size, d.DefaultStream(), "")
		if err != nil {
			t.Fatal(err)
		}
		if third.(*buffer).Addr() != addr && again.(*buffer).Addr() != addr {
			t.Error("the block never returned to the pool after its stream ran")
		}
		d.Free(third, d.DefaultStream())
		if err := d.Synchronize(); err != nil {
			t.Errorf("Synchronize: %v", err)
		}
	})
	t.Run("same stream", func(t *testing.T) {
		d := streamDevice(t, 0)
		s := mustStream(t, d)
		buf, _ := d.Alloc(size, s, "")
		v := backend.View{Buf: buf, DType: backend.Float32, Shape: []int{size / 4}, Strides: []int{1}}
		d.Fill(s, v, 1)
		d.Free(buf, s) // safe: later work on s runs after the fill
		if err := d.Synchronize(); err != nil {
			t.Errorf("freeing on the stream that uses the buffer: %v", err)
		}
	})
}

// TestPerStreamPools: blocks freed on one stream are not handed to
// another.
func TestPerStreamPools(t *testing.T) {
	d := streamDevice(t, 0)
	s := mustStream(t, d)
	a, _ := d.Alloc(4096, s, "")
	addr := a.(*buffer).Addr()
	d.Free(a, s)
	b, _ := d.Alloc(4096, d.DefaultStream(), "")
	if b.(*buffer).Addr() == addr {
		t.Error("a block cached for a side stream was handed to the default stream")
	}
	c, _ := d.Alloc(4096, s, "")
	if c.(*buffer).Addr() != addr {
		t.Error("the side stream did not get its cached block back")
	}
}

// TestPinnedCopyReadsWhenRun: a queued copy from pinned memory reads it
// when the stream runs, so writing the host buffer before that changes
// what lands, as on a GPU.
func TestPinnedCopyReadsWhenRun(t *testing.T) {
	d := streamDevice(t, 0)
	s := mustStream(t, d)
	hb, err := d.AllocPinned(8)
	if err != nil {
		t.Fatal(err)
	}
	copy(hb.Host(), backendtest.Encode(backend.Float32, []float64{1, 2}))
	x := f32(t, d, 0, 0)
	hv := backend.View{Buf: hb, DType: backend.Float32, Shape: []int{2}, Strides: []int{1}}
	if err := d.CopyFromPinned(s, x, hv); err != nil {
		t.Fatal(err)
	}
	copy(hb.Host(), backendtest.Encode(backend.Float32, []float64{3, 4}))
	s.Synchronize()
	if got := read(t, d, x); got[0] != 3 || got[1] != 4 {
		t.Errorf("x = %v, want the values in pinned memory when the copy ran, [3 4]", got)
	}
}

// TestQueueBounded: a stream never synchronized runs its work once the
// queue is full.
func TestQueueBounded(t *testing.T) {
	d := streamDevice(t, 0)
	s := mustStream(t, d).(*Stream)
	x := f32(t, d, 0)
	for range maxQueued + 1 {
		d.Scalar(s, backend.Add, x, x, 1, false)
	}
	qmu.Lock()
	n := len(s.queue)
	qmu.Unlock()
	if n > maxQueued {
		t.Errorf("%d kernels queued, want at most %d", n, maxQueued)
	}
	s.Synchronize()
	if got := read(t, d, x); got[0] != maxQueued+1 {
		t.Errorf("x = %v, want %d", got, maxQueued+1)
	}
}

// TestStreamErrorsAtSynchronize: an error raised by queued work comes back
// from the stream's Synchronize, once.
func TestStreamErrorsAtSynchronize(t *testing.T) {
	d := streamDevice(t, 0)
	s := mustStream(t, d)
	src := f32(t, d, 1, 2)
	dst := f32(t, d, 0)
	idx := backendtest.NewView(t, d, backend.Int64, []int{1}, []float64{5}) // out of range
	if err := d.Gather(s, dst, src, idx, 0); err != nil {
		t.Fatalf("the queued gather failed at once: %v", err)
	}
	if err := s.Synchronize(); err == nil {
		t.Error("Synchronize did not return the queued gather's index error")
	}
	if err := s.Synchronize(); err != nil {
		t.Errorf("second Synchronize: %v", err)
	}
}

// TestStreamsRace drives streams of one device from many goroutines, with
// events between them, for the race detector.
func TestStreamsRace(t *testing.T) {
	d := streamDevice(t, 0)
	const workers = 8
	xs := make([]backend.View, workers)
	for i := range xs {
		xs[i] = f32(t, d, 0, 0, 0, 0)
	}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _ := d.NewStream(-i % 6)
			defer s.Destroy()
			e, _ := d.NewEvent(true)
			for range 50 {
				d.Scalar(s, backend.Add, xs[i], xs[i], 1, false)
				e.Record(s)
				e.Query()
				d.DefaultStream().WaitEvent(e)
			}
			if err := s.Synchronize(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i := range xs {
		if got := read(t, d, xs[i]); got[0] != 50 {
			t.Errorf("x[%d] = %v, want 50", i, got)
		}
	}
}

// TestSideStreamChecksAtOnce: a kernel with bad arguments on a side stream
// fails when it is queued, as on a GPU, not at the next Synchronize.
func TestSideStreamChecksAtOnce(t *testing.T) {
	d := streamDevice(t, 0)
	s := mustStream(t, d)
	a, b := f32(t, d, 1, 2), f32(t, d, 1, 2, 3)
	if err := d.Binary(s, backend.Add, a, a, b); err == nil {
		t.Fatal("a binary op of mismatched shapes was queued")
	}
	if err := s.Synchronize(); err != nil {
		t.Errorf("Synchronize after a refused kernel: %v", err)
	}
}
