package vram

import (
	"fmt"
	"math"
	"os"
	"slices"
	"testing"
)

// GPU tests of the convolutional ops: each runs on cuda:0 through the
// device's native interfaces (cuDNN, where the backend has them) and
// through the composed path, and is compared with the CPU. They skip
// without a GPU, and fail instead when VRAM_REQUIRE_CUDA=1.

func needCUDA(t *testing.T) {
	t.Helper()
	if DeviceCount() > 0 {
		return
	}
	if os.Getenv("VRAM_REQUIRE_CUDA") == "1" {
		t.Fatal("no CUDA device")
	}
	t.Skip("no CUDA device")
}

var cudaModes = []deviceMode{
	{"native", true, true, true},
	{"composed", false, true, true},
}

// cudaTol is the tolerance of pooling and batch norm on cuda:0, whose
// float32 sums run in another order than the CPU's.
var cudaTol = tolerance{rel: 5e-3}

// convSettings are the two ways a float32 convolution runs on cuda:0:
// with TF32 off, natively (cuDNN's FMA algorithms, FFT and Winograd
// included) and composed, on any float32 inputs; and with cuDNN's default,
// TF32 on, natively, on inputs and an output gradient already rounded to
// TF32 (as the tensor cores would round them), so that TF32 algorithms
// must match the CPU up to the order of their float32 sums. Each bound's
// product term scales with the sum of |products| of the element: an
// element of small value that is the sum of large products is judged by
// the scale of its rounding errors. 1e-5 of it covers the transforms of
// FFT and Winograd.
var convSettings = []struct {
	name  string
	s     CuDNNSettings
	modes []deviceMode
	tol   tolerance
}{
	{"notf32", CuDNNSettings{NoTF32: true}, cudaModes, tolerance{rel: 1e-4, prod: 1e-5}},
	{"tf32", CuDNNSettings{}, cudaModes[:1], tolerance{rel: 1e-4, prod: 1e-5, tf32: true}},
}

// compareConvOnCUDA runs compareOn on cuda:0 under each of convSettings.
// tf32Prod, when positive, replaces the product term under TF32: a
// gradient that the device computes between two convolutions (through a
// GELU) is not TF32-exact and is rounded again (2^-11 of each product).
func compareConvOnCUDA(t *testing.T, viaBackward bool, tf32Prod float64, f func(xs []*Tensor) *Tensor, inputs ...*Tensor) {
	t.Helper()
	for _, cs := range convSettings {
		t.Run(cs.name, func(t *testing.T) {
			prev := CuDNN()
			SetCuDNN(cs.s)
			defer SetCuDNN(prev)
			tol := cs.tol
			if tol.tf32 && tf32Prod > 0 {
				tol.prod = tf32Prod
			}
			compareOn(t, CUDA(0), cs.modes, viaBackward, tol, f, inputs...)
		})
	}
}

func TestCUDAConvMatchesCPU(t *testing.T) {
	needCUDA(t)
	cases := append(slices.Clone(convCases), convCase{"resnet block", []int{4, 64, 14, 14}, []int{64, 64, 3, 3}, Conv2dParams{Padding: [2]int{1, 1}}, true},
		convCase{"resnet stem", []int{2, 3, 32, 32}, []int{16, 3, 7, 7}, Conv2dParams{Stride: [2]int{2, 2}, Padding: [2]int{3, 3}}, true},
		convCase{"resnet downsample", []int{2, 32, 8, 8}, []int{64, 32, 1, 1}, Conv2dParams{Stride: [2]int{2, 2}}, true},
		convCase{"bottleneck 1x1", []int{2, 64, 8, 8}, []int{256, 64, 1, 1}, Conv2dParams{}, true},
		convCase{"bottleneck 3x3 stride 2", []int{2, 32, 9, 9}, []int{32, 32, 3, 3}, Conv2dParams{Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}, true})
	for _, tc := range sameCases {
		tc.name = "same " + tc.name
		cases = append(cases, tc)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x, w, b := convInputs(tc, false)
			if b == nil {
				compareConvOnCUDA(t, false, 0, func(xs []*Tensor) *Tensor { return Conv2d(xs[0], xs[1], nil, tc.p) }, x, w)
				return
			}
			compareConvOnCUDA(t, false, 0, func(xs []*Tensor) *Tensor { return Conv2d(xs[0], xs[1], xs[2], tc.p) }, x, w, b)
		})
	}
}

