package vram

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"
)

// The references below compute each op directly from its definition, in
// float64 on the host, loop by loop.

// refConv2d is the direct convolution of x [N, C, H, W] with w [O, C/G,
// KH, KW] and bias [O] (nil: none).
func refConv2d(x []float64, xs []int, w []float64, ws []int, bias []float64, p Conv2dParams) ([]float64, []int) {
	p = p.resolve("ref", false)
	n, c, h, wd := xs[0], xs[1], xs[2], xs[3]
	o, cg, kh, kw := ws[0], ws[1], ws[2], ws[3]
	og := o / p.Groups
	oh := (h+2*p.Padding[0]-p.Dilation[0]*(kh-1)-1)/p.Stride[0] + 1
	ow := (wd+2*p.Padding[1]-p.Dilation[1]*(kw-1)-1)/p.Stride[1] + 1
	out := make([]float64, n*o*oh*ow)
	for b := range n {
		for co := range o {
			g := co / og
			for y := range oh {
				for xx := range ow {
					s := 0.0
					if bias != nil {
						s = bias[co]
					}
					for ci := range cg {
						cin := g*cg + ci
						for i := range kh {
							iy := y*p.Stride[0] - p.Padding[0] + i*p.Dilation[0]
							if iy < 0 || iy >= h {
								continue
							}
							for j := range kw {
								ix := xx*p.Stride[1] - p.Padding[1] + j*p.Dilation[1]
								if ix < 0 || ix >= wd {
									continue
								}
								s += x[((b*c+cin)*h+iy)*wd+ix] * w[((co*cg+ci)*kh+i)*kw+j]
							}
						}
					}
					out[((b*o+co)*oh+y)*ow+xx] = s
				}
			}
		}
	}
	_ = c
	return out, []int{n, o, oh, ow}
}

// refConvTranspose2d scatters each input element times the kernel into
// the output: x [N, C, H, W], w [C, O/G, KH, KW].
func refConvTranspose2d(x []float64, xs []int, w []float64, ws []int, bias []float64, p Conv2dParams) ([]float64, []int) {
	p = p.resolve("ref", true)
	n, c, h, wd := xs[0], xs[1], xs[2], xs[3]
	og, kh, kw := ws[1], ws[2], ws[3]
	cg := c / p.Groups
	o := og * p.Groups
	oh := (h-1)*p.Stride[0] - 2*p.Padding[0] + p.Dilation[0]*(kh-1) + p.OutputPadding[0] + 1
	ow := (wd-1)*p.Stride[1] - 2*p.Padding[1] + p.Dilation[1]*(kw-1) + p.OutputPadding[1] + 1
	out := make([]float64, n*o*oh*ow)
	for b := range n {
		for ci := range c {
			g := ci / cg
			for y := range h {
				for xx := range wd {
					v := x[((b*c+ci)*h+y)*wd+xx]
					for j := range og {
						co := g*og + j
						for i := range kh {
							oy := y*p.Stride[0] - p.Padding[0] + i*p.Dilation[0]
							if oy < 0 || oy >= oh {
								continue
							}
							for k := range kw {
								ox := xx*p.Stride[1] - p.Padding[1] + k*p.Dilation[1]
								if ox < 0 || ox >= ow {
									continue
								}
								out[((b*o+co)*oh+oy)*ow+ox] += v * w[((ci*og+j)*kh+i)*kw+k]
							}
						}
					}
				}
			}
		}
	}
	if bias != nil {
		for i := range out {
			out[i] += bias[(i/(oh*ow))%o]
		}
	}
	return out, []int{n, o, oh, ow}
}

// refPool computes max or average pooling directly, as PyTorch's CPU
// kernels do: a window's maximum is NaN when it holds one, and the
// divisor of average pooling counts the taps inside the padded input (or
// the input alone with ExcludePad), unless DivisorOverride replaces it.
func refPool(x []float64, xs []int, p Pool2dParams, avg bool) ([]float64, []int) {
	p = p.resolve("ref", avg)
	n, c, h, w := xs[0], xs[1], xs[2], xs[3]
	size := func(in, k, s, pad, d int) int {
		span := in + 2*pad - d*(k-1) - 1
		if !p.CeilMode {
			return int(math.Floor(float64(span)/float64(s))) + 1
		}
		o := int(math.Ceil(float64(span)/float64(s))) + 1
		if (o-1)*s >= in+pad {
			o--
		}
		return o
	}
	oh := size(h, p.Kernel[0], p.Stride[0], p.Padding[0], p.Dilation[0])
	ow := size(w, p.Kernel[1], p.Stride[1], p.Padding[1], p.Dilation[1])
	out := make([]float64, n*c*oh*ow)
	for nc := range n * c {
		for y := range oh {
			for xx := range ow {
				best, sum, cnt, padded := math.Inf(-1), 0.0, 0, 0
				for i := range p.Kernel[0] {
					iy := y*p.Stride[0] - p.Padding[0] + i*p.Dilation[0]
					for j := range p.Kernel[1] {
						ix := xx*p.Stride[1] - p.Padding[1] + j*p.Dilation[1]
						if iy < h+p.Padding[0] && ix < w+p.Padding[1] {
							padded++
						}
						if iy < 0 || iy >= h || ix < 0 || ix >= w {
							continue
						}
						v := x[(nc*h+iy)*w+ix]
						if v > best || math.IsNaN(v) {
							best = v
						}
						sum += v
						cnt++
					}
				}
				r := best
				if avg {
					div := padded
					switch {
					case p.DivisorOverride != 0:
						div = p.DivisorOverride
					case p.ExcludePad:
						div = cnt
					}
					r = sum / float64(div)
				}
				out[(nc*oh+y)*ow+xx] = r
			}
		}
	}
	return out, []int{n, c, oh, ow}
}

// refAdaptiveAvg computes adaptive average pooling directly.
func refAdaptiveAvg(x []float64, xs []int, oh, ow int) ([]float64, []int) {
	n, c, h, w := xs[0], xs[1], xs[2], xs[3]
	out := make([]float64, n*c*oh*ow)
	for nc := range n * c {
		for y := range oh {
			y0, y1 := y*h/oh, ((y+1)*h+oh-1)/oh
			for xx := range ow {
				x0, x1 := xx*w/ow, ((xx+1)*w+ow-1)/ow
				s := 0.0
				for i := y0; i < y1; i++ {
					for j := x0; j < x1; j++ {
						s += x[(nc*h+i)*w+j]
					}
				}
				out[(nc*oh+y)*ow+xx] = s / float64((y1-y0)*(x1-x0))
			}
		}
	}
	return out, []int{n, c, oh, ow}
}

