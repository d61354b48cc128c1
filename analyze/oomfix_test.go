package analyze

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"
)

const mib = 1 << 20

// TestClassifyFrame checks which frames count as the user's code, over
// the kinds of frame a stacks="all" history of PyTorch records and those
// of vram's Go stacks.
func TestClassifyFrame(t *testing.T) {
	site := "/usr/local/lib/python3.12/site-packages/"
	tests := []struct {
		f    trace.Frame
		want frameKind
	}{
		{trace.Frame{Function: "torch::unwind::unwind()", File: "/pytorch/torch/csrc/profiler/unwind/unwind.cpp", Line: 341}, frameNative},
		{trace.Frame{Function: "gather_with_cpp()", File: "??"}, frameNative},
		{trace.Frame{Function: "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)", File: "??"}, frameNative},
		{trace.Frame{Function: "at::_ops::addmm::call(at::Tensor const&)", File: ""}, frameNative},
		{trace.Frame{Function: "_PyEval_EvalFrameDefault", File: "/usr/local/src/conda/python-3.12.7/Python/ceval.c", Line: 4}, frameNative},
		{trace.Frame{Function: "__libc_start_main", File: "/lib/x86_64-linux-gnu/libc.so.6"}, frameNative},
		{trace.Frame{Function: "cudaMalloc", File: "libcudart.so.12"}, frameNative},
		{trace.Frame{Function: "kernel", File: "ops/kernel.cu", Line: 3}, frameNative},
		{trace.Frame{Function: "at::native::foo", File: "weird-file"}, frameNative},
		{trace.Frame{Function: "forward", File: site + "torch/nn/modules/linear.py", Line: 125}, frameLibrary},
		{trace.Frame{Function: "forward", File: "/usr/lib/python3/dist-packages/transformers/models/gpt2/modeling_gpt2.py", Line: 9}, frameLibrary},
		{trace.Frame{Function: "_call_impl", File: "/opt/pytorch/torch/nn/modules/module.py", Line: 1784}, frameLibrary},
		{trace.Frame{Function: "f", File: "torch/_tensor.py", Line: 1}, frameLibrary},
		{trace.Frame{Function: "_run_code", File: "/usr/local/lib/python3.12/runpy.py", Line: 88}, frameLibrary},
		{trace.Frame{Function: "_run_code", File: `C:\Python312\Lib\runpy.py`, Line: 88}, frameLibrary},
		{trace.Frame{Function: "_call_with_frames_removed", File: "<frozen importlib._bootstrap>", Line: 488}, frameLibrary},
		{trace.Frame{Function: "forward", File: "/home/ada/proj/model.py", Line: 31}, frameUser},
		{trace.Frame{Function: "<module>", File: "train.py", Line: 80}, frameUser},
		{trace.Frame{Function: "step", File: "/home/ada/lib/pythonic/step.py", Line: 2}, frameUser},
		{trace.Frame{Function: "main.train", File: "/src/train.go", Line: 42}, frameUser},
		{trace.Frame{Function: "<cell line: 3>", File: "/tmp/ipykernel_77/123.py", Line: 3}, frameUser},
		{trace.Frame{Function: "<module>", File: "<ipython-input-3-5f2b>", Line: 1}, frameUser},
		{trace.Frame{Function: "<module>", File: "<stdin>", Line: 1}, frameUser},
		{trace.Frame{Function: "forward", File: "<eval_with_key>.3", Line: 5}, frameLibrary},
		{trace.Frame{Function: "call", File: "/tmp/torchinductor_ada/ab/cabc123.py", Line: 77}, frameLibrary},
		{trace.Frame{Function: "train_step", File: "/opt/torch/train.py", Line: 70}, frameUser},
		{trace.Frame{Function: "train_step", File: "/home/ada/torch/experiments/train.py", Line: 70}, frameUser},
		{trace.Frame{Function: "backward", File: "/src/pytorch/torch/_tensor.py", Line: 626}, frameLibrary},
		{trace.Frame{Function: "step", File: "/src/pytorch/torch/optim/adamw.py", Line: 9}, frameLibrary},
		{trace.Frame{Function: "relu", File: "/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/functional.py", Line: 1723}, frameLibrary},
		{trace.Frame{Function: "gather_with_cpp()", File: "memory_snapshot.cpp"}, frameNative},
		{trace.Frame{Function: "void at::native::gpu_reduce_kernel<float>(at::TensorIterator&)", File: "tmpxft_00005692_00000000-6_ReduceSumProdKernel.compute_120.cudafe1.cpp"}, frameNative},
	}
	for _, tc := range tests {
		if got := classifyFrame(tc.f); got != tc.want {
			t.Errorf("classifyFrame(%+v) = %d, want %d", tc.f, got, tc.want)
		}
	}
}