func TestCUDAConvActMatchesCPU(t *testing.T) {
	needCUDA(t)
	tc := convCase{"resnet block", []int{4, 32, 10, 10}, []int{32, 32, 3, 3}, Conv2dParams{Padding: [2]int{1, 1}}, false}
	for _, act := range []Activation{ActReLU, ActGELU} {
		t.Run(act.String(), func(t *testing.T) {
			x, w, b := convInputs(tc, false)
			compareConvOnCUDA(t, false, 1e-3, func(xs []*Tensor) *Tensor { return Conv2dAct(xs[0], xs[1], xs[2], tc.p, act) }, x, w, b)
		})
	}
}

func TestCUDAConvTransposeMatchesCPU(t *testing.T) {
	needCUDA(t)
	for _, tc := range convTCases {
		t.Run(tc.name, func(t *testing.T) {
			x, w, b := convInputs(tc, true)
			if b == nil {
				compareConvOnCUDA(t, true, 0, func(xs []*Tensor) *Tensor { return ConvTranspose2d(xs[0], xs[1], nil, tc.p) }, x, w)
				return
			}
			compareConvOnCUDA(t, true, 0, func(xs []*Tensor) *Tensor { return ConvTranspose2d(xs[0], xs[1], xs[2], tc.p) }, x, w, b)
		})
	}
}

func TestCUDAPoolMatchesCPU(t *testing.T) {
	needCUDA(t)
	for _, tc := range poolCases {
		t.Run("max "+tc.name, func(t *testing.T) {
			compareOn(t, CUDA(0), cudaModes, false, cudaTol, func(xs []*Tensor) *Tensor { return MaxPool2d(xs[0], tc.p) }, rnd(81, tc.x...))
		})
		t.Run("avg "+tc.name, func(t *testing.T) {
			compareOn(t, CUDA(0), cudaModes, false, cudaTol, func(xs []*Tensor) *Tensor { return AvgPool2d(xs[0], tc.p) }, rnd(82, tc.x...))
		})
	}
	// Ceil mode, divisor overrides and indices: native where cuDNN
	// computes the same windows, composed on the GPU elsewhere.
	for _, tc := range poolOptionCases {
		if tc.max {
			t.Run("max "+tc.name, func(t *testing.T) {
				compareOn(t, CUDA(0), cudaModes, false, cudaTol, func(xs []*Tensor) *Tensor { return MaxPool2d(xs[0], tc.p) }, rnd(84, tc.x...))
			})
			t.Run("max with indices "+tc.name, func(t *testing.T) {
				x := rnd(85, tc.x...)
				_, want := MaxPool2dWithIndices(x, tc.p)
				_, got := MaxPool2dWithIndices(x.Cast(Float32).To(CUDA(0)), tc.p)
				if !slices.Equal(got.To(CPU).Int64s(), want.Int64s()) {
					t.Errorf("indices %v, want %v", got.To(CPU).Int64s(), want.Int64s())
				}
			})
		}
		if tc.avg {
			t.Run("avg "+tc.name, func(t *testing.T) {
				compareOn(t, CUDA(0), cudaModes, false, cudaTol, func(xs []*Tensor) *Tensor { return AvgPool2d(xs[0], tc.p) }, rnd(86, tc.x...))
			})
		}
	}
	for _, out := range [][2]int{{1, 1}, {3, 2}} {
		t.Run(fmt.Sprint("adaptive max ", out), func(t *testing.T) {
			compareOn(t, CUDA(0), cudaModes, false, cudaTol, func(xs []*Tensor) *Tensor { return AdaptiveMaxPool2d(xs[0], out[0], out[1]) }, rnd(87, 2, 3, 7, 5))
			x := rnd(88, 2, 3, 7, 5)
			_, want := AdaptiveMaxPool2dWithIndices(x, out[0], out[1])
			_, got := AdaptiveMaxPool2dWithIndices(x.Cast(Float32).To(CUDA(0)), out[0], out[1])
			if !slices.Equal(got.To(CPU).Int64s(), want.Int64s()) {
				t.Errorf("indices %v, want %v", got.To(CPU).Int64s(), want.Int64s())
			}
		})
	}
	for _, out := range [][2]int{{1, 1}, {3, 2}} {
		t.Run(fmt.Sprint("adaptive ", out), func(t *testing.T) {
			compareOn(t, CUDA(0), cudaModes, false, cudaTol, func(xs []*Tensor) *Tensor { return AdaptiveAvgPool2d(xs[0], out[0], out[1]) }, rnd(83, 2, 3, 7, 5))
		})
	}
}

