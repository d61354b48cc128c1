package cuda

import (
	"errors"
	"fmt"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/cudnn"
)

// Pooling and batch normalization through cuDNN (see cudnn.go).

// poolKey identifies a pooling for the descriptor cache: the input x (and
// its gradient), the output y (and its gradient), with their layouts (0
// for the gradients of a forward pass).
type poolKey struct {
	dt               backend.DType
	x, y             [4]int
	lx, ly, ldx, ldy layout
	p                backend.Pool2DParams
	det              bool
}

type poolPlan struct {
	xd, yd, dxd, dyd cudnn.TensorDesc
	pd               cudnn.PoolingDesc
}

func (pl *poolPlan) destroy() {
	for _, t := range []cudnn.TensorDesc{pl.xd, pl.yd, pl.dxd, pl.dyd} {
		if t != 0 {
			cudnn.DestroyTensorDescriptor(t)
		}
	}
	if pl.pd != 0 {
		cudnn.DestroyPoolingDescriptor(pl.pd)
	}
}

// checkPool checks the geometry of a pooling: x [N, C, H, W] and y [N, C,
// OH, OW] of one dtype, with the output size that p gives.
func checkPool(x, y backend.View, p backend.Pool2DParams) error {
	for i, v := range []backend.View{x, y} {
		if len(v.Shape) != 4 || len(v.Strides) != 4 {
			return fmt.Errorf("%s has shape %v (strides %v): want 4 dimensions", [2]string{"x", "y"}[i], v.Shape, v.Strides)
		}
	}
	if x.DType != y.DType {
		return fmt.Errorf("x and y are %s and %s: want one dtype", x.DType, y.DType)
	}
	if p.Mode != backend.MaxPool && p.Mode != backend.AvgPool {
		return fmt.Errorf("pooling mode %d is neither max (%d) nor average (%d)", p.Mode, backend.MaxPool, backend.AvgPool)
	}
	oh := backend.ConvOutputSize(x.Shape[2], p.Kernel[0], p.Stride[0], p.Padding[0], 1)
	ow := backend.ConvOutputSize(x.Shape[3], p.Kernel[1], p.Stride[1], p.Padding[1], 1)
	if p.Kernel[0] < 1 || p.Kernel[1] < 1 || p.Padding[0] < 0 || p.Padding[1] < 0 || oh < 0 || ow < 0 {
		return fmt.Errorf("a %v window with stride %v and padding %v does not fit a %dx%d input", p.Kernel, p.Stride, p.Padding, x.Shape[2], x.Shape[3])
	}
	if want := []int{x.Shape[0], x.Shape[1], oh, ow}; !equalInts(y.Shape, want) {
		return fmt.Errorf("y has shape %v: want %v", y.Shape, want)
	}
	return nil
}

// sameShape checks that a gradient has the shape and dtype of its value.
func sameShape(name string, g, v backend.View) error {
	if !equalInts(g.Shape, v.Shape) || g.DType != v.DType {
		return fmt.Errorf("%s is %s %v: want %s %v", name, g.DType, g.Shape, v.DType, v.Shape)
	}
	return nil
}

// dnnViews resolves views for cuDNN: their sizes, layouts (one for all
// when every view is packed in it; else a view packed both ways takes the
// first view's) and addresses.
// why says what cuDNN lacks when it cannot take them.
func (d *queue) dnnViews(what string, vs ...backend.View) (s [][4]int, ls []layout, ptrs []cuda.DevicePtr, why string, err error) {
	if _, ok := dnnType(vs[0].DType); !ok {
		return nil, nil, nil, fmt.Sprintf("no cuDNN path for %s", vs[0].DType), nil
	}
	s, ls, ptrs = make([][4]int, len(vs)), make([]layout, len(vs)), make([]cuda.DevicePtr, len(vs))
	for i, v := range vs {
		var ok bool
		if s[i], ls[i], ok = shape4(v); !ok {
			return nil, nil, nil, "an empty view, one beyond 2^31 elements, or one neither contiguous (NCHW) nor channels-last (NHWC)", nil
		}
	}
	// One layout for all when the memory allows it (see pickLayouts).
	common := nchw | nhwc
	for _, l := range ls {
		common &= l
	}
	pref := ls[0].pick()
	if common != 0 {
		pref = common.pick()
	}
	for i := range ls {
		if ls[i]&pref != 0 {
			ls[i] = pref
		} else {
			ls[i] = ls[i].pick()
		}
		if ptrs[i], err = d.ptrOf(what, vs[i]); err != nil {
			return nil, nil, nil, "", err
		}
	}
	return s, ls, ptrs, "", nil
}

