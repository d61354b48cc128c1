package cuda

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/cuda"
)

// GPU tests skip without a driver and GPU, and fail instead when
// VRAM_REQUIRE_CUDA=1 (as scripts/gpu-test.sh sets on the GPU machine).

func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("VRAM_REQUIRE_CUDA") == "1" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// gpu returns cuda:i with every kernel compiled, or skips.
func gpu(t testing.TB, i int) *Device {
	t.Helper()
	n, err := Probe()
	if n == 0 {
		skipOrFail(t, "no GPU: %v", err)
	}
	if i >= n {
		t.Skipf("needs %d GPUs, have %d", i+1, n)
	}
	d, err := Open(i)
	if err != nil {
		t.Fatal(err)
	}
	precompileOnce(t, d)
	return d
}

var precompiled = map[int]bool{}

func precompileOnce(t testing.TB, d *Device) {
	if precompiled[d.index] {
		return
	}
	start := time.Now()
	if err := d.Precompile(); err != nil {
		t.Fatalf("Precompile: %v", err)
	}
	precompiled[d.index] = true
	t.Logf("cuda:%d (%s, sm_%d, %d SMs): %d kernel modules ready in %v", d.index, d.name, d.arch, d.sms, len(allModules()), time.Since(start))
}

func TestBackendWithoutGPU(t *testing.T) {
	b := &Backend{}
	if b.Name() != "cuda" {
		t.Errorf("Name = %q", b.Name())
	}
	n := b.DeviceCount() // never panics
	if _, err := b.Device(n); err == nil {
		t.Errorf("Device(%d) of %d: no error", n, n)
	}
	if n == 0 {
		if _, err := Probe(); err == nil {
			t.Error("Probe: no GPU but no reason")
		}
	}
}

func TestConformance(t *testing.T) {
	d := gpu(t, 0)
	backendtest.RunOptions(t, d, backendtest.Options{AllowNotImplemented: false})
}

// memInfo returns the free bytes on the card.
func memInfo(t *testing.T, d *Device) int64 {
	t.Helper()
	m, err := d.arena.(memory.DeviceInfo).MemoryInfo()
	if err != nil {
		t.Fatal(err)
	}
	return m.Free
}

func TestAllocatorOnRealMemory(t *testing.T) {
	d := gpu(t, 0)
	a := d.Allocator()
	a.EmptyCache()
	const size = 1 << 30
	before := memInfo(t, d)
	b, err := d.Alloc(size, d.DefaultStream(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Fill(backend.View{Buf: b, DType: backend.Float32, Shape: []int{size / 4}, Strides: []int{1}}, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	used := memInfo(t, d)
	if before-used < size {
		t.Errorf("free memory went from %d to %d after allocating %d", before, used, size)
	}
	d.Free(b, d.DefaultStream())
	if after := memInfo(t, d); before-after < size {
		t.Errorf("free memory went back to %d after Free (was %d, %d with the buffer): the cache should keep it", after, before, used)
	}
	a.EmptyCache()
	if after := memInfo(t, d); before-after > 64<<20 {
		t.Errorf("free memory %d after EmptyCache, %d before the allocation", after, before)
	}
	t.Logf("policy %v: free %d -> %d (allocated) -> %d (freed + EmptyCache)", a.Config().Policy, before, used, memInfo(t, d))
}

func TestOutOfMemory(t *testing.T) {
	d := gpu(t, 0)
	_, err := d.Alloc(4*d.total, d.DefaultStream(), "too big")
	var oom *memory.OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatalf("Alloc(4x the card): %v, want *memory.OutOfMemoryError", err)
	}
	t.Logf("the OOM error:\n%v", err)
	// Fill the card in 8 GiB steps until it refuses, capped.
	var held []backend.Buffer
	for range 40 {
		b, err := d.Alloc(8<<30, d.DefaultStream(), "fill")
		if err != nil {
			if !errors.As(err, &oom) {
				t.Fatalf("filling the card: %v, want *memory.OutOfMemoryError", err)
			}
			break
		}
		held = append(held, b)
	}
	if len(held) == 40 {
		t.Errorf("320 GiB allocated without an OOM")
	}
	for _, b := range held {
		d.Free(b, d.DefaultStream())
	}
	d.Allocator().EmptyCache()
	b, err := d.Alloc(1<<20, d.DefaultStream(), "after")
	if err != nil {
		t.Fatalf("allocating after an OOM: %v", err)
	}
	d.Free(b, d.DefaultStream())
	t.Logf("filled %d x 8 GiB before the OOM", len(held))
}

func TestHostCopies(t *testing.T) {
	d := gpu(t, 0)
	for _, n := range []int{1, 1000, stageThreshold - 8, stageThreshold, 3*stageChunk + 12345} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*7 + i>>9)
		}
		buf, err := d.Alloc(int64(n), d.DefaultStream(), "")
		if err != nil {
			t.Fatal(err)
		}
		v := backend.View{Buf: buf, DType: backend.Bool, Shape: []int{n}, Strides: []int{1}}
		if err := d.CopyFromHost(v, src); err != nil {
			t.Fatal(err)
		}
		for _, pinnedDst := range []bool{false, true} {
			var dst []byte
			if pinnedDst {
				if dst, err = d.AllocHost(n); err != nil {
					t.Fatal(err)
				}
			} else {
				dst = make([]byte, n)
			}
			if err := d.CopyToHost(dst, v); err != nil {
				t.Fatal(err)
			}
			for i := range src {
				if src[i] != dst[i] {
					t.Fatalf("%d bytes (pinned %v): byte %d = %d, want %d", n, pinnedDst, i, dst[i], src[i])
				}
			}
			if pinnedDst {
				d.FreeHost(dst)
			}
		}
		d.Free(buf, d.DefaultStream())
	}
}

