package cuda

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/cudnn"
)

var (
	_ backend.Convolver   = (*Device)(nil)
	_ backend.Pooler      = (*Device)(nil)
	_ backend.BatchNormer = (*Device)(nil)
)

// The host scalars of every cuDNN call: y = one·op(...) + zero·y. cuDNN
// reads them during the call; they are never written.
var (
	one32  float32 = 1
	zero32 float32 = 0
	one            = unsafe.Pointer(&one32)
	zero           = unsafe.Pointer(&zero32)
)

// convDir is a direction of a convolution.
type convDir uint8

const (
	dirForward convDir = iota
	dirData            // the gradient of the input
	dirFilter          // the gradient of the filter
)

func (dir convDir) String() string {
	return [...]string{"forward", "backward data", "backward filter"}[dir]
}

// algoCount is the number of cuDNN algorithms of the direction.
func (dir convDir) algoCount() int {
	return [...]int{cudnn.FwdAlgoCount, cudnn.BwdDataAlgoCount, cudnn.BwdFilterAlgoCount}[dir]
}

// convKey identifies a convolution for the descriptor cache: x is the
// input (or its gradient), w the filter (or its gradient), y the output
// (or its gradient), each with its layout.
type convKey struct {
	dt         backend.DType
	x, w, y    [4]int
	lx, lw, ly layout
	p          backend.Conv2DParams
	tf32       bool
}

// algoKey picks a cached algorithm list: per direction and mode.
type algoKey struct {
	dir        convDir
	bench, det bool
}

// candidate is one algorithm to run, with its math type and the bytes of
// workspace it needs.
type candidate struct {
	algo int32
	math cudnn.MathType
	ws   uint64
}

// convPlan holds the descriptors of one convKey and the algorithms chosen
// for it, best first: the next is tried when the workspace of one does not
// fit in memory.
type convPlan struct {
	xd, yd  cudnn.TensorDesc
	wd      cudnn.FilterDesc
	cd      cudnn.ConvDesc
	bd      cudnn.TensorDesc // [1, O, 1, 1], made at the first bias
	base    cudnn.MathType
	noFused bool // cudnnConvolutionBiasActivationForward refused this plan
	algos   map[algoKey][]candidate
}

func (pl *convPlan) destroy() {
	for _, t := range []cudnn.TensorDesc{pl.xd, pl.yd, pl.bd} {
		if t != 0 {
			cudnn.DestroyTensorDescriptor(t)
		}
	}
	if pl.wd != 0 {
		cudnn.DestroyFilterDescriptor(pl.wd)
	}
	if pl.cd != 0 {
		cudnn.DestroyConvolutionDescriptor(pl.cd)
	}
}

