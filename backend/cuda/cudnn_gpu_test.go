package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
	"github.com/vramgo/vram/memory/trace"
	"github.com/vramgo/vram/native/cudnn"
)

// The cuDNN tests run each operation on the GPU and compare it with a
// float64 reference computed here on the host from the same (rounded)
// inputs. They skip without a GPU or without cuDNN (both fail with
// VRAM_REQUIRE_CUDA=1).

// dnnGPU returns cuda:0 with cuDNN loaded and the cuDNN switches set to s
// for the test, or skips.
func dnnGPU(t *testing.T, s CuDNNSettings) *Device {
	t.Helper()
	d := gpu(t, 0)
	if err := loadCuDNN(); err != nil {
		skipOrFail(t, "no cuDNN: %v", err)
	}
	old := CuDNN()
	SetCuDNN(s)
	t.Cleanup(func() { SetCuDNN(old) })
	return d
}

// put allocates a 4-D view of shape s in layout l holding vals (in NCHW
// order, rounded to dt).
func put(t *testing.T, d *Device, dt backend.DType, s [4]int, l layout, vals []float64) backend.View {
	t.Helper()
	n := s[0] * s[1] * s[2] * s[3]
	buf, err := d.Alloc(int64(n*dt.Size()), nil, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Free(buf, nil) })
	ns, cs, hs, ws := l.strides(s[1], s[2], s[3])
	phys := make([]float64, n)
	i := 0
	for a := range s[0] {
		for b := range s[1] {
			for c := range s[2] {
				for e := range s[3] {
					phys[a*ns+b*cs+c*hs+e*ws] = vals[i]
					i++
				}
			}
		}
	}
	if err := d.CopyFromHost(nil, backend.View{Buf: buf, DType: dt, Shape: []int{n}, Strides: []int{1}}, backendtest.Encode(dt, phys)); err != nil {
		t.Fatal(err)
	}
	return backend.View{Buf: buf, DType: dt, Shape: s[:], Strides: []int{ns, cs, hs, ws}}
}

// vec allocates a 1-D view holding vals.
func vec(t *testing.T, d *Device, dt backend.DType, vals []float64) backend.View {
	t.Helper()
	return backendtest.NewView(t, d, dt, []int{len(vals)}, vals)
}

// get returns a view's elements in logical (row-major) order.
func get(t *testing.T, d *Device, v backend.View) []float64 {
	t.Helper()
	if err := d.DefaultStream().Synchronize(); err != nil {
		t.Fatal(err)
	}
	return read(t, d, v)
}

// rounded draws n values in [-1, 1] rounded to dt.
func rounded(r *rand.Rand, dt backend.DType, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = backendtest.Quantize(dt, 2*r.Float64()-1)
	}
	return v
}

// nanVals returns n NaNs, the poison of outputs.
func nanVals(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.NaN()
	}
	return v
}

// convEach calls fn for every (input, filter, output) index triple that
// a convolution multiplies together, all in NCHW order.
func convEach(xs, ws [4]int, p backend.Conv2DParams, fn func(xi, wi, yi int)) [4]int {
	n, c, h, w := xs[0], xs[1], xs[2], xs[3]
	o, cg, kh, kw := ws[0], ws[1], ws[2], ws[3]
	oh := backend.ConvOutputSize(h, kh, p.Stride[0], p.Padding[0], p.Dilation[0])
	ow := backend.ConvOutputSize(w, kw, p.Stride[1], p.Padding[1], p.Dilation[1])
	og := o / p.Groups
	for ni := range n {
		for oi := range o {
			g := oi / og
			for yy := range oh {
				for yx := range ow {
					yi := ((ni*o+oi)*oh+yy)*ow + yx
					for ci := range cg {
						for ky := range kh {
							iy := yy*p.Stride[0] - p.Padding[0] + ky*p.Dilation[0]
							if iy < 0 || iy >= h {
								continue
							}
							for kx := range kw {
								ix := yx*p.Stride[1] - p.Padding[1] + kx*p.Dilation[1]
								if ix < 0 || ix >= w {
									continue
								}
								fn(((ni*c+g*cg+ci)*h+iy)*w+ix, ((oi*cg+ci)*kh+ky)*kw+kx, yi)
							}
						}
					}
				}
			}
		}
	}
	return [4]int{n, o, oh, ow}
}

// dnnTol is the error allowed relative to the sum of |products| of an
// output: its dtype's rounding, and float32 without TF32 (the tests turn
// it off).
func dnnTol(dt backend.DType) float64 {
	switch dt {
	case backend.Float16:
		return 2e-3
	case backend.BFloat16:
		return 1.6e-2
	}
	return 2e-5
}

// near compares got with want within tol of scale (plus a small absolute
// part); NaN never passes.
func near(t *testing.T, what string, got, want, scale []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if e := math.Abs(got[i] - want[i]); !(e <= tol*scale[i]+1e-4) {
			if bad++; bad <= 3 {
				t.Errorf("%s[%d] = %v, want %v (± %.2g)", what, i, got[i], want[i], tol*scale[i]+1e-4)
			}
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d of %d values wrong", what, bad, len(got))
	}
}

type convCase struct {
	name  string
	dt    backend.DType
	l     layout
	x, w  [4]int
	p     backend.Conv2DParams
	bias  bool
	relu  bool
	bench bool
	maybe bool // cuDNN may lack it: a fallback error is logged, not failed
}

func cp(s, pad, dil [2]int, groups int) backend.Conv2DParams {
	return backend.Conv2DParams{Stride: s, Padding: pad, Dilation: dil, Groups: groups}
}

