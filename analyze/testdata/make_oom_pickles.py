#!/usr/bin/env python3
"""Writes PyTorch snapshot pickles of runs that ran out of memory, for the
analyze tests of attribution and of the fix check.

No torch is needed. Each snapshot has the layout torch.cuda.memory._snapshot()
returns in PyTorch 2.11 (torch/csrc/cuda/Module.cpp) after
torch.cuda.memory._record_memory_history() with its defaults: every trace
entry and block carries a stack of C++ and Python frames (stacks="all"),
innermost first, the allocator's own frames (torch::unwind::unwind(),
gather_with_cpp()) at the top, and frame dicts are shared between stacks as
PyTorch shares them. The histories follow what PyTorch's caching allocator
does with these requests (best fit by size then address, blocks of large
segments split, cached blocks released before an OOM), so that a replay under
policy:pytorch reproduces them; the OOM entry has "device_free" instead of
"addr", and its size is the rounded request.

Run from this directory: python3 make_oom_pickles.py
"""
import pickle

MiB = 1 << 20
SITE = "/usr/local/lib/python3.12/site-packages/"
T0 = 1_764_500_000_000_000


def fr(name, filename="??", line=0):
    return {"filename": filename, "line": line, "name": name}


# C++ frames, shared by every stack as PyTorch shares them.
unwind = fr("torch::unwind::unwind()", "/pytorch/torch/csrc/profiler/unwind/unwind.cpp", 341)
gather = fr("torch::CapturedTraceback::gather(bool, bool, bool)", "/pytorch/torch/csrc/profiler/combined_traceback.cpp", 88)
gwc = fr("gather_with_cpp()", "/pytorch/torch/csrc/cuda/memory_snapshot.cpp", 79)
dmalloc = fr("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)",
             "/pytorch/c10/cuda/CUDACachingAllocator.cpp", 1211)
nmalloc = fr("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed char, unsigned long, CUstream_st*)",
             "/pytorch/c10/cuda/CUDACachingAllocator.cpp", 3540)
allocate = fr("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)",
              "/pytorch/c10/cuda/CUDACachingAllocator.cpp", 3849)
empty = fr("at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)",
           "/pytorch/aten/src/ATen/EmptyTensor.cpp", 205)
empty_cuda = fr("at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>, std::optional<c10::MemoryFormat>)",
                "/pytorch/aten/src/ATen/cuda/EmptyTensor.cpp", 23)
create_out = fr("at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions const&)", "??", 0)
addmm = fr("at::_ops::addmm::call(at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&)", "??", 0)
linear_cpp = fr("torch::autograd::THPVariable_linear(_object*, _object*, _object*)", "??", 0)
cfunc = fr("cfunction_call", "/usr/local/src/conda/python-3.12.7/Objects/methodobject.c", 537)
evalf = fr("_PyEval_EvalFrameDefault", "??", 0)
libc = fr("__libc_start_main", "/lib/x86_64-linux-gnu/libc.so.6", 0)
start = fr("_start", "??", 0)

# Python frames: torch's, the user's, the standard library's.
linear_py = fr("forward", SITE + "torch/nn/modules/linear.py", 125)
call_impl = fr("_call_impl", SITE + "torch/nn/modules/module.py", 1784)
wrapped = fr("_wrapped_call_impl", SITE + "torch/nn/modules/module.py", 1773)
model_fwd = fr("forward", "/home/ada/proj/model.py", 31)
model_head = fr("head", "/home/ada/proj/model.py", 44)
train_step = fr("train_step", "/home/ada/proj/train.py", 57)
module = fr("<module>", "/home/ada/proj/train.py", 80)
runpy = fr("_run_code", "/usr/local/lib/python3.12/runpy.py", 88)

allocator = [unwind, gather, gwc, dmalloc]
cpp_op = [nmalloc, allocate, empty, empty_cuda, create_out, addmm, linear_cpp, cfunc, evalf]
outer = [wrapped, train_step, evalf, module, runpy, evalf, libc, start]


def stack(*user):
    """A stacks="all" stack of an allocation made by a Linear layer called
    from the user's frames (innermost first)."""
    s = allocator + cpp_op + [linear_py, call_impl]
    for u in user:
        s += [u, evalf, call_impl]
    return s + outer


# An allocation of autograd's engine thread, which runs backward: no
# Python frame at all.
mm = fr("at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", "??", 0)
mm_bwd = fr("torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", "??", 0)
engine = fr("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", "??", 0)
start_thread = fr("start_thread", "/lib/x86_64-linux-gnu/libc.so.6", 0)
s_bwd = allocator + [nmalloc, allocate, empty, empty_cuda, create_out, mm, mm_bwd, engine, start_thread]

