package vram

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

func mustNewStream(t *testing.T, d Device, prio ...int) *Stream {
	t.Helper()
	s, err := NewStream(d, prio...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Release)
	return s
}

// TestWithStreamScope: the current stream is per goroutine and per device,
// nests, and is restored when the function returns or panics.
func TestWithStreamScope(t *testing.T) {
	d0, d1 := Sim(0), Sim(1)
	s0, s0b, s1 := mustNewStream(t, d0), mustNewStream(t, d0), mustNewStream(t, d1)
	if CurrentStream(d0) != DefaultStream(d0) || !DefaultStream(d0).IsDefault() {
		t.Fatal("the current stream outside WithStream is not the default stream")
	}
	WithStream(s0, func() {
		if CurrentStream(d0) != s0 {
			t.Error("CurrentStream inside WithStream is not the stream given")
		}
		if CurrentStream(d1) != DefaultStream(d1) {
			t.Error("WithStream of a sim:0 stream changed sim:1's current stream")
		}
		WithStream(s1, func() {
			if CurrentStream(d0) != s0 || CurrentStream(d1) != s1 {
				t.Error("nested WithStream on another device lost the outer stream")
			}
		})
		WithStream(s0b, func() {
			if CurrentStream(d0) != s0b {
				t.Error("nested WithStream on the same device is not innermost")
			}
		})
		if CurrentStream(d0) != s0 {
			t.Error("the outer stream is not current again after a nested WithStream")
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if CurrentStream(d0) != DefaultStream(d0) {
				t.Error("another goroutine sees this goroutine's current stream")
			}
		}()
		wg.Wait()
		func() {
			defer func() { recover() }()
			WithStream(s0b, func() { panic("boom") })
		}()
		if CurrentStream(d0) != s0 {
			t.Error("a panic inside WithStream left its stream current")
		}
	})
	if CurrentStream(d0) != DefaultStream(d0) {
		t.Error("the default stream is not current after WithStream returned")
	}
}

// TestStreamsOrderTensorWork: ops inside WithStream run on that stream; a
// consumer on another stream sees the producer's result only after
// waiting for it (sim streams other than the default run their work when
// something needs it).
func TestStreamsOrderTensorWork(t *testing.T) {
	d := Sim(0)
	side := mustNewStream(t, d)
	x := Full([]int{256}, 1, d)
	defer x.Release()
	var y *Tensor
	WithStream(side, func() {
		y = x.MulScalar(3)
	})
	defer y.Release()
	// Without a wait the default stream reads y before the side stream ran.
	// With one, it reads 3s.
	DefaultStream(d).WaitStream(side)
	if got := y.Sum().Item(); got != 3*256 {
		t.Errorf("sum after waiting for the side stream = %v, want %v", got, 3*256)
	}

	// The reverse direction, with an explicit event, and RecordStream for
	// a tensor of the default stream used on the side stream.
	a := Full([]int{256}, 2, d)
	e := NewEvent()
	defer e.Release()
	e.Record(CurrentStream(d))
	side.WaitEvent(e)
	var b *Tensor
	WithStream(side, func() {
		b = a.AddScalar(1)
		a.RecordStream(side)
	})
	a.Release()
	if err := side.Synchronize(); err != nil {
		t.Fatalf("side stream: %v", err)
	}
	if got := b.Sum().Item(); got != 3*256 {
		t.Errorf("sum of b = %v, want %v", got, 3*256)
	}
	b.Release()
	if err := Synchronize(d); err != nil {
		t.Errorf("Synchronize: %v", err)
	}
}

// TestUnrecordedFreeIsReported: releasing a default-stream tensor whose
// memory queued work on another stream still reads, without RecordStream,
// is an error at the next Synchronize on a sim device.
func TestUnrecordedFreeIsReported(t *testing.T) {
	d := Sim(0)
	side := mustNewStream(t, d)
	a := Full([]int{1024}, 2, d)
	var b *Tensor
	WithStream(side, func() { b = a.AddScalar(1) })
	a.Release() // no RecordStream: the allocator may hand a's memory out now
	err := Synchronize(d)
	if err == nil || !errors.Is(err, ErrBackend) {
		t.Fatalf("Synchronize after the unsafe release: %v, want an ErrBackend naming the hazard", err)
	}
	b.Release()
}