var convCases = []convCase{
	{name: "3x3 pad 1", dt: backend.Float32, l: nchw, x: [4]int{2, 3, 8, 7}, w: [4]int{5, 3, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1), bias: true},
	{name: "stride 2 no pad", dt: backend.Float32, l: nchw, x: [4]int{2, 4, 9, 9}, w: [4]int{6, 4, 3, 3}, p: cp([2]int{2, 2}, [2]int{0, 0}, [2]int{1, 1}, 1)},
	{name: "1x1 stride 2", dt: backend.Float32, l: nchw, x: [4]int{3, 8, 6, 6}, w: [4]int{4, 8, 1, 1}, p: cp([2]int{2, 2}, [2]int{0, 0}, [2]int{1, 1}, 1)},
	{name: "dilation 2", dt: backend.Float32, l: nchw, x: [4]int{1, 3, 10, 9}, w: [4]int{2, 3, 3, 3}, p: cp([2]int{1, 1}, [2]int{2, 2}, [2]int{2, 2}, 1)},
	{name: "groups 2", dt: backend.Float32, l: nchw, x: [4]int{2, 4, 7, 7}, w: [4]int{6, 2, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 2), bias: true},
	{name: "depthwise", dt: backend.Float32, l: nchw, x: [4]int{2, 6, 8, 8}, w: [4]int{6, 1, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 6)},
	{name: "asymmetric", dt: backend.Float32, l: nchw, x: [4]int{2, 3, 11, 8}, w: [4]int{4, 3, 3, 2}, p: cp([2]int{2, 1}, [2]int{1, 0}, [2]int{1, 2}, 1)},
	{name: "bias relu", dt: backend.Float32, l: nchw, x: [4]int{2, 8, 8, 8}, w: [4]int{8, 8, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1), bias: true, relu: true},
	{name: "relu no bias", dt: backend.Float32, l: nchw, x: [4]int{2, 4, 6, 6}, w: [4]int{4, 4, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1), relu: true},
	{name: "nhwc bias relu", dt: backend.Float32, l: nhwc, x: [4]int{2, 8, 8, 8}, w: [4]int{16, 8, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1), bias: true, relu: true},
	{name: "nhwc stride 2", dt: backend.Float32, l: nhwc, x: [4]int{2, 8, 9, 9}, w: [4]int{8, 8, 3, 3}, p: cp([2]int{2, 2}, [2]int{1, 1}, [2]int{1, 1}, 1), bias: true},
	{name: "benchmark", dt: backend.Float32, l: nchw, x: [4]int{2, 8, 12, 12}, w: [4]int{8, 8, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1), bias: true, relu: true, bench: true},
	{name: "f16", dt: backend.Float16, l: nchw, x: [4]int{2, 8, 8, 8}, w: [4]int{8, 8, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1), bias: true, relu: true},
	{name: "f16 nhwc", dt: backend.Float16, l: nhwc, x: [4]int{2, 16, 8, 8}, w: [4]int{16, 16, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1), bias: true},
	{name: "f16 nhwc benchmark", dt: backend.Float16, l: nhwc, x: [4]int{2, 16, 10, 10}, w: [4]int{32, 16, 3, 3}, p: cp([2]int{2, 2}, [2]int{1, 1}, [2]int{1, 1}, 1), bias: true, relu: true, bench: true},
	{name: "f16 nhwc groups", dt: backend.Float16, l: nhwc, x: [4]int{2, 8, 9, 8}, w: [4]int{8, 4, 3, 3}, p: cp([2]int{2, 1}, [2]int{1, 1}, [2]int{1, 2}, 2), maybe: true},
	{name: "bf16", dt: backend.BFloat16, l: nchw, x: [4]int{2, 8, 8, 8}, w: [4]int{8, 8, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1), bias: true},
	{name: "bf16 nhwc relu", dt: backend.BFloat16, l: nhwc, x: [4]int{2, 16, 8, 8}, w: [4]int{16, 16, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1), bias: true, relu: true, maybe: true},
}

// fallback reports an error that sends the caller to the composed path.
func fallback(err error) bool { return errors.Is(err, backend.ErrNotImplemented) }

// TestCuDNNConv runs the forward pass, the data gradient and the filter
// gradient (with the bias gradient) of each case against the host.
func TestCuDNNConv(t *testing.T) {
	for _, tc := range convCases {
		t.Run(tc.name, func(t *testing.T) {
			d := dnnGPU(t, CuDNNSettings{NoTF32: true, Benchmark: tc.bench})
			r := rand.New(rand.NewPCG(uint64(len(tc.name)), 7))
			x := rounded(r, tc.dt, tc.x[0]*tc.x[1]*tc.x[2]*tc.x[3])
			w := rounded(r, tc.dt, tc.w[0]*tc.w[1]*tc.w[2]*tc.w[3])
			b := rounded(r, tc.dt, tc.w[0])
			ys := convEach(tc.x, tc.w, tc.p, func(int, int, int) {})
			ny := ys[0] * ys[1] * ys[2] * ys[3]
			dy := rounded(r, tc.dt, ny)
			// The references.
			y, yScale := make([]float64, ny), make([]float64, ny)
			dx, dxScale := make([]float64, len(x)), make([]float64, len(x))
			dw, dwScale := make([]float64, len(w)), make([]float64, len(w))
			convEach(tc.x, tc.w, tc.p, func(xi, wi, yi int) {
				y[yi] += x[xi] * w[wi]
				yScale[yi] += math.Abs(x[xi] * w[wi])
				dx[xi] += dy[yi] * w[wi]
				dxScale[xi] += math.Abs(dy[yi] * w[wi])
				dw[wi] += dy[yi] * x[xi]
				dwScale[wi] += math.Abs(dy[yi] * x[xi])
			})
			db, dbScale := make([]float64, tc.w[0]), make([]float64, tc.w[0])
			per := ys[2] * ys[3]
			for i, g := range dy {
				o := i / per % ys[1]
				db[o] += g
				dbScale[o] += math.Abs(g)
			}
			for i := range y {
				if tc.bias {
					o := i / per % ys[1]
					y[i] += b[o]
					yScale[i] += math.Abs(b[o])
				}
				if tc.relu {
					y[i] = max(y[i], 0)
				}
			}
			tol := dnnTol(tc.dt)

			xv, wv := put(t, d, tc.dt, tc.x, tc.l, x), put(t, d, tc.dt, tc.w, tc.l, w)
			yv := put(t, d, tc.dt, ys, tc.l, nanVals(ny))
			var bv backend.View
			if tc.bias {
				bv = vec(t, d, tc.dt, b)
			}
			// ok reports whether the call worked; a case cuDNN may lack
			// ends at its first fallback.
			ok := func(what string, err error) bool {
				t.Helper()
				if tc.maybe && fallback(err) {
					t.Logf("%s: cuDNN lacks it here: %v", what, err)
					return false
				}
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				return true
			}
			if !ok("Conv2D", d.Conv2D(nil, yv, xv, wv, bv, tc.p, tc.relu)) {
				return
			}
			near(t, "y", get(t, d, yv), y, yScale, tol)

			dyv := put(t, d, tc.dt, ys, tc.l, dy)
			dxv := put(t, d, tc.dt, tc.x, tc.l, nanVals(len(x)))
			if !ok("Conv2DBackwardData", d.Conv2DBackwardData(nil, dxv, dyv, wv, tc.p)) {
				return
			}
			near(t, "dx", get(t, d, dxv), dx, dxScale, tol)

			// The same gradient added to values already there.
			base := rounded(r, tc.dt, len(x))
			acc, accScale := make([]float64, len(x)), make([]float64, len(x))
			for i := range acc {
				acc[i], accScale[i] = base[i]+dx[i], math.Abs(base[i])+dxScale[i]
			}
			dxa := put(t, d, tc.dt, tc.x, tc.l, base)
			switch err := d.Conv2DBackwardDataAccumulate(nil, dxa, dyv, wv, tc.p); {
			case errors.Is(err, backend.ErrNotImplemented):
				t.Logf("Conv2DBackwardDataAccumulate declined: %v", err)
				near(t, "dx left as it was", get(t, d, dxa), base, accScale, 0)
			case err != nil:
				t.Fatalf("Conv2DBackwardDataAccumulate: %v", err)
			default:
				near(t, "dx accumulated", get(t, d, dxa), acc, accScale, tol)
			}

			dwv := put(t, d, tc.dt, tc.w, tc.l, nanVals(len(w)))
			var dbv backend.View
			if tc.bias {
				dbv = vec(t, d, tc.dt, nanVals(tc.w[0]))
			}
			if !ok("Conv2DBackwardFilter", d.Conv2DBackwardFilter(nil, dwv, dbv, dyv, xv, tc.p)) {
				return
			}
			near(t, "dw", get(t, d, dwv), dw, dwScale, tol)
			if tc.bias {
				near(t, "db", get(t, d, dbv), db, dbScale, tol)
			}
		})
	}
}