s_fwd = stack(model_fwd)
s_head = stack(model_head, model_fwd)
s_oom = allocator  # PyTorch 2.11 records only the allocator's frames on an OOM


def block(addr, size, req, state, frames):
    return {"address": addr, "size": size, "requested_size": req, "state": state, "frames": frames}


def segment(addr, size, blocks):
    alloc = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    req = sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated")
    return {"device": 0, "address": addr, "total_size": size, "allocated_size": alloc, "active_size": active,
            "requested_size": req, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
            "is_expandable": False, "frames": s_fwd, "blocks": blocks}


class History:
    def __init__(self):
        self.events, self.t = [], 0

    def add(self, action, addr, size, frames):
        self.t += 10
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": T0 + self.t,
             "compile_context": "N/A", "user_metadata": "", "frames": frames}
        if action == "oom":
            e["device_free"] = e.pop("addr")
        self.events.append(e)

    def alloc(self, addr, size, frames):
        self.add("alloc", addr, size, frames)

    def free(self, addr, size, frames):
        self.add("free_requested", addr, size, frames)
        self.add("free_completed", addr, size, frames)


def settings(conf=""):
    return {"PYTORCH_CUDA_ALLOC_CONF": conf, "max_split_size": -1, "garbage_collection_threshold": 0.0,
            "expandable_segments": False, "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False, "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}


A1 = 0x7F3A00000000
A2 = 0x7F3A40000000


def fragmented(device_free):
    """Two 400 MiB segments, each left holding one live block (100 and 350
    MiB): 450 MiB live, 800 MiB reserved, none of it releasable; then a
    500 MiB request. Expandable segments would fit it in 950 MiB."""
    h = History()
    h.add("segment_alloc", A1, 400 * MiB, s_fwd)
    h.alloc(A1, 400 * MiB, s_fwd)
    h.add("segment_alloc", A2, 400 * MiB, s_bwd)
    h.alloc(A2, 400 * MiB, s_bwd)          # a gradient, allocated by autograd's thread
    h.free(A1, 400 * MiB, s_fwd)
    h.free(A2, 400 * MiB, s_bwd)
    h.alloc(A1, 100 * MiB, s_head)         # best fit: the lower of the two 400 MiB blocks
    h.alloc(A2, 350 * MiB, s_fwd)          # the 300 MiB left in the first is too small
    h.add("oom", device_free, 500 * MiB, s_oom)
    segs = [
        segment(A1, 400 * MiB, [block(A1, 100 * MiB, 100 * MiB, "active_allocated", s_head),
                                block(A1 + 100 * MiB, 300 * MiB, 0, "inactive", [])]),
        segment(A2, 400 * MiB, [block(A2, 350 * MiB, 350 * MiB, "active_allocated", s_fwd),
                                block(A2 + 350 * MiB, 50 * MiB, 0, "inactive", [])]),
    ]
    return {"segments": segs, "device_traces": [h.events], "allocator_settings": settings()}


def missing():
    """Live tensors of 700 MiB, then a 500 MiB request on a device with
    200 MiB free: 1.17 GiB needed where the process can have 900 MiB."""
    h = History()
    h.add("segment_alloc", A1, 400 * MiB, s_fwd)
    h.alloc(A1, 400 * MiB, s_fwd)
    h.add("segment_alloc", A2, 300 * MiB, s_head)
    h.alloc(A2, 300 * MiB, s_head)
    h.add("oom", 200 * MiB, 500 * MiB, s_oom)
    segs = [
        segment(A1, 400 * MiB, [block(A1, 400 * MiB, 400 * MiB, "active_allocated", s_fwd)]),
        segment(A2, 300 * MiB, [block(A2, 300 * MiB, 300 * MiB, "active_allocated", s_head)]),
    ]
    return {"segments": segs, "device_traces": [h.events], "allocator_settings": settings()}


def main():
    files = {
        # Under set_per_process_memory_fraction: the device had room.
        "oom_fraction_fragmented.pickle": fragmented(device_free=70 * 1024 * MiB),
        # The device itself had 200 MiB free besides the 800 MiB held.
        "oom_device_fragmented.pickle": fragmented(device_free=200 * MiB),
        "oom_device_missing.pickle": missing(),
    }
    for name, snap in files.items():
        with open(name, "wb") as f:
            pickle.dump(snap, f, protocol=4)


if __name__ == "__main__":
    main()
