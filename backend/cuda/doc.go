// Package cuda is vram's backend for NVIDIA GPUs, registered as "cuda":
// every kernel of [backend.Kernels] on the GPU, the caching allocator of
// package memory on real device memory, and copies between host and
// device, without cgo (the native packages bind libcuda, NVRTC, cuBLASLt
// and cuDNN with purego).
//
// Programs use it through the root package (vram.CUDA(0)); a blank import
// registers it. [Open] returns a [*Device] for direct use, as the tests and
// benchmarks do. [Probe] says why there is no GPU.
//
// # Devices
//
// [Backend.DeviceCount] loads the driver and counts the GPUs once per
// process; it is 0 on a machine without a driver or GPU, and never panics.
// Opening a device retains its primary context (shared with cuBLAS, NCCL and
// the CUDA runtime), creates its default stream (non-blocking, so that it
// never waits for the legacy NULL stream; [Device.NewStream] makes more,
// with priorities, and every kernel and copy names the stream it runs on),
// and creates its allocator with the settings of [Options]
// (ones the GPU cannot honour make the open fail). With policy:vram (the default) or
// expandable_segments:True the allocator maps memory with CUDA virtual
// memory management (cuMemCreate, cuMemMap) through a [memory.VirtualArena];
// otherwise it takes whole segments from cuMemAlloc. NVRTC and cuBLASLt are
// loaded at the first op that needs them; when one is missing the op fails
// with an error that names the library and how to install it.
//
// # Options
//
// [Options] hold the allocator settings (for every GPU, and per GPU), the
// kernel cache's directory and the directories searched first for the
// NVIDIA libraries. The GPUs are process-wide, so the options are too:
// [Configure] sets them before the driver is probed and they are fixed
// from then on. vram.Configure calls it with the fields of vram.Config; the
// package itself reads no environment variable (vram.ConfigFromEnv reads
// VRAM_ALLOC_CONF, VRAM_KERNEL_CACHE and VRAM_CUDA_LIBS).
//
// # Threads and contexts
//
// The driver's current context belongs to the OS thread. Every method
// pins the calling goroutine to its thread (runtime.LockOSThread, counted,
// so calls nest) and makes the device's context current (cuCtxSetCurrent)
// before it calls the driver, and unpins it afterwards: ops run on the
// caller's goroutine, without a hop to a device goroutine. BENCHMARKS.md
// compares the two designs' host overhead.
//
// # Kernels
//
// The kernels are CUDA C in kernels/*.cu, embedded in the binary and
// specialised per op and dtype by preprocessor options: one module per op
// and dtype (say, float16 exp), compiled by NVRTC for the device's own
// architecture (sm_90 on an H200) to a CUBIN the first time an op needs it,
// in a fraction of a second. CUBINs are cached on disk in
// os.UserCacheDir()/vram/kernels (or [Options.KernelCache]; "off" disables
// it), named by a hash of the source, the options, the architecture and
// NVRTC's version, and written atomically. [Device.Precompile] compiles all
// of them at once, in parallel. A source that NVRTC refuses is a
// [*CompileError] carrying NVRTC's log.
//
// Elementwise kernels index with 64 bits and take the shapes and strides of
// their operands (after merging the dimensions across which every operand
// is contiguous, up to 8; more are split on the host) as kernel
// parameters, so broadcast, transposed, offset and zero-size views run
// without copies; all-contiguous operands take a fast path that moves 4
// elements per access when aligned, and strided kernels handle 4
// consecutive elements per thread from one index computation. Float16,
// bfloat16 and float32 compute in float32 and float64 in float64;
// transcendental functions use CUDA's float (or double) versions, within
// 1 to 4 ulp of the CPU backend, which evaluates them in float64.
// Reductions are deterministic: each output's elements are folded in a
// fixed pattern by a thread, a warp or a block, and long reductions are
// split into chunks whose number depends only on the shapes; float16,
// bfloat16 and float32 accumulate in float32 and round once, and a Sum or
// Prod of float16 or bfloat16 can write the float32 accumulator itself
// (red_sumw, red_prodw), for means and norms. MatMul goes through
// cuBLASLt with a 32 MiB workspace and plans cached per shape; float32
// products use full float32 unless [SetAllowTF32] allows TF32.
//
// # Convolutions
//
// [*Device] implements [backend.Convolver], [backend.Pooler] and
// [backend.BatchNormer] with cuDNN 9 (package native/cudnn), loaded at the
// first convolution: 2-D convolutions forward, backward data and backward
// filter (with the bias gradient, and with bias and ReLU fused into the
// forward call where cuDNN has it), max and average pooling, and batch
// normalization in training and inference, for float32, float16 and
// bfloat16 views that are contiguous (NCHW) or channels-last (NHWC). Each
// device has one cuDNN handle, set to the caller's stream at each call,
// and caches descriptors and chosen algorithms per shape, parameters,
// dtype and layout. The switches of [SetCuDNN] ([CuDNNSettings], also
// [Options.CuDNN]) turn on benchmark mode (each algorithm timed once per
// shape with cudnnFind*AlgorithmEx; otherwise the heuristics' first
// algorithm whose workspace fits), keep to deterministic algorithms, keep
// float32 off TF32, or turn cuDNN off. Workspaces come from the caching
// allocator under the region [CuDNNWorkspaceRegion] and go back after each
// call. Anything cuDNN cannot take (another layout or dtype, an empty
// view, cuDNN absent or off) is an error wrapping
// [backend.ErrNotImplemented], and the root package composes the
// operation instead; [CuDNNStatistics] counts those fallbacks and the
// searches. Batch normalization and pooling of channels-last tensors run
// on vram's own kernels instead (kernels/norm.cu and kernels/pool.cu,
// which read whole rows of channels; cuDNN's took several times longer on
// them), with or without cuDNN.
//
// [Device.AdamStep] implements [backend.FusedAdam]: one kernel
// (kernels/optim.cu) does a whole Adam or AdamW step of a contiguous
// parameter, its gradient and its two moments, computing in float32
// (float64 for float64) with correctly rounded operations; the CPU backend
// (and so a sim device) does the same arithmetic. [Device.UnscaleCheck]
// implements [backend.FusedUnscale], a GradScaler's unscale and inf/NaN
// check: one launch for up to 28 gradients of a dtype, their addresses and
// sizes passed as kernel parameters, the flag left on the device.
//
// # Errors
//
// Methods return errors; the root package turns them into panics. Kernels
// run asynchronously: a fault inside one (an illegal address) surfaces at a
// later call, is sticky in the driver, and turns into a
// [*ContextLostError] that every later call on the device returns at once.
// Index errors of Gather and ScatterAdd and integer division by zero are
// found by the kernels, written to a small error buffer on the device and
// returned by the next Synchronize as a [*KernelError]; the device stays
// usable.
//
// # Memory ownership
//
// Buffers come from the caching allocator ([Device.Allocator]) and go back
// to it with Free; the allocator reuses a freed block only for work queued
// later on the stream it was allocated for, or, after RecordStream, once
// the other streams' work is done, so Free never waits. Host copies return once
// the Go slice may be reused. Large copies from Go memory go through two
// page-locked staging buffers, overlapping the host copy with the DMA;
// memory from [Device.AllocHost] is copied directly, and
// [Device.CopyFromPinned] and [Device.CopyToPinned] copy from and to
// [Device.AllocPinned] memory without waiting. The cuBLASLt workspaces
// (one per stream: two products at once must not share one) are such
// buffers, kept for the stream's life from its first product, under the
// region label [WorkspaceRegion].
//
// When the allocator runs out of memory, its error names, through NVML
// (matched to the CUDA device by UUID, else by PCI address), the other
// processes on the GPU by pid, name and bytes, this process's own memory
// outside the allocator (its context and libraries), and the machine's
// other GPUs that have room; without NVML it gives what the driver's free
// memory shows.
//
// [Device.MemoryInfo] reports the same figures as a
// [memory.DeviceMemory] (vram.DeviceMemory adds the allocator's reserve).
//
// # Self-test
//
// [SelfTest] says where the driver and each library were found (or what to
// install), and checks every GPU through the paths tensors use
// ([Device.SelfTest]: copies, the kernel compiler and its disk cache, the
// kernels, cuBLASLt and cuDNN against the host, the caching allocator) and the peer
// copies between neighbouring GPUs; `vram doctor` prints its report.
//
// # Optional interfaces
//
// [*Device] also implements [PeerCopier] (direct copies between GPUs with
// cuMemcpyPeerAsync), [HostAllocator] (page-locked host memory) and
// [memory.DeviceInfo] (the GPU's memory and its processes).
package cuda
