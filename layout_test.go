package vram

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/vramgo/vram/backend"
)

// TestDenseStrides checks denseStrides, sameStrides and gradStrides on the
// layouts a tensor can have: dense in any order of its dimensions, with
// gaps, overlapping, broadcast, empty, with dimensions of size 1.
func TestDenseStrides(t *testing.T) {
	cases := []struct {
		name    string
		shape   []int
		strides []int
		dense   bool
	}{
		{"row-major", []int{2, 3, 4}, []int{12, 4, 1}, true},
		{"channels-last", []int{2, 3, 4, 5}, []int{60, 1, 15, 3}, true},
		{"transposed", []int{3, 4}, []int{1, 3}, true},
		{"size-1 dims with any stride", []int{2, 1, 3}, []int{3, 99, 1}, true},
		{"scalar", []int{}, []int{}, true},
		{"empty", []int{0, 3}, []int{3, 1}, true},
		{"every other element", []int{4}, []int{2}, false},
		{"a gap between rows", []int{2, 3}, []int{4, 1}, false},
		{"broadcast", []int{2, 3}, []int{0, 1}, false},
		{"overlapping", []int{3, 3}, []int{1, 1}, false},
		{"negative", []int{3}, []int{-1}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := denseStrides(c.shape, c.strides); got != c.dense {
				t.Fatalf("denseStrides(%v, %v) = %v, want %v", c.shape, c.strides, got, c.dense)
			}
		})
	}
	if !sameStrides([]int{4, 1, 3}, []int{3, 7, 1}, []int{3, 1, 1}) {
		t.Error("sameStrides: strides along a dimension of size 1 must not matter")
	}
	if sameStrides([]int{4, 3}, []int{3, 1}, []int{1, 4}) {
		t.Error("sameStrides: row-major and column-major must differ")
	}
	x := Zeros(Shape{2, 3, 4, 5}, CPU).Contiguous(ChannelsLast)
	defer x.Release()
	if got := gradStrides(x); !slices.Equal(got, x.strides) {
		t.Errorf("gradStrides of a channels-last leaf: %v, want %v", got, x.strides)
	}
	base := Zeros(Shape{4, 6}, CPU)
	defer base.Release()
	gappy := base.Slice(1, 0, 6, 2) // every other column
	defer gappy.Release()
	if got := gradStrides(gappy); !slices.Equal(got, []int{3, 1}) {
		t.Errorf("gradStrides of a leaf with gaps: %v, want row-major [3 1]", got)
	}
}

// TestFlatViews checks that tensors of one dense layout are flattened
// together and that anything else is refused.
func TestFlatViews(t *testing.T) {
	cl := func() *Tensor { return Randn(Shape{2, 3, 4, 5}, CPU).Contiguous(ChannelsLast) }
	a, b := cl(), cl()
	rm := Randn(Shape{2, 3, 4, 5}, CPU)
	base := Randn(Shape{4, 6}, CPU)
	gappy := base.Slice(1, 0, 6, 2)
	gappy2 := base.Slice(1, 1, 6, 2)
	defer func() {
		for _, x := range []*Tensor{a, b, rm, base, gappy, gappy2} {
			x.Release()
		}
	}()
	vs, ok := flatViews(a, b)
	if !ok {
		t.Fatal("two channels-last tensors of one shape were not flattened")
	}
	for i, v := range vs {
		if !slices.Equal(v.Shape, []int{120}) || !slices.Equal(v.Strides, []int{1}) {
			t.Errorf("view %d: shape %v strides %v, want [120] [1]", i, v.Shape, v.Strides)
		}
	}
	for _, c := range []struct {
		name string
		ts   []*Tensor
	}{
		{"channels-last with row-major", []*Tensor{a, rm}},
		{"row-major with channels-last", []*Tensor{rm, a}},
		{"not dense", []*Tensor{gappy, gappy2}},
	} {
		if _, ok := flatViews(c.ts...); ok {
			t.Errorf("%s: flattened, want refused", c.name)
		}
	}
}