// TestShortFunction checks how C++ signatures are cut to the function's
// name, as PyTorch 2.11's stacks spell them.
func TestShortFunction(t *testing.T) {
	tests := []struct{ in, want string }{
		{"at::_ops::addmm::call(at::Tensor const&, at::Tensor const&)", "at::_ops::addmm::call"},
		{"torch::unwind::unwind()", "torch::unwind::unwind"},
		{"at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA_memory_format_empty(c10::ArrayRef<c10::SymInt>)", "at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA_memory_format_empty"},
		{"void at::cuda::blas::gemm_internal_cublas<float, float>(char, char, long)", "at::cuda::blas::gemm_internal_cublas"},
		{"at::Tensor at::_sum_to<c10::SymInt>(at::Tensor, c10::ArrayRef<c10::SymInt>, bool)", "at::_sum_to"},
		{"void at::native::gpu_reduce_kernel<float, float, 4, 4, at::native::func_wrapper_t<float, __nv_dl_tag<void (*)(at::TensorIterator&), &at::native::sum_kernel_cuda, 1u> > >(at::TensorIterator&)", "at::native::gpu_reduce_kernel"},
		{"torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", "torch::autograd::Node::operator()"},
		{"std::error_code::default_error_condition() const", "std::error_code::default_error_condition"},
		{"at::native::foo(int)::{lambda()#1}::operator()() const", "at::native::foo"},
		{"pthread_condattr_setpshared", "pthread_condattr_setpshared"},
		{"(anonymous namespace)::f(int)", "(anonymous namespace)::f"},
		{"weird<unbalanced(int)", "weird<unbalanced"},
		{"(x)", "(x)"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := shortFunction(tc.in); got != tc.want {
			t.Errorf("shortFunction(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestUserFrame checks the frame a stack is attributed to: the innermost
// of the user's code, else the innermost Python frame, else the first.
func TestUserFrame(t *testing.T) {
	cpp := trace.Frame{Function: "torch::unwind::unwind()", File: "??"}
	lib := trace.Frame{Function: "forward", File: "/x/site-packages/torch/nn/modules/linear.py", Line: 125}
	lib2 := trace.Frame{Function: "_call_impl", File: "/x/site-packages/torch/nn/modules/module.py", Line: 1784}
	user := trace.Frame{Function: "forward", File: "/home/ada/proj/model.py", Line: 31}
	user2 := trace.Frame{Function: "train_step", File: "/home/ada/proj/train.py", Line: 57}
	tests := []struct {
		name   string
		frames []trace.Frame
		want   int
		site   string
	}{
		{"empty", nil, -1, ""},
		{"C++, torch, then the user's", []trace.Frame{cpp, cpp, lib, lib2, user, lib2, user2}, 4, "forward (proj/model.py:31)"},
		{"no user frame: the first Python one", []trace.Frame{cpp, lib, lib2}, 1, "forward (modules/linear.py:125)"},
		{"only the allocator's C++: the first", []trace.Frame{cpp, {Function: "gather_with_cpp()", File: "??"}}, 0, "torch::unwind::unwind"},
		{"only C++, from autograd's thread: the autograd function", []trace.Frame{cpp, {Function: "gather_with_cpp()", File: "??"},
			{Function: "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)", File: "??"},
			{Function: "at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType)", File: "/pytorch/aten/src/ATen/cuda/EmptyTensor.cpp", Line: 23},
			{Function: "at::(anonymous namespace)::create_out(c10::ArrayRef<long>)", File: "??"},
			{Function: "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", File: "??"},
			{Function: "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)", File: "??"},
			{Function: "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", File: "??"},
			{Function: "start_thread", File: "/lib/x86_64-linux-gnu/libc.so.6"}}, 6, "MmBackward0 (autograd backward)"},
		{"only C++, gradient accumulation", []trace.Frame{cpp,
			{Function: "at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)", File: "??"},
			{Function: "torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", File: "??"},
			{Function: "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", File: ""}}, 2, "AccumulateGrad (autograd backward)"},
		// As PyTorch 2.11 records the reduction of a broadcast gradient:
		// the outermost operator, in autograd's engine; the frames of the
		// thread's start (pthread_condattr_setpshared, __clone) are not
		// what allocated.
		{"only C++, in the engine, no autograd function: the outermost operator", []trace.Frame{cpp,
			{Function: "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)", File: ""},
			{Function: "void at::native::gpu_reduce_kernel<float, float, 4, 4, at::native::func_wrapper_t<float, __nv_hdl_wrapper_t<false, true, false, __nv_dl_tag<void (*)(at::TensorIterator&), &at::native::sum_kernel_cuda, 1u>, float (float, float), float, float> > >(at::TensorIterator&, at::native::func_wrapper_t<float> const&, float)", File: "tmpxft_00005692_00000000-6_ReduceSumProdKernel.compute_120.cudafe1.cpp"},
			{Function: "at::_ops::sum_dim_IntList::redispatch(c10::DispatchKeySet, at::Tensor const&)", File: "??"},
			{Function: "at::_ops::sum_dim_IntList::call(at::Tensor const&, c10::OptionalArrayRef<long>, bool, std::optional<c10::ScalarType>)", File: "??"},
			{Function: "at::Tensor at::_sum_to<c10::SymInt>(at::Tensor, c10::ArrayRef<c10::SymInt>, bool)", File: ""},
			{Function: "torch::autograd::InputMetadata::reduce_grad(at::Tensor&) const", File: "??"},
			{Function: "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*)", File: "??"},
			{Function: "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", File: "??"},
			{Function: "std::error_code::default_error_condition() const", File: "??"},
			{Function: "pthread_condattr_setpshared", File: "??"},
			{Function: "__clone", File: "??"}}, 4, "aten::sum_dim_IntList (autograd backward)"},
		{"only C++, no operator: the first that is not the allocator's", []trace.Frame{cpp,
			{Function: "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)", File: ""},
			{Function: "at::cuda::setWorkspaceForHandle(cublasContext*, c10::cuda::CUDAStream)", File: ""},
			{Function: "at::cuda::getCurrentCUDABlasHandle()", File: "??"},
			{Function: "pthread_condattr_setpshared", File: "??"}}, 2, "at::cuda::setWorkspaceForHandle"},
		{"only the thread's start", []trace.Frame{{Function: "pthread_condattr_setpshared", File: "??"}, {Function: "__clone", File: "??"}}, 0, "pthread_condattr_setpshared"},
		{"the user's first", []trace.Frame{user2}, 0, "train_step (proj/train.py:57)"},
		// A compiled model's backward, as PyTorch 2.11 records it: the
		// operator's dispatcher in torch, then the code torch.compile
		// generated, on autograd's thread; no frame of the user's.
		{"compiled backward: the generated code, in the engine", []trace.Frame{cpp,
			{Function: "at::_ops::_efficient_attention_backward::call(at::Tensor const&)", File: "??"},
			{Function: "__call__", File: "/x/site-packages/torch/_ops.py", Line: 865},
			{Function: "_PyEval_EvalFrameDefault", File: "??"},
			trace.Frame{Function: "call", File: "/tmp/torchinductor_ada/ei/cei3a4my.py", Line: 2026},
			{Function: "run", File: "/x/site-packages/torch/_inductor/utils.py", Line: 3401},
			{Function: "torch::autograd::PyNode::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", File: ""},
			{Function: "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", File: "??"},
			{Function: "__clone", File: "??"},
			{Function: "backward", File: "/x/site-packages/torch/_functorch/_aot_autograd/runtime_wrappers.py", Line: 2748}}, 4, "call (ei/cei3a4my.py:2026) (autograd backward)"},
		{"compiled forward without a user frame: the generated code", []trace.Frame{cpp, lib, trace.Frame{Function: "call", File: "/tmp/torchinductor_ada/ei/cei3a4my.py", Line: 2026}, lib2}, 2, "call (ei/cei3a4my.py:2026)"},
		{"Python on autograd's thread: marked", []trace.Frame{cpp, lib,
			{Function: "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", File: "??"}}, 1, "forward (modules/linear.py:125) (autograd backward)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := userFrame(tc.frames); got != tc.want {
				t.Errorf("userFrame = %d, want %d", got, tc.want)
			}
			if got := siteString(tc.frames); got != tc.site {
				t.Errorf("siteString = %q, want %q", got, tc.site)
			}
		})
	}
	chain := userFrames([]trace.Frame{cpp, lib, user, lib2, user2, cpp}, 4)
	if len(chain) != 2 || chain[0] != user || chain[1] != user2 {
		t.Errorf("userFrames = %+v, want the two user frames", chain)
	}
}

// pytorchSnapshotMeta is an entry of testdata/pytorch_snapshots.json,
// written by memory/testdata/record_snapshots.py on a GPU machine.
type pytorchSnapshotMeta struct {
	AllowedBytes int64  `json:"allowed_bytes"`
	Expect       string `json:"expect"`
	Torch        string `json:"torch"`
	NumOOMs      int    `json:"num_ooms"`
}

// stacksAllSnapshots lists the PyTorch snapshots with stacks="all" in
// testdata: the synthetic ones of make_oom_pickles.py and those recorded
// on a GPU with record_snapshots.py, when present, with what each expects.
func stacksAllSnapshots(t *testing.T) map[string]pytorchSnapshotMeta {
	t.Helper()
	files := map[string]pytorchSnapshotMeta{
		"oom_fraction_fragmented.pickle": {},
		"oom_device_fragmented.pickle":   {AllowedBytes: 1000 * mib, Expect: "fits"},
		"oom_device_missing.pickle":      {AllowedBytes: 900 * mib, Expect: "missing"},
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "pytorch_snapshots.json"))
	if os.IsNotExist(err) {
		return files
	}
	if err != nil {
		t.Fatal(err)
	}
	var recorded map[string]pytorchSnapshotMeta
	if err := json.Unmarshal(raw, &recorded); err != nil {
		t.Fatalf("testdata/pytorch_snapshots.json: %v", err)
	}
	for name, m := range recorded {
		files[name] = m
	}
	return files
}

// TestAttributionStacksAll checks, on every snapshot with stacks="all",
// that live memory and OOMs are attributed to the user's code, never to
// the allocator's C++ frames, torch or installed packages, and that the
// HTML page keeps every frame of the stacks one click away.
func TestAttributionStacksAll(t *testing.T) {
	for name := range stacksAllSnapshots(t) {
		t.Run(name, func(t *testing.T) {
			r, err := File(filepath.Join("testdata", name), Options{ReplayEvents: -1})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range r.Devices {
				for _, g := range d.ByStack {
					if g.Key == noStack {
						continue
					}
					if len(g.Frames) == 0 {
						t.Errorf("group %q keeps no stack", g.Key)
						continue
					}
					if bad := nonUserKey(g.Key); bad != "" && hasUserFrame(g.Frames) {
						t.Errorf("live memory attributed to %q (%s), though its stack has the user's code", g.Key, bad)
					}
				}
				if d.snap != nil {
					for _, seg := range d.snap.Segments {
						for _, b := range seg.Blocks {
							checkSite(t, b.Frames)
						}
					}
					for _, e := range d.snap.History {
						checkSite(t, e.Frames)
					}
				}
				for _, a := range d.Largest {
					if a.Site != siteString(a.Frames) {
						t.Errorf("allocation at 0x%x attributed to %q, its stack to %q", a.Address, a.Site, siteString(a.Frames))
					}
				}
				for _, o := range d.OOMs {
					where := o.Site
					if where == "" {
						where = o.PrevSite
					}
					if where == "" || nonUserKey(where) != "" {
						t.Errorf("OOM at event %d attributed to %q (site %q, before it %q)", o.Event, where, o.Site, o.PrevSite)
					}
				}
			}
			var page bytes.Buffer
			if err := WriteHTML(&page, r); err != nil {
				t.Fatal(err)
			}
			html := page.String()
			if !strings.Contains(html, `<details class="stack">`) || !strings.Contains(html, "torch::unwind::unwind()") {
				t.Error("the page does not keep the full stacks (with their C++ frames) in <details>")
			}
			var text bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(text.String(), "at torch::unwind") || strings.Contains(text.String(), "at gather_with_cpp") {
				t.Errorf("the text report names the allocator's frames as the site:\n%s", text.String())
			}
		})
	}
}

// hasUserFrame reports whether a stack holds a frame of the user's code.
func hasUserFrame(frames []trace.Frame) bool {
	for _, f := range frames {
		if classifyFrame(f) == frameUser {
			return true
		}
	}
	return false
}

// checkSite checks the site of one stack: the user's code when the stack
// has it, else Python when it has some, else C++ other than the
// allocator's machinery when it has some.
func checkSite(t *testing.T, frames []trace.Frame) {
	t.Helper()
	if len(frames) == 0 {
		return
	}
	site := siteString(frames)
	var python, op bool
	for _, f := range frames {
		switch classifyFrame(f) {
		case frameLibrary:
			python = true
		case frameNative:
			op = op || !allocatorMachinery(f.Function)
		}
	}
	switch {
	case hasUserFrame(frames):
		if bad := nonUserKey(site); bad != "" {
			t.Errorf("a stack with the user's code is attributed to %q (%s)", site, bad)
		}
	case python:
		if !strings.Contains(site, ".py:") {
			t.Errorf("a stack with Python frames is attributed to %q", site)
		}
	case op:
		if allocatorMachinery(site) {
			t.Errorf("a C++ stack with an operator is attributed to the allocator's %q", site)
		}
	}
}

// nonUserKey says why a key does not name the user's code, "" when it
// does.
func nonUserKey(key string) string {
	for _, bad := range []string{"::", "unwind", "gather_with_cpp", "site-packages", "dist-packages", "torch/", "modules/", "??", "_PyEval"} {
		if strings.Contains(key, bad) {
			return "contains " + bad
		}
	}
	if !strings.Contains(key, ".py:") && !strings.Contains(key, ".go:") {
		return "no file:line"
	}
	return ""
}

// fragmentedTrace is a text trace (PyTorch's histories in vram's text
// format) of the fragmentation of make_oom_pickles.py scaled by k: two
// segments of 400k MiB each left holding one live block (100k and 350k
// MiB), then an OOM of 500k MiB, with deviceFree bytes free.
func fragmentedTrace(k int64, deviceFree int64) string {
	a1, a2 := uint64(1<<40), uint64(1<<40+1<<36)
	var b strings.Builder
	ev := func(action string, addr uint64, size int64) { fmt.Fprintf(&b, "%s %d %d 0\n", action, addr, size) }
	ev("segment_alloc", a1, 400*k*mib)
	ev("alloc", a1, 400*k*mib)
	ev("segment_alloc", a2, 400*k*mib)
	ev("alloc", a2, 400*k*mib)
	for _, a := range []uint64{a1, a2} {
		ev("free_requested", a, 400*k*mib)
		ev("free_completed", a, 400*k*mib)
	}
	ev("alloc", a1, 100*k*mib)
	ev("alloc", a2, 350*k*mib)
	ev("oom", uint64(deviceFree), 500*k*mib)
	return b.String()
}

// missingTrace holds 700k MiB live and asks for 500k MiB more.
func missingTrace(k int64, deviceFree int64) string {
	a1, a2 := uint64(1<<40), uint64(1<<40+1<<36)
	return fmt.Sprintf("segment_alloc %d %d 0\nalloc %d %d 0\nsegment_alloc %d %d 0\nalloc %d %d 0\noom %d %d 0\n",
		a1, 400*k*mib, a1, 400*k*mib, a2, 300*k*mib, a2, 300*k*mib, deviceFree, 500*k*mib)
}

// segmentRoundingTrace holds live bytes in one segment and asks for req
// more, with deviceFree free: PyTorch's allocator asks the device for a
// 20 MiB segment for a request under 10 MiB, so the tensors fitting in a
// limit does not make the run fit.
func segmentRoundingTrace(live, deviceFree, req int64) string {
	a := uint64(1 << 40)
	return fmt.Sprintf("segment_alloc %d %d 0\nalloc %d %d 0\noom %d %d 0\n", a, live, a, live, deviceFree, req)
}

// pinnedSmallTrace fills n small segments of 2 MiB with two 1 MiB blocks
// each, frees one of each pair, and asks for 600 MiB: the free halves are
// in pages that live blocks pin, so no setting can use them.
func pinnedSmallTrace(n int, deviceFree int64) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		seg := uint64(1<<40) + uint64(i)*4*mib
		fmt.Fprintf(&b, "segment_alloc %d %d 0\nalloc %d %d 0\nalloc %d %d 0\n", seg, 2*mib, seg, mib, seg+mib, mib)
	}
	for i := 0; i < n; i++ {
		a := uint64(1<<40) + uint64(i)*4*mib + mib
		fmt.Fprintf(&b, "free_requested %d %d 0\nfree_completed %d %d 0\n", a, mib, a, mib)
	}
	fmt.Fprintf(&b, "oom %d %d 0\n", deviceFree, 600*mib)
	return b.String()
}

