package nccl_test

import (
	"errors"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/internal/cudatest"
	"github.com/vramgo/vram/native/nccl"
)

// The tests in this file need a GPU and libnccl.so.2: they skip without
// them, and fail instead when VRAM_REQUIRE_CUDA=1. Together they call
// every binding, on a world of one rank on GPU 0, which runs NCCL's real
// code paths (communicator setup, the collectives' enqueueing, the group
// planner, the self send/receive, abort and teardown).

// require loads the driver and NCCL and returns GPU 0's primary context.
func require(t *testing.T) cuda.Context {
	t.Helper()
	devs := cudatest.Require(t)
	lib, err := nccl.Load()
	if err != nil {
		cudatest.SkipOrFail(t, "no NCCL: %v", err)
	}
	t.Logf("%s from %s (%s)", lib.Soname, lib.Path, lib.Where)
	return cudatest.Context(t, devs[0])
}

// bufs is a world of one rank's buffers on the GPU: n float32 in a, b and
// c, and the stream the collectives run on.
type bufs struct {
	t       *testing.T
	n       int
	a, b, c cuda.DevicePtr
	s       cuda.Stream
	x       []float32 // what a holds
}

// newBufs allocates the buffers in the current context, a filled with
// 0.5, 1.5, 2.5, ...
func newBufs(t *testing.T, n int) *bufs {
	t.Helper()
	f := &bufs{t: t, n: n, x: make([]float32, n)}
	for i := range f.x {
		f.x[i] = float32(i) + 0.5
	}
	var err error
	for _, p := range []*cuda.DevicePtr{&f.a, &f.b, &f.c} {
		if *p, err = cuda.MemAlloc(uint64(4 * n)); err != nil {
			t.Fatalf("cuMemAlloc_v2: %v", err)
		}
	}
	if f.s, err = cuda.StreamCreate(cuda.StreamNonBlocking); err != nil {
		t.Fatalf("cuStreamCreate: %v", err)
	}
	f.upload(f.a, f.x)
	return f
}

// free releases the buffers; the context must be current.
func (f *bufs) free() {
	for _, p := range []cuda.DevicePtr{f.a, f.b, f.c} {
		if err := cuda.MemFree(p); err != nil {
			f.t.Errorf("cuMemFree_v2: %v", err)
		}
	}
	if err := cuda.StreamDestroy(f.s); err != nil {
		f.t.Errorf("cuStreamDestroy_v2: %v", err)
	}
}

func (f *bufs) upload(p cuda.DevicePtr, x []float32) {
	f.t.Helper()
	if err := cuda.MemcpyHtoD(p, unsafe.Pointer(&x[0]), uint64(4*len(x))); err != nil {
		f.t.Fatalf("cuMemcpyHtoD_v2: %v", err)
	}
	if err := cuda.CtxSynchronize(); err != nil {
		f.t.Fatalf("cuCtxSynchronize: %v", err)
	}
}

// poison fills p with NaNs on the stream, so that a result that was not
// written shows.
func (f *bufs) poison(p cuda.DevicePtr) {
	f.t.Helper()
	if err := cuda.MemsetD8Async(p, 0xff, uint64(4*f.n), f.s); err != nil {
		f.t.Fatalf("cuMemsetD8Async: %v", err)
	}
}

// expect waits for the stream and compares p with want.
func (f *bufs) expect(what string, p cuda.DevicePtr, want []float32) {
	f.t.Helper()
	if err := cuda.StreamSynchronize(f.s); err != nil {
		f.t.Fatalf("%s: cuStreamSynchronize: %v", what, err)
	}
	got := make([]float32, len(want))
	if err := cuda.MemcpyDtoH(unsafe.Pointer(&got[0]), p, uint64(4*len(got))); err != nil {
		f.t.Fatalf("%s: cuMemcpyDtoH_v2: %v", what, err)
	}
	for i := range got {
		if got[i] != want[i] {
			f.t.Errorf("%s: element %d is %v, want %v", what, i, got[i], want[i])
			return
		}
	}
}

// checkComm checks the communicator's queries for rank 0 of 1 on GPU 0.
func checkComm(t *testing.T, c nccl.Comm) {
	t.Helper()
	if c == 0 {
		t.Fatal("a nil communicator")
	}
	if n, err := nccl.CommCount(c); n != 1 || err != nil {
		t.Errorf("ncclCommCount: %d, %v", n, err)
	}
	if d, err := nccl.CommCuDevice(c); d != 0 || err != nil {
		t.Errorf("ncclCommCuDevice: %d, %v", d, err)
	}
	if r, err := nccl.CommUserRank(c); r != 0 || err != nil {
		t.Errorf("ncclCommUserRank: %d, %v", r, err)
	}
	if st, err := nccl.CommGetAsyncError(c); st != nccl.Success || err != nil {
		t.Errorf("ncclCommGetAsyncError: %v, %v", st, err)
	}
}

