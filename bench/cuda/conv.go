package main

import (
	"fmt"
	"os"
	"time"

	"github.com/vramgo/vram/backend"
	cb "github.com/vramgo/vram/backend/cuda"
)

// convShape is one convolution of ResNet-50 (square inputs and filters).
type convShape struct {
	name                     string
	c, hw, o, k, stride, pad int
}

// resnetConvs are the kinds of convolution in a ResNet-50 at 224x224:
// the stem, a bottleneck's 1x1 reduce and expand, and the 3x3s of the four
// stages (the first of a stage with stride 2).
var resnetConvs = []convShape{
	{"stem_7x7_s2", 3, 224, 64, 7, 2, 3},
	{"l1_1x1_reduce", 256, 56, 64, 1, 1, 0},
	{"l1_3x3", 64, 56, 64, 3, 1, 1},
	{"l1_1x1_expand", 64, 56, 256, 1, 1, 0},
	{"l2_3x3_s2", 128, 56, 128, 3, 2, 1},
	{"l3_3x3", 256, 14, 256, 3, 1, 1},
	{"l4_3x3", 512, 7, 512, 3, 1, 1},
}

// convBufs holds the tensors of one convolution of a step: x, w, y (also
// the output gradient), dx and dw.
type convBufs struct {
	x, w, y, dx, dw backend.View
	p               backend.Conv2DParams
}

// convView allocates an [n, c, h, w] view in NCHW, or NHWC when nhwc is
// set, filled with a small constant.
func convView(d *cb.Device, dt backend.DType, nhwc bool, n, c, h, w int) backend.View {
	v := view(d, dt, n*c*h*w)
	v.Shape = []int{n, c, h, w}
	v.Strides = []int{c * h * w, h * w, w, 1}
	if nhwc {
		v.Strides = []int{h * w * c, 1, w * c, c}
	}
	must(d.Fill(d.DefaultStream(), v, 0.01))
	return v
}

func newConvBufs(d *cb.Device, dt backend.DType, nhwc bool, batch int) []convBufs {
	var out []convBufs
	for _, s := range resnetConvs {
		oh := backend.ConvOutputSize(s.hw, s.k, s.stride, s.pad, 1)
		out = append(out, convBufs{
			x:  convView(d, dt, nhwc, batch, s.c, s.hw, s.hw),
			w:  convView(d, dt, nhwc, s.o, s.c, s.k, s.k),
			y:  convView(d, dt, nhwc, batch, s.o, oh, oh),
			dx: convView(d, dt, nhwc, batch, s.c, s.hw, s.hw),
			dw: convView(d, dt, nhwc, s.o, s.c, s.k, s.k),
			p: backend.Conv2DParams{Stride: [2]int{s.stride, s.stride}, Padding: [2]int{s.pad, s.pad},
				Dilation: [2]int{1, 1}, Groups: 1},
		})
	}
	return out
}

func freeConvBufs(d *cb.Device, bs []convBufs) {
	for _, b := range bs {
		for _, v := range []backend.View{b.x, b.w, b.y, b.dx, b.dw} {
			d.Free(v.Buf, d.DefaultStream())
		}
	}
}

// convStep runs the forward pass, the input gradient and the filter
// gradient of every convolution.
func convStep(d *cb.Device, bs []convBufs) {
	s := d.DefaultStream()
	for _, b := range bs {
		must(d.Conv2D(s, b.y, b.x, b.w, backend.View{}, b.p, false))
		must(d.Conv2DBackwardData(s, b.dx, b.y, b.w, b.p))
		must(d.Conv2DBackwardFilter(s, b.dw, backend.View{}, b.y, b.x, b.p))
	}
}

