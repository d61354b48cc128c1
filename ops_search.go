package vram

import (
	"maps"
	"math"
	"slices"
)

// Searching, counting and bins: the answers are positions and counts
// whose size depends on the values, so these ops read their inputs on the
// host and place the result on the input's device. None records a
// gradient (PyTorch defines none for them).

// SearchSortedOptions are the optional arguments of [SearchSorted]; the
// zero value searches from the left, through sorted as it is, for int64
// positions.
type SearchSortedOptions struct {
	// Right returns the last position a value could be inserted at,
	// after equal elements, rather than the first.
	Right bool
	// Side is "left" or "right", PyTorch's other spelling of Right; ""
	// leaves Right to decide. "left" with Right set is an error.
	Side string
	// Sorter, when not nil, holds the int64 positions that sort the
	// sequence along its last dimension (as [Tensor.ArgSort] gives), for
	// a sequence that is not sorted itself.
	Sorter *Tensor
	// OutInt32 returns int32 positions instead of int64.
	OutInt32 bool
}

// SearchSorted returns, for each element of values, the position in the
// innermost dimension of sorted where it would be inserted to keep that
// dimension sorted (torch.searchsorted). sorted is 1-D, searched by every
// value, or has the same leading dimensions as values, each innermost row
// searched by the values of the matching row. The result has values'
// shape. NaN counts as greater than every number. It panics with
// [ErrShape] when the leading dimensions differ, [ErrArgument] for
// contradicting Right and Side, a Sorter out of range or OutInt32 with a
// last dimension of 2^31-1 or more elements, and [ErrDType]
// for a Sorter that is not int64 or a bool sequence or values, as
// PyTorch's does.
func SearchSorted(sorted, values *Tensor, opts SearchSortedOptions) *Tensor {
	const op = "searchsorted"
	defer asOp(op)
	ins := []*Tensor{sorted, values}
	if opts.Sorter != nil {
		ins = append(ins, opts.Sorter)
	}
	_, held := sameDevice(op, ins...)
	defer held.unpin()
	right := opts.Right
	switch opts.Side {
	case "":
	case "left":
		if right {
			fail(op, ErrArgument, "side \"left\" contradicts right = true")
		}
	case "right":
		right = true
	default:
		fail(op, ErrArgument, "side must be \"left\" or \"right\", got %q", opts.Side)
	}
	if sorted.dtype == Bool || values.dtype == Bool {
		fail(op, ErrDType, "the sorted sequence and values must be numbers, got %s and %s; Cast bool tensors first", sorted.dtype, values.dtype)
	}
	if len(sorted.shape) == 0 {
		fail(op, ErrShape, "the sorted sequence must have at least 1 dimension, got a 0-dimensional tensor")
	}
	if len(sorted.shape) > 1 && (len(values.shape) != len(sorted.shape) ||
		!slices.Equal(sorted.shape[:len(sorted.shape)-1], values.shape[:len(values.shape)-1])) {
		fail(op, ErrShape, "the sorted sequence %v and values %v must match in all but the last dimension, or the sequence be 1-D",
			Shape(sorted.shape), Shape(values.shape))
	}
	if n := sorted.shape[len(sorted.shape)-1]; opts.OutInt32 && n >= math.MaxInt32 {
		// Positions run up to n, which int32 must hold, as PyTorch checks
		// before it searches.
		fail(op, ErrArgument, "int32 positions need a sorted sequence of fewer than %d elements along its last dimension, got %d; leave OutInt32 unset for int64 positions",
			math.MaxInt32, n)
	}
	if opts.Sorter != nil {
		if opts.Sorter.dtype != Int64 {
			fail(op, ErrDType, "sorter must be int64, got %s", opts.Sorter.dtype)
		}
		if !slices.Equal(opts.Sorter.shape, sorted.shape) {
			fail(op, ErrShape, "sorter %v must have the sorted sequence's shape %v", Shape(opts.Sorter.shape), Shape(sorted.shape))
		}
	}
	s := readRows(op, sorted, len(sorted.shape)-1)
	flat := values.Reshape(-1)
	defer flat.Release()
	v := readRows(op, flat, 0)
	var order []int64
	if opts.Sorter != nil {
		order = opts.Sorter.Int64s()
		for _, p := range order {
			if p < 0 || p >= int64(s.n) {
				fail(op, ErrArgument, "sorter holds %d, out of range for a sequence of %d", p, s.n)
			}
		}
	}
	perRow := 1 // values per row of sorted
	if len(sorted.shape) > 1 {
		perRow = values.shape[len(values.shape)-1]
	}
	out := make([]int64, values.NumElements())
	for i := range out {
		row := 0
		if len(sorted.shape) > 1 {
			row = i / max(perRow, 1)
		}
		out[i] = int64(searchRow(s, row, order, v, i, right))
	}
	dt := Int64
	if opts.OutInt32 {
		dt = Int32
	}
	return FromSlice(out, append(Shape{}, values.shape...), values.Device(), dt)
}

