package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ebitengine/purego"
)

// EnvLibs names the environment variable whose ':'-separated directories
// are searched first. This package does not read it: vram.ConfigFromEnv
// does, into vram.Config.CUDALibs, which reaches [SetDirs]. Messages that
// tell the user where to point the search name it.
const EnvLibs = "VRAM_CUDA_LIBS"

// dirs holds the directories [SetDirs] set.
var dirs struct {
	mu   sync.Mutex
	list []string
}

// SetDirs sets the directories searched first, before the loader's own
// search (step 1 of the search order in the package documentation), for
// every library opened afterwards; nil or empty searches none. A library
// already open stays as it is. vram.Configure sets them from
// vram.Config.CUDALibs (and, for a program that does not call it, from
// VRAM_CUDA_LIBS at the first use of a device).
func SetDirs(list []string) {
	dirs.mu.Lock()
	defer dirs.mu.Unlock()
	dirs.list = slices.Clone(list)
}

// Dirs returns the directories set by [SetDirs].
func Dirs() []string {
	dirs.mu.Lock()
	defer dirs.mu.Unlock()
	return slices.Clone(dirs.list)
}

// pythonTimeout bounds the run of each python3 asked for its sys.path.
const pythonTimeout = 2 * time.Second

// Spec describes one library to find.
type Spec struct {
	// Name is the short name used in messages, e.g. "libnvrtc".
	Name string
	// Sonames are the file names to try, in order of preference, e.g.
	// "libnvrtc.so.13", "libnvrtc.so.12".
	Sonames []string
	// ExtraDirs are searched after /usr/local/cuda and before Python
	// environments (the driver's /usr/local/nvidia/lib64, say).
	ExtraDirs []string
	// NoToolkitDirs skips /usr/local/cuda and the Python environments:
	// the driver library is never installed there (only its stubs are, and
	// those must not be loaded).
	NoToolkitDirs bool
}

// Attempt is one place where a library was looked for.
type Attempt struct {
	// Where says which step of the search this was: "VRAM_CUDA_LIBS",
	// "loader", "cuda toolkit", "extra", "python".
	Where string `json:"where"`
	// Path is the file tried: a bare soname for the loader step.
	Path string `json:"path"`
	// Err is why it did not load; empty for the attempt that succeeded.
	Err string `json:"error,omitempty"`
}

// Library is an opened shared library.
type Library struct {
	// Name is the spec's short name.
	Name string
	// Soname is the soname that loaded, e.g. "libnvrtc.so.13".
	Soname string
	// Path is the file that the process mapped (symbolic links resolved),
	// or the soname when the loader's choice could not be found out.
	Path string
	// Where is the search step that found it (see [Attempt.Where]).
	Where string
	// Tried lists every attempt, the successful one last.
	Tried []Attempt
	// Handle is the dlopen handle.
	Handle uintptr
}

// NotFoundError reports a library that no search step could load.
type NotFoundError struct {
	Name    string    // the spec's short name
	Sonames []string  // the sonames tried
	Tried   []Attempt // every attempt, in order
}

// Error returns a one-line message naming the library and the loader's own
// reason (the first attempt by the loader, else the first attempt).
func (e *NotFoundError) Error() string {
	reason := e.reason()
	msg := fmt.Sprintf("load: %s not loadable", strings.Join(e.Sonames, " or "))
	if reason != "" {
		msg += ": " + reason
	}
	if n := len(e.Tried); n > 1 {
		msg += fmt.Sprintf(" (%d places tried)", n)
	}
	return msg
}

// Reason returns the loader's own reason for not loading the library: the
// error of the first attempt by the loader, else of the first attempt;
// "not found" when nothing was tried.
func (e *NotFoundError) Reason() string {
	if r := e.reason(); r != "" {
		return r
	}
	return "not found"
}

func (e *NotFoundError) reason() string {
	for _, a := range e.Tried {
		if a.Where == "loader" && a.Err != "" {
			return a.Err
		}
	}
	if len(e.Tried) > 0 {
		return e.Tried[0].Err
	}
	return ""
}

