package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vramgo/vram/backend"
)

// The graph-API tests run convolutions with the graph path on and check
// both the results (against the host reference of cudnn_gpu_test.go) and
// that the graph path really computed them (CuDNNGraphStatistics). A
// failure prints the graph path's fallback reasons, which name the
// convolution, the step and cuDNN's status.

// graphFailures returns the graph path's recorded fallback reasons, one
// a line, for failure messages.
func graphFailures() string {
	f := CuDNNGraphStatistics().Failures
	if len(f) == 0 {
		return "(no fallback reasons recorded)"
	}
	return strings.Join(f, "\n\t")
}

type graphCase struct {
	name   string
	x, w   [4]int
	p      backend.Conv2DParams
	strict bool // the graph path must take it (plain convolutions); otherwise a fallback is logged
}

var graphCases = []graphCase{
	{name: "3x3 pad 1", x: [4]int{2, 16, 8, 8}, w: [4]int{16, 16, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1), strict: true},
	{name: "1x1", x: [4]int{2, 32, 7, 7}, w: [4]int{16, 32, 1, 1}, p: cp([2]int{1, 1}, [2]int{0, 0}, [2]int{1, 1}, 1), strict: true},
	{name: "stride 2", x: [4]int{2, 16, 9, 9}, w: [4]int{32, 16, 3, 3}, p: cp([2]int{2, 2}, [2]int{1, 1}, [2]int{1, 1}, 1), strict: true},
	{name: "dilation 2", x: [4]int{1, 16, 10, 9}, w: [4]int{16, 16, 3, 3}, p: cp([2]int{1, 1}, [2]int{2, 2}, [2]int{2, 2}, 1)},
	{name: "groups 2", x: [4]int{2, 16, 7, 7}, w: [4]int{16, 8, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 2)},
	{name: "depthwise", x: [4]int{2, 16, 8, 8}, w: [4]int{16, 1, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 16)},
	{name: "asymmetric", x: [4]int{2, 8, 11, 8}, w: [4]int{16, 8, 3, 2}, p: cp([2]int{2, 1}, [2]int{1, 0}, [2]int{1, 2}, 1)},
}

// graphConvRef is the host reference of one case: y, dx and dw with the
// scales of their sums.
type graphConvRef struct {
	x, w, dy                []float64
	ys                      [4]int
	y, yS, dx, dxS, dw, dwS []float64
}

func newGraphConvRef(r *rand.Rand, dt backend.DType, xs, ws [4]int, p backend.Conv2DParams) *graphConvRef {
	ref := &graphConvRef{x: rounded(r, dt, xs[0]*xs[1]*xs[2]*xs[3]), w: rounded(r, dt, ws[0]*ws[1]*ws[2]*ws[3])}
	ref.ys = convEach(xs, ws, p, func(int, int, int) {})
	ny := ref.ys[0] * ref.ys[1] * ref.ys[2] * ref.ys[3]
	ref.dy = rounded(r, dt, ny)
	ref.y, ref.yS = make([]float64, ny), make([]float64, ny)
	ref.dx, ref.dxS = make([]float64, len(ref.x)), make([]float64, len(ref.x))
	ref.dw, ref.dwS = make([]float64, len(ref.w)), make([]float64, len(ref.w))
	convEach(xs, ws, p, func(xi, wi, yi int) {
		ref.y[yi] += ref.x[xi] * ref.w[wi]
		ref.yS[yi] += math.Abs(ref.x[xi] * ref.w[wi])
		ref.dx[xi] += ref.dy[yi] * ref.w[wi]
		ref.dxS[xi] += math.Abs(ref.dy[yi] * ref.w[wi])
		ref.dw[wi] += ref.dy[yi] * ref.x[xi]
		ref.dwS[wi] += math.Abs(ref.dy[yi] * ref.x[xi])
	})
	return ref
}

