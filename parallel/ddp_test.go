package parallel

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

const (
	ddpBatch = 12 // rows of the whole batch
	ddpIn    = 4
	ddpOut   = 2
	ddpLR    = 0.1
)

// testMLP is a small MLP whose initial values depend on seed.
func testMLP(seed uint64, dev vram.Device) *nn.Sequential {
	g := vram.NewGenerator(seed)
	return nn.NewSequential(
		nn.NewLinear(ddpIn, 8, dev, vram.WithGenerator(g)), nn.NewTanh(),
		nn.NewLinear(8, 8, dev, vram.WithGenerator(g)), nn.NewTanh(),
		nn.NewLinear(8, ddpOut, dev, vram.WithGenerator(g)),
	)
}

// ddpData returns the whole batch, on the CPU.
func ddpData() (x, y []float32) {
	g := vram.NewGenerator(42)
	xt := vram.Randn(vram.Shape{ddpBatch, ddpIn}, vram.WithGenerator(g))
	yt := vram.Randn(vram.Shape{ddpBatch, ddpOut}, vram.WithGenerator(g))
	defer xt.Release()
	defer yt.Release()
	return xt.Float32s(), yt.Float32s()
}

// rows returns rows [lo, hi) of data with cols columns as a tensor on dev.
func rows(data []float32, cols, lo, hi int, dev vram.Device) *vram.Tensor {
	return vram.FromSlice(data[lo*cols:hi*cols], vram.Shape{hi - lo, cols}, dev)
}

// params returns the values of m's parameters.
func params(m nn.Module) [][]float64 {
	var out [][]float64
	for _, p := range m.Parameters() {
		out = append(out, p.Float64s())
	}
	return out
}

// reference trains rank 0's model on the whole batch on the CPU.
func reference(t *testing.T, steps int) [][]float64 {
	m := testMLP(1, vram.CPU)
	defer nn.Release(m)
	opt, err := optim.NewSGD(m.Parameters(), optim.SGDConfig{LR: ddpLR})
	if err != nil {
		t.Fatal(err)
	}
	xs, ys := ddpData()
	for range steps {
		vram.Tidy(func() {
			loss := nn.MSELoss(m.Forward(rows(xs, ddpIn, 0, ddpBatch, vram.CPU)), rows(ys, ddpOut, 0, ddpBatch, vram.CPU))
			loss.Backward()
			opt.Step()
			opt.ZeroGrad()
		})
	}
	return params(m)
}

// closeTo reports the first element of got that differs from want by more
// than float32 arithmetic explains.
func closeTo(got, want [][]float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d parameters, want %d", len(got), len(want))
	}
	for i := range want {
		for j := range want[i] {
			if d := math.Abs(got[i][j] - want[i][j]); !(d <= 2e-5+2e-5*math.Abs(want[i][j])) {
				return fmt.Errorf("parameter %d element %d: %v, want %v", i, j, got[i][j], want[i][j])
			}
		}
	}
	return nil
}

type ddpCase struct {
	name      string
	ranks     int
	devs      []vram.Device
	bucketCap int64
	optZero   bool // zero the gradients with the optimizer (releasing them) rather than the DDP
	micro     int  // micro-batches per step, all but the last under NoSync
	accum     bool // accumulate the micro-batches with nn.Accumulate
	side      bool // compute on a stream other than the default
}