// poolPlan returns the cached plan of key, creating it on first use. The
// cuDNN lock is held.
func (d *queue) poolPlan(key poolKey) (*poolPlan, error) {
	st := &d.dnn
	if pl, ok := st.pools[key]; ok {
		return pl, nil
	}
	if len(st.pools) >= maxDNNPlans {
		for k, pl := range st.pools {
			pl.destroy()
			delete(st.pools, k)
		}
	}
	t, _ := dnnType(key.dt)
	pl := &poolPlan{}
	ok := false
	defer func() {
		if !ok {
			pl.destroy()
		}
	}()
	var err error
	for _, td := range []struct {
		d *cudnn.TensorDesc
		s [4]int
		l layout
	}{{&pl.xd, key.x, key.lx}, {&pl.yd, key.y, key.ly}, {&pl.dxd, key.x, key.ldx}, {&pl.dyd, key.y, key.ldy}} {
		if td.l == 0 {
			continue
		}
		if *td.d, err = newTensorDesc(t, td.s, td.l); err != nil {
			return nil, err
		}
	}
	if pl.pd, err = cudnn.CreatePoolingDescriptor(); err != nil {
		return nil, err
	}
	mode := cudnn.PoolingMax
	switch {
	case key.p.Mode == backend.AvgPool && key.p.CountIncludePad:
		mode = cudnn.PoolingAvgIncludePadding
	case key.p.Mode == backend.AvgPool:
		mode = cudnn.PoolingAvgExcludePadding
	case key.det:
		mode = cudnn.PoolingMaxDeterministic
	}
	p := key.p
	if err := cudnn.SetPooling2dDescriptor(pl.pd, mode, cudnn.PropagateNaN, p.Kernel[0], p.Kernel[1],
		p.Padding[0], p.Padding[1], p.Stride[0], p.Stride[1]); err != nil {
		return nil, err
	}
	ok = true
	st.pools[key] = pl
	return pl, nil
}

// Pool2D computes y from x: channels-last tensors with pool.cu's kernels
// (pool.go), others with cuDNN's pooling (NaN propagating, as PyTorch's
// max pooling does). It implements [backend.Pooler].
func (dev *Device) Pool2D(s backend.Stream, y, x backend.View, p backend.Pool2DParams) error {
	const what = "pool2d"
	check := checkPool(x, y, p)
	if check == nil && takesPoolNHWC(x, y, p) {
		d, err := dev.begin(s, what, nil)
		if err != nil {
			return err
		}
		if err := d.pool2DNHWC(what, y, x, p); !errors.Is(err, errPoolKernels) {
			return err
		}
	}
	d, err := dev.dnnBegin(s, what, check)
	if err != nil {
		return err
	}
	sz, ls, ptrs, why, err := d.dnnViews(what, x, y)
	if err != nil {
		return err
	}
	if why != "" {
		return d.dnnFallback(what, errors.New(why))
	}
	key := poolKey{dt: x.DType, x: sz[0], y: sz[1], lx: ls[0], ly: ls[1], p: p, det: cudnnSettings.Load()&dnnDeterministic != 0}
	return d.dnnRun(what, func(h cudnn.Handle) error {
		pl, err := d.poolPlan(key)
		if err != nil {
			return err
		}
		return cudnn.PoolingForward(h, pl.pd, one, pl.xd, ptrs[0], zero, pl.yd, ptrs[1])
	})
}