// TestGradKeepsLeafLayout checks that a leaf's gradient takes the leaf's
// dense layout, whatever the layout of the gradient that reaches it, with
// the right values, when it is set and when it is added to.
func TestGradKeepsLeafLayout(t *testing.T) {
	shape := Shape{2, 3, 4, 5}
	for _, c := range []struct {
		name           string
		leafCL, gCL    bool
		wantCLGradient bool
	}{
		{"channels-last leaf, channels-last gradient", true, true, true},
		{"channels-last leaf, row-major gradient", true, false, true},
		{"row-major leaf, channels-last gradient", false, true, false},
		{"row-major leaf, row-major gradient", false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			Tidy(func() {
				w := Randn(shape, CPU)
				if c.leafCL {
					w = w.Contiguous(ChannelsLast)
				}
				w = w.Detach().SetRequiresGrad(true)
				g := Randn(shape, CPU)
				if c.gCL {
					g = g.Contiguous(ChannelsLast)
				}
				// Twice: the first Backward sets the gradient, the second
				// adds into it.
				for range 2 {
					w.MulScalar(1).Backward(Gradient(g))
				}
				got := w.Grad()
				f := formatFor(c.wantCLGradient)
				if (got.SuggestMemoryFormat() == ChannelsLast) != c.wantCLGradient || !got.IsContiguous(f) {
					t.Fatalf("gradient strides %v, want %v", got.strides, formatStrides(shape, f))
				}
				gv, want := got.Float64s(), g.MulScalar(2).Float64s()
				for i := range want {
					if gv[i] != want[i] {
						t.Fatalf("gradient element %d = %v, want %v", i, gv[i], want[i])
					}
				}
			})
		})
	}
}

// stateFormatOf returns p's format when p is dense in it, as optimizer
// state is laid out.
func stateFormatOf(p *Tensor) MemoryFormat {
	if f := p.SuggestMemoryFormat(); p.IsContiguous(f) {
		return f
	}
	return ContiguousFormat
}

// formatFor returns ChannelsLast when cl is set, else ContiguousFormat.
func formatFor(cl bool) MemoryFormat {
	if cl {
		return ChannelsLast
	}
	return ContiguousFormat
}

// TestFusedStepsTakeDenseLayouts checks that the fused SGD and Adam steps
// apply to tensors sharing a channels-last or a permuted layout, with the
// results of row-major tensors, and decline mixed layouts.
func TestFusedStepsTakeDenseLayouts(t *testing.T) {
	shape := Shape{3, 4, 5, 2}
	layouts := []struct {
		name string
		to   func(*Tensor) *Tensor
	}{
		{"channels-last", func(x *Tensor) *Tensor { return x.Contiguous(ChannelsLast) }},
		{"permuted", func(x *Tensor) *Tensor {
			return x.Permute(3, 2, 1, 0).Contiguous().Permute(3, 2, 1, 0)
		}},
	}
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			Tidy(func() {
				p0, g0, m0, v0 := Randn(shape, CPU), Randn(shape, CPU), Randn(shape, CPU), Rand(shape, CPU)
				rp, rg, rm, rv := p0.Clone(), g0.Clone(), m0.Clone(), v0.Clone()
				lp, lg, lm, lv := l.to(p0), l.to(g0), l.to(m0), l.to(v0)
				if lp.IsContiguous() {
					t.Fatal("the test layout is row-major")
				}
				for step := 1; step <= 2; step++ {
					if !FusedSGDStep(lp, lg, lm, 0.1, 0.9, 0, 0.01, false, step == 1) || !FusedSGDStep(rp, rg, rm, 0.1, 0.9, 0, 0.01, false, step == 1) {
						t.Fatal("FusedSGDStep declined tensors of one dense layout")
					}
					if !FusedAdamStep(lp, lg, lm, lv, 0.01, 0.9, 0.999, 1e-8, 0.01, step, true) || !FusedAdamStep(rp, rg, rm, rv, 0.01, 0.9, 0.999, 1e-8, 0.01, step, true) {
						t.Fatal("FusedAdamStep declined tensors of one dense layout")
					}
				}
				for i, pair := range [][2]*Tensor{{lp, rp}, {lm, rm}, {lv, rv}} {
					a, b := pair[0].Float64s(), pair[1].Float64s()
					for k := range a {
						if a[k] != b[k] {
							t.Fatalf("tensor %d element %d: %v in the layout, %v row-major", i, k, a[k], b[k])
						}
					}
				}
				if FusedSGDStep(lp, rg, lm, 0.1, 0.9, 0, 0, false, false) {
					t.Error("FusedSGDStep took a row-major gradient for a parameter of another layout")
				}
				if FusedAdamStep(lp, lg, rm, lv, 0.01, 0.9, 0.999, 1e-8, 0, 3, false) {
					t.Error("FusedAdamStep took a row-major moment for a parameter of another layout")
				}
			})
		})
	}
}

