package cuda

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/cudnn"
)

// Convolutions, pooling and batch normalization go through cuDNN 9 when it
// loads (package native/cudnn): each device has one cuDNN handle, set to
// the caller's stream for every call, and caches the descriptors of every
// shape, layout, dtype and parameter set it has seen, with the algorithm
// chosen for each direction of a convolution. Workspaces come from the
// device's caching allocator under the region "cudnn workspace" and go back
// to it after each call. Without cuDNN, or with it turned off
// ([SetCuDNN]), the methods return errors wrapping
// [backend.ErrNotImplemented] and the root package composes the operation
// from the elementwise kernels and cuBLASLt.

// CuDNNWorkspaceRegion is the region label of the workspaces of cuDNN's
// convolutions, which memory summaries, snapshots and out-of-memory errors
// show under this name.
const CuDNNWorkspaceRegion = "cudnn workspace"

// maxSearchWorkspace bounds the workspace of a benchmark-mode search: the
// algorithms that need more are not timed.
const maxSearchWorkspace = 1 << 30

// maxDNNPlans bounds each of a device's descriptor caches; a cache that is
// full is emptied.
const maxDNNPlans = 4096

// CuDNNSettings are the switches of the cuDNN path, process-wide as
// PyTorch's torch.backends.cudnn flags are. The zero value is PyTorch's
// default: cuDNN on, heuristics instead of timed searches, any algorithm,
// TF32 allowed in float32 convolutions.
type CuDNNSettings struct {
	// Disabled turns cuDNN off: convolutions, pooling and batch norm
	// return errors wrapping backend.ErrNotImplemented, and the root
	// package composes them (torch.backends.cudnn.enabled = False).
	Disabled bool
	// Benchmark times every algorithm of a convolution once per shape,
	// parameters, dtype and layout (cudnnFind*AlgorithmEx) and keeps the
	// fastest, as torch.backends.cudnn.benchmark = True does. Off, the
	// heuristic's first algorithm that fits in memory is used. The search
	// costs time at the first step of each shape: worth it when shapes
	// repeat, a loss when they change every step.
	Benchmark bool
	// Deterministic keeps to algorithms that give bit-identical results
	// from run to run (torch.backends.cudnn.deterministic = True), and
	// max pooling to its deterministic mode.
	Deterministic bool
	// NoTF32 keeps float32 convolutions off TF32 tensor cores
	// (torch.backends.cudnn.allow_tf32 = False): slower, with float32's
	// 24-bit mantissas in the products.
	NoTF32 bool
	// NoGraphAPI keeps convolutions on cuDNN's legacy API
	// (cudnnConvolutionForward and the algorithm searches) instead of
	// trying its graph API first (cudnn_graph.go), which PyTorch uses
	// and whose engines are faster for half-precision channels-last
	// convolutions.
	NoGraphAPI bool
	// BenchmarkLimit bounds how many engine configurations benchmark mode
	// times for one convolution on the graph API
	// (torch.backends.cudnn.benchmark_limit): 0 for the default,
	// DefaultBenchmarkLimit; a negative value times every configuration
	// the heuristics and cuDNN's fallback list offer. Plans chosen under
	// one limit are kept apart from those of another.
	BenchmarkLimit int
}

// DefaultBenchmarkLimit is how many engine configurations benchmark mode
// times per convolution when CuDNNSettings.BenchmarkLimit is 0: the first
// that the heuristics rank (mode A, then cuDNN's fallback list) and that
// finalize within maxSearchWorkspace. PyTorch's default
// torch.backends.cudnn.benchmark_limit is 10.
const DefaultBenchmarkLimit = 10

// maxBenchmarkLimit is the largest limit the settings word holds; larger
// limits, and negative ones, time every configuration.
const maxBenchmarkLimit = 1<<24 - 1

// Setting bits of cudnnSettings.
const (
	dnnDisabled = 1 << iota
	dnnBenchmark
	dnnDeterministic
	dnnNoTF32
	dnnNoGraph
)

