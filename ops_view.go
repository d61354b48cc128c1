package vram

import (
	"slices"
	"strings"

	"github.com/vramgo/vram/backend"
)

// contiguous returns t itself as a new reference when it is already
// contiguous, else a contiguous copy. The caller releases the result.
// Nothing is recorded.
func (t *Tensor) contiguous(op string) *Tensor {
	if t.IsContiguous() {
		return t.view(t.shape, t.strides, t.offset)
	}
	return t.clone()
}

// clone returns a contiguous copy of t's data. Nothing is recorded.
func (t *Tensor) clone() *Tensor {
	out := newTensor("clone", t.ds(), t.dtype, t.shape)
	check("clone", t.ds().bd.Copy(t.ds().stream(), out.bv(), t.bv()))
	return out
}

// Contiguous returns a tensor with t's values laid out densely in row-major
// order, or in the given [MemoryFormat] (t.Contiguous(vram.ChannelsLast)):
// a new reference to t's storage when it already is, else a copy.
// ChannelsLast needs a 4-D tensor ([ErrShape]).
func (t *Tensor) Contiguous(format ...MemoryFormat) *Tensor {
	defer asOp("contiguous")
	defer pin("contiguous", t).unpin()
	if f := formatArg("contiguous", format); f != ContiguousFormat {
		return t.toFormat("contiguous", f)
	}
	if t.IsContiguous() {
		return t.identity("contiguous")
	}
	return t.copyInto("clone", newTensor("contiguous", t.ds(), t.dtype, t.shape))
}

// identity returns a new reference to t with the same layout that passes
// gradients straight through.
func (t *Tensor) identity(op string) *Tensor {
	out := t.view(t.shape, t.strides, t.offset)
	if needsGrad(t) {
		record(op, out, []*Tensor{t}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.Detach()} })
	}
	return out
}

// Clone returns a copy of t in new storage; gradients flow back to t. The
// copy keeps t's layout as PyTorch's preserve_format does: a t whose
// elements are dense in some order of its dimensions (row-major,
// channels-last, a transpose or permutation of either) gives a copy with
// t's own strides; any other t (a slice with gaps, an expanded view) gives
// a dense copy, channels-last when t's strides are ordered channels-last
// and row-major otherwise.
func (t *Tensor) Clone() *Tensor {
	defer pin("clone", t).unpin()
	return t.copyInto("clone", newTensorPreserving("clone", t.ds(), t.dtype, t))
}

// newTensorPreserving allocates a tensor of t's shape on ds in the layout
// of PyTorch's preserve_format (see Clone).
func newTensorPreserving(op string, ds *devState, dt DType, t *Tensor) *Tensor {
	switch {
	case backend.NumElements(t.shape) > 0 && denseStrides(t.shape, t.strides):
		// Dense in some order: its elements fill NumElements slots
		// from the first, so its strides fit new storage of that size.
		out := newTensor(op, ds, dt, t.shape)
		out.strides = slices.Clone(t.strides)
		return out
	case stridesLikeChannelsLast(t.shape, t.strides):
		return newTensorFormat(op, ds, dt, t.shape, ChannelsLast)
	}
	return newTensor(op, ds, dt, t.shape)
}

// copyInto copies t's values into out, a new tensor of t's shape and
// dtype, records the copy when t needs a gradient, and returns out.
func (t *Tensor) copyInto(op string, out *Tensor) *Tensor {
	check(op, t.ds().bd.Copy(t.ds().stream(), out.bv(), t.bv()))
	if needsGrad(t) {
		record(op, out, []*Tensor{t}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.Detach()} })
	}
	return out
}

// inferShape resolves one -1 in shape against n elements and checks that
// the result is a shape of dt with n elements.
func inferShape(op string, shape []int, n int, from []int, dt DType) []int {
	out := slices.Clone(shape)
	neg := -1
	for i, d := range out {
		switch {
		case d == -1 && neg < 0:
			neg = i
			out[i] = 1
		case d < 0:
			fail(op, ErrShape, "invalid shape %v: sizes must be at least 0, with at most one -1 to infer", Shape(shape))
		}
	}
	// With the -1 taken as 1, the shape must be one that can exist.
	prod, _, err := backend.CheckShape(out, dt.Size())
	if err != nil {
		fail(op, ErrShape, "shape %v is invalid for input of shape %v: its sizes multiply to more elements or bytes than an int64 holds", Shape(shape), Shape(from))
	}
	if neg >= 0 {
		if prod == 0 && n == 0 {
			fail(op, ErrShape, "shape %v is ambiguous for input of shape %v (0 elements): its other sizes multiply to 0, so the -1 could be any size; give it",
				Shape(shape), Shape(from))
		}
		if prod == 0 || n%prod != 0 {
			fail(op, ErrShape, "shape %v is invalid for input of shape %v (%d elements)", Shape(shape), Shape(from), n)
		}
		out[neg] = n / prod
		prod = n
	}
	if prod != n {
		fail(op, ErrShape, "shape %v is invalid for input of shape %v (%d elements)", Shape(shape), Shape(from), n)
	}
	return out
}