// A "layouttest" device is the nativetest device (native convolutions,
// pooling and batch normalization on the CPU) that also counts the copies
// that change a layout (dst and src strides differ), the matrix products
// (a composed convolution's GEMM) and the fused SGD steps, for checks that
// a channels-last network runs without converting layouts.
var layoutTest = Device{Kind: "layouttest"}

var (
	layoutCopies   atomic.Int64 // copies between different layouts
	layoutMatMuls  atomic.Int64
	layoutSGDSteps atomic.Int64
	layoutLog      atomic.Pointer[[]string] // the first layout copies, for the failure message
)

type layoutBackend struct{}

func (layoutBackend) Name() string     { return "layouttest" }
func (layoutBackend) DeviceCount() int { return 1 }
func (layoutBackend) Device(i int) (backend.Device, error) {
	d, err := nativeBackend{}.Device(i)
	if err != nil {
		return nil, err
	}
	return &layoutDevice{nativeDevice: d.(*nativeDevice)}, nil
}

func init() { backend.Register(layoutBackend{}) }

type layoutDevice struct{ *nativeDevice }

func (d *layoutDevice) Copy(s backend.Stream, dst, src backend.View) error {
	if !sameStrides(dst.Shape, dst.Strides, src.Strides) {
		layoutCopies.Add(1)
		if l := layoutLog.Load(); l != nil && len(*l) < 8 {
			nl := append(slices.Clone(*l), fmt.Sprintf("%v %v<-%v", dst.Shape, dst.Strides, src.Strides))
			layoutLog.Store(&nl)
		}
	}
	return d.nativeDevice.Copy(s, dst, src)
}

func (d *layoutDevice) MatMul(s backend.Stream, dst, a, b backend.View) error {
	layoutMatMuls.Add(1)
	return d.nativeDevice.MatMul(s, dst, a, b)
}

func (d *layoutDevice) SGDStep(s backend.Stream, p, g, buf backend.View, cfg backend.SGDStepConfig) error {
	fs, ok := d.nativeDevice.Device.(backend.FusedSGD)
	if !ok {
		return fmt.Errorf("layouttest: the CPU has no fused SGD step: %w", backend.ErrNotImplemented)
	}
	layoutSGDSteps.Add(1)
	return fs.SGDStep(s, p, g, buf, cfg)
}