// dnnLimitShift places CuDNNSettings.BenchmarkLimit in cudnnSettings'
// high bits, 0 for the default and maxBenchmarkLimit for every
// configuration.
const dnnLimitShift = 8

var cudnnSettings atomic.Uint32

// SetCuDNN sets the cuDNN switches. It is safe for concurrent use and
// applies to operations queued after it returns; algorithms chosen under
// one setting are kept for when it comes back. [Configure] sets them from
// [Options.CuDNN].
func SetCuDNN(s CuDNNSettings) {
	var b uint32
	if s.Disabled {
		b |= dnnDisabled
	}
	if s.Benchmark {
		b |= dnnBenchmark
	}
	if s.Deterministic {
		b |= dnnDeterministic
	}
	if s.NoTF32 {
		b |= dnnNoTF32
	}
	if s.NoGraphAPI {
		b |= dnnNoGraph
	}
	limit := s.BenchmarkLimit
	if limit < 0 || limit > maxBenchmarkLimit {
		limit = maxBenchmarkLimit
	}
	b |= uint32(limit) << dnnLimitShift
	cudnnSettings.Store(b)
}

// CuDNN returns the switches set by [SetCuDNN].
func CuDNN() CuDNNSettings {
	b := cudnnSettings.Load()
	limit := int(b >> dnnLimitShift)
	if limit == maxBenchmarkLimit {
		limit = -1
	}
	return CuDNNSettings{Disabled: b&dnnDisabled != 0, Benchmark: b&dnnBenchmark != 0,
		Deterministic: b&dnnDeterministic != 0, NoTF32: b&dnnNoTF32 != 0, NoGraphAPI: b&dnnNoGraph != 0,
		BenchmarkLimit: limit}
}

// benchLimit returns how many configurations benchmark mode times under
// the settings word b.
func benchLimit(b uint32) int {
	switch l := int(b >> dnnLimitShift); l {
	case 0:
		return DefaultBenchmarkLimit
	case maxBenchmarkLimit:
		return math.MaxInt
	default:
		return l
	}
}

// CuDNNStats counts the work of choosing convolution algorithms, summed
// over the process's GPUs.
type CuDNNStats struct {
	// Searches counts the timed searches of benchmark mode, one per
	// convolution shape and direction (forward, data gradient, filter
	// gradient) the first time it runs under that mode.
	Searches int64
	// SearchTime is the time those searches took, their workspaces'
	// allocation included: what benchmark mode adds to the first step.
	SearchTime time.Duration
	// Heuristics counts the heuristic queries, one per shape and direction
	// outside benchmark mode.
	Heuristics int64
	// Fallbacks counts the calls that cuDNN could not take (a layout,
	// dtype or parameter it lacks, or cuDNN off or absent), which went to
	// the composed path.
	Fallbacks int64
}

var dnnStats struct {
	searches, searchNanos, heuristics, fallbacks atomic.Int64
}

// CuDNNStatistics returns the counts since the process started.
func CuDNNStatistics() CuDNNStats {
	return CuDNNStats{Searches: dnnStats.searches.Load(), SearchTime: time.Duration(dnnStats.searchNanos.Load()),
		Heuristics: dnnStats.heuristics.Load(), Fallbacks: dnnStats.fallbacks.Load()}
}

var (
	dnnOnce    sync.Once
	dnnErr     error
	dnnVersion int
)

// loadCuDNN loads cuDNN once per process.
func loadCuDNN() error {
	dnnOnce.Do(func() {
		if _, err := cudnn.Load(); err != nil {
			dnnErr = missingLibrary("cuDNN 9 (libcudnn.so.9)", "nvidia-cudnn", err)
			return
		}
		v, err := cudnn.GetVersion()
		if err != nil {
			dnnErr = err
			return
		}
		dnnVersion = v
	})
	return dnnErr
}

// CuDNNVersion loads cuDNN and returns its version as major*10000 +
// minor*100 + patch (90600 for 9.6.0), or why it could not be loaded.
func CuDNNVersion() (int, error) {
	if err := loadCuDNN(); err != nil {
		return 0, err
	}
	return dnnVersion, nil
}

