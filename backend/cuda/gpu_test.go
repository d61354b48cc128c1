package cuda

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/load"
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

// TestAllocatorOnRealMemory checks the caching allocator against the
// driver's free memory (cuMemGetInfo): allocating takes from the card only
// what the allocator's reserve grew by, Free gives nothing back (the cache
// keeps the block), and EmptyCache gives back what the allocation mapped.
// Earlier tests in the process leave blocks live, so EmptyCache at the start
// cannot empty the cache: a free block that shares a mapping (policy:vram
// maps up to 1 GiB as one chunk) or a fixed segment with a live block stays,
// and the allocation may reuse it. The checks therefore compare the drop in
// free memory with the growth of the reserve, not with the size asked for;
// memory's TestCacheKeepsFreedMemory runs the same sequence on a simulated
// device, with such leftovers, under every policy.
func TestAllocatorOnRealMemory(t *testing.T) {
	d := gpu(t, 0)
	a := d.Allocator()
	const size = 1 << 30
	// The driver's free memory moves a little on its own (page tables,
	// other processes): allow 64 MiB.
	const slack = 64 << 20
	reserved := func() int64 { return a.Stats().ReservedBytes[memory.StatAll].Current }
	a.EmptyCache()
	before, r0 := memInfo(t, d), reserved()
	cached := r0 - a.Stats().AllocatedBytes[memory.StatAll].Current
	b, err := d.Alloc(size, d.DefaultStream(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Fill(d.DefaultStream(), backend.View{Buf: b, DType: backend.Float32, Shape: []int{size / 4}, Strides: []int{1}}, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	used, r1 := memInfo(t, d), reserved()
	t.Logf("policy %v: before: free %d, reserved %d (%d cached that EmptyCache could not give back: free parts of mappings or segments shared with live blocks)",
		a.Config().Policy, before, r0, cached)
	t.Logf("allocated %d: free %d (-%d), reserved %d (+%d)", size, used, before-used, r1, r1-r0)
	if grew, drop := r1-r0, before-used; drop < grew-slack || drop > grew+slack {
		t.Errorf("free memory dropped by %d after allocating %d, but the reserve grew by %d: the allocator's accounting disagrees with the driver", drop, size, grew)
	}
	if r1-r0+cached < size {
		t.Errorf("the reserve grew by %d with %d cached before: not enough for %d bytes", r1-r0, cached, size)
	}
	d.Free(b, d.DefaultStream())
	after, r2 := memInfo(t, d), reserved()
	t.Logf("freed: free %d, reserved %d", after, r2)
	if r2 != r1 {
		t.Errorf("the reserve went from %d to %d at Free: the cache should keep the block", r1, r2)
	}
	if after > used+slack {
		t.Errorf("free memory went from %d to %d at Free (%d before the allocation): the cache should keep the block", used, after, before)
	}
	a.EmptyCache()
	emptied, r3 := memInfo(t, d), reserved()
	t.Logf("EmptyCache: free %d, reserved %d", emptied, r3)
	if r3 > r0 {
		t.Errorf("the reserve is %d after EmptyCache, %d before the allocation: EmptyCache kept what it mapped", r3, r0)
	}
	if emptied < before-slack {
		t.Errorf("free memory %d after EmptyCache, %d before the allocation", emptied, before)
	}
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
		if err := d.CopyFromHost(d.DefaultStream(), v, src); err != nil {
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
			if err := d.CopyToHost(d.DefaultStream(), dst, v); err != nil {
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
	if err := d0.Fill(d0.DefaultStream(), src, 2.5); err != nil {
		t.Fatal(err)
	}
	dst := backendtest.NewView(t, d1, backend.Float32, []int{n}, make([]float64, n))
	if err := d0.CopyPeer(d0.DefaultStream(), dst, d1, d1.DefaultStream(), src); err != nil {
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
	err = d.Fill(d.DefaultStream(), bad, 1)
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
	err2 := d.Fill(d.DefaultStream(), backend.View{Buf: b, DType: backend.Float32, Shape: []int{4}, Strides: []int{1}}, 1)
	if !errors.As(err2, &lost) {
		t.Errorf("a later op: %v, want *ContextLostError", err2)
	}
	if _, err := d.Alloc(1<<30, d.DefaultStream(), ""); !errors.As(err, &lost) {
		t.Errorf("a later allocation: %v, want *ContextLostError", err)
	}
	t.Logf("later op failed in %v", time.Since(start))
}

// TestOptions sets the backend's options in a new process, before the
// driver is probed (options are fixed once per process): they reach the
// library search, the kernel cache and, on a GPU, each device's allocator;
// after the probe only the same options are accepted. Invalid options are
// refused with the field named, and change nothing.
func TestOptions(t *testing.T) {
	if os.Getenv("VRAM_TEST_CUDA_OPTIONS_CHILD") == "1" {
		optionsChild(t)
		return
	}
	bad := []struct {
		opts Options
		want string
	}{
		{Options{Alloc: memory.Config{MaxSplitSizeMB: -1}}, "cuda: Options.Alloc: memory: Config.MaxSplitSizeMB = -1"},
		{Options{DeviceAlloc: map[int]memory.Config{2: {PerProcessMemoryFraction: 3}}}, "cuda: Options.DeviceAlloc[2]: memory: Config.PerProcessMemoryFraction = 3"},
		{Options{DeviceAlloc: map[int]memory.Config{-1: {}}}, "cuda: Options.DeviceAlloc[-1]: a negative device index"},
		{Options{KernelCache: "a\x00b"}, "cuda: Options.KernelCache"},
		{Options{Libs: []string{"/opt/cuda", ""}}, `cuda: Options.Libs[1] = ""`},
	}
	before := Configured()
	for _, tc := range bad {
		if err := Configure(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Configure(%+v): %v, want an error containing %q", tc.opts, err, tc.want)
		}
	}
	if after := Configured(); !after.equal(before) {
		t.Errorf("refused options changed the options from %+v to %+v", before, after)
	}
	if testing.Short() {
		t.Skip("starts a process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOptions$", "-test.v")
	cmd.Env = append(os.Environ(), "VRAM_TEST_CUDA_OPTIONS_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
}

func optionsChild(t *testing.T) {
	dir := t.TempDir()
	opts := Options{
		Alloc:       memory.Config{GarbageCollectionThreshold: 0.75},
		DeviceAlloc: map[int]memory.Config{0: {Policy: memory.PolicyPyTorch, MaxSplitSizeMB: 256}},
		KernelCache: dir,
		Libs:        []string{dir},
	}
	if err := Configure(Options{KernelCache: "off"}); err != nil {
		t.Fatal(err)
	}
	if err := Configure(opts); err != nil { // the last options before the probe win
		t.Fatal(err)
	}
	if got := Configured(); !got.equal(opts) {
		t.Fatalf("Configured() = %+v, want %+v", got, opts)
	}
	if got := cacheDir(); got != dir {
		t.Errorf("kernel cache %q, want %q", got, dir)
	}
	if got := load.Dirs(); !slices.Equal(got, []string{dir}) {
		t.Errorf("library search directories %q, want %q", got, dir)
	}
	n, err := Probe()
	if err := Configure(Options{}); err == nil || !strings.Contains(err.Error(), "options are fixed") {
		t.Errorf("other options after the probe: %v, want an error", err)
	}
	if err := Configure(opts); err != nil {
		t.Errorf("the same options after the probe: %v", err)
	}
	if n == 0 {
		skipOrFail(t, "no GPU for the per-device settings: %v", err)
	}
	for i := range min(n, 2) {
		d, err := Open(i)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := d.Allocator().Config(), opts.allocFor(i); got != want {
			t.Errorf("cuda:%d: allocator settings %+v, want %+v", i, got, want)
		}
	}
}

// TestZeroByteBufferTakesNoMemory checks that a zero-byte buffer takes
// nothing from the caching allocator, that kernels and copies on empty
// views of it work (a sum over no elements is 0) without touching its
// address, and that a view with elements on it is refused.
func TestZeroByteBufferTakesNoMemory(t *testing.T) {
	d := gpu(t, 0)
	s := d.DefaultStream()
	before := d.Allocator().Stats()
	empty, err := d.Alloc(0, s, "test")
	if err != nil {
		t.Fatal(err)
	}
	if after := d.Allocator().Stats(); after.AllocatedBytes != before.AllocatedBytes || after.Allocation != before.Allocation {
		t.Fatalf("Alloc(0) changed the allocator's stats: allocated %v -> %v", before.AllocatedBytes, after.AllocatedBytes)
	}
	out, err := d.Alloc(12, s, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(out, s)
	src := backend.View{Buf: empty, DType: backend.Float32, Shape: []int{3, 0}, Strides: []int{0, 1}}
	dst := backend.View{Buf: out, DType: backend.Float32, Shape: []int{3, 1}, Strides: []int{1, 1}}
	if err := d.Fill(s, src, 7); err != nil {
		t.Fatalf("Fill of an empty view: %v", err)
	}
	if err := d.Fill(s, dst, 5); err != nil {
		t.Fatal(err)
	}
	if err := d.Reduce(s, backend.Sum, dst, src, []int{1}); err != nil {
		t.Fatalf("sum over an empty axis: %v", err)
	}
	if err := d.CopyFromHost(s, backend.View{Buf: empty, DType: backend.Float32, Shape: []int{0}, Strides: []int{1}}, nil); err != nil {
		t.Fatalf("copy of no bytes: %v", err)
	}
	host := make([]byte, 12)
	if err := d.CopyToHost(s, host, backend.View{Buf: out, DType: backend.Float32, Shape: []int{3}, Strides: []int{1}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(host, make([]byte, 12)) {
		t.Fatalf("sum over an empty axis = % x, want zeros", host)
	}
	bad := backend.View{Buf: empty, DType: backend.Float32, Shape: []int{1}, Strides: []int{1}}
	if err := d.Fill(s, bad, 1); err == nil {
		t.Fatal("Fill of a 1-element view of a zero-byte buffer succeeded")
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	d.Free(empty, s)
}