// TestChannelsLastBlockKeepsLayout runs a max pooling, a channels-last
// bottleneck block (1×1, 3×3 and 1×1 convolutions, each with batch norm,
// ReLUs, a projection shortcut and the residual addition) and a global
// average pooling, flattened, forward and backward,
// then a fused SGD step of every parameter, on a device with native
// kernels, and checks that no copy changes a layout, that no convolution
// is composed (no matrix product), that the weights' gradients keep the
// weights' layout and that every parameter takes the fused step. It runs
// a row-major block the same way, which must not copy either, and compares
// the two blocks' outputs and gradients.
func TestChannelsLastBlockKeepsLayout(t *testing.T) {
	const n, c, h, w, mid, out = 2, 8, 8, 8, 4, 16
	type result struct{ y, grads [][]float64 }
	run := func(cl bool) result {
		var r result
		Tidy(func() {
			gen := NewGenerator(7)
			f := formatFor(cl)
			leaf := func(shape Shape) *Tensor {
				x := Randn(shape, layoutTest, WithGenerator(gen)).MulScalar(0.3)
				if len(shape) == 4 {
					x = x.Contiguous(f)
				}
				return x.Detach().SetRequiresGrad(true)
			}
			x := leaf(Shape{n, c, h, w})
			ws := []*Tensor{leaf(Shape{mid, c, 1, 1}), leaf(Shape{mid, mid, 3, 3}), leaf(Shape{out, mid, 1, 1}), leaf(Shape{out, c, 1, 1})}
			var bnp []*Tensor
			bn := func(y *Tensor) *Tensor {
				ch := y.shape[1]
				g, b := leaf(Shape{ch}).AddScalar(1).Detach().SetRequiresGrad(true), leaf(Shape{ch})
				bnp = append(bnp, g, b)
				return BatchNorm2d(y, g, b, Zeros(Shape{ch}, layoutTest), Ones(Shape{ch}, layoutTest), true, 0.1, 1e-5)
			}
			layoutLog.Store(&[]string{})
			layoutCopies.Store(0)
			layoutMatMuls.Store(0)
			layoutSGDSteps.Store(0)
			nativeCalls.Store(0)
			xp := MaxPool2d(x, Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}})
			h1 := bn(Conv2d(xp, ws[0], nil, Conv2dParams{})).Relu()
			h2 := bn(Conv2d(h1, ws[1], nil, Conv2dParams{Padding: [2]int{1, 1}})).Relu()
			h3 := bn(Conv2d(h2, ws[2], nil, Conv2dParams{}))
			sc := bn(Conv2d(xp, ws[3], nil, Conv2dParams{}))
			yb := h3.Add(sc).Relu()
			if cl && yb.SuggestMemoryFormat() != ChannelsLast {
				t.Errorf("the block's output has strides %v, want channels-last", yb.strides)
			}
			y := AdaptiveAvgPool2d(yb, 1, 1).Flatten(1, -1)
			if got := layoutCopies.Load(); got != 0 {
				t.Errorf("channels_last=%v: the forward pass made %d copies that changed a layout, the first: %v", cl, got, *layoutLog.Load())
			}
			// The gradient of the pooled features, as a classifier
			// gives it.
			gy := Randn(Shape(y.shape), layoutTest, WithGenerator(gen))
			layoutLog.Store(&[]string{})
			layoutCopies.Store(0)
			y.Backward(Gradient(gy))
			if got := layoutCopies.Load(); got != 0 {
				t.Errorf("channels_last=%v: the backward pass made %d copies that changed a layout, the first: %v", cl, got, *layoutLog.Load())
			}
			params := append(append([]*Tensor{x}, ws...), bnp...)
			for _, p := range params {
				if p.Dim() == 4 && p.Grad().SuggestMemoryFormat() != p.SuggestMemoryFormat() {
					t.Errorf("a leaf with strides %v has a gradient with strides %v", p.strides, p.Grad().strides)
				}
			}
			bufs := make([]*Tensor, len(params))
			for i, p := range params {
				bufs[i] = newTensorFormat("test", p.ds(), p.dtype, p.shape, stateFormatOf(p))
			}
			layoutCopies.Store(0)
			NoGrad(func() {
				for i, p := range params[1:] {
					if !FusedSGDStep(p, p.Grad(), bufs[i+1], 0.1, 0.9, 0, 0, false, true) {
						t.Errorf("the fused SGD step declined a parameter of shape %v, strides %v (gradient strides %v)",
							p.shape, p.strides, p.Grad().strides)
					}
				}
			})
			if got := layoutCopies.Load(); got != 0 {
				t.Errorf("channels_last=%v: the SGD steps made %d copies that changed a layout", cl, got)
			}
			if got := layoutMatMuls.Load(); got != 0 {
				t.Errorf("channels_last=%v: %d matrix products: a convolution was composed", cl, got)
			}
			// 4 convolutions forward, backward data and filter; 4 batch
			// norms and 2 poolings forward and backward.
			const want = 4*3 + 4*2 + 2*2
			if got := nativeCalls.Load(); got < want {
				t.Errorf("channels_last=%v: %d native kernels ran, want at least %d", cl, got, want)
			}
			if got := layoutSGDSteps.Load(); got != int64(len(params)-1) {
				t.Errorf("channels_last=%v: %d fused SGD steps, want %d", cl, got, len(params)-1)
			}
			r.y = append(r.y, y.Float64s())
			for _, p := range params {
				r.grads = append(r.grads, p.Grad().Float64s())
			}
		})
		return r
	}
	cl, rm := run(true), run(false)
	closeTo(t, "output, channels-last against row-major", cl.y[0], rm.y[0], 1e-4)
	for i := range cl.grads {
		closeTo(t, fmt.Sprintf("gradient %d, channels-last against row-major", i), cl.grads[i], rm.grads[i], 1e-4)
	}
}