// Reshape returns a tensor with t's elements and the given shape; one size
// may be -1 and is inferred. It is a view when t's layout allows it and a
// copy otherwise (torch.reshape). It panics with [ErrShape] when the element
// counts differ.
func (t *Tensor) Reshape(shape ...int) *Tensor {
	defer pin("reshape", t).unpin()
	ns := inferShape("reshape", shape, t.NumElements(), t.shape, t.dtype)
	if st := computeView(t.shape, t.strides, ns); st != nil {
		return t.reshapeView("reshape", ns, st)
	}
	defer asOp("reshape")
	c := t.Contiguous()
	defer c.Release()
	return c.reshapeView("reshape", ns, backend.ContiguousStrides(ns))
}

// View is like Reshape but never copies: it panics with [ErrShape] when t's
// strides cannot show the new shape (call Contiguous first).
func (t *Tensor) View(shape ...int) *Tensor {
	defer pin("view", t).unpin()
	ns := inferShape("view", shape, t.NumElements(), t.shape, t.dtype)
	st := computeView(t.shape, t.strides, ns)
	if st == nil {
		fail("view", ErrShape, "view size %v is not compatible with input size %v and strides %v; use Reshape or Contiguous first",
			Shape(ns), Shape(t.shape), t.strides)
	}
	return t.reshapeView("view", ns, st)
}

func (t *Tensor) reshapeView(op string, ns, st []int) *Tensor {
	out := t.view(ns, st, t.offset)
	if needsGrad(t) {
		old := slices.Clone(t.shape)
		record(op, out, []*Tensor{t}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.Reshape(old...)} })
	}
	return out
}

// computeView returns strides for newShape over a tensor with the given
// shape and strides, or nil when a copy is needed (PyTorch's
// computeStride).
func computeView(shape, strides, newShape []int) []int {
	n := backend.NumElements(shape)
	out := make([]int, len(newShape))
	if n == 0 || len(shape) == 0 {
		return backend.ContiguousStrides(newShape)
	}
	viewD := len(newShape) - 1
	chunkBase := 0
	if len(strides) > 0 {
		chunkBase = strides[len(strides)-1]
	}
	tensorNumel, viewNumel := 1, 1
	for d := len(shape) - 1; d >= 0; d-- {
		tensorNumel *= shape[d]
		if d == 0 || (shape[d-1] != 1 && strides[d-1] != tensorNumel*chunkBase) {
			for viewD >= 0 && (viewNumel < tensorNumel || newShape[viewD] == 1) {
				out[viewD] = viewNumel * chunkBase
				viewNumel *= newShape[viewD]
				viewD--
			}
			if viewNumel != tensorNumel {
				return nil
			}
			if d > 0 {
				chunkBase = strides[d-1]
				tensorNumel, viewNumel = 1, 1
			}
		}
	}
	if viewD != -1 {
		return nil
	}
	return out
}

// Flatten merges dimensions start..end (inclusive; negative counts from the
// end) into one.
func (t *Tensor) Flatten(start, end int) *Tensor {
	defer asOp("flatten")
	t.live("flatten")
	s, e := t.scalarAxis("flatten", start), t.scalarAxis("flatten", end)
	if len(t.shape) == 0 {
		return t.Reshape(1)
	}
	if s > e {
		fail("flatten", ErrArgument, "start dimension %d is after end dimension %d", start, end)
	}
	ns := append(slices.Clone(t.shape[:s]), backend.NumElements(t.shape[s:e+1]))
	ns = append(ns, t.shape[e+1:]...)
	return t.Reshape(ns...)
}