// Open searches for the library described by spec in the order given in
// the package documentation and returns the first one that loads, opened
// with RTLD_NOW|RTLD_GLOBAL (so that a library loaded later resolves its
// dependencies against it). It returns a *NotFoundError when none loads.
//
// Open never closes a library: the bindings keep function pointers into it
// for the life of the process.
func Open(spec Spec) (*Library, error) {
	var tried []Attempt
	try := func(where, path, soname string) *Library {
		h, err := dlopen(path)
		if err != nil {
			tried = append(tried, Attempt{Where: where, Path: path, Err: oneLine(err.Error())})
			return nil
		}
		tried = append(tried, Attempt{Where: where, Path: path})
		lib := &Library{Name: spec.Name, Soname: soname, Where: where, Handle: h}
		lib.Path = mappedPath(path, soname)
		lib.Tried = tried
		return lib
	}
	tryDirs := func(where string, dirs []string) *Library {
		for _, dir := range dirs {
			for _, so := range spec.Sonames {
				p := filepath.Join(dir, so)
				if _, err := os.Stat(p); err != nil {
					continue // only files that exist count as attempts
				}
				if lib := try(where, p, so); lib != nil {
					return lib
				}
			}
		}
		return nil
	}

	if lib := tryDirs(EnvLibs, Dirs()); lib != nil {
		return lib, nil
	}
	for _, so := range spec.Sonames {
		if lib := try("loader", so, so); lib != nil {
			return lib, nil
		}
	}
	if !spec.NoToolkitDirs {
		if lib := tryDirs("cuda toolkit", toolkitDirs()); lib != nil {
			return lib, nil
		}
	}
	if lib := tryDirs("extra", spec.ExtraDirs); lib != nil {
		return lib, nil
	}
	if !spec.NoToolkitDirs {
		if lib := tryDirs("python", pythonDirs()); lib != nil {
			return lib, nil
		}
	}
	return nil, &NotFoundError{Name: spec.Name, Sonames: spec.Sonames, Tried: tried}
}

// dlopen opens a library with RTLD_NOW|RTLD_GLOBAL. dlerror's message is
// kept per OS thread, so the thread is held from dlopen to dlerror: else
// the message can be lost (seen: an empty reason) when the goroutine moves.
func dlopen(path string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// toolkitDirs returns the library folders of a CUDA toolkit under
// /usr/local/cuda.
func toolkitDirs() []string {
	dirs := []string{"/usr/local/cuda/lib64"}
	targets, _ := filepath.Glob("/usr/local/cuda/targets/*/lib")
	return append(dirs, targets...)
}

// pythonDirs returns the nvidia/*/lib folders of the Python environments
// that can be found: virtual and conda environments named in the
// environment, the system's dist-packages, then every sys.path entry of
// every python3 on PATH.
func pythonDirs() []string {
	var roots []string
	for _, env := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := os.Getenv(env); p != "" {
			g, _ := filepath.Glob(filepath.Join(p, "lib", "python3*", "site-packages"))
			roots = append(roots, g...)
		}
	}
	g, _ := filepath.Glob("/usr/local/lib/python3*/dist-packages")
	roots = append(roots, g...)
	roots = append(roots, "/usr/lib/python3/dist-packages")
	roots = append(roots, pythonSysPaths()...)

	var dirs []string
	seen := map[string]bool{}
	for _, r := range roots {
		libs, _ := filepath.Glob(filepath.Join(r, "nvidia", "*", "lib"))
		sort.Strings(libs)
		for _, d := range libs {
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

// pythonSysPaths asks each python3 on PATH for its sys.path.
func pythonSysPaths() []string {
	var out []string
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		py := filepath.Join(dir, "python3")
		real, err := filepath.EvalSymlinks(py)
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		ctx, cancel := context.WithTimeout(context.Background(), pythonTimeout)
		b, err := exec.CommandContext(ctx, py, "-c", "import sys; print('\\n'.join(p for p in sys.path if p))").Output()
		cancel()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				out = append(out, line)
			}
		}
	}
	return out
}

// mappedPath returns the file the process mapped for a library opened as
// path: path itself with symbolic links resolved when it names a file, else
// the first mapping in /proc/self/maps whose file name starts with soname.
// It falls back to path.
func mappedPath(path, soname string) string {
	if strings.Contains(path, "/") {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			return real
		}
		return path
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return path
	}
	defer f.Close()
	// libnvrtc.so.13 maps as libnvrtc.so.13.0.88, but libcuda.so.1 as
	// libcuda.so.580.159.04: match the soname first, then its stem.
	stem, _, _ := strings.Cut(soname, ".so.")
	stem += ".so."
	var byStem string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		p := fields[len(fields)-1]
		base := filepath.Base(p)
		if strings.HasPrefix(base, soname) {
			return p
		}
		if byStem == "" && strings.HasPrefix(base, stem) {
			byStem = p
		}
	}
	if byStem != "" {
		return byStem
	}
	return path
}

// oneLine joins a multi-line loader message.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// IsNotFound reports whether err is (or wraps) a *NotFoundError.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}
