package cpu

import (
	"fmt"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/internal/half"
)

// indexError reports an out-of-range index.
func indexError(what string, idx int64, axis, size int) error {
	return fmt.Errorf("cpu: %s: index %d is out of range for axis %d of size %d", what, idx, axis, size)
}

// axisless returns o's strides with the one along axis set to 0.
func axisless(o *operand, axis int) []int {
	s := append([]int(nil), o.strides...)
	s[axis] = 0
	return s
}

// Gather sets dst[...i...] = src[...index[...i...]...] along axis.
func (*Device) Gather(st backend.Stream, dst, src, index backend.View, axis int) (err error) {
	const what = "gather"
	if err := begin(st, what, backend.CheckGather(dst, src, index, axis)); err != nil {
		return err
	}
	defer recoverTo(&err, what)
	ops, err := resolveAll(what, dst, src, index)
	if err != nil {
		return err
	}
	d, s, ix := ops[0], ops[1], ops[2]
	if d.size() == 0 {
		return nil
	}
	if s.shape[axis] == 0 {
		return indexError(what, typed[int64](ix.raw)[ix.off], axis, 0)
	}
	sp := newSpace(d.shape, [][]int{d.strides, ix.strides, axisless(s, axis)}, []int{d.off, ix.off, s.off})
	switch d.dt.Size() {
	case 1:
		return gather[uint8](sp, d, s, ix, axis)
	case 2:
		return gather[uint16](sp, d, s, ix, axis)
	case 4:
		return gather[uint32](sp, d, s, ix, axis)
	default:
		return gather[uint64](sp, d, s, ix, axis)
	}
}

func gather[W word](sp *space, d, s, ix *operand, axis int) error {
	dm, sm, im := typed[W](d.raw), typed[W](s.raw), typed[int64](ix.raw)
	bound, ast := int64(s.shape[axis]), s.strides[axis]
	return parallel(sp.size, sp.size, func(lo, hi int) error {
		cur := newCursor(sp)
		cur.reset(lo, hi, [maxOperands]int{})
		in := sp.inner
		for {
			off, n, ok := cur.next()
			if !ok {
				return nil
			}
			do, io, so := off[0], off[1], off[2]
			for range n {
				i := im[io]
				if i < 0 || i >= bound {
					return indexError("gather", i, axis, int(bound))
				}
				dm[do] = sm[so+int(i)*ast]
				do += in[0]
				io += in[1]
				so += in[2]
			}
		}
	})
}

// ScatterAdd adds src[...i...] into dst[...index[...i...]...] along axis.
// Each element of dst receives its contributions in row-major order of src,
// so the result does not depend on the number of goroutines.
func (*Device) ScatterAdd(st backend.Stream, dst, index, src backend.View, axis int) (err error) {
	const what = "scatter-add"
	if err := begin(st, what, backend.CheckScatterAdd(dst, index, src, axis)); err != nil {
		return err
	}
	defer recoverTo(&err, what)
	ops, err := resolveAll(what, dst, index, src)
	if err != nil {
		return err
	}
	d, ix, s := ops[0], ops[1], ops[2]
	if s.size() == 0 {
		return nil
	}
	// Check every index first, so that a bad one leaves dst untouched.
	bound := int64(d.shape[axis])
	isp := spaceOf(ix)
	if err := parallel(isp.size, isp.size, func(lo, hi int) error {
		im := typed[int64](ix.raw)
		cur := newCursor(isp)
		cur.reset(lo, hi, [maxOperands]int{})
		for {
			off, n, ok := cur.next()
			if !ok {
				return nil
			}
			o := off[0]
			for range n {
				if i := im[o]; i < 0 || i >= bound {
					return indexError(what, i, axis, int(bound))
				}
				o += isp.inner[0]
			}
		}
	}); err != nil {
		return err
	}

	// Iterate with axis innermost, and give each goroutine whole lines
	// along axis: the elements of a line are the only ones that can add into
	// the same element of dst.
	var shape []int
	var sst, ist, dst0 []int
	for i, n := range s.shape {
		if i != axis {
			shape = append(shape, n)
			sst = append(sst, s.strides[i])
			ist = append(ist, ix.strides[i])
			dst0 = append(dst0, d.strides[i])
		}
	}
	shape = append(shape, s.shape[axis])
	sst = append(sst, s.strides[axis])
	ist = append(ist, ix.strides[axis])
	dst0 = append(dst0, 0)
	sp := newSpace(shape, [][]int{dst0, ist, sst}, []int{d.off, ix.off, s.off})
	line := s.shape[axis]
	lines := sp.size / line
	ast := d.strides[axis]
	run := func(add func(do, so int)) error {
		im := typed[int64](ix.raw)
		return parallel(lines, sp.size, func(lo, hi int) error {
			cur := newCursor(sp)
			cur.reset(lo*line, hi*line, [maxOperands]int{})
			in := sp.inner
			for {
				off, n, ok := cur.next()
				if !ok {
					return nil
				}
				do, io, so := off[0], off[1], off[2]
				for range n {
					add(do+int(im[io])*ast, so)
					do += in[0]
					io += in[1]
					so += in[2]
				}
			}
		})
	}
	switch d.dt {
	case backend.Float32:
		return scatterNum(run, typed[float32](d.raw), typed[float32](s.raw))
	case backend.Float64:
		return scatterNum(run, typed[float64](d.raw), typed[float64](s.raw))
	case backend.Int32:
		return scatterNum(run, typed[int32](d.raw), typed[int32](s.raw))
	case backend.Int64:
		return scatterNum(run, typed[int64](d.raw), typed[int64](s.raw))
	case backend.Float16:
		dm, sm := typed[uint16](d.raw), typed[uint16](s.raw)
		return run(func(do, so int) { dm[do] = half.F16(half.F16To32(dm[do]) + half.F16To32(sm[so])) })
	case backend.BFloat16:
		dm, sm := typed[uint16](d.raw), typed[uint16](s.raw)
		return run(func(do, so int) { dm[do] = half.BF16(half.BF16To32(dm[do]) + half.BF16To32(sm[so])) })
	case backend.Int8:
		dm, sm := typed[int8](d.raw), typed[int8](s.raw)
		return run(func(do, so int) { dm[do] += sm[so] })
	default: // bool: logical or
		dm, sm := d.raw, s.raw
		return run(func(do, so int) { dm[do] |= sm[so] })
	}
}

func scatterNum[T number](run func(func(do, so int)) error, dm, sm []T) error {
	return run(func(do, so int) { dm[do] += sm[so] })
}
