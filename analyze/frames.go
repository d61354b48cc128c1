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
// none, the innermost frame of the code torch.compile generated for the
// model stands in for it, else the innermost Python frame (marked as
// autograd's backward when the stack runs on autograd's thread, as a
// compiled model's backward does), and then the innermost frame.

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

// maxFrameScan bounds the bytes of a frame's file and function that
// attribution reads: a file name keeps its last maxFrameScan bytes (a
// Linux path has at most 4096), a function its first, so that a hostile
// snapshot whose frames share one huge string cannot make every frame
// cost its length. Names that long are cut on display anyway
// (maxFrameText).
const maxFrameScan = 8 << 10

// boundFrame returns f with its file and function cut to maxFrameScan
// bytes, without copying them.
func boundFrame(f trace.Frame) trace.Frame {
	if len(f.File) > maxFrameScan {
		f.File = f.File[len(f.File)-maxFrameScan:]
	}
	if len(f.Function) > maxFrameScan {
		f.Function = f.Function[:maxFrameScan]
	}
	return f
}

// boundFrames returns frames for a report: frames itself, or, when one
// of its names is longer than maxFrameScan (no real one is), a copy with
// such names cut and marked as clipText marks them, so that a report
// cannot repeat a huge name that a hostile snapshot shares between its
// stacks in every group, allocation and out-of-memory event it lists.
func boundFrames(frames []trace.Frame) []trace.Frame {
	long := false
	for _, f := range frames {
		if len(f.File) > maxFrameScan || len(f.Function) > maxFrameScan {
			long = true
			break
		}
	}
	if !long {
		return frames
	}
	out := make([]trace.Frame, len(frames))
	for i, f := range frames {
		f.File = clipText(f.File, maxFrameScan)
		f.Function = clipText(f.Function, maxFrameScan)
		out[i] = f
	}
	return out
}

