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
