package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unsafe"

	"github.com/spf13/cobra"

	"github.com/vramgo/vram/internal/printable"
	"github.com/vramgo/vram/native/cublas"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/load"
	"github.com/vramgo/vram/native/nvrtc"
)

// Sizes of the doctor's self-test, small enough to take milliseconds.
const (
	doctorCopyBytes   = 16 << 20 // host -> device -> device -> host
	doctorKernelElems = 1 << 20  // elements of the NVRTC kernel's vectors
	doctorGemmN       = 128      // m = n = k of the float32 GEMM
	doctorPeerBytes   = 16 << 20 // per peer copy
	doctorWorkspace   = 4 << 20  // cuBLASLt workspace bytes
)

// doctorReport is what "vram doctor" finds; --json prints it as is.
type doctorReport struct {
	// Environment holds one check per setting of the devices vram
	// allocates on (VRAM_ALLOC_CONF, VRAM_SIM_DEVICES, VRAM_SIM_SHAPE_ONLY).
	Environment []doctorCheck   `json:"environment"`
	Driver      doctorDriver    `json:"driver"`
	Libraries   []doctorLibrary `json:"libraries"`
	GPUs        []doctorGPU     `json:"gpus"`
	PeerAccess  [][]bool        `json:"peer_access"` // [i][j]: GPU i can access GPU j's memory; false on the diagonal
	PeerCopies  []doctorCheck   `json:"peer_copies,omitempty"`
	// Failed counts the failed checks, invalid settings, missing libraries
	// and a driver that is missing or cannot be used: the exit status is 0
	// exactly when it is 0.
	Failed int `json:"failed"`
}

// doctorDriver describes libcuda and the driver behind it.
type doctorDriver struct {
	Found       bool           `json:"found"`
	Path        string         `json:"path,omitempty"`
	Version     string         `json:"version,omitempty"`      // the kernel driver's, e.g. "580.159.03"
	CUDAVersion string         `json:"cuda_version,omitempty"` // the newest CUDA it supports, e.g. "13.0"
	Error       string         `json:"error,omitempty"`
	Tried       []load.Attempt `json:"tried,omitempty"`
}

// doctorLibrary describes one CUDA library the bindings load.
type doctorLibrary struct {
	Name    string         `json:"name"` // libnvrtc, libcublasLt, libcublas
	Found   bool           `json:"found"`
	Soname  string         `json:"soname,omitempty"`
	Path    string         `json:"path,omitempty"`
	Where   string         `json:"where,omitempty"` // which search step found it
	Version string         `json:"version,omitempty"`
	Warning string         `json:"warning,omitempty"`
	Error   string         `json:"error,omitempty"`
	Install string         `json:"install,omitempty"` // what to install when it is missing
	Tried   []load.Attempt `json:"tried,omitempty"`
}

// doctorGPU describes one device and its self-test.
type doctorGPU struct {
	Index             int           `json:"index"`
	Name              string        `json:"name"`
	UUID              string        `json:"uuid"`
	TotalBytes        uint64        `json:"total_bytes"`
	FreeBytes         uint64        `json:"free_bytes"`
	ComputeCapability string        `json:"compute_capability"` // e.g. "9.0"
	Multiprocessors   int           `json:"multiprocessors"`
	Checks            []doctorCheck `json:"checks"`
}

// doctorCheck is one self-test step.
type doctorCheck struct {
	Name       string  `json:"name"`
	OK         bool    `json:"ok"`
	Skipped    bool    `json:"skipped,omitempty"` // not run: a library it needs is missing
	Detail     string  `json:"detail"`
	DurationMS float64 `json:"duration_ms"`
}

// loadDriver loads libcuda; tests replace it to see the no-driver path on
// any machine.
var loadDriver = cuda.Load

func newDoctorCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the NVIDIA driver, the CUDA libraries and every GPU, and run a short self-test",
		Long: `Doctor finds the NVIDIA driver and the CUDA libraries vram uses (NVRTC, cuBLASLt,
cuBLAS) and says where each was found, or what to install when one is missing. It
lists every GPU (name, UUID, memory, compute capability, multiprocessors) and the
peer-access matrix, and runs a short self-test on each GPU: allocate, copy host to
device to device to host, compile a kernel with NVRTC for the GPU's own
architecture and launch it, and a float32 GEMM through cuBLASLt checked against the
CPU; with several GPUs, a peer copy between neighbours. It also checks the settings
of the devices vram allocates on (VRAM_ALLOC_CONF, VRAM_SIM_DEVICES,
VRAM_SIM_SHAPE_ONLY) and reports an invalid one as a failed check.

Libraries are searched in the directories of VRAM_CUDA_LIBS first, then by the
system's loader, then in /usr/local/cuda and in Python environments' nvidia
packages. The exit status is 0 only when everything was found and passed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := runDoctor()
			if asJSON {
				if jerr := writeJSON(cmd.OutOrStdout(), rep); jerr != nil {
					return jerr
				}
			} else if rep.Driver.Found || envFailed(rep) {
				if perr := printDoctor(cmd.OutOrStdout(), rep); perr != nil {
					return perr
				}
			}
			if err != nil {
				return err
			}
			if rep.Failed > 0 {
				return fmt.Errorf("doctor: %d %s failed", rep.Failed, plural(rep.Failed, "check", "checks"))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// runDoctor fills the report. The error is for a machine where nothing
// can run (no driver, cuInit failing); failed checks are counted in the
// report instead.
func runDoctor() (*doctorReport, error) {
	rep := &doctorReport{Environment: environmentChecks(), Libraries: []doctorLibrary{}, GPUs: []doctorGPU{}, PeerAccess: [][]bool{}}
	for _, c := range rep.Environment {
		if !c.OK {
			rep.Failed++
		}
	}
	rep, err := runDriverChecks(rep)
	if err != nil {
		rep.Failed++ // the driver is missing or does not work
	}
	return rep, err
}

// environmentChecks reports each device setting as a check.
func environmentChecks() []doctorCheck {
	var checks []doctorCheck
	for _, s := range readEnvironment() {
		c := doctorCheck{Name: s.Name, OK: s.Err == nil, Detail: s.Detail}
		if !s.Set {
			c.Detail = "unset: " + c.Detail
		}
		if s.Err != nil {
			c.Detail = s.Err.Error()
		}
		checks = append(checks, c)
	}
	return checks
}

// envFailed reports whether a setting of the report's environment is
// invalid.
func envFailed(rep *doctorReport) bool {
	for _, c := range rep.Environment {
		if !c.OK {
			return true
		}
	}
	return false
}

// runDriverChecks loads the driver and the libraries and tests every GPU.
// The error is for a machine where nothing can run.
func runDriverChecks(rep *doctorReport) (*doctorReport, error) {
	lib, err := loadDriver()
	if err != nil {
		rep.Driver.Error = err.Error()
		var nf *load.NotFoundError
		if errors.As(err, &nf) {
			rep.Driver.Tried = nf.Tried
			return rep, fmt.Errorf("doctor: no NVIDIA driver found (libcuda.so.1 not loadable): %s", loaderReason(nf))
		}
		if lib != nil {
			rep.Driver.Path = lib.Path
		}
		return rep, fmt.Errorf("doctor: the NVIDIA driver cannot be used: %v", err)
	}
	rep.Driver.Found, rep.Driver.Path, rep.Driver.Tried = true, lib.Path, lib.Tried
	rep.Driver.Version = driverVersion(lib.Path)
	if err := cuda.Init(0); err != nil {
		rep.Driver.Error = err.Error()
		return rep, fmt.Errorf("doctor: the NVIDIA driver does not start: %v", err)
	}
	cudaMajor := 0
	if v, err := cuda.DriverGetVersion(); err == nil {
		cudaMajor = v / 1000
		rep.Driver.CUDAVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}

	rep.Libraries = []doctorLibrary{
		libraryStatus(nvrtc.Load, cudaMajor, nvrtcVersion,
			"the CUDA toolkit's NVRTC: pip install nvidia-cuda-nvrtc (CUDA 13) or nvidia-cuda-nvrtc-cu12, or the cuda-nvrtc package of your CUDA version"),
		libraryStatus(cublas.LoadLt, cudaMajor, cublasLtVersion,
			"cuBLAS: pip install nvidia-cublas (CUDA 13) or nvidia-cublas-cu12, or the libcublas package of your CUDA version"),
		libraryStatus(cublas.LoadBLAS, cudaMajor, nil,
			"cuBLAS: pip install nvidia-cublas (CUDA 13) or nvidia-cublas-cu12, or the libcublas package of your CUDA version"),
	}
	for _, l := range rep.Libraries {
		if !l.Found {
			rep.Failed++
		}
	}
	haveNVRTC, haveLt, haveBLAS := rep.Libraries[0].Found, rep.Libraries[1].Found, rep.Libraries[2].Found

	n, err := cuda.DeviceGetCount()
	if err != nil {
		return rep, fmt.Errorf("doctor: cannot count GPUs: %v", err)
	}
	ctxs := make([]cuda.Context, n)
	for i := 0; i < n; i++ {
		dev := cuda.Device(i)
		g := doctorGPU{Index: i}
		g.Name, _ = cuda.DeviceGetName(dev)
		if u, err := cuda.DeviceGetUUID(dev); err == nil {
			g.UUID = u.String()
		}
		g.TotalBytes, _ = cuda.DeviceTotalMem(dev)
		major, _ := cuda.DeviceGetAttribute(cuda.AttrComputeCapabilityMajor, dev)
		minor, _ := cuda.DeviceGetAttribute(cuda.AttrComputeCapabilityMinor, dev)
		g.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
		g.Multiprocessors, _ = cuda.DeviceGetAttribute(cuda.AttrMultiprocessorCount, dev)
		ctx, err := cuda.DevicePrimaryCtxRetain(dev)
		if err != nil {
			g.Checks = append(g.Checks, doctorCheck{Name: "context", Detail: err.Error()})
		} else {
			ctxs[i] = ctx
			defer cuda.DevicePrimaryCtxRelease(dev)
			err = ctx.Do(func() error {
				_, g.FreeBytes, _ = memInfo()
				g.Checks = selfTest(dev, fmt.Sprintf("sm_%d%d", major, minor), haveNVRTC, haveLt, haveBLAS)
				return nil
			})
			if err != nil {
				g.Checks = append(g.Checks, doctorCheck{Name: "context", Detail: err.Error()})
			}
		}
		for _, c := range g.Checks {
			if !c.OK && !c.Skipped {
				rep.Failed++
			}
		}
		rep.GPUs = append(rep.GPUs, g)
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
	if n >= 2 {
		for i := 0; i < n; i++ {
			j := (i + 1) % n
			if n == 2 && i == 1 {
				j = 0
			}
			if ctxs[i] == 0 || ctxs[j] == 0 {
				continue
			}
			c := peerCopy(i, j, ctxs[i], ctxs[j], rep.PeerAccess[i][j] && rep.PeerAccess[j][i])
			if !c.OK {
				rep.Failed++
			}
			rep.PeerCopies = append(rep.PeerCopies, c)
		}
	}
	return rep, nil
}

// loaderReason picks the loader's own message from a failed search.
func loaderReason(nf *load.NotFoundError) string {
	for _, a := range nf.Tried {
		if a.Where == "loader" {
			return a.Err
		}
	}
	if len(nf.Tried) > 0 {
		return nf.Tried[0].Err
	}
	return "not found"
}

// driverVersion reads the kernel driver's version from /proc, else from
// the file name libcuda.so.580.159.03.
func driverVersion(libPath string) string {
	if b, err := os.ReadFile("/proc/driver/nvidia/version"); err == nil {
		if v := parseDriverVersion(string(b)); v != "" {
			return v
		}
	}
	if v, ok := strings.CutPrefix(filepath.Base(libPath), "libcuda.so."); ok && isVersion(v) {
		return v
	}
	return ""
}

// parseDriverVersion finds the version in the first line of
// /proc/driver/nvidia/version, e.g. "NVRM version: NVIDIA UNIX Open Kernel
// Module for x86_64  580.159.04  Release Build  (...)".
func parseDriverVersion(text string) string {
	first, _, _ := strings.Cut(text, "\n")
	for _, w := range strings.Fields(first) {
		if isVersion(w) {
			return w
		}
	}
	return ""
}

// isVersion reports whether s is dotted numbers with at least one dot.
func isVersion(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.Atoi(p); err != nil || p == "" {
			return false
		}
	}
	return true
}

// libraryStatus loads one library and describes it. version, when not
// nil, asks the library itself; otherwise the file name's suffix is used.
func libraryStatus(loadFn func() (*load.Library, error), cudaMajor int, version func() string, install string) doctorLibrary {
	lib, err := loadFn()
	var d doctorLibrary
	var nf *load.NotFoundError
	switch {
	case errors.As(err, &nf):
		d.Name = nf.Name
		d.Error = fmt.Sprintf("%s not found", strings.Join(nf.Sonames, " or "))
		d.Install = fmt.Sprintf("install %s; or point %s at the folder that holds %s", install, load.EnvLibs, nf.Sonames[0])
		d.Tried = nf.Tried
		return d
	case lib == nil:
		d.Error = err.Error()
		return d
	}
	d.Name, d.Soname, d.Path, d.Where = lib.Name, lib.Soname, lib.Path, lib.Where
	if err != nil {
		d.Error = err.Error()
		return d
	}
	d.Found = true
	if version != nil {
		d.Version = version()
	}
	if d.Version == "" { // from the file name: libcublas.so.13.1.0.3 is 13.1.0.3
		base := filepath.Base(lib.Path)
		if i := strings.Index(base, ".so."); i >= 0 {
			d.Version = base[i+len(".so."):]
		}
	}
	if libMajor, err := strconv.Atoi(lib.Soname[strings.LastIndex(lib.Soname, ".")+1:]); err == nil && cudaMajor > 0 && libMajor > cudaMajor {
		d.Warning = fmt.Sprintf("CUDA %d library with a driver that supports CUDA %d: update the driver or use the CUDA %d library", libMajor, cudaMajor, cudaMajor)
	}
	return d
}

func nvrtcVersion() string {
	major, minor, err := nvrtc.Version()
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d.%d", major, minor)
}

func cublasLtVersion() string {
	v, err := cublas.LtGetVersion()
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
}

func memInfo() (free, total uint64, err error) { return cuda.MemGetInfo() }

// selfTest runs the checks of one GPU. It must run with the GPU's context
// current on a locked thread (inside Context.Do).
func selfTest(dev cuda.Device, arch string, haveNVRTC, haveLt, haveBLAS bool) []doctorCheck {
	var checks []doctorCheck
	run := func(name string, skip string, fn func() (string, error)) {
		c := doctorCheck{Name: name}
		if skip != "" {
			c.Skipped, c.Detail = true, skip
			checks = append(checks, c)
			return
		}
		start := time.Now()
		detail, err := fn()
		c.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		c.OK, c.Detail = err == nil, detail
		if err != nil {
			c.Detail = err.Error()
		}
		checks = append(checks, c)
	}
	run("alloc", "", checkAlloc)
	run("copy", "", checkCopy)
	skip := ""
	if !haveNVRTC {
		skip = "libnvrtc not found"
	}
	run("kernel", skip, func() (string, error) { return checkKernel(arch) })
	skip = ""
	if !haveLt && !haveBLAS {
		skip = "libcublasLt and libcublas not found"
	}
	run("gemm", skip, func() (string, error) { return checkGemm(haveLt) })
	run("sync", "", func() (string, error) { return "no asynchronous error", cuda.CtxSynchronize() })
	return checks
}

// checkAlloc allocates, writes and frees device memory and sees the free
// memory move.
func checkAlloc() (string, error) {
	const n = 256 << 20
	before, _, err := cuda.MemGetInfo()
	if err != nil {
		return "", err
	}
	p, err := cuda.MemAlloc(n)
	if err != nil {
		return "", err
	}
	defer cuda.MemFree(p)
	if err := cuda.MemsetD8(p, 0x3C, n); err != nil {
		return "", err
	}
	after, _, err := cuda.MemGetInfo()
	if err != nil {
		return "", err
	}
	if before-after < n/2 {
		return "", fmt.Errorf("free memory went from %d to %d bytes after allocating %d", before, after, n)
	}
	return fmt.Sprintf("%d MiB allocated and set; free memory fell by %d MiB", n>>20, (before-after)>>20), nil
}

// checkCopy copies random bytes host -> device -> device -> host.
func checkCopy() (string, error) {
	src := make([]byte, doctorCopyBytes)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < len(src); i += 8 {
		v := r.Uint64()
		for k := 0; k < 8; k++ {
			src[i+k] = byte(v >> (8 * k))
		}
	}
	a, err := cuda.MemAlloc(doctorCopyBytes)
	if err != nil {
		return "", err
	}
	defer cuda.MemFree(a)
	b, err := cuda.MemAlloc(doctorCopyBytes)
	if err != nil {
		return "", err
	}
	defer cuda.MemFree(b)
	start := time.Now()
	if err := cuda.MemcpyHtoD(a, unsafe.Pointer(&src[0]), doctorCopyBytes); err != nil {
		return "", err
	}
	if err := cuda.MemcpyDtoD(b, a, doctorCopyBytes); err != nil {
		return "", err
	}
	dst := make([]byte, doctorCopyBytes)
	if err := cuda.MemcpyDtoH(unsafe.Pointer(&dst[0]), b, doctorCopyBytes); err != nil {
		return "", err
	}
	el := time.Since(start)
	for i := range dst {
		if dst[i] != src[i] {
			return "", fmt.Errorf("byte %d came back as %#x, sent %#x", i, dst[i], src[i])
		}
	}
	return fmt.Sprintf("%d MiB host->device->device->host, identical (%.1f ms, pageable host memory)", doctorCopyBytes>>20, float64(el.Microseconds())/1000), nil
}

const doctorKernel = `extern "C" __global__ void vram_doctor_axpy(float a, const float* x, float* y, unsigned long long n) {
	unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + y[i];
}`

// checkKernel compiles a kernel for the device's own architecture as a
// CUBIN, launches it and checks every element.
func checkKernel(arch string) (string, error) {
	start := time.Now()
	prog, err := nvrtc.CreateProgram(doctorKernel, "vram_doctor.cu", nil, nil)
	if err != nil {
		return "", err
	}
	defer nvrtc.DestroyProgram(prog)
	if err := nvrtc.CompileProgram(prog, []string{"-arch=" + arch}); err != nil {
		log, _ := nvrtc.GetProgramLog(prog)
		return "", fmt.Errorf("%v: %s", err, strings.Join(strings.Fields(log), " "))
	}
	cubin, err := nvrtc.GetCUBIN(prog)
	if err != nil {
		return "", err
	}
	compile := time.Since(start)
	mod, err := cuda.ModuleLoadData(cubin)
	if err != nil {
		return "", err
	}
	defer cuda.ModuleUnload(mod)
	f, err := cuda.ModuleGetFunction(mod, "vram_doctor_axpy")
	if err != nil {
		return "", err
	}
	const n = doctorKernelElems
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i%4093), float32((7*i)%2039+1)
	}
	dx, err := cuda.MemAlloc(n * 4)
	if err != nil {
		return "", err
	}
	defer cuda.MemFree(dx)
	dy, err := cuda.MemAlloc(n * 4)
	if err != nil {
		return "", err
	}
	defer cuda.MemFree(dy)
	if err := cuda.MemcpyHtoD(dx, unsafe.Pointer(&x[0]), n*4); err != nil {
		return "", err
	}
	if err := cuda.MemcpyHtoD(dy, unsafe.Pointer(&y[0]), n*4); err != nil {
		return "", err
	}
	args := cuda.NewKernelArgs(4)
	defer args.Free()
	args.Float32(0.5).Ptr(dx).Ptr(dy).Uint64(n)
	const block = 256
	if err := cuda.LaunchKernel(f, cuda.Dim3{X: (n + block - 1) / block, Y: 1, Z: 1}, cuda.Dim3{X: block, Y: 1, Z: 1}, 0, 0, args); err != nil {
		return "", err
	}
	if err := cuda.CtxSynchronize(); err != nil {
		return "", err
	}
	got := make([]float32, n)
	if err := cuda.MemcpyDtoH(unsafe.Pointer(&got[0]), dy, n*4); err != nil {
		return "", err
	}
	for i := range got {
		if want := 0.5*x[i] + y[i]; got[i] != want { // exact: small integers and halves
			return "", fmt.Errorf("y[%d] = %v, want %v", i, got[i], want)
		}
	}
	return fmt.Sprintf("NVRTC %s CUBIN (%d KiB, compiled in %.0f ms), %d elements exact", arch, len(cubin)>>10, float64(compile.Microseconds())/1000, n), nil
}

// checkGemm multiplies random float32 matrices through cuBLASLt (or
// cublasGemmEx without it) and compares with a float64 product on the CPU.
func checkGemm(useLt bool) (string, error) {
	const n = doctorGemmN
	r := rand.New(rand.NewPCG(3, 4))
	a, b := make([]float32, n*n), make([]float32, n*n)
	for i := range a {
		a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	bufs := make([]cuda.DevicePtr, 3)
	for i := range bufs {
		p, err := cuda.MemAlloc(n * n * 4)
		if err != nil {
			return "", err
		}
		defer cuda.MemFree(p)
		bufs[i] = p
	}
	da, db, dc := bufs[0], bufs[1], bufs[2]
	if err := cuda.MemcpyHtoD(da, unsafe.Pointer(&a[0]), n*n*4); err != nil {
		return "", err
	}
	if err := cuda.MemcpyHtoD(db, unsafe.Pointer(&b[0]), n*n*4); err != nil {
		return "", err
	}
	if err := cuda.MemsetD8(dc, 0xff, n*n*4); err != nil { // NaN, so unwritten results fail
		return "", err
	}
	alpha, beta := float32(1), float32(0)
	var how string
	if useLt {
		how = "cuBLASLt"
		if err := ltGemm(n, da, db, dc, &alpha, &beta); err != nil {
			return "", err
		}
	} else {
		how = "cublasGemmEx"
		h, err := cublas.Create()
		if err != nil {
			return "", err
		}
		defer cublas.Destroy(h)
		if err := cublas.GemmEx(h, cublas.OpN, cublas.OpN, n, n, n, unsafe.Pointer(&alpha), da, cublas.R32F, n,
			db, cublas.R32F, n, unsafe.Pointer(&beta), dc, cublas.R32F, n, cublas.Compute32F, cublas.GemmDefault); err != nil {
			return "", err
		}
	}
	if err := cuda.CtxSynchronize(); err != nil {
		return "", err
	}
	c := make([]float32, n*n)
	if err := cuda.MemcpyDtoH(unsafe.Pointer(&c[0]), dc, n*n*4); err != nil {
		return "", err
	}
	worst := 0.0
	for j := 0; j < n; j++ {
		for i := 0; i < n; i++ {
			var sum, abs float64
			for k := 0; k < n; k++ {
				p := float64(a[i+k*n]) * float64(b[k+j*n])
				sum += p
				abs += math.Abs(p)
			}
			e := math.Abs(float64(c[i+j*n])-sum) / abs
			if !(e <= 1e-4) { // NaN fails
				return "", fmt.Errorf("C[%d,%d] = %v, want %v (error %.2g of the sum of |products|)", i, j, c[i+j*n], sum, e)
			}
			worst = math.Max(worst, e)
		}
	}
	return fmt.Sprintf("%s %d×%d×%d float32 matches the CPU (largest error %.1e of the sum of |products|)", how, n, n, n, worst), nil
}

// ltGemm runs C = alpha*A*B + beta*C, column-major n×n float32, through
// cuBLASLt with the first algorithm its heuristic offers.
func ltGemm(n int, a, b, c cuda.DevicePtr, alpha, beta *float32) error {
	h, err := cublas.LtCreate()
	if err != nil {
		return err
	}
	defer cublas.LtDestroy(h)
	desc, err := cublas.LtMatmulDescCreate(cublas.Compute32F, cublas.R32F)
	if err != nil {
		return err
	}
	defer cublas.LtMatmulDescDestroy(desc)
	layout, err := cublas.LtMatrixLayoutCreate(cublas.R32F, uint64(n), uint64(n), int64(n))
	if err != nil {
		return err
	}
	defer cublas.LtMatrixLayoutDestroy(layout)
	pref, err := cublas.LtMatmulPreferenceCreate()
	if err != nil {
		return err
	}
	defer cublas.LtMatmulPreferenceDestroy(pref)
	ws := uint64(doctorWorkspace)
	if err := cublas.LtMatmulPreferenceSetAttribute(pref, cublas.PrefMaxWorkspaceBytes, unsafe.Pointer(&ws), 8); err != nil {
		return err
	}
	results := make([]cublas.MatmulHeuristicResult, 1)
	found, err := cublas.LtMatmulAlgoGetHeuristic(h, desc, layout, layout, layout, layout, pref, results)
	if err != nil {
		return err
	}
	if found == 0 {
		return errors.New("cuBLASLt offered no algorithm")
	}
	wsp, err := cuda.MemAlloc(ws)
	if err != nil {
		return err
	}
	defer cuda.MemFree(wsp)
	return cublas.LtMatmul(h, desc, unsafe.Pointer(alpha), a, layout, b, layout, unsafe.Pointer(beta), c, layout, c, layout,
		&results[0].Algo, wsp, ws, 0)
}

// peerCopy copies between GPUs i and j with cuMemcpyPeerAsync, enabling
// peer access both ways first when the GPUs support it.
func peerCopy(i, j int, ci, cj cuda.Context, enable bool) doctorCheck {
	c := doctorCheck{Name: fmt.Sprintf("peer copy %d->%d", i, j)}
	start := time.Now()
	var pj cuda.DevicePtr
	src := make([]byte, doctorPeerBytes)
	for k := range src {
		src[k] = byte(k*31 + i)
	}
	err := cj.Do(func() error {
		if enable {
			if err := cuda.CtxEnablePeerAccess(ci, 0); err != nil && !errors.Is(err, cuda.ErrPeerAccessAlreadyEnabled) {
				return err
			}
		}
		var err error
		pj, err = cuda.MemAlloc(doctorPeerBytes)
		return err
	})
	if err == nil {
		defer cj.Do(func() error { return cuda.MemFree(pj) })
		err = ci.Do(func() error {
			if enable {
				if err := cuda.CtxEnablePeerAccess(cj, 0); err != nil && !errors.Is(err, cuda.ErrPeerAccessAlreadyEnabled) {
					return err
				}
			}
			pi, err := cuda.MemAlloc(doctorPeerBytes)
			if err != nil {
				return err
			}
			defer cuda.MemFree(pi)
			if err := cuda.MemcpyHtoD(pi, unsafe.Pointer(&src[0]), doctorPeerBytes); err != nil {
				return err
			}
			s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
			if err != nil {
				return err
			}
			defer cuda.StreamDestroy(s)
			if err := cuda.MemcpyPeerAsync(pj, cj, pi, ci, doctorPeerBytes, s); err != nil {
				return err
			}
			return cuda.StreamSynchronize(s)
		})
	}
	if err == nil {
		dst := make([]byte, doctorPeerBytes)
		err = cj.Do(func() error { return cuda.MemcpyDtoH(unsafe.Pointer(&dst[0]), pj, doctorPeerBytes) })
		for k := range dst {
			if err == nil && dst[k] != src[k] {
				err = fmt.Errorf("byte %d came back as %#x, sent %#x", k, dst[k], src[k])
			}
		}
	}
	c.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	how := "staged through the host (no peer access)"
	if enable {
		how = "direct, peer access on"
	}
	c.OK, c.Detail = true, fmt.Sprintf("%d MiB, identical, %s", doctorPeerBytes>>20, how)
	return c
}

// printDoctor writes the report as text.
func printDoctor(w io.Writer, rep *doctorReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range rep.Environment {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, checkStatus(c), c.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if !rep.Driver.Found {
		// Nothing else ran; the error that follows says why.
		_, err := fmt.Fprintf(w, "driver  not usable: %s\n", rep.Driver.Error)
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	d := rep.Driver
	fmt.Fprintf(tw, "driver\t%s\tsupports CUDA %s\t%s\n", orDash(d.Version), orDash(d.CUDAVersion), d.Path)
	fmt.Fprintln(tw, "\t\t\t")
	for _, l := range rep.Libraries {
		if l.Found {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s (%s)\n", l.Name, l.Version, l.Soname, l.Path, l.Where)
			if l.Warning != "" {
				fmt.Fprintf(tw, "\t\twarning: %s\t\n", l.Warning)
			}
			continue
		}
		fmt.Fprintf(tw, "%s\tmissing\t%s\t\n", l.Name, l.Error)
		if l.Install != "" {
			fmt.Fprintf(tw, "\t\t%s\t\n", l.Install)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(rep.GPUs) == 0 {
		fmt.Fprintln(w, "no GPU visible to the driver")
	}
	for _, g := range rep.GPUs {
		fmt.Fprintf(w, "GPU %d  %s  %s  %.1f GiB (%.1f GiB free)  compute capability %s  %d multiprocessors\n",
			g.Index, printable.String(g.Name), g.UUID, float64(g.TotalBytes)/(1<<30), float64(g.FreeBytes)/(1<<30), g.ComputeCapability, g.Multiprocessors)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, c := range g.Checks {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Name, checkStatus(c), checkTime(c), c.Detail)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if n := len(rep.PeerAccess); n > 1 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "peer access (row can access column)")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprint(tw, "\t")
		for j := 0; j < n; j++ {
			fmt.Fprintf(tw, "%d\t", j)
		}
		fmt.Fprintln(tw)
		for i, row := range rep.PeerAccess {
			fmt.Fprintf(tw, "%d\t", i)
			for j, ok := range row {
				switch {
				case i == j:
					fmt.Fprint(tw, "-\t")
				case ok:
					fmt.Fprint(tw, "yes\t")
				default:
					fmt.Fprint(tw, "no\t")
				}
			}
			fmt.Fprintln(tw)
		}
		for _, c := range rep.PeerCopies {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, checkStatus(c), checkTime(c), c.Detail)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	if rep.Failed == 0 {
		_, err := fmt.Fprintln(w, "all checks passed")
		return err
	}
	_, err := fmt.Fprintf(w, "%d %s failed\n", rep.Failed, plural(rep.Failed, "check", "checks"))
	return err
}

func checkStatus(c doctorCheck) string {
	switch {
	case c.Skipped:
		return "skipped"
	case c.OK:
		return "ok"
	}
	return "FAILED"
}

func checkTime(c doctorCheck) string {
	if c.Skipped {
		return ""
	}
	return fmt.Sprintf("%.1f ms", c.DurationMS)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