// classifyFrame says what kind of code f is.
func classifyFrame(f trace.Frame) frameKind {
	f = boundFrame(f)
	file := f.File
	switch {
	case strings.HasSuffix(file, ".py") || windowsPath(file) && strings.HasSuffix(strings.ToLower(file), ".py"):
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
	case binaryFile(file): // libtorch_cuda.so, libc.so.6, /usr/bin/python3.12
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

// binaryFile reports whether a frame's file is a compiled binary rather
// than source: a shared library (libc.so.6, libtorch_cuda.so, a macOS
// .dylib, a Windows .dll or .pyd) or the interpreter's executable
// (/usr/bin/python3.12, python.exe), as a symbolizer names the object a
// C frame runs in when it has no debug information.
func binaryFile(file string) bool {
	base := file[strings.LastIndexAny(file, `/\`)+1:]
	if i := strings.Index(base, ".so"); i > 0 && (i+3 == len(base) || base[i+3] == '.') {
		return true
	}
	for _, s := range []string{".dylib", ".dll", ".pyd", ".exe"} {
		if len(base) > len(s) && strings.EqualFold(base[len(base)-len(s):], s) {
			return true
		}
	}
	// python, python3, python3.12, python3.12d, pypy3.10.
	for _, p := range []string{"python", "pypy"} {
		if rest, ok := strings.CutPrefix(base, p); ok && strings.Trim(rest, "0123456789.dmu") == "" {
			return true
		}
	}
	return false
}

// windowsPath reports whether file is a Windows path: it starts with a
// drive letter ("C:\\", "C:/") or holds a backslash.
func windowsPath(file string) bool {
	if len(file) >= 3 && file[1] == ':' && (file[2] == '\\' || file[2] == '/') &&
		('a' <= file[0] && file[0] <= 'z' || 'A' <= file[0] && file[0] <= 'Z') {
		return true
	}
	return strings.Contains(file, "\\")
}

// libraryPython reports whether a Python source file belongs to torch, to
// an installed package or to the standard library rather than to the
// program.
func libraryPython(file string) bool {
	f := strings.ReplaceAll(file, "\\", "/")
	if strings.Contains(f, "/site-packages/") || strings.Contains(f, "/dist-packages/") ||
		torchSource(f) || generatedPython(f) {
		return true
	}
	// The standard library: .../lib/python3.11/... (.../lib64/python3.11/...
	// on Fedora and openSUSE), ...\Lib\... on Windows, and the zipped
	// library (python311.zip).
	for _, dir := range []string{"/lib/python", "/lib64/python"} {
		for rest := f; ; {
			i := strings.Index(rest, dir)
			if i < 0 {
				break
			}
			rest = rest[i+len(dir):]
			if rest != "" && rest[0] >= '0' && rest[0] <= '9' {
				return true
			}
		}
	}
	if windowsPath(file) && strings.Contains(strings.ToLower(f), "/lib/") { // Anaconda's is "lib"
		return true
	}
	return strings.Contains(f, ".zip/")
}

// torchModules are the subpackages and modules of torch that are not
// private (those whose names start with "_" all are torch's).
var torchModules = map[string]bool{
	"amp": true, "ao": true, "autograd": true, "backends": true, "compiler": true, "contrib": true, "cpu": true,
	"cuda": true, "distributed": true, "distributions": true, "export": true, "fft": true, "func": true,
	"functional.py": true, "futures": true, "fx": true, "hub.py": true, "jit": true, "library.py": true,
	"linalg": true, "masked": true, "mps": true, "mtia": true, "multiprocessing": true, "nested": true, "nn": true,
	"onnx": true, "optim": true, "overrides.py": true, "package": true, "profiler": true, "quantization": true,
	"quasirandom.py": true, "random.py": true, "return_types.py": true, "serialization.py": true, "signal": true,
	"sparse": true, "special": true, "storage.py": true, "testing": true, "types.py": true, "utils": true,
	"xpu": true, "accelerator": true, "version.py": true,
}

// torchSource reports whether a file is torch's own Python source outside
// site-packages (a source checkout, or a build installed elsewhere): a
// path ".../torch/M..." where M is one of torch's modules. A directory of
// the user's that happens to be named torch ("/opt/torch/train.py") is
// not.
func torchSource(file string) bool {
	for rest := file; ; {
		i := strings.Index(rest, "torch/")
		if i < 0 {
			return false
		}
		if i == 0 || rest[i-1] == '/' {
			m := rest[i+len("torch/"):]
			if j := strings.IndexByte(m, '/'); j >= 0 {
				m = m[:j]
			}
			if strings.HasPrefix(m, "_") || torchModules[m] {
				return true
			}
		}
		rest = rest[i+len("torch/"):]
	}
}

// userFrame returns the index of the frame that best names who
// allocated: the innermost frame of the user's code, else the innermost
// frame of the code torch.compile generated, else the innermost Python
// frame, else, for a stack of C++ frames alone (the allocations of
// autograd's threads during backward), the frame of nativeSite, else 0;
// -1 for an empty stack.
func userFrame(frames []trace.Frame) int {
	i, _ := pickFrame(frames)
	return i
}

// pickFrame is userFrame with the label the site is shown under.
func pickFrame(frames []trace.Frame) (int, string) {
	if len(frames) == 0 {
		return -1, ""
	}
	firstPython, firstGenerated := -1, -1
	engine := false
	for i, f := range frames {
		switch classifyFrame(f) {
		case frameUser:
			return i, frameString(f)
		case frameLibrary:
			if firstPython < 0 {
				firstPython = i
			}
			if firstGenerated < 0 && generatedPython(boundFrame(f).File) {
				firstGenerated = i
			}
		case frameNative:
			engine = engine || strings.HasPrefix(shortFunction(boundFrame(f).Function), "torch::autograd::Engine::")
		}
	}
	if firstGenerated >= 0 {
		firstPython = firstGenerated
	}
	if firstPython >= 0 {
		label := frameString(frames[firstPython])
		if engine {
			label += backwardNote
		}
		return firstPython, label
	}
	return nativeSite(frames)
}

// generatedPython reports whether a Python source file is code that
// torch.compile generated for the user's model (TorchInductor writes it
// under a directory named torchinductor_<user>): of the library's frames,
// the one that names the model's own computation.
func generatedPython(file string) bool {
	return strings.Contains(strings.ReplaceAll(file, "\\", "/"), "/torchinductor_")
}

// nativeSite picks the frame of a stack of C++ frames that says what
// asked for the memory, and its label: the autograd function that ran
// ("AddmmBackward0 (autograd backward)": what PyTorch calls the tensor's
// grad_fn), else the outermost ATen operator called ("aten::mm"), else
// the innermost frame that is neither the allocator's machinery nor the
// thread's start, else the first frame. A label other than an autograd
// function's says "(autograd backward)" too when the stack runs in
// autograd's engine.
func nativeSite(frames []trace.Frame) (int, string) {
	i, label, _ := nativeSiteFound(frames)
	return i, label
}

// nativeSiteFound is nativeSite, and whether the frame it picked says what
// asked (an autograd function, an operator, a frame other than the
// allocator's machinery) rather than standing in for nothing better.
func nativeSiteFound(frames []trace.Frame) (int, string, bool) {
	op, other := -1, -1
	opName := ""
	engine := false
	for i, f := range frames {
		name := shortFunction(boundFrame(f).Function)
		if node, ok := autogradNode(name); ok {
			return i, node + backwardNote, true
		}
		if o, ok := atenOp(name); ok {
			op, opName = i, o // the outermost: keep looking
			continue
		}
		if strings.HasPrefix(name, "torch::autograd::Engine::") {
			engine = true
		}
		if other < 0 && !allocatorMachinery(name) {
			other = i
		}
	}
	note := ""
	if engine {
		note = backwardNote
	}
	switch {
	case op >= 0:
		return op, "aten::" + opName + note, true
	case other >= 0:
		return other, frameString(frames[other]) + note, true
	}
	return 0, frameString(frames[0]) + note, false
}

// oomSite is the Site of an OOM event's stack: the user's code, Python,
// or C++ that says what asked (an OOM in the backward pass, on autograd's
// thread: "MmBackward0 (autograd backward)"); "" when the stack holds only
// the allocator's own frames, as older versions of PyTorch recorded them.
// native reports a site of C++ frames.
func oomSite(frames []trace.Frame) (site string, native bool) {
	i, label := pickFrame(frames)
	if i < 0 {
		return "", false
	}
	if classifyFrame(frames[i]) != frameNative {
		return label, false
	}
	if _, label, ok := nativeSiteFound(frames); ok {
		return label, true
	}
	return "", true
}

// backwardNote marks the site of memory that autograd's engine allocated.
const backwardNote = " (autograd backward)"

// autogradNode returns the class of an autograd function's apply
// ("torch::autograd::generated::MmBackward0::apply" is MmBackward0,
// "torch::autograd::AccumulateGrad::apply" AccumulateGrad).
func autogradNode(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "torch::autograd::")
	if !ok {
		return "", false
	}
	rest, ok = strings.CutSuffix(rest, "::apply")
	if !ok {
		return "", false
	}
	if i := strings.LastIndex(rest, "::"); i >= 0 {
		rest = rest[i+2:]
	}
	if rest == "" || rest == "Node" || rest == "(anonymous namespace)" {
		return "", false
	}
	return rest, true
}

// atenOp returns the operator of an ATen dispatcher entry point
// ("at::_ops::mm::call" is mm).
func atenOp(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "at::_ops::")
	if !ok {
		return "", false
	}
	rest, ok = strings.CutSuffix(rest, "::call")
	if !ok || rest == "" || strings.Contains(rest, "::") {
		return "", false
	}
	return rest, true
}

// machineryWords, in the name of a C++ function (without its
// parameters), mark the frames between an operator and the device: the
// stack unwinder that records the stack, the caching allocator, the
// factories of empty tensors and outputs, the tensor iterator that sizes
// outputs, the interpreter's, the C library's and the threads' frames, and
// unnamed frames.
var machineryWords = []string{
	"unwind", "CapturedTraceback", "gather_with_cpp", "CachingAllocator", "c10::", "empty", "create_out", "allocate",
	"malloc", "Malloc", "resize", "set_output", "TensorIterator", "std::", "_Py", "Py", "__libc", "_start", "start_thread",
	"pthread_", "__clone", "clone3", "thread_main", "thread_init", "torch::autograd::Engine::", "??",
}

// allocatorMachinery reports whether a C++ function, named without its
// parameters (shortFunction), is part of how memory is allocated rather
// than what asked for it.
func allocatorMachinery(name string) bool {
	if name == "" || name == "main" || name == "cfunction_call" {
		return true
	}
	for _, w := range machineryWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// shortFunction cuts a C++ signature to the function's qualified name,
// without its return type, template arguments and parameters:
// "at::_ops::addmm::call(at::Tensor const&, ...)" is
// "at::_ops::addmm::call", "void at::native::gpu_reduce_kernel<float,
// ...>(at::TensorIterator&, ...)" is "at::native::gpu_reduce_kernel".
// "(anonymous namespace)" and "operator()" stay. A name it cannot parse
// (unbalanced brackets) is cut at its first parenthesis only.
func shortFunction(function string) string {
	const anon, call = "(anonymous namespace)", "operator()"
	const anonMark, callMark = "\x00", "\x01"
	fn := strings.ReplaceAll(strings.ReplaceAll(function, anon, anonMark), call, callMark)
	var b strings.Builder
	depth := 0
scan:
	for i := 0; i < len(fn); i++ {
		switch c := fn[i]; {
		case c == '<' || c == '{' || c == '[':
			depth++
		case c == '>' || c == '}' || c == ']':
			depth--
			if depth < 0 {
				break scan
			}
		case c == '(' && depth == 0:
			if b.Len() > 0 {
				break scan
			}
			depth = -1 // a name that starts with a parenthesis
			break scan
		case depth == 0:
			b.WriteByte(c)
		}
	}
	name := strings.TrimSpace(b.String())
	if depth != 0 || name == "" {
		return cutAtParen(function)
	}
	if i := strings.LastIndexByte(name, ' '); i >= 0 { // the return type
		name = name[i+1:]
	}
	return strings.ReplaceAll(strings.ReplaceAll(name, anonMark, anon), callMark, call)
}

// cutAtParen cuts a signature at its first parenthesis that does not
// open "(anonymous namespace)".
func cutAtParen(function string) string {
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
	_, label := pickFrame(frames)
	return label
}

// userFrames returns up to n frames of the user's code, from the one
// userFrame picks outwards: the call chain within the program. When the
// stack holds no frame of the user's code, it returns the frame userFrame
// picks alone.
func userFrames(frames []trace.Frame, n int) []trace.Frame {
	return userFramesFrom(frames, n, userFrame(frames))
}

// userFramesFrom is userFrames given i, the frame userFrame picks.
func userFramesFrom(frames []trace.Frame, n, i int) []trace.Frame {
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

// stackID identifies a stack by its frames' memory: the readers give the
// blocks and events of one stack one shared []Frame.
type stackID struct {
	first *trace.Frame
	n     int
}

// stackMemo remembers, within one pass over a snapshot or history, what
// was worked out for each stack: a stack held by many blocks or events
// (every allocation of a layer, a shared deep stack) is attributed once,
// not once per block. Its zero value remembers nothing; newStackMemo makes
// one that remembers. It is used by one goroutine at a time.
type stackMemo struct {
	picks map[stackID]memoPick
	user  map[userKey][]trace.Frame
	// empty is the key of an empty stack: noStack, or noPythonFrames
	// where the snapshot's stacks were recorded (framesRecorded).
	empty string
	// unrecorded holds the addresses of live blocks without frames whose
	// allocation the history does not hold, where empty is
	// noPythonFrames: allocated before the history's window or while
	// nothing recorded, they may have had a Python stack.
	unrecorded map[uint64]bool
}

type memoPick struct {
	i     int
	label string
}

type userKey struct {
	id stackID
	n  int
}

// newStackMemo makes a stackMemo for the stacks of s, nil for a text
// trace.
func newStackMemo(s *trace.Snapshot) *stackMemo {
	m := &stackMemo{picks: map[stackID]memoPick{}, user: map[userKey][]trace.Frame{}, empty: noStack}
	if framesRecorded(s) {
		m.empty = noPythonFrames
		m.unrecorded = unrecordedBlocks(s)
	}
	return m
}

// unrecordedBlocks returns the addresses of s's live blocks without frames
// that no alloc event of its history made (the last event at the address
// is not an alloc, or there is none).
func unrecordedBlocks(s *trace.Snapshot) map[uint64]bool {
	allocated := map[uint64]bool{}
	for i := range s.History {
		switch s.History[i].Action {
		case trace.ActionAlloc:
			allocated[s.History[i].Addr] = true
		case trace.ActionFreeRequested, trace.ActionFreeCompleted:
			delete(allocated, s.History[i].Addr)
		}
	}
	var out map[uint64]bool
	for _, seg := range s.Segments {
		for _, b := range seg.Blocks {
			if b.State == trace.StateActiveAllocated && len(b.Frames) == 0 && !allocated[b.Addr] {
				if out == nil {
					out = map[uint64]bool{}
				}
				out[b.Addr] = true
			}
		}
	}
	return out
}

// blockKey is stackKey for a live block: one without frames that the
// history did not see allocated reads noStackUnrecorded rather than
// noPythonFrames.
func (m *stackMemo) blockKey(b trace.Block) string {
	if len(b.Frames) == 0 && m != nil && m.unrecorded[b.Addr] {
		return noStackUnrecorded
	}
	return m.stackKey(b.Frames)
}

// framesRecorded reports that PyTorch recorded the stacks of s's
// allocations (s is a PyTorch snapshot), so that one without frames ran
// where there was no stack to record: an alloc event of the history has
// frames or, for a snapshot without history, a held block has. Free
// events are not asked, as context="alloc" records no frames for them,
// nor blocks where there is a history, as context="state" records frames
// for blocks alone.
func framesRecorded(s *trace.Snapshot) bool {
	if s == nil || s.Meta[trace.MetaSource] != "pytorch" {
		return false
	}
	for i := range s.History {
		if len(s.History[i].Frames) > 0 && s.History[i].Action == trace.ActionAlloc {
			return true
		}
	}
	if len(s.History) > 0 {
		return false
	}
	for _, seg := range s.Segments {
		for _, b := range seg.Blocks {
			if len(b.Frames) > 0 {
				return true
			}
		}
	}
	return false
}

// pick is pickFrame, remembered.
func (m *stackMemo) pick(frames []trace.Frame) (int, string) {
	if len(frames) == 0 || m == nil || m.picks == nil {
		return pickFrame(frames)
	}
	id := stackID{&frames[0], len(frames)}
	if p, ok := m.picks[id]; ok {
		return p.i, p.label
	}
	i, label := pickFrame(frames)
	m.picks[id] = memoPick{i, label}
	return i, label
}

// stackKey is the package's stackKey, remembered.
func (m *stackMemo) stackKey(frames []trace.Frame) string {
	if len(frames) == 0 {
		if m.empty == "" {
			return noStack
		}
		return m.empty
	}
	_, label := m.pick(frames)
	return label
}

// siteString is the package's siteString, remembered.
func (m *stackMemo) siteString(frames []trace.Frame) string {
	_, label := m.pick(frames)
	return label
}

// userFrames is the package's userFrames, remembered.
func (m *stackMemo) userFrames(frames []trace.Frame, n int) []trace.Frame {
	if len(frames) == 0 || m == nil || m.user == nil {
		return userFramesFrom(frames, n, userFrame(frames))
	}
	k := userKey{stackID{&frames[0], len(frames)}, n}
	if u, ok := m.user[k]; ok {
		return u
	}
	i, _ := m.pick(frames)
	u := userFramesFrom(frames, n, i)
	m.user[k] = u
	return u
}
