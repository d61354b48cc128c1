package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/selftest"
	"github.com/vramgo/vram/internal/units"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/load"
)

// SelfTestReport is what [SelfTest] found on this machine: the driver,
// the libraries vram loads, every GPU with its checks, and the copies
// between GPUs.
type SelfTestReport struct {
	Driver    DriverInfo    `json:"driver"`
	Libraries []LibraryInfo `json:"libraries"`
	// GPUs lists the GPUs in CUDA's numbering (CUDA_VISIBLE_DEVICES
	// applies); empty when the driver cannot be used or sees none.
	GPUs []GPUSelfTest `json:"gpus"`
	// NoGPU says why GPUs is empty while the driver works ("the driver
	// reports no GPU"); "" otherwise.
	NoGPU string `json:"no_gpu,omitempty"`
	// PeerAccess[i][j] reports whether GPU i can access GPU j's memory
	// directly; false on the diagonal.
	PeerAccess [][]bool `json:"peer_access"`
	// PeerCopies are the copies between neighbouring GPUs (0->1, 1->0
	// on two GPUs; i->i+1 around the ring on more), or one skipped check
	// saying why there are none.
	PeerCopies []selftest.Check `json:"peer_copies"`
}

// GPUSelfTest describes one GPU and the checks that ran on it.
type GPUSelfTest struct {
	Index             int    `json:"index"`
	Name              string `json:"name"`
	UUID              string `json:"uuid"`
	ComputeCapability string `json:"compute_capability"` // e.g. "9.0"
	Multiprocessors   int    `json:"multiprocessors"`
	// Memory is the GPU's memory after the checks, with this process's
	// allocator reserve.
	Memory memory.DeviceMemory `json:"memory"`
	Checks []selftest.Check    `json:"checks"`
}

// Problem returns, in one line, why no GPU could be tested: the driver's
// error, or why it sees no GPU; "" when GPUs were tested.
func (r *SelfTestReport) Problem() string {
	switch {
	case !r.Driver.Usable:
		return r.Driver.Error
	case len(r.GPUs) == 0:
		return r.NoGPU
	}
	return ""
}

// Failed counts what is wrong: a driver that cannot be used or sees no
// GPU, each library vram needs that did not load, each failed check and
// each failed peer copy. A machine where vram runs on every GPU has 0.
func (r *SelfTestReport) Failed() int {
	n := 0
	if r.Problem() != "" {
		n++
	}
	for _, l := range r.Libraries {
		if !l.Found && !l.Optional {
			n++
		}
	}
	for _, g := range r.GPUs {
		n += selftest.Failed(g.Checks)
	}
	return n + selftest.Failed(r.PeerCopies)
}

// SelfTest finds the driver and the CUDA libraries, says where each was
// found (or what to install), and runs the self-test of every GPU through
// the same paths that tensors use ([Device.SelfTest]), then copies between
// neighbouring GPUs. It never panics; what went wrong is in the report.
// The GPUs' allocator caches are emptied on the way.
func SelfTest() *SelfTestReport { return selfTest(cuda.Load) }

// selfTest is SelfTest with the driver loaded by loadDriver.
func selfTest(loadDriver func() (*load.Library, error)) *SelfTestReport {
	rep := &SelfTestReport{Libraries: []LibraryInfo{}, GPUs: []GPUSelfTest{}, PeerAccess: [][]bool{}, PeerCopies: []selftest.Check{}}
	var major int
	rep.Driver, major = discoverDriver(loadDriver)
	if !rep.Driver.Usable {
		rep.PeerCopies = append(rep.PeerCopies, selftest.Skipped("peer copies", "no usable NVIDIA driver"))
		return rep
	}
	rep.Libraries = libraries(major)
	n, err := Probe()
	if n == 0 {
		rep.NoGPU = "the driver sees no GPU"
		if err != nil {
			rep.NoGPU = oneLine(err.Error())
		}
	}
	for i := range n {
		rep.GPUs = append(rep.GPUs, gpuSelfTest(i))
	}
	rep.PeerAccess = make([][]bool, n)
	for i := range rep.PeerAccess {
		rep.PeerAccess[i] = make([]bool, n)
		for j := range rep.PeerAccess[i] {
			if i != j {
				rep.PeerAccess[i][j], _ = cuda.DeviceCanAccessPeer(cuda.Device(i), cuda.Device(j))
			}
		}
	}
	if n < 2 {
		rep.PeerCopies = append(rep.PeerCopies, selftest.Skipped("peer copies", fmt.Sprintf("%d GPU: peer copies need two", n)))
		return rep
	}
	for i := 0; i < n; i++ {
		j := (i + 1) % n
		rep.PeerCopies = append(rep.PeerCopies, peerCopy(i, j))
	}
	return rep
}

