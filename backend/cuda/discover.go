package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vramgo/vram/native/cublas"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/cudnn"
	"github.com/vramgo/vram/native/load"
	"github.com/vramgo/vram/native/nccl"
	"github.com/vramgo/vram/native/nvml"
	"github.com/vramgo/vram/native/nvrtc"
)

// DriverInfo describes libcuda and the driver behind it, as [SelfTest]
// found them.
type DriverInfo struct {
	// Usable reports that libcuda loaded with every symbol vram binds and
	// that cuInit succeeded.
	Usable bool `json:"usable"`
	// Path is the libcuda file that loaded; "" when none did.
	Path string `json:"path,omitempty"`
	// Version is the kernel driver's, e.g. "580.159.03"; "" when unknown.
	Version string `json:"version,omitempty"`
	// CUDAVersion is the newest CUDA the driver supports, e.g. "13.0".
	CUDAVersion string `json:"cuda_version,omitempty"`
	// Error says, in one line, why the driver cannot be used: no libcuda,
	// a libcuda without a symbol vram needs, cuInit failing; "" when
	// Usable.
	Error string `json:"error,omitempty"`
	// Tried lists where libcuda was looked for.
	Tried []load.Attempt `json:"tried,omitempty"`
}

// LibraryInfo describes one CUDA library that vram loads at run time.
type LibraryInfo struct {
	// Name is the library's short name: libnvrtc, libcublasLt, libnvidia-ml, libcudnn, libnccl.
	Name string `json:"name"`
	// Needed says what vram uses it for.
	Needed string `json:"needed"`
	// Optional libraries only add information (NVML: the processes on a
	// GPU); vram runs without them, and their absence is no failure.
	Optional bool `json:"optional,omitempty"`
	// Found reports that it loaded with every symbol vram binds.
	Found   bool   `json:"found"`
	Soname  string `json:"soname,omitempty"`
	Path    string `json:"path,omitempty"`
	Where   string `json:"where,omitempty"` // which search step found it
	Version string `json:"version,omitempty"`
	// Warning flags a library that loaded but may not work with the
	// driver (a CUDA major newer than the driver supports).
	Warning string `json:"warning,omitempty"`
	// Error says why it did not load; Install what to install then.
	Error   string         `json:"error,omitempty"`
	Install string         `json:"install,omitempty"`
	Tried   []load.Attempt `json:"tried,omitempty"`
}

// discoverDriver loads libcuda with loadFn and starts it. It returns the
// CUDA major version the driver supports (0 when unknown).
func discoverDriver(loadFn func() (*load.Library, error)) (DriverInfo, int) {
	var d DriverInfo
	lib, err := loadFn()
	if err != nil {
		var nf *load.NotFoundError
		if errors.As(err, &nf) {
			d.Tried = nf.Tried
			d.Error = "no NVIDIA driver found (libcuda.so.1 not loadable): " + nf.Reason()
			return d, 0
		}
		if lib != nil {
			d.Path = lib.Path
		}
		d.Error = "the NVIDIA driver cannot be used: " + oneLine(err.Error())
		return d, 0
	}
	d.Path, d.Tried = lib.Path, lib.Tried
	d.Version = driverVersion(lib.Path)
	if err := cuda.Init(0); err != nil {
		d.Error = "the NVIDIA driver does not start: " + oneLine(err.Error())
		return d, 0
	}
	d.Usable = true
	major := 0
	if v, err := cuda.DriverGetVersion(); err == nil {
		major = v / 1000
		d.CUDAVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	return d, major
}

// libraries loads the CUDA libraries vram uses and describes each.
func libraries(cudaMajor int) []LibraryInfo {
	const blasPip = "cuBLAS: pip install nvidia-cublas (CUDA 13) or nvidia-cublas-cu12, or the libcublas package of your CUDA version"
	return []LibraryInfo{
		libraryStatus(nvrtc.Load, cudaMajor, nvrtcVersion, "compiling the kernels", false,
			"the CUDA toolkit's NVRTC: pip install nvidia-cuda-nvrtc (CUDA 13) or nvidia-cuda-nvrtc-cu12, or the cuda-nvrtc package of your CUDA version"),
		libraryStatus(cublas.LoadLt, cudaMajor, cublasLtVersion, "matrix products", false, blasPip),
		libraryStatus(nvml.Load, 0, nil, "the processes on each GPU (out-of-memory errors, vram smi)", true,
			"the NVIDIA driver's NVML (libnvidia-ml.so.1), which comes with the driver"),
		libraryStatus(cudnn.Load, 0, cudnnVersionString, "convolutions, pooling and batch norm on cuDNN (without it they use vram's composed kernels)", true,
			"cuDNN 9: pip install nvidia-cudnn-cu12 (or nvidia-cudnn-cu13), or the libcudnn9 package of your CUDA version"),
		libraryStatus(nccl.Load, 0, ncclVersion, "collectives between GPUs (package parallel)", true,
			"NCCL: pip install nvidia-nccl-cu13 (CUDA 13) or nvidia-nccl-cu12, or the libnccl2 package"),
	}
}

// oneLine joins the lines of s with single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

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
// cudaMajor, when not 0, is the driver's CUDA major, which a library's
// own major must not exceed.
func libraryStatus(loadFn func() (*load.Library, error), cudaMajor int, version func() string, needed string, optional bool, install string) LibraryInfo {
	lib, err := loadFn()
	d := LibraryInfo{Needed: needed, Optional: optional}
	var nf *load.NotFoundError
	switch {
	case errors.As(err, &nf):
		d.Name = nf.Name
		d.Error = fmt.Sprintf("%s not found", strings.Join(nf.Sonames, " or "))
		d.Install = fmt.Sprintf("install %s; or point %s at the folder that holds %s", install, load.EnvLibs, nf.Sonames[0])
		d.Tried = nf.Tried
		return d
	case lib == nil:
		d.Error = oneLine(err.Error())
		return d
	}
	d.Name, d.Soname, d.Path, d.Where = lib.Name, lib.Soname, lib.Path, lib.Where
	if err != nil {
		d.Error = oneLine(err.Error())
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

func ncclVersion() string {
	v, err := nccl.GetVersion()
	if err != nil {
		return ""
	}
	return nccl.VersionString(v)
}

func cublasLtVersion() string {
	v, err := cublas.LtGetVersion()
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
}
