package analyze

import (
	"strings"

	"github.com/vramgo/vram/memory/trace"
)

// Attribution of an allocation to the code that asked for it.
//
// PyTorch's default history (torch.cuda.memory._record_memory_history()
// with stacks="all") records C++ frames and Python frames in one stack,
// innermost first: the allocator's own frames (torch::unwind::unwind(),
// gather_with_cpp(), c10::cuda::CUDACachingAllocator::...), the operator's
// C++ code, the interpreter's C functions (_PyEval_EvalFrameDefault), then
// the Python frames of torch itself, of the libraries in site-packages and
// of the standard library, and somewhere among them the user's own code.
// The frame that says who allocated is the innermost frame of the user's
// code: a Python frame (or a Go frame of a vram program) outside torch,
// the installed packages and the standard library. When a stack has
// none, the innermost Python frame stands in for it, and then the
// innermost frame.

// frameKind classifies a stack frame.
type frameKind uint8

const (
	frameUser    frameKind = iota // the program's own code
	frameLibrary                  // Python code of torch, installed packages or the standard library
	frameNative                   // C, C++ or CUDA code, or a frame with no source file
)

// nativeSuffixes end the file names of compiled code: sources of C, C++
// and CUDA, and shared libraries when a frame has no source line.
var nativeSuffixes = []string{".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh", ".inl", ".S", ".s"}

// classifyFrame says what kind of code f is.
func classifyFrame(f trace.Frame) frameKind {
	file := f.File
	switch {
	case strings.HasSuffix(file, ".py"):
		if libraryPython(file) {
			return frameLibrary
		}
		return frameUser
	case strings.HasSuffix(file, ".go"):
		return frameUser
	case file == "" || file == "??":
		return frameNative
	case strings.HasPrefix(file, "<stdin>") || strings.HasPrefix(file, "<ipython-input") || strings.HasPrefix(file, "<cell"):
		return frameUser // typed at the prompt, or a notebook's cell
	case strings.HasPrefix(file, "<"): // "<frozen runpy>", "<string>", FX's "<eval_with_key>.3": generated or the interpreter's
		return frameLibrary
	case strings.Contains(file, ".so"): // libtorch_cuda.so, libc.so.6
		return frameNative
	}
	for _, s := range nativeSuffixes {
		if strings.HasSuffix(file, s) {
			return frameNative
		}
	}
	if strings.Contains(f.Function, "::") { // a C++ name with a file of another kind
		return frameNative
	}
	// A file of another language (a notebook cell, a .pyx compiled by
	// Cython, a script of some other name): the user's, unless it lives
	// with the libraries.
	if libraryPython(file) {
		return frameLibrary
	}
	return frameUser
}

// libraryPython reports whether a Python source file belongs to torch, to
// an installed package or to the standard library rather than to the
// program.
func libraryPython(file string) bool {
	f := strings.ReplaceAll(file, "\\", "/")
	if strings.Contains(f, "/site-packages/") || strings.Contains(f, "/dist-packages/") ||
		strings.Contains(f, "/torch/") || strings.HasPrefix(f, "torch/") ||
		strings.Contains(f, "/torchinductor_") { // code torch.compile generated
		return true
	}
	// The standard library: .../lib/python3.11/..., .../Lib/... on
	// Windows, and the zipped library (python311.zip).
	if i := strings.Index(f, "/lib/python"); i >= 0 {
		rest := f[i+len("/lib/python"):]
		if rest != "" && rest[0] >= '0' && rest[0] <= '9' {
			return true
		}
	}
	if strings.Contains(f, "/Lib/") || strings.Contains(f, ".zip/") {
		return true
	}
	return false
}

// userFrame returns the index of the frame that best names who
// allocated: the innermost frame of the user's code, else the innermost
// Python frame, else the innermost C++ frame that is not the allocator's
// own machinery (the operator or autograd function that asked, for the
// allocations of autograd's threads, whose stacks have no Python frame),
// else 0; -1 for an empty stack.
func userFrame(frames []trace.Frame) int {
	if len(frames) == 0 {
		return -1
	}
	firstPython, firstOp := -1, -1
	for i, f := range frames {
		switch classifyFrame(f) {
		case frameUser:
			return i
		case frameLibrary:
			if firstPython < 0 {
				firstPython = i
			}
		case frameNative:
			if firstOp < 0 && !allocatorMachinery(f.Function) {
				firstOp = i
			}
		}
	}
	switch {
	case firstPython >= 0:
		return firstPython
	case firstOp >= 0:
		return firstOp
	}
	return 0
}

// machineryWords name the C++ functions between an operator and the
// device: the stack unwinder that records the stack, the caching
// allocator, the factories of empty tensors, the interpreter's and the C
// library's frames, and unnamed frames.
var machineryWords = []string{
	"unwind", "CapturedTraceback", "gather", "CachingAllocator", "c10::", "empty", "create_out", "allocate",
	"malloc", "Malloc", "resize", "std::", "_Py", "Py", "__libc", "_start", "??",
}

// allocatorMachinery reports whether a C++ function is part of how memory
// is allocated rather than what asked for it.
func allocatorMachinery(function string) bool {
	if function == "" || function == "main" || function == "cfunction_call" {
		return true
	}
	for _, w := range machineryWords {
		if strings.Contains(function, w) {
			return true
		}
	}
	return false
}

// shortFunction cuts a C++ signature to the function's name:
// "at::_ops::addmm::call(at::Tensor const&, ...)" is "at::_ops::addmm::call".
// "(anonymous namespace)" stays.
func shortFunction(function string) string {
	const anon = "(anonymous namespace)"
	for i := 0; i < len(function); i++ {
		if function[i] != '(' {
			continue
		}
		if strings.HasPrefix(function[i:], anon) {
			i += len(anon) - 1
			continue
		}
		if i > 0 {
			return function[:i]
		}
		return function
	}
	return function
}

// siteString names the frame of userFrame as "function (file:line)", ""
// for an empty stack.
func siteString(frames []trace.Frame) string {
	i := userFrame(frames)
	if i < 0 {
		return ""
	}
	return frameString(frames[i])
}

// userFrames returns up to n frames of the user's code, from the one
// userFrame picks outwards: the call chain within the program. When the
// stack holds no frame of the user's code, it returns the frame userFrame
// picks alone.
func userFrames(frames []trace.Frame, n int) []trace.Frame {
	i := userFrame(frames)
	if i < 0 {
		return nil
	}
	out := []trace.Frame{frames[i]}
	if classifyFrame(frames[i]) != frameUser {
		return out
	}
	for _, f := range frames[i+1:] {
		if len(out) == n {
			break
		}
		if classifyFrame(f) == frameUser {
			out = append(out, f)
		}
	}
	return out
}