// gpuSelfTest opens GPU i and runs its self-test.
func gpuSelfTest(i int) GPUSelfTest {
	g := GPUSelfTest{Index: i}
	d, err := Open(i)
	if err != nil {
		g.Name, _ = cuda.DeviceGetName(cuda.Device(i))
		g.Checks = []selftest.Check{{Name: "open", Status: selftest.Fail, Detail: oneLine(err.Error())}}
		return g
	}
	g.Name, g.Multiprocessors = d.name, d.sms
	g.ComputeCapability = fmt.Sprintf("%d.%d", d.arch/10, d.arch%10)
	if u, err := cuda.DeviceGetUUID(d.dev); err == nil {
		g.UUID = u.String()
	}
	g.Checks = d.SelfTest()
	if m, err := d.MemoryInfo(); err == nil {
		m.Reserved = d.alloc.Stats().ReservedBytes[memory.StatAll].Current
		g.Memory = m
	} else {
		g.Memory = memory.DeviceMemory{Device: fmt.Sprintf("cuda:%d", i), Total: d.total, Free: -1, ThisProcess: -1}
	}
	return g
}

// SelfTest runs the checks of one GPU through the paths that tensors use:
// allocation, copies (pageable and page-locked host memory), the kernel
// compiler and its disk cache, the elementwise and reduction kernels, a
// cuBLASLt product and a cuDNN convolution against the host, the caching
// allocator, and a final synchronization. A missing NVRTC fails the compiler check and skips the
// kernels; a missing cuBLASLt fails the cuBLASLt check; a missing cuDNN
// skips the cuDNN check (convolutions then use the composed path). It empties the
// allocator's cache; run it while nothing else allocates on the device.
func (d *Device) SelfTest() []selftest.Check {
	var kernels selftest.Check
	if err := loadNVRTC(); err != nil {
		kernels = selftest.Skipped("kernels", "they need NVRTC, which did not load (see the kernel compiler check)")
	} else {
		kernels = selftest.Kernels(d)
	}
	return []selftest.Check{
		selftest.Alloc(d),
		selftest.Copies(d),
		d.checkPinned(),
		d.checkCompiler(),
		kernels,
		d.checkCuBLASLt(),
		d.checkCuDNN(),
		selftest.Allocator(d.alloc, memory.Stream(d.def.cs)),
		selftest.Sync(d),
	}
}

// selfTestCopyBytes is the size of the pinned and peer copies.
const selfTestCopyBytes = 16 << 20

// rate formats n bytes moved in el as GB/s.
func rate(n int, el time.Duration) string {
	if el <= 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f GB/s", float64(n)/el.Seconds()/1e9)
}

// checkPinned copies 16 MiB from page-locked host memory to the device and
// back into page-locked memory: the path of pin_memory and non-blocking
// copies, without staging buffers.
func (d *Device) checkPinned() selftest.Check {
	return selftest.Run("pinned copies", func() (string, error) {
		const n = selfTestCopyBytes
		src, err := d.AllocHost(n)
		if err != nil {
			return "", err
		}
		defer d.FreeHost(src)
		dst, err := d.AllocHost(n)
		if err != nil {
			return "", err
		}
		defer d.FreeHost(dst)
		copy(src, selftest.RandomBytes(n, 7))
		s := d.DefaultStream()
		b, err := d.Alloc(n, s, selftest.Region)
		if err != nil {
			return "", err
		}
		defer d.Free(b, s)
		v := backend.View{Buf: b, DType: backend.Int32, Shape: []int{n / 4}, Strides: []int{1}}
		start := time.Now()
		if err := d.CopyFromHost(d.DefaultStream(), v, src); err != nil {
			return "", fmt.Errorf("host to device: %w", err)
		}
		if err := d.CopyToHost(d.DefaultStream(), dst, v); err != nil {
			return "", fmt.Errorf("device to host: %w", err)
		}
		el := time.Since(start)
		if i := selftest.FirstDiff(dst, src); i >= 0 {
			return "", fmt.Errorf("byte %d came back as %#x, sent %#x", i, dst[i], src[i])
		}
		return fmt.Sprintf("%s page-locked host->device->host identical in %.1f ms (%s)", units.Bytes(n), float64(el.Microseconds())/1000, rate(2*n, el)), nil
	})
}