func TestDDPMatchesOneProcess(t *testing.T) {
	const steps = 4
	want := reference(t, steps)
	for _, tc := range []ddpCase{
		{name: "2 sim ranks, one bucket", ranks: 2, devs: []vram.Device{vram.Sim(0), vram.Sim(1)}},
		{name: "2 sim ranks, small buckets", ranks: 2, devs: []vram.Device{vram.Sim(0), vram.Sim(1)}, bucketCap: 64},
		{name: "3 CPU ranks, small buckets, optimizer's ZeroGrad", ranks: 3, bucketCap: 100, optZero: true},
		{name: "1 rank", ranks: 1},
		{name: "2 sim ranks, NoSync accumulation", ranks: 2, devs: []vram.Device{vram.Sim(0), vram.Sim(1)}, bucketCap: 64, micro: 3},
		{name: "3 CPU ranks, NoSync accumulation", ranks: 3, micro: 2, optZero: true},
		{name: "2 sim ranks, nn.Accumulate", ranks: 2, devs: []vram.Device{vram.Sim(0), vram.Sim(1)}, bucketCap: 64, micro: 3, accum: true},
		{name: "3 CPU ranks, nn.Accumulate", ranks: 3, micro: 2, optZero: true, accum: true},
		{name: "2 sim ranks, compute on a side stream", ranks: 2, devs: []vram.Device{vram.Sim(0), vram.Sim(1)}, bucketCap: 64, side: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms := tcpGroup(t, tc.ranks, 20*time.Second, tc.devs...)
			got := make([][][]float64, tc.ranks)
			errs := onRanks(comms, func(r int, c Communicator) error {
				var err error
				got[r], err = trainDDP(c, tc, steps)
				return err
			})
			for r := range tc.ranks {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				if err := closeTo(got[r], want); err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// trainDDP trains on rank c's share of the batch (and, with micro-batches,
// its share in parts) and returns the parameters.
func trainDDP(c Communicator, tc ddpCase, steps int) ([][]float64, error) {
	dev := c.Device()
	m := testMLP(uint64(c.Rank())+1, dev) // each rank starts elsewhere: the broadcast must fix it
	defer nn.Release(m)
	ddp, err := NewDistributedDataParallel(m, c, DDPOptions{BucketCapBytes: tc.bucketCap})
	if err != nil {
		return nil, err
	}
	defer ddp.Close()
	opt, err := optim.NewSGD(ddp.Parameters(), optim.SGDConfig{LR: ddpLR})
	if err != nil {
		return nil, err
	}
	xs, ys := ddpData()
	share := ddpBatch / c.Size()
	micro := max(tc.micro, 1)
	part := share / micro
	compute := vram.DefaultStream(dev)
	if tc.side {
		if compute, err = vram.NewStream(dev); err != nil {
			return nil, err
		}
		defer compute.Release()
	}
	for range steps {
		var stepErr error
		vram.WithStream(compute, func() {
			vram.Tidy(func() {
				backward := func(i int) error {
					lo := c.Rank()*share + i*part
					loss := nn.MSELoss(ddp.Forward(rows(xs, ddpIn, lo, lo+part, dev)), rows(ys, ddpOut, lo, lo+part, dev))
					if micro > 1 {
						loss = loss.MulScalar(1 / float64(micro))
					}
					return ddp.Backward(loss)
				}
				if tc.accum {
					_, stepErr = nn.Accumulate(micro, ddp, func(i int) *vram.Tensor {
						lo := c.Rank()*share + i*part
						return nn.MSELoss(ddp.Forward(rows(xs, ddpIn, lo, lo+part, dev)), rows(ys, ddpOut, lo, lo+part, dev))
					})
				} else {
					ddp.NoSync(func() {
						for i := 0; i < micro-1 && stepErr == nil; i++ {
							stepErr = backward(i)
						}
					})
					if stepErr == nil {
						stepErr = backward(micro - 1)
					}
				}
				if stepErr != nil {
					return
				}
				opt.Step()
				if tc.optZero {
					opt.ZeroGrad()
				} else {
					ddp.ZeroGrad()
				}
			})
		})
		if stepErr != nil {
			return nil, stepErr
		}
	}
	vram.DefaultStream(dev).WaitStream(compute)
	return params(m), nil
}

func TestDDPGradientsAreBucketViews(t *testing.T) {
	comms := tcpGroup(t, 1, 5*time.Second)
	m := testMLP(1, vram.CPU)
	defer nn.Release(m)
	ddp, err := NewDistributedDataParallel(m, comms[0], DDPOptions{BucketCapBytes: 40 * 4})
	if err != nil {
		t.Fatal(err)
	}
	defer ddp.Close()
	// Reverse order, up to 40 elements a bucket: the last layer's bias and
	// weight and the middle layer's bias (2+16+8), the middle layer's
	// weight (64, over the cap: alone), the first layer's (8+32).
	var names [][]string
	for _, b := range ddp.Buckets() {
		names = append(names, b.Params)
		if b.Bytes > 40*4 && len(b.Params) > 1 {
			t.Errorf("bucket %v of %d bytes is over the cap", b.Params, b.Bytes)
		}
	}
	want := "[[4.bias 4.weight 2.bias] [2.weight] [0.bias 0.weight]]"
	if fmt.Sprint(names) != want {
		t.Errorf("buckets %v, want %s", names, want)
	}
	step := func() {
		vram.Tidy(func() {
			x := vram.Ones(vram.Shape{3, ddpIn})
			if err := ddp.Backward(ddp.Forward(x).Sum()); err != nil {
				t.Fatal(err)
			}
		})
	}
	step()
	ps := m.NamedParameters()
	byName := map[string]*vram.Tensor{}
	for _, p := range ps {
		byName[p.Name] = p.Tensor
		if p.Tensor.Grad() == nil {
			t.Fatalf("%s has no gradient", p.Name)
		}
	}
	if !byName["4.bias"].Grad().SharesStorage(byName["2.bias"].Grad()) {
		t.Error("the gradients of one bucket do not share its storage")
	}
	if byName["0.bias"].Grad().SharesStorage(byName["2.weight"].Grad()) {
		t.Error("the gradients of two buckets share storage")
	}
	g := byName["2.weight"].Grad()
	before := g.Float64s()
	step() // accumulates in place
	if byName["2.weight"].Grad() != g {
		t.Error("the second backward replaced the gradient tensor")
	}
	for i, v := range g.Float64s() {
		if math.Abs(v-2*before[i]) > 1e-5 {
			t.Fatalf("element %d: %v after two backward passes, want %v", i, v, 2*before[i])
		}
	}
	ddp.ZeroGrad()
	if byName["2.weight"].Grad() != g {
		t.Error("ZeroGrad replaced the gradient tensor")
	}
	for _, v := range g.Float64s() {
		if v != 0 {
			t.Fatal("ZeroGrad left a nonzero gradient")
		}
	}
}

// recordingComm passes collectives on and reports each all-reduce.
type recordingComm struct {
	Communicator
	reduced chan int
}

func (c *recordingComm) AllReduce(t *vram.Tensor, op ReduceOp) error {
	c.reduced <- t.NumElements()
	return c.Communicator.AllReduce(t, op)
}

// TestDDPReducesDuringBackward checks that the last layer's bucket is
// being reduced while backward still works on the earlier layers.
func TestDDPReducesDuringBackward(t *testing.T) {
	comms := tcpGroup(t, 1, 5*time.Second)
	rc := &recordingComm{Communicator: comms[0], reduced: make(chan int, 16)}
	m := testMLP(1, vram.CPU)
	defer nn.Release(m)
	ddp, err := NewDistributedDataParallel(m, rc, DDPOptions{BucketCapBytes: 1}) // a bucket per parameter
	if err != nil {
		t.Fatal(err)
	}
	defer ddp.Close()
	middle := m.NamedParameters()[2].Tensor // 2.weight
	var during []int
	remove := middle.RegisterPostAccumulateGradHook(func(*vram.Tensor) {
		// The buckets of the last layer (4.bias, 4.weight) are complete.
		timeout := time.After(10 * time.Second)
		for len(during) < 2 {
			select {
			case n := <-rc.reduced:
				during = append(during, n)
			case <-timeout:
				return
			}
		}
	})
	defer remove()
	vram.Tidy(func() {
		if err := ddp.Backward(ddp.Forward(vram.Ones(vram.Shape{3, ddpIn})).Sum()); err != nil {
			t.Fatal(err)
		}
	})
	if fmt.Sprint(during) != "[2 16]" {
		t.Errorf("all-reduces seen while backward reached the middle layer: %v, want [2 16] (the last layer's bias and weight)", during)
	}
}

// twoHeads uses its second head only when told to.
type twoHeads struct {
	nn.Base
	a, b *nn.Linear
	useB bool
}

func newTwoHeads(seed uint64, dev vram.Device) *twoHeads {
	g := vram.NewGenerator(seed)
	m := &twoHeads{a: nn.NewLinear(ddpIn, ddpOut, dev, vram.WithGenerator(g)), b: nn.NewLinear(ddpIn, ddpOut, dev, vram.WithGenerator(g))}
	m.RegisterModule("a", m.a)
	m.RegisterModule("b", m.b)
	return m
}

func (m *twoHeads) Forward(x *vram.Tensor) *vram.Tensor {
	if m.useB {
		return m.a.Forward(x).Add(m.b.Forward(x))
	}
	return m.a.Forward(x)
}

func TestDDPUnusedParameters(t *testing.T) {
	t.Run("error names them", func(t *testing.T) {
		comms := tcpGroup(t, 2, 5*time.Second)
		errs := onRanks(comms, func(r int, c Communicator) error {
			m := newTwoHeads(1, vram.CPU)
			defer nn.Release(m)
			ddp, err := NewDistributedDataParallel(m, c, DDPOptions{})
			if err != nil {
				return err
			}
			defer ddp.Close()
			var berr error
			vram.Tidy(func() { berr = ddp.Backward(ddp.Forward(vram.Ones(vram.Shape{2, ddpIn})).Sum()) })
			return berr
		})
		for r, err := range errs {
			if !errors.Is(err, vram.ErrAutograd) || !strings.Contains(err.Error(), "2 parameters received no gradient in this backward: b.weight, b.bias") {
				t.Errorf("rank %d: %v", r, err)
			}
		}
	})
	t.Run("found and reduced as zeros", func(t *testing.T) {
		comms := tcpGroup(t, 2, 5*time.Second)
		got := make([][][]float64, 2)
		errs := onRanks(comms, func(r int, c Communicator) error {
			m := newTwoHeads(uint64(r)+1, vram.CPU)
			m.useB = r == 0 // rank 1 leaves head b out
			defer nn.Release(m)
			ddp, err := NewDistributedDataParallel(m, c, DDPOptions{FindUnusedParameters: true})
			if err != nil {
				return err
			}
			defer ddp.Close()
			opt, _ := optim.NewSGD(ddp.Parameters(), optim.SGDConfig{LR: ddpLR})
			for range 3 {
				var berr error
				vram.Tidy(func() {
					if berr = ddp.Backward(ddp.Forward(vram.Ones(vram.Shape{2, ddpIn})).Sum()); berr == nil {
						opt.Step()
						ddp.ZeroGrad()
					}
				})
				if berr != nil {
					return berr
				}
			}
			got[r] = params(m)
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
		if err := closeTo(got[1], got[0]); err != nil {
			t.Errorf("the ranks disagree: %v", err)
		}
	})
	// A parameter that no rank uses keeps no gradient, as in PyTorch, so
	// that the optimizer skips it: weight decay and momentum leave it as
	// it was.
	for _, optZero := range []bool{false, true} {
		t.Run(fmt.Sprintf("unused on every rank, optimizer's ZeroGrad %v", optZero), func(t *testing.T) {
			for _, b := range cpuBackends {
				comms := b.make(t, 5*time.Second)
				errs := onRanks(comms, func(r int, c Communicator) error {
					m := newTwoHeads(1, c.Device()) // head b is never used
					defer nn.Release(m)
					before := params(m)
					ddp, err := NewDistributedDataParallel(m, c, DDPOptions{FindUnusedParameters: true})
					if err != nil {
						return err
					}
					defer ddp.Close()
					opt, _ := optim.NewSGD(ddp.Parameters(), optim.SGDConfig{LR: ddpLR, Momentum: 0.9, WeightDecay: 0.1})
					for step := range 3 {
						var berr error
						vram.Tidy(func() {
							x := vram.Full(vram.Shape{2, ddpIn}, float64(r+step+1), c.Device())
							if berr = ddp.Backward(ddp.Forward(x).Sum()); berr != nil {
								return
							}
							for _, p := range []*vram.Tensor{m.b.Weight, m.b.Bias} {
								if p.Grad() != nil {
									berr = fmt.Errorf("step %d: head b, used by no rank, has a gradient", step)
									return
								}
							}
							if m.a.Weight.Grad() == nil {
								berr = fmt.Errorf("step %d: head a has no gradient", step)
								return
							}
							opt.Step()
							if optZero {
								opt.ZeroGrad()
							} else {
								ddp.ZeroGrad()
							}
						})
						if berr != nil {
							return berr
						}
					}
					after := params(m)
					if !slices.Equal(after[2], before[2]) || !slices.Equal(after[3], before[3]) {
						return fmt.Errorf("head b, used by no rank, changed: %v to %v", before[2:], after[2:])
					}
					return nil
				})
				for r, err := range errs {
					if err != nil {
						t.Errorf("%s: rank %d: %v", b.name, r, err)
					}
				}
				for _, c := range comms {
					c.Close()
				}
			}
		})
	}
	t.Run("a backward outside the DDP is caught at the next forward", func(t *testing.T) {
		comms := tcpGroup(t, 1, 5*time.Second)
		m := newTwoHeads(1, vram.CPU)
		defer nn.Release(m)
		ddp, err := NewDistributedDataParallel(m, comms[0], DDPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer ddp.Close()
		x := vram.Ones(vram.Shape{2, ddpIn})
		vram.Tidy(func() { ddp.Forward(x).Sum().Backward() })
		err = vram.Catch(func() { ddp.Forward(x) })
		if !errors.Is(err, vram.ErrAutograd) || !strings.Contains(err.Error(), "b.weight, b.bias") {
			t.Errorf("Forward after an unfinished reduction: %v", err)
		}
	})
}

func TestDDPRejects(t *testing.T) {
	comm := func() Communicator { return tcpGroup(t, 1, 5*time.Second)[0] }
	frozen := nn.NewLinear(2, 2)
	frozen.Weight.SetRequiresGrad(false)
	frozen.Bias.SetRequiresGrad(false)
	for _, tc := range []struct {
		name string
		m    nn.Module
		c    Communicator
		kind error
		want string
	}{
		{"nil module", nil, comm(), vram.ErrArgument, "nil module"},
		{"nil pointer module", (*nn.Sequential)(nil), comm(), vram.ErrArgument, "nil module"},
		{"nil communicator", nn.NewLinear(2, 2), nil, vram.ErrArgument, "nil communicator"},
		{"no trainable parameters", frozen, comm(), vram.ErrArgument, "no parameters that require grad"},
		{"wrong device", nn.NewLinear(2, 2, vram.Sim(0)), comm(), vram.ErrDevice, "parameter weight is on sim:0"},
		{"buffer on another device", func() nn.Module {
			m := newBNNet(1, vram.CPU)
			m.bn.RunningVar.Release()
			m.bn.RunningVar = vram.Ones(vram.Shape{2}, vram.Sim(0)) // the buffer is the field
			return m
		}(), comm(), vram.ErrDevice, "buffer bn.running_var is on sim:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDistributedDataParallel(tc.m, tc.c, DDPOptions{})
			if err == nil {
				d.Close()
				t.Fatal("no error")
			}
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %v containing %q", err, tc.kind, tc.want)
			}
		})
	}
	t.Run("models differ", func(t *testing.T) {
		comms := tcpGroup(t, 2, 5*time.Second)
		errs := onRanks(comms, func(r int, c Communicator) error {
			d, err := NewDistributedDataParallel(nn.NewLinear(2, 2+r), c, DDPOptions{})
			if err == nil {
				d.Close()
			}
			return err
		})
		for r, err := range errs {
			if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "rank 1's model differs") {
				t.Errorf("rank %d: %v", r, err)
			}
		}
	})
	// The other ranks wait for a rank that refuses in construction's
	// collectives: its refusal ends their wait at once.
	t.Run("one rank refuses", func(t *testing.T) {
		const timeout = 20 * time.Second
		for _, b := range cpuBackends {
			comms := b.make(t, timeout)
			start := time.Now()
			errs := onRanks(comms, func(r int, c Communicator) error {
				dev := c.Device()
				if r == 1 {
					dev = vram.Sim(3) // not the rank's device
				}
				d, err := NewDistributedDataParallel(nn.NewLinear(2, 2, dev), c, DDPOptions{})
				if err == nil {
					d.Close()
				}
				return err
			})
			if !errors.Is(errs[1], vram.ErrDevice) {
				t.Errorf("%s: rank 1: %v, want ErrDevice", b.name, errs[1])
			}
			rankErr(t, 0, errs[0], 1, ErrAborted)
			if el := time.Since(start); el > timeout/4 {
				t.Errorf("%s: took %v", b.name, el)
			}
			for _, c := range comms {
				c.Close()
			}
		}
	})
	t.Run("stays on its device", func(t *testing.T) {
		d, err := NewDistributedDataParallel(nn.NewLinear(2, 2), comm(), DDPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := vram.Catch(func() { d.To(vram.Sim(0)) }); !errors.Is(err, vram.ErrDevice) {
			t.Errorf("To another device: %v", err)
		}
		d.CPU() // its own device: nothing to do
	})
	t.Run("NoSync of a nil function", func(t *testing.T) {
		d, err := NewDistributedDataParallel(nn.NewLinear(2, 2), comm(), DDPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var ve *vram.Error
		if err := vram.Catch(func() { d.NoSync(nil) }); !errors.As(err, &ve) || !errors.Is(err, vram.ErrArgument) || ve.Op != "no_sync" {
			t.Errorf("NoSync(nil): %v, want a *vram.Error of kind ErrArgument from no_sync", err)
		}
	})
}

// TestDDPRankFails checks that a rank whose communicator dies mid-step
// makes the others' Backward return a *RankError naming it.
func TestDDPRankFails(t *testing.T) {
	comms := tcpGroup(t, 3, 20*time.Second)
	start := time.Now()
	errs := onRanks(comms, func(r int, c Communicator) error {
		m := testMLP(1, vram.CPU)
		defer nn.Release(m)
		ddp, err := NewDistributedDataParallel(m, c, DDPOptions{BucketCapBytes: 64})
		if err != nil {
			return err
		}
		defer ddp.Close()
		for step := range 5 {
			if r == 2 && step == 2 {
				c.Abort(errors.New("rank 2 gives up"))
				return nil
			}
			var berr error
			vram.Tidy(func() { berr = ddp.Backward(ddp.Forward(vram.Ones(vram.Shape{2, ddpIn})).Sum()) })
			if berr != nil {
				return berr
			}
			ddp.ZeroGrad()
		}
		return nil
	})
	for _, r := range []int{0, 1} {
		rankErr(t, r, errs[r], 2, ErrAborted)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("took %v", el)
	}
}

// bnNet is a BatchNorm2d and a Linear head: a model with buffers.
type bnNet struct {
	nn.Base
	bn   *nn.BatchNorm2d
	head *nn.Linear
}

func newBNNet(seed uint64, dev vram.Device) *bnNet {
	m := &bnNet{bn: nn.NewBatchNorm2d(2, dev), head: nn.NewLinear(8, 1, dev, vram.WithGenerator(vram.NewGenerator(seed)))}
	m.RegisterModule("bn", m.bn)
	m.RegisterModule("head", m.head)
	return m
}

func (m *bnNet) Forward(x *vram.Tensor) *vram.Tensor {
	return m.head.Forward(m.bn.Forward(x).Reshape(x.Size(0), -1))
}

// broadcastCounter passes collectives on and counts the broadcasts.
type broadcastCounter struct {
	Communicator
	n int
}

func (c *broadcastCounter) Broadcast(t *vram.Tensor, root int) error {
	c.n++
	return c.Communicator.Broadcast(t, root)
}

// TestDDPBuffers checks PyTorch's handling of buffers: rank 0's are taken
// at construction, and, unless KeepLocalBuffers is set, at every forward
// with gradients on outside NoSync, so that each rank's running
// statistics after a step are rank 0's before it updated with the rank's
// own share of the batch. The buffers of one dtype go in one broadcast.
func TestDDPBuffers(t *testing.T) {
	const ranks, steps = 2, 3
	for _, tc := range []struct {
		name  string
		keep  bool // KeepLocalBuffers
		local bool // the in-process collectives rather than TCP
	}{
		{name: "TCP, broadcast at each forward"},
		{name: "in process, broadcast at each forward", local: true},
		{name: "TCP, local buffers", keep: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devs := []vram.Device{vram.Sim(0), vram.Sim(1)}
			var comms []Communicator
			if tc.local {
				var err error
				if comms, err = NewLocalGroupOptions(devs, LocalOptions{Timeout: 5 * time.Second}); err != nil {
					t.Fatal(err)
				}
				defer func() {
					for _, c := range comms {
						c.Close()
					}
				}()
			} else {
				comms = tcpGroup(t, ranks, 5*time.Second, devs...)
			}
			data := func(r, step int) *vram.Tensor { // rank r's share at step
				g := vram.NewGenerator(uint64(10*step + r))
				return vram.Randn(vram.Shape{3, 2, 2, 2}, vram.WithGenerator(g)).AddScalar(float64(r + step))
			}
			// stats[step][r] is rank r's running mean and variance after
			// step; stats[0] is after construction.
			stats := make([][ranks][]float64, steps+1)
			counted := make([]*broadcastCounter, ranks)
			errs := onRanks(comms, func(r int, c Communicator) error {
				counted[r] = &broadcastCounter{Communicator: c}
				c = counted[r]
				m := newBNNet(uint64(r+1), c.Device())
				defer nn.Release(m)
				if r == 1 {
					vram.NoGrad(func() { m.bn.RunningMean.FillInPlace(7) }) // must be replaced by rank 0's
				}
				ddp, err := NewDistributedDataParallel(m, c, DDPOptions{KeepLocalBuffers: tc.keep})
				if err != nil {
					return err
				}
				defer ddp.Close()
				record := func(step int) {
					stats[step][r] = append(m.bn.RunningMean.Float64s(), m.bn.RunningVar.Float64s()...)
				}
				record(0)
				for step := 1; step <= steps; step++ {
					var berr error
					vram.Tidy(func() {
						berr = ddp.Backward(ddp.Forward(data(r, step).To(c.Device())).Sum())
						ddp.ZeroGrad()
					})
					if berr != nil {
						return berr
					}
					record(step)
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			// Construction: the parameters' bucket, then the float32 and
			// int64 buffers; each forward, the buffers again.
			wantN := 3
			if !tc.keep {
				wantN += 2 * steps
			}
			for r, c := range counted {
				if c.n != wantN {
					t.Errorf("rank %d made %d broadcasts, want %d", r, c.n, wantN)
				}
			}
			if !slices.Equal(stats[0][1], stats[0][0]) {
				t.Fatalf("after construction rank 1's statistics are %v, rank 0's %v", stats[0][1], stats[0][0])
			}
			for step := 1; step <= steps; step++ {
				for r := range ranks {
					from := stats[step-1][0] // rank 0's
					if tc.keep {
						from = stats[step-1][r]
					}
					ref := nn.NewBatchNorm2d(2)
					vram.NoGrad(func() {
						ref.RunningMean.CopyFrom(vram.FromSlice(from[:2], vram.Shape{2}, vram.Float32))
						ref.RunningVar.CopyFrom(vram.FromSlice(from[2:], vram.Shape{2}, vram.Float32))
					})
					ref.Forward(data(r, step))
					want := append(ref.RunningMean.Float64s(), ref.RunningVar.Float64s()...)
					nn.Release(ref)
					for i := range want {
						if !nearF32(stats[step][r][i], want[i]) {
							t.Fatalf("step %d: rank %d's statistics are %v, want %v", step, r, stats[step][r], want)
						}
					}
				}
			}
		})
	}
}

// TestDDPBackwardPanics checks that a rank whose backward fails (a
// gradient of the wrong shape, or a hook that panics with a value of its
// own) ends the others' step at once, with a *RankError naming it,
// instead of leaving them in the reduction until the timeout; inside
// NoSync, where nobody reduces, the communicator goes on.
func TestDDPBackwardPanics(t *testing.T) {
	const timeout = 20 * time.Second
	for _, b := range cpuBackends {
		for _, tc := range []struct {
			name   string
			noSync bool
			hook   bool // rank 1 panics in a hook rather than with a bad gradient
		}{
			{name: "bad gradient"},
			{name: "bad gradient in NoSync", noSync: true},
			{name: "a hook panics", hook: true},
		} {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				comms := b.make(t, timeout)
				start := time.Now()
				errs := onRanks(comms, func(r int, c Communicator) error {
					m := testMLP(1, c.Device())
					defer nn.Release(m)
					ddp, err := NewDistributedDataParallel(m, c, DDPOptions{})
					if err != nil {
						return err
					}
					defer ddp.Close()
					var opts []vram.BackwardOption
					if r == 1 && tc.hook {
						m.Parameters()[0].RegisterPostAccumulateGradHook(func(*vram.Tensor) { panic("hook fails") })
					} else if r == 1 {
						opts = append(opts, vram.Gradient(vram.Ones(vram.Shape{3}, c.Device())))
					}
					var berr error
					panicked := func() (p any) {
						defer func() { p = recover() }()
						vram.Tidy(func() {
							loss := ddp.Forward(vram.Ones(vram.Shape{2, ddpIn}, c.Device())).Sum()
							if tc.noSync {
								ddp.NoSync(func() { berr = ddp.Backward(loss, opts...) })
							} else {
								berr = ddp.Backward(loss, opts...)
							}
						})
						return nil
					}()
					if panicked != nil {
						return fmt.Errorf("panicked: %v", panicked)
					}
					if tc.noSync && (r == 1 || berr == nil) {
						if err := c.Barrier(); err != nil { // the communicator still works
							return err
						}
					}
					return berr
				})
				if el := time.Since(start); el > timeout/4 {
					t.Errorf("took %v", el)
				}
				switch {
				case tc.hook && (errs[1] == nil || !strings.Contains(errs[1].Error(), "panicked: hook fails")):
					t.Errorf("rank 1: %v, want its hook's panic", errs[1])
				case !tc.hook && !errors.Is(errs[1], vram.ErrShape):
					t.Errorf("rank 1: %v, want its backward's ErrShape", errs[1])
				}
				if tc.noSync {
					if errs[0] != nil {
						t.Errorf("rank 0: %v", errs[0])
					}
					return
				}
				rankErr(t, 0, errs[0], 1, ErrAborted)
			})
		}
	}
}

// TestDDPUnfrozenAfterWrapping: a parameter frozen when the DDP was made
// and unfrozen since has no bucket, so its gradient would never be
// averaged; Backward says so, on every communicator, and a rank that
// alone unfroze it ends the others' step at once.
func TestDDPUnfrozenAfterWrapping(t *testing.T) {
	const timeout = 20 * time.Second
	for _, b := range cpuBackends {
		for _, tc := range []struct {
			name     string
			unfreeze func(r int) bool
		}{
			{"every rank", func(int) bool { return true }},
			{"rank 1 alone", func(r int) bool { return r == 1 }},
		} {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				comms := b.make(t, timeout)
				defer func() {
					for _, c := range comms {
						c.Close()
					}
				}()
				start := time.Now()
				errs := onRanks(comms, func(r int, c Communicator) error {
					m := nn.NewLinear(3, 2, c.Device())
					defer nn.Release(m)
					m.Bias.SetRequiresGrad(false)
					d, err := NewDistributedDataParallel(m, c, DDPOptions{})
					if err != nil {
						return err
					}
					defer d.Close()
					if tc.unfreeze(r) {
						m.Bias.SetRequiresGrad(true)
					}
					vram.Tidy(func() { err = d.Backward(d.Forward(vram.Ones(vram.Shape{2, 3}, c.Device())).Sum()) })
					return err
				})
				for r, err := range errs {
					switch {
					case tc.unfreeze(r):
						if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), "now require grad: bias") {
							t.Errorf("rank %d: %v, want ErrArgument naming bias", r, err)
						}
					default:
						rankErr(t, r, err, 1, ErrAborted)
					}
				}
				if el := time.Since(start); el > timeout/4 {
					t.Errorf("took %v", el)
				}
			})
		}
	}
}

// mixedNet has a float64 layer, a float32 layer and a float32 parameter
// that only some micro-batches use.
type mixedNet struct {
	nn.Base
	a, b  *nn.Linear
	extra *vram.Tensor
}

func newMixedNet(dev vram.Device, seed uint64) *mixedNet {
	g := vram.NewGenerator(seed)
	m := &mixedNet{a: nn.NewLinear(3, 4, dev, vram.Float64, vram.WithGenerator(g)), b: nn.NewLinear(4, 2, dev, vram.WithGenerator(g))}
	m.extra = vram.Keep(vram.Randn(vram.Shape{2}, dev, vram.WithGenerator(g), vram.WithGrad()))
	m.RegisterModule("a", m.a)
	m.RegisterModule("b", m.b)
	m.RegisterParameter("extra", m.extra)
	return m
}

func (m *mixedNet) forward(x *vram.Tensor, extra bool) *vram.Tensor {
	o := m.b.Forward(m.a.Forward(x.Cast(vram.Float64)).Tanh().Cast(vram.Float32))
	if extra {
		o = o.Add(m.extra)
	}
	return o
}

func (m *mixedNet) Forward(x *vram.Tensor) *vram.Tensor { return m.forward(x, false) }

// TestDDPNoSyncMixedDTypes accumulates micro-batches of uneven sizes under
// NoSync on ranks of the in-process group, with parameters of two dtypes
// (in buckets of one dtype each) and a parameter that only one rank uses,
// in a NoSync step: after the synchronising backward every rank's
// gradients are the mean over the ranks of its local sums, as PyTorch's
// DDP gives.
func TestDDPNoSyncMixedDTypes(t *testing.T) {
	type micro struct {
		lo, n int
		extra bool
	}
	plan := [][]micro{ // per rank; all but the last under NoSync
		{{0, 2, true}, {2, 3, false}, {5, 1, false}},
		{{6, 4, false}, {10, 2, false}, {12, 1, false}},
	}
	g := vram.NewGenerator(9)
	x := vram.Randn(vram.Shape{13, 3}, vram.WithGenerator(g))
	defer x.Release()
	y := vram.Randn(vram.Shape{13, 2}, vram.WithGenerator(g))
	defer y.Release()
	var want [][]float64
	for r := range plan {
		m := newMixedNet(vram.CPU, 1)
		for _, mb := range plan[r] {
			vram.Tidy(func() {
				nn.MSELoss(m.forward(x.Narrow(0, mb.lo, mb.n), mb.extra), y.Narrow(0, mb.lo, mb.n)).Backward()
			})
		}
		for i, p := range m.Parameters() {
			v := make([]float64, p.NumElements())
			if p.Grad() != nil {
				v = p.Grad().Float64s()
			}
			if r == 0 {
				want = append(want, v)
				continue
			}
			for j := range v {
				want[i][j] += v[j]
			}
		}
		nn.Release(m)
	}
	for _, w := range want {
		for j := range w {
			w[j] /= float64(len(plan))
		}
	}
	for _, bucketCap := range []int64{0, 16} {
		t.Run(fmt.Sprintf("buckets of %d bytes", bucketCap), func(t *testing.T) {
			comms, err := NewLocalGroup(simDevs(len(plan)))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, c := range comms {
					c.Close()
				}
			}()
			got := make([][][]float64, len(plan))
			errs := eachRank(comms, func(c Communicator) error {
				r, dev := c.Rank(), c.Device()
				m := newMixedNet(dev, uint64(r+1)) // the broadcast gives rank 0's values
				defer nn.Release(m)
				ddp, err := NewDistributedDataParallel(m, c, DDPOptions{FindUnusedParameters: true, BucketCapBytes: bucketCap})
				if err != nil {
					return err
				}
				defer ddp.Close()
				for _, b := range ddp.Buckets() {
					if b.DType != vram.Float32 && b.DType != vram.Float64 {
						return fmt.Errorf("bucket of %v", b.DType)
					}
				}
				step := func(mb micro) (err error) {
					vram.Tidy(func() {
						in, tgt := x.Narrow(0, mb.lo, mb.n).To(dev), y.Narrow(0, mb.lo, mb.n).To(dev)
						err = ddp.Backward(nn.MSELoss(m.forward(in, mb.extra), tgt))
					})
					return err
				}
				var serr error
				last := len(plan[r]) - 1
				ddp.NoSync(func() {
					for _, mb := range plan[r][:last] {
						if serr == nil {
							serr = step(mb)
						}
					}
				})
				if serr == nil {
					serr = step(plan[r][last])
				}
				if serr != nil {
					return serr
				}
				for _, p := range m.Parameters() {
					if p.Grad() == nil {
						return fmt.Errorf("a parameter of %v has no gradient", p.DType())
					}
					got[r] = append(got[r], p.Grad().Float64s())
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
				if err := closeTo(got[r], want); err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// TestDDPForwardPanics makes rank 1's forward fail (an input of the wrong
// width). With gradients on outside NoSync, rank 0 waits in the reduction
// of the step's gradients, so rank 1 aborts the communicator and rank 0's
// Backward fails at once, naming rank 1; inside NoGrad or NoSync nothing
// waits for rank 1, which may go on: the communicator still works.
func TestDDPForwardPanics(t *testing.T) {
	const timeout = 20 * time.Second
	for _, tc := range []struct {
		name  string
		wrap  func(ddp *DistributedDataParallel, fn func())
		abort bool
	}{
		{"training step", func(_ *DistributedDataParallel, fn func()) { fn() }, true},
		{"NoGrad", func(_ *DistributedDataParallel, fn func()) { vram.NoGrad(fn) }, false},
		{"NoSync", func(ddp *DistributedDataParallel, fn func()) { ddp.NoSync(fn) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms, err := NewLocalGroupOptions(simDevs(2), LocalOptions{Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, c := range comms {
					c.Close()
				}
			}()
			start := time.Now()
			errs := eachRank(comms, func(c Communicator) error {
				dev := c.Device()
				m := testMLP(1, dev)
				defer nn.Release(m)
				ddp, err := NewDistributedDataParallel(m, c, DDPOptions{})
				if err != nil {
					return err
				}
				defer ddp.Close()
				width := ddpIn
				if c.Rank() == 1 {
					width++ // the first layer takes ddpIn features
				}
				var berr error
				ferr := vram.Catch(func() {
					tc.wrap(ddp, func() {
						vram.Tidy(func() {
							out := ddp.Forward(vram.Ones(vram.Shape{2, width}, dev))
							if vram.GradEnabled() {
								berr = ddp.Backward(out.Sum())
							}
						})
					})
				})
				if c.Rank() == 1 {
					if !errors.Is(ferr, vram.ErrShape) {
						return fmt.Errorf("forward: %v, want the shape error", ferr)
					}
				} else if ferr != nil || berr != nil {
					return errors.Join(ferr, berr)
				}
				return c.Barrier()
			})
			if tc.abort {
				rankErr(t, 0, errs[0], 1, ErrAborted)
				if !errors.Is(errs[1], ErrAborted) {
					t.Errorf("rank 1: %v, want its communicator aborted", errs[1])
				}
			} else {
				for r, err := range errs {
					if err != nil {
						t.Errorf("rank %d: %v", r, err)
					}
				}
			}
			if el := time.Since(start); el > timeout/2 {
				t.Errorf("took %v", el)
			}
		})
	}
}

// TestDDPForwardAfterClose checks that Forward after Close panics with
// kind ErrReleased, saying the DDP was closed, not that a step failed.
func TestDDPForwardAfterClose(t *testing.T) {
	comms := tcpGroup(t, 1, 5*time.Second)
	m := testMLP(1, vram.CPU)
	defer nn.Release(m)
	ddp, err := NewDistributedDataParallel(m, comms[0], DDPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ddp.Close(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		e, ok := recover().(*vram.Error)
		if !ok || e.Kind != vram.ErrReleased || strings.Contains(e.Error(), "failed") {
			t.Fatalf("Forward after Close: got %v, want an ErrReleased error saying it was closed", e)
		}
	}()
	vram.Tidy(func() { ddp.Forward(vram.Ones(vram.Shape{3, ddpIn})) })
}
