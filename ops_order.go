package vram

import (
	"math"
	"slices"
)

// The order statistics (Median, Kthvalue, Quantile, Cummax, ...) find
// positions on the host, from a copy of the values, and take the values
// with Gather on the tensor's own device: the result then records the way
// back to the positions it came from, as PyTorch's do, on every backend.

// hostRows is a copy of a tensor's values with one dimension moved last,
// as outer rows of n elements. Integer and bool tensors keep exact int64
// values; float ones float64.
type hostRows struct {
	outer, n int
	shape    []int // the moved shape: t's with the dimension last
	f        []float64
	i        []int64 // nil for float dtypes
}

// readRows copies t's values to the host with axis a (0 <= a) moved last.
func readRows(op string, t *Tensor, a int) *hostRows {
	d := t.Detach()
	defer d.Release()
	m := d.Movedim(a, -1)
	defer m.Release()
	h := &hostRows{shape: slices.Clone(m.shape), n: m.shape[len(m.shape)-1]}
	h.outer = axesSize(m.shape[:len(m.shape)-1], seq(len(m.shape)-1))
	if t.dtype.IsFloat() {
		h.f = m.Float64s()
	} else {
		h.i = m.Int64s()
	}
	return h
}

// nan reports whether element x is NaN.
func (h *hostRows) nan(x int) bool { return h.i == nil && math.IsNaN(h.f[x]) }

// less orders elements x and y with NaN greater than every number.
func (h *hostRows) less(x, y int) bool {
	if h.i != nil {
		return h.i[x] < h.i[y]
	}
	a, b := h.f[x], h.f[y]
	if math.IsNaN(a) {
		return false
	}
	return math.IsNaN(b) || a < b
}

// equal reports whether elements x and y are equal; NaN equals nothing.
func (h *hostRows) equal(x, y int) bool {
	if h.i != nil {
		return h.i[x] == h.i[y]
	}
	return h.f[x] == h.f[y]
}

// sortedRow returns the positions 0..n-1 of row r sorted stably
// ascending, NaN last.
func (h *hostRows) sortedRow(r int) []int {
	base := r * h.n
	p := seq(h.n)
	slices.SortStableFunc(p, func(x, y int) int {
		switch {
		case h.less(base+x, base+y):
			return -1
		case h.less(base+y, base+x):
			return 1
		}
		return 0
	})
	return p
}

// nanCount returns the number of NaN elements of row r.
func (h *hostRows) nanCount(r int) int {
	c := 0
	for j := range h.n {
		if h.nan(r*h.n + j) {
			c++
		}
	}
	return c
}

// gatherRows takes from t, along axis a, the positions pos (outer rows of
// k positions in the moved layout of h) and returns the values and the
// int64 positions, with a of size k; a k of 1 is removed unless keepDim.
func gatherRows(op string, t *Tensor, a int, h *hostRows, pos []int64, k int, keepDim bool) (values, indices *Tensor) {
	shape := append(slices.Clone(h.shape[:len(h.shape)-1]), k)
	moved := FromSlice(pos, shape, t.Device())
	defer moved.Release()
	back := moved.Movedim(-1, a)
	defer back.Release()
	idx := back.Contiguous()
	vals := t.Gather(a, idx)
	if keepDim || k != 1 {
		return vals, idx
	}
	defer idx.Release()
	defer vals.Release()
	return vals.Squeeze(a), idx.Squeeze(a)
}

// noBoolOrder panics with ErrDType for a bool t: PyTorch defines median,
// nanmedian, kthvalue and topk for numbers only (sort, cummax and cummin
// take bool).
func noBoolOrder(op string, t *Tensor) {
	if t.dtype == Bool {
		fail(op, ErrDType, "%s is not defined for a bool tensor, as in PyTorch; Cast it to an integer or float dtype first", op)
	}
}