// Unflatten returns a view of t with dimension dim (negative counts from
// the end) split into dimensions of the given sizes, whose product must
// be t.Size(dim); one size may be -1 and is inferred (torch.unflatten).
// It panics with [ErrIndex] for a dim out of range, with [ErrArgument]
// for no sizes and with [ErrShape] for sizes that do not fit.
func (t *Tensor) Unflatten(dim int, sizes ...int) *Tensor {
	const op = "unflatten"
	defer asOp(op)
	defer pin(op, t).unpin()
	a := t.axis(op, dim)
	if len(sizes) == 0 {
		fail(op, ErrArgument, "sizes must name at least one dimension")
	}
	ns := inferShape(op, sizes, t.shape[a], t.shape[a:a+1], t.dtype)
	shape := append(append(slices.Clone(t.shape[:a]), ns...), t.shape[a+1:]...)
	return t.View(shape...)
}

// Permute returns a view with the dimensions reordered: dimension i of the
// result is dimension dims[i] of t. It panics with [ErrArgument] unless dims
// is a permutation.
func (t *Tensor) Permute(dims ...int) *Tensor {
	defer pin("permute", t).unpin()
	if len(dims) != len(t.shape) {
		fail("permute", ErrArgument, "permutation %v has %d entries for a tensor of %d dimensions", dims, len(dims), len(t.shape))
	}
	seen := make([]bool, len(dims))
	ns, st := make([]int, len(dims)), make([]int, len(dims))
	inv := make([]int, len(dims))
	for i, d := range dims {
		a := t.axis("permute", d)
		if seen[a] {
			fail("permute", ErrArgument, "dimension %d repeats in permutation %v", d, dims)
		}
		seen[a] = true
		ns[i], st[i] = t.shape[a], t.strides[a]
		inv[a] = i
	}
	out := t.view(ns, st, t.offset)
	if needsGrad(t) {
		record("permute", out, []*Tensor{t}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.Permute(inv...)} })
	}
	return out
}

// Transpose returns a view with dimensions d0 and d1 swapped.
func (t *Tensor) Transpose(d0, d1 int) *Tensor {
	defer asOp("transpose")
	t.live("transpose")
	a, b := t.scalarAxis("transpose", d0), t.scalarAxis("transpose", d1)
	perm := make([]int, len(t.shape))
	for i := range perm {
		perm[i] = i
	}
	if len(perm) > 0 {
		perm[a], perm[b] = b, a
	}
	return t.Permute(perm...)
}

// Movedim returns a view with dimension source moved to position
// destination and the others kept in their order (torch.movedim with
// ints); negative values count from the end. It panics with [ErrIndex]
// for a dimension out of range.
func (t *Tensor) Movedim(source, destination int) *Tensor {
	const op = "movedim"
	defer asOp(op)
	t.live(op)
	s, d := t.scalarAxis(op, source), t.scalarAxis(op, destination)
	if s < 0 {
		return t.identity(op) // a 0-dimensional t
	}
	perm := make([]int, 0, len(t.shape))
	for i := range t.shape {
		if i != s {
			perm = append(perm, i)
		}
	}
	perm = slices.Insert(perm, d, s)
	return t.Permute(perm...)
}

// T returns the transpose of a tensor of at most 2 dimensions.
func (t *Tensor) T() *Tensor {
	defer asOp("t")
	defer pin("t", t).unpin()
	switch len(t.shape) {
	case 0, 1:
		return t.identity("t")
	case 2:
		return t.Transpose(0, 1)
	}
	fail("t", ErrShape, "T expects a tensor of at most 2 dimensions, got shape %v; use Transpose or MT", Shape(t.shape))
	return nil
}

// MT returns a view with the last two dimensions swapped.
func (t *Tensor) MT() *Tensor {
	defer asOp("mt")
	t.live("mt")
	if len(t.shape) < 2 {
		fail("mt", ErrShape, "MT expects a tensor of at least 2 dimensions, got shape %v", Shape(t.shape))
	}
	return t.Transpose(-2, -1)
}

// Narrow returns the view of length elements of dimension dim starting at
// start (negative start counts from the end). It panics with [ErrIndex]
// when the range falls outside the dimension.
//
// The view shares t's storage and keeps all of it allocated, however small
// the view, until the view is released: b.Narrow(0, 0, 1).Sum().Item()
// leaves an unreleased view that pins the whole of b until the garbage
// collector runs. Release the view (or make it inside [Tidy]), and Clone it
// to keep a small part of a large tensor without the rest.
func (t *Tensor) Narrow(dim, start, length int) *Tensor {
	defer pin("narrow", t).unpin()
	a := t.axis("narrow", dim)
	given := start
	if start < 0 {
		start += t.shape[a]
	}
	if start < 0 || start > t.shape[a] || length < 0 || length > t.shape[a]-start {
		fail("narrow", ErrIndex, "start %d and length %d out of bounds for dimension %d of size %d", given, length, dim, t.shape[a])
	}
	ns := slices.Clone(t.shape)
	ns[a] = length
	out := t.view(ns, slices.Clone(t.strides), t.offset+start*t.strides[a])
	if needsGrad(t) {
		full := slices.Clone(t.shape)
		record("narrow", out, []*Tensor{t}, nil, func(g *Tensor) []*Tensor {
			z := g.NewZeros(full)
			dst := z.view(g.shape, z.strides, z.offset+start*z.strides[a])
			check("narrow", z.ds().bd.Copy(z.ds().stream(), dst.bv(), g.bv()))
			dst.Release()
			return []*Tensor{z}
		})
	}
	return out
}