func closeTo(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.IsNaN(got[i]) || math.Abs(got[i]-want[i]) > tol*(1+math.Abs(want[i])) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// convCase is one convolution of the tables: input and weight shapes and
// parameters, with or without a bias.
type convCase struct {
	name   string
	x, w   []int
	p      Conv2dParams
	noBias bool
}

var convCases = []convCase{
	{"1x1", []int{2, 3, 4, 4}, []int{5, 3, 1, 1}, Conv2dParams{}, false},
	{"3x3", []int{2, 3, 5, 5}, []int{4, 3, 3, 3}, Conv2dParams{}, false},
	{"3x3 padded no bias", []int{1, 2, 5, 4}, []int{3, 2, 3, 3}, Conv2dParams{Padding: [2]int{1, 1}}, true},
	{"stride 2 odd size", []int{2, 2, 7, 5}, []int{3, 2, 3, 3}, Conv2dParams{Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}, false},
	{"rectangular kernel and stride", []int{1, 2, 6, 7}, []int{2, 2, 2, 3}, Conv2dParams{Stride: [2]int{1, 2}, Padding: [2]int{0, 1}}, false},
	{"dilation 2", []int{1, 2, 7, 7}, []int{2, 2, 3, 3}, Conv2dParams{Dilation: [2]int{2, 2}, Padding: [2]int{2, 1}}, false},
	{"groups 2", []int{2, 4, 5, 5}, []int{6, 2, 3, 3}, Conv2dParams{Groups: 2, Padding: [2]int{1, 1}}, false},
	{"depthwise", []int{1, 3, 5, 6}, []int{3, 1, 3, 3}, Conv2dParams{Groups: 3, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}, true},
	{"kernel equals padded input", []int{1, 1, 3, 3}, []int{2, 1, 5, 5}, Conv2dParams{Padding: [2]int{1, 1}}, false},
}

// convTCases are transposed convolutions; w is [C, O/G, KH, KW].
var convTCases = []convCase{
	{"1x1", []int{2, 3, 3, 3}, []int{3, 2, 1, 1}, Conv2dParams{}, false},
	{"3x3", []int{1, 2, 4, 4}, []int{2, 3, 3, 3}, Conv2dParams{}, false},
	{"stride 2 padded", []int{2, 2, 3, 4}, []int{2, 2, 3, 3}, Conv2dParams{Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}, true},
	{"stride 2 output padding", []int{1, 2, 3, 3}, []int{2, 3, 3, 3}, Conv2dParams{Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, OutputPadding: [2]int{1, 0}}, false},
	{"stride 2 kernel 2", []int{1, 3, 3, 2}, []int{3, 2, 2, 2}, Conv2dParams{Stride: [2]int{2, 2}}, false},
	{"dilation and groups", []int{1, 4, 3, 3}, []int{4, 1, 3, 2}, Conv2dParams{Dilation: [2]int{2, 1}, Groups: 2, Padding: [2]int{1, 0}}, false},
}

func convInputs(tc convCase, transposed bool) (x, w, b *Tensor) {
	x, w = rnd(11, tc.x...), rnd(12, tc.w...)
	if !tc.noBias {
		o := tc.w[0]
		if transposed {
			o = tc.w[1] * max(tc.p.Groups, 1)
		}
		b = rnd(13, o)
	}
	return x, w, b
}

func floats(t *Tensor) []float64 {
	if t == nil {
		return nil
	}
	return t.Float64s()
}

// withoutNative runs fn with the devices' native kernels off (when off is
// set), restoring them after.
func withoutNative(off bool, fn func()) {
	if off {
		noNativeConv.Store(true)
		defer noNativeConv.Store(false)
	}
	fn()
}

func TestConv2dMatchesReference(t *testing.T) {
	for _, tc := range convCases {
		t.Run(tc.name, func(t *testing.T) {
			x, w, b := convInputs(tc, false)
			want, ws := refConv2d(x.Float64s(), tc.x, w.Float64s(), tc.w, floats(b), tc.p)
			y := Conv2d(x, w, b, tc.p)
			if !slices.Equal(y.Shape(), Shape(ws)) {
				t.Fatalf("shape %v, want %v", y.Shape(), ws)
			}
			closeTo(t, "conv2d", y.Float64s(), want, 1e-12)
			// Channels-last input and weight: the same values, in the
			// channels-last format.
			yc := Conv2d(x.Contiguous(ChannelsLast), w.Contiguous(ChannelsLast), b, tc.p)
			if ws[1] > 1 && ws[2]*ws[3] > 1 && !yc.IsContiguous(ChannelsLast) {
				t.Errorf("channels-last input gave strides %v", yc.Strides())
			}
			closeTo(t, "conv2d channels-last", yc.Float64s(), want, 1e-12)
			// An unbatched input.
			y1 := Conv2d(x.Select(0, 0), w, b, tc.p)
			closeTo(t, "conv2d unbatched", y1.Float64s(), want[:len(want)/tc.x[0]], 1e-12)
		})
	}
}

func TestConvTranspose2dMatchesReference(t *testing.T) {
	for _, tc := range convTCases {
		t.Run(tc.name, func(t *testing.T) {
			x, w, b := convInputs(tc, true)
			want, ws := refConvTranspose2d(x.Float64s(), tc.x, w.Float64s(), tc.w, floats(b), tc.p)
			y := ConvTranspose2d(x, w, b, tc.p)
			if !slices.Equal(y.Shape(), Shape(ws)) {
				t.Fatalf("shape %v, want %v", y.Shape(), ws)
			}
			closeTo(t, "conv_transpose2d", y.Float64s(), want, 1e-12)
			yc := ConvTranspose2d(x.Contiguous(ChannelsLast), w, b, tc.p)
			closeTo(t, "conv_transpose2d channels-last", yc.Float64s(), want, 1e-12)
		})
	}
}

// poolCase is one pooling of the tables.
type poolCase struct {
	name string
	x    []int
	p    Pool2dParams
}

var poolCases = []poolCase{
	{"2x2", []int{2, 3, 4, 4}, Pool2dParams{Kernel: [2]int{2, 2}}},
	{"3x3 stride 2 padded odd", []int{1, 2, 7, 5}, Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}},
	{"rectangular overlapping", []int{2, 1, 5, 6}, Pool2dParams{Kernel: [2]int{2, 3}, Stride: [2]int{1, 2}, Padding: [2]int{1, 0}}},
	{"exclude pad", []int{1, 2, 5, 5}, Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, ExcludePad: true}},
	{"whole image", []int{2, 2, 3, 4}, Pool2dParams{Kernel: [2]int{3, 4}}},
}

func TestPoolingMatchesReference(t *testing.T) {
	for _, tc := range poolCases {
		t.Run(tc.name, func(t *testing.T) {
			x := rnd(21, tc.x...)
			wantMax, ms := refPool(x.Float64s(), tc.x, tc.p, false)
			wantAvg, _ := refPool(x.Float64s(), tc.x, tc.p, true)
			for _, cl := range []bool{false, true} {
				in := x
				if cl {
					in = x.Contiguous(ChannelsLast)
				}
				m := MaxPool2d(in, tc.p)
				if !slices.Equal(m.Shape(), Shape(ms)) {
					t.Fatalf("shape %v, want %v", m.Shape(), ms)
				}
				closeTo(t, fmt.Sprintf("max_pool2d channels-last=%v", cl), m.Float64s(), wantMax, 1e-12)
				a := AvgPool2d(in, tc.p)
				closeTo(t, fmt.Sprintf("avg_pool2d channels-last=%v", cl), a.Float64s(), wantAvg, 1e-12)
				if cl && tc.x[1] > 1 && ms[2]*ms[3] > 1 && (!m.IsContiguous(ChannelsLast) || !a.IsContiguous(ChannelsLast)) {
					t.Errorf("channels-last input gave strides %v and %v", m.Strides(), a.Strides())
				}
			}
		})
	}
	t.Run("max pool dilated", func(t *testing.T) {
		p := Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{1, 1}, Dilation: [2]int{2, 2}, Padding: [2]int{1, 1}}
		x := rnd(22, 1, 2, 5, 5)
		want, _ := refPool(x.Float64s(), []int{1, 2, 5, 5}, p, false)
		closeTo(t, "max_pool2d dilated", MaxPool2d(x, p).Float64s(), want, 1e-12)
	})
}