// TestCuDNNConvMixedLayouts runs a channels-last input with a contiguous
// filter: cuDNN either computes it right or declines it for the fallback.
func TestCuDNNConvMixedLayouts(t *testing.T) {
	d := dnnGPU(t, CuDNNSettings{NoTF32: true})
	r := rand.New(rand.NewPCG(3, 3))
	xs, ws := [4]int{2, 4, 6, 6}, [4]int{4, 4, 3, 3}
	p := cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1)
	x, w := rounded(r, backend.Float32, 2*4*36), rounded(r, backend.Float32, 4*4*9)
	y, scale := make([]float64, 2*4*36), make([]float64, 2*4*36)
	ys := convEach(xs, ws, p, func(xi, wi, yi int) {
		y[yi] += x[xi] * w[wi]
		scale[yi] += math.Abs(x[xi] * w[wi])
	})
	yv := put(t, d, backend.Float32, ys, nhwc, nanVals(len(y)))
	err := d.Conv2D(nil, yv, put(t, d, backend.Float32, xs, nhwc, x), put(t, d, backend.Float32, ws, nchw, w), backend.View{}, p, false)
	if fallback(err) {
		t.Logf("declined: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	near(t, "y", get(t, d, yv), y, scale, dnnTol(backend.Float32))
}

// TestCuDNNFallbacks checks the views and settings that cuDNN does not
// take: each returns an error wrapping backend.ErrNotImplemented (and
// counts a fallback), while bad geometry is an error of its own.
func TestCuDNNFallbacks(t *testing.T) {
	d := dnnGPU(t, CuDNNSettings{})
	r := rand.New(rand.NewPCG(4, 4))
	xs, ws := [4]int{2, 3, 5, 5}, [4]int{4, 3, 3, 3}
	p := cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1)
	x := put(t, d, backend.Float32, xs, nchw, rounded(r, backend.Float32, 2*3*25))
	w := put(t, d, backend.Float32, ws, nchw, rounded(r, backend.Float32, 4*3*9))
	y := put(t, d, backend.Float32, [4]int{2, 4, 5, 5}, nchw, nanVals(2*4*25))
	transposed := y
	transposed.Strides = []int{100, 25, 1, 5} // H and W swapped: neither NCHW nor NHWC
	f64x := put(t, d, backend.Float64, xs, nchw, make([]float64, 2*3*25))
	f64w := put(t, d, backend.Float64, ws, nchw, make([]float64, 4*3*9))
	f64y := put(t, d, backend.Float64, [4]int{2, 4, 5, 5}, nchw, make([]float64, 2*4*25))
	before := CuDNNStatistics().Fallbacks
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"strided output", func() error { return d.Conv2D(nil, transposed, x, w, backend.View{}, p, false) }},
		{"float64", func() error { return d.Conv2D(nil, f64y, f64x, f64w, backend.View{}, p, false) }},
		{"bias of another dtype", func() error {
			return d.Conv2D(nil, y, x, w, vec(t, d, backend.Float16, make([]float64, 4)), p, false)
		}},
		{"disabled", func() error {
			SetCuDNN(CuDNNSettings{Disabled: true})
			defer SetCuDNN(CuDNNSettings{})
			return d.Conv2D(nil, y, x, w, backend.View{}, p, false)
		}},
		{"disabled pooling", func() error {
			SetCuDNN(CuDNNSettings{Disabled: true})
			defer SetCuDNN(CuDNNSettings{})
			return d.Pool2D(nil, y, y, backend.Pool2DParams{Mode: backend.MaxPool, Kernel: [2]int{1, 1}, Stride: [2]int{1, 1}})
		}},
		{"disabled batch norm", func() error {
			SetCuDNN(CuDNNSettings{Disabled: true})
			defer SetCuDNN(CuDNNSettings{})
			c := vec(t, d, backend.Float32, make([]float64, 4))
			return d.BatchNormInfer(nil, y, y, c, c, c, c, 1e-5)
		}},
	} {
		if err := tc.run(); !fallback(err) {
			t.Errorf("%s: %v, want an error wrapping ErrNotImplemented", tc.name, err)
		}
	}
	if got := CuDNNStatistics().Fallbacks - before; got < 6 {
		t.Errorf("%d fallbacks counted, want 6", got)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"output of the wrong size", d.Conv2D(nil, x, x, w, backend.View{}, p, false)},
		{"zero stride", d.Conv2D(nil, y, x, w, backend.View{}, cp([2]int{0, 1}, [2]int{1, 1}, [2]int{1, 1}, 1), false)},
		{"groups not dividing", d.Conv2D(nil, y, x, w, backend.View{}, cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 2), false)},
	} {
		if tc.err == nil || fallback(tc.err) {
			t.Errorf("%s: %v, want an error that is not a fallback", tc.name, tc.err)
		}
	}
}