// selectAlong returns, for each row of t along dim, the element that pick
// chooses from the row's stably sorted positions (NaN last) and its
// position, as the values and indices of Median and Kthvalue.
func (t *Tensor) selectAlong(op string, dim int, keepDim bool, pick func(h *hostRows, r int, sorted []int) int) (values, indices *Tensor) {
	defer asOp(op)
	defer pin(op, t).unpin()
	noBoolOrder(op, t)
	a := t.scalarAxis(op, dim)
	if a < 0 {
		v := t.Reshape(1)
		defer v.Release()
		vals, idx := v.selectAlong(op, 0, false, pick)
		return vals, idx
	}
	if t.shape[a] == 0 {
		fail(op, ErrShape, "cannot compute %s over an empty dimension (shape %v)", op, Shape(t.shape))
	}
	h := readRows(op, t, a)
	pos := make([]int64, h.outer)
	for r := range h.outer {
		s := h.sortedRow(r)
		p := pick(h, r, s)
		// Of equal elements, the first in t's order: the stable sort
		// put it first among them.
		for p > 0 && h.equal(r*h.n+s[p-1], r*h.n+s[p]) {
			p--
		}
		pos[r] = int64(s[p])
	}
	return gatherRows(op, t, a, h, pos, 1, keepDim)
}

// medianPick picks the lower median, or the first NaN of a row with NaN.
func medianPick(h *hostRows, r int, _ []int) int {
	if c := h.nanCount(r); c > 0 {
		return h.n - c
	}
	return (h.n - 1) / 2
}

// nanMedianPick picks the lower median of the numbers of a row, or its
// first NaN when it holds nothing else.
func nanMedianPick(h *hostRows, r int, _ []int) int {
	c := h.n - h.nanCount(r)
	if c == 0 {
		return 0
	}
	return (c - 1) / 2
}

// MedianDim returns the median of each row of t along dim and its int64
// position in the row (torch.median with a dim). For an even number of
// elements it is the lower of the two middle ones, as PyTorch's; a row
// holding NaN has median NaN, at the position of its first NaN. Where
// several elements equal the median, the position is the first of them
// (PyTorch leaves it unspecified). The values pass their
// gradient back to the positions they came from. It panics with [ErrShape]
// for an empty dim, [ErrIndex] for a dim out of range and [ErrDType] for a
// bool t, as PyTorch raises.
func (t *Tensor) MedianDim(dim int, keepDim bool) (values, indices *Tensor) {
	return t.selectAlong("median", dim, keepDim, medianPick)
}

// Median returns the lower median of all t's elements as a 0-dimensional
// tensor (torch.median without a dim); NaN when t holds NaN, and for an
// empty floating-point t, as in PyTorch. Its gradient is shared equally
// by the elements equal to the median (the NaN ones for a NaN median), as
// PyTorch's is. It panics with [ErrShape] for an
// empty integer t, which has no NaN, and with [ErrDType] for a bool t.
func (t *Tensor) Median() *Tensor { return t.selectAll("median", medianPick) }

// selectAll returns the element of all of t that pick chooses, as Median
// and NanMedian. Its gradient is shared by the elements equal to it, or
// by the NaN elements when it is NaN, as PyTorch's median() and
// nanmedian() without a dim pass it (evenly_distribute_backward), not
// given to one position as MedianDim's.
func (t *Tensor) selectAll(op string, pick func(h *hostRows, r int, sorted []int) int) *Tensor {
	defer asOp(op)
	defer pin(op, t).unpin()
	noBoolOrder(op, t)
	if nan := emptyMedian(t); nan != nil {
		return nan
	}
	d := t.Detach()
	defer d.Release()
	flat := d.Reshape(-1)
	defer flat.Release()
	v, i := flat.selectAlong(op, 0, false, pick)
	i.Release()
	if needsGrad(t) {
		sv := save(t, v)
		record(op, v, []*Tensor{t}, sv, func(g *Tensor) []*Tensor {
			return []*Tensor{shareAmongTies(g, sv[0], sv[1], nil)}
		})
	}
	return v
}

// emptyMedian returns the median of all of an empty floating-point t, a
// 0-dimensional NaN of its dtype on its device as PyTorch gives, or nil
// for any other t.
func emptyMedian(t *Tensor) *Tensor {
	if t.NumElements() > 0 || !t.dtype.IsFloat() {
		return nil
	}
	return Full(Shape{}, math.NaN(), t.dtype, t.Device())
}

// NanMedianDim is MedianDim ignoring NaN (torch.nanmedian with a dim): the
// lower median of each row's numbers; NaN, at the first NaN's position,
// only for a row of NaN alone.
func (t *Tensor) NanMedianDim(dim int, keepDim bool) (values, indices *Tensor) {
	return t.selectAlong("nanmedian", dim, keepDim, nanMedianPick)
}