// TestCUDAChannelsLastLayouts checks on a GPU what the CPU tests above
// check: elementwise ops and casts of channels-last tensors keep the
// layout with the CPU's values, a channels-last leaf gets a channels-last
// gradient, and the fused SGD and Adam steps take channels-last tensors
// with the CPU's results.
func TestCUDAChannelsLastLayouts(t *testing.T) {
	needCUDA(t)
	shape := Shape{4, 32, 9, 7}
	type out struct{ y, grad, p, m, v []float64 }
	run := func(d Device) (o out) {
		Tidy(func() {
			gen := NewGenerator(5)
			x := Randn(shape, CPU, WithGenerator(gen)).To(d).Contiguous(ChannelsLast)
			c := Randn(Shape{1, 32, 1, 1}, CPU, WithGenerator(gen)).To(d)
			w := x.Detach().SetRequiresGrad(true)
			y := w.Mul(c).Relu().Add(w).Cast(BFloat16).Cast(Float32)
			if y.SuggestMemoryFormat() != ChannelsLast || !y.IsContiguous(ChannelsLast) {
				t.Errorf("%s: the result has strides %v, want channels-last", d, y.strides)
			}
			y.Square().Sum().Backward()
			g := w.Grad()
			if !g.IsContiguous(ChannelsLast) || g.SuggestMemoryFormat() != ChannelsLast {
				t.Errorf("%s: the gradient has strides %v, want channels-last", d, g.strides)
			}
			o.y, o.grad = y.Float64s(), g.Float64s()
			NoGrad(func() {
				m := ZerosLike(w).Contiguous(ChannelsLast)
				v := ZerosLike(w).Contiguous(ChannelsLast)
				for step := 1; step <= 2; step++ {
					if !FusedSGDStep(w, g, m, 0.1, 0.9, 0, 0.01, false, step == 1) {
						t.Fatalf("%s: FusedSGDStep declined channels-last tensors", d)
					}
					if !FusedAdamStep(w, g, m, v, 0.01, 0.9, 0.999, 1e-8, 0.01, step, true) {
						t.Fatalf("%s: FusedAdamStep declined channels-last tensors", d)
					}
				}
				o.p, o.m, o.v = w.Float64s(), m.Float64s(), v.Float64s()
			})
		})
		return o
	}
	gpu, cpu := run(CUDA(0)), run(CPU)
	for _, c := range []struct {
		what      string
		got, want []float64
	}{{"result", gpu.y, cpu.y}, {"gradient", gpu.grad, cpu.grad}, {"parameter", gpu.p, cpu.p},
		{"momentum", gpu.m, cpu.m}, {"second moment", gpu.v, cpu.v}} {
		closeTo(t, "CUDA against CPU: "+c.what, c.got, c.want, 1e-2)
	}
}

// TestCopiesKeepChannelsLast checks PyTorch's preserve_format: Clone and
// the ...Like factories of a channels-last tensor are channels-last, while
// Contiguous() is row-major whatever its input.
func TestCopiesKeepChannelsLast(t *testing.T) {
	for _, dev := range []Device{CPU, Sim(0)} {
		t.Run(dev.String(), func(t *testing.T) {
			Tidy(func() {
				x := Arange(0, 2*3*4*5, 1, dev, Float32).Reshape(2, 3, 4, 5).Contiguous(ChannelsLast)
				for name, y := range map[string]*Tensor{
					"Clone": x.Clone(), "ZerosLike": ZerosLike(x), "OnesLike": OnesLike(x), "EmptyLike": EmptyLike(x),
					"FullLike": FullLike(x, 2),
				} {
					if !y.IsContiguous(ChannelsLast) || y.SuggestMemoryFormat() != ChannelsLast {
						t.Errorf("%s: strides %v, want channels-last", name, y.Strides())
					}
				}
				if c := x.Clone(); !slices.Equal(c.Float32s(), x.Float32s()) {
					t.Errorf("Clone changed the values")
				}
				if c := x.Contiguous(); !c.IsContiguous() || !slices.Equal(c.Float32s(), x.Float32s()) {
					t.Errorf("Contiguous: strides %v", c.Strides())
				}
			})
		})
	}
}