// TestCuDNNBenchmarkCache checks that benchmark mode times each direction
// of a new shape once and reuses its choice, that the search workspace
// comes from the caching allocator under its own region, and that the
// heuristics are asked once per shape outside benchmark mode.
func TestCuDNNBenchmarkCache(t *testing.T) {
	d := dnnGPU(t, CuDNNSettings{Benchmark: true})
	r := rand.New(rand.NewPCG(5, 5))
	xs, ws := [4]int{4, 16, 13, 11}, [4]int{24, 16, 3, 3} // a shape no other test uses
	p := cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1)
	x := put(t, d, backend.Float32, xs, nchw, rounded(r, backend.Float32, 4*16*13*11))
	w := put(t, d, backend.Float32, ws, nchw, rounded(r, backend.Float32, 24*16*9))
	y := put(t, d, backend.Float32, [4]int{4, 24, 13, 11}, nchw, nanVals(4*24*13*11))
	dx := put(t, d, backend.Float32, xs, nchw, nanVals(4*16*13*11))
	dw := put(t, d, backend.Float32, ws, nchw, nanVals(24*16*9))
	d.Allocator().SetHistory(true, 0, false)
	defer d.Allocator().SetHistory(false, 0, false)
	step := func() {
		t.Helper()
		if err := d.Conv2D(nil, y, x, w, backend.View{}, p, false); err != nil {
			t.Fatal(err)
		}
		if err := d.Conv2DBackwardData(nil, dx, y, w, p); err != nil {
			t.Fatal(err)
		}
		if err := d.Conv2DBackwardFilter(nil, dw, backend.View{}, y, x, p); err != nil {
			t.Fatal(err)
		}
		if err := d.DefaultStream().Synchronize(); err != nil {
			t.Fatal(err)
		}
	}
	s0 := CuDNNStatistics()
	step()
	s1 := CuDNNStatistics()
	if n := s1.Searches - s0.Searches; n != 3 || s1.SearchTime <= s0.SearchTime {
		t.Errorf("first step: %d searches in %v, want 3 (forward, data, filter)", n, s1.SearchTime-s0.SearchTime)
	}
	step()
	step()
	if s2 := CuDNNStatistics(); s2.Searches != s1.Searches || s2.SearchTime != s1.SearchTime {
		t.Errorf("later steps searched again: %d searches", s2.Searches-s1.Searches)
	}
	ws0 := false
	for _, e := range d.Allocator().Snapshot().History {
		if e.Region == CuDNNWorkspaceRegion && e.Action == trace.ActionAlloc {
			ws0 = true
		}
	}
	if !ws0 {
		t.Errorf("no allocation under %q in the allocator's history", CuDNNWorkspaceRegion)
	}
	SetCuDNN(CuDNNSettings{})
	h0 := CuDNNStatistics()
	step()
	step()
	if h1 := CuDNNStatistics(); h1.Heuristics-h0.Heuristics != 3 || h1.Searches != h0.Searches {
		t.Errorf("heuristic mode: %d heuristic queries and %d searches over two steps, want 3 and 0",
			h1.Heuristics-h0.Heuristics, h1.Searches-h0.Searches)
	}
	SetCuDNN(CuDNNSettings{Benchmark: true})
	step() // back in benchmark mode: the first choices are kept
	if s3 := CuDNNStatistics(); s3.Searches != h0.Searches {
		t.Errorf("benchmark mode again: %d new searches, want 0", s3.Searches-h0.Searches)
	}
}

// TestCuDNNDeterministic checks that in deterministic mode the gradients,
// computed three times from the same inputs, are bit-identical.
func TestCuDNNDeterministic(t *testing.T) {
	for _, bench := range []bool{false, true} {
		t.Run(fmt.Sprintf("benchmark=%v", bench), func(t *testing.T) {
			d := dnnGPU(t, CuDNNSettings{Deterministic: true, Benchmark: bench})
			r := rand.New(rand.NewPCG(6, 6))
			xs, ws := [4]int{8, 32, 14, 14}, [4]int{32, 32, 3, 3}
			p := cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1)
			x := put(t, d, backend.Float32, xs, nchw, rounded(r, backend.Float32, 8*32*196))
			w := put(t, d, backend.Float32, ws, nchw, rounded(r, backend.Float32, 32*32*9))
			dy := put(t, d, backend.Float32, xs, nchw, rounded(r, backend.Float32, 8*32*196))
			var first [2][]float64
			for rep := range 3 {
				dx := put(t, d, backend.Float32, xs, nchw, nanVals(8*32*196))
				dw := put(t, d, backend.Float32, ws, nchw, nanVals(32*32*9))
				if err := d.Conv2DBackwardData(nil, dx, dy, w, p); err != nil {
					t.Fatal(err)
				}
				if err := d.Conv2DBackwardFilter(nil, dw, backend.View{}, dy, x, p); err != nil {
					t.Fatal(err)
				}
				got := [2][]float64{get(t, d, dx), get(t, d, dw)}
				if rep == 0 {
					first = got
					continue
				}
				for i, name := range []string{"dx", "dw"} {
					if !slices.EqualFunc(got[i], first[i], func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
						t.Errorf("%s differs between runs %d and 0", name, rep)
					}
				}
			}
		})
	}
}

