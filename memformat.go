package vram

import (
	"fmt"
	"slices"

	"github.com/vramgo/vram/backend"
)

// MemoryFormat names a layout of a 4-D tensor's elements in memory
// (torch.memory_format). The logical shape is always [N, C, H, W]; the
// format only sets the strides, so every operation accepts either format
// and a tensor can be converted without changing how it is indexed.
type MemoryFormat uint8

// The memory formats.
const (
	// ContiguousFormat is row-major ("NCHW" for 4-D tensors): strides
	// [C·H·W, H·W, W, 1].
	ContiguousFormat MemoryFormat = iota
	// ChannelsLast ("NHWC") keeps the channels of each pixel together:
	// strides [H·W·C, 1, W·C, C], as PyTorch's torch.channels_last. The
	// fastest convolutions on NVIDIA tensor cores read this layout. Only
	// 4-D tensors have it.
	ChannelsLast
)

// String returns PyTorch's name of the format, such as "channels_last".
func (f MemoryFormat) String() string {
	switch f {
	case ContiguousFormat:
		return "contiguous_format"
	case ChannelsLast:
		return "channels_last"
	}
	return fmt.Sprintf("MemoryFormat(%d)", uint8(f))
}

// check panics with ErrArgument for an unknown format.
func (f MemoryFormat) check(op string) {
	if f > ChannelsLast {
		fail(op, ErrArgument, "unknown memory format %v; use vram.ContiguousFormat or vram.ChannelsLast", f)
	}
}

// applyCopy makes a MemoryFormat a [CopyOption]: t.To(d, vram.ChannelsLast)
// copies t to d and lays the copy out in the format.
func (f MemoryFormat) applyCopy(o *copyOptions) {
	o.format = f
	o.hasFormat = true
	o.formats++
}

// formatArg returns the single optional format argument of op, or
// ContiguousFormat.
func formatArg(op string, fs []MemoryFormat) MemoryFormat {
	switch len(fs) {
	case 0:
		return ContiguousFormat
	case 1:
		fs[0].check(op)
		return fs[0]
	}
	fail(op, ErrArgument, "takes at most one memory format, got %d", len(fs))
	return 0
}

// formatStrides returns the strides of shape in format f; f must be
// ContiguousFormat unless shape is 4-D.
func formatStrides(shape []int, f MemoryFormat) []int {
	if f != ChannelsLast {
		return backend.ContiguousStrides(shape)
	}
	c, h, w := max(shape[1], 1), max(shape[2], 1), max(shape[3], 1) // a size of 0 counts as 1, as in ContiguousStrides
	return []int{h * w * c, 1, w * c, c}
}

// isDense reports whether strides describe the elements of shape densely
// in format f. Dimensions of size 1 may have any stride, as in
// [backend.View.IsContiguous], and a tensor without elements is
// row-major contiguous whatever its strides, as PyTorch's is_contiguous
// says (its channels-last test has no such rule, nor has this one).
func isDense(shape, strides []int, f MemoryFormat) bool {
	if f != ChannelsLast {
		return backend.NumElements(shape) == 0 || backend.View{Shape: shape, Strides: strides}.IsContiguous()
	}
	if len(shape) != 4 {
		return false
	}
	want := 1
	for _, d := range []int{1, 3, 2, 0} { // innermost first: C, W, H, N
		if shape[d] == 1 {
			continue
		}
		if strides[d] != want {
			return false
		}
		want *= max(shape[d], 1)
	}
	return true
}

// needs4D panics with ErrShape unless t is 4-D, for channels-last
// conversions.
func needs4D(op string, t *Tensor, f MemoryFormat) {
	if f == ChannelsLast && len(t.shape) != 4 {
		fail(op, ErrShape, "channels_last needs a 4-D [N, C, H, W] tensor, got shape %v; reshape it or use vram.ContiguousFormat", Shape(t.shape))
	}
}

// newTensorFormat allocates a tensor of shape on ds laid out in format f.
func newTensorFormat(op string, ds *devState, dt DType, shape []int, f MemoryFormat) *Tensor {
	t := newTensor(op, ds, dt, shape)
	if f == ChannelsLast {
		t.strides = formatStrides(shape, f)
	}
	return t
}

