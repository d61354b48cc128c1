package parallel

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/native/nccl"
	"github.com/vramgo/vram/nn"
)

// The tests in this file need a GPU and libnccl.so.2: they skip without
// them, and fail instead when VRAM_REQUIRE_CUDA=1 (as scripts/gpu-test.sh
// runs them). A world of one rank on cuda:0 runs NCCL's real code paths;
// each collective then leaves a rank's data as it was, so the tests check
// the data of views at offsets and of out-of-place collectives, where a
// wrong address shows.

func requireNCCL(t *testing.T) vram.Device {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("VRAM_REQUIRE_CUDA") == "1" {
		skip = t.Fatalf
	}
	if !vram.CUDAAvailable() {
		skip("no CUDA device: %v", vram.CUDA(0).Check())
	}
	if _, err := nccl.Load(); err != nil {
		skip("no NCCL: %v", err)
	}
	return vram.CUDA(0)
}

func seq(n int, from float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = from + float32(i)
	}
	return out
}

func wantValues(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}

// exercise runs every collective of a one-rank communicator on dev and
// checks the results and the refusals.
func exercise(t *testing.T, c Communicator, dev vram.Device) {
	if c.Rank() != 0 || c.Size() != 1 || c.Device() != dev {
		t.Fatalf("rank %d of %d on %v", c.Rank(), c.Size(), c.Device())
	}
	base := seq(6, 1)
	for _, dt := range []vram.DType{vram.Float32, vram.Float64, vram.Float16, vram.BFloat16, vram.Int32, vram.Int64} {
		f := vram.FromSlice(base, vram.Shape{2, 3}, dev)
		x := f.Cast(dt)
		f.Release()
		for _, op := range []ReduceOp{Sum, Prod, Max, Min, Avg} {
			if err := c.AllReduce(x, op); err != nil {
				t.Fatalf("all-reduce %v of %v: %v", op, dt, err)
			}
		}
		wantValues(t, "all-reduce of "+dt.String(), x.Float32s(), base)
		x.Release()
	}
	b := vram.FromSlice([]bool{true, false, true}, vram.Shape{3}, dev)
	for _, op := range []ReduceOp{Sum, Prod, Max, Min} {
		if err := c.AllReduce(b, op); err != nil {
			t.Fatalf("all-reduce %v of bool: %v", op, err)
		}
	}
	if got := b.Bools(); !slices.Equal(got, []bool{true, false, true}) {
		t.Errorf("all-reduce of bool: %v", got)
	}
	if err := c.AllReduce(b, Avg); err == nil {
		t.Error("the average of bools was accepted")
	}
	b.Release()

	// Views at offsets, written out of place: the destination's other
	// elements must stay as they were.
	big := vram.Zeros(vram.Shape{10}, dev)
	src := vram.FromSlice(seq(8, 100), vram.Shape{8}, dev)
	dst := big.Narrow(0, 3, 4)
	from := src.Narrow(0, 2, 4)
	if err := c.AllGather(dst, from); err != nil {
		t.Fatal(err)
	}
	wantValues(t, "all-gather into a view", big.Float32s(), []float32{0, 0, 0, 102, 103, 104, 105, 0, 0, 0})
	big.FillInPlace(0)
	if err := c.ReduceScatter(dst, from, Sum); err != nil {
		t.Fatal(err)
	}
	wantValues(t, "reduce-scatter into a view", big.Float32s(), []float32{0, 0, 0, 102, 103, 104, 105, 0, 0, 0})
	big.FillInPlace(0)
	if err := NCCLGroupCalls(func() error {
		if err := c.Send(from, 0); err != nil {
			return err
		}
		return c.Recv(dst, 0)
	}); err != nil {
		t.Fatalf("send and receive to self in a group: %v", err)
	}
	wantValues(t, "send/recv to self", big.Float32s(), []float32{0, 0, 0, 102, 103, 104, 105, 0, 0, 0})
	if err := c.Broadcast(dst, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Reduce(dst, Max, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.AllReduce(dst, Sum); err != nil {
		t.Fatal(err)
	}
	wantValues(t, "in-place collectives on a view", big.Float32s(), []float32{0, 0, 0, 102, 103, 104, 105, 0, 0, 0})

	// A collective on another stream runs there.
	s, err := vram.NewStream(dev)
	if err != nil {
		t.Fatal(err)
	}
	head := src.Narrow(0, 0, 4)
	vram.WithStream(s, func() {
		if err := c.AllGather(dst, head); err != nil {
			t.Error(err)
		}
	})
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	wantValues(t, "all-gather on a side stream", big.Float32s(), []float32{0, 0, 0, 100, 101, 102, 103, 0, 0, 0})
	s.Release()

	if err := c.Barrier(); err != nil {
		t.Fatalf("barrier: %v", err)
	}

	// Refusals, which leave the communicator working.
	m := vram.Zeros(vram.Shape{2, 3}, dev)
	mt := m.T()
	cpu := vram.Zeros(vram.Shape{4})
	from64 := from.Cast(vram.Float64)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"not contiguous", c.AllReduce(mt, Sum), "not contiguous"},
		{"cpu tensor", c.AllReduce(cpu, Sum), "is on cpu"},
		{"gather sizes", c.AllGather(big, from), "want 1 × 4"},
		{"scatter dtypes", c.ReduceScatter(dst, from64, Sum), "is float64"},
		{"root", c.Broadcast(dst, 1), "root 1 is not a rank"},
		{"peer", c.Send(dst, -1), "peer -1 is not a rank"},
		{"self outside a group", c.Send(dst, 0), "NCCLGroupCalls"},
		{"barrier in a group", NCCLGroupCalls(c.Barrier), "inside NCCLGroupCalls"},
		{"unknown reduction", c.AllReduce(dst, ReduceOp(9)), "unknown reduction"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %q", tc.name, tc.err, tc.want)
		}
	}
	if err := NCCLGroupCalls(func() error { return c.Send(dst, 0) }); !errors.Is(err, nccl.ErrInvalidUsage) {
		t.Errorf("send to self without its receive, in a group: %v, want ncclInvalidUsage", err)
	}
	if err := c.AllReduce(dst, Sum); err != nil {
		t.Errorf("after the refusals: %v", err)
	}
	for _, x := range []*vram.Tensor{big, src, dst, from, head, m, mt, cpu, from64} {
		x.Release()
	}
}

