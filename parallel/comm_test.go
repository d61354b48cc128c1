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