func TestAdaptiveAvgPool2dMatchesReference(t *testing.T) {
	for _, tc := range []struct{ in, out []int }{
		{[]int{2, 3, 4, 4}, []int{1, 1}},
		{[]int{1, 2, 6, 4}, []int{3, 2}},
		{[]int{1, 2, 5, 7}, []int{3, 4}},
		{[]int{2, 1, 3, 3}, []int{5, 4}}, // larger than the input
	} {
		t.Run(fmt.Sprint(tc.in, tc.out), func(t *testing.T) {
			x := rnd(31, tc.in...)
			want, ws := refAdaptiveAvg(x.Float64s(), tc.in, tc.out[0], tc.out[1])
			y := AdaptiveAvgPool2d(x, tc.out[0], tc.out[1])
			if !slices.Equal(y.Shape(), Shape(ws)) {
				t.Fatalf("shape %v, want %v", y.Shape(), ws)
			}
			closeTo(t, "adaptive_avg_pool2d", y.Float64s(), want, 1e-12)
			closeTo(t, "adaptive_avg_pool2d channels-last", AdaptiveAvgPool2d(x.Contiguous(ChannelsLast), tc.out[0], tc.out[1]).Float64s(), want, 1e-12)
		})
	}
}

func TestBatchNorm2dMatchesReference(t *testing.T) {
	n, c, h, w := 3, 2, 3, 4
	x := rnd(41, n, c, h, w)
	weight, bias := rnd(42, c), rnd(43, c)
	xs := x.Float64s()
	mean, vr := make([]float64, c), make([]float64, c)
	cnt := float64(n * h * w)
	for i, v := range xs {
		mean[(i/(h*w))%c] += v / cnt
	}
	for i, v := range xs {
		d := v - mean[(i/(h*w))%c]
		vr[(i/(h*w))%c] += d * d / cnt
	}
	wv, bv := weight.Float64s(), bias.Float64s()
	want := make([]float64, len(xs))
	for i, v := range xs {
		k := (i / (h * w)) % c
		want[i] = (v-mean[k])/math.Sqrt(vr[k]+1e-5)*wv[k] + bv[k]
	}
	for _, cl := range []bool{false, true} {
		rm, rv := Zeros(Shape{c}, Float64), Ones(Shape{c}, Float64)
		in := x
		if cl {
			in = x.Contiguous(ChannelsLast)
		}
		y := BatchNorm2d(in, weight, bias, rm, rv, true, 0.1, 1e-5)
		closeTo(t, "batch norm training", y.Float64s(), want, 1e-10)
		if cl && !y.IsContiguous(ChannelsLast) {
			t.Errorf("channels-last input gave strides %v", y.Strides())
		}
		wantRM, wantRV := make([]float64, c), make([]float64, c)
		for k := range c {
			wantRM[k] = 0.1 * mean[k]
			wantRV[k] = 0.9 + 0.1*vr[k]*cnt/(cnt-1)
		}
		closeTo(t, "running mean", rm.Float64s(), wantRM, 1e-12)
		closeTo(t, "running var", rv.Float64s(), wantRV, 1e-12)
		// Evaluation mode normalizes with the running statistics.
		ye := BatchNorm2d(in, weight, bias, rm, rv, false, 0.1, 1e-5)
		wantE := make([]float64, len(xs))
		for i, v := range xs {
			k := (i / (h * w)) % c
			wantE[i] = (v-wantRM[k])/math.Sqrt(wantRV[k]+1e-5)*wv[k] + bv[k]
		}
		closeTo(t, "batch norm eval", ye.Float64s(), wantE, 1e-10)
		closeTo(t, "eval leaves running mean", rm.Float64s(), wantRM, 1e-12)
	}
}

func TestBatchNorm2dHalfInputStaysFloat32(t *testing.T) {
	x := Randn(Shape{4, 3, 5, 5}, Float32, WithGenerator(NewGenerator(3))).MulScalar(3).AddScalar(100)
	weight, bias := Ones(Shape{3}, Float32), Zeros(Shape{3}, Float32)
	for _, dt := range []DType{Float16, BFloat16} {
		rm, rv := Zeros(Shape{3}, Float32), Ones(Shape{3}, Float32)
		xh := x.Cast(dt).SetRequiresGrad(true)
		y := BatchNorm2d(xh, weight, bias, rm, rv, true, 0.1, 1e-5)
		if y.DType() != dt || rm.DType() != Float32 {
			t.Fatalf("%s input: output %s, running mean %s", dt, y.DType(), rm.DType())
		}
		// With mean 100 and deviation 3, statistics in 16 bits would be
		// far off; in float32 the output is standardized.
		m := y.Cast(Float32).Mean().Item()
		s := y.Cast(Float32).Std(nil, 0, false).Item()
		if math.Abs(m) > 0.05 || math.Abs(s-1) > 0.05 {
			t.Errorf("%s: output mean %v, std %v; want 0 and 1", dt, m, s)
		}
		y.Cast(Float32).Sum().Backward()
		if g := xh.Grad(); g == nil || g.DType() != dt {
			t.Errorf("%s: gradient %v", dt, g)
		}
	}
}

func TestConvGradients(t *testing.T) {
	for _, tc := range convCases {
		t.Run("conv2d "+tc.name, func(t *testing.T) {
			x, w, b := convInputs(tc, false)
			if b == nil {
				gradCheck(t, func(xs []*Tensor) *Tensor { return Conv2d(xs[0], xs[1], nil, tc.p) }, x, w)
				return
			}
			gradCheck(t, func(xs []*Tensor) *Tensor { return Conv2d(xs[0], xs[1], xs[2], tc.p) }, x, w, b)
		})
	}
	for _, tc := range convTCases {
		t.Run("conv_transpose2d "+tc.name, func(t *testing.T) {
			x, w, b := convInputs(tc, true)
			if b == nil {
				gradCheck(t, func(xs []*Tensor) *Tensor { return ConvTranspose2d(xs[0], xs[1], nil, tc.p) }, x, w)
				return
			}
			gradCheck(t, func(xs []*Tensor) *Tensor { return ConvTranspose2d(xs[0], xs[1], xs[2], tc.p) }, x, w, b)
		})
	}
	for _, act := range []Activation{ActReLU, ActGELU} {
		for _, tc := range []convCase{convCases[2], convCases[6]} {
			t.Run(fmt.Sprintf("conv2d %s %v", tc.name, act), func(t *testing.T) {
				x, w, _ := convInputs(tc, false)
				gradCheck(t, func(xs []*Tensor) *Tensor { return Conv2dAct(xs[0], xs[1], xs[2], tc.p, act) }, x, w, rnd(14, tc.w[0]))
				x, w, _ = convInputs(tc, false)
				gradCheck(t, func(xs []*Tensor) *Tensor { return Conv2dAct(xs[0], xs[1], nil, tc.p, act) }, x, w)
			})
		}
	}
	t.Run("conv2d channels-last", func(t *testing.T) {
		tc := convCases[3]
		x, w, b := convInputs(tc, false)
		gradCheck(t, func(xs []*Tensor) *Tensor {
			return Conv2d(xs[0].Contiguous(ChannelsLast), xs[1].Contiguous(ChannelsLast), xs[2], tc.p)
		}, x, w, b)
	})
}