// Pool2DBackward computes dx from dy, x and y, with pool.cu's kernels
// where Pool2D takes them, else with cuDNN. It implements
// [backend.Pooler].
func (dev *Device) Pool2DBackward(s backend.Stream, dx, dy, x, y backend.View, p backend.Pool2DParams) error {
	const what = "pool2d backward"
	check := checkPool(x, y, p)
	if check == nil {
		check = errors.Join(sameShape("dx", dx, x), sameShape("dy", dy, y))
	}
	if check == nil && dx.DType == x.DType && dy.DType == x.DType && takesPoolNHWC(x, y, p, dx, dy) {
		d, err := dev.begin(s, what, nil)
		if err != nil {
			return err
		}
		if err := d.pool2DBackwardNHWC(what, dx, dy, x, y, p); !errors.Is(err, errPoolKernels) {
			return err
		}
	}
	d, err := dev.dnnBegin(s, what, check)
	if err != nil {
		return err
	}
	sz, ls, ptrs, why, err := d.dnnViews(what, x, y, dx, dy)
	if err != nil {
		return err
	}
	if why != "" {
		return d.dnnFallback(what, errors.New(why))
	}
	key := poolKey{dt: x.DType, x: sz[0], y: sz[1], lx: ls[0], ly: ls[1], ldx: ls[2], ldy: ls[3], p: p,
		det: cudnnSettings.Load()&dnnDeterministic != 0}
	return d.dnnRun(what, func(h cudnn.Handle) error {
		pl, err := d.poolPlan(key)
		if err != nil {
			return err
		}
		return cudnn.PoolingBackward(h, pl.pd, one, pl.yd, ptrs[1], pl.dyd, ptrs[3], pl.xd, ptrs[0], zero, pl.dxd, ptrs[2])
	})
}

// bnKey identifies a batch normalization for the descriptor cache: the
// shape of x and the layouts of the views of the call (x, then y or dy,
// then dx; 0 for none).
type bnKey struct {
	dt   backend.DType
	x    [4]int
	l    [3]layout
	mode cudnn.BatchNormMode
}

type bnPlan struct {
	d   [3]cudnn.TensorDesc // x, y or dy, dx
	bnd cudnn.TensorDesc    // [1, C, 1, 1] float, derived from x's
}

func (pl *bnPlan) destroy() {
	for _, t := range append(pl.d[:], pl.bnd) {
		if t != 0 {
			cudnn.DestroyTensorDescriptor(t)
		}
	}
}

// bnPlan returns the cached plan of key, creating it on first use. The
// cuDNN lock is held.
func (d *queue) bnPlan(key bnKey) (*bnPlan, error) {
	st := &d.dnn
	if pl, ok := st.bns[key]; ok {
		return pl, nil
	}
	if len(st.bns) >= maxDNNPlans {
		for k, pl := range st.bns {
			pl.destroy()
			delete(st.bns, k)
		}
	}
	t, _ := dnnType(key.dt)
	pl := &bnPlan{}
	ok := false
	defer func() {
		if !ok {
			pl.destroy()
		}
	}()
	var err error
	for i, l := range key.l {
		if l == 0 {
			continue
		}
		if pl.d[i], err = newTensorDesc(t, key.x, l); err != nil {
			return nil, err
		}
	}
	if pl.bnd, err = cudnn.CreateTensorDescriptor(); err != nil {
		return nil, err
	}
	if err := cudnn.DeriveBNTensorDescriptor(pl.bnd, pl.d[0], key.mode); err != nil {
		return nil, err
	}
	ok = true
	st.bns[key] = pl
	return pl, nil
}

// named is a view with its name, for messages.
type named struct {
	name string
	v    backend.View
	opt  bool // may be the zero View
}

// checkBN checks x [N, C, H, W], the views of its shape and dtype (y, dy,
// dx) and the per-channel views ([C] each; the zero View allowed for
// those marked optional).
func checkBN(x backend.View, same []named, channel []named) error {
	if len(x.Shape) != 4 || len(x.Strides) != 4 {
		return fmt.Errorf("x has shape %v (strides %v): want 4 dimensions", x.Shape, x.Strides)
	}
	for _, s := range same {
		if err := sameShape(s.name, s.v, x); err != nil {
			return err
		}
	}
	for _, c := range channel {
		if c.v.Buf == nil && c.opt {
			continue
		}
		if len(c.v.Shape) != 1 || c.v.Shape[0] != x.Shape[1] {
			return fmt.Errorf("%s has shape %v: want [%d], one per channel", c.name, c.v.Shape, x.Shape[1])
		}
	}
	return nil
}

