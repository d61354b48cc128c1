package cpu

import (
	"fmt"
	"math"

	"github.com/vramgo/vram/backend"
)

var _ backend.Modder = (*Device)(nil)

// Fmod sets dst to the truncated remainder of a and b (see
// [backend.Modder]); 16-bit floats compute in float32, where the remainder
// is exact and so rounds to itself.
func (*Device) Fmod(st backend.Stream, dst, a, b backend.View) (err error) {
	const what = "fmod"
	if err := begin(st, what, checkFmod(dst, a, b)); err != nil {
		return err
	}
	defer recoverTo(&err, what)
	ops, err := resolveAll(what, dst, a, b)
	if err != nil {
		return err
	}
	d, in := ops[0], []*operand{ops[1], ops[2]}
	if d.size() == 0 {
		return nil
	}
	switch computeKind(a.DType) {
	case kFloat32:
		return ewise(d, in, 4, func(dd []float32, x [][]float32) error {
			for i := range dd {
				dd[i] = float32(math.Mod(float64(x[0][i]), float64(x[1][i])))
			}
			return nil
		})
	case kFloat64:
		return ewise(d, in, 4, func(dd []float64, x [][]float64) error {
			for i := range dd {
				dd[i] = math.Mod(x[0][i], x[1][i])
			}
			return nil
		})
	case kInt32:
		return ewise(d, in, 2, func(dd []int32, x [][]int32) error { return imod(dd, x[0], x[1]) })
	default:
		return ewise(d, in, 2, func(dd []int64, x [][]int64) error { return imod(dd, x[0], x[1]) })
	}
}

// checkFmod checks Fmod's operands: those of a subtraction, which refuses
// bool.
func checkFmod(dst, a, b backend.View) error {
	if a.DType == backend.Bool || b.DType == backend.Bool {
		return fmt.Errorf("fmod of bool: %w", backend.ErrNotImplemented)
	}
	return backend.CheckBinary(backend.Sub, dst, a, b)
}

// imod sets d to a % b, failing on a zero b.
func imod[I integer](d, a, b []I) error {
	a, b = a[:len(d)], b[:len(d)]
	for i := range d {
		if b[i] == 0 {
			return fmt.Errorf("cpu: fmod: integer division by zero")
		}
		d[i] = a[i] % b[i]
	}
	return nil
}
