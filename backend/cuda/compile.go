package cuda

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/load"
	"github.com/vramgo/vram/native/nvrtc"
)

// The CUDA C sources of every kernel, compiled at first use.
//
//go:embed kernels/*.cu kernels/*.cuh
var kernelFS embed.FS

// family is one source file of kernels. A module is a family compiled for
// one dtype (the -D option VD, or SD for copies; the bytes and scatter
// families need no dtype or take it as VD) and one op (the -D option
// K_<op>, which keeps only that op's kernels: compiling one op takes a
// fraction of a second where a whole family takes seconds).
type family uint8

const (
	famBytes   family = iota // bytes.cu: fill, strided copy, where, gather, index check
	famCopy                  // copy.cu: conversions from one source dtype
	famUnary                 // unary.cu
	famBinary                // binary.cu: tensor-tensor and tensor-scalar
	famReduce                // reduce.cu
	famScatter               // scatter.cu
	famOptim                 // optim.cu: fused optimizer steps
	famQuant                 // quant.cu: int8 weight dequantization
	famNorm                  // norm.cu: channels-last batch normalization
	famPool                  // pool.cu: channels-last pooling
	numFamilies
)

var familyFiles = [numFamilies]string{"bytes.cu", "copy.cu", "unary.cu", "binary.cu", "reduce.cu", "scatter.cu", "optim.cu", "quant.cu", "norm.cu", "pool.cu"}

// famMacro is the -D macro that names a module's dtype.
var famMacro = [numFamilies]string{"", "SD", "VD", "VD", "VD", "VD", "VD", "VD", "VD", "VD"}

func (f family) String() string { return familyFiles[f] }

// source returns the full source of a family: the common header, then the
// family's file.
func source(f family) string {
	common, err := kernelFS.ReadFile("kernels/common.cuh")
	if err != nil {
		panic("vram: internal: embedded kernels/common.cuh missing: " + err.Error())
	}
	body, err := kernelFS.ReadFile("kernels/" + familyFiles[f])
	if err != nil {
		panic("vram: internal: embedded kernels/" + familyFiles[f] + " missing: " + err.Error())
	}
	return string(common) + "\n" + string(body)
}

// modKey names a module: a family, a dtype (0 for the bytes family) and
// an op ("" for all of the family's kernels).
type modKey struct {
	fam family
	dt  backend.DType
	op  string
}

func (k modKey) String() string {
	s := k.fam.String()
	if famMacro[k.fam] != "" {
		s += " " + k.dt.String()
	}
	if k.op != "" {
		s += " " + k.op
	}
	return s
}

// compileOptions returns the NVRTC options of module k for the
// architecture sm_<arch>.
func compileOptions(k modKey, arch int) []string {
	opts := []string{"-arch=sm_" + strconv.Itoa(arch), "--std=c++17"}
	if m := famMacro[k.fam]; m != "" {
		opts = append(opts, "-D"+m+"="+strconv.Itoa(int(k.dt)))
	}
	if k.op == "" {
		opts = append(opts, "-DK_ALL")
	} else {
		opts = append(opts, "-DK_"+k.op)
	}
	return opts
}

// cacheDir returns the disk cache's directory, [Options.KernelCache], or
// "" when it is off or no directory can be found.
func cacheDir() string {
	options.mu.Lock()
	v := options.opts.KernelCache
	options.mu.Unlock()
	if v != "" {
		if v == "off" {
			return ""
		}
		return v
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = filepath.Join(os.TempDir(), "vram-cache")
	}
	return filepath.Join(base, "vram", "kernels")
}

var (
	nvrtcOnce sync.Once
	nvrtcErr  error
	nvrtcVer  string

	cubinMu sync.Mutex
	cubins  = map[string][]byte{} // in-process cache, by key
)