// checkCompiler compiles a module of vram's kernels with NVRTC for the
// GPU's architecture, bypassing every cache; writes it to a disk cache in
// a temporary directory and reads it back the way a device looks modules
// up; loads it into the GPU's context and finds its kernel. The detail
// also says where the configured kernel cache is and whether it can be
// written.
func (d *Device) checkCompiler() selftest.Check {
	return selftest.Run("kernel compiler", func() (string, error) {
		if err := loadNVRTC(); err != nil {
			return "", err
		}
		k := modKey{fam: famBytes, op: "check"}
		src, opts := source(k.fam), compileOptions(k, d.arch)
		start := time.Now()
		img, err := compile(k, src, opts)
		if err != nil {
			return "", err
		}
		took := time.Since(start)
		dir, err := os.MkdirTemp("", "vram-selftest-")
		if err != nil {
			return "", fmt.Errorf("a temporary kernel cache: %w", err)
		}
		defer os.RemoveAll(dir)
		path := cachePath(dir, cacheKey(src, opts, d.arch))
		if err := writeAtomic(dir, path, img); err != nil {
			return "", fmt.Errorf("writing the kernel cache in %s: %w", dir, err)
		}
		back, ok := readCached(path)
		if !ok || !bytes.Equal(back, img) {
			return "", fmt.Errorf("the module written to the kernel cache in %s did not come back intact", dir)
		}
		if err := d.loadModule(back, "check_index"); err != nil {
			return "", err
		}
		return fmt.Sprintf("NVRTC %s compiled %s for sm_%d in %.0f ms (%d KiB CUBIN); written to a disk cache, read back identical and loaded; %s",
			nvrtcVer, k, d.arch, float64(took.Microseconds())/1000, len(img)>>10, cacheNote()), nil
	})
}

// loadModule loads the CUBIN img into the device's context, looks up the
// kernel name in it, and unloads it.
func (d *Device) loadModule(img []byte, name string) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	mod, err := cuda.ModuleLoadData(img)
	if err != nil {
		return fmt.Errorf("loading the CUBIN from the cache: %w", d.check(err))
	}
	defer cuda.ModuleUnload(mod)
	if _, err := cuda.ModuleGetFunction(mod, name); err != nil {
		return fmt.Errorf("kernel %s in the CUBIN from the cache: %w", name, d.check(err))
	}
	return nil
}