func TestCUDABatchNormMatchesCPU(t *testing.T) {
	needCUDA(t)
	for _, training := range []bool{true, false} {
		t.Run(fmt.Sprint("training=", training), func(t *testing.T) {
			var stats [][]float64
			compareOn(t, CUDA(0), cudaModes, false, cudaTol, func(xs []*Tensor) *Tensor {
				c := xs[0].Size(1)
				d := xs[0].Device()
				rm := rnd(84, c).Cast(Float32).To(d)
				rv := pos(85, c).Cast(Float32).To(d)
				y := BatchNorm2d(xs[0], xs[1], xs[2], rm, rv, training, 0.1, 1e-5)
				stats = append(stats, append(rm.Float64s(), rv.Float64s()...))
				return y
			}, rnd(86, 8, 16, 5, 6), rnd(87, 16), rnd(88, 16))
			for i, s := range stats[1:] {
				closeTo(t, fmt.Sprintf("running statistics of run %d", i+1), s, stats[0], 1e-4)
			}
		})
	}
	// affine=False and track_running_stats=False (nn.BatchNormOptions):
	// no weight, bias or running statistics, composed.
	t.Run("no affine, no running statistics", func(t *testing.T) {
		compareOn(t, CUDA(0), cudaModes, false, cudaTol, func(xs []*Tensor) *Tensor {
			return BatchNorm2d(xs[0], nil, nil, nil, nil, true, 0.1, 1e-5)
		}, rnd(86, 8, 16, 5, 6))
	})
}

// TestCUDABatchNormReLUMatchesCPU checks BatchNorm2dReLU with a residual
// on cuda:0 against the CPU: channels-last takes the fused kernels, NCHW
// the composed ops.
func TestCUDABatchNormReLUMatchesCPU(t *testing.T) {
	needCUDA(t)
	for _, training := range []bool{true, false} {
		t.Run(fmt.Sprint("training=", training), func(t *testing.T) {
			compareOn(t, CUDA(0), cudaModes, false, cudaTol, func(xs []*Tensor) *Tensor {
				c := xs[0].Size(1)
				d := xs[0].Device()
				rm := rnd(84, c).Cast(Float32).To(d)
				rv := pos(85, c).Cast(Float32).To(d)
				return BatchNorm2dReLU(xs[0], xs[3], xs[1], xs[2], rm, rv, training, 0.1, 1e-5)
			}, rnd(86, 8, 16, 5, 6), rnd(87, 16), rnd(88, 16), rnd(89, 8, 16, 5, 6))
		})
	}
}

// TestCUDAConvBFloat16 runs a convolution, batch norm and pooling in
// bfloat16 under autocast on cuda:0, natively and composed, against the
// CPU in float32.
func TestCUDAConvBFloat16(t *testing.T) {
	needCUDA(t)
	bf16Block(t, CUDA(0))
}