// loadNVRTC loads NVRTC once; the error names the library and the fix.
func loadNVRTC() error {
	nvrtcOnce.Do(func() {
		if _, err := nvrtc.Load(); err != nil {
			nvrtcErr = missingLibrary("NVRTC (libnvrtc)", "nvidia-cuda-nvrtc", err)
			return
		}
		ma, mi, err := nvrtc.Version()
		if err != nil {
			nvrtcErr = fmt.Errorf("cuda: NVRTC loaded but nvrtcVersion failed: %w", err)
			return
		}
		nvrtcVer = fmt.Sprintf("%d.%d", ma, mi)
	})
	return nvrtcErr
}

// missingLibrary explains a library that could not be loaded: what needs
// it, the search (from native/load's report) and how to install it.
func missingLibrary(what, pip string, err error) error {
	hint := fmt.Sprintf("install the CUDA toolkit's %s (CUDA 12 or 13), e.g. pip install %s-cu12 or the %s package of CUDA 13, or point %s at the directory that holds it", what, pip, pip, load.EnvLibs)
	var nf *load.NotFoundError
	if errors.As(err, &nf) {
		return fmt.Errorf("cuda: %s is needed but not found: %w; %s", what, err, hint)
	}
	return fmt.Errorf("cuda: %s could not be loaded: %w; %s", what, err, hint)
}

// CompileError is a kernel source that NVRTC refused. It carries NVRTC's
// log. It is a bug in vram, not in the caller's program.
type CompileError struct {
	Module  string   // the family, dtype and op, e.g. "unary.cu float16 exp"
	Options []string // the NVRTC options
	Log     string   // NVRTC's diagnostics
	Err     error    // the NVRTC call that failed
}

// Error returns the module, the NVRTC error and its log.
func (e *CompileError) Error() string {
	return fmt.Sprintf("cuda: compiling %s with %v: %v\n%s", e.Module, e.Options, e.Err, e.Log)
}

// Unwrap returns the NVRTC error.
func (e *CompileError) Unwrap() error { return e.Err }

// cubin returns the CUBIN of module k for sm_<arch>, from the
// in-process cache, the disk cache, or NVRTC (in that order); a compiled
// CUBIN is written to the disk cache atomically (a temporary file, then a
// rename). A failing disk cache is ignored. Concurrent requests for one
// module share one compilation.
func cubin(k modKey, arch int) ([]byte, error) { return cubinIn(k, arch, cacheDir()) }

// cubinIn is cubin with the disk cache in dir ("" for none).
func cubinIn(k modKey, arch int, dir string) ([]byte, error) {
	if err := loadNVRTC(); err != nil {
		return nil, err
	}
	src := source(k.fam)
	opts := compileOptions(k, arch)
	key := cacheKey(src, opts, arch)
	cubinMu.Lock()
	img, ok := cubins[key]
	cubinMu.Unlock()
	if ok {
		return img, nil
	}
	path := ""
	if dir != "" {
		path = cachePath(dir, key)
		if b, ok := readCached(path); ok {
			cubinMu.Lock()
			cubins[key] = b
			cubinMu.Unlock()
			return b, nil
		}
	}
	cubinMu.Lock()
	if img, ok := cubins[key]; ok {
		cubinMu.Unlock()
		return img, nil
	}
	if c, ok := compiling[key]; ok {
		cubinMu.Unlock()
		<-c.done
		return c.img, c.err
	}
	c := &compileCall{done: make(chan struct{})}
	compiling[key] = c
	cubinMu.Unlock()

	start := time.Now()
	c.img, c.err = compile(k, src, opts)
	compiledModules.Add(1)
	compileNanos.Add(int64(time.Since(start)))
	cubinMu.Lock()
	if c.err == nil {
		cubins[key] = c.img
	}
	delete(compiling, key)
	cubinMu.Unlock()
	close(c.done)
	if c.err == nil && path != "" {
		writeAtomic(dir, path, c.img)
	}
	return c.img, c.err
}

// cachePath returns the file of the module with cache key key in the disk
// cache dir.
func cachePath(dir, key string) string { return filepath.Join(dir, key+".cubin") }

// readCached returns the CUBIN that the disk cache holds at path; false
// when there is none (an empty file counts as none).
func readCached(path string) ([]byte, bool) {
	b, err := os.ReadFile(path)
	return b, err == nil && len(b) > 0
}