// benchConv times the ResNet-50 convolutions forward and backward at batch
// 64, in float32 NCHW (TF32, PyTorch's default for cuDNN) and bfloat16
// channels-last, with cuDNN's benchmark mode off and on: fixed shapes (the
// first step, which searches in benchmark mode, and the steady state), and
// shapes that change every step (the batch size goes down by one each
// step, so every step is a first step).
func benchConv(d *cb.Device, reps int) {
	if _, err := cb.CuDNNVersion(); err != nil {
		emit("conv_skipped", 0, "", err.Error())
		return
	}
	old := cb.CuDNN()
	defer cb.SetCuDNN(old)
	steps := 8
	if reps < 10 {
		steps = 4
	}
	for _, cfg := range []struct {
		name string
		dt   backend.DType
		nhwc bool
	}{{"fp32", backend.Float32, false}, {"bf16_cl", backend.BFloat16, true}} {
		for _, bench := range []bool{false, true} {
			mode := "bench_off"
			if bench {
				mode = "bench_on"
			}
			cb.SetCuDNN(cb.CuDNNSettings{Benchmark: bench})
			bs := newConvBufs(d, cfg.dt, cfg.nhwc, 64)
			s0, g0 := cb.CuDNNStatistics(), cb.CuDNNGraphStatistics()
			t0 := time.Now()
			convStep(d, bs)
			must(d.Synchronize())
			first := time.Since(t0)
			s1 := cb.CuDNNStatistics()
			steady := wallMs(d, reps, func() { convStep(d, bs) })
			prefix := "conv_resnet50_" + cfg.name + "_"
			reportGraph(prefix+mode, g0, s0)
			// The same steady state on the legacy API alone, for the
			// comparison (stderr only: PyTorch has no such row).
			cb.SetCuDNN(cb.CuDNNSettings{Benchmark: bench, NoGraphAPI: true})
			convStep(d, bs)
			legacy := wallMs(d, reps, func() { convStep(d, bs) })
			fmt.Fprintf(os.Stderr, "%sfixed_%s: %.3f ms with cuDNN's graph API first, %.3f ms on the legacy API alone\n",
				prefix, mode, steady, legacy)
			cb.SetCuDNN(cb.CuDNNSettings{Benchmark: bench})
			freeConvBufs(d, bs)
			emit(prefix+"fixed_"+mode, steady, "ms", "7 ResNet-50 convolutions, batch 64, forward + input and filter gradients, steady state")
			emit(prefix+"first_step_"+mode, float64(first.Microseconds())/1000, "ms",
				fmt.Sprintf("the first step: %d searches taking %.1f ms, %d heuristic queries", s1.Searches-s0.Searches,
					float64((s1.SearchTime-s0.SearchTime).Microseconds())/1000, s1.Heuristics-s0.Heuristics))

			// Varying shapes: batch 63, 62, ... in both modes; each mode
			// keeps its own algorithm choices, so the second meets the
			// sizes fresh too (only their descriptors are cached).
			const base = 63
			var ts []float64
			for i := range steps {
				bs := newConvBufs(d, cfg.dt, cfg.nhwc, base-i)
				must(d.Synchronize())
				t0 := time.Now()
				convStep(d, bs)
				must(d.Synchronize())
				ts = append(ts, time.Since(t0).Seconds()*1000)
				freeConvBufs(d, bs)
			}
			emit(prefix+"varying_"+mode, median(ts), "ms",
				fmt.Sprintf("a new batch size every step (%d..%d), median of %d steps", base, base-steps+1, steps))
		}
	}
}

// reportGraph prints to stderr how many of the convolutions since g0 and
// s0 ran through cuDNN's graph API and how many through the legacy API's
// algorithm choices, with the graph path's fallback reasons.
func reportGraph(what string, g0 cb.CuDNNGraphStats, s0 cb.CuDNNStats) {
	g1, s1 := cb.CuDNNGraphStatistics(), cb.CuDNNStatistics()
	fmt.Fprintf(os.Stderr, "%s: graph API: %d plans built, %d executions, %d fallbacks; legacy API: %d searches, %d heuristic queries (graph plans count in these too)\n",
		what, g1.Plans-g0.Plans, g1.Executions-g0.Executions, g1.Fallbacks-g0.Fallbacks,
		s1.Searches-s0.Searches, s1.Heuristics-s0.Heuristics)
	for _, f := range g1.Failures[len(g0.Failures):] {
		fmt.Fprintf(os.Stderr, "%s: graph fallback: %s\n", what, f)
	}
}
