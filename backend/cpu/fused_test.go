package cpu_test

import (
	"math"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
)

// TestMatMulBiasRoundsOnce checks that the CPU's fused product adds the
// bias to the float32 product and rounds once, as CUDA's epilogue does:
// in float16, 2048 + 1 rounds to 2048 (ties to even), so rounding the
// product 2049 before adding a bias of 1 gives 2048 instead of 2050.
func TestMatMulBiasRoundsOnce(t *testing.T) {
	dev := device(t)
	fm := dev.(backend.FusedMatMul)
	for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
		for _, relu := range []bool{false, true} {
			// Row 0: 1·big + 1·1 + bias 1. Row 1: negative, for the ReLU.
			big := 2048.0
			if dt == backend.BFloat16 {
				big = 256 // bfloat16 has 8 significant bits
			}
			a := backendtest.NewView(t, dev, dt, []int{2, 2}, []float64{1, 1, -1, -1})
			b := backendtest.NewView(t, dev, dt, []int{2, 3}, []float64{big, 2, 0.5, 1, 3, 0.25})
			bias := backendtest.NewView(t, dev, dt, []int{3}, []float64{1, -1, 0.125})
			dst := backendtest.NewView(t, dev, dt, []int{2, 3}, []float64{7, 7, 7, 7, 7, 7})
			if err := fm.MatMulBias(dev.DefaultStream(), dst, a, b, bias, relu); err != nil {
				t.Fatal(err)
			}
			want := []float64{big + 2, 4, 0.875, -big, -6, -0.625}
			for i := range want {
				want[i] = backendtest.Quantize(dt, want[i])
				if relu {
					want[i] = math.Max(want[i], 0)
				}
			}
			got := backendtest.ReadView(t, dev, dst)
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("%s relu=%v: element %d = %v, want %v", dt, relu, i, got[i], want[i])
				}
			}
		}
	}
}