// TestNonBlockingCopies: pinned memory on a sim device, copies that do not
// wait, and host reads that wait for them.
func TestNonBlockingCopies(t *testing.T) {
	d := Sim(1)
	host := Arange(0, 1000, 1)
	defer host.Release()
	if host.IsPinned() {
		t.Fatal("a new CPU tensor is pinned")
	}
	p := host.PinMemory(d)
	defer p.Release()
	if !p.IsPinned() || p.Device() != CPU {
		t.Fatalf("PinMemory: pinned %v on %v, want a pinned CPU tensor", p.IsPinned(), p.Device())
	}
	if p2 := p.PinMemory(d); p2.ref.st != p.ref.st {
		t.Error("PinMemory of a pinned tensor copied it")
	} else {
		p2.Release()
	}
	side := mustNewStream(t, d)
	var g, back *Tensor
	WithStream(side, func() {
		g = p.To(d, NonBlocking)
		g2 := g.MulScalar(2)
		back = g2.To(CPU, NonBlocking)
		g2.Release()
	})
	defer g.Release()
	defer back.Release()
	if !back.IsPinned() {
		t.Error("a non-blocking copy to the host did not land in pinned memory")
	}
	// Reading back on the host waits for the copy: no synchronize needed.
	if got := back.Sum().Item(); got != 2*999*1000/2 {
		t.Errorf("sum of the copied-back tensor = %v, want %v", got, 999*1000)
	}
	// A pageable tensor copies the blocking way, with the same result.
	g3 := host.To(d, NonBlocking)
	defer g3.Release()
	if got := g3.Sum().Item(); got != 999*1000/2 {
		t.Errorf("pageable non-blocking copy: sum %v", got)
	}
}

// TestStreamErrors: bad streams and events panic with typed errors that
// say what is wrong.
func TestStreamErrors(t *testing.T) {
	s0 := mustNewStream(t, Sim(0))
	released, _ := NewStream(Sim(0))
	released.Release()
	released.Release() // twice is fine
	tests := []struct {
		name string
		kind error
		fn   func()
	}{
		{"nil stream", ErrArgument, func() { WithStream(nil, func() {}) }},
		{"nil stream device", ErrArgument, func() { var s *Stream; s.Device() }},
		{"nil stream is default", ErrArgument, func() { var s *Stream; s.IsDefault() }},
		{"released stream", ErrReleased, func() { WithStream(released, func() {}) }},
		{"released stream synchronize", ErrReleased, func() { released.Synchronize() }},
		{"nil event", ErrArgument, func() { var e *Event; e.Record(s0) }},
		{"event on two devices", ErrDevice, func() {
			e := NewEvent()
			e.Record(s0)
			e.Record(DefaultStream(Sim(1)))
		}},
		{"record_stream of another device", ErrDevice, func() {
			x := Zeros([]int{2}, Sim(1))
			defer x.Release()
			x.RecordStream(s0)
		}},
		{"pin a sim tensor", ErrDevice, func() {
			x := Zeros([]int{2}, Sim(0))
			defer x.Release()
			x.PinMemory(Sim(0))
		}},
		{"pin with the CPU", ErrUnavailable, func() {
			x := Zeros([]int{2})
			defer x.Release()
			x.PinMemory(CPU)
		}},
		{"nil copy option", ErrArgument, func() { Zeros([]int{2}).To(Sim(0), nil) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Catch(tc.fn)
			var e *Error
			if !errors.As(err, &e) || e.Kind != tc.kind {
				t.Fatalf("got %v, want an *Error of kind %v", err, tc.kind)
			}
		})
	}
	if err := Catch(func() {
		if got := (*Stream)(nil).String(); got != "nil stream" {
			t.Errorf("a nil stream's String is %q", got)
		}
	}); err != nil {
		t.Errorf("String of a nil stream: %v", err)
	}
	if _, err := NewStream(Device{Kind: "nope"}); err == nil {
		t.Error("NewStream on an unknown device kind succeeded")
	}
	if _, err := NewStream(Sim(0), 1, 2); err == nil {
		t.Error("NewStream with two priorities succeeded")
	}
	lo, hi, err := StreamPriorityRange(Sim(0))
	if err != nil || lo != 0 || hi >= 0 {
		t.Errorf("StreamPriorityRange(sim:0) = %d, %d, %v", lo, hi, err)
	}
	if s := mustNewStream(t, Sim(0), hi-10); s.Priority() != hi {
		t.Errorf("priority %d was not clamped to %d: %d", hi-10, hi, s.Priority())
	}
}

