package parallel

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestErrorsSayParallelOnce checks that an error of the package that
// wraps others of the package reads "parallel: " once, at its start
// ("parallel: DDP: ...: abort: rank 2: communicator aborted ...", not
// "parallel: DDP: ...: parallel: abort: rank 2: parallel: communicator
// aborted ..."), while errors.Is and errors.As still find the sentinel
// and the *RankError inside.
func TestErrorsSayParallelOnce(t *testing.T) {
	ddpAbort := func(comms []Communicator) error {
		errs := onRanks(comms, func(r int, c Communicator) error {
			m := testMLP(1, c.Device())
			defer nn.Release(m)
			ddp, err := NewDistributedDataParallel(m, c, DDPOptions{BucketCapBytes: 64})
			if err != nil {
				return err
			}
			defer ddp.Close()
			for step := range 4 {
				if r == 1 && step == 1 {
					c.Abort(errors.New("rank 1 gives up"))
					return nil
				}
				var berr error
				vram.Tidy(func() { berr = ddp.Backward(ddp.Forward(vram.Ones(vram.Shape{2, ddpIn}, c.Device())).Sum()) })
				if berr != nil {
					return berr
				}
				ddp.ZeroGrad()
			}
			return nil
		})
		return errs[0]
	}
	for _, tc := range []struct {
		name string
		err  func() error
	}{
		{"local abort", func() error {
			comms, _ := NewLocalGroup(simDevs(2))
			comms[1].Abort(errors.New("out of memory"))
			x := vram.Ones(vram.Shape{2}, vram.Sim(0))
			defer x.Release()
			return comms[0].AllReduce(x, Sum)
		}},
		{"local DDP abort", func() error {
			comms, err := NewLocalGroup(simDevs(2))
			if err != nil {
				return err
			}
			return ddpAbort(comms)
		}},
		{"TCP DDP abort", func() error { return ddpAbort(tcpGroup(t, 2, 20*time.Second)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if err == nil {
				t.Fatal("no error")
			}
			var re *RankError
			if !errors.Is(err, ErrAborted) || !errors.As(err, &re) {
				t.Errorf("%v: want an error wrapping ErrAborted and a *RankError", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "parallel: ") || strings.Count(msg, "parallel:") != 1 {
				t.Errorf("%q: want \"parallel: \" once, at the start", msg)
			}
		})
	}
}

// TestErrorf checks errorf's messages and what it wraps.
func TestErrorf(t *testing.T) {
	inner := errorf("parallel: store: %w", ErrTimeout)
	var nilRank *RankError
	for _, tc := range []struct {
		name string
		err  error
		msg  string
		is   []error
	}{
		{"sentinel first", errorf("%w: closed", ErrAborted), "parallel: communicator aborted: closed", []error{ErrAborted}},
		{"two wrapped", errorf("%w by rank %d: %w", ErrAborted, 1, inner), "parallel: communicator aborted by rank 1: store: timed out", []error{ErrAborted, ErrTimeout}},
		{"prefixed format", errorf("parallel: DDP: %w", inner), "parallel: DDP: store: timed out", []error{ErrTimeout}},
		{"other errors as they are", errorf("parallel: launch: %w", errors.New("exec: not found")), "parallel: launch: exec: not found", nil},
		{"a nil pointer as an error", errorf("parallel: x: %v", error(nilRank)), "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.msg != "" && tc.err.Error() != tc.msg {
				t.Errorf("message %q, want %q", tc.err.Error(), tc.msg)
			}
			for _, want := range tc.is {
				if !errors.Is(tc.err, want) {
					t.Errorf("%v does not wrap %v", tc.err, want)
				}
			}
		})
	}
	if got := errors.Unwrap(errorf("parallel: DDP: %w", inner)); got != inner {
		t.Errorf("errors.Unwrap gave %v, want the wrapped error itself", got)
	}
}
