package cuda

import (
	"errors"
	"fmt"
	"testing"

	"github.com/vramgo/vram/backend"
)

// TestCompareDequantizeInt8 checks the int8 dequantization kernel against
// the CPU's, element for element (both round the float32 product once),
// for every float dtype, with row lengths a multiple of 4 (the vector
// form) and not, and checks that a non-contiguous weight is declined with
// ErrNotImplemented.
func TestCompareDequantizeInt8(t *testing.T) {
	p := newPair(t)
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.Float16, backend.BFloat16} {
		for _, sh := range [][2]int{{1024, 4096}, {33, 65}, {5, 8}, {3000, 1}, {0, 4}} {
			name := fmt.Sprintf("%s/%dx%d", dt, sh[0], sh[1])
			n, k := sh[0], sh[1]
			wv := make([]float64, n*k)
			for i := range wv {
				wv[i] = float64(p.rng.IntN(255) - 127)
			}
			if n*k > 0 {
				wv[0], wv[len(wv)-1] = -128, 127
			}
			sv := p.random(dt, n, 1e-3, 0.1)
			wq := p.place(backend.Int8, []int{n, k}, layContig, wv, 0)
			sc := p.place(dt, []int{n}, layContig, sv, 0)
			out := p.output(dt, []int{n, k}, layContig)
			if !p.run(name, func(dev backend.Device, side int) error {
				v := []twin{out, wq, sc}
				pick := func(i int) backend.View {
					if side == 0 {
						return v[i].g
					}
					return v[i].c
				}
				return dev.(backend.Int8Dequantizer).DequantizeInt8(dev.DefaultStream(), pick(0), pick(1), pick(2))
			}) {
				continue
			}
			p.compare(name, out, 0, 0, nil)
		}
		// A transposed weight is not this kernel's.
		wq := p.place(backend.Int8, []int{8, 4}, layTransposed, make([]float64, 32), 0)
		sc := p.place(dt, []int{8}, layContig, make([]float64, 8), 0)
		out := p.output(dt, []int{8, 4}, layContig)
		if err := p.g.DequantizeInt8(p.g.DefaultStream(), out.g, wq.g, sc.g); !errors.Is(err, backend.ErrNotImplemented) {
			t.Errorf("%s: transposed weight: %v, want ErrNotImplemented", dt, err)
		}
	}
}