// newTensorLike allocates the result of an elementwise op of shape on ds
// in the layout PyTorch gives it: channels-last when shape is 4-D and the
// first of ins that has the whole shape (not broadcast) is channels-last
// (as a convolution's output in a channels-last model is), else row-major.
// A channels-last model thus stays channels-last through its activations,
// residual additions and casts, without a copy before each convolution.
func newTensorLike(op string, ds *devState, dt DType, shape []int, ins ...*Tensor) *Tensor {
	if len(shape) == 4 {
		for _, t := range ins {
			if t == nil || !slices.Equal(t.shape, shape) {
				continue
			}
			if stridesLikeChannelsLast(t.shape, t.strides) && isDense(t.shape, t.strides, ChannelsLast) {
				return newTensorFormat(op, ds, dt, shape, ChannelsLast)
			}
			break
		}
	}
	return newTensor(op, ds, dt, shape)
}

// inFormat returns t itself as a new reference when it is dense in format
// f, else a copy laid out in f. Nothing is recorded.
func (t *Tensor) inFormat(op string, f MemoryFormat) *Tensor {
	if isDense(t.shape, t.strides, f) && (f != ChannelsLast || stridesLikeChannelsLast(t.shape, t.strides)) {
		return t.view(t.shape, t.strides, t.offset)
	}
	out := newTensorFormat(op, t.ds(), t.dtype, t.shape, f)
	check(op, t.ds().bd.Copy(t.ds().stream(), out.bv(), t.bv()))
	return out
}

// formatOf returns the format t is dense in and false when it is dense in
// neither. A tensor dense in both (one channel, or a 1×1 image) is taken
// as channels-last when its strides order it so (stridesLikeChannelsLast).
func formatOf(t *Tensor) (MemoryFormat, bool) {
	cl := isDense(t.shape, t.strides, ChannelsLast)
	switch {
	case cl && stridesLikeChannelsLast(t.shape, t.strides):
		return ChannelsLast, true
	case isDense(t.shape, t.strides, ContiguousFormat):
		return ContiguousFormat, true
	case cl:
		return ChannelsLast, true
	}
	return ContiguousFormat, false
}

// stridesLikeChannelsLast reports whether a 4-D layout orders its strides
// as channels-last does, C innermost, then W, H and N, telling the two
// formats apart by the strides themselves where a dimension of size 1 makes
// the layout dense in both (PyTorch's rule).
func stridesLikeChannelsLast(shape, strides []int) bool {
	if len(shape) != 4 || strides[1] == 0 {
		return false
	}
	lo := 0
	for _, d := range []int{1, 3, 2, 0} {
		if shape[d] == 0 || strides[d] < lo {
			return false
		}
		if d == 0 && lo == strides[1] {
			return false
		}
		lo = strides[d]
		if shape[d] > 1 {
			lo *= shape[d]
		}
	}
	return true
}

// SuggestMemoryFormat returns ChannelsLast for a 4-D tensor whose strides
// are ordered channels-last, else ContiguousFormat: the format that
// operations such as [Conv2d] give their outputs (PyTorch's
// suggest_memory_format). A tensor with one channel or a 1×1 image made by
// Contiguous(ChannelsLast) is channels-last by this rule, though it is
// also row-major.
func (t *Tensor) SuggestMemoryFormat() MemoryFormat {
	notNil("suggest_memory_format", t)
	if stridesLikeChannelsLast(t.shape, t.strides) {
		return ChannelsLast
	}
	return ContiguousFormat
}

// toFormat implements Contiguous(f) on a pinned t, recording the copy.
func (t *Tensor) toFormat(op string, f MemoryFormat) *Tensor {
	needs4D(op, t, f)
	if isDense(t.shape, t.strides, f) && (f != ChannelsLast || stridesLikeChannelsLast(t.shape, t.strides)) {
		return t.identity(op)
	}
	out := t.inFormat(op, f)
	if needsGrad(t) {
		record(op, out, []*Tensor{t}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.Detach()} })
	}
	return out
}