func TestPoolGradients(t *testing.T) {
	for _, tc := range poolCases {
		t.Run("max "+tc.name, func(t *testing.T) {
			gradCheck(t, func(xs []*Tensor) *Tensor { return MaxPool2d(xs[0], tc.p) }, rnd(51, tc.x...))
		})
		t.Run("avg "+tc.name, func(t *testing.T) {
			gradCheck(t, func(xs []*Tensor) *Tensor { return AvgPool2d(xs[0], tc.p) }, rnd(52, tc.x...))
		})
	}
	for _, out := range [][2]int{{1, 1}, {2, 3}, {3, 2}} {
		t.Run(fmt.Sprint("adaptive ", out), func(t *testing.T) {
			gradCheck(t, func(xs []*Tensor) *Tensor { return AdaptiveAvgPool2d(xs[0], out[0], out[1]) }, rnd(53, 2, 2, 5, 4))
		})
	}
	t.Run("max channels-last", func(t *testing.T) {
		p := poolCases[1].p
		gradCheck(t, func(xs []*Tensor) *Tensor { return MaxPool2d(xs[0].Contiguous(ChannelsLast), p) }, rnd(54, 1, 3, 5, 5))
	})
}

// TestMaxPoolGradToFirstMaximum checks which element of a window max
// pooling takes, and so gives the gradient to, as PyTorch's kernels pick
// it (keep a value above the maximum so far, or NaN): the first maximum
// of a tie in row-major order, the last NaN of a window with several, and
// the first element inside the input of a window of -Inf whose padding is
// -Inf too. It runs on the CPU's composed path, and on a native forward
// pass with the composed and the native backward pass; the positions of
// MaxPool2dWithIndices must agree.
func TestMaxPoolGradToFirstMaximum(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(-1)
	k2 := Pool2dParams{Kernel: [2]int{2, 2}}
	cases := []struct {
		name    string
		x       []float64 // [1, 1, 2, 4]
		p       Pool2dParams
		want    []float64
		indices []int64
	}{
		{"ties", []float64{
			1, 1, 2, 2,
			1, 1, 0, 2,
		}, k2, []float64{
			1, 0, 1, 0,
			0, 0, 0, 0,
		}, []int64{0, 2}},
		{"one NaN after a tie", []float64{
			1, 1, 2, 2,
			1, 1, nan, 2,
		}, k2, []float64{
			1, 0, 0, 0,
			0, 0, 1, 0,
		}, []int64{0, 6}},
		{"last of two NaNs", []float64{
			nan, 1, 5, nan,
			nan, 1, nan, 2,
		}, k2, []float64{
			0, 0, 0, 0,
			1, 0, 1, 0,
		}, []int64{4, 6}},
		{"-Inf window with padding", []float64{
			inf, inf, 1, 2,
			inf, inf, 3, 4,
		}, Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}, []float64{
			1, 0, 1, 1,
			1, 0, 1, 1,
		}, []int64{0, 2, 3, 4, 6, 7}},
	}
	for _, tc := range cases {
		for _, dev := range []struct {
			name     string
			dev      Device
			backward bool // the native backward pass runs (nativetest only)
		}{
			{"cpu", CPU, false},
			{"native forward, composed backward", nativeTest, false},
			{"native", nativeTest, true},
		} {
			t.Run(tc.name+"/"+dev.name, func(t *testing.T) {
				if dev.dev == nativeTest {
					nativeBackwardOff.Store(!dev.backward)
					defer nativeBackwardOff.Store(false)
				}
				xt := FromSlice(slices.Clone(tc.x), Shape{1, 1, 2, 4}, Float32).To(dev.dev).SetRequiresGrad(true)
				y := MaxPool2d(xt, tc.p)
				y.Sum().Backward()
				got := xt.Grad().To(CPU).Cast(Float64).Float64s()
				if !slices.Equal(got, tc.want) {
					t.Errorf("gradient %v, want %v", got, tc.want)
				}
				_, idx := MaxPool2dWithIndices(xt, tc.p)
				if got := idx.To(CPU).Int64s(); !slices.Equal(got, tc.indices) {
					t.Errorf("indices %v, want %v", got, tc.indices)
				}
			})
		}
	}
}

func TestBatchNormGradients(t *testing.T) {
	for _, tc := range []struct {
		name     string
		training bool
		affine   bool
		shape    []int
	}{
		{"training affine", true, true, []int{3, 2, 3, 2}},
		{"training plain", true, false, []int{2, 3, 2, 3}},
		{"training one pixel", true, true, []int{4, 2, 1, 1}},
		{"eval affine", false, true, []int{2, 2, 3, 3}},
		{"eval plain", false, false, []int{2, 2, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.shape[1]
			// Fresh running statistics for each evaluation: the
			// training-mode updates must not change what is measured.
			bn := func(x, w, b *Tensor) *Tensor {
				rm, rv := rnd(61, c), pos(62, c)
				return BatchNorm2d(x, w, b, rm, rv, tc.training, 0.1, 1e-5)
			}
			x := rnd(63, tc.shape...)
			if !tc.affine {
				gradCheck(t, func(xs []*Tensor) *Tensor { return bn(xs[0], nil, nil) }, x)
				return
			}
			gradCheck(t, func(xs []*Tensor) *Tensor { return bn(xs[0], xs[1], xs[2]) }, x, rnd(64, c), rnd(65, c))
		})
	}
}