// searchRow returns where value vi of v goes in row r of s, following
// sorter positions order when not nil, with PyTorch's comparisons.
func searchRow(s *hostRows, r int, order []int64, v *hostRows, vi int, right bool) int {
	lo, hi := 0, s.n
	for lo < hi {
		mid := lo + (hi-lo)/2
		x := r*s.n + mid
		if order != nil {
			x = r*s.n + int(order[x])
		}
		c := compareAcross(s, x, v, vi) // sign of s[x] - v[vi]
		var past bool
		if right {
			past = !(c > 0) // !(mid > val)
		} else {
			past = !(c >= 0) // !(mid >= val)
		}
		if past {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// compareAcross compares element x of a with element y of b: -1, 0 or 1
// as a's is less, equal or greater, and -2 when either is NaN (so that
// neither > nor >= holds, as with NaN in PyTorch's comparisons).
func compareAcross(a *hostRows, x int, b *hostRows, y int) int {
	if a.i != nil && b.i != nil {
		return cmpOrdered(a.i[x], b.i[y])
	}
	av, bv := a.value(x), b.value(y)
	if math.IsNaN(av) || math.IsNaN(bv) {
		return -2
	}
	return cmpOrdered(av, bv)
}

// value returns element x as a float64.
func (h *hostRows) value(x int) float64 {
	if h.i != nil {
		return float64(h.i[x])
	}
	return h.f[x]
}

func cmpOrdered[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Bucketize returns, for each element of t, the index of the bucket of
// the 1-D sorted boundaries it falls in (torch.bucketize): the i with
// boundaries[i-1] < x <= boundaries[i], or with right
// boundaries[i-1] <= x < boundaries[i]; 0 below the first and
// len(boundaries) above the last. The result is int64 of t's shape; for
// int32 indices (PyTorch's out_int32) use [Tensor.BucketizeWith]. It
// panics with [ErrShape] for boundaries that are not 1-D and [ErrDType]
// for a bool t or boundaries.
func (t *Tensor) Bucketize(boundaries *Tensor, right bool) *Tensor {
	return t.BucketizeWith(boundaries, BucketizeOptions{Right: right})
}

// BucketizeOptions are the optional arguments of [Tensor.BucketizeWith];
// the zero value gives int64 indices of the buckets closed on the right.
type BucketizeOptions struct {
	// Right puts a value equal to a boundary in the bucket after it, as
	// torch.bucketize's right=True.
	Right bool
	// OutInt32 returns int32 indices instead of int64.
	OutInt32 bool
}

// BucketizeWith is [Tensor.Bucketize] with all of torch.bucketize's
// options: opts.OutInt32 gives int32 indices.
func (t *Tensor) BucketizeWith(boundaries *Tensor, opts BucketizeOptions) *Tensor {
	const op = "bucketize"
	defer asOp(op)
	defer pin(op, t, boundaries).unpin()
	if len(boundaries.shape) != 1 {
		fail(op, ErrShape, "boundaries must be 1-D, got shape %v", Shape(boundaries.shape))
	}
	return SearchSorted(boundaries, t, SearchSortedOptions{Right: opts.Right, OutInt32: opts.OutInt32})
}

// Bincount counts the occurrences of each value of the 1-D non-negative
// integer tensor t (torch.bincount): element i of the result is the number
// of elements equal to i, or with weights (a tensor of t's shape, nil for
// none) their sum of weights. The result has max(t)+1 elements, at least
// minlength; it is int64 without weights, float32 for float32 weights and
// float64 for others. It panics with [ErrArgument] for a negative value or
// minlength, [ErrDType] for a float t and [ErrShape] for a t that is not
// 1-D or weights of another shape. A result too large for any tensor is
// an [ErrShape], one too large for the device an [ErrOutOfMemory]; host
// memory goes only to the values present.
func (t *Tensor) Bincount(weights *Tensor, minlength int) *Tensor {
	const op = "bincount"
	defer asOp(op)
	ins := []*Tensor{t}
	if weights != nil {
		ins = append(ins, weights)
	}
	_, held := sameDevice(op, ins...)
	defer held.unpin()
	if t.dtype.IsFloat() || t.dtype == Bool {
		fail(op, ErrDType, "input must be an integer tensor, got %s", t.dtype)
	}
	if len(t.shape) != 1 {
		fail(op, ErrShape, "input must be 1-D, got shape %v", Shape(t.shape))
	}
	if minlength < 0 {
		fail(op, ErrArgument, "minlength must be non-negative, got %d", minlength)
	}
	if weights != nil && !slices.Equal(weights.shape, t.shape) {
		fail(op, ErrShape, "weights %v must have the input's shape %v", Shape(weights.shape), Shape(t.shape))
	}
	xs := t.Int64s()
	n := int64(minlength)
	for _, x := range xs {
		if x < 0 {
			fail(op, ErrArgument, "input holds the negative value %d; bincount counts non-negative integers", x)
		}
		if x == math.MaxInt64 {
			fail(op, ErrShape, "input holds the value %d; its count would need more elements than a tensor can have", x)
		}
		n = max(n, x+1)
	}
	// The counts are gathered by value, so that a large value or
	// minlength costs host memory only for the values present; the
	// result's storage comes from the device's allocator, which refuses
	// a size it cannot hold with an error.
	sums := make(map[int64]float64)
	var ws []float64
	if weights != nil {
		ws = weights.Float64s()
	}
	for i, x := range xs {
		if ws == nil {
			sums[x]++
		} else {
			sums[x] += ws[i]
		}
	}
	dt := Int64
	if weights != nil {
		dt = Float64
		if weights.dtype == Float32 {
			dt = Float32
		}
	}
	return scatterCounts(op, int(n), sums, dt, t.Device())
}

// scatterCounts returns a vector of n elements of dtype dt on dev, zero but
// at the positions of sums, which hold their values.
func scatterCounts(op string, n int, sums map[int64]float64, dt DType, dev Device) *Tensor {
	out := Zeros(Shape{n}, dt, dev)
	if len(sums) == 0 {
		return out
	}
	defer out.Release()
	at := slices.Sorted(maps.Keys(sums))
	vals := make([]float64, len(at))
	for i, x := range at {
		vals[i] = sums[x]
	}
	idx := FromSlice(at, Shape{len(at)}, dev)
	defer idx.Release()
	src := FromSlice(vals, Shape{len(vals)}, dev, dt)
	defer src.Release()
	return out.IndexAdd(0, idx, src, 1)
}

// Histc returns the histogram of t's elements in bins equal-width bins
// over [min, max] (torch.histc), of t's dtype; elements outside the range
// and NaN are not counted, and max itself counts in the last bin. With min
// and max both 0 the range is that of the data; an empty range widens by
// 1 on either side. It panics with [ErrArgument] for bins < 1, min > max
// or a range that is not finite, and [ErrDType] for a t that is not float;
// bins too many for a tensor or the device fail as Bincount's result does.
func (t *Tensor) Histc(bins int, min, max float64) *Tensor {
	const op = "histc"
	defer asOp(op)
	defer pin(op, t).unpin()
	floatOnly(op, t)
	if bins < 1 {
		fail(op, ErrArgument, "bins must be positive, got %d", bins)
	}
	if min > max {
		fail(op, ErrArgument, "max must be larger than min, got min %v and max %v", min, max)
	}
	xs := t.Float64s()
	if min == 0 && max == 0 && len(xs) > 0 {
		min, max = math.Inf(1), math.Inf(-1)
		for _, x := range xs {
			if math.IsNaN(x) {
				min, max = x, x
				break
			}
			min, max = math.Min(min, x), math.Max(max, x)
		}
	}
	if min == max {
		min, max = min-1, max+1
	}
	if math.IsInf(min, 0) || math.IsInf(max, 0) || math.IsNaN(min) || math.IsNaN(max) {
		fail(op, ErrArgument, "range of [%v, %v] is not finite", min, max)
	}
	h := make(map[int64]float64)
	for _, x := range xs {
		if !(x >= min && x <= max) {
			continue
		}
		b := int((x - min) / (max - min) * float64(bins))
		if b >= bins || b < 0 { // b < 0: x is max, and bins too many for an int
			b = bins - 1
		}
		h[int64(b)]++
	}
	return scatterCounts(op, bins, h, t.dtype, t.Device())
}

// Unique returns the distinct elements of t, flattened and sorted
// ascending (torch.unique with dim=None; PyTorch sorts whatever sorted
// says, and so does Unique). With returnInverse, inverse has t's shape
// and holds each element's int64 position in values; with returnCounts,
// counts holds how often each value occurs; each is nil when not asked
// for. NaN equals nothing, so every NaN is a value of its own, after the
// numbers. For torch.unique's dim, distinct slices, see [Tensor.UniqueDim].
func (t *Tensor) Unique(sorted, returnInverse, returnCounts bool) (values, inverse, counts *Tensor) {
	const op = "unique"
	defer asOp(op)
	defer pin(op, t).unpin()
	_ = sorted
	flat := t.Reshape(-1)
	defer flat.Release()
	h := readRows(op, flat, 0)
	order := h.sortedRow(0)
	return uniqueRuns(op, t, flat, h, order, returnInverse, returnCounts)
}

// UniqueConsecutive collapses each run of equal consecutive elements of t,
// flattened, to one (torch.unique_consecutive with dim=None), returning
// the values and, when asked for, the inverse and counts as [Tensor.Unique]
// does. NaN equals nothing.
func (t *Tensor) UniqueConsecutive(returnInverse, returnCounts bool) (values, inverse, counts *Tensor) {
	const op = "unique_consecutive"
	defer asOp(op)
	defer pin(op, t).unpin()
	flat := t.Reshape(-1)
	defer flat.Release()
	h := readRows(op, flat, 0)
	return uniqueRuns(op, t, flat, h, seq(h.n), returnInverse, returnCounts)
}

// equalRuns groups the n positions taken in order into runs of equal
// neighbours: first holds each run's first position, cnt its length, and
// inv[p] the run of position p.
func equalRuns(order []int, n int, equal func(a, b int) bool) (first, cnt, inv []int64) {
	first = []int64{}
	inv = make([]int64, n)
	for i, p := range order {
		if i == 0 || !equal(order[i-1], p) {
			first = append(first, int64(p))
			cnt = append(cnt, 0)
		}
		cnt[len(cnt)-1]++
		inv[p] = int64(len(first) - 1)
	}
	return first, cnt, inv
}

// uniqueRuns keeps the first element of each run of equal elements of h
// in order, taking the values from flat with IndexSelect.
func uniqueRuns(op string, t, flat *Tensor, h *hostRows, order []int, returnInverse, returnCounts bool) (values, inverse, counts *Tensor) {
	first, cnt, inv := equalRuns(order, h.n, h.equal)
	idx := FromSlice(first, Shape{len(first)}, t.Device())
	defer idx.Release()
	d := flat.Detach()
	defer d.Release()
	values = d.IndexSelect(0, idx)
	if returnInverse {
		inverse = FromSlice(inv, append(Shape{}, t.shape...), t.Device())
	}
	if returnCounts {
		counts = FromSlice(cnt, Shape{len(cnt)}, t.Device())
	}
	return values, inverse, counts
}

// UniqueDim returns the distinct slices of t along dim, sorted
// lexicographically (torch.unique with dim, which sorts whatever sorted
// says): values has t's shape but for dim, which holds one slice per
// distinct one. With returnInverse, inverse is int64 of size t.Shape()[dim]
// and holds each slice's position in values; with returnCounts, counts
// holds how often each distinct slice occurs; each is nil when not asked
// for. NaN equals nothing, so a slice holding NaN is distinct from every
// other; in the order, NaN comes after the numbers. It panics with
// [ErrIndex] for a dim out of range (a 0-dimensional t has none), and with
// [ErrShape] for an empty t unless dim is its only dimension of size 0, as
// PyTorch's does; then every result is empty.
func (t *Tensor) UniqueDim(dim int, returnInverse, returnCounts bool) (values, inverse, counts *Tensor) {
	const op = "unique"
	defer asOp(op)
	defer pin(op, t).unpin()
	a, h := t.slicesAlong(op, dim)
	order := seq(h.outer)
	slices.SortStableFunc(order, h.compareRows)
	return uniqueSliceRuns(t, a, h, order, returnInverse, returnCounts)
}

// UniqueConsecutiveDim collapses each run of equal consecutive slices of t
// along dim to one (torch.unique_consecutive with dim), returning the
// values and, when asked for, the inverse and counts as
// [Tensor.UniqueDim] does, and panicking as it does.
func (t *Tensor) UniqueConsecutiveDim(dim int, returnInverse, returnCounts bool) (values, inverse, counts *Tensor) {
	const op = "unique_consecutive"
	defer asOp(op)
	defer pin(op, t).unpin()
	a, h := t.slicesAlong(op, dim)
	return uniqueSliceRuns(t, a, h, seq(h.outer), returnInverse, returnCounts)
}

// slicesAlong resolves dim to axis a and reads t's slices along it to the
// host, one row per slice, after PyTorch's checks on empty tensors.
func (t *Tensor) slicesAlong(op string, dim int) (int, *hostRows) {
	a := t.axis(op, dim)
	rest := 1
	for i, n := range t.shape {
		if i != a {
			rest *= n
		}
	}
	if t.NumElements() == 0 {
		zeros := 0
		for _, n := range t.shape {
			if n == 0 {
				zeros++
			}
		}
		if zeros > 1 {
			fail(op, ErrShape, "shape %v has more than one dimension of size 0; %s along a dimension needs at most one", Shape(t.shape), op)
		}
		if t.shape[a] != 0 {
			fail(op, ErrShape, "shape %v has a dimension of size 0 other than dim %d; %s along a dimension does not apply", Shape(t.shape), dim, op)
		}
	}
	d := t.Detach()
	defer d.Release()
	m := d.Movedim(a, 0)
	defer m.Release()
	flat := m.Reshape(t.shape[a], rest)
	defer flat.Release()
	return a, readRows(op, flat, 1)
}

// compareRows orders rows x and y of h lexicographically, NaN after every
// number (and level with another NaN).
func (h *hostRows) compareRows(x, y int) int {
	for k := range h.n {
		i, j := x*h.n+k, y*h.n+k
		switch {
		case h.less(i, j):
			return -1
		case h.less(j, i):
			return 1
		}
	}
	return 0
}

// equalRows reports whether rows x and y of h hold equal elements; NaN
// equals nothing.
func (h *hostRows) equalRows(x, y int) bool {
	for k := range h.n {
		if !h.equal(x*h.n+k, y*h.n+k) {
			return false
		}
	}
	return true
}

// uniqueSliceRuns keeps the first slice of t along axis a of each run of
// equal rows of h taken in order, as uniqueRuns does for elements.
func uniqueSliceRuns(t *Tensor, a int, h *hostRows, order []int, returnInverse, returnCounts bool) (values, inverse, counts *Tensor) {
	first, cnt, inv := equalRuns(order, h.outer, h.equalRows)
	idx := FromSlice(first, Shape{len(first)}, t.Device())
	defer idx.Release()
	d := t.Detach()
	defer d.Release()
	values = d.IndexSelect(a, idx)
	if returnInverse {
		inverse = FromSlice(inv, Shape{len(inv)}, t.Device())
	}
	if returnCounts {
		counts = FromSlice(append([]int64{}, cnt...), Shape{len(cnt)}, t.Device())
	}
	return values, inverse, counts
}