// TestConvBFloat16OnSim is TestCUDAConvBFloat16 on a simulated GPU.
func TestConvBFloat16OnSim(t *testing.T) {
	if !Sim(0).Available() {
		t.Skip("no sim device")
	}
	bf16Block(t, Sim(0))
}

// TestConvOnSimMatchesCPU runs some of the GPU comparisons on a simulated
// GPU, which has no native kernels: both modes compose.
func TestConvOnSimMatchesCPU(t *testing.T) {
	if !Sim(0).Available() {
		t.Skip("no sim device")
	}
	t.Run("conv2d", func(t *testing.T) {
		tc := convCases[6]
		x, w, b := convInputs(tc, false)
		compareOn(t, Sim(0), cudaModes, false, tolerance{rel: 1e-4}, func(xs []*Tensor) *Tensor { return Conv2d(xs[0], xs[1], xs[2], tc.p) }, x, w, b)
	})
	t.Run("conv_transpose2d", func(t *testing.T) {
		tc := convTCases[3]
		x, w, b := convInputs(tc, true)
		compareOn(t, Sim(0), cudaModes, true, tolerance{rel: 1e-4}, func(xs []*Tensor) *Tensor { return ConvTranspose2d(xs[0], xs[1], xs[2], tc.p) }, x, w, b)
	})
	t.Run("max_pool2d", func(t *testing.T) {
		pc := poolCases[1]
		compareOn(t, Sim(0), cudaModes, false, tolerance{rel: 1e-4}, func(xs []*Tensor) *Tensor { return MaxPool2d(xs[0], pc.p) }, rnd(81, pc.x...))
	})
	t.Run("batch_norm2d", func(t *testing.T) {
		compareOn(t, Sim(0), cudaModes, false, tolerance{rel: 1e-4}, func(xs []*Tensor) *Tensor {
			return BatchNorm2d(xs[0], xs[1], xs[2], nil, nil, true, 0.1, 1e-5)
		}, rnd(86, 3, 4, 3, 2), rnd(87, 4), rnd(88, 4))
	})
}

// bf16Block runs a block of convolution, batch norm, ReLU and pooling in
// bfloat16 under autocast on d, with its native kernels and composed, and
// compares it with the CPU in float32.
func bf16Block(t *testing.T, d Device) {
	x := Randn(Shape{4, 16, 12, 12}, Float32, WithGenerator(NewGenerator(1)))
	w := Randn(Shape{32, 16, 3, 3}, Float32, WithGenerator(NewGenerator(2))).MulScalar(0.1)
	gamma, beta := Ones(Shape{32}, Float32), Zeros(Shape{32}, Float32)
	block := func(x, w, gamma, beta *Tensor) *Tensor {
		h := Conv2d(x, w, nil, Conv2dParams{Padding: [2]int{1, 1}})
		h = BatchNorm2d(h, gamma, beta, nil, nil, true, 0.1, 1e-5).Relu()
		return MaxPool2d(h, Pool2dParams{Kernel: [2]int{2, 2}})
	}
	want := block(x, w, gamma, beta).Float64s()
	for _, m := range cudaModes {
		for _, cl := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s channels-last=%v", m.name, cl), func(t *testing.T) {
				noNativeConv.Store(!m.native)
				defer noNativeConv.Store(false)
				xd, wd := x.To(d), w.To(d).SetRequiresGrad(true)
				if cl {
					xd, wd = xd.Contiguous(ChannelsLast), wd.Detach().Contiguous(ChannelsLast).SetRequiresGrad(true)
				}
				gd, bd := gamma.To(d).SetRequiresGrad(true), beta.To(d).SetRequiresGrad(true)
				var y *Tensor
				Autocast(BFloat16, func() { y = Keep(block(xd, wd, gd, bd)) })
				if y.DType() != BFloat16 {
					t.Fatalf("output %s, want bfloat16", y.DType())
				}
				closeTo(t, "bf16 block", y.Cast(Float32).Float64s(), want, 5e-2)
				y.Cast(Float32).Sum().Backward()
				for i, p := range []*Tensor{wd, gd, bd} {
					if g := p.Grad(); g == nil || g.DType() != Float32 {
						t.Fatalf("parameter %d: gradient %v, want float32", i, g)
					}
				}
			})
		}
	}
}

