package cuda_test

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/internal/cudatest"
	"github.com/vramgo/vram/native/nvrtc"
)

// The tests in this file need a GPU: they skip without one, and fail
// instead when VRAM_REQUIRE_CUDA=1. Together they call every binding.

func TestDriverAndDevices(t *testing.T) {
	devs := cudatest.Require(t)
	lib, _ := cuda.Load()
	v, err := cuda.DriverGetVersion()
	if err != nil || v < 12000 {
		t.Fatalf("cuDriverGetVersion: %d, %v", v, err)
	}
	t.Logf("driver supports CUDA %d.%d; %s from %s (%s)", v/1000, v%1000/10, lib.Soname, lib.Path, lib.Where)
	for sym, got := range cuda.Resolved() {
		if got != sym {
			t.Logf("%s resolved as %s", sym, got)
		}
	}
	for i, dev := range devs {
		name, err := cuda.DeviceGetName(dev)
		if err != nil || name == "" {
			t.Errorf("cuDeviceGetName: %q, %v", name, err)
		}
		total, err := cuda.DeviceTotalMem(dev)
		if err != nil || total < 1<<30 {
			t.Errorf("cuDeviceTotalMem_v2: %d, %v", total, err)
		}
		major, err1 := cuda.DeviceGetAttribute(cuda.AttrComputeCapabilityMajor, dev)
		minor, err2 := cuda.DeviceGetAttribute(cuda.AttrComputeCapabilityMinor, dev)
		sms, err3 := cuda.DeviceGetAttribute(cuda.AttrMultiprocessorCount, dev)
		if err := errors.Join(err1, err2, err3); err != nil || major < 5 || sms < 1 {
			t.Errorf("cuDeviceGetAttribute: cc %d.%d, %d SMs, %v", major, minor, sms, err)
		}
		uuid, err := cuda.DeviceGetUUID(dev)
		if err != nil || uuid == (cuda.UUID{}) {
			t.Errorf("cuDeviceGetUuid_v2: %v, %v", uuid, err)
		}
		t.Logf("GPU %d: %s, %s, %.1f GiB, sm_%d%d, %d SMs", i, name, uuid, float64(total)/(1<<30), major, minor, sms)
		for j, peer := range devs {
			if i == j {
				continue
			}
			can, err := cuda.DeviceCanAccessPeer(dev, peer)
			if err != nil {
				t.Errorf("cuDeviceCanAccessPeer(%d, %d): %v", i, j, err)
			}
			t.Logf("peer access %d -> %d: %v", i, j, can)
		}
	}
	if _, err := cuda.DeviceGet(len(devs) + 100); !errors.Is(err, cuda.ErrInvalidDevice) {
		t.Errorf("cuDeviceGet(out of range): %v, want CUDA_ERROR_INVALID_DEVICE", err)
	}
}