// poolRef computes pooling and its gradient on the host in NCHW order: y,
// and dx for the gradient dy.
func poolRef(x, dy []float64, xs [4]int, p backend.Pool2DParams) (y, dx []float64) {
	n, c, h, w := xs[0], xs[1], xs[2], xs[3]
	oh := backend.ConvOutputSize(h, p.Kernel[0], p.Stride[0], p.Padding[0], 1)
	ow := backend.ConvOutputSize(w, p.Kernel[1], p.Stride[1], p.Padding[1], 1)
	y, dx = make([]float64, n*c*oh*ow), make([]float64, len(x))
	for plane := range n * c {
		for oy := range oh {
			for ox := range ow {
				yi := (plane*oh+oy)*ow + ox
				best, arg, sum, count := math.Inf(-1), -1, 0.0, 0
				var in []int
				for ky := range p.Kernel[0] {
					for kx := range p.Kernel[1] {
						iy, ix := oy*p.Stride[0]-p.Padding[0]+ky, ox*p.Stride[1]-p.Padding[1]+kx
						if iy < 0 || iy >= h || ix < 0 || ix >= w {
							continue
						}
						i := (plane*h+iy)*w + ix
						in = append(in, i)
						sum += x[i]
						count++
						if x[i] > best {
							best, arg = x[i], i
						}
					}
				}
				if p.Mode == backend.MaxPool {
					y[yi] = best
					dx[arg] += dy[yi]
					continue
				}
				div := float64(count)
				if p.CountIncludePad {
					// The window clipped to the padded input, as cuDNN and PyTorch count it.
					y0, x0 := oy*p.Stride[0]-p.Padding[0], ox*p.Stride[1]-p.Padding[1]
					y1, x1 := min(y0+p.Kernel[0], h+p.Padding[0]), min(x0+p.Kernel[1], w+p.Padding[1])
					div = float64((y1 - y0) * (x1 - x0))
				}
				y[yi] = sum / div
				for _, i := range in {
					dx[i] += dy[yi] / div
				}
			}
		}
	}
	return y, dx
}

func TestCuDNNPool(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dt    backend.DType
		l     layout
		xs    [4]int
		p     backend.Pool2DParams
		maybe bool // cuDNN may lack it: a fallback is logged, not failed
	}{
		{"max 3x3 stride 2 pad 1", backend.Float32, nchw, [4]int{2, 3, 9, 8}, backend.Pool2DParams{Mode: backend.MaxPool, Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}, false},
		{"max 2x2 nhwc", backend.Float32, nhwc, [4]int{2, 8, 6, 6}, backend.Pool2DParams{Mode: backend.MaxPool, Kernel: [2]int{2, 2}, Stride: [2]int{2, 2}}, false},
		{"max f16 nhwc", backend.Float16, nhwc, [4]int{2, 8, 7, 7}, backend.Pool2DParams{Mode: backend.MaxPool, Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}, false},
		{"avg exclude pad", backend.Float32, nchw, [4]int{2, 3, 7, 6}, backend.Pool2DParams{Mode: backend.AvgPool, Kernel: [2]int{3, 2}, Stride: [2]int{2, 1}, Padding: [2]int{1, 1}}, false},
		{"avg include pad", backend.Float32, nchw, [4]int{2, 3, 7, 6}, backend.Pool2DParams{Mode: backend.AvgPool, Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, CountIncludePad: true}, false},
		{"avg bf16 global", backend.BFloat16, nchw, [4]int{2, 4, 7, 7}, backend.Pool2DParams{Mode: backend.AvgPool, Kernel: [2]int{7, 7}, Stride: [2]int{1, 1}}, true},
		// Channels-last: pool.cu's kernels (pool.go).
		{"max bf16 nhwc odd channels", backend.BFloat16, nhwc, [4]int{2, 7, 9, 8}, backend.Pool2DParams{Mode: backend.MaxPool, Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}, false},
		{"avg nhwc exclude pad", backend.Float32, nhwc, [4]int{2, 6, 7, 6}, backend.Pool2DParams{Mode: backend.AvgPool, Kernel: [2]int{3, 2}, Stride: [2]int{2, 1}, Padding: [2]int{1, 1}}, false},
		{"avg bf16 global nhwc", backend.BFloat16, nhwc, [4]int{2, 64, 7, 7}, backend.Pool2DParams{Mode: backend.AvgPool, Kernel: [2]int{7, 7}, Stride: [2]int{7, 7}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, det := range []bool{false, true} {
				d := dnnGPU(t, CuDNNSettings{Deterministic: det})
				r := rand.New(rand.NewPCG(8, 8))
				n := tc.xs[0] * tc.xs[1] * tc.xs[2] * tc.xs[3]
				// Distinct values, so that every window has one maximum.
				x := make([]float64, n)
				for i, k := range r.Perm(n) {
					x[i] = backendtest.Quantize(tc.dt, float64(k-n/2)/float64(n)*4)
				}
				ys := [4]int{tc.xs[0], tc.xs[1], backend.ConvOutputSize(tc.xs[2], tc.p.Kernel[0], tc.p.Stride[0], tc.p.Padding[0], 1),
					backend.ConvOutputSize(tc.xs[3], tc.p.Kernel[1], tc.p.Stride[1], tc.p.Padding[1], 1)}
				dy := rounded(r, tc.dt, ys[0]*ys[1]*ys[2]*ys[3])
				yRef, dxRef := poolRef(x, dy, tc.xs, tc.p)
				xv := put(t, d, tc.dt, tc.xs, tc.l, x)
				yv := put(t, d, tc.dt, ys, tc.l, nanVals(len(yRef)))
				if err := d.Pool2D(nil, yv, xv, tc.p); tc.maybe && fallback(err) {
					t.Logf("cuDNN lacks it here: %v", err)
					return
				} else if err != nil {
					t.Fatalf("Pool2D: %v", err)
				}
				ones := func(n int) []float64 {
					s := make([]float64, n)
					for i := range s {
						s[i] = 1
					}
					return s
				}
				tol := dnnTol(tc.dt)
				near(t, "y", get(t, d, yv), yRef, ones(len(yRef)), tol)
				dxv := put(t, d, tc.dt, tc.xs, tc.l, nanVals(n))
				if err := d.Pool2DBackward(nil, dxv, put(t, d, tc.dt, ys, tc.l, dy), xv, yv, tc.p); err != nil {
					t.Fatalf("Pool2DBackward: %v", err)
				}
				near(t, "dx", get(t, d, dxv), dxRef, ones(n), 4*tol)
			}
		})
	}
}