// channelPtrs resolves the per-channel views, which cuDNN takes as
// contiguous float32; why says otherwise. A zero View is address 0.
func (d *queue) channelPtrs(what string, vs ...backend.View) (ptrs []cuda.DevicePtr, why string, err error) {
	ptrs = make([]cuda.DevicePtr, len(vs))
	for i, v := range vs {
		if v.Buf == nil {
			continue
		}
		if v.DType != backend.Float32 || !v.IsContiguous() {
			return nil, fmt.Sprintf("a per-channel view of %s %v (strides %v), not contiguous float32", v.DType, v.Shape, v.Strides), nil
		}
		if ptrs[i], err = d.ptrOf(what, v); err != nil {
			return nil, "", err
		}
	}
	return ptrs, "", nil
}

// bnMode is PyTorch's choice: the persistent spatial kernels for a
// channels-last input in training and its backward pass, else spatial.
func bnMode(l layout, training bool) cudnn.BatchNormMode {
	if training && l == nhwc {
		return cudnn.BatchNormSpatialPersistent
	}
	return cudnn.BatchNormSpatial
}

// BatchNormTrain normalizes x with the batch's statistics through
// cudnnBatchNormalizationForwardTraining, which saves the mean and inverse
// standard deviation and updates the running statistics (with the unbiased
// variance) in place; runMean and runVar may be the zero View. Channels-last
// tensors take the kernels of batchnorm.go instead, with the same results.
// It implements [backend.BatchNormer].
func (dev *Device) BatchNormTrain(s backend.Stream, y, x, scale, bias, runMean, runVar, saveMean, saveInvStd backend.View, momentum, eps float64) error {
	const what = "batch norm"
	check := checkBN(x, []named{{"y", y, false}},
		[]named{{"scale", scale, false}, {"bias", bias, false}, {"runMean", runMean, true}, {"runVar", runVar, true},
			{"saveMean", saveMean, false}, {"saveInvStd", saveInvStd, false}})
	if check == nil && (runMean.Buf == nil) != (runVar.Buf == nil) {
		return fmt.Errorf("cuda: %s: runMean and runVar must both be given or both be the zero View", what)
	}
	if check == nil && x.Shape[0]*x.Shape[2]*x.Shape[3] >= 2 &&
		takesNHWC(x, []backend.View{y}, []backend.View{scale, bias, runMean, runVar, saveMean, saveInvStd}) {
		d, err := dev.begin(s, what, nil)
		if err != nil {
			return err
		}
		return d.batchNormTrainNHWC(what, y, x, backend.View{}, scale, bias, runMean, runVar, saveMean, saveInvStd, backend.View{}, momentum, eps, false)
	}
	d, err := dev.dnnBegin(s, what, check)
	if err != nil {
		return err
	}
	sz, ls, ptrs, why, err := d.dnnViews(what, x, y)
	if err != nil {
		return err
	}
	if why == "" && x.Shape[0]*x.Shape[2]*x.Shape[3] < 2 {
		why = "one value per channel: no variance to normalize by"
	}
	var ch []cuda.DevicePtr
	if why == "" {
		if ch, why, err = d.channelPtrs(what, scale, bias, runMean, runVar, saveMean, saveInvStd); err != nil {
			return err
		}
	}
	if why != "" {
		return d.dnnFallback(what, errors.New(why))
	}
	key := bnKey{dt: x.DType, x: sz[0], l: [3]layout{ls[0], ls[1]}, mode: bnMode(ls[0], true)}
	return d.dnnRun(what, func(h cudnn.Handle) error {
		pl, err := d.bnPlan(key)
		if err != nil {
			return err
		}
		return cudnn.BatchNormalizationForwardTraining(h, key.mode, one, zero, pl.d[0], ptrs[0], pl.d[1], ptrs[1], pl.bnd,
			ch[0], ch[1], momentum, ch[2], ch[3], eps, ch[4], ch[5])
	})
}

