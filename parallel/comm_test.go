package parallel

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram"
)

// cpuBackends makes a group of two ranks of each communicator that runs
// without a GPU.
var cpuBackends = []struct {
	name string
	make func(t *testing.T, timeout time.Duration) []Communicator
}{
	{"in-process", func(t *testing.T, timeout time.Duration) []Communicator {
		comms, err := NewLocalGroupOptions(simDevs(2), LocalOptions{Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		return comms
	}},
	{"tcp", func(t *testing.T, timeout time.Duration) []Communicator { return tcpGroup(t, 2, timeout) }},
}

// refused calls fn and returns its error, or a description of its panic.
func refused(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panicked: %v", p)
		}
	}()
	return fn()
}

// TestCommunicatorsRefuseBadArguments: every communicator refuses the same
// bad arguments at once, with an error of the same kind and without a
// panic, and stays usable afterwards.
func TestCommunicatorsRefuseBadArguments(t *testing.T) {
	for _, b := range cpuBackends {
		t.Run(b.name, func(t *testing.T) {
			const timeout = 5 * time.Second
			comms := b.make(t, timeout)
			c := comms[0]
			dev := c.Device()
			other := vram.CPU
			if dev == vram.CPU {
				other = vram.Sim(0)
			}
			x := vram.Zeros(vram.Shape{2, 3}, dev)
			defer x.Release()
			released := vram.Zeros(vram.Shape{2}, dev)
			released.Release()
			elsewhere := vram.Zeros(vram.Shape{2}, other)
			defer elsewhere.Release()
			for _, tc := range []struct {
				name string
				call func() error
				kind error
			}{
				{"nil tensor", func() error { return c.AllReduce(nil, Sum) }, vram.ErrArgument},
				{"released", func() error { return c.AllReduce(released, Sum) }, vram.ErrReleased},
				{"wrong device", func() error { return c.AllReduce(elsewhere, Sum) }, vram.ErrDevice},
				{"not contiguous", func() error { return c.AllReduce(x.T(), Sum) }, vram.ErrArgument},
				{"root", func() error { return c.Broadcast(x, 2) }, vram.ErrArgument},
				{"negative root", func() error { return c.Reduce(x, Sum, -1) }, vram.ErrArgument},
				{"reduction", func() error { return c.AllReduce(x, ReduceOp(9)) }, vram.ErrArgument},
				{"bool avg", func() error { return c.AllReduce(vram.Zeros(vram.Shape{2}, dev, vram.Bool), Avg) }, vram.ErrDType},
				{"gather sizes", func() error {
					return c.AllGather(vram.Zeros(vram.Shape{5}, dev), vram.Zeros(vram.Shape{2}, dev))
				}, vram.ErrShape},
				{"gather nil destination", func() error { return c.AllGather(nil, x) }, vram.ErrArgument},
				{"scatter dtypes", func() error {
					return c.ReduceScatter(vram.Zeros(vram.Shape{2}, dev, vram.Float64), vram.Zeros(vram.Shape{4}, dev), Sum)
				}, vram.ErrDType},
				{"send nil", func() error { return c.Send(nil, 1) }, vram.ErrArgument},
				{"send released", func() error { return c.Send(released, 1) }, vram.ErrReleased},
				{"send from another device", func() error { return c.Send(elsewhere, 1) }, vram.ErrDevice},
				{"send to no rank", func() error { return c.Send(x, 5) }, vram.ErrArgument},
				{"recv nil", func() error { return c.Recv(nil, 1) }, vram.ErrArgument},
				{"recv not contiguous", func() error { return c.Recv(x.T(), 1) }, vram.ErrArgument},
				{"recv from no rank", func() error { return c.Recv(x, -1) }, vram.ErrArgument},
				{"send to itself", func() error { return c.Send(x, 0) }, vram.ErrArgument},
				{"recv from itself", func() error { return c.Recv(x, 0) }, vram.ErrArgument},
			} {
				t.Run(tc.name, func(t *testing.T) {
					start := time.Now()
					err := refused(tc.call)
					if !errors.Is(err, tc.kind) {
						t.Fatalf("error %v, want one matching %v", err, tc.kind)
					}
					if d := time.Since(start); d > timeout/2 {
						t.Errorf("refused after %v: it waited for the other rank", d)
					}
					if msg := err.Error(); strings.Contains(msg, "  ") || !strings.HasPrefix(msg, "parallel: ") {
						t.Errorf("message %q", msg)
					}
				})
			}
			for r, err := range onRanks(comms, func(_ int, c Communicator) error {
				y := vram.Ones(vram.Shape{2}, c.Device())
				defer y.Release()
				return c.AllReduce(y, Sum)
			}) {
				if err != nil {
					t.Errorf("rank %d after the refused calls: %v", r, err)
				}
			}
			for r, c := range comms {
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				y := vram.Ones(vram.Shape{2}, c.Device())
				defer y.Release()
				for _, call := range []func() error{
					func() error { return c.AllReduce(y, Sum) },
					func() error { return c.Send(y, 1-r) },
					func() error { return c.Recv(y, 1-r) },
					c.Barrier,
				} {
					if err := refused(call); err == nil || strings.Contains(err.Error(), "panicked") {
						t.Errorf("rank %d: a call on a closed communicator returned %v", r, err)
					}
				}
			}
		})
	}
}