func cudnnVersionString() string {
	v, err := CuDNNVersion()
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
}

// dnnState is a device's cuDNN handle and descriptor caches. mu is held
// for every use of the handle (its stream is state) and of the caches.
type dnnState struct {
	once   sync.Once
	err    error
	mu     sync.Mutex
	handle cudnn.Handle
	stream cuda.Stream // the stream the handle was last set to
	relu   cudnn.ActivationDesc

	convs  map[convKey]*convPlan
	graphs map[graphKey]*graphPlan // graph-API plans, made at first use (cudnn_graph.go)
	pools  map[poolKey]*poolPlan
	bns    map[bnKey]*bnPlan
}

// dnnBegin returns the device seen through s, ready for cuDNN: loaded,
// with the device's handle created, unless cuDNN is off or absent; then
// the error wraps backend.ErrNotImplemented. check is the verdict of the
// caller's argument check.
func (dev *Device) dnnBegin(s backend.Stream, what string, check error) (*queue, error) {
	d, err := dev.begin(s, what, check)
	if err != nil {
		return nil, err
	}
	if cudnnSettings.Load()&dnnDisabled != 0 {
		return nil, d.dnnFallback(what, errors.New("cuDNN is turned off (SetCuDNN)"))
	}
	if err := loadCuDNN(); err != nil {
		return nil, d.dnnFallback(what, err)
	}
	st := &d.dnn
	st.once.Do(func() {
		st.err = d.run(func() error {
			h, err := cudnn.Create()
			if err != nil {
				return fmt.Errorf("cuda: cuda:%d: cudnnCreate: %w", d.index, err)
			}
			act, err := cudnn.CreateActivationDescriptor()
			if err == nil {
				err = cudnn.SetActivationDescriptor(act, cudnn.ActivationReLU, cudnn.PropagateNaN, 0)
			}
			if err != nil {
				cudnn.Destroy(h)
				return fmt.Errorf("cuda: cuda:%d: cuDNN ReLU descriptor: %w", d.index, err)
			}
			st.handle, st.relu = h, act
			st.convs, st.pools, st.bns = map[convKey]*convPlan{}, map[poolKey]*poolPlan{}, map[bnKey]*bnPlan{}
			return nil
		})
	})
	if st.err != nil {
		return nil, d.dnnFallback(what, st.err)
	}
	return d, nil
}

// dnnFallback counts a call that goes to the composed path and returns its
// error, which wraps backend.ErrNotImplemented and says why.
func (d *queue) dnnFallback(what string, why error) error {
	dnnStats.fallbacks.Add(1)
	recordFallback(what, why)
	return fmt.Errorf("cuda: cuda:%d: %s: %w (%w)", d.index, what, why, backend.ErrNotImplemented)
}