// BatchNormInfer normalizes x with the running statistics through
// cudnnBatchNormalizationForwardInference, or for channels-last tensors
// the kernels of batchnorm.go. It implements [backend.BatchNormer].
func (dev *Device) BatchNormInfer(s backend.Stream, y, x, scale, bias, runMean, runVar backend.View, eps float64) error {
	const what = "batch norm inference"
	check := checkBN(x, []named{{"y", y, false}},
		[]named{{"scale", scale, false}, {"bias", bias, false}, {"runMean", runMean, false}, {"runVar", runVar, false}})
	if check == nil && takesNHWC(x, []backend.View{y}, []backend.View{scale, bias, runMean, runVar}) {
		d, err := dev.begin(s, what, nil)
		if err != nil {
			return err
		}
		return d.batchNormInferNHWC(what, y, x, backend.View{}, scale, bias, runMean, runVar, eps, false)
	}
	d, err := dev.dnnBegin(s, what, check)
	if err != nil {
		return err
	}
	sz, ls, ptrs, why, err := d.dnnViews(what, x, y)
	if err != nil {
		return err
	}
	var ch []cuda.DevicePtr
	if why == "" {
		if ch, why, err = d.channelPtrs(what, scale, bias, runMean, runVar); err != nil {
			return err
		}
	}
	if why != "" {
		return d.dnnFallback(what, errors.New(why))
	}
	key := bnKey{dt: x.DType, x: sz[0], l: [3]layout{ls[0], ls[1]}, mode: bnMode(ls[0], false)}
	return d.dnnRun(what, func(h cudnn.Handle) error {
		pl, err := d.bnPlan(key)
		if err != nil {
			return err
		}
		return cudnn.BatchNormalizationForwardInference(h, key.mode, one, zero, pl.d[0], ptrs[0], pl.d[1], ptrs[1], pl.bnd,
			ch[0], ch[1], ch[2], ch[3], eps)
	})
}

// BatchNormBackward computes dx, dscale and dbias through
// cudnnBatchNormalizationBackward, or for channels-last tensors the kernels
// of batchnorm.go, from the statistics that BatchNormTrain saved. It
// implements [backend.BatchNormer].
func (dev *Device) BatchNormBackward(s backend.Stream, dx, dscale, dbias, dy, x, scale, saveMean, saveInvStd backend.View, eps float64) error {
	const what = "batch norm backward"
	check := checkBN(x, []named{{"dx", dx, false}, {"dy", dy, false}},
		[]named{{"dscale", dscale, false}, {"dbias", dbias, false}, {"scale", scale, false},
			{"saveMean", saveMean, false}, {"saveInvStd", saveInvStd, false}})
	if check == nil && takesNHWC(x, []backend.View{dy, dx}, []backend.View{dscale, dbias, scale, saveMean, saveInvStd}) {
		d, err := dev.begin(s, what, nil)
		if err != nil {
			return err
		}
		return d.batchNormBackwardNHWC(what, dx, backend.View{}, dscale, dbias, dy, backend.View{}, backend.View{}, x, scale, saveMean, saveInvStd)
	}
	d, err := dev.dnnBegin(s, what, check)
	if err != nil {
		return err
	}
	sz, ls, ptrs, why, err := d.dnnViews(what, x, dy, dx)
	if err != nil {
		return err
	}
	var ch []cuda.DevicePtr
	if why == "" {
		if ch, why, err = d.channelPtrs(what, scale, dscale, dbias, saveMean, saveInvStd); err != nil {
			return err
		}
	}
	if why != "" {
		return d.dnnFallback(what, errors.New(why))
	}
	key := bnKey{dt: x.DType, x: sz[0], l: [3]layout{ls[0], ls[1], ls[2]}, mode: bnMode(ls[0], true)}
	return d.dnnRun(what, func(h cudnn.Handle) error {
		pl, err := d.bnPlan(key)
		if err != nil {
			return err
		}
		return cudnn.BatchNormalizationBackward(h, key.mode, one, zero, one, zero, pl.d[0], ptrs[0], pl.d[1], ptrs[1],
			pl.d[2], ptrs[2], pl.bnd, ch[0], ch[1], ch[2], eps, ch[3], ch[4])
	})
}
