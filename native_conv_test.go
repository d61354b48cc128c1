package vram

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/cuda"
)

// A "nativetest" device is the CPU with the optional interfaces of
// convolutional networks (backend.Convolver, Pooler, BatchNormer)
// implemented by the direct references of conv_test.go, on float32 only.
// It checks the contract the root package keeps when it calls them: the
// views are dense NCHW or channels-last, x and y in one format. It lets
// the native path and its fallbacks run without a GPU.

var nativeTest = Device{Kind: "nativetest"}

// nativeMode selects what the nativetest kernels do.
var (
	nativeForwardOff  atomic.Bool  // forward kernels return ErrNotImplemented
	nativeBackwardOff atomic.Bool  // backward kernels return ErrNotImplemented
	nativeTapCalls    atomic.Int64 // max pooling calls that kept or read taps
	nativeCalls       atomic.Int64 // kernels that ran
)

type nativeBackend struct{}

func (nativeBackend) Name() string     { return "nativetest" }
func (nativeBackend) DeviceCount() int { return 1 }
func (nativeBackend) Device(i int) (backend.Device, error) {
	b, _ := backend.Lookup("cpu")
	d, err := b.Device(0)
	if err != nil {
		return nil, err
	}
	return &nativeDevice{Device: d}, nil
}

func init() { backend.Register(nativeBackend{}) }

type nativeDevice struct{ backend.Device }

var errLayout = errors.New("nativetest: views not dense in one format")

// layout returns the format v is dense in.
func layout(v backend.View) (MemoryFormat, bool) {
	if len(v.Shape) != 4 {
		return 0, false
	}
	if isDense(v.Shape, v.Strides, ChannelsLast) && stridesLikeChannelsLast(v.Shape, v.Strides) {
		return ChannelsLast, true
	}
	if isDense(v.Shape, v.Strides, ContiguousFormat) {
		return ContiguousFormat, true
	}
	return 0, false
}

// sameLayout checks that the 4-D views share a dense format.
func sameLayout(vs ...backend.View) error {
	var f0 MemoryFormat
	for i, v := range vs {
		f, ok := layout(v)
		if !ok || i > 0 && f != f0 && !(isDense(v.Shape, v.Strides, f0)) {
			return fmt.Errorf("%w: view %d has shape %v, strides %v", errLayout, i, v.Shape, v.Strides)
		}
		if i == 0 {
			f0 = f
		}
	}
	return nil
}

// read returns the elements of a float32 view in row-major order.
func read(v backend.View) []float64 {
	raw := v.Buf.(backend.HostBuffer).Host()
	out := make([]float64, v.NumElements())
	idx := make([]int, len(v.Shape))
	for i := range out {
		off := v.Offset
		for d, k := range idx {
			off += k * v.Strides[d]
		}
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*off:])))
		for d := len(idx) - 1; d >= 0; d-- {
			if idx[d]++; idx[d] < v.Shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}