// TestNCCLGroupGPU drives a group of one GPU (ncclCommInitAll).
func TestNCCLGroupGPU(t *testing.T) {
	dev := requireNCCL(t)
	v, err := NCCLVersion()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NCCL %s", v)
	comms, err := NewNCCLGroup([]vram.Device{dev})
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, comms[0], dev)
	if err := comms[0].Close(); err != nil {
		t.Fatal(err)
	}
	x := vram.Zeros(vram.Shape{1}, dev)
	defer x.Release()
	if err := comms[0].AllReduce(x, Sum); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("after Close: %v", err)
	}
}

// TestNCCLRankGPU drives rank 0 of 1 made from an id (ncclCommInitRank).
func TestNCCLRankGPU(t *testing.T) {
	dev := requireNCCL(t)
	id, err := NewNCCLID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewNCCLRankOptions(0, 1, dev, id, NCCLOptions{Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, c, dev)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNCCLAbortGPU aborts a real communicator: later calls name the rank
// and wrap the cause.
func TestNCCLAbortGPU(t *testing.T) {
	dev := requireNCCL(t)
	comms, err := NewNCCLGroup([]vram.Device{dev})
	if err != nil {
		t.Fatal(err)
	}
	c := comms[0]
	x := vram.Ones(vram.Shape{1 << 20}, dev)
	defer x.Release()
	if err := c.AllReduce(x, Sum); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	c.Abort(boom)
	err = c.AllReduce(x, Sum)
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 0 || !errors.Is(err, ErrAborted) || !errors.Is(err, boom) {
		t.Errorf("after Abort: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close after Abort: %v", err)
	}
	if err := vram.Synchronize(dev); err != nil {
		t.Errorf("the device after the abort: %v", err)
	}
}

// TestNCCLTimeoutGPU queues an all-reduce behind a second of matrix
// products with a timeout of 200 ms: the watchdog finds it not done and
// aborts the communicator, as it would for a rank that never came.
func TestNCCLTimeoutGPU(t *testing.T) {
	dev := requireNCCL(t)
	comms, err := NewNCCLGroupOptions([]vram.Device{dev}, NCCLOptions{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := comms[0]
	a := vram.Randn(vram.Shape{8192, 8192}, dev)
	x := vram.Ones(vram.Shape{16}, dev)
	start := time.Now()
	var outs []*vram.Tensor
	for range 40 { // about 20 ms each on an H200 in float32
		outs = append(outs, a.MatMul(a))
	}
	if err := c.AllReduce(x, Sum); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err = c.AllReduce(x, Sum)
		if err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var re *RankError
	if !errors.As(err, &re) || !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrAborted) {
		t.Fatalf("after the timeout: %v", err)
	}
	t.Logf("failed after %v: %v", time.Since(start), err)
	if err := c.Close(); !errors.Is(err, ErrTimeout) {
		t.Errorf("Close: %v", err)
	}
	if err := vram.Synchronize(dev); err != nil {
		t.Errorf("the device after the abort: %v", err)
	}
	for _, o := range outs {
		o.Release()
	}
	a.Release()
	x.Release()
}

// TestNCCLInitTimeoutGPU makes rank 0 of a group of 2 whose rank 1 does
// not come in time: NewNCCLRank fails within its timeout, naming the
// timeout. Rank 1 then comes, on the same GPU, so that NCCL refuses the
// pair (a duplicate GPU) and the abandoned ncclCommInitRank of rank 0
// returns; its goroutine would otherwise stay blocked.
func TestNCCLInitTimeoutGPU(t *testing.T) {
	dev := requireNCCL(t)
	id, err := NewNCCLID()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = NewNCCLRankOptions(0, 2, dev, id, NCCLOptions{Timeout: 2 * time.Second})
	el := time.Since(start)
	var re *RankError
	if !errors.As(err, &re) || re.Op != "init" || !errors.Is(err, ErrTimeout) {
		t.Fatalf("%v", err)
	}
	if el < 2*time.Second || el > 10*time.Second {
		t.Errorf("failed after %v with a timeout of 2s", el)
	}
	t.Logf("%v", err)
	if _, err := NewNCCLRankOptions(1, 2, dev, id, NCCLOptions{Timeout: 30 * time.Second}); err == nil {
		t.Error("two ranks on one GPU were accepted")
	} else {
		t.Logf("rank 1 on the same GPU: %v", err)
	}
}

// TestNCCLDDPUnusedGPU runs a DDP with FindUnusedParameters on a real
// communicator: the all-reduce that finds the parameters no rank used
// runs on NCCL, and leaves the unused head without a gradient.
func TestNCCLDDPUnusedGPU(t *testing.T) {
	dev := requireNCCL(t)
	comms, err := NewNCCLGroup([]vram.Device{dev})
	if err != nil {
		t.Fatal(err)
	}
	defer comms[0].Close()
	m := newTwoHeads(1, dev) // head b is never used
	defer nn.Release(m)
	ddp, err := NewDistributedDataParallel(m, comms[0], DDPOptions{FindUnusedParameters: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ddp.Close()
	for step := range 2 {
		var berr error
		vram.Tidy(func() {
			if berr = ddp.Backward(ddp.Forward(vram.Ones(vram.Shape{2, ddpIn}, dev)).Sum()); berr != nil {
				return
			}
			if m.b.Weight.Grad() != nil || m.b.Bias.Grad() != nil {
				berr = fmt.Errorf("step %d: head b, used by no rank, has a gradient", step)
			} else if g := m.a.Bias.Grad(); g == nil || g.Float64s()[0] != 2 {
				berr = fmt.Errorf("step %d: head a's bias gradient is %v, want 2s", step, g)
			}
			ddp.ZeroGrad()
		})
		if berr != nil {
			t.Fatal(berr)
		}
	}
}