// TestContextPerThread shows the discipline of the package doc: in Do,
// the context is current; many goroutines at once each get it.
func TestContextPerThread(t *testing.T) {
	devs := cudatest.Require(t)
	ctx := cudatest.Context(t, devs[0])
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- ctx.Do(func() error {
				for i := 0; i < 20; i++ {
					runtime.Gosched()
					cur, err := cuda.CtxGetCurrent()
					if err != nil || cur != ctx {
						return fmt.Errorf("cuCtxGetCurrent: %#x, %v; want %#x", cur, err, ctx)
					}
					p, err := cuda.MemAlloc(4096)
					if err != nil {
						return err
					}
					if err := cuda.MemFree(p); err != nil {
						return err
					}
				}
				return nil
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestMemoryCopiesStreamsEvents(t *testing.T) {
	devs := cudatest.Require(t)
	ctx := cudatest.Context(t, devs[0])
	err := ctx.Do(func() error {
		free, total, err := cuda.MemGetInfo()
		if err != nil || free == 0 || free > total {
			return fmt.Errorf("cuMemGetInfo_v2: free %d, total %d, %v", free, total, err)
		}
		if _, err := cuda.MemAlloc(1 << 50); !errors.Is(err, cuda.ErrOutOfMemory) {
			return fmt.Errorf("cuMemAlloc_v2(1 PiB): %v, want CUDA_ERROR_OUT_OF_MEMORY", err)
		}

		const n = 1 << 20 // bytes
		var bufs [3]cuda.DevicePtr
		for i := range bufs {
			if bufs[i], err = cuda.MemAlloc(n); err != nil {
				return err
			}
			defer cuda.MemFree(bufs[i])
		}
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*7 + i>>8)
		}
		// Synchronous: memset, HtoD, DtoD, DtoH.
		if err := cuda.MemsetD8(bufs[1], 0xAB, n); err != nil {
			return err
		}
		if err := cuda.MemcpyHtoD(bufs[0], unsafe.Pointer(&src[0]), n); err != nil {
			return err
		}
		if err := cuda.MemcpyDtoD(bufs[1], bufs[0], n/2); err != nil {
			return err
		}
		got := make([]byte, n)
		if err := cuda.MemcpyDtoH(unsafe.Pointer(&got[0]), bufs[1], n); err != nil {
			return err
		}
		for i := range got {
			want := src[i]
			if i >= n/2 {
				want = 0xAB
			}
			if got[i] != want {
				return fmt.Errorf("sync copies: byte %d is %#x, want %#x", i, got[i], want)
			}
		}

		// Asynchronous, from page-locked memory: cuMemAllocHost_v2 and a
		// registered (pinned) Go buffer.
		host, err := cuda.MemAllocHost(n)
		if err != nil {
			return err
		}
		defer cuda.MemFreeHost(host)
		hostBytes := unsafe.Slice((*byte)(host), n)
		copy(hostBytes, src)
		reg := make([]byte, n)
		var pin runtime.Pinner
		pin.Pin(&reg[0])
		defer pin.Unpin()
		if err := cuda.MemHostRegister(unsafe.Pointer(&reg[0]), n, cuda.HostRegisterPortable); err != nil {
			return err
		}
		defer cuda.MemHostUnregister(unsafe.Pointer(&reg[0]))

		s1, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			return err
		}
		defer cuda.StreamDestroy(s1)
		s2, err := cuda.StreamCreate(cuda.StreamDefault)
		if err != nil {
			return err
		}
		defer cuda.StreamDestroy(s2)
		start, err := cuda.EventCreate(cuda.EventDefault)
		if err != nil {
			return err
		}
		defer cuda.EventDestroy(start)
		done, err := cuda.EventCreate(cuda.EventDefault)
		if err != nil {
			return err
		}
		defer cuda.EventDestroy(done)

		if err := cuda.EventRecord(start, s1); err != nil {
			return err
		}
		if err := cuda.MemsetD8Async(bufs[2], 0, n, s1); err != nil {
			return err
		}
		if err := cuda.MemcpyHtoDAsync(bufs[2], host, n, s1); err != nil {
			return err
		}
		if err := cuda.MemcpyDtoDAsync(bufs[0], bufs[2], n, s1); err != nil {
			return err
		}
		if err := cuda.EventRecord(done, s1); err != nil {
			return err
		}
		// s2 waits for s1's work through the event, then copies back.
		if err := cuda.StreamWaitEvent(s2, done, 0); err != nil {
			return err
		}
		if err := cuda.MemcpyDtoHAsync(unsafe.Pointer(&reg[0]), bufs[0], n, s2); err != nil {
			return err
		}
		if err := cuda.StreamQuery(s2); err != nil && !errors.Is(err, cuda.ErrNotReady) {
			return err
		}
		if err := cuda.EventQuery(done); err != nil && !errors.Is(err, cuda.ErrNotReady) {
			return err
		}
		if err := cuda.StreamSynchronize(s2); err != nil {
			return err
		}
		if err := cuda.EventSynchronize(done); err != nil {
			return err
		}
		if err := cuda.StreamQuery(s1); err != nil {
			return fmt.Errorf("cuStreamQuery after synchronising: %v", err)
		}
		if err := cuda.EventQuery(done); err != nil {
			return fmt.Errorf("cuEventQuery after synchronising: %v", err)
		}
		if el, err := cuda.EventElapsedTime(start, done); err != nil || el < 0 || el > time.Minute {
			return fmt.Errorf("cuEventElapsedTime_v2: %v, %v", el, err)
		}
		runtime.KeepAlive(reg)
		for i := range reg {
			if reg[i] != src[i] {
				return fmt.Errorf("async copies: byte %d is %#x, want %#x", i, reg[i], src[i])
			}
		}
		return cuda.CtxSynchronize()
	})
	if err != nil {
		t.Fatal(err)
	}
}

const scaleKernel = `extern "C" __global__ void scale_add(float a, const float* x, float* y, unsigned long long n) {
	unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + y[i];
}`

