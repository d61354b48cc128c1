package parallel

import (
	"errors"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vramgo/vram"
)

func TestMain(m *testing.M) {
	if err := vram.Configure(vram.Config{SimDevices: []int64{256 << 20, 256 << 20, 256 << 20, 256 << 20}}); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

func simDevs(n int) []vram.Device {
	devs := make([]vram.Device, n)
	for i := range devs {
		devs[i] = vram.Sim(i)
	}
	return devs
}

// eachRank runs fn on every rank of comms, each in its own goroutine, and
// returns their errors.
func eachRank(comms []Communicator, fn func(c Communicator) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if perr := vram.Catch(func() { err = fn(c) }); perr != nil {
				err = perr
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errs
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestLocalCollectives(t *testing.T) {
	for _, devs := range [][]vram.Device{simDevs(1), simDevs(3), {vram.CPU, vram.Sim(0), vram.Sim(1), vram.Sim(2)}} {
		n := len(devs)
		comms, err := NewLocalGroup(devs)
		if err != nil {
			t.Fatal(err)
		}
		value := func(r int) float64 { return float64(r + 1) }
		tests := []struct {
			name string
			run  func(c Communicator) (*vram.Tensor, error)
			want func(r int) []float32
		}{
			{"all_reduce sum", func(c Communicator) (*vram.Tensor, error) {
				x := vram.Full(vram.Shape{2, 3}, value(c.Rank()), c.Device())
				return x, c.AllReduce(x, Sum)
			}, func(int) []float32 { v := float32(n * (n + 1) / 2); return []float32{v, v, v, v, v, v} }},
			{"all_reduce avg", func(c Communicator) (*vram.Tensor, error) {
				x := vram.Full(vram.Shape{4}, value(c.Rank()), c.Device())
				return x, c.AllReduce(x, Avg)
			}, func(int) []float32 { v := float32(n+1) / 2; return []float32{v, v, v, v} }},
			{"all_reduce max", func(c Communicator) (*vram.Tensor, error) {
				x := vram.Full(vram.Shape{2}, value(c.Rank()), c.Device())
				return x, c.AllReduce(x, Max)
			}, func(int) []float32 { return []float32{float32(n), float32(n)} }},
			{"broadcast", func(c Communicator) (*vram.Tensor, error) {
				x := vram.Full(vram.Shape{3}, value(c.Rank()), c.Device())
				return x, c.Broadcast(x, n-1)
			}, func(int) []float32 { return []float32{float32(n), float32(n), float32(n)} }},
			{"reduce", func(c Communicator) (*vram.Tensor, error) {
				x := vram.Full(vram.Shape{1}, value(c.Rank()), c.Device())
				return x, c.Reduce(x, Sum, 0)
			}, func(r int) []float32 {
				if r == 0 {
					return []float32{float32(n * (n + 1) / 2)}
				}
				return []float32{float32(value(r))}
			}},
			{"all_gather", func(c Communicator) (*vram.Tensor, error) {
				x := vram.Full(vram.Shape{2}, value(c.Rank()), c.Device())
				out := vram.Zeros(vram.Shape{n, 2}, c.Device())
				defer x.Release()
				return out, c.AllGather(out, x)
			}, func(int) []float32 {
				var w []float32
				for r := range n {
					w = append(w, float32(value(r)), float32(value(r)))
				}
				return w
			}},
			{"reduce_scatter", func(c Communicator) (*vram.Tensor, error) {
				x := vram.Arange(0, float64(2*n), 1, c.Device())
				out := vram.Zeros(vram.Shape{2}, c.Device())
				defer x.Release()
				return out, c.ReduceScatter(out, x, Sum)
			}, func(r int) []float32 { return []float32{float32(n * 2 * r), float32(n * (2*r + 1))} }},
			{"send and recv in a ring", func(c Communicator) (*vram.Tensor, error) {
				x := vram.Full(vram.Shape{2}, value(c.Rank()), c.Device())
				defer x.Release()
				out := vram.Zeros(vram.Shape{2}, c.Device())
				if n == 1 { // no ring: a rank cannot send to itself
					return out.CopyFrom(x), nil
				}
				if err := c.Send(x, (c.Rank()+1)%n); err != nil {
					return out, err
				}
				return out, c.Recv(out, (c.Rank()+n-1)%n)
			}, func(r int) []float32 { v := float32(value((r + n - 1) % n)); return []float32{v, v} }},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				outs := make([]*vram.Tensor, n)
				noErrors(t, eachRank(comms, func(c Communicator) error {
					x, err := tc.run(c)
					outs[c.Rank()] = x
					return err
				}))
				for r, x := range outs {
					got, want := x.Float32s(), tc.want(r)
					if len(got) != len(want) {
						t.Fatalf("rank %d: %v, want %v", r, got, want)
					}
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("rank %d on %v: %v, want %v", r, devs[r], got, want)
						}
					}
					x.Release()
				}
			})
		}
		noErrors(t, eachRank(comms, func(c Communicator) error { return c.Barrier() }))
	}
}