// TestTF32ExplainsCUDAValues: elements that cuDNN's default float32
// convolutions gave on an H200, where the native path differed from the
// CPU by more than 5e-3 of their value, are what the CPU computes from
// inputs rounded to TF32, to float32's accuracy; the exact result differs
// by far more. It checks the CPU side of convSettings' TF32 mode.
func TestTF32ExplainsCUDAValues(t *testing.T) {
	for _, c := range []struct {
		tc    convCase
		at    int
		h200  float64
		exact float64
	}{
		{convCase{"resnet block", []int{4, 64, 14, 14}, []int{64, 64, 3, 3}, Conv2dParams{Padding: [2]int{1, 1}}, true}, 31, 0.7050741910934448, 0.6961575746536255},
		{convCase{"resnet stem", []int{2, 3, 32, 32}, []int{16, 3, 7, 7}, Conv2dParams{Stride: [2]int{2, 2}, Padding: [2]int{3, 3}}, true}, 235, 0.027386605739593506, 0.0214616060256958},
		{convCase{"3x3 with bias", []int{4, 32, 10, 10}, []int{32, 32, 3, 3}, Conv2dParams{Padding: [2]int{1, 1}}, false}, 265, 0.27542102336883545, 0.2823490500450134},
	} {
		t.Run(c.tc.name, func(t *testing.T) {
			x, w, b := convInputs(c.tc, false)
			f := func(x, w *Tensor) float64 {
				var bv []float64
				if b != nil {
					bv = mapValues(b, func(v float64) float64 { return v }).Float64s()
				}
				out, _ := refConv2d(x.Float64s(), c.tc.x, w.Float64s(), c.tc.w, bv, c.tc.p)
				return out[c.at]
			}
			ident := func(v float64) float64 { return v }
			exact := f(mapValues(x, ident), mapValues(w, ident))
			tf32 := f(mapValues(x, roundTF32), mapValues(w, roundTF32))
			if math.Abs(exact-c.exact) > 1e-5 {
				t.Errorf("float32 inputs give %v, the CPU gave %v", exact, c.exact)
			}
			if math.Abs(tf32-c.h200) > 2e-5 {
				t.Errorf("TF32 inputs give %v, the H200 gave %v", tf32, c.h200)
			}
			if math.Abs(tf32-exact) < 5e-3*(1+math.Abs(exact)) {
				t.Errorf("TF32 rounding moves the element by only %.3g", tf32-exact)
			}
		})
	}
}