// compileCall is a compilation in progress, which later requests for the
// same module wait for.
type compileCall struct {
	done chan struct{}
	img  []byte
	err  error
}

var (
	compiling       = map[string]*compileCall{} // by cache key, under cubinMu
	compiledModules atomic.Int64                // modules NVRTC compiled in this process
	compileNanos    atomic.Int64                // time those compilations took, summed
)

// CompileStats returns how many kernel modules NVRTC compiled in this
// process (modules found in the disk cache are not counted) and the time
// those compilations took, summed over the goroutines that ran them: the
// cost of a machine's first run, which later runs load from the cache.
func CompileStats() (modules int, total time.Duration) {
	return int(compiledModules.Load()), time.Duration(compileNanos.Load())
}

// recompile compiles module k with NVRTC, ignoring the caches, and
// replaces what they hold.
func recompile(k modKey, arch int) ([]byte, error) {
	if err := loadNVRTC(); err != nil {
		return nil, err
	}
	src, opts := source(k.fam), compileOptions(k, arch)
	img, err := compile(k, src, opts)
	if err != nil {
		return nil, err
	}
	key := cacheKey(src, opts, arch)
	cubinMu.Lock()
	cubins[key] = img
	cubinMu.Unlock()
	if dir := cacheDir(); dir != "" {
		writeAtomic(dir, cachePath(dir, key), img)
	}
	return img, nil
}

// cacheKey hashes what determines a CUBIN.
func cacheKey(src string, opts []string, arch int) string {
	h := sha256.New()
	h.Write([]byte(src))
	for _, o := range opts {
		h.Write([]byte{0})
		h.Write([]byte(o))
	}
	fmt.Fprintf(h, "\x00sm_%d\x00nvrtc %s", arch, nvrtcVer)
	return hex.EncodeToString(h.Sum(nil))[:40]
}

func compile(k modKey, src string, opts []string) ([]byte, error) {
	name := k.String()
	prog, err := nvrtc.CreateProgram(src, familyFiles[k.fam], nil, nil)
	if err != nil {
		return nil, &CompileError{Module: name, Options: opts, Err: err}
	}
	defer nvrtc.DestroyProgram(prog)
	if err := nvrtc.CompileProgram(prog, opts); err != nil {
		log, _ := nvrtc.GetProgramLog(prog)
		return nil, &CompileError{Module: name, Options: opts, Log: log, Err: err}
	}
	img, err := nvrtc.GetCUBIN(prog)
	if err != nil {
		return nil, &CompileError{Module: name, Options: opts, Err: err}
	}
	return img, nil
}

// writeAtomic writes b to path through a temporary file in dir and a
// rename, so that readers never see part of a file. The kernel paths
// ignore its error: a failing disk cache only costs compilations.
func writeAtomic(dir, path string, b []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".cubin-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// wholeFamilies lists every family on every dtype, all ops in one module.
func wholeFamilies() []modKey {
	var keys []modKey
	for f := family(0); f < numFamilies; f++ {
		if famMacro[f] == "" {
			keys = append(keys, modKey{fam: f})
			continue
		}
		for _, dt := range backend.DTypes {
			keys = append(keys, modKey{fam: f, dt: dt})
		}
	}
	return keys
}

// CompileAll compiles the source of every kernel for sm_<arch> (90 for an
// H200), each family and dtype as one module, in parallel, without a GPU:
// only NVRTC is needed. It returns the compile errors, joined. Tests use it
// to check the sources; devices compile the modules they need, one op at a
// time, at first use.
func CompileAll(arch int) error { return compileKeys(wholeFamilies(), arch) }

// compileKeys compiles the modules keys into the caches, in parallel.
func compileKeys(keys []modKey, arch int) error {
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			_, errs[i] = cubin(k, arch)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loadedModule is a module loaded into one device's context.
type loadedModule struct {
	once sync.Once
	err  error
	mod  cuda.Module
	fns  sync.Map // kernel name -> cuda.Function
}