// NanMedian is Median ignoring NaN (torch.nanmedian without a dim); NaN
// for an empty floating-point t too.
func (t *Tensor) NanMedian() *Tensor { return t.selectAll("nanmedian", nanMedianPick) }

// Kthvalue returns the k-th smallest element (k counts from 1) of each row
// of t along dim and its int64 position (torch.kthvalue). NaN counts as
// greater than every number; where several elements equal the k-th, the
// position is the first of them. The values pass their gradient back. It panics with
// [ErrArgument] for a k outside 1..size of dim, [ErrIndex] for a dim out
// of range and [ErrDType] for a bool t.
func (t *Tensor) Kthvalue(k, dim int, keepDim bool) (values, indices *Tensor) {
	const op = "kthvalue"
	defer pin(op, t).unpin()
	noBoolOrder(op, t)
	n := 1
	if a := t.scalarAxis(op, dim); a >= 0 {
		n = t.shape[a]
	}
	if k < 1 || k > n {
		fail(op, ErrArgument, "k = %d is out of range for a dimension of size %d (k counts from 1)", k, n)
	}
	return t.selectAlong(op, dim, keepDim, func(_ *hostRows, _ int, _ []int) int { return k - 1 })
}

// Quantile interpolation methods, for [Tensor.Quantile]: where a quantile
// falls between two sorted elements at positions i < j, QuantileLinear
// interpolates, QuantileLower takes i, QuantileHigher j, QuantileMidpoint their mean and QuantileNearest
// the nearer (the even position at a tie, as torch.round).
const (
	QuantileLinear   = "linear"
	QuantileLower    = "lower"
	QuantileHigher   = "higher"
	QuantileMidpoint = "midpoint"
	QuantileNearest  = "nearest"
)

// Quantile returns the q-th quantiles of each row of t along dim
// (torch.quantile with a dim). q is a 0-dimensional or 1-D float tensor of
// values in [0, 1]; for a 1-D q the result has q's dimension first.
// interpolation is one of [QuantileLinear] (also ""), [QuantileLower], [QuantileHigher], [QuantileMidpoint]
// and [QuantileNearest]. A row holding NaN gives NaN, and so does an empty
// t, as in PyTorch. t must be float32 or float64 and q of t's dtype; the
// result has that dtype and passes its gradient back to the elements it
// was computed from. It panics with [ErrDType] for other dtypes or a q of
// another dtype than t's, and [ErrArgument] for a q outside [0, 1] or an
// unknown interpolation.
func (t *Tensor) Quantile(q *Tensor, dim int, keepDim bool, interpolation string) *Tensor {
	return t.quantile("quantile", q, &dim, keepDim, interpolation, false)
}

// QuantileAll is Quantile over all of t's elements (torch.quantile
// without a dim): a 0-dimensional result for a 0-dimensional q, else one
// of q's shape.
func (t *Tensor) QuantileAll(q *Tensor, interpolation string) *Tensor {
	return t.quantile("quantile", q, nil, false, interpolation, false)
}

// QuantileAllKeepDim is QuantileAll keeping t's dimensions, each of size
// 1 (torch.quantile without a dim and with keepdim=True): for t (a, b) the
// result is (1, 1), or (len(q), 1, 1) for a 1-D q.
func (t *Tensor) QuantileAllKeepDim(q *Tensor, interpolation string) *Tensor {
	return t.quantile("quantile", q, nil, true, interpolation, false)
}

// NanQuantile is Quantile ignoring NaN (torch.nanquantile): each row's
// quantiles of its numbers; NaN only for a row of NaN alone.
func (t *Tensor) NanQuantile(q *Tensor, dim int, keepDim bool, interpolation string) *Tensor {
	return t.quantile("nanquantile", q, &dim, keepDim, interpolation, true)
}

// NanQuantileAll is QuantileAll ignoring NaN.
func (t *Tensor) NanQuantileAll(q *Tensor, interpolation string) *Tensor {
	return t.quantile("nanquantile", q, nil, false, interpolation, true)
}

// NanQuantileAllKeepDim is QuantileAllKeepDim ignoring NaN.
func (t *Tensor) NanQuantileAllKeepDim(q *Tensor, interpolation string) *Tensor {
	return t.quantile("nanquantile", q, nil, true, interpolation, true)
}