// dnnRun enters the device, takes the cuDNN lock, sets the handle to the
// queue's stream and runs fn. A cuDNN error of the bad-parameter or
// not-supported kinds (a shape, layout or dtype cuDNN lacks) becomes an
// error wrapping backend.ErrNotImplemented, so that the caller falls back.
func (d *queue) dnnRun(what string, fn func(h cudnn.Handle) error) error {
	err := d.run(func() error {
		st := &d.dnn
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.stream != d.stream {
			if err := cudnn.SetStream(st.handle, d.stream); err != nil {
				return err
			}
			st.stream = d.stream
		}
		return fn(st.handle)
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, cudnn.ErrBadParam) || errors.Is(err, cudnn.ErrNotSupported) {
		return d.dnnFallback(what, err)
	}
	var ce *cudnn.Error
	if errors.As(err, &ce) {
		return fmt.Errorf("cuda: cuda:%d: %s: %w", d.index, what, err)
	}
	return err
}

// layout is the memory format of a 4-D view, as a set.
type layout uint8

const (
	nchw layout = 1 << iota // contiguous
	nhwc                    // channels last
)

func (l layout) String() string {
	if l == nhwc {
		return "NHWC"
	}
	return "NCHW"
}

// layoutOf returns the layouts that a 4-D view [N, C, H, W] is packed in,
// ignoring the strides of dimensions of size 1; 0 for neither.
func layoutOf(v backend.View) layout {
	if len(v.Shape) != 4 || len(v.Strides) != 4 {
		return 0
	}
	n, c, h, w := v.Shape[0], v.Shape[1], v.Shape[2], v.Shape[3]
	var l layout
	if stridesMatch(v, [4]int{c * h * w, h * w, w, 1}) {
		l |= nchw
	}
	if stridesMatch(v, [4]int{h * w * c, 1, w * c, c}) {
		l |= nhwc
	}
	_ = n
	return l
}

func stridesMatch(v backend.View, want [4]int) bool {
	for i, s := range v.Strides {
		if v.Shape[i] != 1 && s != want[i] {
			return false
		}
	}
	return true
}

// pick returns one layout of the set l: NCHW when it allows both.
func (l layout) pick() layout {
	if l&nchw != 0 {
		return nchw
	}
	return nhwc
}

// strides returns the element strides of an [n, c, h, w] tensor in
// layout l.
func (l layout) strides(c, h, w int) (ns, cs, hs, ws int) {
	if l == nhwc {
		return h * w * c, 1, w * c, c
	}
	return c * h * w, h * w, w, 1
}

// dnnType returns cuDNN's data type for dt; false for a dtype the cuDNN
// path does not take.
func dnnType(dt backend.DType) (cudnn.DataType, bool) {
	switch dt {
	case backend.Float32:
		return cudnn.DataFloat, true
	case backend.Float16:
		return cudnn.DataHalf, true
	case backend.BFloat16:
		return cudnn.DataBFloat16, true
	}
	return 0, false
}

// maxDNNElements bounds the tensors of cuDNN's legacy API, whose sizes and
// strides are C ints.
const maxDNNElements = 1<<31 - 1

// shape4 returns a 4-D view's sizes, and whether cuDNN can take it: 4
// positive sizes within a C int's reach, in one of the two layouts.
func shape4(v backend.View) (s [4]int, l layout, ok bool) {
	if len(v.Shape) != 4 || v.Buf == nil {
		return s, 0, false
	}
	copy(s[:], v.Shape)
	for _, n := range s {
		if n <= 0 {
			return s, 0, false
		}
	}
	if v.NumElements() > maxDNNElements {
		return s, 0, false
	}
	l = layoutOf(v)
	return s, l, l != 0
}

// newTensorDesc creates the descriptor of an [n, c, h, w] tensor of type t
// in layout l.
func newTensorDesc(t cudnn.DataType, s [4]int, l layout) (cudnn.TensorDesc, error) {
	d, err := cudnn.CreateTensorDescriptor()
	if err != nil {
		return 0, err
	}
	ns, cs, hs, ws := l.strides(s[1], s[2], s[3])
	if err := cudnn.SetTensor4dDescriptorEx(d, t, s[0], s[1], s[2], s[3], ns, cs, hs, ws); err != nil {
		cudnn.DestroyTensorDescriptor(d)
		return 0, err
	}
	return d, nil
}

// isOOM reports whether err is the allocator's out-of-memory error.
func isOOM(err error) bool {
	var oom *memory.OutOfMemoryError
	return errors.As(err, &oom)
}

// workspace allocates n bytes of cuDNN workspace on the queue's stream; a
// zero n gives none.
func (d *queue) dnnWorkspace(n uint64) (*Buffer, cuda.DevicePtr, error) {
	if n == 0 {
		return nil, 0, nil
	}
	b, err := d.Alloc(int64(n), d.st, CuDNNWorkspaceRegion)
	if err != nil {
		return nil, 0, err
	}
	buf := b.(*Buffer)
	return buf, buf.ptr, nil
}

// freeWorkspace returns a workspace to the allocator; work queued on the
// stream may still use it, and the allocator hands it out again only to
// later work.
func (d *queue) freeWorkspace(b *Buffer) {
	if b != nil {
		d.Free(b, d.st)
	}
}