// ToMemoryFormat returns t laid out in format f: a new reference to t when
// it already is, else a copy that gradients flow through
// (t.to(memory_format=f) in PyTorch). It is t.Contiguous(f). ChannelsLast
// needs a 4-D tensor ([ErrShape]).
func (t *Tensor) ToMemoryFormat(f MemoryFormat) *Tensor {
	const op = "to_memory_format"
	defer asOp(op)
	defer pin(op, t).unpin()
	f.check(op)
	return t.toFormat(op, f)
}

// ConvertMemoryFormat lays a leaf tensor out in format f in place, keeping
// its identity, so that modules and optimizers that hold it see the change
// (nn.ToMemoryFormat uses it, as PyTorch's model.to(memory_format=...)
// does). Its gradient is converted with it. It panics with [ErrAutograd]
// on a tensor computed by a recorded operation and with [ErrShape] when f
// is ChannelsLast and t is not 4-D.
func (t *Tensor) ConvertMemoryFormat(f MemoryFormat) {
	const op = "convert_memory_format"
	defer asOp(op)
	defer pin(op, t).unpin()
	f.check(op)
	if t.ref.node != nil {
		fail(op, ErrAutograd, "only leaf tensors can be converted in place; use ToMemoryFormat for computed tensors")
	}
	needs4D(op, t, f)
	if !isDense(t.shape, t.strides, f) || f == ChannelsLast && !stridesLikeChannelsLast(t.shape, t.strides) {
		c := t.inFormat(op, f)
		Keep(c)
		// Swap the storages as MoveTo does: t takes the copy, c the old
		// storage, which its Release then drops.
		swapStorage(t.ref, c.ref)
		t.strides, c.strides = slices.Clone(c.strides), t.strides
		t.offset, c.offset = c.offset, t.offset
		c.Release()
	}
	if g := t.Grad(); g != nil {
		g.ConvertMemoryFormat(f)
	}
}

// denseStrides reports whether strides lay the elements of shape out
// without gaps or overlaps in some order of the dimensions (row-major,
// channels-last, a permutation of either): the elements then fill
// NumElements consecutive slots from the first one, and an elementwise
// pass over those slots visits each element once. Dimensions of size 1
// may have any stride; an empty shape is dense.
func denseStrides(shape, strides []int) bool {
	dims := make([]int, 0, len(shape))
	for d, n := range shape {
		switch {
		case n == 0:
			return true
		case n > 1:
			dims = append(dims, d)
		}
	}
	slices.SortFunc(dims, func(a, b int) int { return strides[a] - strides[b] })
	want := 1
	for _, d := range dims {
		if strides[d] != want {
			return false
		}
		want *= shape[d]
	}
	return true
}

// sameStrides reports whether two layouts of shape have the same stride
// along every dimension of size above 1, so that they place every element
// at the same distance from their first.
func sameStrides(shape, a, b []int) bool {
	for d, n := range shape {
		if n > 1 && a[d] != b[d] {
			return false
		}
	}
	return true
}

// flatViews returns the backend views of ts as flat 1-D arrays of their
// elements when every tensor has ts[0]'s shape and strides and that layout
// is dense ([denseStrides]): an elementwise pass over the flat arrays then
// pairs the same elements as one over the tensors, whatever their memory
// format. It returns false otherwise.
func flatViews(ts ...*Tensor) ([]backend.View, bool) {
	t0 := ts[0]
	if !denseStrides(t0.shape, t0.strides) {
		return nil, false
	}
	n := backend.NumElements(t0.shape)
	vs := make([]backend.View, len(ts))
	for i, t := range ts {
		if !slices.Equal(t.shape, t0.shape) || !sameStrides(t.shape, t.strides, t0.strides) {
			return nil, false
		}
		v := t.bv()
		v.Shape, v.Strides = []int{n}, []int{1}
		vs[i] = v
	}
	return vs, true
}

// gradStrides returns the strides a leaf's gradient gets: the leaf's own
// when they are dense ([denseStrides]), as PyTorch keeps a parameter's
// layout (channels-last weights get channels-last gradients, which the
// fused optimizer steps take as flat arrays), else row-major.
func gradStrides(leaf *Tensor) []int {
	if denseStrides(leaf.shape, leaf.strides) {
		return slices.Clone(leaf.strides)
	}
	return backend.ContiguousStrides(leaf.shape)
}