// TestClonePreservesLayout checks PyTorch's preserve_format for Clone and
// the ...Like factories: a dense input of any order of dimensions keeps its
// strides, one with gaps or repeats becomes dense, channels-last when its
// strides are ordered so; values and gradients are unchanged.
func TestClonePreservesLayout(t *testing.T) {
	for _, dev := range []Device{CPU, Sim(0)} {
		base := func(shape ...int) *Tensor {
			return Arange(0, float64(backend.NumElements(shape)), 1, dev, Float64).Reshape(shape...)
		}
		for _, tc := range []struct {
			name    string
			x       func() *Tensor
			strides []int
		}{
			{"row-major", func() *Tensor { return base(2, 3) }, []int{3, 1}},
			{"transposed", func() *Tensor { return base(2, 3).T() }, []int{1, 3}},
			{"permuted 3-D", func() *Tensor { return base(2, 3, 4).Permute(2, 0, 1) }, []int{1, 12, 4}},
			{"channels-last", func() *Tensor { return base(2, 3, 4, 5).Contiguous(ChannelsLast) }, []int{60, 1, 15, 3}},
			{"transposed, size-1 dimension", func() *Tensor { return base(1, 2, 3).Transpose(1, 2) }, []int{6, 1, 3}},
			{"narrowed (gaps)", func() *Tensor { return base(4, 3).Narrow(1, 0, 2) }, []int{2, 1}},
			{"narrowed transposed (gaps)", func() *Tensor { return base(4, 3).T().Narrow(0, 0, 2) }, []int{4, 1}},
			{"narrowed channels-last", func() *Tensor { return base(2, 3, 4, 5).Contiguous(ChannelsLast).Narrow(3, 1, 3) }, []int{36, 1, 9, 3}},
			{"expanded", func() *Tensor { return base(1, 3).Expand(2, 3) }, []int{3, 1}},
			{"empty transposed (row-major)", func() *Tensor { return base(0, 3).T() }, []int{1, 1}},
		} {
			Tidy(func() {
				x := tc.x().Detach().SetRequiresGrad(true)
				c := x.Clone()
				if !slices.Equal(c.Strides(), tc.strides) || !slices.Equal(c.Float64s(), x.Float64s()) {
					t.Errorf("%s: Clone of %s (strides %v): strides %v, want %v; values %v, want %v",
						dev, tc.name, x.Strides(), c.Strides(), tc.strides, c.Float64s(), x.Float64s())
				}
				c.MulScalar(2).Sum().Backward()
				if g := x.Grad(); g == nil || !slices.Equal(g.Float64s(), slices.Repeat([]float64{2}, x.NumElements())) {
					t.Errorf("%s: Clone of %s: gradient %v", dev, tc.name, g)
				}
				for name, y := range map[string]*Tensor{
					"EmptyLike": EmptyLike(x), "ZerosLike": ZerosLike(x, Float32), "OnesLike": OnesLike(x, Int64),
					"FullLike": FullLike(x, 2, Float16),
				} {
					if !slices.Equal(y.Strides(), tc.strides) {
						t.Errorf("%s: %s of %s: strides %v, want %v", dev, name, tc.name, y.Strides(), tc.strides)
					}
				}
				if y := OnesLike(x); y.NumElements() > 0 && y.Sum().Item() != float64(x.NumElements()) {
					t.Errorf("%s: OnesLike of %s sums to %v", dev, tc.name, y.Sum().Item())
				}
			})
		}
	}
}