func TestPeerCopy(t *testing.T) {
	d0, d1 := gpu(t, 0), gpu(t, 1)
	n := 5 << 20
	src := backendtest.NewView(t, d0, backend.Float32, []int{n}, make([]float64, n))
	if err := d0.Fill(src, 2.5); err != nil {
		t.Fatal(err)
	}
	dst := backendtest.NewView(t, d1, backend.Float32, []int{n}, make([]float64, n))
	if err := d0.CopyPeer(dst, d1, src); err != nil {
		t.Fatal(err)
	}
	got := backendtest.ReadView(t, d1, dst)
	for i, x := range got {
		if x != 2.5 {
			t.Fatalf("element %d = %v after the peer copy", i, x)
		}
	}
}

func TestKernelCacheOnDisk(t *testing.T) {
	gpu(t, 0)
	dir := cacheDir()
	if dir == "" {
		t.Skip("disk cache off")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < len(allModules()) {
		t.Errorf("%s holds %d files for %d modules", dir, len(entries), len(allModules()))
	}
}

// TestAsyncError runs a kernel that writes far outside its buffer in a
// child process (the sticky error kills the context for the rest of the
// process) and checks that the error says so and that later ops fail fast.
func TestAsyncError(t *testing.T) {
	if os.Getenv("VRAM_CUDA_CRASH_CHILD") == "1" {
		crashChild(t)
		return
	}
	gpu(t, 0)
	cmd := exec.Command(os.Args[0], "-test.run=^TestAsyncError$", "-test.v")
	cmd.Env = append(os.Environ(), "VRAM_CUDA_CRASH_CHILD=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("child failed: %v", err)
	}
}

func crashChild(t *testing.T) {
	d := gpu(t, 0)
	b, err := d.Alloc(1024, d.DefaultStream(), "")
	if err != nil {
		t.Fatal(err)
	}
	bad := backend.View{Buf: b, DType: backend.Float32, Shape: []int{1 << 20}, Strides: []int{1}, Offset: 1 << 40}
	err = d.Fill(bad, 1)
	if err == nil {
		err = d.Synchronize()
	}
	var lost *ContextLostError
	if !errors.As(err, &lost) {
		t.Fatalf("after an illegal write: %v, want *ContextLostError", err)
	}
	t.Logf("error: %v", err)
	var ce *cuda.Error
	if !errors.As(err, &ce) {
		t.Errorf("the error does not wrap the driver's: %v", err)
	}
	start := time.Now()
	err2 := d.Fill(backend.View{Buf: b, DType: backend.Float32, Shape: []int{4}, Strides: []int{1}}, 1)
	if !errors.As(err2, &lost) {
		t.Errorf("a later op: %v, want *ContextLostError", err2)
	}
	if _, err := d.Alloc(1<<30, d.DefaultStream(), ""); !errors.As(err, &lost) {
		t.Errorf("a later allocation: %v, want *ContextLostError", err)
	}
	t.Logf("later op failed in %v", time.Since(start))
}

// TestBadAllocConfNamedOnce opens cuda:0 in a new process with an invalid
// VRAM_ALLOC_CONF (devices open once per process): the error must name the
// variable once and be a *memory.ConfigError.
func TestBadAllocConfNamedOnce(t *testing.T) {
	if os.Getenv("VRAM_TEST_BAD_CONF_CHILD") == "1" {
		_, err := Open(0)
		var ce *memory.ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("Open(0) with VRAM_ALLOC_CONF=bogus: %v, want a *memory.ConfigError", err)
		}
		if msg := err.Error(); strings.Count(msg, "VRAM_ALLOC_CONF") != 1 || !strings.Contains(msg, "cuda:0") {
			t.Fatalf("Open(0): %q, want cuda:0 and VRAM_ALLOC_CONF named once", msg)
		}
		return
	}
	if n, err := Probe(); n == 0 {
		skipOrFail(t, "no GPU: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBadAllocConfNamedOnce$")
	cmd.Env = append(os.Environ(), "VRAM_TEST_BAD_CONF_CHILD=1", "VRAM_ALLOC_CONF=bogus")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