func (t *Tensor) quantile(op string, q *Tensor, dim *int, keepDim bool, interpolation string, ignoreNaN bool) *Tensor {
	defer asOp(op)
	_, held := sameDevice(op, t, q)
	defer held.unpin()
	if t.dtype != Float32 && t.dtype != Float64 {
		fail(op, ErrDType, "input must be float32 or float64, got %s", t.dtype)
	}
	if q.dtype != t.dtype {
		fail(op, ErrDType, "q must have the input's dtype %s, got %s", t.dtype, q.dtype)
	}
	if len(q.shape) > 1 {
		fail(op, ErrShape, "q must be a scalar or 1-D tensor, got shape %v", Shape(q.shape))
	}
	switch interpolation {
	case "", QuantileLinear, QuantileLower, QuantileHigher, QuantileMidpoint, QuantileNearest:
	default:
		fail(op, ErrArgument, "unknown interpolation %q (want linear, lower, higher, midpoint or nearest)", interpolation)
	}
	qs := q.Float64s()
	for _, v := range qs {
		if !(v >= 0 && v <= 1) {
			fail(op, ErrArgument, "q must be in [0, 1], got %v", v)
		}
	}
	x := t
	a := 0
	if dim == nil {
		x = t.Reshape(-1)
		defer x.Release()
	} else if a = t.scalarAxis(op, *dim); a < 0 {
		x = t.Reshape(1)
		defer x.Release()
		a = 0
	}
	if x.NumElements() == 0 {
		return emptyQuantile(t, q, dim, a, keepDim)
	}
	sorted, order := x.Sort(a, false)
	defer sorted.Release()
	order.Release()
	h := readRows(op, x, a)
	nq := len(qs)
	lo := make([]int64, h.outer*nq)
	hi := make([]int64, h.outer*nq)
	w := make([]float64, h.outer*nq)
	for r := range h.outer {
		c := h.nanCount(r)
		valid := h.n
		if ignoreNaN {
			valid = h.n - c
		}
		for j, qv := range qs {
			o := r*nq + j
			if (!ignoreNaN && c > 0) || valid == 0 {
				lo[o], hi[o] = int64(h.n-1), int64(h.n-1)
				continue
			}
			rank := qv * float64(valid-1)
			switch interpolation {
			case QuantileLower:
				rank = math.Floor(rank)
			case QuantileHigher:
				rank = math.Ceil(rank)
			case QuantileNearest:
				rank = math.RoundToEven(rank)
			}
			below, above := math.Floor(rank), math.Ceil(rank)
			lo[o], hi[o] = int64(below), int64(above)
			w[o] = rank - below
			if interpolation == QuantileMidpoint && above != below {
				w[o] = 0.5
			}
		}
	}
	vlo, ilo := gatherRows(op, sorted, a, h, lo, nq, true)
	defer vlo.Release()
	ilo.Release()
	vhi, ihi := gatherRows(op, sorted, a, h, hi, nq, true)
	defer vhi.Release()
	ihi.Release()
	wm := FromSlice(w, append(slices.Clone(h.shape[:len(h.shape)-1]), nq), t.Device(), t.dtype)
	defer wm.Release()
	wb := wm.Movedim(-1, a)
	defer wb.Release()
	diff := vhi.Sub(vlo)
	defer diff.Release()
	step := diff.Mul(wb)
	defer step.Release()
	// Where the weight is 0 the result is the lower value itself, even
	// when the upper one is infinite.
	zero := wb.EqScalar(0)
	defer zero.Release()
	sum := vlo.Add(step)
	defer sum.Release()
	res := Where(zero, vlo, sum) // [..., nq at a, ...]
	defer res.Release()
	out := res.Movedim(a, 0) // q first
	defer out.Release()
	if dim == nil {
		return out.Reshape(allQuantileShape(t, q, keepDim)...)
	}
	shape := slices.Clone(out.shape[1:])
	if keepDim && len(t.shape) > 0 {
		shape = slices.Insert(shape, a, 1)
	}
	if len(q.shape) == 1 {
		shape = append([]int{nq}, shape...)
	}
	return out.Reshape(shape...)
}

// allQuantileShape returns the shape of a quantile over all of t: q's
// dimensions, then, under keepDim, a 1 for each of t's.
func allQuantileShape(t, q *Tensor, keepDim bool) []int {
	shape := qShape(q)
	if keepDim {
		for range t.shape {
			shape = append(shape, 1)
		}
	}
	return shape
}