// TestCatKeepsChannelsLast checks PyTorch's rule for Cat's layout: the
// result is channels-last when every input is, along any dimension, and
// row-major when any is not; the values are those of a row-major Cat.
func TestCatKeepsChannelsLast(t *testing.T) {
	for _, dev := range []Device{CPU, Sim(0)} {
		Tidy(func() {
			a := Arange(0, 2*3*4*5, 1, dev).Reshape(2, 3, 4, 5)
			b := Arange(100, 100+2*3*4*5, 1, dev).Reshape(2, 3, 4, 5)
			acl, bcl := a.Contiguous(ChannelsLast), b.Contiguous(ChannelsLast)
			for _, tc := range []struct {
				name   string
				x, y   *Tensor
				format MemoryFormat
			}{
				{"both channels-last", acl, bcl, ChannelsLast},
				{"first channels-last", acl, b, ContiguousFormat},
				{"second channels-last", a, bcl, ContiguousFormat},
				{"both row-major", a, b, ContiguousFormat},
			} {
				for dim := -4; dim < 4; dim++ {
					c := Cat([]*Tensor{tc.x, tc.y}, dim)
					want := Cat([]*Tensor{a, b}, dim)
					if c.SuggestMemoryFormat() != tc.format || !c.IsContiguous(tc.format) {
						t.Errorf("%s: Cat of %s along %d: strides %v, want %v", dev, tc.name, dim, c.Strides(), tc.format)
					}
					if !slices.Equal(c.Float32s(), want.Float32s()) {
						t.Errorf("%s: Cat of %s along %d changed the values", dev, tc.name, dim)
					}
				}
			}
			// A skipped empty input does not count.
			if c := Cat([]*Tensor{acl, Zeros(Shape{0}, dev), bcl}, 1); c.SuggestMemoryFormat() != ChannelsLast {
				t.Errorf("%s: Cat with a skipped empty tensor: strides %v, want channels-last", dev, c.Strides())
			}
		})
	}
}

// TestIsContiguousFollowsPyTorch pins IsContiguous in both formats for
// views as torch.Tensor.is_contiguous answers: a tensor without elements is
// contiguous (row-major) whatever its strides, while the channels-last
// test looks at the strides alone; dimensions of size 1 never count.
func TestIsContiguousFollowsPyTorch(t *testing.T) {
	cases := []struct {
		name        string
		view        func(dev Device) *Tensor
		rowMajor    bool
		channelLast bool
	}{
		{"empty transposed", func(d Device) *Tensor { return Zeros(Shape{0, 3}, d).T() }, true, false},
		{"empty permuted 4-D", func(d Device) *Tensor { return Zeros(Shape{2, 0, 3, 4}, d).Permute(0, 2, 3, 1) }, true, false},
		{"empty slice of a transpose", func(d Device) *Tensor { return Zeros(Shape{4, 3}, d).T().Narrow(1, 2, 0) }, true, false},
		{"empty expanded", func(d Device) *Tensor { return Zeros(Shape{1, 3}, d).Expand(0, 3) }, true, false},
		{"transposed row", func(d Device) *Tensor { return Zeros(Shape{1, 3}, d).T() }, true, false},
		{"transposed", func(d Device) *Tensor { return Zeros(Shape{2, 3}, d).T() }, false, false},
		{"expanded", func(d Device) *Tensor { return Zeros(Shape{1}, d).Expand(3) }, false, false},
		{"N, C, 1, 1", func(d Device) *Tensor { return Zeros(Shape{2, 3, 1, 1}, d) }, true, true},
		{"channels-last", func(d Device) *Tensor { return Zeros(Shape{2, 3, 4, 5}, d).Contiguous(ChannelsLast) }, false, true},
		{"channels-last, one sample", func(d Device) *Tensor {
			return Zeros(Shape{2, 3, 4, 5}, d).Contiguous(ChannelsLast).Narrow(0, 1, 1)
		}, false, true},
		{"channels-last, some channels", func(d Device) *Tensor {
			return Zeros(Shape{2, 3, 4, 5}, d).Contiguous(ChannelsLast).Narrow(1, 0, 2)
		}, false, false},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				Tidy(func() {
					v := c.view(dev)
					if got := v.IsContiguous(); got != c.rowMajor {
						t.Errorf("IsContiguous() of %v strides %v = %v, want %v", v.Shape(), v.Strides(), got, c.rowMajor)
					}
					if len(v.shape) == 4 {
						if got := v.IsContiguous(ChannelsLast); got != c.channelLast {
							t.Errorf("IsContiguous(ChannelsLast) of %v strides %v = %v, want %v", v.Shape(), v.Strides(), got, c.channelLast)
						}
					}
					if got := v.Contiguous(); !got.IsContiguous() || got.NumElements() != v.NumElements() {
						t.Errorf("Contiguous() gives %v strides %v", got.Shape(), got.Strides())
					}
				})
			})
		}
	}
}