// collectives runs every collective of a world of one rank on c and
// checks the results: each is the rank's own data.
func collectives(t *testing.T, c nccl.Comm) {
	f := newBufs(t, 1000)
	defer f.free()
	n := uint64(f.n)
	for _, op := range []nccl.RedOp{nccl.Sum, nccl.Prod, nccl.Max, nccl.Min, nccl.Avg} {
		f.poison(f.b)
		if err := nccl.AllReduce(f.a, f.b, n, nccl.Float32, op, c, f.s); err != nil {
			t.Fatalf("ncclAllReduce %v: %v", op, err)
		}
		f.expect("all-reduce "+op.String(), f.b, f.x)
	}
	f.upload(f.c, f.x)
	if err := nccl.AllReduce(f.c, f.c, n, nccl.Float32, nccl.Avg, c, f.s); err != nil {
		t.Fatalf("ncclAllReduce in place: %v", err)
	}
	f.expect("all-reduce avg in place", f.c, f.x)

	f.poison(f.b)
	if err := nccl.Broadcast(f.a, f.b, n, nccl.Float32, 0, c, f.s); err != nil {
		t.Fatalf("ncclBroadcast: %v", err)
	}
	f.expect("broadcast", f.b, f.x)

	f.poison(f.b)
	if err := nccl.Reduce(f.a, f.b, n, nccl.Float32, nccl.Max, 0, c, f.s); err != nil {
		t.Fatalf("ncclReduce: %v", err)
	}
	f.expect("reduce max", f.b, f.x)

	f.poison(f.b)
	if err := nccl.AllGather(f.a, f.b, n, nccl.Float32, c, f.s); err != nil {
		t.Fatalf("ncclAllGather: %v", err)
	}
	f.expect("all-gather", f.b, f.x)

	f.poison(f.b)
	if err := nccl.ReduceScatter(f.a, f.b, n, nccl.Float32, nccl.Sum, c, f.s); err != nil {
		t.Fatalf("ncclReduceScatter: %v", err)
	}
	f.expect("reduce-scatter", f.b, f.x)

	// A send to itself and its receive, in one group.
	f.poison(f.b)
	if err := nccl.GroupStart(); err != nil {
		t.Fatalf("ncclGroupStart: %v", err)
	}
	errSend := nccl.Send(f.a, n, nccl.Float32, 0, c, f.s)
	errRecv := nccl.Recv(f.b, n, nccl.Float32, 0, c, f.s)
	if err := errors.Join(errSend, errRecv, nccl.GroupEnd()); err != nil {
		t.Fatalf("send and receive to self: %v", err)
	}
	f.expect("send/recv to self", f.b, f.x)

	// Integers, reinterpreted: 1000 float32 are 500 int64, whose sum over
	// one rank is their own bits.
	f.poison(f.b)
	if err := nccl.AllReduce(f.a, f.b, n/2, nccl.Int64, nccl.Sum, c, f.s); err != nil {
		t.Fatalf("ncclAllReduce int64: %v", err)
	}
	f.expect("all-reduce int64", f.b, f.x)
}

func TestVersionAndUniqueID(t *testing.T) {
	require(t)
	v, err := nccl.GetVersion()
	if err != nil || v < nccl.VersionCode(2, 14, 3) {
		t.Fatalf("ncclGetVersion: %d, %v", v, err)
	}
	t.Logf("NCCL %s (%d)", nccl.VersionString(v), v)
	id1, err1 := nccl.GetUniqueID()
	id2, err2 := nccl.GetUniqueID()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("ncclGetUniqueId: %v", err)
	}
	if id1 == (nccl.UniqueID{}) || id1 == id2 {
		t.Errorf("ncclGetUniqueId gave %x and %x", id1[:16], id2[:16])
	}
	if s := nccl.GetErrorString(nccl.Success); s == "" {
		t.Error("ncclGetErrorString(ncclSuccess) is empty")
	}
	for sym, got := range nccl.Resolved() {
		if got != sym {
			t.Errorf("%s resolved as %q", sym, got)
		}
	}
}