// Slice returns the view of indices start, start+step, ... below end of
// dimension dim, with Python's clamping of start and end (negative values
// count from the end). step must be positive.
func (t *Tensor) Slice(dim, start, end, step int) *Tensor {
	defer pin("slice", t).unpin()
	a := t.axis("slice", dim)
	n := t.shape[a]
	if step <= 0 {
		fail("slice", ErrArgument, "step must be positive, got %d", step)
	}
	clamp := func(i int) int {
		if i < 0 {
			i += n
		}
		return min(max(i, 0), n)
	}
	s, e := clamp(start), clamp(end)
	length := 0
	if e > s {
		length = (e-s-1)/step + 1 // the ceiling of (e-s)/step, without overflow
	}
	if step == 1 {
		defer asOp("slice")
		return t.Narrow(a, s, length)
	}
	ns, st := slices.Clone(t.shape), slices.Clone(t.strides)
	ns[a] = length
	if length > 1 { // the stride of a size-1 dimension is never used; keep it from overflowing
		st[a] *= step
	}
	out := t.view(ns, st, t.offset+s*t.strides[a])
	if needsGrad(t) {
		full := slices.Clone(t.shape)
		record("slice", out, []*Tensor{t}, nil, func(g *Tensor) []*Tensor {
			z := g.NewZeros(full)
			zst := slices.Clone(z.strides)
			if length > 1 {
				zst[a] *= step
			}
			dst := z.view(g.shape, zst, z.offset+s*z.strides[a])
			check("slice", z.ds().bd.Copy(z.ds().stream(), dst.bv(), g.bv()))
			dst.Release()
			return []*Tensor{z}
		})
	}
	return out
}

// Select returns the view at index i of dimension dim, which is removed.
func (t *Tensor) Select(dim, i int) *Tensor {
	defer asOp("select")
	t.live("select")
	a := t.axis("select", dim)
	if size := t.shape[a]; i < -size || i >= size {
		fail("select", ErrIndex, "index %d out of range for dimension %d of size %d", i, dim, size)
	}
	n := t.Narrow(a, i, 1)
	defer n.Release()
	return n.Squeeze(a)
}

// Unsqueeze returns a view with a dimension of size 1 inserted at dim
// (-1 appends).
func (t *Tensor) Unsqueeze(dim int) *Tensor {
	defer pin("unsqueeze", t).unpin()
	nd := len(t.shape) + 1
	d := dim
	if d < 0 {
		d += nd
	}
	if d < 0 || d >= nd {
		fail("unsqueeze", ErrIndex, "dimension %d out of range for a result of %d dimensions", dim, nd)
	}
	st := 1
	if d < len(t.shape) {
		st = t.strides[d] * t.shape[d]
	}
	ns := slices.Insert(slices.Clone(t.shape), d, 1)
	nst := slices.Insert(slices.Clone(t.strides), d, st)
	return t.reshapeView("unsqueeze", ns, nst)
}

// Squeeze returns a view without the listed dimensions of size 1 (every
// dimension of size 1 when none are listed). Listed dimensions whose size is
// not 1 are kept, as in PyTorch.
func (t *Tensor) Squeeze(dims ...int) *Tensor {
	defer pin("squeeze", t).unpin()
	drop := make([]bool, len(t.shape))
	if len(dims) == 0 {
		for i, d := range t.shape {
			drop[i] = d == 1
		}
	}
	seen := make([]bool, len(t.shape))
	for _, d := range dims {
		a := t.scalarAxis("squeeze", d)
		if a < 0 {
			continue // a 0-dimensional tensor has nothing to drop
		}
		if seen[a] {
			fail("squeeze", ErrArgument, "dimension %d appears twice in %v", d, dims)
		}
		seen[a] = true
		drop[a] = t.shape[a] == 1
	}
	var ns, st []int
	for i := range t.shape {
		if !drop[i] {
			ns = append(ns, t.shape[i])
			st = append(st, t.strides[i])
		}
	}
	if ns == nil {
		ns, st = []int{}, []int{}
	}
	return t.reshapeView("squeeze", ns, st)
}