// TestEventTiming: ElapsedTime between timing events, and its errors.
func TestEventTiming(t *testing.T) {
	s := mustNewStream(t, Sim(0))
	start, end := NewTimingEvent(), NewTimingEvent()
	start.Record(s)
	WithStream(s, func() {
		x := Ones([]int{1 << 14}, Sim(0))
		x.MulScalar(2).Release()
		x.Release()
	})
	end.Record(s)
	if err := end.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if el, err := start.ElapsedTime(end); err != nil || el < 0 {
		t.Errorf("ElapsedTime = %v, %v", el, err)
	}
	plain := s.RecordEvent()
	if _, err := start.ElapsedTime(plain); err == nil {
		t.Error("ElapsedTime to an event without timing succeeded")
	}
	if _, err := NewTimingEvent().ElapsedTime(end); err == nil {
		t.Error("ElapsedTime from an event never recorded succeeded")
	}
	if !NewEvent().Query() {
		t.Error("an event never recorded is not complete")
	}
}

// TestStreamsConcurrentTraining is the race stress: goroutines train
// tensors on their own streams of one device and of two, with waits
// between streams and releases racing the queued work.
func TestStreamsConcurrentTraining(t *testing.T) {
	devs := []Device{Sim(0), Sim(1), CPU}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := devs[i%len(devs)]
			s, err := NewStream(d, -(i % 3))
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Release()
			w := Ones([]int{16, 16}, d).SetRequiresGrad(true)
			defer w.Release()
			WithStream(s, func() {
				for range 10 {
					Tidy(func() {
						x := Full([]int{4, 16}, 0.5, d)
						loss := x.MatMul(w).Square().Mean()
						loss.Backward()
						g := w.Grad()
						g.RecordStream(s)
					})
				}
			})
			DefaultStream(d).WaitStream(s)
			if err := Synchronize(d); err != nil {
				t.Error(err)
			}
			if g := w.Grad(); g == nil || g.Sum().Item() <= 0 {
				t.Error("no gradient after training on a stream")
			}
		}()
	}
	wg.Wait()
}

// TestEventFirstRecordRaces records a fresh event from several goroutines
// at once, on streams of one device, while others query it, wait on it and
// time it; run it with -race. Whichever Record comes first fixes the
// event's device, and every other call sees that device: none fails with
// ErrDevice, none reads a device not yet set.
func TestEventFirstRecordRaces(t *testing.T) {
	d := Sim(0)
	streams := []*Stream{DefaultStream(d), mustNewStream(t, d), mustNewStream(t, d)}
	for _, tt := range []struct {
		name   string
		timing bool
	}{{"plain", false}, {"timing", true}} {
		t.Run(tt.name, func(t *testing.T) {
			for range 50 {
				e := &Event{timing: tt.timing}
				var wg sync.WaitGroup
				errs := make(chan error, 4*len(streams))
				for i, s := range streams {
					wg.Add(3)
					go func() {
						defer wg.Done()
						errs <- Catch(func() { e.Record(s) })
					}()
					go func() {
						defer wg.Done()
						errs <- Catch(func() { e.Query(); s.WaitEvent(e) })
					}()
					go func() {
						defer wg.Done()
						errs <- Catch(func() {
							if err := e.Synchronize(); err != nil {
								panic(err)
							}
							if i == 0 && tt.timing {
								// Not recorded yet, or recorded: either
								// error is an argument error.
								if _, err := e.ElapsedTime(e); err != nil && !errors.Is(err, ErrArgument) {
									panic(err)
								}
							}
						})
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Fatal(err)
					}
				}
				e.Release()
			}
		})
	}
}