func TestConvErrors(t *testing.T) {
	x := Randn(Shape{2, 4, 5, 5}, Float32)
	w := Randn(Shape{6, 4, 3, 3}, Float32)
	for _, tc := range []struct {
		name string
		kind error
		fn   func()
	}{
		{"wrong channels", ErrShape, func() { Conv2d(x, Randn(Shape{6, 3, 3, 3}, Float32), nil, Conv2dParams{}) }},
		{"kernel larger than padded input", ErrShape, func() { Conv2d(x, Randn(Shape{6, 4, 8, 3}, Float32), nil, Conv2dParams{Padding: [2]int{1, 1}}) }},
		{"dilated kernel larger than input", ErrShape, func() { Conv2d(x, w, nil, Conv2dParams{Dilation: [2]int{3, 3}}) }},
		{"groups not dividing output channels", ErrArgument, func() { Conv2d(x, Randn(Shape{5, 1, 3, 3}, Float32), nil, Conv2dParams{Groups: 4}) }},
		{"groups not matching input channels", ErrShape, func() { Conv2d(x, Randn(Shape{6, 1, 3, 3}, Float32), nil, Conv2dParams{Groups: 2}) }},
		{"negative groups", ErrArgument, func() { Conv2d(x, w, nil, Conv2dParams{Groups: -1}) }},
		{"negative stride", ErrArgument, func() { Conv2d(x, w, nil, Conv2dParams{Stride: [2]int{-1, 1}}) }},
		{"negative padding", ErrArgument, func() { Conv2d(x, w, nil, Conv2dParams{Padding: [2]int{0, -1}}) }},
		{"output padding on a convolution", ErrArgument, func() { Conv2d(x, w, nil, Conv2dParams{OutputPadding: [2]int{1, 0}}) }},
		{"bias of the wrong size", ErrShape, func() { Conv2d(x, w, Zeros(Shape{4}, Float32), Conv2dParams{}) }},
		{"2-D input", ErrShape, func() { Conv2d(Zeros(Shape{4, 5}, Float32), w, nil, Conv2dParams{}) }},
		{"3-D weight", ErrShape, func() { Conv2d(x, Zeros(Shape{6, 4, 3}, Float32), nil, Conv2dParams{}) }},
		{"integer input", ErrDType, func() { Conv2d(Zeros(Shape{2, 4, 5, 5}, Int64), w, nil, Conv2dParams{}) }},
		{"mixed dtypes", ErrDType, func() { Conv2d(x.Cast(Float64), w, nil, Conv2dParams{}) }},
		{"nil weight", ErrArgument, func() { Conv2d(x, nil, nil, Conv2dParams{}) }},
		{"unknown activation", ErrArgument, func() { Conv2dAct(x, w, nil, Conv2dParams{}, Activation(7)) }},
		{"transposed wrong channels", ErrShape, func() { ConvTranspose2d(x, Randn(Shape{3, 2, 3, 3}, Float32), nil, Conv2dParams{}) }},
		{"transposed output padding too large", ErrArgument, func() {
			ConvTranspose2d(x, Randn(Shape{4, 2, 3, 3}, Float32), nil, Conv2dParams{Stride: [2]int{2, 2}, OutputPadding: [2]int{2, 0}})
		}},
		{"transposed empty output", ErrShape, func() {
			ConvTranspose2d(x, Randn(Shape{4, 2, 1, 1}, Float32), nil, Conv2dParams{Padding: [2]int{3, 3}})
		}},
		{"transposed groups", ErrArgument, func() { ConvTranspose2d(x, Randn(Shape{4, 2, 3, 3}, Float32), nil, Conv2dParams{Groups: 3}) }},
		{"stride overflowing the transposed output", ErrShape, func() {
			ConvTranspose2d(x, Randn(Shape{4, 2, 3, 3}, Float32), nil, Conv2dParams{Stride: [2]int{1 << 62, 1}})
		}},
		{"padding overflowing the transposed output", ErrShape, func() {
			ConvTranspose2d(x, Randn(Shape{4, 2, 3, 3}, Float32), nil, Conv2dParams{Padding: [2]int{math.MaxInt, 0}})
		}},
		{"dilation overflowing the kernel", ErrShape, func() { Conv2d(x, w, nil, Conv2dParams{Dilation: [2]int{math.MaxInt, 1}}) }},
		{"padding overflowing the input", ErrShape, func() { Conv2d(x, w, nil, Conv2dParams{Padding: [2]int{0, math.MaxInt}}) }},
		{"pool dilation overflowing the window", ErrShape, func() {
			MaxPool2d(x, Pool2dParams{Kernel: [2]int{2, 3}, Dilation: [2]int{1, math.MaxInt/2 + 1}})
		}},
		{"pool kernel larger than input", ErrShape, func() { MaxPool2d(x, Pool2dParams{Kernel: [2]int{6, 6}}) }},
		{"pool padding above half the kernel", ErrArgument, func() { MaxPool2d(x, Pool2dParams{Kernel: [2]int{2, 2}, Padding: [2]int{2, 0}}) }},
		{"pool zero kernel", ErrArgument, func() { AvgPool2d(x, Pool2dParams{}) }},
		{"avg pool dilation", ErrArgument, func() { AvgPool2d(x, Pool2dParams{Kernel: [2]int{2, 2}, Dilation: [2]int{2, 2}}) }},
		{"pool integer input", ErrDType, func() { MaxPool2d(Zeros(Shape{1, 1, 4, 4}, Int32), Pool2dParams{Kernel: [2]int{2, 2}}) }},
		{"adaptive zero size", ErrArgument, func() { AdaptiveAvgPool2d(x, 0, 1) }},
		{"max pool empty height", ErrShape, func() {
			MaxPool2d(Zeros(Shape{1, 2, 0, 4}, Float32), Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{1, 1}, Padding: [2]int{1, 1}})
		}},
		{"max pool empty channels", ErrShape, func() { MaxPool2d(Zeros(Shape{1, 0, 4, 4}, Float32), Pool2dParams{Kernel: [2]int{2, 2}}) }},
		{"avg pool empty width", ErrShape, func() {
			AvgPool2d(Zeros(Shape{1, 2, 4, 0}, Float32), Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{1, 1}, Padding: [2]int{1, 1}})
		}},
		{"adaptive empty height", ErrShape, func() { AdaptiveAvgPool2d(Zeros(Shape{1, 2, 0, 4}, Float32), 3, 3) }},
		{"adaptive empty channels", ErrShape, func() { AdaptiveAvgPool2d(Zeros(Shape{2, 0, 4, 4}, Float32), 3, 3) }},
		{"unbatched pool empty width", ErrShape, func() { AdaptiveAvgPool2d(Zeros(Shape{2, 4, 0}, Float32), 1, 1) }},
		{"adaptive output too large to compose", ErrShape, func() { AdaptiveAvgPool2d(x, 1<<16, 1<<14) }},
		// Refused before the windows are walked, which takes a step per
		// output row and column.
		{"adaptive output of 2^62 rows", ErrShape, func() { AdaptiveAvgPool2d(x, 1<<62, 1) }},
		{"adaptive max output of 2^33x2^62", ErrShape, func() { AdaptiveMaxPool2d(x, 1<<33, 1<<62) }},
		{"adaptive max with indices output of 2^33 rows", ErrShape, func() { AdaptiveMaxPool2dWithIndices(x, 1<<33, 3) }},
		{"window index too large to compose", ErrShape, func() {
			// A shape-only-sized problem: the check comes before any
			// allocation.
			Conv2d(Empty(Shape{1, 1, 1 << 12, 1 << 12}, Float32), Empty(Shape{1, 1, 64, 64}, Float32), nil, Conv2dParams{Padding: [2]int{32, 32}})
		}},
		{"batch norm channels", ErrShape, func() { BatchNorm2d(x, Ones(Shape{3}, Float32), nil, nil, nil, true, 0.1, 1e-5) }},
		{"batch norm 3-D", ErrShape, func() { BatchNorm2d(Zeros(Shape{4, 5, 5}, Float32), nil, nil, nil, nil, true, 0.1, 1e-5) }},
		{"batch norm one value per channel", ErrShape, func() { BatchNorm2d(Zeros(Shape{1, 4, 1, 1}, Float32), nil, nil, nil, nil, true, 0.1, 1e-5) }},
		{"batch norm eval without statistics", ErrArgument, func() { BatchNorm2d(x, nil, nil, nil, nil, false, 0.1, 1e-5) }},
		{"batch norm one statistic", ErrArgument, func() { BatchNorm2d(x, nil, nil, Zeros(Shape{4}, Float32), nil, true, 0.1, 1e-5) }},
		{"batch norm momentum", ErrArgument, func() { BatchNorm2d(x, nil, nil, nil, nil, true, 1.5, 1e-5) }},
		{"batch norm eps", ErrArgument, func() { BatchNorm2d(x, nil, nil, nil, nil, true, 0.1, 0) }},
		{"batch norm relu residual shape", ErrShape, func() { BatchNorm2dReLU(x, Zeros(Shape{1, 4, 5, 4}, Float32), nil, nil, nil, nil, true, 0.1, 1e-5) }},
		{"batch norm relu integer residual", ErrDType, func() { BatchNorm2dReLU(x, Zeros(x.Shape(), Int32), nil, nil, nil, nil, true, 0.1, 1e-5) }},
		{"batch norm relu eval without statistics", ErrArgument, func() { BatchNorm2dReLU(x, nil, nil, nil, nil, nil, false, 0.1, 1e-5) }},
		{"batch norm relu nil input", ErrArgument, func() { BatchNorm2dReLU(nil, x, nil, nil, nil, nil, true, 0.1, 1e-5) }},
		{"channels-last of a 3-D tensor", ErrShape, func() { Zeros(Shape{2, 3, 4}, Float32).Contiguous(ChannelsLast) }},
		{"unknown memory format", ErrArgument, func() { x.Contiguous(MemoryFormat(9)) }},
		{"two memory formats", ErrArgument, func() { x.IsContiguous(ChannelsLast, ContiguousFormat) }},
		{"to channels-last of a 2-D tensor", ErrShape, func() { Zeros(Shape{2, 3}, Float32).To(CPU, ChannelsLast) }},
		{"to an unknown memory format", ErrArgument, func() { x.To(x.Device(), MemoryFormat(9)) }},
		{"to an unknown memory format on another device", ErrArgument, func() { x.To(Sim(0), MemoryFormat(9)) }},
		{"to two memory formats", ErrArgument, func() { x.To(Sim(0), ChannelsLast, ContiguousFormat) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Catch(tc.fn)
			var ve *Error
			if !errors.As(err, &ve) || !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want a *vram.Error of kind %v", err, tc.kind)
			}
			t.Log(err)
		})
	}
}