// Expand returns a view that repeats t along dimensions of size 1 (and new
// leading dimensions) to reach shape, without copying; -1 keeps a size. It
// panics with [ErrShape] when a size other than 1 would change.
func (t *Tensor) Expand(shape ...int) *Tensor {
	defer pin("expand", t).unpin()
	if len(shape) < len(t.shape) {
		fail("expand", ErrShape, "cannot expand shape %v to %v: fewer dimensions", Shape(t.shape), Shape(shape))
	}
	ns := slices.Clone(shape)
	lead := len(shape) - len(t.shape)
	for i, d := range ns {
		switch {
		case i >= lead && d == -1:
			ns[i] = t.shape[i-lead]
		case d < 0:
			fail("expand", ErrShape, "cannot expand shape %v to %v: size %d at dimension %d (-1, to keep a size, applies only to existing dimensions)",
				Shape(t.shape), Shape(shape), d, i)
		}
	}
	v := expandView("expand", t, ns)
	checkShape("expand", ns, t.dtype)
	out := t.view(ns, v.Strides, t.offset)
	if needsGrad(t) {
		orig := slices.Clone(t.shape)
		record("expand", out, []*Tensor{t}, nil, func(g *Tensor) []*Tensor { return []*Tensor{sumTo(g, orig)} })
	}
	return out
}

// ExpandAs expands t to other's shape. It reads only other's shape, but
// a released other panics with [ErrReleased] all the same, as it does in
// the ...Like factories.
func (t *Tensor) ExpandAs(other *Tensor) *Tensor {
	defer asOp("expand_as")
	notNil("expand_as", t, other)
	other.live("expand_as")
	return t.Expand(other.shape...)
}

// expandView returns t's backend view broadcast to shape (stride 0 along
// repeated dimensions), panicking with ErrShape if it does not fit.
func expandView(op string, t *Tensor, shape []int) backend.View {
	lead := len(shape) - len(t.shape)
	if lead < 0 {
		fail(op, ErrShape, "cannot broadcast shape %v to %v", Shape(t.shape), Shape(shape))
	}
	st := make([]int, len(shape))
	for i := range shape {
		if i < lead {
			continue
		}
		d := t.shape[i-lead]
		switch {
		case d == shape[i]:
			st[i] = t.strides[i-lead]
		case d == 1:
			st[i] = 0
		default:
			fail(op, ErrShape, "cannot broadcast shape %v to %v", Shape(t.shape), Shape(shape))
		}
	}
	v := t.bv()
	v.Shape, v.Strides = shape, st
	return v
}

// broadcastsTo reports whether a tensor of shape from expands to shape
// to, as [expandView] would make it.
func broadcastsTo(from, to []int) bool {
	lead := len(to) - len(from)
	if lead < 0 {
		return false
	}
	for i, d := range from {
		if d != to[lead+i] && d != 1 {
			return false
		}
	}
	return true
}

// broadcastShapes returns the shape that tensors of the given shapes
// broadcast to, or panics with ErrShape naming them.
func broadcastShapes(op string, shapes ...[]int) []int {
	n := 0
	for _, s := range shapes {
		n = max(n, len(s))
	}
	out := make([]int, n)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		lead := n - len(s)
		for i, d := range s {
			o := &out[lead+i]
			switch {
			case *o == d || d == 1:
			case *o == 1:
				*o = d
			default:
				strs := make([]string, 0, len(shapes))
				for _, s := range shapes {
					strs = append(strs, Shape(s).String())
				}
				fail(op, ErrShape, "shapes %s cannot be broadcast together (dimension %d: %d vs %d)",
					strings.Join(strs, " and "), i-len(s), *o, d)
			}
		}
	}
	return out
}

// sumTo reduces g to shape by summing over broadcast dimensions. The
// result is a new tensor; nothing is recorded (it runs inside backward).
func sumTo(g *Tensor, shape []int) *Tensor {
	if slices.Equal(g.shape, shape) {
		return g.Detach()
	}
	lead := len(g.shape) - len(shape)
	var axes []int
	for i := range g.shape {
		if i < lead || (shape[i-lead] == 1 && g.shape[i] != 1) {
			axes = append(axes, i)
		}
	}
	s := g.SumKeepDim(axes...)
	defer s.Release()
	return s.Reshape(shape...)
}