// resizeCases are the padding, resizing and patch ops that the GPU and sim
// tests compare with the CPU, forward and backward.
var resizeCases = []struct {
	name string
	x    []int
	f    func(x *Tensor) *Tensor
}{
	{"pad constant", []int{2, 3, 5, 4}, func(x *Tensor) *Tensor { return Pad(x, []int{1, 2, -1, 3}, PadConstant, 0.5) }},
	{"pad reflect", []int{2, 3, 5, 4}, func(x *Tensor) *Tensor { return Pad(x, []int{3, 1, 2, 4}, PadReflect, 0) }},
	{"pad replicate", []int{2, 3, 5, 4}, func(x *Tensor) *Tensor { return Pad(x, []int{2, 2, 0, 3}, PadReplicate, 0) }},
	{"pad circular", []int{2, 3, 5, 4}, func(x *Tensor) *Tensor { return Pad(x, []int{4, 1, 5, 2}, PadCircular, 0) }},
	{"nearest", []int{2, 3, 5, 4}, func(x *Tensor) *Tensor { return Interpolate(x, InterpolateOptions{Size: []int{7, 9}}) }},
	{"nearest-exact", []int{2, 3, 5, 4}, func(x *Tensor) *Tensor {
		return Interpolate(x, InterpolateOptions{ScaleFactor: []float64{0.7, 1.6}, Mode: InterpNearestExact})
	}},
	{"bilinear", []int{2, 3, 5, 4}, func(x *Tensor) *Tensor {
		return Interpolate(x, InterpolateOptions{ScaleFactor: []float64{2.5}, Mode: InterpBilinear})
	}},
	{"bilinear align corners", []int{2, 3, 5, 4}, func(x *Tensor) *Tensor {
		return Interpolate(x, InterpolateOptions{Size: []int{3, 8}, Mode: InterpBilinear, AlignCorners: true})
	}},
	{"bicubic", []int{2, 3, 5, 4}, func(x *Tensor) *Tensor {
		return Interpolate(x, InterpolateOptions{Size: []int{8, 6}, Mode: InterpBicubic})
	}},
	{"area", []int{2, 3, 7, 5}, func(x *Tensor) *Tensor {
		return Interpolate(x, InterpolateOptions{Size: []int{3, 2}, Mode: InterpArea})
	}},
	{"linear", []int{2, 3, 9}, func(x *Tensor) *Tensor { return Interpolate(x, InterpolateOptions{Size: []int{4}, Mode: InterpLinear}) }},
	{"pixel shuffle", []int{2, 8, 3, 4}, func(x *Tensor) *Tensor { return PixelShuffle(x, 2) }},
	{"pixel unshuffle", []int{2, 2, 4, 6}, func(x *Tensor) *Tensor { return PixelUnshuffle(x, 2) }},
	{"unfold", []int{2, 3, 5, 4}, func(x *Tensor) *Tensor {
		return Unfold(x, [2]int{3, 2}, FoldParams{Dilation: [2]int{1, 2}, Padding: [2]int{1, 1}, Stride: [2]int{2, 1}})
	}},
	{"fold", []int{2, 6, 4}, func(x *Tensor) *Tensor { return Fold(x, [2]int{4, 5}, [2]int{3, 2}, FoldParams{Stride: [2]int{1, 2}}) }},
	{"tensor unfold", []int{2, 3, 5, 4}, func(x *Tensor) *Tensor { return x.Unfold(2, 3, 1) }},
}

// TestCUDAResizeMatchesCPU runs the padding, resizing and patch ops on
// cuda:0, which compose them from its gathers and scatters, and compares
// their outputs and gradients with the CPU's.
func TestCUDAResizeMatchesCPU(t *testing.T) {
	needCUDA(t)
	for i, tc := range resizeCases {
		t.Run(tc.name, func(t *testing.T) {
			compareOn(t, CUDA(0), cudaModes, false, cudaTol, func(xs []*Tensor) *Tensor { return tc.f(xs[0]) }, rnd(uint64(90+i), tc.x...))
		})
	}
}

// TestResizeOnSimMatchesCPU runs the comparisons of
// TestCUDAResizeMatchesCPU on a simulated GPU.
func TestResizeOnSimMatchesCPU(t *testing.T) {
	if !Sim(0).Available() {
		t.Skip("no sim device")
	}
	for i, tc := range resizeCases {
		t.Run(tc.name, func(t *testing.T) {
			compareOn(t, Sim(0), cudaModes, false, tolerance{rel: 1e-5}, func(xs []*Tensor) *Tensor { return tc.f(xs[0]) }, rnd(uint64(90+i), tc.x...))
		})
	}
}