// bnRef computes batch normalization in training mode and its gradient
// on the host, in NCHW order.
func bnRef(x, dy, scale, bias []float64, xs [4]int, eps float64) (y, mean, invStd, varUnbiased, dx, dscale, dbias []float64) {
	n, c, hw := xs[0], xs[1], xs[2]*xs[3]
	m := float64(n * hw)
	y, dx = make([]float64, len(x)), make([]float64, len(x))
	mean, invStd, varUnbiased = make([]float64, c), make([]float64, c), make([]float64, c)
	dscale, dbias = make([]float64, c), make([]float64, c)
	each := func(ch int, fn func(i int)) {
		for ni := range n {
			for k := range hw {
				fn((ni*c+ch)*hw + k)
			}
		}
	}
	for ch := range c {
		var s, ss float64
		each(ch, func(i int) { s += x[i] })
		mean[ch] = s / m
		each(ch, func(i int) { ss += (x[i] - mean[ch]) * (x[i] - mean[ch]) })
		invStd[ch] = 1 / math.Sqrt(ss/m+eps)
		varUnbiased[ch] = ss / (m - 1)
		var sdy, sdyx float64
		each(ch, func(i int) {
			xh := (x[i] - mean[ch]) * invStd[ch]
			y[i] = scale[ch]*xh + bias[ch]
			sdy += dy[i]
			sdyx += dy[i] * xh
		})
		dscale[ch], dbias[ch] = sdyx, sdy
		each(ch, func(i int) {
			xh := (x[i] - mean[ch]) * invStd[ch]
			dx[i] = scale[ch] * invStd[ch] / m * (m*dy[i] - sdy - xh*sdyx)
		})
	}
	return
}

// TestCuDNNBatchNorm checks batch norm's training, backward and inference
// calls against a float64 reference: on cuDNN for NCHW tensors, on
// kernels/norm.cu for channels-last ones.
func TestCuDNNBatchNorm(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dt    backend.DType
		l     layout
		xs    [4]int
		maybe bool // cuDNN may lack it: a fallback is logged, not failed
	}{
		{"f32", backend.Float32, nchw, [4]int{4, 3, 5, 6}, false},
		{"f32 nhwc", backend.Float32, nhwc, [4]int{4, 8, 5, 5}, false},
		{"f16", backend.Float16, nchw, [4]int{4, 3, 6, 6}, false},
		{"f16 nhwc", backend.Float16, nhwc, [4]int{8, 16, 4, 4}, false},
		{"bf16", backend.BFloat16, nchw, [4]int{4, 4, 5, 5}, true},
		// Channels-last tensors take vram's own kernels (batchnorm.go):
		// channels that do not fill a block, many block rows of partial
		// sums, and a ResNet's last stage.
		{"bf16 nhwc 40 channels", backend.BFloat16, nhwc, [4]int{4, 40, 6, 6}, false},
		{"f32 nhwc many rows", backend.Float32, nhwc, [4]int{16, 70, 28, 28}, false},
		{"bf16 nhwc 2048 channels", backend.BFloat16, nhwc, [4]int{8, 2048, 2, 2}, false},
		{"f16 nhwc one row a channel block", backend.Float16, nhwc, [4]int{2, 33, 1, 3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dnnGPU(t, CuDNNSettings{})
			r := rand.New(rand.NewPCG(9, 9))
			n, c := tc.xs[0]*tc.xs[1]*tc.xs[2]*tc.xs[3], tc.xs[1]
			x, dy := rounded(r, tc.dt, n), rounded(r, tc.dt, n)
			for i := range x {
				x[i] = backendtest.Quantize(tc.dt, 3*x[i]+0.5) // a mean and a spread to normalize away
			}
			scale, bias := rounded(r, backend.Float32, c), rounded(r, backend.Float32, c)
			runMean, runVar := rounded(r, backend.Float32, c), make([]float64, c)
			for i := range runVar {
				runVar[i] = 0.5 + r.Float64()
			}
			const eps, momentum = 1e-5, 0.1
			y, mean, invStd, varU, dx, dscale, dbias := bnRef(x, dy, scale, bias, tc.xs, eps)
			tol := dnnTol(tc.dt)
			ones := func(v []float64, k float64) []float64 {
				s := make([]float64, len(v))
				for i := range s {
					s[i] = k * (1 + math.Abs(v[i]))
				}
				return s
			}
			xv := put(t, d, tc.dt, tc.xs, tc.l, x)
			yv := put(t, d, tc.dt, tc.xs, tc.l, nanVals(n))
			sv, bv := vec(t, d, backend.Float32, scale), vec(t, d, backend.Float32, bias)
			rm, rv := vec(t, d, backend.Float32, runMean), vec(t, d, backend.Float32, runVar)
			sm, si := vec(t, d, backend.Float32, nanVals(c)), vec(t, d, backend.Float32, nanVals(c))
			if err := d.BatchNormTrain(nil, yv, xv, sv, bv, rm, rv, sm, si, momentum, eps); tc.maybe && fallback(err) {
				t.Logf("cuDNN lacks it here: %v", err)
				return
			} else if err != nil {
				t.Fatalf("BatchNormTrain: %v", err)
			}
			near(t, "y", get(t, d, yv), y, ones(y, 1), 4*tol)
			near(t, "saveMean", get(t, d, sm), mean, ones(mean, 1), 1e-4)
			near(t, "saveInvStd", get(t, d, si), invStd, ones(invStd, 1), 1e-3)
			wantRM, wantRV := make([]float64, c), make([]float64, c)
			for i := range c {
				wantRM[i] = (1-momentum)*runMean[i] + momentum*mean[i]
				wantRV[i] = (1-momentum)*runVar[i] + momentum*varU[i]
			}
			near(t, "runMean", get(t, d, rm), wantRM, ones(wantRM, 1), 1e-4)
			near(t, "runVar", get(t, d, rv), wantRV, ones(wantRV, 1), 1e-3)

			dxv := put(t, d, tc.dt, tc.xs, tc.l, nanVals(n))
			ds, dbv := vec(t, d, backend.Float32, nanVals(c)), vec(t, d, backend.Float32, nanVals(c))
			if err := d.BatchNormBackward(nil, dxv, ds, dbv, put(t, d, tc.dt, tc.xs, tc.l, dy), xv, sv, sm, si, eps); err != nil {
				t.Fatalf("BatchNormBackward: %v", err)
			}
			near(t, "dx", get(t, d, dxv), dx, ones(dx, 1), 8*tol)
			m := float64(n / c)
			near(t, "dscale", get(t, d, ds), dscale, ones(dscale, m), tol)
			near(t, "dbias", get(t, d, dbv), dbias, ones(dbias, m), tol)

			// Inference with the running statistics as they are now.
			rmNow, rvNow := get(t, d, rm), get(t, d, rv)
			yi := put(t, d, tc.dt, tc.xs, tc.l, nanVals(n))
			if err := d.BatchNormInfer(nil, yi, xv, sv, bv, rm, rv, eps); err != nil {
				t.Fatalf("BatchNormInfer: %v", err)
			}
			want := make([]float64, n)
			hw := tc.xs[2] * tc.xs[3]
			for i := range want {
				ch := i / hw % c
				want[i] = scale[ch]*(x[i]-rmNow[ch])/math.Sqrt(rvNow[ch]+eps) + bias[ch]
			}
			near(t, "inference y", get(t, d, yi), want, ones(want, 1), 4*tol)
		})
	}
}

