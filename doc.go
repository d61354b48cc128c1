// Package vram provides tensors on CPUs and GPUs whose memory you can see
// and control, with autograd, in the spirit of PyTorch's device and memory
// model.
//
// Start with a device and a tensor:
//
//	dev := vram.CPU
//	if vram.CUDAAvailable() {
//		dev = vram.CUDA(0)
//	}
//	x := vram.Randn(vram.Shape{64, 784}, dev)
//	w := vram.Zeros(vram.Shape{784, 10}, dev, vram.WithGrad())
//	loss := x.MatMul(w).LogSoftmax(1).Mean().Neg()
//	loss.Backward()
//	fmt.Println(loss.Item(), w.Grad().Shape())
//
// Factories ([Zeros], [Ones], [Full], [Empty], [Rand], [Randn], and
// [FromSlice] after its data) take a [Shape] ([Arange] takes start, end and
// step) and [Option]s: a [Device], a [DType], [WithGrad], [WithGenerator].
// Without a device option they use
// [DefaultDevice]; without a generator, random factories draw from the
// default generator of the tensor's device ([DeviceGenerator]), one per
// device as in PyTorch, all seeded by [ManualSeed]. Methods named New... ([Tensor.NewZeros], ...) take a
// Shape too and default to the receiver's dtype and device; the ...Like
// factories ([ZerosLike], [OnesLike], [FullLike], [EmptyLike], [RandLike],
// [RandnLike]) also take its shape. [Tensor.To], [Tensor.CUDA] and
// [Tensor.CPU] move data between devices and are differentiable.
// Operations on tensors of two different devices panic with a
// [*DeviceMismatchError] that names both and the fix, except that the
// elementwise operations read a 0-dimensional CPU tensor as a scalar on any
// device, as PyTorch does, and [Tensor.CopyFrom] copies from any device. [Tensor.GetDevice] is PyTorch's get_device: -1
// on the CPU.
//
// # Operations
//
// Operations are methods of [Tensor] (or functions, for those of several
// tensors) named after their torch counterparts (torch.logsumexp is
// [Tensor.Logsumexp], torch.nn.functional.conv1d [Conv1d]): elementwise math ([Tensor.Exp], [Tensor.Log10],
// [Tensor.Sinh], [Tensor.Atan], [Tensor.Atan2], [Tensor.Fmod],
// [Tensor.Remainder], [Tensor.FloorDivide], [Tensor.Addcmul],
// [Tensor.Addcdiv], [Tensor.Lerp], [Tensor.Trunc], [Tensor.Frac],
// [Tensor.NanToNum], [Tensor.ClampMin], ...), tests of values
// ([Tensor.IsInf], [Tensor.IsFinite], [Tensor.IsClose], [Tensor.AllClose],
// [Tensor.Equal], [Tensor.LogicalXor]), reductions ([Tensor.Sum], [Tensor.Logsumexp],
// [Tensor.Norm], [Tensor.Any], [Tensor.All], [Tensor.CountNonzero], ...),
// products ([Tensor.MatMul], [Tensor.Dot], [Tensor.Outer], [Tensor.Cross],
// [Cdist], [Einsum]), order statistics ([Tensor.Sort],
// [Tensor.Median], [Tensor.Kthvalue], [Tensor.Quantile], [Tensor.Cummax],
// ...), searching and bins ([SearchSorted], [Tensor.Bucketize],
// [Tensor.Bincount], [Tensor.Histc], [Tensor.Unique], [Tensor.UniqueDim],
// ...), indexing ([Tensor.Gather], [Tensor.Take],
// [Tensor.MaskedSelect], [Tensor.Nonzero], [Tensor.OneHot],
// [Tensor.IndexAdd], [Tensor.Diagonal], ...),
// rearranging ([Tensor.Flip], [Tensor.Roll], [Tensor.Tril],
// [Tensor.Triu], [Tensor.Permute], ...), padding and resizing ([Pad],
// [Interpolate], [PixelShuffle], [PixelUnshuffle], [Unfold], [Fold],
// [Tensor.Unfold]), factories ([Linspace], [Eye],
// [Logspace], [Meshgrid]) and layers ([Conv1d], [Conv2d], [LayerNorm],
// [RMSNorm], [Normalize], [ScaledDotProductAttention], [Dropout],
// [FeatureDropout], ...) and the
// losses that need more than composed ops ([CTCLoss], whose recursions run
// on the host in float64). The ...Scalar forms take a number
// for the second operand ([Tensor.AddScalar], [Tensor.RemainderScalar]).
//
// # Linear algebra
//
// torch.linalg's functions take the same names, batched over leading
// dimensions, on float32 and float64: [Det], [Slogdet], [Inv], [Solve],
// [Cholesky], [QR], [Eigh], [SVD], [Svdvals], [Pinv], [Lstsq], [MatrixRank],
// [MatrixNorm] (over any two dimensions with [MatrixNormDim]), [VectorNorm]
// and [MatrixPower], with [Trace], [Outer],
// [Kron], [Diag] and [DiagEmbed] beside them. The decompositions run on
// the host in float64: the matrices are copied from the device, factored,
// rounded once to the tensor's dtype and copied back, which synchronizes
// with the device, as some of PyTorch's MAGMA and cuSOLVER paths do.
// Trace, VectorNorm, Kron, Diag, DiagEmbed, MatrixPower with k >= 0 and
// the elementwise orders of MatrixNorm are composed of device ops and stay
// on the device. Det, Slogdet, Inv, Solve, Cholesky, QR, Eigh, SVD,
// Svdvals, Pinv, Lstsq, MatrixNorm and the composed ops are
// differentiable, with PyTorch's gradients and their conditions (distinct
// singular values for SVD's vectors, an invertible R for QR, a locally
// constant rank for Pinv and Lstsq); QR's "complete" mode with more rows
// than columns panics with [ErrAutograd] rather than give a gradient that
// depends on an arbitrary basis. A singular matrix
// (for Inv and Solve) or one that is not positive-definite (for Cholesky)
// panics with [ErrArgument], as torch.linalg raises.
//
// # Configuration
//
// A [Config] value holds every setting of vram: the caching allocator's (for
// all devices, and per device in Config.Devices, which PyTorch's one
// PYTORCH_CUDA_ALLOC_CONF cannot do), the simulated devices' number, sizes
// and shape-only mode, the CUDA kernel cache's directory, the directories
// searched for the NVIDIA libraries and leak debugging. Its zero value is
// the default: two sim devices of 16 GiB that keep data, vram's allocator
// policy, the kernel cache in the user's cache directory, no leak
// debugging. [Configure] gives it, before the first use of any device (a
// factory, [Device.Check], [DeviceCount], [SimDeviceCount], ...), which
// fixes it for the life of the process; a later Configure with another
// Config is an error of kind [ErrConfigFixed] that names the first use,
// and an invalid field is refused with its name. Tests call it in TestMain:
//
//	func TestMain(m *testing.M) {
//		if err := vram.Configure(vram.Config{SimDevices: []int64{256 << 20, 256 << 20}}); err != nil {
//			panic(err)
//		}
//		os.Exit(m.Run())
//	}
//
// The environment is read in one place, [ConfigFromEnv] (and
// [ConfigFromLookup], with variables of the caller's), whose errors, of
// kind [ErrArgument], name the variable and its value: VRAM_ALLOC_CONF, VRAM_SIM_DEVICES,
// VRAM_SIM_SHAPE_ONLY, VRAM_KERNEL_CACHE, VRAM_CUDA_LIBS, VRAM_DEBUG_LEAKS,
// VRAM_CUDNN and VRAM_CPU_MEMORY_LIMIT, one per field of Config (see each
// field). A program
// that never calls Configure gets what ConfigFromEnv reads, applied once,
// at the first use of a device, so that the variables work without code;
// then an invalid variable makes the devices it configures unavailable,
// and using one returns its error (VRAM_SIM_DEVICES=lots leaves no sim
// devices, VRAM_ALLOC_CONF=bogus no sim or CUDA devices; the CPU always
// works), and an invalid VRAM_DEBUG_LEAKS is a warning. A program that
// calls Configure is not affected by the environment at all; to honour it
// and change a field, start from ConfigFromEnv. The backends read no
// environment variable: package backend/sim takes [sim.Options] (and
// [sim.New] makes a backend of one's own with them), backend/cuda
// [cuda.Options], which Configure hands to them.
//
// # Errors
//
// Tensor operations panic with typed errors rather than returning them, as
// gonum does: math with an error per operation would be unreadable. The
// panic value is an [*Error] whose Kind is one of [ErrShape], [ErrDType],
// [ErrIndex], [ErrArgument], [ErrReleased], [ErrAutograd], [ErrUnavailable],
// [ErrOutOfMemory] (an allocation that the device, or the CPU's memory
// limit, cannot serve: errors.As reaches the allocator's
// *memory.OutOfMemoryError and its checked fix where there is one) or
// [ErrBackend] (work that a graph capture cannot record among it, wrapping
// [ErrCapturing]), or a [*DeviceMismatchError]. ([ErrConfigFixed] is the
// kind of an error that [Configure] returns.) [Catch] turns these panics
// back into errors and lets every other panic through. Functions that touch
// files, parse strings or configure the process return errors instead.
// A nil *Tensor given to any method or function (but Release and String)
// is an [ErrArgument] error too, never a nil-pointer dereference, and so is
// a nil function given to one that runs it ([Tidy], [NoGrad], [WithStream],
// [Autocast], ...; [Catch] returns that error). The
// error's Op is the operation the caller called: Select out of range
// reports "select", not the Narrow it is built on.
//
// In-place operations (the ...InPlace methods, CopyFrom, SetRawBytes, an
// optimizer's step) count their writes per storage, as PyTorch's version
// counters do: Backward through a graph that saved a tensor which has been
// written in place since (directly or through a view) panics with
// [ErrAutograd] rather than compute a wrong gradient. [Tensor.Detach] shares
// the count, as in PyTorch. A write made through [Raw] is not seen (as one
// through PyTorch's data_ptr() is not); its author counts it with
// [Tensor.IncrementVersion]. Outside [NoGrad], an in-place operation on a
// computed tensor, or one whose operand requires grad (t.AddInPlace(w),
// t.CopyFrom(w)), is recorded as the out-of-place operation would be, as in
// PyTorch: h := w.MulScalar(3); h.MulScalarInPlace(2) gives w the gradient
// 6, and t then stands for the new node of the graph (a RetainGrad moves
// with it; hooks registered before see the old values' gradient). Such a
// write on a leaf that requires grad panics with [ErrAutograd], as
// PyTorch's does (update parameters inside NoGrad); so does one that must
// be recorded on a tensor sharing its storage with a view (Narrow,
// Reshape, Transpose, ...) of it or with the tensor it is a view of:
// PyTorch records writes through views (CopySlices), vram does not yet.
// [Tensor.Detach] views and the tensors a graph saved do not count; a
// graph that saved the old values fails at backward as described above.
// A write recorded through a Detach view that has views of its own is
// refused too, since those views' graphs would miss it.
//
// Hooks follow PyTorch's: [Tensor.RegisterHook] sees, and may replace, the
// gradient with respect to a tensor before it goes further;
// [Tensor.RetainGrad] keeps that gradient in a computed tensor's Grad, as
// leaves keep theirs; [Tensor.RegisterPostAccumulateGradHook] runs once a
// leaf's gradient is complete.
//
// [Grad] is torch.autograd.grad: it returns the gradients of some outputs
// with respect to some inputs (leaves or computed tensors), runs only the
// part of the graph between them and stores nothing in any Grad. It is
// first-order only (no create_graph).
//
// # Memory ownership
//
// Go's garbage collector does not see device memory, so vram does not wait
// for it. Every tensor holds one reference to a reference-counted storage;
// views ([Tensor.Reshape], [Tensor.Transpose], [Tensor.Narrow], ...) and the
// autograd graph hold references too, and a view keeps all of its storage
// allocated, not only what it shows: a forgotten temporary view, as in
// b.Narrow(0, 0, 1).Sum().Item(), pins the whole of b. [Tensor.Release] drops the tensor's
// own reference, like Python's del; it is idempotent. Backward releases the
// tensors the graph saved. [Tidy] releases every tensor created inside it on
// the calling goroutine, except those passed to [Keep]: wrapping each
// training step in Tidy gives a flat memory profile without any call to
// runtime.GC. A tensor that is never released is freed by a cleanup when the
// garbage collector finds it, and counted in [Storage] as leaked; set
// [Config.DebugLeaks] (VRAM_DEBUG_LEAKS=1) to be told where such tensors were
// created and, for a view, where its storage was allocated and how much of
// it the view kept.
//
// [MemoryAllocated] and [MaxMemoryAllocated] report vram's own accounting of
// live storage per device.
//
// # Streams
//
// Every operation is queued on a [Stream] of its device: the current
// stream of the calling goroutine, which is the device's default stream
// unless [WithStream] chose another (Python's "with torch.cuda.stream(s)").
// Work on one stream runs in order; work on two streams may overlap, so a
// copy from pinned memory ([Tensor.PinMemory], [Tensor.To] with
// [NonBlocking]) can run under a GEMM on another stream. Streams are
// ordered only by [Event]s: [Stream.WaitEvent], [Stream.WaitStream],
// [Event.Synchronize], [Stream.Synchronize] and [Synchronize] for a whole
// device. A tensor allocated on one stream and used on another needs
// [Tensor.RecordStream] before it is released, so that the allocator does
// not hand its memory to new work while the other stream still reads it.
// A backward pass runs on the current streams of the goroutine that calls
// Backward or Grad, after the work of the streams its forward operations
// ran on (PyTorch runs each backward operation on the stream of its
// forward operation, which gives the same gradients). A copy between two
// devices reads its source after the work queued so far on the
// destination's current stream, as PyTorch's do.
//
// Unlike PyTorch, a CPU tensor filled by a non-blocking copy from a GPU
// waits for that copy before its values are read on the host, and a
// pinned source waits for its copy before the host writes it.
//
// Sim devices model streams without concurrency: the default stream runs
// its work when queued, any other stream only when something needs it
// (a synchronize, a wait, a host read on it), so a missing event shows up
// as stale values every time rather than once in a while, and a tensor
// released while another stream's queued work uses it, without
// RecordStream, makes the next Synchronize return an error. Test stream
// code on sim devices first.
//
// # Graphs
//
// [CaptureGraph] records the work a function queues on a device's current
// stream, without running it, into a [Graph] that [Graph.Replay] runs
// again with a single launch (CUDA graphs, as torch.cuda.graph). A training
// step whose host time matters (many small kernels) then costs the host
// one call. Replays run on the memory the capture used: the capture's
// tensors come from a private pool of the caching allocator that the graph
// keeps until [Graph.Release], inputs are written into the tensors the
// capture read, and results are read from the tensors it made. Work that
// waits for the device or copies between host and device cannot be
// recorded and fails with an error wrapping [ErrCapturing], as do the
// optimizer steps that would not replay as they ran and amp's GradScaler.
// Only the capturing goroutine's work is recorded
// ([IsCurrentStreamCapturing]); other goroutines use the device as usual.
// Sim devices, shape-only ones included, record graphs with the same
// rules.
//
// # Concurrency
//
// Tensors, reference counts and the autograd engine are safe for concurrent
// use; a goroutine per device is the intended way to drive several GPUs.
// Releasing a tensor (by [Tensor.Release], a [Tidy] or the garbage
// collector) while other goroutines compute with it is safe too: an
// operation holds the tensors it reads until it returns, so memory is never
// read after it is freed and never freed twice, and a use that starts after
// the release panics with [ErrReleased]. Settings come in two scopes:
//
//   - Goroutine-scoped: [NoGrad], [EnableGrad], [SetGradEnabled],
//     [InferenceMode], [Tidy], [Region] and [WithStream] affect only the goroutine that
//     calls them, never another one (a data-parallel worker's NoGrad must not
//     stop gradients elsewhere), and goroutines started inside do not
//     inherit them. Each takes a function and applies while it runs, then
//     restores what was there before: Go reuses a finished goroutine's
//     identity, so a setting that outlived its call could reach an unrelated
//     goroutine. They cost one atomic load per operation while no goroutine
//     uses them, and a short lookup while some do.
//   - Process-wide: [SetDevice] (the CUDA device that [CUDA] with no index
//     means) and [SetDefaultDevice] (where factories put tensors). They are
//     read atomically and meant to be set once at start-up; code that runs
//     several devices at once passes devices explicitly instead. The
//     [Config] is process-wide too, and fixed at the first use of a device
//     (see "Configuration").
//
// A panic inside a backend's worker goroutines is recovered there and
// returned to the calling goroutine, so [Catch] sees it.
//
// # Warnings
//
// vram warns, through the handler set with [SetWarningHandler], when a
// one-element tensor that requires grad is accumulated again and again
// without Backward (total += loss instead of total += loss.Item()): the
// graph then grows every iteration; and, as PyTorch does, when the target
// of an elementwise loss ([MSELoss], nn's L1, smooth L1 and Huber losses)
// has another shape than its input, so that the two broadcast. [WarnOnce]
// gives such a warning once per line of the caller's code.
package vram