func TestMemoryFormat(t *testing.T) {
	x := rnd(71, 2, 3, 4, 5)
	cl := x.Contiguous(ChannelsLast)
	if got := cl.Strides(); !slices.Equal(got, []int{60, 1, 15, 3}) {
		t.Fatalf("channels-last strides %v, want [60 1 15 3]", got)
	}
	if !cl.IsContiguous(ChannelsLast) || cl.IsContiguous() || cl.SuggestMemoryFormat() != ChannelsLast {
		t.Fatalf("channels-last tensor: IsContiguous(ChannelsLast)=%v IsContiguous()=%v", cl.IsContiguous(ChannelsLast), cl.IsContiguous())
	}
	if !slices.Equal(cl.Float64s(), x.Float64s()) {
		t.Fatal("channels-last copy changed the values")
	}
	if same := cl.Contiguous(ChannelsLast); !same.SharesStorage(cl) {
		t.Error("Contiguous(ChannelsLast) of a channels-last tensor copied it")
	}
	back := cl.Contiguous()
	if !back.IsContiguous() || !slices.Equal(back.Float64s(), x.Float64s()) {
		t.Fatal("back to contiguous")
	}
	if to := x.To(CPU, ChannelsLast); !to.IsContiguous(ChannelsLast) || !slices.Equal(to.Float64s(), x.Float64s()) {
		t.Errorf("To(CPU, ChannelsLast) gave strides %v", to.Strides())
	}
	if to := x.ToMemoryFormat(ChannelsLast); !to.IsContiguous(ChannelsLast) {
		t.Errorf("ToMemoryFormat(ChannelsLast) gave strides %v", to.Strides())
	}
	// A tensor with one channel is contiguous in both formats.
	one := rnd(72, 2, 1, 3, 3)
	if !one.IsContiguous(ChannelsLast) || !one.IsContiguous() {
		t.Error("a one-channel tensor should be contiguous in both formats")
	}
	// Gradients flow through the conversion.
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].Contiguous(ChannelsLast).Exp() }, rnd(73, 1, 2, 2, 3))
	// In-place conversion of a leaf keeps its identity.
	p := rnd(74, 3, 2, 3, 3).SetRequiresGrad(true)
	vals := p.Float64s()
	p.ConvertMemoryFormat(ChannelsLast)
	if !p.IsContiguous(ChannelsLast) || !slices.Equal(p.Float64s(), vals) || !p.RequiresGrad() {
		t.Fatalf("ConvertMemoryFormat: strides %v", p.Strides())
	}
	if err := Catch(func() { p.Exp().ConvertMemoryFormat(ChannelsLast) }); !errors.Is(err, ErrAutograd) {
		t.Errorf("ConvertMemoryFormat of a computed tensor: %v", err)
	}
	if Sim(0).Available() {
		s := x.To(Sim(0), ChannelsLast)
		if !s.IsContiguous(ChannelsLast) || !slices.Equal(s.Float64s(), x.Float64s()) {
			t.Errorf("To(Sim(0), ChannelsLast) gave strides %v", s.Strides())
		}
		// Copies and moves keep the format.
		if back := s.To(CPU); !back.IsContiguous(ChannelsLast) || !slices.Equal(back.Float64s(), x.Float64s()) {
			t.Errorf("To(CPU) of a channels-last tensor gave strides %v", back.Strides())
		}
		if back := s.To(CPU, ContiguousFormat); !back.IsContiguous() {
			t.Errorf("To(CPU, ContiguousFormat) gave strides %v", back.Strides())
		}
		p.MoveTo(Sim(0))
		if !p.IsContiguous(ChannelsLast) || !slices.Equal(p.Float64s(), vals) {
			t.Errorf("MoveTo of a channels-last parameter gave strides %v", p.Strides())
		}
	}
}

func TestConvOnSimDevice(t *testing.T) {
	d := Sim(0)
	if !d.Available() {
		t.Skip("no sim device")
	}
	tc := convCases[6]
	x, w, b := convInputs(tc, false)
	xs, ws, bs := x.To(d).Cast(Float32), w.To(d).Cast(Float32), b.To(d).Cast(Float32)
	for _, tt := range []*Tensor{xs, ws, bs} {
		tt.SetRequiresGrad(true)
	}
	want, _ := refConv2d(x.Float64s(), tc.x, w.Float64s(), tc.w, b.Float64s(), tc.p)
	y := Conv2d(xs, ws, bs, tc.p)
	if y.Device() != d {
		t.Fatalf("output on %v", y.Device())
	}
	closeTo(t, "conv2d on sim", y.Float64s(), want, 1e-5)
	y = MaxPool2d(BatchNorm2d(y, nil, nil, nil, nil, true, 0.1, 1e-5), Pool2dParams{Kernel: [2]int{2, 2}})
	y = AdaptiveAvgPool2d(y, 1, 1)
	y.Sum().Backward()
	for i, tt := range []*Tensor{xs, ws, bs} {
		if g := tt.Grad(); g == nil || g.Device() != d {
			t.Fatalf("input %d: gradient %v", i, g)
		}
	}
}

func TestConvAutocast(t *testing.T) {
	x := Randn(Shape{2, 3, 6, 6}, Float32)
	w := Randn(Shape{4, 3, 3, 3}, Float32).SetRequiresGrad(true)
	b := Randn(Shape{4}, Float32).SetRequiresGrad(true)
	// Autocast rounds the operands to bfloat16 and the result once more:
	// the reference takes the same rounded operands in float32, so the
	// tolerance covers the result's rounding (2⁻⁹ of it) and the order of
	// the sums, not the inputs' rounding, which random inputs can make
	// larger than any fixed tolerance.
	round := func(t *Tensor) *Tensor { return t.Cast(BFloat16).Cast(Float32) }
	want := Conv2d(round(x), round(w), round(b), Conv2dParams{Padding: [2]int{1, 1}}).Float64s()
	var y *Tensor
	Autocast(BFloat16, func() {
		y = Keep(Conv2d(x, w, b, Conv2dParams{Padding: [2]int{1, 1}}))
	})
	if y.DType() != BFloat16 {
		t.Fatalf("conv2d under bf16 autocast gave %s", y.DType())
	}
	closeTo(t, "conv2d under autocast", y.Float64s(), want, 1e-2)
	y.Cast(Float32).Sum().Backward()
	if g := w.Grad(); g == nil || g.DType() != Float32 {
		t.Fatalf("master weight gradient %v", g)
	}
}