// qShape returns the leading dimensions q gives a quantile's result.
func qShape(q *Tensor) []int {
	if len(q.shape) == 1 {
		return []int{q.shape[0]}
	}
	return nil
}

// emptyQuantile returns the quantiles of an empty t as PyTorch gives them:
// NaN of the result's shape (q's dimensions, then t's without axis a, or
// with it of size 1 under keepDim; for a nil dim, all of t's as 1s under
// keepDim), itself empty where another dimension of t is 0.
func emptyQuantile(t, q *Tensor, dim *int, a int, keepDim bool) *Tensor {
	if dim == nil {
		return Full(allQuantileShape(t, q, keepDim), math.NaN(), t.dtype, t.Device())
	}
	shape := qShape(q)
	for i, n := range t.shape {
		if i != a {
			shape = append(shape, n)
		} else if keepDim {
			shape = append(shape, 1)
		}
	}
	return Full(shape, math.NaN(), t.dtype, t.Device())
}

// Cummax returns the running maximum of t along dim and, for each element,
// the int64 position along dim where that maximum was found
// (torch.cummax). Of equal maxima the latest position is given, and once
// a NaN is met the maximum stays NaN, at the position of the latest NaN.
// The values pass their gradient back to those positions.
func (t *Tensor) Cummax(dim int) (values, indices *Tensor) {
	return t.cumExtreme("cummax", dim, false)
}

// Cummin is Cummax for the running minimum (torch.cummin).
func (t *Tensor) Cummin(dim int) (values, indices *Tensor) {
	return t.cumExtreme("cummin", dim, true)
}

func (t *Tensor) cumExtreme(op string, dim int, min bool) (values, indices *Tensor) {
	defer asOp(op)
	defer pin(op, t).unpin()
	a := t.scalarAxis(op, dim)
	if a < 0 {
		return t.Clone(), t.zeroIndex(op)
	}
	if t.NumElements() == 0 {
		// Nothing to scan: no walk over the rows, however many an empty
		// dimension elsewhere leaves.
		return t.Clone(), newTensor(op, t.ds(), Int64, t.shape)
	}
	h := readRows(op, t, a)
	pos := make([]int64, h.outer*h.n)
	for r := range h.outer {
		b := r * h.n
		best := 0
		for j := range h.n {
			x, cur := b+j, b+best
			switch {
			case h.nan(x):
				best = j
			case h.nan(cur):
			case min && !h.less(cur, x), !min && !h.less(x, cur):
				best = j
			}
			pos[x] = int64(best)
		}
	}
	return gatherRows(op, t, a, h, pos, h.n, true)
}

// Logcumsumexp returns log(cumsum(exp(t))) along dim (torch.logcumsumexp),
// computed without overflow: each step adds log1p(exp(-|a-b|)) to the
// larger of the two terms. t must be a float tensor; 16-bit ones compute
// in float32. The gradient flows back through the composition.
func (t *Tensor) Logcumsumexp(dim int) *Tensor {
	const op = "logcumsumexp"
	defer asOp(op)
	defer pin(op, t).unpin()
	floatOnly(op, t)
	if w := opMath(t.dtype); w != t.dtype {
		return t.inOpMath(func(x *Tensor) *Tensor { return x.Logcumsumexp(dim) })
	}
	a := t.scalarAxis(op, dim)
	x := t.Clone()
	if a < 0 {
		return x
	}
	return hillisSteele(x, a, logAddExp)
}

// logAddExp returns log(exp(a)+exp(b)) elementwise, exact where both are
// -Inf or one is +Inf. There its gradient is the limit of the finite case
// (equal infinite terms share it), never NaN.
func logAddExp(a, b *Tensor) *Tensor {
	m := a.Maximum(b)
	defer m.Release()
	mn := a.Minimum(b)
	defer mn.Release()
	inf := m.Abs()
	defer inf.Release()
	isInf := inf.EqScalar(math.Inf(1))
	defer isInf.Release()
	diff := mn.Sub(m) // <= 0, NaN where both are the same infinity
	defer diff.Release()
	d := diff.MaskedFill(isInf, 0)
	defer d.Release()
	e := d.Exp()
	defer e.Release()
	l := e.Log1p()
	defer l.Release()
	s := m.Add(l)
	defer s.Release()
	return Where(isInf, m, s)
}