// TestCommInitAll makes a clique of one GPU (ncclCommInitAll), runs every
// collective and destroys it.
func TestCommInitAll(t *testing.T) {
	ctx := require(t)
	err := ctx.Do(func() error {
		comms, err := nccl.CommInitAll([]int{0})
		if err != nil {
			return err
		}
		if len(comms) != 1 {
			return fmt.Errorf("%d communicators for one device", len(comms))
		}
		checkComm(t, comms[0])
		collectives(t, comms[0])
		if st, err := nccl.CommGetAsyncError(comms[0]); st != nccl.Success || err != nil {
			t.Errorf("ncclCommGetAsyncError after the collectives: %v, %v", st, err)
		}
		return nccl.CommDestroy(comms[0])
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCommInitRank makes rank 0 of 1 from a unique id, passed by value,
// runs every collective and aborts it.
func TestCommInitRank(t *testing.T) {
	ctx := require(t)
	id, err := nccl.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	err = ctx.Do(func() error {
		c, err := nccl.CommInitRank(1, id, 0)
		if err != nil {
			return err
		}
		checkComm(t, c)
		collectives(t, c)
		return nccl.CommAbort(c)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitReady polls a nonblocking communicator until its state is no longer
// ncclInProgress.
func waitReady(t *testing.T, what string, c nccl.Comm) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := nccl.CommGetAsyncError(c)
		if err != nil {
			t.Fatalf("%s: ncclCommGetAsyncError: %v", what, err)
		}
		if st != nccl.Result(7) {
			if err := st.Err(); err != nil {
				t.Fatalf("%s: the communicator failed: %v", what, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still in progress after 2 minutes", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCommInitRankConfigNonblocking makes a nonblocking communicator,
// waits for it, runs an all-reduce the nonblocking way, then finalizes and
// destroys it.
func TestCommInitRankConfigNonblocking(t *testing.T) {
	ctx := require(t)
	id, err := nccl.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	err = ctx.Do(func() error {
		c, err := nccl.CommInitRankConfig(1, id, 0, nccl.Config{Blocking: false})
		if err != nil && !errors.Is(err, nccl.ErrInProgress) {
			return err
		}
		waitReady(t, "ncclCommInitRankConfig", c)
		checkComm(t, c)
		f := newBufs(t, 256)
		defer f.free()
		f.poison(f.b)
		if err := nccl.AllReduce(f.a, f.b, uint64(f.n), nccl.Float32, nccl.Sum, c, f.s); err != nil && !errors.Is(err, nccl.ErrInProgress) {
			return err
		}
		waitReady(t, "ncclAllReduce", c)
		f.expect("nonblocking all-reduce", f.b, f.x)
		if err := nccl.CommFinalize(c); err != nil && !errors.Is(err, nccl.ErrInProgress) {
			return err
		}
		waitReady(t, "ncclCommFinalize", c)
		return nccl.CommDestroy(c)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestErrorsFromNCCL checks that NCCL's own failures come back with its
// names: a bad data type, and a send to self without its receive, alone
// and in a group.
func TestErrorsFromNCCL(t *testing.T) {
	ctx := require(t)
	err := ctx.Do(func() error {
		comms, err := nccl.CommInitAll([]int{0})
		if err != nil {
			return err
		}
		c := comms[0]
		defer func() {
			if err := nccl.CommAbort(c); err != nil {
				t.Errorf("ncclCommAbort: %v", err)
			}
		}()
		f := newBufs(t, 16)
		defer f.free()
		err = nccl.AllReduce(f.a, f.b, 16, nccl.DataType(99), nccl.Sum, c, f.s)
		var e *nccl.Error
		if !errors.Is(err, nccl.ErrInvalidArgument) || !errors.As(err, &e) || e.Func != "ncclAllReduce" ||
			e.Name != "ncclInvalidArgument" || e.Desc == "" {
			t.Errorf("all-reduce of an unknown type: %#v", err)
		}
		t.Logf("unknown type: %v", err)
		if err := nccl.Send(f.a, 16, nccl.Float32, 0, c, f.s); !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("send to self outside a group: %v, want ncclInvalidUsage", err)
		} else {
			t.Logf("send to self: %v", err)
		}
		if err := nccl.GroupStart(); err != nil {
			return err
		}
		errSend := nccl.Send(f.a, 16, nccl.Float32, 0, c, f.s)
		errEnd := nccl.GroupEnd()
		if errSend != nil || !errors.Is(errEnd, nccl.ErrInvalidUsage) {
			t.Errorf("send to self in a group: send %v, end %v, want ncclInvalidUsage from ncclGroupEnd", errSend, errEnd)
		}
		if msg := nccl.GetLastError(c); msg == "" {
			t.Error("ncclGetLastError is empty after errors")
		} else {
			t.Logf("last error: %s", msg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
