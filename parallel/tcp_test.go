package parallel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vramgo/vram"
)

// tcpGroup joins n TCP ranks on devs[r % len(devs)] through one store, in
// goroutines, and closes them when the test ends.
func tcpGroup(t testing.TB, n int, timeout time.Duration, devs ...vram.Device) []Communicator {
	t.Helper()
	if len(devs) == 0 {
		devs = []vram.Device{vram.CPU}
	}
	_, store := newTestStore(t.(*testing.T), timeout)
	comms := make([]Communicator, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			comms[r], errs[r] = NewTCPRank(context.Background(), store, r, n, devs[r%len(devs)], TCPOptions{Timeout: timeout})
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range comms {
			wg.Go(func() { c.Close() })
		}
		wg.Wait()
	})
	return comms
}

// onRanks runs fn for every rank in its own goroutine and returns their
// errors.
func onRanks(comms []Communicator, fn func(r int, c Communicator) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			var err error
			if perr := vram.Catch(func() { err = fn(r, c) }); perr != nil {
				err = perr
			}
			errs[r] = err
		})
	}
	wg.Wait()
	return errs
}

// values returns rank r's test values: n numbers that differ between
// ranks and elements.
func values(r, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64((r+1)*(i+2)%7) - 2.5 + float64(r)
	}
	return v
}