// TestCUDAResidualChainMatchesCPU runs two residual blocks in training
// mode on cuda:0 against the CPU: the first block's output feeds the
// second's convolution and its residual, so its gradient arrives in two
// parts that the fused batch norm's backward pass adds (channels-last) or
// the engine adds (composed).
func TestCUDAResidualChainMatchesCPU(t *testing.T) {
	needCUDA(t)
	compareOn(t, CUDA(0), cudaModes, false, cudaTol, residualChain,
		rnd(90, 4, 8, 5, 6), rnd(91, 8, 8, 3, 3).MulScalar(0.3), rnd(92, 8, 8, 1, 1).MulScalar(0.5),
		rnd(93, 8), rnd(94, 8), rnd(95, 8), rnd(96, 8))
}

// residualChain is two residual blocks on xs: x, the two blocks' weights,
// then their batch norms' scales and shifts.
func residualChain(xs []*Tensor) *Tensor {
	x, w1, w2 := xs[0], xs[1], xs[2]
	h := BatchNorm2dReLU(Conv2d(x, w1, nil, Conv2dParams{Padding: [2]int{1, 1}}), x, xs[3], xs[4], nil, nil, true, 0.1, 1e-5)
	return BatchNorm2dReLU(Conv2d(h, w2, nil, Conv2dParams{}), h, xs[5], xs[6], nil, nil, true, 0.1, 1e-5)
}

// TestResidualChainBFloat16 runs residualChain under bf16 autocast,
// channels-last and NCHW, on the CPU and, when there is one, on cuda:0,
// whose channels-last batch norm takes the block's gradient in its two
// parts (the identity's and the convolution's) in bf16, against the CPU
// in float32. Outputs and gradients are compared by their root mean
// square error, relative to the root mean square value: elements that the
// ReLUs pass in one precision and not in the other differ by a whole
// gradient, while a part of the gradient lost or added twice moves the
// whole tensor. On the CPU the errors are 0.2-4%.
func TestResidualChainBFloat16(t *testing.T) {
	inputs := []*Tensor{rnd(90, 4, 8, 5, 6), rnd(91, 8, 8, 3, 3).MulScalar(0.3), rnd(92, 8, 8, 1, 1).MulScalar(0.5),
		rnd(93, 8), rnd(94, 8), rnd(95, 8), rnd(96, 8)}
	run := func(d Device, cl, bf16 bool) [][]float64 {
		var ins []*Tensor
		for _, in := range inputs {
			x := in.Cast(Float32).To(d)
			if cl && x.Dim() == 4 {
				x = x.Contiguous(ChannelsLast)
			}
			ins = append(ins, x.Detach().SetRequiresGrad(true))
		}
		var y *Tensor
		if bf16 {
			Autocast(BFloat16, func() { y = Keep(residualChain(ins)) })
		} else {
			y = residualChain(ins)
		}
		out := [][]float64{y.Cast(Float64).Float64s()}
		g := Randn(y.Shape(), Float32, WithGenerator(NewGenerator(99))).To(d).Cast(y.DType())
		y.Backward(Gradient(g))
		for i, in := range ins {
			if in.Grad() == nil {
				t.Fatalf("input %d: no gradient", i)
			}
			out = append(out, in.Grad().Cast(Float64).Float64s())
		}
		return out
	}
	want := run(CPU, false, false)
	devices := []Device{CPU}
	if DeviceCount() > 0 {
		devices = append(devices, CUDA(0))
	}
	for _, d := range devices {
		for _, cl := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v channels-last=%v", d, cl), func(t *testing.T) {
				got := run(d, cl, true)
				for i := range want {
					scale, maxe, sq, sqw := 0.0, 0.0, 0.0, 0.0
					for j, v := range want[i] {
						scale = math.Max(scale, math.Abs(v))
						e := math.Abs(got[i][j] - v)
						maxe = math.Max(maxe, e)
						sq += e * e
						sqw += v * v
					}
					if rel := math.Sqrt(sq / sqw); !(rel <= 0.06) {
						t.Errorf("result %d: rms error %.3g of the rms value (largest %.3g, max error %.3g), want at most 0.06",
							i, rel, scale, maxe)
					}
				}
			})
		}
	}
}