// write stores row-major vals into a float32 view.
func write(v backend.View, vals []float64) {
	raw := v.Buf.(backend.HostBuffer).Host()
	idx := make([]int, len(v.Shape))
	for i := range vals {
		off := v.Offset
		for d, k := range idx {
			off += k * v.Strides[d]
		}
		binary.LittleEndian.PutUint32(raw[4*off:], math.Float32bits(float32(vals[i])))
		for d := len(idx) - 1; d >= 0; d-- {
			if idx[d]++; idx[d] < v.Shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}

func f32(vs ...backend.View) bool {
	for _, v := range vs {
		if v.Buf != nil && v.DType != backend.Float32 {
			return false
		}
	}
	return true
}

func rootParams(p backend.Conv2DParams) Conv2dParams {
	return Conv2dParams{Stride: p.Stride, Padding: p.Padding, Dilation: p.Dilation, Groups: p.Groups}
}

func (d *nativeDevice) begin(s backend.Stream, forward bool, vs ...backend.View) error {
	if !f32(vs...) || forward && nativeForwardOff.Load() || !forward && nativeBackwardOff.Load() {
		return fmt.Errorf("nativetest: %w", backend.ErrNotImplemented)
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	nativeCalls.Add(1)
	return nil
}

func (d *nativeDevice) Conv2D(s backend.Stream, y, x, w, bias backend.View, p backend.Conv2DParams, relu bool) error {
	if err := d.begin(s, true, y, x, w, bias); err != nil {
		return err
	}
	if err := sameLayout(y, x, w); err != nil {
		return err
	}
	var b []float64
	if bias.Buf != nil {
		b = read(bias)
	}
	out, _ := refConv2d(read(x), x.Shape, read(w), w.Shape, b, rootParams(p))
	if relu {
		for i := range out {
			out[i] = math.Max(out[i], 0)
		}
	}
	write(y, out)
	return nil
}

func (d *nativeDevice) Conv2DBackwardData(s backend.Stream, dx, dy, w backend.View, p backend.Conv2DParams) error {
	if err := d.begin(s, false, dx, dy, w); err != nil {
		return err
	}
	if err := sameLayout(dx, dy, w); err != nil {
		return err
	}
	rp := rootParams(p)
	for i := range 2 {
		full := (dy.Shape[2+i]-1)*rp.Stride[i] - 2*rp.Padding[i] + rp.Dilation[i]*(w.Shape[2+i]-1) + 1
		rp.OutputPadding[i] = dx.Shape[2+i] - full
	}
	out, _ := refConvTranspose2d(read(dy), dy.Shape, read(w), w.Shape, nil, rp)
	write(dx, out)
	return nil
}

// nativeAccumulations counts the Conv2DBackwardDataAccumulate calls that
// added in place.
var nativeAccumulations atomic.Int64

func (d *nativeDevice) Conv2DBackwardDataAccumulate(s backend.Stream, dx, dy, w backend.View, p backend.Conv2DParams) error {
	before := read(dx)
	if err := d.Conv2DBackwardData(s, dx, dy, w, p); err != nil {
		return err
	}
	sum := read(dx)
	for i := range sum {
		sum[i] += before[i]
	}
	write(dx, sum)
	nativeAccumulations.Add(1)
	return nil
}

func (d *nativeDevice) Conv2DBackwardFilter(s backend.Stream, dw, db, dy, x backend.View, p backend.Conv2DParams) error {
	if err := d.begin(s, false, dw, db, dy, x); err != nil {
		return err
	}
	if err := sameLayout(dw, dy, x); err != nil {
		return err
	}
	xs, gs := read(x), read(dy)
	n, c, h, wd := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	o, cg, kh, kw := dw.Shape[0], dw.Shape[1], dw.Shape[2], dw.Shape[3]
	oh, ow := dy.Shape[2], dy.Shape[3]
	og := o / p.Groups
	gw := make([]float64, o*cg*kh*kw)
	gb := make([]float64, o)
	for b := range n {
		for co := range o {
			for yy := range oh {
				for xx := range ow {
					g := gs[((b*o+co)*oh+yy)*ow+xx]
					gb[co] += g
					for ci := range cg {
						cin := co/og*cg + ci
						for i := range kh {
							iy := yy*p.Stride[0] - p.Padding[0] + i*p.Dilation[0]
							for j := range kw {
								ix := xx*p.Stride[1] - p.Padding[1] + j*p.Dilation[1]
								if iy >= 0 && iy < h && ix >= 0 && ix < wd {
									gw[((co*cg+ci)*kh+i)*kw+j] += g * xs[((b*c+cin)*h+iy)*wd+ix]
								}
							}
						}
					}
				}
			}
		}
	}
	write(dw, gw)
	if db.Buf != nil {
		write(db, gb)
	}
	return nil
}

func poolParamsOf(p backend.Pool2DParams) Pool2dParams {
	return Pool2dParams{Kernel: p.Kernel, Stride: p.Stride, Padding: p.Padding, ExcludePad: !p.CountIncludePad}
}

func (d *nativeDevice) Pool2D(s backend.Stream, y, x backend.View, p backend.Pool2DParams) error {
	if err := d.begin(s, true, y, x); err != nil {
		return err
	}
	if err := sameLayout(y, x); err != nil {
		return err
	}
	out, _ := refPool(read(x), x.Shape, poolParamsOf(p), p.Mode == backend.AvgPool)
	write(y, out)
	return nil
}

func (d *nativeDevice) Pool2DBackward(s backend.Stream, dx, dy, x, y backend.View, p backend.Pool2DParams) error {
	if err := d.begin(s, false, dx, dy, x, y); err != nil {
		return err
	}
	if err := sameLayout(dx, dy, x, y); err != nil {
		return err
	}
	xs, gs, ys := read(x), read(dy), read(y)
	h, w := x.Shape[2], x.Shape[3]
	oh, ow := dy.Shape[2], dy.Shape[3]
	gx := make([]float64, len(xs))
	for nc := range x.Shape[0] * x.Shape[1] {
		for yy := range oh {
			for xx := range ow {
				l := (nc*oh+yy)*ow + xx
				var in []int
				for i := range p.Kernel[0] {
					for j := range p.Kernel[1] {
						iy, ix := yy*p.Stride[0]-p.Padding[0]+i, xx*p.Stride[1]-p.Padding[1]+j
						if iy >= 0 && iy < h && ix >= 0 && ix < w {
							in = append(in, (nc*h+iy)*w+ix)
						}
					}
				}
				if p.Mode == backend.MaxPool {
					// The last NaN, else the first maximum, as PyTorch's
					// kernels pick.
					at := -1
					for _, k := range in {
						if math.IsNaN(ys[l]) && math.IsNaN(xs[k]) || !math.IsNaN(ys[l]) && at < 0 && xs[k] == ys[l] {
							at = k
						}
					}
					if at >= 0 {
						gx[at] += gs[l]
					}
					continue
				}
				div := float64(p.Kernel[0] * p.Kernel[1])
				if !p.CountIncludePad {
					div = float64(len(in))
				}
				for _, k := range in {
					gx[k] += gs[l] / div
				}
			}
		}
	}
	write(dx, gx)
	return nil
}

// byteOffsets returns the byte offsets of v's elements (one byte each), in
// row-major order of its shape.
func byteOffsets(v backend.View) []int {
	out := make([]int, v.NumElements())
	idx := make([]int, len(v.Shape))
	for i := range out {
		off := v.Offset
		for d, k := range idx {
			off += k * v.Strides[d]
		}
		out[i] = off
		for d := len(idx) - 1; d >= 0; d-- {
			if idx[d]++; idx[d] < v.Shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}

// MaxPool2DTaps is Pool2D keeping each maximum's tap, by pool.cu's rule: a
// window's last NaN, else its first largest value, else (all -Inf) its
// first tap inside the input.
func (d *nativeDevice) MaxPool2DTaps(s backend.Stream, y, taps, x backend.View, p backend.Pool2DParams) error {
	if p.Mode != backend.MaxPool || taps.DType != backend.Int8 {
		return fmt.Errorf("nativetest: %w", backend.ErrNotImplemented)
	}
	if err := d.begin(s, true, y, x); err != nil {
		return err
	}
	if err := sameLayout(y, x, taps); err != nil {
		return err
	}
	nativeTapCalls.Add(1)
	xs := read(x)
	h, w := x.Shape[2], x.Shape[3]
	oh, ow := y.Shape[2], y.Shape[3]
	out := make([]float64, y.NumElements())
	raw, offs := taps.Buf.(backend.HostBuffer).Host(), byteOffsets(taps)
	for nc := range x.Shape[0] * x.Shape[1] {
		for yy := range oh {
			for xx := range ow {
				l := (nc*oh+yy)*ow + xx
				best, at := math.Inf(-1), -1
				for i := range p.Kernel[0] {
					for j := range p.Kernel[1] {
						iy, ix := yy*p.Stride[0]-p.Padding[0]+i, xx*p.Stride[1]-p.Padding[1]+j
						if iy < 0 || iy >= h || ix < 0 || ix >= w {
							continue
						}
						if v := xs[(nc*h+iy)*w+ix]; at < 0 || v > best || math.IsNaN(v) {
							best, at = v, i*p.Kernel[1]+j
						}
					}
				}
				out[l] = best
				raw[offs[l]] = byte(at)
			}
		}
	}
	write(y, out)
	return nil
}

// MaxPool2DBackwardTaps gives each output's gradient to the input element
// at its tap.
func (d *nativeDevice) MaxPool2DBackwardTaps(s backend.Stream, dx, dy, taps backend.View, p backend.Pool2DParams) error {
	if p.Mode != backend.MaxPool || taps.DType != backend.Int8 {
		return fmt.Errorf("nativetest: %w", backend.ErrNotImplemented)
	}
	if err := d.begin(s, false, dx, dy); err != nil {
		return err
	}
	if err := sameLayout(dx, dy, taps); err != nil {
		return err
	}
	nativeTapCalls.Add(1)
	gs := read(dy)
	h, w := dx.Shape[2], dx.Shape[3]
	oh, ow := dy.Shape[2], dy.Shape[3]
	gx := make([]float64, dx.NumElements())
	raw, offs := taps.Buf.(backend.HostBuffer).Host(), byteOffsets(taps)
	for nc := range dx.Shape[0] * dx.Shape[1] {
		for yy := range oh {
			for xx := range ow {
				l := (nc*oh+yy)*ow + xx
				tap := int(raw[offs[l]])
				iy, ix := yy*p.Stride[0]-p.Padding[0]+tap/p.Kernel[1], xx*p.Stride[1]-p.Padding[1]+tap%p.Kernel[1]
				gx[(nc*h+iy)*w+ix] += gs[l]
			}
		}
	}
	write(dx, gx)
	return nil
}

// bnStats returns the per-channel mean and biased variance of x.
func bnStats(xs []float64, shape []int) (mean, vr []float64) {
	c, hw := shape[1], shape[2]*shape[3]
	cnt := float64(shape[0] * hw)
	mean, vr = make([]float64, c), make([]float64, c)
	for i, v := range xs {
		mean[(i/hw)%c] += v / cnt
	}
	for i, v := range xs {
		e := v - mean[(i/hw)%c]
		vr[(i/hw)%c] += e * e / cnt
	}
	return mean, vr
}

func (d *nativeDevice) BatchNormTrain(s backend.Stream, y, x, scale, bias, runMean, runVar, saveMean, saveInvStd backend.View, momentum, eps float64) error {
	if err := d.begin(s, true, y, x, scale, bias, runMean, runVar, saveMean, saveInvStd); err != nil {
		return err
	}
	if err := sameLayout(y, x); err != nil {
		return err
	}
	xs := read(x)
	mean, vr := bnStats(xs, x.Shape)
	c, hw := x.Shape[1], x.Shape[2]*x.Shape[3]
	cnt := float64(x.Shape[0] * hw)
	sc, bi, rm, rv := read(scale), read(bias), read(runMean), read(runVar)
	inv := make([]float64, c)
	for k := range c {
		inv[k] = 1 / math.Sqrt(vr[k]+eps)
		rm[k] = (1-momentum)*rm[k] + momentum*mean[k]
		rv[k] = (1-momentum)*rv[k] + momentum*vr[k]*cnt/(cnt-1)
	}
	out := make([]float64, len(xs))
	for i, v := range xs {
		k := (i / hw) % c
		out[i] = (v-mean[k])*inv[k]*sc[k] + bi[k]
	}
	write(y, out)
	write(runMean, rm)
	write(runVar, rv)
	write(saveMean, mean)
	write(saveInvStd, inv)
	return nil
}

func (d *nativeDevice) BatchNormInfer(s backend.Stream, y, x, scale, bias, runMean, runVar backend.View, eps float64) error {
	if err := d.begin(s, true, y, x, scale, bias, runMean, runVar); err != nil {
		return err
	}
	if err := sameLayout(y, x); err != nil {
		return err
	}
	xs := read(x)
	c, hw := x.Shape[1], x.Shape[2]*x.Shape[3]
	sc, bi, rm, rv := read(scale), read(bias), read(runMean), read(runVar)
	out := make([]float64, len(xs))
	for i, v := range xs {
		k := (i / hw) % c
		out[i] = (v-rm[k])/math.Sqrt(rv[k]+eps)*sc[k] + bi[k]
	}
	write(y, out)
	return nil
}

func (d *nativeDevice) BatchNormBackward(s backend.Stream, dx, dscale, dbias, dy, x, scale, saveMean, saveInvStd backend.View, eps float64) error {
	if err := d.begin(s, false, dx, dscale, dbias, dy, x, scale, saveMean, saveInvStd); err != nil {
		return err
	}
	if err := sameLayout(dx, dy, x); err != nil {
		return err
	}
	bnBackwardHost(read(dy), dx, dscale, dbias, x, scale, saveMean, saveInvStd)
	return nil
}

// bnBackwardHost writes batch norm's gradients from the output gradient gs.
func bnBackwardHost(gs []float64, dx, dscale, dbias, x, scale, saveMean, saveInvStd backend.View) {
	xs := read(x)
	c, hw := x.Shape[1], x.Shape[2]*x.Shape[3]
	cnt := float64(x.Shape[0] * hw)
	sc, mean, inv := read(scale), read(saveMean), read(saveInvStd)
	gsum, gxh := make([]float64, c), make([]float64, c)
	for i, v := range xs {
		k := (i / hw) % c
		gsum[k] += gs[i]
		gxh[k] += gs[i] * (v - mean[k]) * inv[k]
	}
	out := make([]float64, len(xs))
	for i, v := range xs {
		k := (i / hw) % c
		xh := (v - mean[k]) * inv[k]
		out[i] = sc[k] * inv[k] * (gs[i] - gsum[k]/cnt - xh*gxh[k]/cnt)
	}
	write(dx, out)
	write(dscale, gxh)
	write(dbias, gsum)
}

// addRelu sets y = max(0, y + r) (r may be the zero View).
func addRelu(y, r backend.View) {
	ys := read(y)
	var rs []float64
	if r.Buf != nil {
		rs = read(r)
	}
	for i := range ys {
		if rs != nil {
			ys[i] += rs[i]
		}
		ys[i] = max(0, ys[i])
	}
	write(y, ys)
}

func (d *nativeDevice) BatchNormTrainReLU(s backend.Stream, y, x, r, scale, bias, runMean, runVar, saveMean, saveInvStd backend.View, momentum, eps float64) error {
	if r.Buf != nil {
		if err := sameLayout(y, x, r); err != nil {
			return err
		}
	}
	if err := d.BatchNormTrain(s, y, x, scale, bias, runMean, runVar, saveMean, saveInvStd, momentum, eps); err != nil {
		return err
	}
	addRelu(y, r)
	return nil
}

func (d *nativeDevice) BatchNormInferReLU(s backend.Stream, y, x, r, scale, bias, runMean, runVar backend.View, eps float64) error {
	if r.Buf != nil {
		if err := sameLayout(y, x, r); err != nil {
			return err
		}
	}
	if err := d.BatchNormInfer(s, y, x, scale, bias, runMean, runVar, eps); err != nil {
		return err
	}
	addRelu(y, r)
	return nil
}

func (d *nativeDevice) BatchNormBackwardReLU(s backend.Stream, dx, dr, dscale, dbias, dy, y, x, scale, saveMean, saveInvStd backend.View, eps float64) error {
	if err := d.begin(s, false, dx, dscale, dbias, dy, y, x, scale, saveMean, saveInvStd); err != nil {
		return err
	}
	if err := sameLayout(dx, dy, y, x); err != nil {
		return err
	}
	gs, ys := read(dy), read(y)
	for i := range gs {
		if !(ys[i] > 0) {
			gs[i] = 0
		}
	}
	if dr.Buf != nil {
		if err := sameLayout(dr, x); err != nil {
			return err
		}
		write(dr, gs)
	}
	bnBackwardHost(gs, dx, dscale, dbias, x, scale, saveMean, saveInvStd)
	return nil
}

// deviceMode is one way a device serves an op: its native kernels on or
// off (noNativeConv), and for the nativetest device which of them answer.
type deviceMode struct {
	name              string
	native            bool // the device's interfaces are called
	forward, backward bool // the nativetest kernels that run rather than decline
}

// nativeModes are the ways the nativetest device serves an op.
var nativeModes = []deviceMode{
	{"native", true, true, true},
	{"native forward, composed backward", true, true, false},
	{"kernels decline", true, false, false},
	{"composed", false, false, false},
}

// onNativeTest compares f on the nativetest device, in each of its modes,
// with the CPU ([compareOn]). viaBackward says that f's forward pass is a
// backward kernel (a transposed convolution's), so that it runs natively
// only when those do.
func onNativeTest(t *testing.T, viaBackward bool, f func(xs []*Tensor) *Tensor, inputs ...*Tensor) {
	t.Helper()
	compareOn(t, nativeTest, nativeModes, viaBackward, tolerance{rel: 1e-4}, f, inputs...)
}

// tolerance is how far a device's result may be from the CPU's: element i
// within rel·(1+|want_i|) + prod·bound_i, where bound_i is the same
// element computed from the absolute values of the inputs and of the
// output gradient (for a convolution, the sum of |x·w| over its products:
// the scale of the rounding errors of its products). tf32 rounds the
// inputs and the output gradient to TF32 (10-bit mantissas, to nearest)
// before the CPU computes what to want, as tensor cores do to their
// operands, so that only the order of the float32 sums differs.
type tolerance struct {
	rel, prod float64
	tf32      bool
}

// roundTF32 returns v rounded to the nearest TF32 value (ties to even).
func roundTF32(v float64) float64 {
	b := math.Float32bits(float32(v))
	if e := b >> 23 & 0xff; e == 0xff {
		return v
	}
	b = (b + 0xfff + b>>13&1) &^ 0x1fff
	return float64(math.Float32frombits(b))
}

// mapValues returns a float64 tensor on the CPU of t's values in float32,
// each passed through fn.
func mapValues(t *Tensor, fn func(float64) float64) *Tensor {
	vals := t.Cast(Float32).To(CPU).Cast(Float64).Float64s()
	for i, v := range vals {
		vals[i] = fn(v)
	}
	return FromSlice(vals, t.Shape())
}

// compareOn runs f(inputs) in float32 on device d in each mode, with
// row-major and channels-last inputs, and on the CPU's composed path, and
// compares the outputs and the gradients of every input within tol. A
// failure names the mode, the layout and the largest error with its bound.
func compareOn(t *testing.T, d Device, modes []deviceMode, viaBackward bool, tol tolerance, f func(xs []*Tensor) *Tensor, inputs ...*Tensor) {
	t.Helper()
	type result struct{ out, grads [][]float64 }
	ident := func(v float64) float64 { return v }
	// run computes f on d from the inputs and output gradient each passed
	// through prep.
	run := func(d Device, cl bool, prep func(float64) float64) result {
		var r result
		var ins []*Tensor
		for _, in := range inputs {
			x := mapValues(in, prep).Cast(Float32).To(d)
			if cl && x.Dim() == 4 {
				x = x.Contiguous(ChannelsLast)
			}
			x = x.Detach().SetRequiresGrad(true)
			ins = append(ins, x)
		}
		y := f(ins)
		if y.Device() != d {
			t.Fatalf("output on %v, want %v", y.Device(), d)
		}
		if cl && y.Dim() == 4 && y.Size(1) > 1 && !y.IsContiguous(ChannelsLast) {
			t.Errorf("channels-last inputs gave output strides %v", y.Strides())
		}
		r.out = append(r.out, y.Cast(Float64).Float64s())
		g := mapValues(Randn(y.Shape(), Float32, WithGenerator(NewGenerator(99))), prep).Cast(Float32).To(d)
		y.Backward(Gradient(g))
		for _, in := range ins {
			r.grads = append(r.grads, in.Grad().Cast(Float64).Float64s())
		}
		return r
	}
	onCPU := func(prep func(float64) float64) result {
		noNativeConv.Store(true)
		defer noNativeConv.Store(false)
		return run(CPU, false, prep)
	}
	prep := ident
	if tol.tf32 {
		prep = roundTF32
	}
	want := onCPU(prep)
	var bound result
	if tol.prod > 0 {
		bound = onCPU(func(v float64) float64 { return math.Abs(prep(v)) })
	}
	for _, m := range modes {
		for _, cl := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s channels-last=%v", m.name, cl), func(t *testing.T) {
				noNativeConv.Store(!m.native)
				nativeForwardOff.Store(!m.forward)
				nativeBackwardOff.Store(!m.backward)
				defer noNativeConv.Store(false)
				defer nativeForwardOff.Store(false)
				defer nativeBackwardOff.Store(false)
				before := nativeCalls.Load()
				got := run(d, cl, prep)
				if d == nativeTest {
					want := m.native && m.forward && (m.backward || !viaBackward)
					if ran := nativeCalls.Load() > before; ran != want {
						t.Errorf("native kernels ran: %v, want %v", ran, want)
					}
				}
				where := fmt.Sprintf("%s on %v (channels-last=%v, cuDNN %v)", m.name, d, cl, CuDNN())
				explain := func() string { return convChoices(d, inputs) }
				within(t, where+": output", got.out[0], want.out[0], gradsAt(bound.out, 0), tol, explain)
				for i := range want.grads {
					within(t, fmt.Sprintf("%s: gradient of input %d", where, i), got.grads[i], want.grads[i], gradsAt(bound.grads, i), tol, explain)
				}
			})
		}
	}
}

// gradsAt returns vs[i], or nil when vs is too short.
func gradsAt(vs [][]float64, i int) []float64 {
	if i < len(vs) {
		return vs[i]
	}
	return nil
}

// convChoicer is a device that lists its cached convolution algorithms
// (the CUDA backend's).
type convChoicer interface{ CuDNNConvChoices() []cuda.ConvChoice }

// convChoices lists the convolution algorithms that device d chose for
// shapes among the inputs', one a line, for a failure message; empty for
// a device without them.
func convChoices(d Device, inputs []*Tensor) string {
	ds, err := deviceFor(d)
	if err != nil {
		return ""
	}
	cc, ok := ds.bd.(convChoicer)
	if !ok {
		return ""
	}
	var b strings.Builder
	for _, c := range cc.CuDNNConvChoices() {
		for _, in := range inputs {
			if s := [4]int(append(slices.Clone(in.Shape()), 0, 0, 0, 0)[:4]); in.Dim() == 4 && (s == c.X || s == c.W || s == c.Y) {
				fmt.Fprintf(&b, "\n\tcuDNN: %v", c)
				break
			}
		}
	}
	return b.String()
}

// within checks got against want under tol, with bound the values of the
// product term (nil for none). A failure reports the element of the
// largest error relative to its allowance, the largest absolute error,
// how many elements are out of bounds, and explain's text (the algorithms
// that ran).
func within(t *testing.T, what string, got, want, bound []float64, tol tolerance, explain func() string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, worstAt, maxAbs, bad := 0.0, -1, 0.0, 0
	for i := range want {
		allow := tol.rel * (1 + math.Abs(want[i]))
		if bound != nil {
			allow += tol.prod * bound[i]
		}
		e := math.Abs(got[i] - want[i])
		if math.IsNaN(got[i]) {
			e = math.Inf(1)
		}
		maxAbs = max(maxAbs, e)
		if e > allow {
			bad++
		}
		if r := e / allow; r > worst || worstAt < 0 {
			worst, worstAt = r, i
		}
	}
	if bad > 0 {
		b := 0.0
		if bound != nil {
			b = bound[worstAt]
		}
		t.Fatalf("%s: %d of %d elements out of bounds; worst element %d = %v, want %v (error %.3g, %.2fx its allowance; |products| %.4g); largest error %.3g%s",
			what, bad, len(want), worstAt, got[worstAt], want[worstAt], math.Abs(got[worstAt]-want[worstAt]), worst, b, maxAbs, explain())
	}
}

func TestNativeInterfacesConv(t *testing.T) {
	for _, tc := range convCases {
		t.Run("conv2d "+tc.name, func(t *testing.T) {
			x, w, b := convInputs(tc, false)
			if b == nil {
				onNativeTest(t, false, func(xs []*Tensor) *Tensor { return Conv2d(xs[0], xs[1], nil, tc.p) }, x, w)
				return
			}
			onNativeTest(t, false, func(xs []*Tensor) *Tensor { return Conv2d(xs[0], xs[1], xs[2], tc.p) }, x, w, b)
		})
	}
	for _, act := range []Activation{ActReLU, ActGELU} {
		tc := convCases[6]
		t.Run(fmt.Sprintf("conv2d %s %v", tc.name, act), func(t *testing.T) {
			x, w, b := convInputs(tc, false)
			onNativeTest(t, false, func(xs []*Tensor) *Tensor { return Conv2dAct(xs[0], xs[1], xs[2], tc.p, act) }, x, w, b)
			onNativeTest(t, false, func(xs []*Tensor) *Tensor { return Conv2dAct(xs[0], xs[1], nil, tc.p, act) }, x, w)
		})
	}
	for _, tc := range convTCases {
		t.Run("conv_transpose2d "+tc.name, func(t *testing.T) {
			x, w, b := convInputs(tc, true)
			if b == nil {
				onNativeTest(t, true, func(xs []*Tensor) *Tensor { return ConvTranspose2d(xs[0], xs[1], nil, tc.p) }, x, w)
				return
			}
			onNativeTest(t, true, func(xs []*Tensor) *Tensor { return ConvTranspose2d(xs[0], xs[1], xs[2], tc.p) }, x, w, b)
		})
	}
}

// TestConvGradientAccumulates checks the gradient of a tensor that feeds a
// convolution and another op, as a residual block's input does, when the
// other op's gradient arrives first: the convolution's backward pass adds
// its part in place (Conv2DBackwardDataAccumulate), and the result matches
// the CPU's in every mode.
func TestConvGradientAccumulates(t *testing.T) {
	p := Conv2dParams{Padding: [2]int{1, 1}}
	x, w := rnd(91, 2, 3, 5, 5), rnd(92, 3, 3, 3, 3)
	before := nativeAccumulations.Load()
	onNativeTest(t, false, func(xs []*Tensor) *Tensor {
		h := xs[0].MulScalar(2) // a node, so that its gradient is gathered
		y := Conv2d(h, xs[1], nil, p)
		return y.Add(h.MulScalar(3))
	}, x, w)
	if nativeAccumulations.Load() == before {
		t.Error("the convolution's input gradient was never added in place")
	}
}

func TestNativeInterfacesPool(t *testing.T) {
	for _, tc := range poolCases {
		t.Run("max "+tc.name, func(t *testing.T) {
			onNativeTest(t, false, func(xs []*Tensor) *Tensor { return MaxPool2d(xs[0], tc.p) }, rnd(81, tc.x...))
		})
		t.Run("avg "+tc.name, func(t *testing.T) {
			onNativeTest(t, false, func(xs []*Tensor) *Tensor { return AvgPool2d(xs[0], tc.p) }, rnd(82, tc.x...))
		})
	}
	t.Run("adaptive global", func(t *testing.T) {
		onNativeTest(t, false, func(xs []*Tensor) *Tensor { return AdaptiveAvgPool2d(xs[0], 1, 1) }, rnd(83, 2, 3, 4, 5))
	})
}

// TestNativeInterfacesBatchNormReLU checks BatchNorm2dReLU, with and
// without a residual, in training and evaluation, in each way the device
// serves it (fused forward and backward, fused forward with the composed
// backward, kernels that decline, composed), against the CPU.
func TestNativeInterfacesBatchNormReLU(t *testing.T) {
	for _, training := range []bool{true, false} {
		for _, residual := range []bool{true, false} {
			t.Run(fmt.Sprintf("training=%v residual=%v", training, residual), func(t *testing.T) {
				inputs := []*Tensor{rnd(86, 3, 4, 3, 2), rnd(87, 4), rnd(88, 4)}
				if residual {
					inputs = append(inputs, rnd(89, 3, 4, 3, 2))
				}
				onNativeTest(t, false, func(xs []*Tensor) *Tensor {
					c := xs[0].Size(1)
					d := xs[0].Device()
					rm := rnd(84, c).Cast(Float32).To(d)
					rv := pos(85, c).Cast(Float32).To(d)
					var r *Tensor
					if residual {
						r = xs[3]
					}
					return BatchNorm2dReLU(xs[0], r, xs[1], xs[2], rm, rv, training, 0.1, 1e-5)
				}, inputs...)
			})
		}
	}
}

func TestNativeInterfacesBatchNorm(t *testing.T) {
	for _, training := range []bool{true, false} {
		t.Run(fmt.Sprint("training=", training), func(t *testing.T) {
			var stats [][]float64
			onNativeTest(t, false, func(xs []*Tensor) *Tensor {
				c := xs[0].Size(1)
				d := xs[0].Device()
				rm := rnd(84, c).Cast(Float32).To(d)
				rv := pos(85, c).Cast(Float32).To(d)
				y := BatchNorm2d(xs[0], xs[1], xs[2], rm, rv, training, 0.1, 1e-5)
				stats = append(stats, append(rm.Float64s(), rv.Float64s()...))
				return y
			}, rnd(86, 3, 4, 3, 2), rnd(87, 4), rnd(88, 4))
			for i, s := range stats[1:] {
				closeTo(t, fmt.Sprintf("running statistics of run %d", i+1), s, stats[0], 1e-5)
			}
		})
	}
}

// TestNativeInterfacesOtherDTypes: the nativetest kernels take float32
// only, so float64 falls back to the composed path whole.
func TestNativeInterfacesOtherDTypes(t *testing.T) {
	x, w := rnd(91, 1, 2, 5, 5).To(nativeTest), rnd(92, 3, 2, 3, 3).To(nativeTest)
	before := nativeCalls.Load()
	y := Conv2d(x, w, nil, Conv2dParams{Padding: [2]int{1, 1}})
	want, _ := refConv2d(x.Float64s(), []int{1, 2, 5, 5}, w.Float64s(), []int{3, 2, 3, 3}, nil, Conv2dParams{Padding: [2]int{1, 1}})
	closeTo(t, "float64 conv", y.Float64s(), want, 1e-12)
	if nativeCalls.Load() != before {
		t.Error("a float64 convolution reached the float32-only kernels")
	}
	if !slices.Equal(y.Shape(), Shape{1, 3, 5, 5}) {
		t.Errorf("shape %v", y.Shape())
	}
}

// TestConvOpsLeaveNothing runs every op forward and backward outside any
// Tidy, releasing what it made, in each mode of the nativetest device: the
// ops' own temporaries (index tensors, layout copies, saved tensors) must
// all be freed.
func TestConvOpsLeaveNothing(t *testing.T) {
	for _, m := range nativeModes {
		t.Run(m.name, func(t *testing.T) {
			noNativeConv.Store(!m.native)
			nativeForwardOff.Store(!m.forward)
			nativeBackwardOff.Store(!m.backward)
			defer noNativeConv.Store(false)
			defer nativeForwardOff.Store(false)
			defer nativeBackwardOff.Store(false)
			for _, cl := range []bool{false, true} {
				settle(nativeTest)
				base := liveOn(nativeTest)
				var made []*Tensor
				keep := func(x *Tensor) *Tensor { made = append(made, x); return x }
				param := func(shape ...int) *Tensor {
					return keep(Randn(shape, Float32, nativeTest, WithGenerator(NewGenerator(uint64(len(made)))))).SetRequiresGrad(true)
				}
				x := keep(Randn(Shape{2, 3, 9, 9}, Float32, nativeTest))
				if cl {
					x = keep(x.Contiguous(ChannelsLast))
				}
				w1, b1 := param(4, 3, 3, 3), param(4)
				gamma, beta := param(4), param(4)
				rm, rv := keep(Zeros(Shape{4}, Float32, nativeTest)), keep(Ones(Shape{4}, Float32, nativeTest))
				wt := param(4, 2, 2, 2)
				h := keep(Conv2d(x, w1, b1, Conv2dParams{Padding: [2]int{1, 1}, Stride: [2]int{2, 1}}))
				h = keep(BatchNorm2d(h, gamma, beta, rm, rv, true, 0.1, 1e-5))
				h = keep(MaxPool2d(h, Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{1, 1}, Padding: [2]int{1, 1}}))
				h = keep(ConvTranspose2d(h, wt, nil, Conv2dParams{Stride: [2]int{2, 2}}))
				h = keep(AvgPool2d(h, Pool2dParams{Kernel: [2]int{3, 3}, Padding: [2]int{1, 1}, ExcludePad: true}))
				h = keep(AdaptiveAvgPool2d(h, 3, 2))
				h = keep(BatchNorm2d(h, nil, nil, nil, nil, true, 0.1, 1e-5))
				loss := keep(h.Sum())
				loss.Backward()
				for _, p := range []*Tensor{w1, b1, gamma, beta, wt} {
					if p.Grad() == nil {
						t.Fatalf("channels-last=%v: a parameter has no gradient", cl)
					}
				}
				for i := len(made) - 1; i >= 0; i-- {
					made[i].Release()
				}
				if got := liveOn(nativeTest) - base; got > 0 {
					t.Errorf("channels-last=%v: %d bytes still live after releasing everything", cl, got)
				}
			}
		})
	}
}

// TestNativeFrozenOperands: the native backward passes compute only the
// gradients asked for, each equal to the composed path's.
func TestNativeFrozenOperands(t *testing.T) {
	tc := convCases[6]
	for _, need := range [][3]bool{{true, false, false}, {false, true, false}, {false, false, true}, {false, true, true}} {
		t.Run(fmt.Sprint(need), func(t *testing.T) {
			grads := func(d Device, transposed bool) [][]float64 {
				x, w, b := convInputs(tc, false)
				if transposed {
					x, w, b = convInputs(convTCases[5], true)
				}
				ins := []*Tensor{x.Cast(Float32).To(d), w.Cast(Float32).To(d), b.Cast(Float32).To(d)}
				for i, in := range ins {
					in.SetRequiresGrad(need[i])
				}
				var y *Tensor
				if transposed {
					y = ConvTranspose2d(ins[0], ins[1], ins[2], convTCases[5].p)
				} else {
					y = Conv2d(ins[0], ins[1], ins[2], tc.p)
				}
				y.Square().Sum().Backward()
				out := make([][]float64, 3)
				for i, in := range ins {
					if g := in.Grad(); g != nil {
						out[i] = g.Cast(Float64).Float64s()
					} else if need[i] {
						t.Fatalf("no gradient for input %d", i)
					}
				}
				return out
			}
			for _, transposed := range []bool{false, true} {
				want := grads(CPU, transposed)
				before := nativeCalls.Load()
				got := grads(nativeTest, transposed)
				if nativeCalls.Load() == before {
					t.Fatal("the native kernels did not run")
				}
				for i := range want {
					if need[i] {
						closeTo(t, fmt.Sprintf("transposed=%v gradient %d", transposed, i), got[i], want[i], 1e-4)
					}
				}
			}
		})
	}
}

// TestMaxPoolKeepsTaps runs max poolings whose gradient is needed on the
// nativetest device, which keeps each window's tap in the forward pass
// ([backend.MaxPoolTapper]), over ties, NaN and windows of -Inf, NCHW
// and channels-last, and checks the outputs and gradients against the
// CPU's and that both passes went through the taps. Without a gradient
// the plain pooling runs.
func TestMaxPoolKeepsTaps(t *testing.T) {
	inf := math.Inf(-1)
	vals := []float64{1, 3, 3, 2, math.NaN(), 0, inf, inf, inf, inf, 5, 5, -1, 2, 2, 7, 0, 0, 4, 4, math.NaN(), 1, 6, 6, 6}
	x0 := make([]float64, 2*3*5*5)
	for i := range x0 {
		x0[i] = vals[(i*7)%len(vals)]
	}
	for _, tc := range []struct {
		name string
		p    Pool2dParams
	}{
		{"3x3/2 pad 1", Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}},
		{"2x2", Pool2dParams{Kernel: [2]int{2, 2}}},
		{"2x3 stride 1x2 pad 1x0", Pool2dParams{Kernel: [2]int{2, 3}, Stride: [2]int{1, 2}, Padding: [2]int{1, 0}}},
	} {
		for _, cl := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s channels-last=%v", tc.name, cl), func(t *testing.T) {
				run := func(d Device) (y, g []float64) {
					x := FromSlice(x0, Shape{2, 3, 5, 5}).Cast(Float32).To(d)
					if cl {
						x = x.Contiguous(ChannelsLast)
					}
					x = x.Detach().SetRequiresGrad(true)
					out := MaxPool2d(x, tc.p)
					gy := Arange(0, float64(out.NumElements()), 1, Float32).Reshape(out.Shape()...).AddScalar(1).To(d)
					out.Backward(Gradient(gy))
					return out.Cast(Float64).Float64s(), x.Grad().Cast(Float64).Float64s()
				}
				noNativeConv.Store(true)
				wantY, wantG := run(CPU)
				noNativeConv.Store(false)
				before := nativeTapCalls.Load()
				gotY, gotG := run(nativeTest)
				if n := nativeTapCalls.Load() - before; n != 2 {
					t.Errorf("%d calls kept or read taps, want 2 (forward and backward)", n)
				}
				for i := range wantY {
					if !(gotY[i] == wantY[i] || math.IsNaN(gotY[i]) && math.IsNaN(wantY[i])) {
						t.Fatalf("output %d = %v, want %v", i, gotY[i], wantY[i])
					}
				}
				for i := range wantG {
					if gotG[i] != wantG[i] {
						t.Fatalf("gradient %d = %v, want %v", i, gotG[i], wantG[i])
					}
				}
			})
		}
	}
	t.Run("no gradient", func(t *testing.T) {
		before := nativeTapCalls.Load()
		MaxPool2d(FromSlice(x0, Shape{2, 3, 5, 5}).Cast(Float32).To(nativeTest), Pool2dParams{Kernel: [2]int{2, 2}}).Release()
		if n := nativeTapCalls.Load() - before; n != 0 {
			t.Errorf("a pooling without a gradient kept taps (%d calls)", n)
		}
	})
}