// cacheNote describes the configured kernel cache: where it is, how many
// modules it holds, and whether it can be written.
func cacheNote() string {
	dir := cacheDir()
	if dir == "" {
		return "the kernel cache is off (Options.KernelCache \"off\", VRAM_KERNEL_CACHE=off): kernels are compiled in every process"
	}
	held, _ := filepath.Glob(filepath.Join(dir, "*.cubin"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Sprintf("the kernel cache %s cannot be created (%v): kernels are compiled in every process", dir, err)
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Sprintf("the kernel cache %s is not writable (%v): kernels are compiled in every process", dir, err)
	}
	f.Close()
	os.Remove(f.Name())
	return fmt.Sprintf("the kernel cache %s is writable and holds %d modules", dir, len(held))
}

// checkCuBLASLt multiplies random float32 matrices through cuBLASLt,
// [2, 48, 64] read transposed times [2, 64, 40], and compares with a
// float64 product on the host: within 1e-4 of the sum of |products|, 2e-3
// when TF32 is allowed ([SetAllowTF32]). The output starts as NaN.
func (d *Device) checkCuBLASLt() selftest.Check {
	return selftest.Run("cublaslt", func() (string, error) {
		if err := loadLt(); err != nil {
			return "", err
		}
		const batch, m, k, n = 2, 48, 64, 40
		r := rand.New(rand.NewPCG(5, 6))
		a, b := make([]float32, batch*m*k), make([]float32, batch*k*n)
		for i := range a {
			a[i] = float32(r.NormFloat64())
		}
		for i := range b {
			b[i] = float32(r.NormFloat64())
		}
		at := make([]float32, len(a)) // a stored transposed: [batch, k, m]
		for p := range batch {
			for i := range m {
				for q := range k {
					at[p*k*m+q*m+i] = a[p*m*k+i*k+q]
				}
			}
		}
		nan := make([]float32, batch*m*n)
		for i := range nan {
			nan[i] = float32(math.NaN())
		}
		s := d.DefaultStream()
		var bufs []backend.Buffer
		defer func() {
			for _, buf := range bufs {
				d.Free(buf, s)
			}
		}()
		views := make([]backend.View, 3)
		for i, x := range [][]float32{at, b, nan} {
			buf, err := d.Alloc(int64(4*len(x)), s, selftest.Region)
			if err != nil {
				return "", err
			}
			bufs = append(bufs, buf)
			views[i] = backend.View{Buf: buf, DType: backend.Float32, Shape: []int{len(x)}, Strides: []int{1}}
			if err := d.CopyFromHost(d.DefaultStream(), views[i], float32Bytes(x)); err != nil {
				return "", err
			}
		}
		va := backend.View{Buf: bufs[0], DType: backend.Float32, Shape: []int{batch, m, k}, Strides: []int{k * m, 1, m}}
		vb := backend.View{Buf: bufs[1], DType: backend.Float32, Shape: []int{batch, k, n}, Strides: []int{k * n, n, 1}}
		vc := backend.View{Buf: bufs[2], DType: backend.Float32, Shape: []int{batch, m, n}, Strides: []int{m * n, n, 1}}
		if err := d.MatMul(d.DefaultStream(), vc, va, vb); err != nil {
			return "", err
		}
		out := make([]byte, 4*batch*m*n)
		if err := d.CopyToHost(d.DefaultStream(), out, views[2]); err != nil {
			return "", err
		}
		c := make([]float32, batch*m*n)
		for i := range c {
			c[i] = math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:]))
		}
		tol, how := 1e-4, "float32"
		if AllowTF32() {
			tol, how = 2e-3, "float32 on TF32 tensor cores"
		}
		worst, err := selftest.CompareMatMul(c, a, b, batch, m, k, n, tol)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("cuBLASLt %s: %d×%d×%d×%d %s with a transposed operand matches the host (largest error %.1e of the sum of |products|)",
			cublasLtVersion(), batch, m, k, n, how, worst), nil
	})
}

// float32Bytes encodes v as little-endian bytes.
func float32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// peerCopy copies 16 MiB from GPU i to GPU j with [Device.CopyPeer] and
// checks every byte on the way back.
func peerCopy(i, j int) selftest.Check {
	return selftest.Run(fmt.Sprintf("peer copy %d->%d", i, j), func() (string, error) {
		src, err := Open(i)
		if err != nil {
			return "", err
		}
		dst, err := Open(j)
		if err != nil {
			return "", err
		}
		const n = selfTestCopyBytes
		bi, err := src.Alloc(n, src.DefaultStream(), selftest.Region)
		if err != nil {
			return "", err
		}
		defer src.Free(bi, src.DefaultStream())
		bj, err := dst.Alloc(n, dst.DefaultStream(), selftest.Region)
		if err != nil {
			return "", err
		}
		defer dst.Free(bj, dst.DefaultStream())
		vi := backend.View{Buf: bi, DType: backend.Int32, Shape: []int{n / 4}, Strides: []int{1}}
		vj := backend.View{Buf: bj, DType: backend.Int32, Shape: []int{n / 4}, Strides: []int{1}}
		data := selftest.RandomBytes(n, uint64(11+i))
		if err := src.CopyFromHost(src.DefaultStream(), vi, data); err != nil {
			return "", err
		}
		if err := src.Synchronize(); err != nil {
			return "", err
		}
		start := time.Now()
		if err := src.CopyPeer(src.DefaultStream(), vj, dst, dst.DefaultStream(), vi); err != nil {
			return "", err
		}
		if err := dst.Synchronize(); err != nil {
			return "", err
		}
		el := time.Since(start)
		out := make([]byte, n)
		if err := dst.CopyToHost(dst.DefaultStream(), out, vj); err != nil {
			return "", err
		}
		if k := selftest.FirstDiff(out, data); k >= 0 {
			return "", fmt.Errorf("byte %d came back as %#x, sent %#x", k, out[k], data[k])
		}
		how := "staged through the host (no peer access)"
		if ok, err := cuda.DeviceCanAccessPeer(src.dev, dst.dev); err == nil && ok {
			how = "direct, peer access on"
		}
		return fmt.Sprintf("%s identical, %s, %.1f ms (%s)", units.Bytes(n), how, float64(el.Microseconds())/1000, rate(n, el)), nil
	})
}