// TestConvConcurrent runs convolutions and pooling of many shapes from
// several goroutines at once: the shared index cache must hold up under
// -race, also while a small bound keeps emptying it.
func TestConvConcurrent(t *testing.T) {
	t.Run("cache kept", convConcurrently)
	t.Run("cache emptied", func(t *testing.T) {
		indexCache.mu.Lock()
		saved := indexCache.limit
		indexCache.limit = 2 << 10
		indexCache.mu.Unlock()
		defer func() {
			indexCache.mu.Lock()
			indexCache.limit = saved
			indexCache.mu.Unlock()
		}()
		convConcurrently(t)
	})
}

func convConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- Catch(func() {
				for i := range 6 {
					size := 4 + (g+i)%5
					x := Randn(Shape{1, 2, size, size + 1}, Float32)
					w := Randn(Shape{3, 2, 3, 3}, Float32)
					p := Conv2dParams{Padding: [2]int{1, 1}, Stride: [2]int{1 + i%2, 1}}
					Tidy(func() {
						want, _ := refConv2d(x.Float64s(), []int{1, 2, size, size + 1}, w.Float64s(), []int{3, 2, 3, 3}, nil, p)
						got := Conv2d(x, w, nil, p).Float64s()
						for k := range want {
							if math.Abs(got[k]-want[k]) > 1e-4*(1+math.Abs(want[k])) {
								panic(fmt.Sprintf("size %d: element %d = %v, want %v", size, k, got[k], want[k]))
							}
						}
						MaxPool2d(x, Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{1, 1}})
						AdaptiveAvgPool2d(x, 3, 2)
						// The cached tap and divisor tables of ceil mode.
						ceil := Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, CeilMode: true}
						mp, _ := MaxPool2dWithIndices(x, ceil)
						ap := AvgPool2d(x, ceil)
						wantMax, _ := refPool(x.Float64s(), []int{1, 2, size, size + 1}, ceil, false)
						wantAvg, _ := refPool(x.Float64s(), []int{1, 2, size, size + 1}, ceil, true)
						avg := ap.Float64s()
						for k, v := range mp.Float64s() {
							if v != wantMax[k] || math.Abs(avg[k]-wantAvg[k]) > 1e-5 {
								panic(fmt.Sprintf("size %d: ceil-mode pooling element %d differs", size, k))
							}
						}
						AdaptiveMaxPool2d(x, 3, 2)
					})
					x.Release()
					w.Release()
				}
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// smallCNNStep runs one forward and backward pass of a small CNN on a
// batch of 64 28×28 images on the CPU and returns how long it took.
func smallCNNStep(t testing.TB) time.Duration {
	g := NewGenerator(5)
	x := Randn(Shape{64, 1, 28, 28}, Float32, WithGenerator(g))
	w1 := Randn(Shape{8, 1, 3, 3}, Float32, WithGenerator(g)).MulScalar(0.3).SetRequiresGrad(true)
	b1 := Zeros(Shape{8}, Float32, WithGrad())
	w2 := Randn(Shape{16, 8, 3, 3}, Float32, WithGenerator(g)).MulScalar(0.1).SetRequiresGrad(true)
	b2 := Zeros(Shape{16}, Float32, WithGrad())
	fc := Randn(Shape{10, 16 * 7 * 7}, Float32, WithGenerator(g)).MulScalar(0.02).SetRequiresGrad(true)
	labels := FromSlice(make([]int64, 64), Shape{64})
	start := time.Now()
	Tidy(func() {
		h := Conv2d(x, w1, b1, Conv2dParams{Padding: [2]int{1, 1}}).Relu()
		h = MaxPool2d(h, Pool2dParams{Kernel: [2]int{2, 2}})
		h = Conv2d(h, w2, b2, Conv2dParams{Padding: [2]int{1, 1}}).Relu()
		h = MaxPool2d(h, Pool2dParams{Kernel: [2]int{2, 2}})
		loss := CrossEntropy(Linear(h.Flatten(1, -1), fc, nil), labels)
		loss.Backward()
	})
	return time.Since(start)
}

func TestSmallCNNStepSpeed(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	smallCNNStep(t) // warm the index caches
	best := time.Hour
	for range 3 {
		best = min(best, smallCNNStep(t))
	}
	t.Logf("small CNN forward+backward, batch 64 at 28x28: %v", best)
	if best > 2*time.Second {
		t.Errorf("a step took %v; it should take well under a second", best)
	}
}

func BenchmarkSmallCNNStep(b *testing.B) {
	for b.Loop() {
		smallCNNStep(b)
	}
}

// TestIndexCacheBounded: shapes that change every call keep the composed
// ops' host cache within its bound, and results stay right.
func TestIndexCacheBounded(t *testing.T) {
	indexCache.mu.Lock()
	saved := indexCache.limit
	indexCache.limit = 4 << 10
	indexCache.mu.Unlock()
	defer func() {
		indexCache.mu.Lock()
		indexCache.limit = saved
		indexCache.mu.Unlock()
	}()
	w := rnd(1, 2, 1, 3, 3)
	for size := 3; size < 30; size++ {
		x := rnd(uint64(size), 1, 1, size, size+1)
		p := Conv2dParams{Padding: [2]int{1, 1}}
		want, _ := refConv2d(x.Float64s(), []int{1, 1, size, size + 1}, w.Float64s(), []int{2, 1, 3, 3}, nil, p)
		closeTo(t, fmt.Sprint("size ", size), Conv2d(x, w, nil, p).Float64s(), want, 1e-12)
		AdaptiveAvgPool2d(x, 2, 3)
		AvgPool2d(x, Pool2dParams{Kernel: [2]int{3, 3}, Padding: [2]int{1, 1}, ExcludePad: true})
		indexCache.mu.Lock()
		b := indexCache.bytes
		indexCache.mu.Unlock()
		if b > 4<<10 {
			t.Fatalf("cache holds %d bytes, bound 4096", b)
		}
	}
}

func TestConvEdgeCases(t *testing.T) {
	t.Run("empty batch", func(t *testing.T) {
		x := Randn(Shape{0, 3, 5, 5}, Float32).SetRequiresGrad(true)
		w := Randn(Shape{4, 3, 3, 3}, Float32).SetRequiresGrad(true)
		y := Conv2d(x, w, nil, Conv2dParams{Padding: [2]int{1, 1}})
		if !slices.Equal(y.Shape(), Shape{0, 4, 5, 5}) {
			t.Fatalf("shape %v", y.Shape())
		}
		MaxPool2d(y, Pool2dParams{Kernel: [2]int{2, 2}}).Sum().Backward()
		if g := w.Grad(); g == nil || g.Abs().Max().Item() != 0 {
			t.Fatalf("weight gradient of an empty batch: %v", g)
		}
	})
	for _, dt := range []DType{Float16, BFloat16} {
		t.Run(dt.String(), func(t *testing.T) {
			tol := 1e-2
			if dt == BFloat16 {
				tol = 5e-2
			}
			x, w := rnd(1, 2, 3, 5, 5).Cast(dt), rnd(2, 4, 3, 3, 3).Cast(dt).SetRequiresGrad(true)
			p := Conv2dParams{Padding: [2]int{1, 1}, Stride: [2]int{2, 1}}
			y := Conv2d(x, w, nil, p)
			if y.DType() != dt {
				t.Fatalf("output %s", y.DType())
			}
			want, _ := refConv2d(x.Float64s(), []int{2, 3, 5, 5}, w.Float64s(), []int{4, 3, 3, 3}, nil, p)
			closeTo(t, "16-bit conv2d", y.Float64s(), want, tol)
			yt := ConvTranspose2d(y, w, nil, p)
			wantT, _ := refConvTranspose2d(y.Float64s(), []int{2, 4, 3, 5}, w.Float64s(), []int{4, 3, 3, 3}, nil, p)
			closeTo(t, "16-bit conv_transpose2d", yt.Float64s(), wantT, tol)
			AdaptiveAvgPool2d(MaxPool2d(yt, Pool2dParams{Kernel: [2]int{2, 2}}), 1, 1).Sum().Backward()
			if g := w.Grad(); g == nil || g.DType() != dt {
				t.Fatalf("gradient %v", g)
			}
		})
	}
}