// checkConv checks the geometry of a convolution: x [N, C, H, W], w [O,
// C/Groups, KH, KW] and y [N, O, OH, OW] of one dtype, with the output
// size that p gives. names are the three views' names in messages.
func checkConv(x, w, y backend.View, p backend.Conv2DParams, names [3]string) error {
	for i, v := range []backend.View{x, w, y} {
		if len(v.Shape) != 4 || len(v.Strides) != 4 {
			return fmt.Errorf("%s has shape %v (strides %v): want 4 dimensions", names[i], v.Shape, v.Strides)
		}
	}
	if x.DType != w.DType || y.DType != x.DType {
		return fmt.Errorf("%s, %s and %s are %s, %s and %s: want one dtype", names[0], names[1], names[2], x.DType, w.DType, y.DType)
	}
	for i := range 2 {
		if p.Stride[i] < 1 || p.Dilation[i] < 1 || p.Padding[i] < 0 {
			return fmt.Errorf("stride %v, padding %v, dilation %v: want strides and dilations of at least 1, padding of at least 0", p.Stride, p.Padding, p.Dilation)
		}
	}
	n, c, h, wd := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	o, cg, kh, kw := w.Shape[0], w.Shape[1], w.Shape[2], w.Shape[3]
	if p.Groups < 1 || c%p.Groups != 0 || o%p.Groups != 0 || cg != c/p.Groups {
		return fmt.Errorf("%d groups with %d input and %d output channels and a %s of %v: want groups dividing both, and %s [O, C/groups, KH, KW]",
			p.Groups, c, o, names[1], w.Shape, names[1])
	}
	oh := backend.ConvOutputSize(h, kh, p.Stride[0], p.Padding[0], p.Dilation[0])
	ow := backend.ConvOutputSize(wd, kw, p.Stride[1], p.Padding[1], p.Dilation[1])
	if oh < 0 || ow < 0 {
		return fmt.Errorf("a %dx%d filter (dilation %v) does not fit a %dx%d input with padding %v", kh, kw, p.Dilation, h, wd, p.Padding)
	}
	if want := []int{n, o, oh, ow}; !equalInts(y.Shape, want) {
		return fmt.Errorf("%s has shape %v: want %v", names[2], y.Shape, want)
	}
	return nil
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// convTakes reports whether cuDNN takes the three views of a convolution
// (a dtype it has, sizes within a C int, every view in one of the two
// layouts), with the plan key; why says what it lacks otherwise.
func convTakes(x, w, y backend.View, p backend.Conv2DParams) (key convKey, why string) {
	if _, ok := dnnType(x.DType); !ok {
		return key, fmt.Sprintf("no cuDNN path for %s", x.DType)
	}
	var ok [3]bool
	key.x, key.lx, ok[0] = shape4(x)
	key.w, key.lw, ok[1] = shape4(w)
	key.y, key.ly, ok[2] = shape4(y)
	if !ok[0] || !ok[1] || !ok[2] {
		return key, "an empty view, one beyond 2^31 elements, or one neither contiguous (NCHW) nor channels-last (NHWC)"
	}
	key.lx, key.lw, key.ly = pickLayouts(key.lx, key.lw, key.ly)
	key.dt, key.p = x.DType, p
	key.tf32 = x.DType == backend.Float32 && cudnnSettings.Load()&dnnNoTF32 == 0
	return key, ""
}

// pickLayouts chooses one layout for each of a convolution's views from the
// layouts each is packed in, so that cuDNN sees one format wherever the
// memory allows it: a view packed both ways (a 1x1 filter, one channel, a
// 1x1 image) takes the layout of the others. Only views that share no
// layout keep their own (then cuDNN computes the mix or declines it).
func pickLayouts(x, w, y layout) (layout, layout, layout) {
	if common := x & w & y; common != 0 {
		l := common.pick()
		return l, l, l
	}
	pref := x.pick()
	if x == nchw|nhwc {
		// The input fits any layout: follow the filter's, or the output's.
		if w != nchw|nhwc {
			pref = w
		} else {
			pref = y.pick()
		}
	}
	out := [3]layout{x, w, y}
	for i, l := range out {
		if l&pref != 0 {
			out[i] = pref
		} else {
			out[i] = l.pick()
		}
	}
	return out[0], out[1], out[2]
}

// vectorTakes reports whether a bias (or its gradient) is what cuDNN takes:
// [n], contiguous, of dtype dt.
func vectorTakes(v backend.View, n int, dt backend.DType) bool {
	return len(v.Shape) == 1 && v.Shape[0] == n && v.DType == dt && v.IsContiguous()
}

// convPlan returns the cached plan of key, creating its descriptors on
// first use. The cuDNN lock is held.
func (d *queue) convPlan(key convKey) (*convPlan, error) {
	st := &d.dnn
	if pl, ok := st.convs[key]; ok {
		return pl, nil
	}
	if len(st.convs) >= maxDNNPlans {
		for k, pl := range st.convs {
			pl.destroy()
			delete(st.convs, k)
		}
	}
	t, _ := dnnType(key.dt)
	pl := &convPlan{algos: map[algoKey][]candidate{}}
	ok := false
	defer func() {
		if !ok {
			pl.destroy()
		}
	}()
	var err error
	if pl.xd, err = newTensorDesc(t, key.x, key.lx); err != nil {
		return nil, err
	}
	if pl.yd, err = newTensorDesc(t, key.y, key.ly); err != nil {
		return nil, err
	}
	if pl.wd, err = cudnn.CreateFilterDescriptor(); err != nil {
		return nil, err
	}
	format := cudnn.FormatNCHW
	if key.lw == nhwc {
		format = cudnn.FormatNHWC
	}
	if err := cudnn.SetFilter4dDescriptor(pl.wd, t, format, key.w[0], key.w[1], key.w[2], key.w[3]); err != nil {
		return nil, err
	}
	if pl.cd, err = cudnn.CreateConvolutionDescriptor(); err != nil {
		return nil, err
	}
	p := key.p
	if err := cudnn.SetConvolution2dDescriptor(pl.cd, p.Padding[0], p.Padding[1], p.Stride[0], p.Stride[1],
		p.Dilation[0], p.Dilation[1], cudnn.CrossCorrelation, cudnn.DataFloat); err != nil {
		return nil, err
	}
	if err := cudnn.SetConvolutionGroupCount(pl.cd, p.Groups); err != nil {
		return nil, err
	}
	// As PyTorch: tensor cores for half precision; for float32, TF32
	// (CUDNN_DEFAULT_MATH) unless it is turned off (CUDNN_FMA_MATH).
	pl.base = cudnn.TensorOpMath
	if key.dt == backend.Float32 {
		pl.base = cudnn.FMAMath
		if key.tf32 {
			pl.base = cudnn.DefaultMath
		}
	}
	if err := cudnn.SetConvolutionMathType(pl.cd, pl.base); err != nil {
		return nil, err
	}
	ok = true
	st.convs[key] = pl
	return pl, nil
}

// biasDesc returns the plan's [1, O, 1, 1] descriptor, made on first use.
func (pl *convPlan) biasDesc(key convKey) (cudnn.TensorDesc, error) {
	if pl.bd == 0 {
		t, _ := dnnType(key.dt)
		bd, err := newTensorDesc(t, [4]int{1, key.w[0], 1, 1}, nchw)
		if err != nil {
			return 0, err
		}
		pl.bd = bd
	}
	return pl.bd, nil
}

// mathAllowed reports whether an algorithm's math type keeps to what the
// dtype and the TF32 switch allow: no TF32 for float32 when it is off, and
// no conversion to half precision unless the data is half already.
func mathAllowed(key convKey, m cudnn.MathType) bool {
	if key.dt == backend.Float32 && !key.tf32 && m != cudnn.FMAMath {
		return false
	}
	return m != cudnn.TensorOpMathAllowConversion || key.dt == backend.Float16
}

// heuristic asks cuDNN's heuristics for the direction's algorithms.
func heuristic(h cudnn.Handle, pl *convPlan, dir convDir, perf []cudnn.AlgoPerf) (int, error) {
	switch dir {
	case dirForward:
		return cudnn.GetConvolutionForwardAlgorithm_v7(h, pl.xd, pl.wd, pl.cd, pl.yd, perf)
	case dirData:
		return cudnn.GetConvolutionBackwardDataAlgorithm_v7(h, pl.wd, pl.yd, pl.cd, pl.xd, perf)
	}
	return cudnn.GetConvolutionBackwardFilterAlgorithm_v7(h, pl.xd, pl.yd, pl.cd, pl.wd, perf)
}

// workspaceSize returns the bytes of workspace that algo needs under the
// descriptor's current math type.
func workspaceSize(h cudnn.Handle, pl *convPlan, dir convDir, algo int32) (uint64, error) {
	switch dir {
	case dirForward:
		return cudnn.GetConvolutionForwardWorkspaceSize(h, pl.xd, pl.wd, pl.cd, pl.yd, cudnn.FwdAlgo(algo))
	case dirData:
		return cudnn.GetConvolutionBackwardDataWorkspaceSize(h, pl.wd, pl.yd, pl.cd, pl.xd, cudnn.BwdDataAlgo(algo))
	}
	return cudnn.GetConvolutionBackwardFilterWorkspaceSize(h, pl.xd, pl.yd, pl.cd, pl.wd, cudnn.BwdFilterAlgo(algo))
}

// find times the direction's algorithms on the buffers: ptrs holds x, w and
// y (or their gradients); the output of the direction is overwritten.
func find(h cudnn.Handle, pl *convPlan, dir convDir, ptrs [3]cuda.DevicePtr, perf []cudnn.AlgoPerf, ws cuda.DevicePtr, wsBytes uint64) (int, error) {
	switch dir {
	case dirForward:
		return cudnn.FindConvolutionForwardAlgorithmEx(h, pl.xd, ptrs[0], pl.wd, ptrs[1], pl.cd, pl.yd, ptrs[2], perf, ws, wsBytes)
	case dirData:
		return cudnn.FindConvolutionBackwardDataAlgorithmEx(h, pl.wd, ptrs[1], pl.yd, ptrs[2], pl.cd, pl.xd, ptrs[0], perf, ws, wsBytes)
	}
	return cudnn.FindConvolutionBackwardFilterAlgorithmEx(h, pl.xd, ptrs[0], pl.yd, ptrs[2], pl.cd, pl.wd, ptrs[1], perf, ws, wsBytes)
}

// algorithms finds the plan's algorithms for the direction under the
// current switches, unless they are cached, and returns their key in
// pl.algos: from a timed search in benchmark mode or from the
// heuristics, keeping those whose math type is allowed (and which are
// deterministic, in deterministic mode), best first. The cuDNN lock is
// held.
func (d *queue) algorithms(h cudnn.Handle, pl *convPlan, key convKey, dir convDir, ptrs [3]cuda.DevicePtr) (algoKey, error) {
	s := cudnnSettings.Load()
	ak := algoKey{dir: dir, bench: s&dnnBenchmark != 0, det: s&dnnDeterministic != 0}
	if _, ok := pl.algos[ak]; ok {
		return ak, nil
	}
	var perf []cudnn.AlgoPerf
	var wsLimit uint64 = 1<<64 - 1
	if ak.bench {
		start := time.Now()
		var err error
		perf, wsLimit, err = d.search(h, pl, dir, ptrs)
		dnnStats.searches.Add(1)
		dnnStats.searchNanos.Add(int64(time.Since(start)))
		if err != nil {
			return ak, err
		}
	} else {
		perf = make([]cudnn.AlgoPerf, dir.algoCount())
		n, err := heuristic(h, pl, dir, perf)
		dnnStats.heuristics.Add(1)
		if err != nil {
			return ak, err
		}
		perf = perf[:n]
	}
	var cands []candidate
	seen := map[candidate]bool{}
	for _, p := range perf {
		if p.Status != cudnn.StatusSuccess || p.Memory > wsLimit || !mathAllowed(key, p.MathType) ||
			(ak.det && p.Determinism != cudnn.Deterministic) {
			continue
		}
		if err := cudnn.SetConvolutionMathType(pl.cd, p.MathType); err != nil {
			return ak, err
		}
		ws, err := workspaceSize(h, pl, dir, p.Algo)
		if err != nil {
			continue // not available under this math type after all
		}
		c := candidate{algo: p.Algo, math: p.MathType, ws: ws}
		if !seen[c] {
			seen[c] = true
			cands = append(cands, c)
		}
	}
	if err := cudnn.SetConvolutionMathType(pl.cd, pl.base); err != nil {
		return ak, err
	}
	pl.algos[ak] = cands
	return ak, nil
}

// search times every algorithm of the direction with cudnnFind*AlgorithmEx
// and a workspace from the caching allocator: as large as the hungriest
// algorithm wants, up to maxSearchWorkspace, halved while it does not fit.
// It returns the results, fastest first, and the workspace size they were
// timed with.
func (d *queue) search(h cudnn.Handle, pl *convPlan, dir convDir, ptrs [3]cuda.DevicePtr) ([]cudnn.AlgoPerf, uint64, error) {
	var want uint64
	for a := range dir.algoCount() {
		if n, err := workspaceSize(h, pl, dir, int32(a)); err == nil {
			want = max(want, n)
		}
	}
	want = min(want, maxSearchWorkspace)
	var buf *Buffer
	var ws cuda.DevicePtr
	for {
		var err error
		buf, ws, err = d.dnnWorkspace(want)
		if err == nil {
			break
		}
		if !isOOM(err) {
			return nil, 0, err
		}
		want /= 2
		if want < 1<<20 {
			want = 0
		}
	}
	defer d.freeWorkspace(buf)
	perf := make([]cudnn.AlgoPerf, dir.algoCount())
	n, err := find(h, pl, dir, ptrs, perf, ws, want)
	if err != nil {
		return nil, 0, err
	}
	return perf[:n], want, nil
}

// runAlgorithms runs op with the first of the plan's algorithms for ak
// that works: one whose workspace cannot be allocated, or which cuDNN
// refuses for these views, gives its turn to the next, and is dropped from
// the cache so that later calls do not try it again (a failed allocation
// empties the allocator's cache first: too costly to repeat). With none
// left, it returns an error for the fallback.
func (d *queue) runAlgorithms(pl *convPlan, ak algoKey, op func(c candidate, ws cuda.DevicePtr) error) error {
	cands := pl.algos[ak]
	var last error
	for i, c := range cands {
		buf, ws, err := d.dnnWorkspace(c.ws)
		if err != nil {
			if !isOOM(err) {
				return err
			}
			last = err
			continue
		}
		err = cudnn.SetConvolutionMathType(pl.cd, c.math)
		if err == nil {
			err = op(c, ws)
		}
		d.freeWorkspace(buf)
		if errors.Is(err, cudnn.ErrNotSupported) || errors.Is(err, cudnn.ErrBadParam) {
			last = err
			continue
		}
		if err == nil && i > 0 {
			pl.algos[ak] = cands[i:]
		}
		return err
	}
	if last != nil && !isOOM(last) {
		pl.algos[ak] = nil // every algorithm refused: the fallback from now on
		return last
	}
	if last != nil {
		return last
	}
	mode := ""
	if ak.det {
		mode = " deterministic"
	}
	return fmt.Errorf("cuDNN has no%s algorithm for it: %w", mode, cudnn.ErrNotSupported)
}

// Conv2D computes y = conv(x, w) + bias, then ReLU when relu is set, with
// cuDNN: in one call (cudnnConvolutionBiasActivationForward) when there is
// both a bias and ReLU and cuDNN has it for the shape. It implements
// [backend.Convolver]; what cuDNN cannot take returns an error wrapping
// [backend.ErrNotImplemented].
func (dev *Device) Conv2D(s backend.Stream, y, x, w, bias backend.View, p backend.Conv2DParams, relu bool) error {
	const what = "conv2d"
	d, err := dev.dnnBegin(s, what, checkConv(x, w, y, p, [3]string{"x", "w", "y"}))
	if err != nil {
		return err
	}
	key, why := convTakes(x, w, y, p)
	hasBias := bias.Buf != nil
	if why == "" && hasBias && !vectorTakes(bias, key.w[0], y.DType) {
		why = fmt.Sprintf("a bias of shape %v and dtype %s, not a contiguous [%d] of %s", bias.Shape, bias.DType, key.w[0], y.DType)
	}
	if why != "" {
		return d.dnnFallback(what, errors.New(why))
	}
	var ptrs [4]cuda.DevicePtr
	for i, v := range []backend.View{x, w, y, bias} {
		if i == 3 && !hasBias {
			break
		}
		if ptrs[i], err = d.ptrOf(what, v); err != nil {
			return err
		}
	}
	xp, wp, yp, bp := ptrs[0], ptrs[1], ptrs[2], ptrs[3]
	return d.dnnRun(what, func(h cudnn.Handle) error {
		pl, err := d.convPlan(key)
		if err != nil {
			return err
		}
		var bd cudnn.TensorDesc
		if hasBias {
			if bd, err = pl.biasDesc(key); err != nil {
				return err
			}
		}
		if d.graphConv(h, key, dirForward, [3]cuda.DevicePtr{xp, wp, yp}) {
			return graphEpilogue(h, d.dnn.relu, pl.yd, yp, bd, bp, hasBias, relu)
		}
		ak, err := d.algorithms(h, pl, key, dirForward, [3]cuda.DevicePtr{xp, wp, yp})
		if err != nil {
			return err
		}
		return d.runAlgorithms(pl, ak, func(c candidate, ws cuda.DevicePtr) error {
			if hasBias && relu && !pl.noFused {
				err := cudnn.ConvolutionBiasActivationForward(h, one, pl.xd, xp, pl.wd, wp, pl.cd, cudnn.FwdAlgo(c.algo), ws, c.ws,
					zero, pl.yd, yp, bd, bp, d.dnn.relu, pl.yd, yp)
				if !errors.Is(err, cudnn.ErrNotSupported) && !errors.Is(err, cudnn.ErrBadParam) {
					return err
				}
				pl.noFused = true // the unfused calls below, from now on
			}
			if err := cudnn.ConvolutionForward(h, one, pl.xd, xp, pl.wd, wp, pl.cd, cudnn.FwdAlgo(c.algo), ws, c.ws, zero, pl.yd, yp); err != nil {
				return err
			}
			if hasBias {
				if err := cudnn.AddTensor(h, one, bd, bp, one, pl.yd, yp); err != nil {
					return err
				}
			}
			if relu {
				return cudnn.ActivationForward(h, d.dnn.relu, one, pl.yd, yp, zero, pl.yd, yp)
			}
			return nil
		})
	})
}

// Conv2DBackwardData computes dx from dy and w with cuDNN. It implements
// [backend.Convolver].
func (dev *Device) Conv2DBackwardData(s backend.Stream, dx, dy, w backend.View, p backend.Conv2DParams) error {
	const what = "conv2d backward data"
	d, err := dev.dnnBegin(s, what, checkConv(dx, w, dy, p, [3]string{"dx", "w", "dy"}))
	if err != nil {
		return err
	}
	key, why := convTakes(dx, w, dy, p)
	if why != "" {
		return d.dnnFallback(what, errors.New(why))
	}
	var ptrs [3]cuda.DevicePtr
	for i, v := range []backend.View{dx, w, dy} {
		if ptrs[i], err = d.ptrOf(what, v); err != nil {
			return err
		}
	}
	return d.dnnRun(what, func(h cudnn.Handle) error {
		pl, err := d.convPlan(key)
		if err != nil {
			return err
		}
		if d.graphConv(h, key, dirData, ptrs) {
			return nil
		}
		ak, err := d.algorithms(h, pl, key, dirData, ptrs)
		if err != nil {
			return err
		}
		return d.runAlgorithms(pl, ak, func(c candidate, ws cuda.DevicePtr) error {
			return cudnn.ConvolutionBackwardData(h, one, pl.wd, ptrs[1], pl.yd, ptrs[2], pl.cd, cudnn.BwdDataAlgo(c.algo),
				ws, c.ws, zero, pl.xd, ptrs[0])
		})
	})
}

var _ backend.ConvAccumulator = (*Device)(nil)

// Conv2DBackwardDataAccumulate computes dx += the gradient from dy and w,
// through cuDNN's graph API with the operation's beta at 1 (its plan kept
// apart from the overwriting one's; under benchmark mode timed on a
// scratch dx). Where the graph API has no plan for it, it returns an error
// wrapping [backend.ErrNotImplemented] and dx is unchanged: the legacy
// path's algorithm search would overwrite dx. It implements
// [backend.ConvAccumulator].
func (dev *Device) Conv2DBackwardDataAccumulate(s backend.Stream, dx, dy, w backend.View, p backend.Conv2DParams) error {
	const what = "conv2d backward data (accumulate)"
	d, err := dev.dnnBegin(s, what, checkConv(dx, w, dy, p, [3]string{"dx", "w", "dy"}))
	if err != nil {
		return err
	}
	key, why := convTakes(dx, w, dy, p)
	if why != "" {
		return fmt.Errorf("cuda: %s: %s: %w", what, why, backend.ErrNotImplemented)
	}
	var ptrs [3]cuda.DevicePtr
	for i, v := range []backend.View{dx, w, dy} {
		if ptrs[i], err = d.ptrOf(what, v); err != nil {
			return err
		}
	}
	return d.dnnRun(what, func(h cudnn.Handle) error {
		if d.graphConvBeta(h, key, dirData, ptrs, true) {
			return nil
		}
		return fmt.Errorf("cuda: %s: no graph plan adds to dx here: %w", what, backend.ErrNotImplemented)
	})
}

// Conv2DBackwardFilter computes dw from dy and x with cuDNN, and db when it
// is not the zero View: the sum of dy over N, H and W, by the device's
// reduction kernel (as PyTorch sums it, accumulating in float32 for the
// 16-bit floats), since cuDNN 9's cudnnConvolutionBackwardBias answers
// CUDNN_STATUS_NOT_SUPPORTED for bfloat16. It implements
// [backend.Convolver].
func (dev *Device) Conv2DBackwardFilter(s backend.Stream, dw, db, dy, x backend.View, p backend.Conv2DParams) error {
	const what = "conv2d backward filter"
	d, err := dev.dnnBegin(s, what, checkConv(x, dw, dy, p, [3]string{"x", "dw", "dy"}))
	if err != nil {
		return err
	}
	key, why := convTakes(x, dw, dy, p)
	hasBias := db.Buf != nil
	if why == "" && hasBias && !vectorTakes(db, key.w[0], dy.DType) {
		why = fmt.Sprintf("a bias gradient of shape %v and dtype %s, not a contiguous [%d] of %s", db.Shape, db.DType, key.w[0], dy.DType)
	}
	if why != "" {
		return d.dnnFallback(what, errors.New(why))
	}
	var ptrs [4]cuda.DevicePtr
	for i, v := range []backend.View{x, dw, dy, db} {
		if i == 3 && !hasBias {
			break
		}
		if ptrs[i], err = d.ptrOf(what, v); err != nil {
			return err
		}
	}
	err = d.dnnRun(what, func(h cudnn.Handle) error {
		pl, err := d.convPlan(key)
		if err != nil {
			return err
		}
		if d.graphConv(h, key, dirFilter, [3]cuda.DevicePtr{ptrs[0], ptrs[1], ptrs[2]}) {
			return nil
		}
		ak, err := d.algorithms(h, pl, key, dirFilter, [3]cuda.DevicePtr{ptrs[0], ptrs[1], ptrs[2]})
		if err != nil {
			return err
		}
		return d.runAlgorithms(pl, ak, func(c candidate, ws cuda.DevicePtr) error {
			return cudnn.ConvolutionBackwardFilter(h, one, pl.xd, ptrs[0], pl.yd, ptrs[2], pl.cd, cudnn.BwdFilterAlgo(c.algo),
				ws, c.ws, zero, pl.wd, ptrs[1])
		})
	})
	if err != nil || !hasBias {
		return err
	}
	if err := dev.Reduce(s, backend.Sum, biasGradView(db, key.w[0]), dy, []int{0, 2, 3}); err != nil {
		return fmt.Errorf("cuda: cuda:%d: %s: bias gradient: %w", d.index, what, err)
	}
	return nil
}

// biasGradView returns the contiguous [o] view db as the [1, o, 1, 1]
// destination of a sum of dy over N, H and W.
func biasGradView(db backend.View, o int) backend.View {
	return backend.View{Buf: db.Buf, DType: db.DType, Shape: []int{1, o, 1, 1}, Strides: []int{o, 1, 1, 1}, Offset: db.Offset}
}

// ConvChoice is the algorithm a device runs for one convolution direction,
// as chosen and cached: what a test or a profile prints to say which path
// computed a result.
type ConvChoice struct {
	Direction string // "forward", "backward data" or "backward filter"
	DType     backend.DType
	// X, W and Y are the shapes of the input, the filter and the output
	// (or of their gradients), with their layouts ("NCHW" or "NHWC").
	X, W, Y       [4]int
	LX, LW, LY    string
	Params        backend.Conv2DParams
	TF32          bool   // TF32 allowed for float32
	Benchmark     bool   // chosen by a timed search, not the heuristics
	Deterministic bool   // deterministic algorithms only
	Algo          int32  // cudnnConvolution*Algo_t; -1 for none (the fallback)
	Math          string // the math type it runs under
	Workspace     uint64 // bytes
}

// String describes the choice on one line.
func (c ConvChoice) String() string {
	mode := "heuristic"
	if c.Benchmark {
		mode = "benchmark"
	}
	if c.Deterministic {
		mode += ", deterministic"
	}
	algo := fmt.Sprintf("algo %d, %s math, %d bytes of workspace", c.Algo, c.Math, c.Workspace)
	if c.Algo < 0 {
		algo = "no algorithm (the fallback)"
	}
	return fmt.Sprintf("%s %s x %v %s, w %v %s, y %v %s, stride %v padding %v dilation %v groups %d, tf32=%v (%s): %s",
		c.Direction, c.DType, c.X, c.LX, c.W, c.LW, c.Y, c.LY, c.Params.Stride, c.Params.Padding, c.Params.Dilation, c.Params.Groups,
		c.TF32, mode, algo)
}

// mathName names a cuDNN math type.
func mathName(m cudnn.MathType) string {
	switch m {
	case cudnn.DefaultMath:
		return "default (TF32 for float32)"
	case cudnn.TensorOpMath:
		return "tensor op"
	case cudnn.TensorOpMathAllowConversion:
		return "tensor op with conversion"
	case cudnn.FMAMath:
		return "FMA"
	}
	return fmt.Sprintf("math type %d", m)
}

// CuDNNConvChoices returns the convolution algorithms the device has
// chosen so far, one per shape, layout, dtype, parameters, direction and
// mode, in no particular order; empty without cuDNN.
func (dev *Device) CuDNNConvChoices() []ConvChoice {
	st := &dev.dnn
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []ConvChoice
	for key, pl := range st.convs {
		for ak, cands := range pl.algos {
			c := ConvChoice{Direction: ak.dir.String(), DType: key.dt, X: key.x, W: key.w, Y: key.y,
				LX: key.lx.String(), LW: key.lw.String(), LY: key.ly.String(), Params: key.p, TF32: key.tf32,
				Benchmark: ak.bench, Deterministic: ak.det, Algo: -1}
			if len(cands) > 0 {
				c.Algo, c.Math, c.Workspace = cands[0].algo, mathName(cands[0].math), cands[0].ws
			}
			out = append(out, c)
		}
	}
	return out
}
