package cpu

import (
	"cmp"
	"math"
	"slices"

	"github.com/vramgo/vram/backend"
)

var _ backend.Sorter = (*Device)(nil)

// ArgSort writes the stable sorting permutation of every line of src along
// axis into indices. It implements [backend.Sorter].
func (*Device) ArgSort(st backend.Stream, indices, src backend.View, axis int, descending bool) (err error) {
	const what = "argsort"
	if err := begin(st, what, backend.CheckArgSort(indices, src, axis)); err != nil {
		return err
	}
	defer recoverTo(&err, what)
	ops, err := resolveAll(what, indices, src)
	if err != nil {
		return err
	}
	ix, s := ops[0], ops[1]
	total := s.size()
	n := s.shape[axis]
	if total == 0 {
		return nil
	}
	lines := total / n
	// outer lists, for each line, the multi-index of the other axes in
	// row-major order; line offsets come from it.
	other := slices.Clone(s.shape)
	other[axis] = 1
	offsets := func(line int) (so, io int) {
		so, io = s.off, ix.off
		for d := len(other) - 1; d >= 0; d-- {
			i := line % other[d]
			line /= other[d]
			so += i * s.strides[d]
			io += i * ix.strides[d]
		}
		return so, io
	}
	ss, is := s.strides[axis], ix.strides[axis]
	im := typed[int64](ix.raw)
	return parallel(lines, total, func(lo, hi int) error {
		perm := make([]int64, n)
		var fk []float64
		var ik []int64
		if s.dt == backend.Int64 {
			ik = make([]int64, n)
		} else {
			fk = make([]float64, n)
		}
		for line := lo; line < hi; line++ {
			so, io := offsets(line)
			for j := range perm {
				perm[j] = int64(j)
			}
			var less func(a, b int64) int
			if ik != nil {
				load(s, so, ss, ik)
				less = func(a, b int64) int { return cmp.Compare(ik[a], ik[b]) }
			} else {
				load(s, so, ss, fk)
				less = func(a, b int64) int { return compareNaNLast(fk[a], fk[b]) }
			}
			if descending {
				slices.SortStableFunc(perm, func(a, b int64) int { return less(b, a) })
			} else {
				slices.SortStableFunc(perm, less)
			}
			for j, p := range perm {
				im[io+j*is] = p
			}
		}
		return nil
	})
}

// compareNaNLast orders a and b with NaN above every number and equal to
// itself.
func compareNaNLast(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