// compile builds scaleKernel with NVRTC as a CUBIN for dev.
func compile(t *testing.T, dev cuda.Device) []byte {
	t.Helper()
	if _, err := nvrtc.Load(); err != nil {
		cudatest.SkipOrFail(t, "no NVRTC: %v", err)
	}
	major, _ := cuda.DeviceGetAttribute(cuda.AttrComputeCapabilityMajor, dev)
	minor, _ := cuda.DeviceGetAttribute(cuda.AttrComputeCapabilityMinor, dev)
	p, err := nvrtc.CreateProgram(scaleKernel, "scale_add.cu", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nvrtc.DestroyProgram(p)
	if err := nvrtc.CompileProgram(p, []string{fmt.Sprintf("-arch=sm_%d%d", major, minor)}); err != nil {
		log, _ := nvrtc.GetProgramLog(p)
		t.Fatalf("%v\n%s", err, log)
	}
	cubin, err := nvrtc.GetCUBIN(p)
	if err != nil {
		t.Fatal(err)
	}
	return cubin
}

func TestModuleAndLaunch(t *testing.T) {
	devs := cudatest.Require(t)
	cubin := compile(t, devs[0])
	ctx := cudatest.Context(t, devs[0])
	err := ctx.Do(func() error {
		if _, err := cuda.ModuleLoadData([]byte("not a module")); err == nil {
			return errors.New("cuModuleLoadData accepted garbage")
		}
		mod, err := cuda.ModuleLoadData(cubin)
		if err != nil {
			return err
		}
		defer cuda.ModuleUnload(mod)
		if _, err := cuda.ModuleGetFunction(mod, "no_such_kernel"); !errors.Is(err, cuda.ErrNotFound) {
			return fmt.Errorf("missing kernel: %v, want CUDA_ERROR_NOT_FOUND", err)
		}
		f, err := cuda.ModuleGetFunction(mod, "scale_add")
		if err != nil {
			return err
		}
		regs, err := cuda.FuncGetAttribute(cuda.FuncAttrNumRegs, f)
		if err != nil || regs <= 0 {
			return fmt.Errorf("cuFuncGetAttribute(NUM_REGS): %d, %v", regs, err)
		}
		maxThreads, err := cuda.FuncGetAttribute(cuda.FuncAttrMaxThreadsPerBlock, f)
		if err != nil || maxThreads < 256 {
			return fmt.Errorf("cuFuncGetAttribute(MAX_THREADS_PER_BLOCK): %d, %v", maxThreads, err)
		}

		const n = 100_003 // not a multiple of the block
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], y[i] = float32(i%1000), float32(3*(i%777)+1)
		}
		dx, err := cuda.MemAlloc(n * 4)
		if err != nil {
			return err
		}
		defer cuda.MemFree(dx)
		dy, err := cuda.MemAlloc(n * 4)
		if err != nil {
			return err
		}
		defer cuda.MemFree(dy)
		if err := cuda.MemcpyHtoD(dx, unsafe.Pointer(&x[0]), n*4); err != nil {
			return err
		}
		if err := cuda.MemcpyHtoD(dy, unsafe.Pointer(&y[0]), n*4); err != nil {
			return err
		}
		args := cuda.NewKernelArgs(4)
		defer args.Free()
		args.Float32(0.5).Ptr(dx).Ptr(dy).Uint64(n)
		block := uint32(256)
		grid := (uint32(n) + block - 1) / block
		if err := cuda.LaunchKernel(f, cuda.Dim3{X: grid, Y: 1, Z: 1}, cuda.Dim3{X: block, Y: 1, Z: 1}, 0, 0, args); err != nil {
			return err
		}
		// A block larger than the device allows fails at launch.
		if err := cuda.LaunchKernel(f, cuda.Dim3{X: 1, Y: 1, Z: 1}, cuda.Dim3{X: 4096, Y: 1, Z: 1}, 0, 0, args); err == nil {
			return errors.New("a 4096-thread block launched")
		}
		if err := cuda.CtxSynchronize(); err != nil {
			return err
		}
		got := make([]float32, n)
		if err := cuda.MemcpyDtoH(unsafe.Pointer(&got[0]), dy, n*4); err != nil {
			return err
		}
		for i := range got {
			if want := 0.5*x[i] + y[i]; got[i] != want {
				return fmt.Errorf("y[%d] = %v, want %v", i, got[i], want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestVirtualMemory(t *testing.T) {
	devs := cudatest.Require(t)
	ctx := cudatest.Context(t, devs[0])
	err := ctx.Do(func() error {
		prop := cuda.MemAllocationProp{
			Type:     cuda.MemAllocationPinned,
			Location: cuda.MemLocation{Type: cuda.MemLocationDevice, ID: int32(devs[0])},
		}
		gran, err := cuda.MemGetAllocationGranularity(&prop, cuda.GranularityMinimum)
		if err != nil || gran == 0 {
			return fmt.Errorf("cuMemGetAllocationGranularity: %d, %v", gran, err)
		}
		t.Logf("granularity %d bytes", gran)
		size := 2 * gran
		va, err := cuda.MemAddressReserve(2*size, 0, 0, 0)
		if err != nil {
			return err
		}
		defer cuda.MemAddressFree(va, 2*size)
		h, err := cuda.MemCreate(size, &prop, 0)
		if err != nil {
			return err
		}
		if err := cuda.MemMap(va+cuda.DevicePtr(size), size, 0, h, 0); err != nil {
			return err
		}
		if err := cuda.MemRelease(h); err != nil { // the mapping keeps the memory
			return err
		}
		access := []cuda.MemAccessDesc{{Location: prop.Location, Flags: cuda.MemAccessReadWrite}}
		if err := cuda.MemSetAccess(va+cuda.DevicePtr(size), size, access); err != nil {
			return err
		}
		if err := cuda.MemsetD8(va+cuda.DevicePtr(size), 0x5A, size); err != nil {
			return err
		}
		got := make([]byte, size)
		if err := cuda.MemcpyDtoH(unsafe.Pointer(&got[0]), va+cuda.DevicePtr(size), size); err != nil {
			return err
		}
		for i, b := range got {
			if b != 0x5A {
				return fmt.Errorf("mapped byte %d is %#x", i, b)
			}
		}
		return cuda.MemUnmap(va+cuda.DevicePtr(size), size)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPeer copies between the first two GPUs with peer access on; it
// skips on a machine with one GPU even when CUDA is required.
func TestPeer(t *testing.T) {
	devs := cudatest.Require(t)
	if len(devs) < 2 {
		t.Skip("one GPU")
	}
	can, err := cuda.DeviceCanAccessPeer(devs[0], devs[1])
	if err != nil {
		t.Fatal(err)
	}
	ctx0, ctx1 := cudatest.Context(t, devs[0]), cudatest.Context(t, devs[1])
	const n = 8 << 20
	var p0, p1 cuda.DevicePtr
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i * 13)
	}
	err = ctx1.Do(func() error {
		if can {
			if err := cuda.CtxEnablePeerAccess(ctx0, 0); err != nil && !errors.Is(err, cuda.ErrPeerAccessAlreadyEnabled) {
				return err
			}
		}
		if p1, err = cuda.MemAlloc(n); err != nil {
			return err
		}
		return cuda.MemsetD8(p1, 0, n)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx1.Do(func() error { return cuda.MemFree(p1) })
	err = ctx0.Do(func() error {
		if can {
			if err := cuda.CtxEnablePeerAccess(ctx1, 0); err != nil && !errors.Is(err, cuda.ErrPeerAccessAlreadyEnabled) {
				return err
			}
			if err := cuda.CtxEnablePeerAccess(ctx1, 0); !errors.Is(err, cuda.ErrPeerAccessAlreadyEnabled) {
				return fmt.Errorf("enabling peer access twice: %v", err)
			}
		}
		if p0, err = cuda.MemAlloc(n); err != nil {
			return err
		}
		defer cuda.MemFree(p0)
		if err := cuda.MemcpyHtoD(p0, unsafe.Pointer(&src[0]), n); err != nil {
			return err
		}
		s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			return err
		}
		defer cuda.StreamDestroy(s)
		if err := cuda.MemcpyPeerAsync(p1, ctx1, p0, ctx0, n, s); err != nil {
			return err
		}
		return cuda.StreamSynchronize(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	err = ctx1.Do(func() error { return cuda.MemcpyDtoH(unsafe.Pointer(&got[0]), p1, n) })
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != src[i] {
			t.Fatalf("peer copy: byte %d is %#x, want %#x", i, got[i], src[i])
		}
	}
	t.Logf("copied %d MiB GPU 0 -> GPU 1 (peer access %v)", n>>20, can)
}

// TestStreamPriorities creates streams at the least and the greatest
// priority of the context's range, reads each priority back and destroys
// them; a priority beyond the range is clamped to it.
func TestStreamPriorities(t *testing.T) {
	devs := cudatest.Require(t)
	ctx := cudatest.Context(t, devs[0])
	err := ctx.Do(func() error {
		least, greatest, err := cuda.CtxGetStreamPriorityRange()
		if err != nil {
			return err
		}
		if greatest > least {
			return fmt.Errorf("cuCtxGetStreamPriorityRange: least %d, greatest %d: greatest must not be larger", least, greatest)
		}
		t.Logf("stream priorities from %d (least) to %d (greatest)", least, greatest)
		tests := []struct {
			name           string
			flags          uint32
			priority, want int
		}{
			{"least", cuda.StreamNonBlocking, least, least},
			{"greatest", cuda.StreamNonBlocking, greatest, greatest},
			{"default flags at greatest", cuda.StreamDefault, greatest, greatest},
			{"below the range", cuda.StreamNonBlocking, least + 100, least},
			{"above the range", cuda.StreamNonBlocking, greatest - 100, greatest},
			{"beyond a C int", cuda.StreamNonBlocking, math.MinInt64, greatest},
		}
		for _, tc := range tests {
			s, err := cuda.StreamCreateWithPriority(tc.flags, tc.priority)
			if err != nil {
				return fmt.Errorf("%s: cuStreamCreateWithPriority(%d): %w", tc.name, tc.priority, err)
			}
			got, err := cuda.StreamGetPriority(s)
			if err == nil && got != tc.want {
				err = fmt.Errorf("priority %d, want %d", got, tc.want)
			}
			if err == nil {
				err = cuda.StreamSynchronize(s) // the stream works
			}
			if derr := cuda.StreamDestroy(s); err == nil {
				err = derr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", tc.name, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHostAllocAndEventFlags copies through cuMemHostAlloc memory with
// each flag, timed with events, and checks that an event created with
// CU_EVENT_DISABLE_TIMING cannot be timed.
func TestHostAllocAndEventFlags(t *testing.T) {
	devs := cudatest.Require(t)
	ctx := cudatest.Context(t, devs[0])
	err := ctx.Do(func() error {
		const n = 1 << 20
		dev, err := cuda.MemAlloc(n)
		if err != nil {
			return err
		}
		defer cuda.MemFree(dev)
		s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			return err
		}
		defer cuda.StreamDestroy(s)
		start, err := cuda.EventCreate(cuda.EventDefault)
		if err != nil {
			return err
		}
		defer cuda.EventDestroy(start)
		end, err := cuda.EventCreate(cuda.EventBlockingSync)
		if err != nil {
			return err
		}
		defer cuda.EventDestroy(end)
		untimed, err := cuda.EventCreate(cuda.EventDisableTiming | cuda.EventBlockingSync)
		if err != nil {
			return err
		}
		defer cuda.EventDestroy(untimed)

		for _, flags := range []uint32{0, cuda.HostAllocPortable, cuda.HostAllocDeviceMap,
			cuda.HostAllocWriteCombined, cuda.HostAllocPortable | cuda.HostAllocDeviceMap} {
			host, err := cuda.MemHostAlloc(n, flags)
			if err != nil {
				return fmt.Errorf("cuMemHostAlloc(flags %#x): %w", flags, err)
			}
			buf := unsafe.Slice((*byte)(host), n)
			for i := range buf {
				buf[i] = byte(i*31 + int(flags))
			}
			err = errors.Join(
				cuda.EventRecord(start, s),
				cuda.MemcpyHtoDAsync(dev, host, n, s),
				cuda.MemsetD8Async(dev, 0, 1, s),
				cuda.MemcpyDtoHAsync(host, dev, n, s),
				cuda.EventRecord(end, s),
				cuda.EventRecord(untimed, s),
				cuda.EventSynchronize(end),
				cuda.EventSynchronize(untimed),
			)
			if err == nil {
				if buf[0] != 0 || buf[1] != byte(31+int(flags)) || buf[n-1] != byte((n-1)*31+int(flags)) {
					err = fmt.Errorf("round trip through flags %#x: bytes %#x %#x %#x", flags, buf[0], buf[1], buf[n-1])
				}
			}
			if err == nil {
				var el time.Duration
				if el, err = cuda.EventElapsedTime(start, end); err == nil && (el < 0 || el > time.Minute) {
					err = fmt.Errorf("cuEventElapsedTime_v2: %v", el)
				}
			}
			if err == nil {
				if _, terr := cuda.EventElapsedTime(start, untimed); !errors.Is(terr, cuda.ErrInvalidHandle) {
					err = fmt.Errorf("timing an event made with CU_EVENT_DISABLE_TIMING: %v, want CUDA_ERROR_INVALID_HANDLE", terr)
				}
			}
			if ferr := cuda.MemFreeHost(host); err == nil {
				err = ferr
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