// TestCuDNNConcurrentStreams runs convolutions of several shapes from
// goroutines on their own streams (run with -race): the handle and the
// caches are shared under one lock, and every result is right.
func TestCuDNNConcurrentStreams(t *testing.T) {
	d := dnnGPU(t, CuDNNSettings{NoTF32: true})
	const workers = 4
	type work struct {
		x, w, y   backend.View
		want, tol []float64
	}
	p := cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1)
	jobs := make([]work, workers)
	for g := range jobs {
		r := rand.New(rand.NewPCG(uint64(g), 10))
		xs, ws := [4]int{2, 4, 6 + g, 6}, [4]int{3, 4, 3, 3}
		x, w := rounded(r, backend.Float32, 2*4*(6+g)*6), rounded(r, backend.Float32, 3*4*9)
		y, scale := make([]float64, 2*3*(6+g)*6), make([]float64, 2*3*(6+g)*6)
		ys := convEach(xs, ws, p, func(xi, wi, yi int) {
			y[yi] += x[xi] * w[wi]
			scale[yi] += math.Abs(x[xi] * w[wi])
		})
		for i := range scale {
			scale[i] = 2e-5*scale[i] + 1e-4
		}
		jobs[g] = work{put(t, d, backend.Float32, xs, nchw, x), put(t, d, backend.Float32, ws, nchw, w),
			put(t, d, backend.Float32, ys, nchw, nanVals(len(y))), y, scale}
	}
	errs := make(chan error, workers)
	for _, j := range jobs {
		go func() {
			errs <- func() error {
				s, err := d.NewStream(0)
				if err != nil {
					return err
				}
				defer s.Destroy()
				for range 20 {
					if err := d.Conv2D(s, j.y, j.x, j.w, backend.View{}, p, false); err != nil {
						return err
					}
				}
				return s.Synchronize()
			}()
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for g, j := range jobs {
		got := get(t, d, j.y)
		for i := range got {
			if e := math.Abs(got[i] - j.want[i]); !(e <= j.tol[i]) {
				t.Errorf("worker %d: y[%d] = %v, want %v", g, i, got[i], j.want[i])
				break
			}
		}
	}
}

// TestCuDNNSelfTest runs the device's cuDNN check.
func TestCuDNNSelfTest(t *testing.T) {
	d := dnnGPU(t, CuDNNSettings{})
	c := d.checkCuDNN()
	t.Logf("%s: %s", c.Status, c.Detail)
	if c.Status != "pass" {
		t.Errorf("cuDNN check: %+v", c)
	}
}

// TestCuDNNConvChoices: a convolution that ran is listed with the
// algorithm cuDNN chose for it, in its layout.
func TestCuDNNConvChoices(t *testing.T) {
	d := dnnGPU(t, CuDNNSettings{NoTF32: true, NoGraphAPI: true})
	r := rand.New(rand.NewPCG(5, 5))
	xs, ws := [4]int{2, 4, 7, 7}, [4]int{6, 4, 3, 3}
	p := cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1)
	ys := convEach(xs, ws, p, func(int, int, int) {})
	yv := put(t, d, backend.Float32, ys, nhwc, nanVals(ys[0]*ys[1]*ys[2]*ys[3]))
	x, w := rounded(r, backend.Float32, 2*4*49), rounded(r, backend.Float32, 6*4*9)
	if err := d.Conv2D(nil, yv, put(t, d, backend.Float32, xs, nhwc, x), put(t, d, backend.Float32, ws, nhwc, w), backend.View{}, p, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.CuDNNConvChoices() {
		if c.X == xs && c.W == ws && c.Direction == "forward" && !c.TF32 && c.LX == "NHWC" {
			if c.LW != "NHWC" || c.LY != "NHWC" || c.Algo < 0 || c.Math != mathName(cudnn.FMAMath) {
				t.Errorf("choice %v: want NHWC views and an FMA algorithm (TF32 off)", c)
			}
			t.Logf("%v", c)
			return
		}
	}
	t.Errorf("the convolution is not among %v", d.CuDNNConvChoices())
}

// TestFusedBatchNormReLU checks the fused batch norm of a residual block's
// end, y = max(0, bn(x) + r), and its backward pass (dy masked by y, the
// residual's gradient, dx, dscale and dbias) against a float64 reference,
// with and without a residual, in training and inference, and that NCHW
// tensors are declined with ErrNotImplemented.
func TestFusedBatchNormReLU(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dt       backend.DType
		xs       [4]int
		residual bool
	}{
		{"bf16 residual", backend.BFloat16, [4]int{4, 64, 6, 6}, true},
		{"f32 no residual", backend.Float32, [4]int{8, 40, 5, 5}, false},
		{"f16 residual odd channels", backend.Float16, [4]int{3, 33, 4, 5}, true},
		{"f32 residual many rows", backend.Float32, [4]int{16, 70, 28, 28}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dnnGPU(t, CuDNNSettings{})
			r := rand.New(rand.NewPCG(11, 4))
			n, c := tc.xs[0]*tc.xs[1]*tc.xs[2]*tc.xs[3], tc.xs[1]
			x, dy, res := rounded(r, tc.dt, n), rounded(r, tc.dt, n), make([]float64, n)
			for i := range x {
				x[i] = backendtest.Quantize(tc.dt, 3*x[i]+0.5)
			}
			if tc.residual {
				res = rounded(r, tc.dt, n)
			}
			scale, bias := rounded(r, backend.Float32, c), rounded(r, backend.Float32, c)
			runMean, runVar := rounded(r, backend.Float32, c), make([]float64, c)
			for i := range runVar {
				runVar[i] = 0.5 + r.Float64()
			}
			const eps, momentum = 1e-5, 0.1
			bnY, mean, invStd, _, _, _, _ := bnRef(x, dy, scale, bias, tc.xs, eps)
			want := make([]float64, n)
			for i := range want {
				want[i] = max(0, bnY[i]+res[i])
			}
			tol := dnnTol(tc.dt)
			ones := func(v []float64, k float64) []float64 {
				s := make([]float64, len(v))
				for i := range s {
					s[i] = k * (1 + math.Abs(v[i]))
				}
				return s
			}
			xv := put(t, d, tc.dt, tc.xs, nhwc, x)
			var rv, drv backend.View
			if tc.residual {
				rv = put(t, d, tc.dt, tc.xs, nhwc, res)
				drv = put(t, d, tc.dt, tc.xs, nhwc, nanVals(n))
			}
			yv := put(t, d, tc.dt, tc.xs, nhwc, nanVals(n))
			sv, bv := vec(t, d, backend.Float32, scale), vec(t, d, backend.Float32, bias)
			rm, rvar := vec(t, d, backend.Float32, runMean), vec(t, d, backend.Float32, runVar)
			sm, si := vec(t, d, backend.Float32, nanVals(c)), vec(t, d, backend.Float32, nanVals(c))
			if err := d.BatchNormTrainReLU(nil, yv, xv, rv, sv, bv, rm, rvar, sm, si, momentum, eps); err != nil {
				t.Fatalf("BatchNormTrainReLU: %v", err)
			}
			y := get(t, d, yv)
			near(t, "y", y, want, ones(want, 1), 4*tol)
			near(t, "saveMean", get(t, d, sm), mean, ones(mean, 1), 1e-4)
			near(t, "saveInvStd", get(t, d, si), invStd, ones(invStd, 1), 1e-3)

			// The reference backward pass masks dy by the device's own
			// output, as the kernels do; with two parts, dy + dy2 rounded
			// to the dtype, as a stored sum would be.
			dy2 := rounded(r, tc.dt, n)
			for _, parts := range []int{1, 2} {
				g := make([]float64, n)
				var dy2v backend.View
				if parts == 2 {
					dy2v = put(t, d, tc.dt, tc.xs, nhwc, dy2)
				}
				for i := range g {
					if y[i] > 0 {
						g[i] = dy[i]
						if parts == 2 {
							g[i] = backendtest.Quantize(tc.dt, dy[i]+dy2[i])
						}
					}
				}
				_, _, _, _, dx, dscale, dbias := bnRef(x, g, scale, bias, tc.xs, eps)
				dxv := put(t, d, tc.dt, tc.xs, nhwc, nanVals(n))
				ds, dbv := vec(t, d, backend.Float32, nanVals(c)), vec(t, d, backend.Float32, nanVals(c))
				if tc.residual {
					drv = put(t, d, tc.dt, tc.xs, nhwc, nanVals(n))
				}
				if err := d.BatchNormBackwardReLU(nil, dxv, drv, ds, dbv, put(t, d, tc.dt, tc.xs, nhwc, dy), dy2v, yv, xv, sv, sm, si, eps); err != nil {
					t.Fatalf("BatchNormBackwardReLU, %d parts: %v", parts, err)
				}
				near(t, fmt.Sprintf("dx, %d parts", parts), get(t, d, dxv), dx, ones(dx, 1), 8*tol)
				m := float64(n / c)
				near(t, fmt.Sprintf("dscale, %d parts", parts), get(t, d, ds), dscale, ones(dscale, m), tol)
				near(t, fmt.Sprintf("dbias, %d parts", parts), get(t, d, dbv), dbias, ones(dbias, m), tol)
				if tc.residual {
					near(t, fmt.Sprintf("dr, %d parts", parts), get(t, d, drv), g, ones(g, 0), 0)
				}
			}

			// Inference with the running statistics as they are now.
			rmNow, rvNow := get(t, d, rm), get(t, d, rvar)
			yi := put(t, d, tc.dt, tc.xs, nhwc, nanVals(n))
			if err := d.BatchNormInferReLU(nil, yi, xv, rv, sv, bv, rm, rvar, eps); err != nil {
				t.Fatalf("BatchNormInferReLU: %v", err)
			}
			hw := tc.xs[2] * tc.xs[3]
			for i := range want {
				// put lays the NCHW-ordered values out channels-last.
				ch := i / hw % c
				want[i] = max(0, scale[ch]*(x[i]-rmNow[ch])/math.Sqrt(rvNow[ch]+eps)+bias[ch]+res[i])
			}
			near(t, "inference y", get(t, d, yi), want, ones(want, 1), 4*tol)
		})
	}
	t.Run("nchw declined", func(t *testing.T) {
		d := dnnGPU(t, CuDNNSettings{})
		xs := [4]int{2, 4, 3, 3}
		xv := put(t, d, backend.Float32, xs, nchw, make([]float64, 72))
		yv := put(t, d, backend.Float32, xs, nchw, make([]float64, 72))
		ch := func() backend.View { return vec(t, d, backend.Float32, make([]float64, 4)) }
		err := d.BatchNormTrainReLU(nil, yv, xv, backend.View{}, ch(), ch(), ch(), ch(), ch(), ch(), 0.1, 1e-5)
		if !errors.Is(err, backend.ErrNotImplemented) {
			t.Fatalf("NCHW: got %v, want ErrNotImplemented", err)
		}
	})
}