// TestCopyBetweenDevicesFollowsStreams: a copy between two sim devices
// reads its source after the work queued so far on the destination's
// current stream, as PyTorch's copies between GPUs do, so that a
// destination stream made to wait for the stream that wrote the source
// copies what that stream wrote.
func TestCopyBetweenDevicesFollowsStreams(t *testing.T) {
	tests := []struct {
		name string
		copy func(x *Tensor, to Device) *Tensor
	}{
		{"To", func(x *Tensor, to Device) *Tensor { return x.To(to) }},
		{"CopyFrom", func(x *Tensor, to Device) *Tensor { return Zeros(x.Shape(), to).CopyFrom(x) }},
		{"MoveTo", func(x *Tensor, to Device) *Tensor { x.MoveTo(to); return x.Detach() }},
		{"To of a transposed view", func(x *Tensor, to Device) *Tensor {
			v := x.View(2, 2).T()
			defer v.Release()
			c := v.To(to)
			defer c.Release()
			ct := c.T()
			defer ct.Release()
			return ct.Reshape(-1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, to := Sim(0), Sim(1)
			s0, s1 := mustNewStream(t, from), mustNewStream(t, to)
			var x *Tensor
			WithStream(s0, func() {
				one := Ones(Shape{4}, Float32, from)
				defer one.Release()
				x = one.MulScalar(3)
			})
			defer x.Release()
			e := s0.RecordEvent()
			defer e.Release()
			s1.WaitEvent(e)
			var y *Tensor
			WithStream(s1, func() { y = tt.copy(x, to) })
			defer y.Release()
			if err := s1.Synchronize(); err != nil {
				t.Fatal(err)
			}
			if got := y.Float32s(); !slices.Equal(got, []float32{3, 3, 3, 3}) {
				t.Errorf("copied %v, want the 3s that the waited stream wrote", got)
			}
			if err := Synchronize(from); err != nil {
				t.Error(err)
			}
			if err := Synchronize(to); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestBackwardWaitsForForwardStreams: a backward pass outside the
// WithStream of its forward pass, or inside one when the forward pass ran
// on the default stream, gives the gradients of the values the forward
// streams computed, as in PyTorch, where each backward operation runs on
// its forward operation's stream.
func TestBackwardWaitsForForwardStreams(t *testing.T) {
	tests := []struct {
		name string
		// forward returns the loss of w on streams of its choice; grad
		// runs the backward pass and returns w's gradient.
		forward func(t *testing.T, w *Tensor) *Tensor
		grad    func(t *testing.T, w, loss *Tensor) []float32
	}{
		{"forward on a side stream, Backward on the default one",
			func(t *testing.T, w *Tensor) *Tensor {
				s := mustNewStream(t, Sim(0))
				var loss *Tensor
				WithStream(s, func() { loss = w.MulScalar(2).Square().Sum() })
				return loss
			},
			func(t *testing.T, w, loss *Tensor) []float32 {
				loss.Backward()
				return w.Grad().Float32s()
			}},
		{"forward on a side stream, Grad on the default one",
			func(t *testing.T, w *Tensor) *Tensor {
				s := mustNewStream(t, Sim(0))
				var loss *Tensor
				WithStream(s, func() { loss = w.MulScalar(2).Square().Sum() })
				return loss
			},
			func(t *testing.T, w, loss *Tensor) []float32 {
				g := Grad([]*Tensor{loss}, []*Tensor{w})
				defer g[0].Release()
				return g[0].Float32s()
			}},
		{"forward on side streams of two devices",
			func(t *testing.T, w *Tensor) *Tensor {
				s0, s1 := mustNewStream(t, Sim(0)), mustNewStream(t, Sim(1))
				var h, loss *Tensor
				WithStream(s0, func() { h = w.MulScalar(2) })
				WithStream(s1, func() {
					s1.WaitStream(s0)
					loss = h.To(Sim(1)).Square().Sum()
				})
				return loss
			},
			func(t *testing.T, w, loss *Tensor) []float32 {
				loss.Backward()
				return w.Grad().Float32s()
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := FromSlice([]float32{1, 2, 3}, Shape{3}, Float32, Sim(0)).SetRequiresGrad(true)
			defer w.Release()
			Tidy(func() {
				loss := tt.forward(t, w)
				got := tt.grad(t, w, loss)
				if want := []float32{8, 16, 24}; !slices.Equal(got, want) {
					t.Errorf("gradient %v, want %v", got, want)
				}
			})
			for _, d := range []Device{Sim(0), Sim(1)} {
				if err := Synchronize(d); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