// TestCommunicatorsEndWithAPeer: a rank that closes its communicator or
// aborts the group ends the other ranks' pending and later calls at once,
// on every communicator, with a *RankError naming it; what it sent before
// closing is still received.
func TestCommunicatorsEndWithAPeer(t *testing.T) {
	const timeout = 20 * time.Second
	for _, b := range cpuBackends {
		for _, tc := range []struct {
			name  string
			rank1 func(c Communicator) error
			rank0 func(c Communicator) error
			fails bool // whether rank 0's call fails, naming rank 1
		}{
			{"closed peer, all-reduce", func(c Communicator) error { return c.Close() },
				func(c Communicator) error { return c.AllReduce(vram.Ones(vram.Shape{2}, c.Device()), Sum) }, true},
			{"closed peer, barrier after a while", func(c Communicator) error { return c.Close() },
				func(c Communicator) error { time.Sleep(50 * time.Millisecond); return c.Barrier() }, true},
			{"closed peer, recv", func(c Communicator) error { return c.Close() },
				func(c Communicator) error { return c.Recv(vram.Ones(vram.Shape{2}, c.Device()), 1) }, true},
			{"aborted recv", func(c Communicator) error {
				time.Sleep(50 * time.Millisecond)
				c.Abort(errors.New("stop"))
				return nil
			}, func(c Communicator) error { return c.Recv(vram.Ones(vram.Shape{2}, c.Device()), 1) }, true},
			{"sent, then closed", func(c Communicator) error {
				if err := c.Send(vram.Full(vram.Shape{2}, 3, c.Device()), 0); err != nil {
					return err
				}
				return c.Close()
			}, func(c Communicator) error {
				time.Sleep(50 * time.Millisecond)
				x := vram.Zeros(vram.Shape{2}, c.Device())
				defer x.Release()
				if err := c.Recv(x, 1); err != nil {
					return err
				}
				if got := x.Float64s(); got[0] != 3 || got[1] != 3 {
					return fmt.Errorf("received %v, want [3 3]", got)
				}
				return nil
			}, false},
		} {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				comms := b.make(t, timeout)
				defer comms[0].Close()
				start := time.Now()
				errs := onRanks(comms, func(r int, c Communicator) error {
					if r == 1 {
						return tc.rank1(c)
					}
					return tc.rank0(c)
				})
				if errs[1] != nil {
					t.Errorf("rank 1: %v", errs[1])
				}
				var re *RankError
				switch {
				case !tc.fails && errs[0] != nil:
					t.Errorf("rank 0: %v", errs[0])
				case tc.fails && (!errors.As(errs[0], &re) || re.Rank != 1 || !errors.Is(errs[0], ErrAborted)):
					t.Errorf("rank 0: %v, want a *RankError naming rank 1 that matches ErrAborted", errs[0])
				}
				if d := time.Since(start); d > timeout/4 {
					t.Errorf("took %v", d)
				}
			})
		}
	}
}