func TestTCPCollectives(t *testing.T) {
	const elems = 5
	for _, size := range []int{1, 2, 3} {
		comms := tcpGroup(t, size, 10*time.Second)
		for _, dt := range []vram.DType{vram.Float32, vram.Float64, vram.BFloat16, vram.Int64, vram.Int32} {
			for _, op := range []ReduceOp{Sum, Prod, Max, Min, Avg} {
				t.Run(fmt.Sprintf("%d ranks/all_reduce/%s/%v", size, dt, op), func(t *testing.T) {
					want := make([]float64, elems)
					for i := range want {
						acc := math.NaN()
						for r := range size {
							v := rounded(dt, values(r, elems)[i])
							switch {
							case math.IsNaN(acc):
								acc = v
							case op == Sum || op == Avg:
								acc += v
							case op == Prod:
								acc *= v
							case op == Max:
								acc = math.Max(acc, v)
							case op == Min:
								acc = math.Min(acc, v)
							}
						}
						if op == Avg {
							acc /= float64(size)
							if !dt.IsFloat() {
								acc = math.Trunc(acc)
							}
						}
						want[i] = rounded(dt, acc)
					}
					got := make([][]float64, size)
					errs := onRanks(comms, func(r int, c Communicator) error {
						x := vram.FromSlice(values(r, elems), vram.Shape{elems}, dt)
						defer x.Release()
						if err := c.AllReduce(x, op); err != nil {
							return err
						}
						got[r] = x.Float64s()
						return nil
					})
					for r := range size {
						if errs[r] != nil {
							t.Fatalf("rank %d: %v", r, errs[r])
						}
						if !slices.Equal(got[r], want) {
							t.Errorf("rank %d: %v, want %v", r, got[r], want)
						}
					}
				})
			}
		}
		t.Run(fmt.Sprintf("%d ranks/others", size), func(t *testing.T) {
			root := size - 1
			errs := onRanks(comms, func(r int, c Communicator) error {
				check := func(what string, x *vram.Tensor, want []float64) error {
					if got := x.Float64s(); !slices.Equal(got, want) {
						return fmt.Errorf("%s: %v, want %v", what, got, want)
					}
					return nil
				}
				x := vram.FromSlice(values(r, elems), vram.Shape{elems}, vram.Float32)
				if err := c.Broadcast(x, root); err != nil {
					return err
				}
				if err := check("broadcast", x, roundAll(vram.Float32, values(root, elems))); err != nil {
					return err
				}
				x = vram.FromSlice(values(r, elems), vram.Shape{elems}, vram.Float32)
				if err := c.Reduce(x, Sum, root); err != nil {
					return err
				}
				want := roundAll(vram.Float32, values(r, elems))
				if r == root {
					want = make([]float64, elems)
					for q := range size {
						for i, v := range values(q, elems) {
							want[i] += v
						}
					}
				}
				if err := check("reduce", x, want); err != nil {
					return err
				}
				src := vram.FromSlice(values(r, elems), vram.Shape{elems}, vram.Float64)
				dst := vram.Zeros(vram.Shape{size, elems}, vram.Float64)
				if err := c.AllGather(dst, src); err != nil {
					return err
				}
				var all []float64
				for q := range size {
					all = append(all, values(q, elems)...)
				}
				if err := check("all_gather", dst, all); err != nil {
					return err
				}
				part := vram.Zeros(vram.Shape{elems}, vram.Float64)
				if err := c.ReduceScatter(part, dst, Max); err != nil {
					return err
				}
				if err := check("reduce_scatter", part, values(r, elems)); err != nil {
					return err
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				if size > 1 {
					next, prev := (r+1)%size, (r+size-1)%size
					out := vram.FromSlice([]int64{int64(r), 7}, vram.Shape{2}, vram.Int64)
					in := vram.Zeros(vram.Shape{2}, vram.Int64)
					if r%2 == 0 {
						if err := c.Send(out, next); err != nil {
							return err
						}
						if err := c.Recv(in, prev); err != nil {
							return err
						}
					} else {
						if err := c.Recv(in, prev); err != nil {
							return err
						}
						if err := c.Send(out, next); err != nil {
							return err
						}
					}
					if err := check("recv", in, []float64{float64(prev), 7}); err != nil {
						return err
					}
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

func rounded(dt vram.DType, v float64) float64 {
	x := vram.FromSlice([]float64{v}, vram.Shape{1}, vram.Float64)
	defer x.Release()
	y := x.Cast(dt)
	defer y.Release()
	return y.Float64s()[0]
}

func roundAll(dt vram.DType, vs []float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = rounded(dt, v)
	}
	return out
}

func TestTCPSimDevices(t *testing.T) {
	comms := tcpGroup(t, 2, 10*time.Second, vram.Sim(0), vram.Sim(1))
	errs := onRanks(comms, func(r int, c Communicator) error {
		dev := c.Device()
		s, err := vram.NewStream(dev)
		if err != nil {
			return err
		}
		defer s.Release()
		x := vram.Full(vram.Shape{4}, float64(r+1), dev)
		var cerr error
		// On a side stream, sim runs queued work only when needed: the
		// result must still be there once the default stream waits.
		vram.WithStream(s, func() { cerr = c.AllReduce(x, Sum) })
		if cerr != nil {
			return cerr
		}
		vram.DefaultStream(dev).WaitStream(s)
		if got := x.Float64s(); !slices.Equal(got, []float64{3, 3, 3, 3}) {
			return fmt.Errorf("got %v", got)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// rankErr checks that err is a *RankError naming rank and matching kind.
func rankErr(t *testing.T, who int, err error, rank int, kind error) {
	t.Helper()
	var re *RankError
	switch {
	case !errors.As(err, &re):
		t.Errorf("rank %d: %v, want a *RankError", who, err)
	case re.Rank != rank:
		t.Errorf("rank %d: error names rank %d, want %d: %v", who, re.Rank, rank, err)
	case !errors.Is(err, kind):
		t.Errorf("rank %d: error does not match %v: %v", who, kind, err)
	case !errors.Is(err, ErrAborted):
		t.Errorf("rank %d: error does not match ErrAborted: %v", who, err)
	}
}

func TestTCPMismatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(r int, c Communicator) error
		want string
	}{
		{"elements", func(r int, c Communicator) error {
			return c.AllReduce(vram.Zeros(vram.Shape{3 + r}), Sum)
		}, "rank 1 called all_reduce #1 of 4 float32 elements (sum) while rank 0 called all_reduce #1 of 3 float32 elements (sum)"},
		{"dtype", func(r int, c Communicator) error {
			return c.AllReduce(vram.Zeros(vram.Shape{3}, []vram.DType{vram.Float32, vram.Float64}[r]), Sum)
		}, "float64"},
		{"reduction", func(r int, c Communicator) error {
			return c.AllReduce(vram.Zeros(vram.Shape{3}), []ReduceOp{Sum, Max}[r])
		}, "(max)"},
		{"op", func(r int, c Communicator) error {
			if r == 0 {
				return c.Barrier()
			}
			return c.Broadcast(vram.Zeros(vram.Shape{3}), 0)
		}, "rank 1 called broadcast"},
		{"root", func(r int, c Communicator) error {
			return c.Broadcast(vram.Zeros(vram.Shape{3}), r)
		}, "with root 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms := tcpGroup(t, 2, 5*time.Second)
			errs := onRanks(comms, tc.call)
			for r, err := range errs {
				rankErr(t, r, err, 1, ErrMismatch)
				if err != nil && !strings.Contains(err.Error(), tc.want) {
					t.Errorf("rank %d: %v\nwant it to contain %q", r, err, tc.want)
				}
			}
			// The communicator stays aborted.
			for r, err := range onRanks(comms, func(_ int, c Communicator) error { return c.Barrier() }) {
				rankErr(t, r, err, 1, ErrMismatch)
			}
		})
	}
}

func TestTCPTimeoutNamesMissingRank(t *testing.T) {
	const timeout = 500 * time.Millisecond
	for _, missing := range []int{0, 2} {
		t.Run(fmt.Sprintf("rank %d missing", missing), func(t *testing.T) {
			comms := tcpGroup(t, 3, timeout)
			start := time.Now()
			errs := onRanks(comms, func(r int, c Communicator) error {
				if r == missing {
					time.Sleep(3 * timeout)
					return nil
				}
				return c.AllReduce(vram.Ones(vram.Shape{2}), Sum)
			})
			el := time.Since(start)
			for r, err := range errs {
				if r == missing {
					continue
				}
				rankErr(t, r, err, missing, ErrTimeout)
			}
			if el > 10*timeout {
				t.Errorf("took %v for a timeout of %v", el, timeout)
			}
			// The missing rank learns of it too.
			err := comms[missing].Barrier()
			if missing == 2 {
				rankErr(t, missing, err, missing, ErrTimeout)
			} else if err == nil {
				t.Error("rank 0 can still run collectives after the others gave up on it")
			}
		})
	}
}

func TestTCPAbortAndClose(t *testing.T) {
	t.Run("abort", func(t *testing.T) {
		comms := tcpGroup(t, 3, 20*time.Second)
		start := time.Now()
		cause := errors.New("out of data")
		errs := onRanks(comms, func(r int, c Communicator) error {
			if r == 1 {
				time.Sleep(50 * time.Millisecond)
				c.Abort(cause)
				return nil
			}
			return c.AllReduce(vram.Ones(vram.Shape{2}), Sum)
		})
		for _, r := range []int{0, 2} {
			rankErr(t, r, errs[r], 1, ErrAborted)
			if errs[r] != nil && !strings.Contains(errs[r].Error(), "out of data") {
				t.Errorf("rank %d: %v does not say why", r, errs[r])
			}
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("took %v", el)
		}
		if err := comms[1].Barrier(); !errors.Is(err, cause) || !errors.Is(err, ErrAborted) {
			t.Errorf("after Abort: %v", err)
		}
	})
	t.Run("abort from another goroutine", func(t *testing.T) {
		comms := tcpGroup(t, 2, 20*time.Second)
		go func() {
			time.Sleep(50 * time.Millisecond)
			comms[0].Abort(errors.New("stop"))
		}()
		start := time.Now()
		err := comms[0].Recv(vram.Zeros(vram.Shape{2}), 1) // rank 1 never sends
		rankErr(t, 0, err, 0, ErrAborted)
		if time.Since(start) > 5*time.Second {
			t.Errorf("Abort took %v to end a Recv", time.Since(start))
		}
	})
	t.Run("closed peer", func(t *testing.T) {
		comms := tcpGroup(t, 2, 20*time.Second)
		start := time.Now()
		errs := onRanks(comms, func(r int, c Communicator) error {
			if r == 1 {
				return c.Close()
			}
			return c.AllReduce(vram.Ones(vram.Shape{2}), Sum)
		})
		if errs[1] != nil {
			t.Errorf("Close: %v", errs[1])
		}
		rankErr(t, 0, errs[0], 1, ErrAborted)
		if errs[0] != nil && !strings.Contains(errs[0].Error(), "closed its communicator") {
			t.Errorf("rank 0: %v", errs[0])
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("took %v", time.Since(start))
		}
		if err := comms[1].Barrier(); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("a call after Close: %v", err)
		}
	})
}

func TestTCPInitMissingRank(t *testing.T) {
	_, store := newTestStore(t, 5*time.Second)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	start := time.Now()
	for r := range 2 {
		wg.Go(func() {
			c, err := NewTCPRank(context.Background(), store, r, 3, vram.CPU, TCPOptions{InitTimeout: 300 * time.Millisecond})
			if err == nil {
				c.Close()
			}
			errs[r] = err
		})
	}
	wg.Wait()
	for r, err := range errs {
		var re *RankError
		if !errors.As(err, &re) || re.Rank != 2 || re.Op != "init" || !errors.Is(err, ErrTimeout) {
			t.Errorf("rank %d: %v, want an init error naming rank 2", r, err)
		}
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
}

func TestTCPBadArguments(t *testing.T) {
	comms := tcpGroup(t, 2, 5*time.Second)
	c := comms[0]
	x := vram.Zeros(vram.Shape{2, 3})
	released := vram.Zeros(vram.Shape{2})
	released.Release()
	for _, tc := range []struct {
		name string
		call func() error
		kind error
	}{
		{"nil tensor", func() error { return c.AllReduce(nil, Sum) }, vram.ErrArgument},
		{"released", func() error { return c.AllReduce(released, Sum) }, vram.ErrReleased},
		{"wrong device", func() error { return c.AllReduce(vram.Zeros(vram.Shape{2}, vram.Sim(0)), Sum) }, vram.ErrDevice},
		{"not contiguous", func() error { return c.AllReduce(x.T(), Sum) }, vram.ErrArgument},
		{"root", func() error { return c.Broadcast(x, 2) }, vram.ErrArgument},
		{"negative root", func() error { return c.Reduce(x, Sum, -1) }, vram.ErrArgument},
		{"peer", func() error { return c.Send(x, 5) }, vram.ErrArgument},
		{"self", func() error { return c.Recv(x, 0) }, vram.ErrArgument},
		{"reduction", func() error { return c.AllReduce(x, ReduceOp(9)) }, vram.ErrArgument},
		{"bool avg", func() error { return c.AllReduce(vram.Zeros(vram.Shape{2}, vram.Bool), Avg) }, vram.ErrDType},
		{"gather sizes", func() error { return c.AllGather(vram.Zeros(vram.Shape{5}), vram.Zeros(vram.Shape{2})) }, vram.ErrShape},
		{"scatter dtypes", func() error {
			return c.ReduceScatter(vram.Zeros(vram.Shape{2}, vram.Float64), vram.Zeros(vram.Shape{4}), Sum)
		}, vram.ErrDType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.kind) {
				t.Errorf("error %v, want one matching %v", err, tc.kind)
			}
		})
	}
	// Bad arguments are found before anything is sent: the group still works.
	for r, err := range onRanks(comms, func(_ int, c Communicator) error { return c.AllReduce(vram.Ones(vram.Shape{2}), Sum) }) {
		if err != nil {
			t.Errorf("rank %d after bad arguments: %v", r, err)
		}
	}
}

// TestTCPAbortShorterThanAnnounced sends abort frames whose text is
// shorter than their header announces (by up to 2^63 bytes): the receiver
// fails at once with what arrived, naming the rank the frame names, rather
// than wait for the rest.
func TestTCPAbortShorterThanAnnounced(t *testing.T) {
	for _, tc := range []struct {
		name     string
		announce uint64
		culprit  int32
		want     int // the rank the error names
	}{
		{"a few bytes more", 100, 1, 1},
		{"2^63 bytes", 1 << 63, 1, 1},
		{"culprit out of range", 1 << 40, -7, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms := tcpGroup(t, 2, 5*time.Second)
			c1 := comms[1].(*tcpComm)
			h := header{kind: frameAbort, op: causeTimeout, root: tc.culprit, bytes: tc.announce}
			c1.peers[0].conn.Write(append(h.encode(), "ran out"...))
			start := time.Now()
			err := comms[0].AllReduce(vram.Zeros(vram.Shape{2}), Sum)
			var re *RankError
			if !errors.As(err, &re) || re.Rank != tc.want || !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "ran out") {
				t.Errorf("error %v, want one naming rank %d with the text sent", err, tc.want)
			}
			if el := time.Since(start); el > time.Second {
				t.Errorf("took %v", el)
			}
		})
	}
}

// TestTCPFrameLimits sends a frame whose payload is longer than the call
// expects: the receiver refuses it without reading it.
func TestTCPFrameLimits(t *testing.T) {
	comms := tcpGroup(t, 2, 2*time.Second)
	// A peer that announces more payload than the call expects aborts the
	// group with a mismatch instead of making the receiver allocate it.
	c1 := comms[1].(*tcpComm)
	h := header{kind: frameData, op: collSend, dtype: vram.Float32, root: 1, seq: 1, elems: 2}
	if err := c1.send("send", c1.peers[0], h, make([]byte, 4096), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	err := comms[0].Recv(vram.Zeros(vram.Shape{2}), 1)
	rankErr(t, 0, err, 1, ErrMismatch)
}

// TestTCPHelloRefusals says hello to a rank that waits for the group to
// form as ranks it must refuse: the refused side learns why (another world
// size, another group, a rank it does not wait for, a second process of
// one rank) rather than see the connection close.
func TestTCPHelloRefusals(t *testing.T) {
	_, store := newTestStore(t, 3*time.Second)
	ctx := context.Background()
	type result struct {
		c   Communicator
		err error
	}
	res0 := make(chan result, 1)
	go func() {
		c, err := NewTCPRank(ctx, store, 0, 3, vram.CPU, TCPOptions{Timeout: 3 * time.Second})
		res0 <- result{c, err}
	}()
	addr, err := store.Get(ctx, "tcp/addr/0")
	if err != nil {
		t.Fatal(err)
	}
	// Rank 0 accepts once every rank has published an address.
	for _, k := range []string{"tcp/addr/1", "tcp/addr/2"} {
		if err := store.Set(ctx, k, []byte("127.0.0.1:1")); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := store.Get(ctx, "tcp/token")
	if err != nil {
		t.Fatal(err)
	}
	token := [16]byte(tok)
	other := token
	other[0]++
	var first net.Conn
	for _, tc := range []struct {
		name       string
		rank, size int
		token      [16]byte
		want       string // "" for a hello accepted
		kind       error
	}{
		{"another world size", 1, 2, token, "world size of 3", ErrMismatch},
		{"another group", 1, 3, other, "another group", ErrAborted},
		{"a rank not above it", 0, 3, token, "rank 0", ErrAborted},
		{"rank 1", 1, 3, token, "", nil},
		{"a second rank 1", 1, 3, token, "two processes were started with RANK=1", vram.ErrArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &tcpComm{rank: tc.rank, size: tc.size}
			conn, err := c.dialHello(ctx, string(addr), 0, tc.token)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				first = conn
				return
			}
			if err == nil {
				conn.Close()
				t.Fatal("hello accepted")
			}
			if !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.kind) {
				t.Errorf("error %v, want one containing %q that wraps %v", err, tc.want, tc.kind)
			}
		})
	}
	// Rank 2 completes the group.
	second, err := (&tcpComm{rank: 2, size: 3}).dialHello(ctx, string(addr), 0, token)
	if err != nil {
		t.Fatal(err)
	}
	r0 := <-res0
	if r0.err != nil {
		t.Fatal(r0.err)
	}
	for _, c := range []net.Conn{first, second} {
		if c != nil {
			c.Close()
		}
	}
	r0.c.Close()
}

// TestTCPHelloOtherVersion says hello as another version would: the rank
// answers with its own magic, so that the other side can say which
// version it met, and the group still forms.
func TestTCPHelloOtherVersion(t *testing.T) {
	_, store := newTestStore(t, 3*time.Second)
	ctx := context.Background()
	type result struct {
		c   Communicator
		err error
	}
	res0 := make(chan result, 1)
	go func() {
		c, err := NewTCPRank(ctx, store, 0, 2, vram.CPU, TCPOptions{Timeout: 3 * time.Second})
		res0 <- result{c, err}
	}()
	addr, err := store.Get(ctx, "tcp/addr/0")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Set(ctx, "tcp/addr/1", []byte("127.0.0.1:1")); err != nil {
		t.Fatal(err)
	}
	// A peer of another version hears this one's magic.
	conn, err := net.Dial("tcp", string(addr))
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("VRAMTCP0" + strings.Repeat("x", helloLen-8)))
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	ack := make([]byte, ackLen)
	if _, err := io.ReadFull(conn, ack); err != nil || string(ack[:8]) != tcpMagic {
		t.Errorf("another version's hello was answered %q, %v", ack, err)
	}
	conn.Close()
	c1, err := NewTCPRank(ctx, store, 1, 2, vram.CPU, TCPOptions{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r0 := <-res0
	if r0.err != nil {
		t.Fatal(r0.err)
	}
	for r, err := range onRanks([]Communicator{r0.c, c1}, func(_ int, c Communicator) error {
		defer c.Close()
		return c.Barrier()
	}) {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