// TestElementwiseKeepsChannelsLast: elementwise results of channels-last
// tensors are channels-last, as PyTorch's are, so that a channels-last
// model needs no copy before each convolution; the values are unchanged.
func TestElementwiseKeepsChannelsLast(t *testing.T) {
	x := rnd(1, 2, 3, 4, 5)
	cl := x.Contiguous(ChannelsLast)
	r := rnd(2, 2, 3, 4, 5) // row-major
	b := rnd(3, 1, 3, 1, 1) // a broadcast bias
	for _, tc := range []struct {
		name   string
		f      func(x, r, b *Tensor) *Tensor
		wantCL bool
	}{
		{"relu", func(x, r, b *Tensor) *Tensor { return x.Relu() }, true},
		{"exp", func(x, r, b *Tensor) *Tensor { return x.Exp() }, true},
		{"add bias", func(x, r, b *Tensor) *Tensor { return x.Add(b) }, true},
		{"bias first", func(x, r, b *Tensor) *Tensor { return b.Add(x) }, true},
		{"residual", func(x, r, b *Tensor) *Tensor { return x.Add(x.MulScalar(2)) }, true},
		{"row-major first", func(x, r, b *Tensor) *Tensor { return r.Add(x) }, false},
		{"scalar", func(x, r, b *Tensor) *Tensor { return x.MulScalar(3) }, true},
		{"cast", func(x, r, b *Tensor) *Tensor { return x.Cast(Float32) }, true},
		{"where", func(x, r, b *Tensor) *Tensor { return Where(x.GtScalar(0), x, r) }, true},
		{"bias act", func(x, r, b *Tensor) *Tensor { return BiasAct(x, b, ActReLU) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.f(x, r, b).Float64s()
			got := tc.f(cl, r, b)
			if isCL := got.IsContiguous(ChannelsLast) && got.SuggestMemoryFormat() == ChannelsLast; isCL != tc.wantCL {
				t.Errorf("strides %v; want channels-last %v", got.Strides(), tc.wantCL)
			}
			closeTo(t, tc.name, got.Cast(Float64).Float64s(), want, 1e-6)
		})
	}
	// Gradients through channels-last elementwise ops.
	gradCheck(t, func(xs []*Tensor) *Tensor {
		c := xs[0].Contiguous(ChannelsLast)
		return c.Relu().Add(c.Exp()).Mul(xs[1])
	}, rnd(4, 1, 2, 3, 2), rnd(5, 1, 2, 1, 1))
}

// TestAvgPoolSixteenBitSumsInFloat32: average pooling of 16-bit inputs
// sums each window in float32 and rounds the mean once, as PyTorch does,
// so that a window whose sum passes float16's range (64×64 values of 100)
// still averages to 100; the result keeps the input's dtype, inside
// Autocast too (where a plain Sum would give float32).
func TestAvgPoolSixteenBitSumsInFloat32(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(x *Tensor) *Tensor
	}{
		{"avg_pool2d", func(x *Tensor) *Tensor { return AvgPool2d(x, Pool2dParams{Kernel: [2]int{64, 64}}) }},
		{"avg_pool2d exclude pad", func(x *Tensor) *Tensor {
			return AvgPool2d(x, Pool2dParams{Kernel: [2]int{64, 64}, Padding: [2]int{1, 1}, Stride: [2]int{2, 2}, ExcludePad: true})
		}},
		{"adaptive global", func(x *Tensor) *Tensor { return AdaptiveAvgPool2d(x, 1, 1) }},
		{"adaptive uneven", func(x *Tensor) *Tensor { return AdaptiveAvgPool2d(x, 1, 3) }},
	} {
		for _, dt := range []DType{Float16, BFloat16} {
			for _, autocast := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s %s autocast=%v", tc.name, dt, autocast), func(t *testing.T) {
					x := Full(Shape{1, 2, 64, 64}, 100, dt).SetRequiresGrad(true)
					var y *Tensor
					if autocast {
						Autocast(dt, func() { y = Keep(tc.f(x)) })
					} else {
						y = tc.f(x)
					}
					if y.DType() != dt {
						t.Fatalf("result %s, want %s", y.DType(), dt)
					}
					for i, v := range y.Float64s() {
						if v != 100 {
							t.Fatalf("element %d is %v, want 100", i, v)
						}
					}
					y.Sum().Backward()
					if g := x.Grad(); g == nil || g.DType() != dt {
						t.Fatalf("gradient %v", g)
					}
				})
			}
		}
	}
}

// TestBatchNormEmptyBatch: training on an empty batch gives an empty
// result, zero gradients for the weight and bias, and leaves the running
// statistics as they were, as in PyTorch, rather than failing as if it
// had one value per channel.
func TestBatchNormEmptyBatch(t *testing.T) {
	for _, d := range []Device{CPU, Sim(0)} {
		if !d.Available() {
			continue
		}
		for _, shape := range []Shape{{0, 3, 4, 4}, {2, 3, 0, 4}} {
			for _, relu := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v %v relu=%v", d, shape, relu), func(t *testing.T) {
					x := Randn(shape, d).SetRequiresGrad(true)
					w := Ones(Shape{3}, d).SetRequiresGrad(true)
					b := Zeros(Shape{3}, d).SetRequiresGrad(true)
					rm := FromSlice([]float32{1, 2, 3}, Shape{3}, d)
					rv := FromSlice([]float32{4, 5, 6}, Shape{3}, d)
					var y *Tensor
					if relu {
						y = BatchNorm2dReLU(x, nil, w, b, rm, rv, true, 0.1, 1e-5)
					} else {
						y = BatchNorm2d(x, w, b, rm, rv, true, 0.1, 1e-5)
					}
					if !slices.Equal(y.Shape(), shape) {
						t.Fatalf("shape %v, want %v", y.Shape(), shape)
					}
					if got := rm.Float64s(); !slices.Equal(got, []float64{1, 2, 3}) {
						t.Fatalf("running mean %v", got)
					}
					if got := rv.Float64s(); !slices.Equal(got, []float64{4, 5, 6}) {
						t.Fatalf("running variance %v", got)
					}
					y.Sum().Backward()
					for i, p := range []*Tensor{w, b} {
						if g := p.Grad(); g == nil || !slices.Equal(g.Float64s(), []float64{0, 0, 0}) {
							t.Fatalf("parameter %d: gradient %v", i, g)
						}
					}
				})
			}
		}
	}
}
