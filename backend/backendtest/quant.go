package backendtest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vramgo/vram/backend"
)

// dequantRef returns q·s as [backend.Int8Dequantizer.DequantizeInt8]
// computes it for dtype dt: in float32 (float64 for float64), rounded once
// to dt.
func dequantRef(dt backend.DType, q, s float64) float64 {
	if dt == backend.Float64 {
		return q * s
	}
	return Quantize(dt, float64(float32(q)*float32(s)))
}

// testInt8Weights checks the optional int8-weight interfaces against a
// float64 reference: DequantizeInt8 exactly, MatMulInt8Weight within the
// dtype's tolerance relative to the sum of the magnitudes of the terms,
// with and without a bias, across the CPU's block of output channels; and
// their argument checks.
func (h *harness) testInt8Weights(t *testing.T) {
	dq, okD := h.dev.(backend.Int8Dequantizer)
	il, okL := h.dev.(backend.Int8Linear)
	if !okD && !okL {
		t.Skip("the device has no int8-weight kernels")
	}
	s := h.dev.DefaultStream()
	shapes := [][3]int{{3, 5, 7}, {17, 64, 130}, {2, 1, 300}, {0, 4, 3}, {4, 0, 3}}
	for _, dt := range floatDTypes {
		for _, sh := range shapes {
			m, k, n := sh[0], sh[1], sh[2]
			rng := rand.New(rand.NewPCG(uint64(m*k*n), uint64(dt)))
			qv := make([]float64, n*k)
			for i := range qv {
				qv[i] = float64(rng.IntN(256) - 128)
			}
			sv := make([]float64, n)
			for i := range sv {
				sv[i] = Quantize(dt, 0.001+0.02*rng.Float64())
			}
			xv := quantizeAll(dt, normals(rng, m*k, 1))
			bv := quantizeAll(dt, normals(rng, n, 1))
			wq := NewView(t, h.dev, backend.Int8, []int{n, k}, qv)
			sc := NewView(t, h.dev, dt, []int{n}, sv)
			w := make([]float64, n*k)
			for i := range w {
				w[i] = dequantRef(dt, qv[i], sv[i/max(k, 1)])
			}
			if okD {
				t.Run(fmt.Sprintf("dequantize/%s/%dx%d", dt, n, k), func(t *testing.T) {
					d := makeView(t, h.dev, dt, []int{n, k}, filled(n*k, padValue), contiguous)
					h.ok(t, "DequantizeInt8", h.call(func() error { return dq.DequantizeInt8(s, d, wq, sc) }))
					expectTol(t, "dequantized", h.result(t, d), w, 0, 0)
				})
			}
			if !okL {
				continue
			}
			for _, withBias := range []bool{false, true} {
				t.Run(fmt.Sprintf("linear/%s/%dx%dx%d/bias=%v", dt, m, k, n, withBias), func(t *testing.T) {
					x := NewView(t, h.dev, dt, []int{m, k}, xv)
					bias := backend.View{}
					if withBias {
						bias = NewView(t, h.dev, dt, []int{n}, bv)
					}
					d := makeView(t, h.dev, dt, []int{m, n}, filled(m*n, padValue), contiguous)
					h.ok(t, "MatMulInt8Weight", h.call(func() error { return il.MatMulInt8Weight(s, d, x, wq, sc, bias) }))
					got := h.result(t, d)
					rtol, atol := tolerance(dt)
					for i := range m {
						for j := range n {
							want, mag := 0.0, 0.0
							for c := range k {
								want += xv[i*k+c] * w[j*k+c]
								mag += math.Abs(xv[i*k+c] * w[j*k+c])
							}
							if withBias {
								want += bv[j]
								mag += math.Abs(bv[j])
							}
							if g := got[i*n+j]; math.Abs(g-want) > atol+rtol*mag {
								t.Fatalf("element [%d,%d] = %v, want %v", i, j, g, want)
							}
						}
					}
				})
			}
		}
	}
	t.Run("arguments", func(t *testing.T) {
		f32 := backend.Float32
		x := NewView(t, h.dev, f32, []int{2, 4}, filled(8, 1))
		wq := NewView(t, h.dev, backend.Int8, []int{3, 4}, filled(12, 1))
		wf := NewView(t, h.dev, f32, []int{3, 4}, filled(12, 1))
		sc := NewView(t, h.dev, f32, []int{3}, filled(3, 1))
		sc64 := NewView(t, h.dev, backend.Float64, []int{3}, filled(3, 1))
		d := NewView(t, h.dev, f32, []int{2, 3}, filled(6, 0))
		dw := NewView(t, h.dev, f32, []int{3, 4}, filled(12, 0))
		wt := wq
		wt.Shape, wt.Strides = []int{3, 2}, []int{1, 3}
		short := NewView(t, h.dev, f32, []int{2}, filled(2, 1))
		cases := []struct {
			name    string
			lin     bool
			args    [5]backend.View
			notImpl bool
		}{
			{"float weight", true, [5]backend.View{d, x, wf, sc, {}}, false},
			{"scale dtype", true, [5]backend.View{d, x, wq, sc64, {}}, false},
			{"scale length", true, [5]backend.View{d, x, wq, short, {}}, false},
			{"input width", true, [5]backend.View{d, dw, wq, sc, {}}, false},
			{"bias length", true, [5]backend.View{d, x, wq, sc, short}, false},
			{"strided weight", false, [5]backend.View{NewView(t, h.dev, f32, []int{3, 2}, filled(6, 0)), wt, sc}, true},
			{"int destination", false, [5]backend.View{NewView(t, h.dev, backend.Int32, []int{3, 4}, filled(12, 0)), wq, sc}, true},
			{"destination shape", false, [5]backend.View{d, wq, sc}, false},
		}
		for _, c := range cases {
			var err error
			switch {
			case c.lin && okL:
				err = il.MatMulInt8Weight(s, c.args[0], c.args[1], c.args[2], c.args[3], c.args[4])
			case !c.lin && okD:
				err = dq.DequantizeInt8(s, c.args[0], c.args[1], c.args[2])
			default:
				continue
			}
			if err == nil {
				t.Errorf("%s: no error", c.name)
			} else if errors.Is(err, backend.ErrNotImplemented) != c.notImpl {
				t.Errorf("%s: %v; want ErrNotImplemented %v", c.name, err, c.notImpl)
			}
		}
	})
}
