package parallel

import (
	"encoding/binary"
	"math"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/half"
)

// accumulator reduces the raw little-endian elements of several ranks,
// added in rank order so that every run gives the same bits. Floating-point
// elements accumulate in float64 and round once at the end; integers in
// int64, wrapping as NCCL's do; booleans as or (sum, max) and and (prod,
// min).
type accumulator struct {
	dt vram.DType
	op ReduceOp
	f  []float64
	i  []int64
	b  []bool
}

// checkReduce returns an error when op cannot reduce elements of dt.
func checkReduce(dt vram.DType, op ReduceOp) error {
	if op > Avg {
		return errorf("unknown reduction %v: %w", op, vram.ErrArgument)
	}
	if dt == vram.Bool && op == Avg {
		return errorf("cannot average bool tensors (use sum, max or min): %w", vram.ErrDType)
	}
	return nil
}

// newAccumulator starts a reduction from the first rank's elements.
func newAccumulator(dt vram.DType, op ReduceOp, first []byte) *accumulator {
	a := &accumulator{dt: dt, op: op}
	n := len(first) / dt.Size()
	switch {
	case dt.IsFloat():
		a.f = make([]float64, n)
		for k := range a.f {
			a.f[k] = loadFloat(dt, first, k)
		}
	case dt == vram.Bool:
		a.b = make([]bool, n)
		for k := range a.b {
			a.b[k] = first[k] != 0
		}
	default:
		a.i = make([]int64, n)
		for k := range a.i {
			a.i[k] = loadInt(dt, first, k)
		}
	}
	return a
}

// add folds in the next rank's elements.
func (a *accumulator) add(raw []byte) {
	switch {
	case a.f != nil:
		for k := range a.f {
			v := loadFloat(a.dt, raw, k)
			switch a.op {
			case Sum, Avg:
				a.f[k] += v
			case Prod:
				a.f[k] *= v
			case Max:
				a.f[k] = math.Max(a.f[k], v)
			case Min:
				a.f[k] = math.Min(a.f[k], v)
			}
		}
	case a.b != nil:
		for k := range a.b {
			v := raw[k] != 0
			switch a.op {
			case Sum, Max:
				a.b[k] = a.b[k] || v
			default:
				a.b[k] = a.b[k] && v
			}
		}
	default:
		for k := range a.i {
			v := loadInt(a.dt, raw, k)
			switch a.op {
			case Sum, Avg:
				a.i[k] += v
			case Prod:
				a.i[k] *= v
			case Max:
				a.i[k] = max(a.i[k], v)
			case Min:
				a.i[k] = min(a.i[k], v)
			}
		}
	}
}

// result returns the reduction of ranks ranks as raw elements.
func (a *accumulator) result(ranks int) []byte {
	switch {
	case a.f != nil:
		out := make([]byte, len(a.f)*a.dt.Size())
		for k, v := range a.f {
			if a.op == Avg {
				v /= float64(ranks)
			}
			storeFloat(a.dt, out, k, v)
		}
		return out
	case a.b != nil:
		out := make([]byte, len(a.b))
		for k, v := range a.b {
			if v {
				out[k] = 1
			}
		}
		return out
	default:
		out := make([]byte, len(a.i)*a.dt.Size())
		for k, v := range a.i {
			if a.op == Avg {
				v /= int64(ranks)
			}
			switch a.dt {
			case vram.Int32:
				binary.LittleEndian.PutUint32(out[4*k:], uint32(int32(v)))
			case vram.Int8:
				out[k] = byte(int8(v))
			default:
				binary.LittleEndian.PutUint64(out[8*k:], uint64(v))
			}
		}
		return out
	}
}

func loadFloat(dt vram.DType, b []byte, k int) float64 {
	switch dt {
	case vram.Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:])))
	case vram.Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b[8*k:]))
	case vram.Float16:
		return float64(half.F16To32(binary.LittleEndian.Uint16(b[2*k:])))
	default: // BFloat16
		return float64(half.BF16To32(binary.LittleEndian.Uint16(b[2*k:])))
	}
}

func storeFloat(dt vram.DType, b []byte, k int, v float64) {
	switch dt {
	case vram.Float32:
		binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(float32(v)))
	case vram.Float64:
		binary.LittleEndian.PutUint64(b[8*k:], math.Float64bits(v))
	case vram.Float16:
		binary.LittleEndian.PutUint16(b[2*k:], half.F16(float32(v)))
	default: // BFloat16
		binary.LittleEndian.PutUint16(b[2*k:], half.BF16(float32(v)))
	}
}

func loadInt(dt vram.DType, b []byte, k int) int64 {
	switch dt {
	case vram.Int32:
		return int64(int32(binary.LittleEndian.Uint32(b[4*k:])))
	case vram.Int8:
		return int64(int8(b[k]))
	}
	return int64(binary.LittleEndian.Uint64(b[8*k:]))
}