func TestLocalMismatchAndTimeout(t *testing.T) {
	// Ranks that disagree all fail with ErrMismatch, and the group ends:
	// a later call returns the same error rather than pair up with calls
	// of another step.
	for _, tc := range []struct {
		name string
		call func(c Communicator) error
	}{
		{"sizes", func(c Communicator) error {
			return c.AllReduce(vram.Ones(vram.Shape{2 + c.Rank()}, c.Device()), Sum)
		}},
		{"dtypes", func(c Communicator) error {
			dt := []vram.DType{vram.Float32, vram.Int64}[c.Rank()]
			return c.AllReduce(vram.Ones(vram.Shape{2}, dt, c.Device()), Sum)
		}},
		{"reductions", func(c Communicator) error {
			return c.AllReduce(vram.Ones(vram.Shape{2}, c.Device()), []ReduceOp{Sum, Max}[c.Rank()])
		}},
		{"roots", func(c Communicator) error {
			return c.Broadcast(vram.Ones(vram.Shape{2}, c.Device()), c.Rank())
		}},
		{"collectives", func(c Communicator) error {
			if c.Rank() == 0 {
				return c.Barrier()
			}
			return c.AllReduce(vram.Ones(vram.Shape{2}, c.Device()), Sum)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms, err := NewLocalGroupOptions(simDevs(2), LocalOptions{Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			errs := eachRank(comms, func(c Communicator) error {
				var err error
				vram.Tidy(func() { err = tc.call(c) })
				return err
			})
			for r, err := range errs {
				if !errors.Is(err, ErrMismatch) {
					t.Errorf("rank %d: %v, want ErrMismatch", r, err)
				}
			}
			start := time.Now()
			for r, err := range eachRank(comms, func(c Communicator) error { return c.Barrier() }) {
				if !errors.Is(err, ErrMismatch) {
					t.Errorf("rank %d: a call after the mismatch: %v, want ErrMismatch", r, err)
				}
			}
			if el := time.Since(start); el > time.Second {
				t.Errorf("a call after the mismatch took %v", el)
			}
		})
	}
	comms, err := NewLocalGroupOptions(simDevs(2), LocalOptions{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Rank 1 never arrives: rank 0 fails in time, naming it.
	start := time.Now()
	x := vram.Ones(vram.Shape{2}, vram.Sim(0))
	defer x.Release()
	err = comms[0].AllReduce(x, Sum)
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 1 || !errors.Is(err, ErrTimeout) {
		t.Fatalf("a rank that never arrives: %v, want a RankError for rank 1 wrapping ErrTimeout", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("the timeout took %v", el)
	}
	if err := comms[1].Barrier(); !errors.Is(err, ErrTimeout) {
		t.Errorf("after the timeout the group stays aborted: %v", err)
	}
}

func TestLocalAbort(t *testing.T) {
	comms, _ := NewLocalGroup(simDevs(2))
	done := make(chan error)
	go func() {
		x := vram.Ones(vram.Shape{2}, vram.Sim(0))
		defer x.Release()
		done <- comms[0].AllReduce(x, Sum)
	}()
	time.Sleep(20 * time.Millisecond)
	cause := errors.New("out of memory")
	comms[1].Abort(cause)
	if err := <-done; !errors.Is(err, ErrAborted) || !errors.Is(err, cause) {
		t.Errorf("a waiting rank after Abort: %v, want an error wrapping ErrAborted and the cause", err)
	}
}

func TestLocalGroupErrors(t *testing.T) {
	if _, err := NewLocalGroup(nil); err == nil {
		t.Error("an empty group was made")
	}
	if _, err := NewLocalGroup([]vram.Device{vram.Sim(0), vram.Sim(0)}); err == nil {
		t.Error("a group with a device twice was made")
	}
	if _, err := NewLocalGroup([]vram.Device{vram.Sim(63)}); err == nil {
		t.Error("a group on a missing device was made")
	}
	comms, _ := NewLocalGroup(simDevs(2))
	x := vram.Ones(vram.Shape{2}, vram.Sim(1))
	defer x.Release()
	if err := comms[0].AllReduce(x, Sum); err == nil {
		t.Error("rank 0 reduced a tensor of another device")
	}
	if err := comms[0].Broadcast(x, 5); err == nil {
		t.Error("broadcast from a rank that does not exist")
	}
}

// TestLocalReducesAsTCP checks that the in-process reductions give the
// TCP collectives' bits: in float64 rounded once, in int64, in rank
// order, so that sums that leave the dtype's range half way, or that
// rounding at each step would lose, come out right on both.
func TestLocalReducesAsTCP(t *testing.T) {
	const tiny32, tiny16 = 1.0 / (1 << 24), 1.0 / (1 << 8)
	for _, tc := range []struct {
		name string
		dt   vram.DType
		op   ReduceOp
		vals [3]float64 // rank r's element
		want float64
	}{
		{"float16 sum out of range half way", vram.Float16, Sum, [3]float64{60000, 60000, -60000}, 60000},
		{"float16 average", vram.Float16, Avg, [3]float64{60000, 60000, 60000}, 60000},
		{"int8 average", vram.Int8, Avg, [3]float64{127, 127, 127}, 127},
		{"int8 sum wraps", vram.Int8, Sum, [3]float64{100, 100, 0}, -56},
		{"float32 sum rounded once", vram.Float32, Sum, [3]float64{1, tiny32, tiny32}, 1 + 2*tiny32},
		{"bfloat16 sum rounded once", vram.BFloat16, Sum, [3]float64{1, tiny16, tiny16}, 1 + 2*tiny16},
		{"int32 average truncates", vram.Int32, Avg, [3]float64{-4, 0, 0}, -1},
	} {
		for _, b := range []struct {
			name  string
			comms func(t *testing.T) []Communicator
		}{
			{"in-process", func(t *testing.T) []Communicator {
				comms, err := NewLocalGroup(simDevs(3))
				if err != nil {
					t.Fatal(err)
				}
				return comms
			}},
			{"tcp", func(t *testing.T) []Communicator { return tcpGroup(t, 3, 5*time.Second) }},
		} {
			t.Run(tc.name+"/"+b.name, func(t *testing.T) {
				comms := b.comms(t)
				got := make([][]float64, 3)
				noErrors(t, eachRank(comms, func(c Communicator) error {
					var err error
					vram.Tidy(func() {
						x := vram.Full(vram.Shape{2}, tc.vals[c.Rank()], vram.Float64, c.Device()).Cast(tc.dt)
						scatter := vram.Full(vram.Shape{6}, tc.vals[c.Rank()], vram.Float64, c.Device()).Cast(tc.dt)
						part := vram.Zeros(vram.Shape{2}, tc.dt, c.Device())
						if err = c.AllReduce(x, tc.op); err == nil {
							err = c.ReduceScatter(part, scatter, tc.op)
						}
						got[c.Rank()] = append(x.Float64s(), part.Float64s()...)
					})
					return err
				}))
				for r, g := range got {
					for _, v := range g {
						if v != tc.want {
							t.Fatalf("rank %d: %v, want %v", r, g, tc.want)
						}
					}
				}
			})
		}
	}
}

// TestLocalSendCopies checks that a send takes a copy of its tensor when
// it is called: the sender may write or release the tensor as soon as
// Send returns, and the receiver gets what was sent.
func TestLocalSendCopies(t *testing.T) {
	tests := []struct {
		name  string
		after func(x *vram.Tensor) // what the sender does once Send returns
		view  bool                 // send a transposed view rather than x
	}{
		{"written", func(x *vram.Tensor) { vram.NoGrad(func() { x.FillInPlace(9) }) }, false},
		{"written, transposed", func(x *vram.Tensor) { vram.NoGrad(func() { x.FillInPlace(9) }) }, true},
		{"released", func(x *vram.Tensor) { x.Release() }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			comms, err := NewLocalGroupOptions(simDevs(2), LocalOptions{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			x := vram.FromSlice([]float32{1, 2, 3, 4, 5, 6}, vram.Shape{2, 3}, vram.Float32, vram.Sim(0))
			defer x.Release()
			sent, want := x, []float32{1, 2, 3, 4, 5, 6}
			if tt.view {
				sent, want = x.T(), []float32{1, 4, 2, 5, 3, 6}
				defer sent.Release()
			}
			if err := comms[0].Send(sent, 1); err != nil {
				t.Fatal(err)
			}
			tt.after(x)
			y := vram.Zeros(vram.Shape{6}, vram.Float32, vram.Sim(1))
			defer y.Release()
			if err := comms[1].Recv(y, 0); err != nil {
				t.Fatal(err)
			}
			if got := y.Float32s(); !slices.Equal(got, want) {
				t.Errorf("received %v, want %v", got, want)
			}
		})
	}
}

// TestLocalAllGatherHoldsNothing checks that an all_gather keeps no
// handle on the ranks' tensors: once they are released, their memory is
// free.
func TestLocalAllGatherHoldsNothing(t *testing.T) {
	tests := []struct {
		name       string
		transposed bool
	}{{"contiguous", false}, {"transposed", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			devs := simDevs(2)
			comms, err := NewLocalGroupOptions(devs, LocalOptions{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			before := []int64{vram.MemoryAllocated(devs[0]), vram.MemoryAllocated(devs[1])}
			noErrors(t, eachRank(comms, func(c Communicator) error {
				src := vram.Full(vram.Shape{2, 3}, float64(c.Rank()), c.Device())
				defer src.Release()
				if tt.transposed {
					tr := src.T()
					defer tr.Release()
					src = tr
				}
				dst := vram.Zeros(vram.Shape{12}, vram.Float32, c.Device())
				defer dst.Release()
				return c.AllGather(dst, src)
			}))
			for i, d := range devs {
				if got := vram.MemoryAllocated(d); got != before[i] {
					t.Errorf("%v: %d bytes allocated after the all_gather, %d before", d, got, before[i])
				}
			}
		})
	}
}