// TestFixCheck checks the fix of OOMs over histories where fragmentation
// causes the failure (expandable segments fit), where memory is really
// missing (nothing fits; it says by how much) and where the limit must be
// inferred, on synthetic PyTorch snapshots, text traces and the snapshots
// recorded on a GPU. Whatever the text, a setting it says fits must fit
// when replayed on its own under the limit, and the recorded settings must
// not.
func TestFixCheck(t *testing.T) {
	type want struct {
		fix       []string // substrings of Fix
		avoid     []string
		config    string // FixConfig, "" for none, "?" for any but none, "any" for anything
		missing   int64  // MissingBytes, -1 for any positive amount, -2 for anything
		limit     int64  // LimitBytes
		limitMax  int64  // LimitMaxBytes, 0 for LimitBytes
		limitFrom string // a substring of LimitHow
	}
	type tc struct {
		name string
		file string // in testdata, or
		text string // a text trace
		opts Options
		want want
	}
	tests := []tc{
		{name: "fragmented, device-limited: expandable fits", file: "oom_device_fragmented.pickle", want: want{
			fix:    []string{"with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run peaks at 960.00 MiB, under the 1000.00 MiB allowed", "policy:vram fits (peak 950.00 MiB)"},
			config: "expandable_segments:True", limit: 1000 * mib, limitFrom: "held 800.00 MiB and the device had 200.00 MiB free"}},
		{name: "fragmented under a fraction, limit given", file: "oom_fraction_fragmented.pickle", opts: Options{Limit: 1000 * mib}, want: want{
			fix:    []string{"with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run peaks at 960.00 MiB, under the 1000.00 MiB allowed"},
			config: "expandable_segments:True", limit: 1000 * mib, limitFrom: "as given"}},
		{name: "fragmented under a fraction, limit inferred", file: "oom_fraction_fragmented.pickle", want: want{
			fix: []string{"at least 800.00 MiB and at most", "with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run fits under a limit of 960.00 MiB",
				"reserved 800.00 MiB before without failing, and failed to reserve 500.00 MiB more while it held 800.00 MiB"},
			limit: 800 * mib, limitMax: 1300*mib - 1, limitFrom: "inferred from the history"}},
		{name: "fragmented under a tighter limit: max_split_size_mb fits", file: "oom_fraction_fragmented.pickle", opts: Options{Limit: 955 * mib}, want: want{
			fix:    []string{"with PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 this run peaks at 950.00 MiB, under the 955.00 MiB allowed", "policy:vram fits (peak 950.00 MiB)"},
			avoid:  []string{"expandable_segments:True fits"},
			config: "max_split_size_mb:128", limit: 955 * mib}},
		{name: "small blocks pinning every page: no layout fits", text: pinnedSmallTrace(500, 100<<30), opts: Options{Limit: 1200 * mib}, want: want{
			fix:     []string{"no setting tried fits", "take 1.07 GiB, within the 1.17 GiB allowed", "with the recorded settings the run needs a limit of 1.56 GiB, 400.00 MiB more"},
			missing: 400 * mib, limit: 1200 * mib}},
		{name: "fragmented under a limit below the live tensors", file: "oom_fraction_fragmented.pickle", opts: Options{Limit: 900 * mib}, want: want{
			fix:     []string{"no setting can fit it: the tensors live at this point and this request take 950.00 MiB, more than the 900.00 MiB allowed", "is 950.00 MiB, with PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128: 50.00 MiB more memory is missing"},
			missing: 50 * mib, limit: 900 * mib}},
		{name: "memory missing, device-limited", file: "oom_device_missing.pickle", want: want{
			fix:     []string{"no setting can fit it: the tensors live at this point and this request take 1.17 GiB, more than the 900.00 MiB allowed", "300.00 MiB more memory is missing"},
			missing: 300 * mib, limit: 900 * mib, limitFrom: "inferred from the event"}},
		{name: "memory missing under a given limit", file: "oom_device_missing.pickle", opts: Options{Limit: 1 << 30}, want: want{
			fix: []string{"1.17 GiB, more than the 1.00 GiB allowed", "176.00 MiB more memory is missing"}, missing: 176 * mib, limit: 1 << 30}},
		{name: "a new segment larger than the request: missing is what the least fitting limit lacks", text: segmentRoundingTrace(90*mib, 5*mib, 6*mib), want: want{
			fix:     []string{"take 96.00 MiB, more than the 95.00 MiB allowed", "least limit under which the run gets past this point is 100.00 MiB, with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: 5.00 MiB more memory is missing"},
			missing: 5 * mib, limit: 95 * mib, limitFrom: "inferred from the event"}},
		{name: "a new segment larger than the request, limit given", text: segmentRoundingTrace(90*mib, 100<<30, 6*mib), opts: Options{Limit: 92 * mib}, want: want{
			fix: []string{"more than the 92.00 MiB allowed", "8.00 MiB more memory is missing"}, missing: 8 * mib, limit: 92 * mib}},
		{name: "text trace, fraction, scaled up, limit given", text: fragmentedTrace(4, 100<<30), opts: Options{Limit: 4000 * mib}, want: want{
			fix: []string{"expandable_segments:True this run peaks at"}, config: "expandable_segments:True", limit: 4000 * mib}},
		{name: "text trace, memory missing under an inferred range", text: missingTrace(2, 100<<30), want: want{
			fix:     []string{"no setting can fit it", "more than the limit can have been, which was less than 2.34 GiB"},
			missing: -1, limit: 1400 * mib, limitMax: 2400*mib - 1, limitFrom: "inferred from the history"}},
		{name: "checks turned off", file: "oom_device_fragmented.pickle", opts: Options{ReplayEvents: -1}, want: want{}},
		{name: "budget too small for any replay", file: "oom_device_fragmented.pickle", opts: Options{ReplayEvents: 100}, want: want{
			fix: []string{"replay budget"}, limit: 1000 * mib}},
	}
	for name, m := range stacksAllSnapshots(t) {
		if !strings.HasPrefix(name, "pytorch_") || m.NumOOMs == 0 {
			continue
		}
		// A recorded run: the fix check must reproduce it (the replay of
		// policy:pytorch is faithful) and find what the recording expects.
		w := want{limit: m.AllowedBytes, fix: []string{"checked by replaying"}, config: "any", missing: -2}
		switch m.Expect {
		case "fits":
			w.config = "?"
		case "missing":
			w.missing = -1
			w.fix = []string{"no setting can fit it"}
		}
		tests = append(tests, tc{name: "recorded " + name, file: name, opts: Options{Limit: m.AllowedBytes}, want: w})
		tests = append(tests, tc{name: "recorded " + name + ", limit inferred", file: name, want: want{limitFrom: "inferred", config: "any", missing: -2, fix: []string{""}}})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			if tc.text != "" {
				path = writeText(t, tc.text)
			}
			start := time.Now()
			r, err := File(path, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el > 20*time.Second*raceSlowdown {
				t.Errorf("the analysis took %v", el)
			}
			d := r.Devices[0]
			if len(d.OOMs) == 0 {
				t.Fatal("no OOM")
			}
			o := d.OOMs[0]
			t.Logf("limit %d..%d (%s)\nfix: %s", o.LimitBytes, o.LimitMaxBytes, o.LimitHow, o.Fix)
			if tc.want.fix == nil && o.Fix != "" {
				t.Errorf("a fix with the checks off: %s", o.Fix)
			}
			for _, w := range tc.want.fix {
				if !strings.Contains(o.Fix, w) {
					t.Errorf("the fix lacks %q", w)
				}
			}
			for _, w := range tc.want.avoid {
				if strings.Contains(o.Fix, w) {
					t.Errorf("the fix says %q", w)
				}
			}
			switch {
			case tc.want.config == "any":
			case tc.want.config == "?" && o.FixConfig == "":
				t.Error("no setting fits")
			case tc.want.config != "?" && o.FixConfig != tc.want.config:
				t.Errorf("FixConfig %q, want %q", o.FixConfig, tc.want.config)
			}
			switch {
			case tc.want.missing == -2: // any
			case tc.want.missing == -1 && o.MissingBytes <= 0:
				t.Errorf("MissingBytes %d, want some", o.MissingBytes)
			case tc.want.missing >= 0 && o.MissingBytes != tc.want.missing:
				t.Errorf("MissingBytes %d, want %d", o.MissingBytes, tc.want.missing)
			}
			if tc.want.limit != 0 && o.LimitBytes != tc.want.limit {
				t.Errorf("LimitBytes %d, want %d", o.LimitBytes, tc.want.limit)
			}
			if tc.want.limitMax != 0 && o.LimitMaxBytes != tc.want.limitMax {
				t.Errorf("LimitMaxBytes %d, want %d", o.LimitMaxBytes, tc.want.limitMax)
			}
			if !strings.Contains(o.LimitHow, tc.want.limitFrom) {
				t.Errorf("LimitHow %q lacks %q", o.LimitHow, tc.want.limitFrom)
			}
			if m, ok := stacksAllSnapshots(t)[tc.file]; ok && tc.opts.Limit == 0 && m.AllowedBytes > 0 && o.LimitMaxBytes > 0 &&
				(o.LimitBytes > m.AllowedBytes || o.LimitMaxBytes < m.AllowedBytes) {
				t.Errorf("the limit was %d, outside the inferred %d..%d", m.AllowedBytes, o.LimitBytes, o.LimitMaxBytes)
			}
			checkClaims(t, path, o)
			checkMissing(t, path, o)
			var page bytes.Buffer
			if err := WriteHTML(&page, r); err != nil {
				t.Fatal(err)
			}
			if o.Fix != "" && !strings.Contains(page.String(), "Fix: "+htmlEscape(o.Fix)) {
				t.Error("the page's OOM marker does not carry the fix")
			}
		})
	}
}