// runGraphCase runs the three directions of a case on d and checks them
// against the reference; it returns the graph executions and fallbacks
// the three calls added.
func runGraphCase(t *testing.T, d *Device, dt backend.DType, l layout, tc graphCase, seed uint64) (execs, fallbacks int64) {
	t.Helper()
	ref := newGraphConvRef(rand.New(rand.NewPCG(seed, 11)), dt, tc.x, tc.w, tc.p)
	tol := dnnTol(dt)
	xv, wv := put(t, d, dt, tc.x, l, ref.x), put(t, d, dt, tc.w, l, ref.w)
	ny := len(ref.y)
	yv := put(t, d, dt, ref.ys, l, nanVals(ny))
	dyv := put(t, d, dt, ref.ys, l, ref.dy)
	dxv := put(t, d, dt, tc.x, l, nanVals(len(ref.x)))
	dwv := put(t, d, dt, tc.w, l, nanVals(len(ref.w)))
	g0 := CuDNNGraphStatistics()
	if err := d.Conv2D(nil, yv, xv, wv, backend.View{}, tc.p, false); err != nil {
		t.Fatalf("Conv2D: %v", err)
	}
	near(t, "y", get(t, d, yv), ref.y, ref.yS, tol)
	if err := d.Conv2DBackwardData(nil, dxv, dyv, wv, tc.p); err != nil {
		t.Fatalf("Conv2DBackwardData: %v", err)
	}
	near(t, "dx", get(t, d, dxv), ref.dx, ref.dxS, tol)
	if err := d.Conv2DBackwardFilter(nil, dwv, backend.View{}, dyv, xv, tc.p); err != nil {
		t.Fatalf("Conv2DBackwardFilter: %v", err)
	}
	near(t, "dw", get(t, d, dwv), ref.dw, ref.dwS, tol)
	g1 := CuDNNGraphStatistics()
	return g1.Executions - g0.Executions, g1.Fallbacks - g0.Fallbacks
}

// TestCuDNNGraphConv runs forward, data-gradient and filter-gradient
// convolutions of fp32, fp16 and bf16 in NCHW and NHWC, plain, strided,
// dilated, grouped and depthwise, through the graph path, in heuristic
// mode (and two shapes in benchmark mode), against the host; the plain
// ones of half precision in NHWC and of float32 in NCHW must have run
// through the graph API (three executions, no fallback).
func TestCuDNNGraphConv(t *testing.T) {
	for _, bench := range []bool{false, true} {
		for _, dt := range []backend.DType{backend.Float32, backend.Float16, backend.BFloat16} {
			for _, l := range []layout{nchw, nhwc} {
				for i, tc := range graphCases {
					if bench && i != 0 && i != 2 {
						continue // benchmark mode times up to 8 plans a direction: two shapes suffice
					}
					t.Run(fmt.Sprintf("%s/%s/%s/benchmark=%v", dt, l, tc.name, bench), func(t *testing.T) {
						d := dnnGPU(t, CuDNNSettings{NoTF32: true, Benchmark: bench})
						execs, falls := runGraphCase(t, d, dt, l, tc, uint64(i))
						if execs == 3 && falls == 0 {
							return
						}
						msg := fmt.Sprintf("%d graph executions and %d fallbacks, want 3 and 0; fallback reasons:\n\t%s", execs, falls, graphFailures())
						// Required where the speed is wanted (half precision
						// channels-last) and for float32 NCHW; logged elsewhere.
						if tc.strict && (l == nhwc) == (dt != backend.Float32) {
							t.Error(msg)
						} else {
							t.Log("legacy path took part of it (results checked): " + msg)
						}
					})
				}
			}
		}
	}
}

// TestCuDNNGraphPlanCache checks that a plan is built once per key and
// reused: a second run of the same shapes builds nothing and executes
// through the graph again.
func TestCuDNNGraphPlanCache(t *testing.T) {
	d := dnnGPU(t, CuDNNSettings{})
	tc := graphCase{name: "cache", x: [4]int{2, 24, 9, 7}, w: [4]int{24, 24, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1)}
	runGraphCase(t, d, backend.BFloat16, nhwc, tc, 3)
	s1 := CuDNNGraphStatistics()
	execs, falls := runGraphCase(t, d, backend.BFloat16, nhwc, tc, 4)
	s2 := CuDNNGraphStatistics()
	if execs != 3 || falls != 0 || s2.Plans != s1.Plans {
		t.Errorf("second run: %d executions, %d fallbacks, %d new plans; want 3, 0, 0; fallback reasons:\n\t%s",
			execs, falls, s2.Plans-s1.Plans, graphFailures())
	}
}

