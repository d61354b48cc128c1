package parallel

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram"
)

// TestLocalCommunicatorSharedByGoroutines calls a collective of rank 0's
// communicator from a second goroutine while the first waits in one, as
// code that shares one communicator between goroutines does (each must
// have its own): the second call is refused with an error of kind
// vram.ErrArgument, and the first, and the group, go on as if it had not
// been made, rather than the two calls taking one rank's place and the
// group ending with an error that blames a rank that did nothing wrong.
func TestLocalCommunicatorSharedByGoroutines(t *testing.T) {
	devs := []vram.Device{vram.Sim(0), vram.Sim(1)}
	comms, err := NewLocalGroupOptions(devs, LocalOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	g := comms[0].(*localComm).g
	waiting := func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.arrived == 1
	}
	for _, second := range []struct {
		name string
		call func(c Communicator) error
	}{
		{"all_reduce", func(c Communicator) error {
			y := vram.Ones(vram.Shape{3}, c.Device())
			defer y.Release()
			return c.AllReduce(y, Sum)
		}},
		{"barrier", func(c Communicator) error { return c.Barrier() }},
	} {
		t.Run(second.name, func(t *testing.T) {
			x0 := vram.FromSlice([]float32{1, 2, 3}, vram.Shape{3}, devs[0])
			defer x0.Release()
			x1 := vram.FromSlice([]float32{10, 20, 30}, vram.Shape{3}, devs[1])
			defer x1.Release()
			first := make(chan error, 1)
			go func() { first <- comms[0].AllReduce(x0, Sum) }()
			for deadline := time.Now().Add(5 * time.Second); !waiting(); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("rank 0's first call did not reach the meeting")
				}
			}
			start := time.Now()
			err := second.call(comms[0])
			if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), "another goroutine") {
				t.Fatalf("a second call of rank 0 during its all_reduce: %v, want an error of kind ErrArgument", err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("the refused call took %v", took)
			}
			if err := comms[1].AllReduce(x1, Sum); err != nil {
				t.Fatalf("rank 1: %v", err)
			}
			if err := <-first; err != nil {
				t.Fatalf("rank 0's first call: %v", err)
			}
			want := []float64{11, 22, 33}
			for r, x := range []*vram.Tensor{x0, x1} {
				if got := x.Float64s(); !slices.Equal(got, want) {
					t.Errorf("rank %d holds %v, want %v", r, got, want)
				}
			}
		})
	}
	done := make(chan error, 2)
	for _, c := range comms {
		go func() { done <- c.Barrier() }()
	}
	for range comms {
		if err := <-done; err != nil {
			t.Fatalf("the group after the refused calls: %v", err)
		}
	}
}

// TestTCPCommunicatorSharedByGoroutines calls a collective of a TCP rank
// from a second goroutine while the first is in one: the second is
// refused with an error of kind vram.ErrArgument, rather than the two
// sharing the rank's connections (a data race, and frames read by the
// wrong call); the first completes with the other rank, and the group
// goes on.
func TestTCPCommunicatorSharedByGoroutines(t *testing.T) {
	comms := tcpGroup(t, 2, 10*time.Second)
	x0 := vram.FromSlice([]float32{1, 2}, vram.Shape{2})
	defer x0.Release()
	y0 := vram.FromSlice([]float32{5, 6}, vram.Shape{2})
	defer y0.Release()
	x1 := vram.FromSlice([]float32{10, 20}, vram.Shape{2})
	defer x1.Release()
	first := make(chan error, 1)
	go func() { first <- comms[0].AllReduce(x0, Sum) }()
	tc := comms[0].(*tcpComm)
	for deadline := time.Now().Add(5 * time.Second); !tc.busy.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("rank 0's first call did not begin")
		}
	}
	err := comms[0].AllReduce(y0, Sum)
	if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), "another goroutine") {
		t.Fatalf("a second call of rank 0 during its all_reduce: %v, want an error of kind ErrArgument", err)
	}
	one := make(chan error, 1)
	go func() { one <- comms[1].AllReduce(x1, Sum) }()
	if err := <-first; err != nil {
		t.Fatalf("rank 0's first call: %v", err)
	}
	if err := <-one; err != nil {
		t.Fatalf("rank 1: %v", err)
	}
	if got := slices.Concat(x0.Float64s(), y0.Float64s()); !slices.Equal(got, []float64{11, 22, 5, 6}) {
		t.Errorf("rank 0's tensors hold %v, want the sum [11 22] and the refused call's [5 6] untouched", got)
	}
	errs := make(chan error, len(comms))
	for _, c := range comms {
		go func() { errs <- c.Barrier() }()
	}
	for range comms {
		if err := <-errs; err != nil {
			t.Fatalf("the group after the refused call: %v", err)
		}
	}
}