// htmlEscape escapes s as html/template writes an attribute.
func htmlEscape(s string) string {
	var b bytes.Buffer
	for _, c := range s {
		switch c {
		case '"':
			b.WriteString("&#34;")
		case '\'':
			b.WriteString("&#39;")
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '+':
			b.WriteString("&#43;")
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// checkClaims replays the history of the file at path up to the OOM o,
// then its request, under o's limit on its own: each setting o says fits
// must fit and stay within the limit; the recorded PyTorch settings must
// not fit.
func checkClaims(t *testing.T, path string, o OOM) {
	t.Helper()
	if o.LimitBytes == 0 || len(o.Trials) == 0 {
		return
	}
	f, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var hist []trace.Event
	if f.Kind == trace.KindText {
		hist = f.Events
	} else {
		s := f.Snapshots[0]
		if s.Truncated {
			return // the replay starts from the blocks before: checked by the report itself
		}
		hist = s.History
	}
	events := append(append([]trace.Event(nil), hist[:o.Event]...), trace.Event{Action: trace.ActionAlloc, Addr: requestAddr, Size: o.RequestedBytes, Stream: o.stream})
	replay := func(conf string) memory.Result {
		if !strings.Contains(conf, "policy:") {
			conf = strings.TrimSuffix("policy:pytorch,"+conf, ",")
		}
		cfg, err := memory.ParseConfig(conf)
		if err != nil {
			t.Fatal(err)
		}
		segs, err := recordedSegments(trace.Events(hist))
		if err != nil {
			t.Fatal(err)
		}
		res, err := memory.Replay(events, replayArena(cfg, o.LimitBytes, segs), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := replay(""); res.NumOOMs == 0 {
		t.Errorf("the recorded settings fit under %d bytes (peak %d), yet the fix check says they fail", o.LimitBytes, res.PeakReserved)
	}
	for _, tr := range o.Trials {
		if !tr.Fits {
			continue
		}
		res := replay(tr.Config)
		if res.NumOOMs != 0 || res.PeakReserved > o.LimitBytes || res.PeakReserved != tr.PeakReservedBytes {
			t.Errorf("%s: claimed to fit with peak %d under %d; replayed alone: %d OOMs, peak %d", tr.Config, tr.PeakReservedBytes, o.LimitBytes, res.NumOOMs, res.PeakReserved)
		}
	}
}

// checkMissing replays the history of the file at path up to the OOM o,
// then its request, under the limit plus what o says is missing: some
// setting of the run's allocator must fit there, and none a resolution
// step below.
func checkMissing(t *testing.T, path string, o OOM) {
	t.Helper()
	if o.MissingBytes <= 0 || o.LimitBytes != o.LimitMaxBytes {
		return
	}
	f, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Kind != trace.KindText && f.Snapshots[0].Truncated {
		return
	}
	hist := f.Events
	if f.Kind != trace.KindText {
		hist = f.Snapshots[0].History
	}
	events := append(append([]trace.Event(nil), hist[:o.Event]...), trace.Event{Action: trace.ActionAlloc, Addr: requestAddr, Size: o.RequestedBytes, Stream: o.stream})
	segs, err := recordedSegments(trace.Events(hist))
	if err != nil {
		t.Fatal(err)
	}
	fits := func(limit int64) []string {
		var out []string
		for _, conf := range []string{"", "expandable_segments:True", "max_split_size_mb:128", "max_split_size_mb:256", "max_split_size_mb:512",
			"garbage_collection_threshold:0.8", "roundup_power2_divisions:4"} {
			cfg, err := memory.ParseConfig(strings.TrimSuffix("policy:pytorch,"+conf, ","))
			if err != nil {
				t.Fatal(err)
			}
			res, err := memory.Replay(events, replayArena(cfg, limit, segs), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.NumOOMs == 0 {
				out = append(out, conf)
			}
		}
		return out
	}
	least := o.LimitMaxBytes + o.MissingBytes
	if len(fits(least)) == 0 {
		t.Errorf("nothing fits under the limit plus the %d bytes said missing", o.MissingBytes)
	}
	if f := fits(least - memory.FitResolution); len(f) > 0 {
		t.Errorf("%q fit under %d bytes, less than the limit plus the %d bytes said missing", f, least-memory.FitResolution, o.MissingBytes)
	}
}

// TestLimitInference checks where the limit of a fix check comes from,
// for each kind of OOM event: a given limit, a vram snapshot's fraction
// and capacity, a device without room for the segment, and a limit of
// the allocator within what the history shows.
func TestLimitInference(t *testing.T) {
	pt, _ := memory.ParseConfig("policy:pytorch")
	exp, _ := memory.ParseConfig("policy:pytorch,expandable_segments:True")
	vramSnap := &trace.Snapshot{Capacity: 8 << 30, Meta: map[string]string{trace.MetaSource: "vram"}}
	tests := []struct {
		name    string
		o       OOM
		opts    Options
		s       *trace.Snapshot
		base    memory.Config
		frac    float64
		lo, hi  int64
		howPart string
	}{
		{"given", OOM{RequestedBytes: 500 * mib, ReservedBytes: 800 * mib, DeviceFreeBytes: 1 << 40}, Options{Limit: 1 << 30}, nil, pt, 0,
			1 << 30, 1 << 30, "as given"},
		{"given, below what the run reserved", OOM{RequestedBytes: 500 * mib, ReservedBytes: 800 * mib, peakReservedBefore: 2 << 30}, Options{Limit: 1 << 30}, nil, pt, 0,
			1 << 30, 1 << 30, "although the run reserved 2.00 GiB before this point, more than that"},
		{"a vram snapshot's fraction", OOM{RequestedBytes: 500 * mib, ReservedBytes: 800 * mib}, Options{}, vramSnap, pt, 0.25,
			2 << 30, 2 << 30, "per_process_memory_fraction 0.25 of the 8.00 GiB device"},
		{"a vram snapshot's capacity", OOM{RequestedBytes: 500 * mib, ReservedBytes: 800 * mib}, Options{}, vramSnap, pt, 0,
			8 << 30, 8 << 30, "the device's capacity"},
		{"a vram snapshot's capacity, less other processes", OOM{RequestedBytes: 500 * mib, ReservedBytes: 800 * mib, DeviceFreeBytes: 3 << 30}, Options{}, vramSnap, pt, 0,
			3<<30 + 800*mib, 3<<30 + 800*mib, "less what other processes held: this process held 800.00 MiB and the device had 3.00 GiB free"},
		{"a vram snapshot's fraction, below what the device had", OOM{RequestedBytes: 500 * mib, ReservedBytes: 800 * mib, DeviceFreeBytes: 7 << 30}, Options{}, vramSnap, pt, 0.25,
			2 << 30, 2 << 30, "per_process_memory_fraction 0.25"},
		{"the device lacked the segment", OOM{RequestedBytes: 500 * mib, ReservedBytes: 800 * mib, DeviceFreeBytes: 300 * mib, peakReservedBefore: 900 * mib}, Options{}, nil, pt, 0,
			1100 * mib, 1100 * mib, "held 800.00 MiB and the device had 300.00 MiB free, less than the 500.00 MiB"},
		{"free just below the segment", OOM{RequestedBytes: 2 << 30, ReservedBytes: 800 * mib, DeviceFreeBytes: 2<<30 - 2*mib, peakReservedBefore: 900 * mib}, Options{}, nil, pt, 0,
			2846 * mib, 2846 * mib, "the device had 1.99 GiB free, less than the 2.00 GiB"},
		{"a small request needs a 2 MiB segment", OOM{RequestedBytes: 512, ReservedBytes: 800 * mib, DeviceFreeBytes: 1 * mib}, Options{}, nil, pt, 0,
			801 * mib, 801 * mib, "less than the 2.00 MiB"},
		{"a mid-size request needs a 20 MiB segment", OOM{RequestedBytes: 3 * mib, ReservedBytes: 800 * mib, DeviceFreeBytes: 10 * mib, peakReservedBefore: 820 * mib}, Options{}, nil, pt, 0,
			820 * mib, 820 * mib, "less than the 20.00 MiB"},
		{"the device had room: a limit within the history's bounds", OOM{RequestedBytes: 500 * mib, ReservedBytes: 700 * mib, DeviceFreeBytes: 60 << 30, peakReservedBefore: 950 * mib}, Options{}, nil, pt, 0,
			950 * mib, 1200*mib - 1, "reserved 950.00 MiB before without failing, and failed to reserve 500.00 MiB more while it held 700.00 MiB"},
		{"expandable segments ask for the rounded request", OOM{RequestedBytes: 3 * mib, ReservedBytes: 700 * mib, DeviceFreeBytes: 60 << 30, peakReservedBefore: 650 * mib}, Options{}, nil, exp, 0,
			700 * mib, 720*mib - 1, "failed to reserve 20.00 MiB more"},
		{"expandable segments map small requests in 2 MiB pages", OOM{RequestedBytes: 4096, ReservedBytes: 700 * mib, DeviceFreeBytes: 60 << 30, peakReservedBefore: 650 * mib}, Options{}, nil, exp, 0,
			700 * mib, 702*mib - 1, "failed to reserve 2.00 MiB more"},
		{"nothing reserved and nothing free", OOM{RequestedBytes: 4096}, Options{}, nil, pt, 0,
			0, 0, "this process held 0 B and the device had 0 B free"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi, how := limitFor(&tc.o, tc.opts, tc.s, tc.base, tc.frac)
			if lo != tc.lo || hi != tc.hi || !strings.Contains(how, tc.howPart) {
				t.Errorf("limit %d..%d (%s), want %d..%d (%s)", lo, hi, how, tc.lo, tc.hi, tc.howPart)
			}
		})
	}
}

// TestFixCheckVRAMSnapshot checks the fix of a vram snapshot whose
// allocator ran under per_process_memory_fraction: the limit is the
// fraction of the recorded capacity, and settings are named in
// VRAM_ALLOC_CONF's terms.
func TestFixCheckVRAMSnapshot(t *testing.T) {
	cfg, err := memory.ParseConfig("policy:pytorch,per_process_memory_fraction:0.5")
	if err != nil {
		t.Fatal(err)
	}
	a := memory.New(memory.NewSimArena(2000*mib), cfg)
	a.SetHistory(true, 0, false)
	must := func(n int64) *memory.Block {
		b, err := a.Alloc(n*mib, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	x1, x2 := must(400), must(400)
	a.Free(x1)
	a.Free(x2)
	must(100)
	must(350)
	if _, err := a.Alloc(500*mib, 0, ""); err == nil {
		t.Fatal("the request fits: no OOM")
	}
	s := a.Snapshot()
	r, err := Analyze(&trace.File{Name: "vram.json", Kind: trace.KindJSON, Snapshots: []*trace.Snapshot{s}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := r.Devices[0].OOMs[0]
	if o.LimitBytes != 1000*mib || !strings.Contains(o.LimitHow, "per_process_memory_fraction 0.5") ||
		o.FixConfig != "policy:pytorch,expandable_segments:True" || !strings.Contains(o.Fix, "with VRAM_ALLOC_CONF=policy:pytorch,expandable_segments:True this run peaks at") {
		t.Errorf("limit %d (%s), fix %q: %s", o.LimitBytes, o.LimitHow, o.FixConfig, o.Fix)
	}
}

// TestFixCheckBounded checks that the fix checks of a long history and of
// one that claims a huge device stay within their budget: bounded time,
// and the report says which settings were not replayed.
func TestFixCheckBounded(t *testing.T) {
	// A long history: 60,000 events of a loop, then the fragmentation.
	var b strings.Builder
	for i := 0; i < 20_000; i++ {
		fmt.Fprintf(&b, "alloc %d 4096 0\nfree_requested %d 4096 0\nfree_completed %d 4096 0\n", 1<<30+i%512*4096, 1<<30+i%512*4096, 1<<30+i%512*4096)
	}
	long := writeText(t, "segment_alloc 1073741824 2097152 0\n"+b.String()+fragmentedTrace(1, 200*mib))
	longRange := writeText(t, "segment_alloc 1073741824 2097152 0\n"+b.String()+fragmentedTrace(1, 70<<30))
	// A device of hundreds of GiB: a cached 255 GiB block split by a live
	// 1 GiB one, then 300 GiB asked with 100 GiB free.
	const gib = 1 << 30
	huge := writeText(t, fmt.Sprintf("segment_alloc 4096 %d 0\nalloc 4096 %d 0\nfree_requested 4096 %d 0\nfree_completed 4096 %d 0\nalloc 4096 %d 0\noom %d %d 0\n",
		256*gib, 256*gib, 256*gib, 256*gib, gib, 100*gib, 300*gib))
	tests := []struct {
		name   string
		path   string
		budget int64
		want   string
		avoid  string
	}{
		{"long history, inferred limit, budget for about 25 replays: every setting, no search", longRange, 1_600_000,
			"expandable_segments:True this run fits under a limit of", "not replayed"},
		{"long history, budget for a few replays", long, 400_000, "not replayed: the replay budget", ""},
		{"long history, budget for none", long, 40_000, "the replay budget (Options.ReplayEvents, --replay-events) is spent", ""},
		{"a huge device, default budget", huge, 0, "with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run peaks at", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r, err := File(tc.path, Options{ReplayEvents: tc.budget})
			if err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el > 30*time.Second*raceSlowdown {
				t.Errorf("took %v", el)
			}
			o := r.Devices[0].OOMs[0]
			if !strings.Contains(o.Fix, tc.want) || tc.avoid != "" && strings.Contains(o.Fix, tc.avoid) {
				t.Errorf("fix %q: want %q, not %q", o.Fix, tc.want, tc.avoid)
			}
		})
	}
}

// TestLimitNarrowedByReleases checks that an inferred limit is narrowed by
// the segments PyTorch gave back before the OOM: under a 1000 MiB limit,
// a 700 MiB request made it release a cached 600 MiB segment, which a
// replay does only under limits below 1300 MiB.
func TestLimitNarrowedByReleases(t *testing.T) {
	a1, a2 := uint64(1<<40), uint64(1<<40+1<<36)
	text := fmt.Sprintf(`segment_alloc %[1]d %[3]d 0
alloc %[1]d %[3]d 0
free_requested %[1]d %[3]d 0
free_completed %[1]d %[3]d 0
segment_free %[1]d %[3]d 0
segment_alloc %[2]d %[4]d 0
alloc %[2]d %[4]d 0
free_requested %[2]d %[4]d 0
free_completed %[2]d %[4]d 0
alloc %[2]d %[5]d 0
oom %[6]d %[7]d 0
`, a1, a2, 600*mib, 700*mib, 100*mib, int64(50<<30), 900*mib)
	r, err := File(writeText(t, text), Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := r.Devices[0].OOMs[0]
	if o.LimitBytes != 700*mib || o.LimitMaxBytes < 1298*mib || o.LimitMaxBytes >= 1302*mib ||
		!strings.Contains(o.LimitHow, "gave segments back to the device before this point") {
		t.Errorf("limit %d..%d MiB (%s)", o.LimitBytes/mib, o.LimitMaxBytes/mib, o.LimitHow)
	}
	// The run's limit, 1000 MiB, is within; under it the request takes
	// 1 GiB with what is live: no setting can fit it there.
	if o.LimitBytes > 1000*mib || o.LimitMaxBytes < 1000*mib {
		t.Errorf("the run's 1000 MiB limit is outside %d..%d", o.LimitBytes, o.LimitMaxBytes)
	}
	t.Log(o.Fix)
}

// TestFixCheckConcurrent analyzes files with fix checks from several
// goroutines at once (run it with -race): the checks share no state, and
// each gives the same fix as alone.
func TestFixCheckConcurrent(t *testing.T) {
	files := []string{"oom_fraction_fragmented.pickle", "oom_device_fragmented.pickle", "oom_device_missing.pickle"}
	alone := map[string]string{}
	for _, f := range files {
		r, err := File(filepath.Join("testdata", f), Options{})
		if err != nil {
			t.Fatal(err)
		}
		alone[f] = r.Devices[0].OOMs[0].Fix
	}
	errs := make(chan error, 4*len(files))
	for i := 0; i < 4; i++ {
		for _, f := range files {
			go func() {
				r, err := File(filepath.Join("testdata", f), Options{})
				if err == nil && r.Devices[0].OOMs[0].Fix != alone[f] {
					err = fmt.Errorf("%s: fix %q, alone %q", f, r.Devices[0].OOMs[0].Fix, alone[f])
				}
				errs <- err
			}()
		}
	}
	for i := 0; i < cap(errs); i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestFrameStringMissingParts labels frames that lack a name, a file or a
// line: never an empty label or one that starts with a blank.
func TestFrameStringMissingParts(t *testing.T) {
	tests := []struct {
		name  string
		frame trace.Frame
		want  string
	}{
		{"all", trace.Frame{Function: "step", File: "proj/train.py", Line: 7}, "step (proj/train.py:7)"},
		{"no line", trace.Frame{Function: "step", File: "train.py"}, "step (train.py)"},
		{"no file", trace.Frame{Function: "step", Line: 7}, "step"},
		{"no name", trace.Frame{File: "train.py", Line: 7}, "?? (train.py:7)"},
		{"no name, no line", trace.Frame{File: "train.py"}, "?? (train.py)"},
		{"nothing", trace.Frame{}, "??"},
		{"unknown file, no name", trace.Frame{File: "??"}, "??"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := frameString(tc.frame); got != tc.want {
				t.Errorf("frameString(%+v) = %q, want %q", tc.frame, got, tc.want)
			}
			if got := siteString([]trace.Frame{tc.frame}); got != tc.want {
				t.Errorf("siteString = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestClassifyFramePathShapes checks the attribution over the places
// Python and its packages are installed, on Linux, macOS and Windows, and
// over the binaries a symbolizer names for C frames without debug
// information: the user's code only where the program lives.
func TestClassifyFramePathShapes(t *testing.T) {
	tests := []struct {
		file  string
		want  frameKind
		label string // frameString of a frame "f" at line 3
	}{
		{"/home/u/.venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", frameLibrary, "f (modules/linear.py:3)"},
		{"/opt/conda/envs/x/lib/python3.10/site-packages/transformers/x.py", frameLibrary, "f (transformers/x.py:3)"},
		{"/opt/conda/lib/python3.10/runpy.py", frameLibrary, "f (python3.10/runpy.py:3)"},
		{"/home/u/.local/lib/python3.11/site-packages/accelerate/a.py", frameLibrary, "f (accelerate/a.py:3)"},
		{"/usr/lib64/python3.11/runpy.py", frameLibrary, "f (python3.11/runpy.py:3)"},
		{"/usr/lib64/python3.11/threading.py", frameLibrary, "f (python3.11/threading.py:3)"},
		{"/home/u/.pyenv/versions/3.11.4/lib/python3.11/runpy.py", frameLibrary, "f (python3.11/runpy.py:3)"},
		{"/Library/Frameworks/Python.framework/Versions/3.11/lib/python3.11/runpy.py", frameLibrary, "f (python3.11/runpy.py:3)"},
		{"/usr/lib/python311.zip/runpy.py", frameLibrary, "f (python311.zip/runpy.py:3)"},
		{`C:\Users\u\venv\Lib\site-packages\torch\nn\modules\module.py`, frameLibrary, `f (modules\module.py:3)`},
		{`C:\Python311\Lib\runpy.py`, frameLibrary, `f (Lib\runpy.py:3)`},
		{`C:\ProgramData\Anaconda3\lib\runpy.py`, frameLibrary, `f (lib\runpy.py:3)`},
		{`C:\Python311\python311.zip\runpy.py`, frameLibrary, `f (python311.zip\runpy.py:3)`},
		{`C:\Users\u\proj\train.py`, frameUser, `f (proj\train.py:3)`},
		{`C:\Users\u\proj\TRAIN.PY`, frameUser, `f (proj\TRAIN.PY:3)`},
		{`C:\Users\u\AppData\Local\Temp\ipykernel_1234\567.py`, frameUser, `f (ipykernel_1234\567.py:3)`},
		{"/tmp/ipykernel_77/12345.py", frameUser, "f (ipykernel_77/12345.py:3)"},
		{"/home/u/proj/Lib/model.py", frameUser, "f (Lib/model.py:3)"},
		{"/home/u/lib/python/model.py", frameUser, "f (python/model.py:3)"},
		{"/home/u/app.pyz/__main__.py", frameUser, "f (app.pyz/__main__.py:3)"},
		{"/home/u/proj/torch/model.py", frameUser, "f (torch/model.py:3)"},
		{"/home/u/my.solver/run", frameUser, "f (my.solver/run:3)"},
		{"<stdin>", frameUser, "f (<stdin>:3)"},
		{"<ipython-input-3-abc>", frameUser, "f (<ipython-input-3-abc>:3)"},
		{"<frozen runpy>", frameLibrary, "f (<frozen runpy>:3)"},
		{"<string>", frameLibrary, "f (<string>:3)"},
		{"/usr/bin/python3.12", frameNative, "f (bin/python3.12:3)"},
		{"/opt/conda/bin/python", frameNative, "f (bin/python:3)"},
		{"/usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0", frameNative, "f (x86_64-linux-gnu/libpython3.12.so.1.0:3)"},
		{"/usr/lib/libSystem.B.dylib", frameNative, "f (lib/libSystem.B.dylib:3)"},
		{`C:\Python311\python311.dll`, frameNative, `f (Python311\python311.dll:3)`},
		{`C:\Python311\DLLs\_ctypes.pyd`, frameNative, `f (DLLs\_ctypes.pyd:3)`},
	}
	for _, tc := range tests {
		fr := trace.Frame{Function: "f", File: tc.file, Line: 3}
		if got := classifyFrame(fr); got != tc.want {
			t.Errorf("classifyFrame(%q) = %d, want %d", tc.file, got, tc.want)
		}
		if got := frameString(fr); got != tc.label {
			t.Errorf("frameString(%q) = %q, want %q", tc.file, got, tc.label)
		}
	}
	// An interpreter's frame in a binary without debug information sits
	// between torch's frames and the user's: the user's still wins.
	stack := []trace.Frame{
		{Function: "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char)", File: ""},
		{Function: "forward", File: "/usr/lib64/python3.11/site-packages/torch/nn/modules/linear.py", Line: 125},
		{Function: "_PyEval_EvalFrameDefault", File: "/usr/bin/python3.11"},
		{Function: "_run_code", File: "/usr/lib64/python3.11/runpy.py", Line: 88},
		{Function: "forward", File: `C:\Users\u\proj\model.py`, Line: 31},
	}
	if got, want := siteString(stack), `forward (proj\model.py:31)`; got != want {
		t.Errorf("siteString = %q, want %q", got, want)
	}
}

// TestConfName checks how the fix check names the settings it tries: a
// PyTorch run's in PYTORCH_CUDA_ALLOC_CONF's terms, with vram's policy by
// its name, also beside the run's other settings that it keeps (a
// garbage collection threshold, roundup_power2_divisions); a vram run's
// in VRAM_ALLOC_CONF's.
func TestConfName(t *testing.T) {
	parse := func(s string) memory.Config {
		c, err := memory.ParseConfig(s)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tests := []struct {
		pytorch bool
		conf    string
		want    string
	}{
		{true, "policy:pytorch", ""},
		{true, "policy:pytorch,expandable_segments:True", "expandable_segments:True"},
		{true, "policy:vram", "policy:vram"},
		{true, "policy:vram,garbage_collection_threshold:0.6", "policy:vram,garbage_collection_threshold:0.6"},
		{false, "policy:vram", "policy:vram"},
		// VRAM_ALLOC_CONF's default policy is vram's.
		{false, "policy:vram,garbage_collection_threshold:0.6", "garbage_collection_threshold:0.6"},
		{false, "policy:pytorch,expandable_segments:True", "policy:pytorch,expandable_segments:True"},
	}
	for _, tc := range tests {
		f := &fixer{pytorch: tc.pytorch}
		if got := f.confName(parse(tc.conf)); got != tc.want {
			t.Errorf("pytorch %v, %s: named %q, want %q", tc.pytorch, tc.conf, got, tc.want)
		}
	}
}