// TestCommunicatorsRecvMismatch: a Recv that does not match what the peer
// sent fails with ErrMismatch naming the peer, and ends the communicator
// on both ranks, on every communicator.
func TestCommunicatorsRecvMismatch(t *testing.T) {
	const timeout = 5 * time.Second
	for _, b := range cpuBackends {
		for _, tc := range []struct {
			name string
			recv func(dev vram.Device) *vram.Tensor
		}{
			{"size", func(dev vram.Device) *vram.Tensor { return vram.Zeros(vram.Shape{2}, dev) }},
			{"dtype", func(dev vram.Device) *vram.Tensor { return vram.Zeros(vram.Shape{3}, vram.Float64, dev) }},
		} {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				comms := b.make(t, timeout)
				defer func() {
					for _, c := range comms {
						c.Close()
					}
				}()
				start := time.Now()
				var recvErr error
				errs := onRanks(comms, func(r int, c Communicator) error {
					if r == 1 {
						if err := c.Send(vram.Ones(vram.Shape{3}, c.Device()), 0); err != nil {
							return err
						}
					} else {
						recvErr = c.Recv(tc.recv(c.Device()), 1)
					}
					return c.Barrier()
				})
				var re *RankError
				if !errors.As(recvErr, &re) || re.Rank != 1 || !errors.Is(recvErr, ErrMismatch) {
					t.Errorf("rank 0's Recv: %v, want a *RankError naming rank 1 that matches ErrMismatch", recvErr)
				}
				for r, err := range errs {
					if !errors.Is(err, ErrMismatch) {
						t.Errorf("rank %d's Barrier after the mismatch: %v, want ErrMismatch", r, err)
					}
				}
				if d := time.Since(start); d > timeout/2 {
					t.Errorf("took %v", d)
				}
			})
		}
	}
}

// TestCommunicatorsRecvTimeoutEndsGroup: a Recv that times out ends the
// communicator, as a collective's timeout does, on every communicator: a
// message sent late is not taken by the next Recv, which would leave
// every later message one behind.
func TestCommunicatorsRecvTimeoutEndsGroup(t *testing.T) {
	const timeout = 60 * time.Millisecond
	for _, b := range cpuBackends {
		for _, tc := range []struct {
			name string
			next func(c Communicator) error // rank 1's call after its Recv timed out
		}{
			{"then recv", func(c Communicator) error { return c.Recv(vram.Zeros(vram.Shape{2}, c.Device()), 0) }},
			{"then barrier", func(c Communicator) error { return c.Barrier() }},
		} {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				comms := b.make(t, timeout)
				defer func() {
					for _, c := range comms {
						c.Close()
					}
				}()
				var first error
				errs := onRanks(comms, func(r int, c Communicator) error {
					if r == 0 {
						// Sends after rank 1 gave up, long enough after
						// for its word to arrive on a loaded machine.
						time.Sleep(8 * timeout)
						return c.Send(vram.Ones(vram.Shape{2}, c.Device()), 1)
					}
					first = c.Recv(vram.Zeros(vram.Shape{2}, c.Device()), 0)
					time.Sleep(10 * timeout) // the late message has arrived, if it could
					return tc.next(c)
				})
				var re *RankError
				if !errors.As(first, &re) || re.Rank != 0 || !errors.Is(first, ErrTimeout) {
					t.Errorf("rank 1's Recv: %v, want a *RankError naming rank 0 that matches ErrTimeout", first)
				}
				for r, err := range errs {
					if !errors.Is(err, ErrTimeout) {
						t.Errorf("rank %d's call after the timeout: %v, want ErrTimeout", r, err)
					}
				}
			})
		}
	}
}