// TestCuDNNGraphOff checks that NoGraphAPI keeps convolutions on the
// legacy API, with the same results.
func TestCuDNNGraphOff(t *testing.T) {
	d := dnnGPU(t, CuDNNSettings{NoTF32: true, NoGraphAPI: true})
	tc := graphCase{name: "off", x: [4]int{2, 8, 6, 6}, w: [4]int{8, 8, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1)}
	if execs, falls := runGraphCase(t, d, backend.Float16, nhwc, tc, 5); execs != 0 || falls != 0 {
		t.Errorf("NoGraphAPI: %d graph executions and %d fallbacks, want none", execs, falls)
	}
}

// TestCuDNNGraphFallback injects a failure into building a plan, and one
// into running it, and checks that the convolution is still right (the
// legacy path computed it), that the key is left to the legacy path after
// one attempt, and that the reason is recorded.
func TestCuDNNGraphFallback(t *testing.T) {
	for i, step := range []string{"build", "execute"} {
		t.Run(step, func(t *testing.T) {
			d := dnnGPU(t, CuDNNSettings{NoTF32: true})
			injected := errors.New("injected " + step + " failure")
			graphFault = func(s string) error {
				if s == step {
					return injected
				}
				return nil
			}
			t.Cleanup(func() { graphFault = nil })
			// A shape no other test uses, so that its keys are new.
			tc := graphCase{name: step, x: [4]int{3, 8, 5 + i, 6}, w: [4]int{12, 8, 3, 3}, p: cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1)}
			execs, falls := runGraphCase(t, d, backend.Float32, nchw, tc, 6)
			if execs != 0 || falls != 3 {
				t.Errorf("first run: %d executions and %d fallbacks, want 0 and 3", execs, falls)
			}
			found := false
			for _, f := range CuDNNGraphStatistics().Failures {
				found = found || strings.Contains(f, injected.Error())
			}
			if !found {
				t.Errorf("the injected failure is not among the reasons:\n\t%s", graphFailures())
			}
			graphFault = nil
			if execs, falls := runGraphCase(t, d, backend.Float32, nchw, tc, 7); execs != 0 || falls != 0 {
				t.Errorf("second run: %d executions and %d fallbacks, want 0 and 0 (the keys are the legacy path's now)", execs, falls)
			}
		})
	}
}

// TestCuDNNGraphMisaligned runs a convolution on views that start 2
// bytes into their buffers, so that the plan must be told an alignment of
// 2, and checks the result.
func TestCuDNNGraphMisaligned(t *testing.T) {
	d := dnnGPU(t, CuDNNSettings{})
	dt := backend.Float16
	xs, ws := [4]int{2, 8, 6, 6}, [4]int{8, 8, 3, 3}
	p := cp([2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1)
	ref := newGraphConvRef(rand.New(rand.NewPCG(8, 8)), dt, xs, ws, p)
	xv := put(t, d, dt, xs, nhwc, ref.x)
	wv := put(t, d, dt, ws, nhwc, ref.w)
	// y one element into a larger buffer.
	ny := len(ref.y)
	yb := put(t, d, dt, [4]int{1, 1, 1, ny + 1}, nchw, nanVals(ny+1))
	ns, cs, hs, wst := nhwc.strides(ref.ys[1], ref.ys[2], ref.ys[3])
	yv := backend.View{Buf: yb.Buf, DType: dt, Shape: ref.ys[:], Strides: []int{ns, cs, hs, wst}, Offset: 1}
	if err := d.Conv2D(nil, yv, xv, wv, backend.View{}, p, false); err != nil {
		t.Fatalf("Conv2D: %v", err)
	}
	all := get(t, d, yb)
	got := make([]float64, ny)
	i := 0
	for a := range ref.ys[0] {
		for b := range ref.ys[1] {
			for c := range ref.ys[2] {
				for e := range ref.ys[3] {
					got[i] = all[1+a*ns+b*cs+c*hs+e*wst]
					i++
				}
			}
		}
	}
	near(t, "y", got, ref.y, ref.yS, dnnTol(dt))
}
