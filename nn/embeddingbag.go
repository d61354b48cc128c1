package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// EmbeddingBag is a lookup table of Num vectors of size Dim that reduces
// each bag of looked-up vectors to one, by a sum, a mean or an
// element-wise maximum (torch.nn.EmbeddingBag). Its state-dict name is
// "weight", as PyTorch's. Unlike PyTorch's fused kernel, Forward looks
// up every row of every bag before reducing them (see
// [EmbeddingBag.ForwardBags] for its memory), so it saves no memory over
// [Embedding] followed by a reduction; it gives PyTorch's results and
// gradients on every device.
type EmbeddingBag struct {
	Base
	// Weight is [num, dim].
	Weight *vram.Tensor
	// Mode is how a bag is reduced (mode): "sum", "mean" or "max"; ""
	// means "mean", PyTorch's default.
	Mode string
	// PaddingIdx, if not nil, is the row in [0, num) whose entries are
	// left out of their bags (padding_idx): they add nothing to a sum,
	// are not counted by a mean and never win a maximum, so the row gets
	// no gradient.
	PaddingIdx *int
	// MaxNorm, if positive, bounds the norm of the rows Forward looks up
	// (max_norm), as [EmbeddingOptions] describes.
	MaxNorm float64
	// NormType is the p of the norm MaxNorm bounds (norm_type); 0 means 2.
	NormType float64
	// ScaleGradByFreq divides the gradient of each row by the number of
	// times the row occurs in the input (scale_grad_by_freq); mode "max"
	// refuses it, as PyTorch does.
	ScaleGradByFreq bool
	// IncludeLastOffset makes offsets one longer than the number of bags,
	// its last element being the length of the input, as in the CSR
	// format (include_last_offset).
	IncludeLastOffset bool
}

// EmbeddingBagOptions are the settings of [NewEmbeddingBagOptions]. The
// zero value is PyTorch's default.
type EmbeddingBagOptions struct {
	// Mode is "sum", "mean" or "max" (mode); "" means "mean".
	Mode string
	// PaddingIdx, if not nil, is the row initialised to zeros whose
	// entries are left out of their bags (padding_idx); a negative value
	// counts from the end, -1 being the last row.
	PaddingIdx *int
	// MaxNorm and NormType bound the norm of the rows looked up
	// (max_norm, norm_type), renormalising them in place as
	// [EmbeddingOptions] describes; 0 means no bound and a 2-norm.
	MaxNorm  float64
	NormType float64
	// ScaleGradByFreq is scale_grad_by_freq; see
	// [EmbeddingBag.ScaleGradByFreq].
	ScaleGradByFreq bool
	// IncludeLastOffset is include_last_offset; see
	// [EmbeddingBag.IncludeLastOffset].
	IncludeLastOffset bool
}

// NewEmbeddingBag returns an EmbeddingBag of num vectors of size dim in
// mode "mean", initialised from the standard normal distribution like
// PyTorch's. opts go to vram's factory functions.
func NewEmbeddingBag(num, dim int, opts ...vram.Option) *EmbeddingBag {
	return NewEmbeddingBagOptions(num, dim, EmbeddingBagOptions{}, opts...)
}

// NewEmbeddingBagOptions returns an EmbeddingBag as [NewEmbeddingBag] does,
// with the settings o. It panics with an *vram.Error of kind
// vram.ErrArgument for a negative size, a mode other than "", "sum",
// "mean" and "max", ScaleGradByFreq with mode "max", a padding index
// outside [-num, num), or a MaxNorm that is negative, NaN or infinite.
func NewEmbeddingBagOptions(num, dim int, o EmbeddingBagOptions, opts ...vram.Option) *EmbeddingBag {
	const op = "embedding_bag"
	if num < 0 || dim < 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("negative size: num=%d, dim=%d", num, dim)})
	}
	checkBagMode(op, o.Mode, o.ScaleGradByFreq)
	emb := newEmbedding(num, EmbeddingOptions{PaddingIdx: o.PaddingIdx, MaxNorm: o.MaxNorm, NormType: o.NormType})
	e := &EmbeddingBag{Mode: o.Mode, PaddingIdx: emb.PaddingIdx, MaxNorm: o.MaxNorm, NormType: o.NormType, ScaleGradByFreq: o.ScaleGradByFreq, IncludeLastOffset: o.IncludeLastOffset}
	vram.Region(ParametersRegion, func() {
		e.Weight = vram.Keep(vram.Randn(vram.Shape{num, dim}, opts...))
		if e.PaddingIdx != nil {
			vram.NoGrad(func() {
				row := e.Weight.Select(0, *e.PaddingIdx)
				defer row.Release()
				row.FillInPlace(0)
			})
		}
		e.Weight.SetRequiresGrad(true)
	})
	e.RegisterParameterField("weight", &e.Weight)
	return e
}

// checkBagMode panics with an *vram.Error of kind vram.ErrArgument naming
// op unless mode is "", "sum", "mean" or "max", or when scaleGrad (by
// frequency) is set with mode "max".
func checkBagMode(op, mode string, scaleGrad bool) {
	switch mode {
	case "", "sum", "mean", "max":
	default:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("mode must be \"sum\", \"mean\" or \"max\", got %q", mode)})
	}
	if scaleGrad && mode == "max" {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "mode \"max\" does not support scaling the gradient by frequency"})
	}
}

// Forward reduces the bags of x, a 2-D tensor [B, L] of int64 (or int32)
// indices holding B bags of L indices each, to [B, dim]. It is
// ForwardBags(x, nil, nil).
func (e *EmbeddingBag) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(e == nil, "embedding_bag", "EmbeddingBag")
	return e.ForwardBags(x, nil, nil)
}

// ForwardBags returns the [B, dim] reduction of B bags of indices
// (torch.nn.EmbeddingBag's forward). input holds int64 (or int32)
// indices: either [B, L], B bags of L each, with a nil offsets, or [N]
// with offsets, a 1-D int64 (or int32) tensor of the positions in input
// where the bags start. offsets[0] must be 0 and the offsets must not
// decrease nor exceed N; bag i runs from offsets[i] to offsets[i+1], the
// last one to N. With IncludeLastOffset, offsets has B+1 elements and its
// last must be N. Equal offsets make an empty bag. ForwardBags reads
// offsets back to the host, so with offsets it waits for the work queued
// before it on their device.
//
// perSampleWeights, if not nil, has input's shape and Weight's dtype, and
// scales each looked-up row before the sum (per_sample_weights); only
// mode "sum" takes it. Gradients flow to Weight and perSampleWeights.
//
// Entries equal to PaddingIdx are left out of their bag. A bag with no
// entry left (empty, or all padding) gives zeros in every mode: a mean
// divides by the number of entries that are not padding. With MaxNorm,
// the rows input names are first renormalised in place, as [Embedding]
// does; with ScaleGradByFreq, each row's gradient is divided by its count
// in input. The bags are padded to the longest one on the device, so the
// work and the temporary memory are those of B times the longest bag.
//
// It panics with an *vram.Error naming embedding_bag before it changes
// Weight: of kind vram.ErrArgument for a nil input, offsets missing for
// 1-D input or given for 2-D input, offsets that break the rules above,
// perSampleWeights with a mode other than "sum", and fields changed since
// construction into what the constructors refuse; of kind vram.ErrShape
// for an input that is neither 1-D nor 2-D, offsets that are not 1-D, a
// perSampleWeights not of input's shape or a Weight that is not 2-D; of
// kind vram.ErrDType for indices or offsets that are not int64 or int32,
// a Weight that is not floating-point or a perSampleWeights of another
// dtype; of kind vram.ErrReleased for released perSampleWeights; with a
// *vram.DeviceMismatchError for perSampleWeights on another device than
// Weight; and of kind vram.ErrIndex for an index outside [0, num).
func (e *EmbeddingBag) ForwardBags(input, offsets, perSampleWeights *vram.Tensor) *vram.Tensor {
	nilLayer(e == nil, "embedding_bag", "EmbeddingBag")
	const op = "embedding_bag"
	defer asOp(op)
	notNil(op, input)
	e.check(op)
	mode := e.Mode
	if mode == "" {
		mode = "mean"
	}
	if perSampleWeights != nil && mode != "sum" {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("per-sample weights are only supported with mode \"sum\", got %q", mode)})
	}
	if dt := input.DType(); dt != vram.Int64 && dt != vram.Int32 {
		panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("input must be int64 or int32, got %s", dt)})
	}
	if perSampleWeights != nil {
		if !slices.Equal(perSampleWeights.Shape(), input.Shape()) {
			panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("per-sample weights must have input's shape %v, got %v", input.Shape(), perSampleWeights.Shape())})
		}
		if perSampleWeights.DType() != e.Weight.DType() {
			panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("per-sample weights must have weight's dtype %s, got %s", e.Weight.DType(), perSampleWeights.DType())})
		}
		// Refused here, before MaxNorm renormalises Weight in place,
		// rather than by the reduction after it.
		if perSampleWeights.Released() {
			panic(&vram.Error{Op: op, Kind: vram.ErrReleased, Detail: "the per-sample weights were released"})
		}
		sameDevice(op, perSampleWeights, e.Weight)
	}
	var bags *bagLayout
	switch input.Dim() {
	case 2:
		if offsets != nil {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "offsets must be nil for 2-D input, whose rows are the bags"})
		}
	case 1:
		if offsets == nil {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "1-D input needs offsets"})
		}
		bags = e.layout(op, offsets, input.Size(0))
	default:
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("input must be 1-D with offsets or 2-D [bags, length], got %v", input.Shape())})
	}
	if e.MaxNorm > 0 {
		renormRows(e.Weight, input, e.MaxNorm, e.NormType)
	}
	return e.reduce(mode, input, perSampleWeights, bags)
}

// check panics as [Embedding.check] does for fields changed since
// construction, with an error of kind vram.ErrArgument for a bad Mode and
// of kind vram.ErrDType for a Weight that is not floating-point.
func (e *EmbeddingBag) check(op string) {
	checkBagMode(op, e.Mode, e.ScaleGradByFreq)
	emb := Embedding{Weight: e.Weight, PaddingIdx: e.PaddingIdx, MaxNorm: e.MaxNorm, NormType: e.NormType}
	emb.check(op)
	if !e.Weight.DType().IsFloat() {
		panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("weight must be floating-point, got %s", e.Weight.DType())})
	}
}

// bagLayout places the entries of 1-D input in a [bags, longest] grid:
// pos holds the position in input of each slot (0 for the slots past a
// bag's end) and in marks the slots that hold an entry.
type bagLayout struct {
	bags, longest int
	pos           []int64
	in            []bool
}

// layout reads offsets back from the device, checks them against an input
// of n entries and returns the grid of the bags they make.
func (e *EmbeddingBag) layout(op string, offsets *vram.Tensor, n int) *bagLayout {
	if offsets.Dim() != 1 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("offsets must be 1-D, got %v", offsets.Shape())})
	}
	if dt := offsets.DType(); dt != vram.Int64 && dt != vram.Int32 {
		panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("offsets must be int64 or int32, got %s", dt)})
	}
	off := offsets.Int64s()
	if len(off) == 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "offsets must hold at least one element"})
	}
	if off[0] != 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("offsets[0] must be 0, got %d", off[0])})
	}
	for i := 1; i < len(off); i++ {
		if off[i] < off[i-1] {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("offsets must not decrease: offsets[%d]=%d < offsets[%d]=%d", i, off[i], i-1, off[i-1])})
		}
	}
	if last := off[len(off)-1]; last > int64(n) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("offsets[%d]=%d is past the end of the input of %d entries", len(off)-1, last, n)})
	}
	ends := append(off[1:len(off):len(off)], int64(n))
	if e.IncludeLastOffset {
		if last := off[len(off)-1]; last != int64(n) {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("with include_last_offset the last offset must be the input's length %d, got %d", n, last)})
		}
		off, ends = off[:len(off)-1], off[1:]
	}
	l := &bagLayout{bags: len(off)}
	for i := range off {
		l.longest = max(l.longest, int(ends[i]-off[i]))
	}
	l.pos = make([]int64, l.bags*l.longest)
	l.in = make([]bool, l.bags*l.longest)
	for i := range off {
		for j := off[i]; j < ends[i]; j++ {
			k := i*l.longest + int(j-off[i])
			l.pos[k], l.in[k] = j, true
		}
	}
	return l
}

// reduce returns the [B, dim] reduction in mode of the bags of input:
// its rows when bags is nil, else the grid bags.
func (e *EmbeddingBag) reduce(mode string, input, psw *vram.Tensor, bags *bagLayout) *vram.Tensor {
	w := e.Weight
	var n, longest int
	if bags != nil {
		n, longest = bags.bags, bags.longest
	} else {
		n, longest = input.Size(0), input.Size(1)
	}
	if longest == 0 {
		// Every bag is empty: zeros, that Weight's gradient reaches as
		// the sum of no rows.
		none := vram.Zeros(vram.Shape{n, 0}, vram.Int64, input.Device())
		defer none.Release()
		wm, _, done := e.maskedParams(w, nil)
		defer done()
		rows := vram.Embedding(none, wm)
		defer rows.Release()
		return rows.Sum(1)
	}
	// idx [B, L] are the indices of the grid, valid marks the slots that
	// count, and scale [B, L] (or nil) their per-sample weights.
	var idx, valid, scale *vram.Tensor
	vram.NoGrad(func() {
		if bags == nil {
			idx = input.Long()
		} else {
			pos := vram.FromSlice(bags.pos, vram.Shape{bags.bags * bags.longest}, input.Device())
			defer pos.Release()
			flat := input.Long()
			defer flat.Release()
			sel := flat.IndexSelect(0, pos)
			defer sel.Release()
			idx = sel.Reshape(bags.bags, bags.longest)
		}
		switch {
		case bags != nil:
			valid = vram.FromSlice(bags.in, vram.Shape{bags.bags, bags.longest}, input.Device())
		default:
			valid = vram.Ones(idx.Shape(), vram.Bool, input.Device())
		}
		if e.PaddingIdx != nil {
			pad := idx.EqScalar(float64(*e.PaddingIdx))
			defer pad.Release()
			keep := pad.LogicalNot()
			defer keep.Release()
			v := valid.LogicalAnd(keep)
			valid.Release()
			valid = v
		}
	})
	defer idx.Release()
	defer valid.Release()
	switch {
	case psw != nil && bags == nil:
		scale = psw
	case psw != nil:
		pos := vram.FromSlice(bags.pos, vram.Shape{bags.bags * bags.longest}, input.Device())
		defer pos.Release()
		sel := psw.IndexSelect(0, pos)
		defer sel.Release()
		scale = sel.Reshape(bags.bags, bags.longest)
		defer scale.Release()
	}
	var out *vram.Tensor
	vram.Tidy(func() {
		wm, _, done := e.maskedParams(w, nil)
		defer done()
		rows := vram.Embedding(idx, wm) // [B, L, dim]
		if e.ScaleGradByFreq && rows.RequiresGrad() {
			rows = scaleGradByFreq(input, idx, rows, w.Size(0))
		}
		if scale != nil {
			rows = rows.Mul(scale.Unsqueeze(-1))
		}
		skip := valid.LogicalNot().Unsqueeze(-1)
		count := valid.Sum(1).Cast(w.DType()).Unsqueeze(-1) // [B, 1]
		switch mode {
		case "sum":
			out = rows.MaskedFill(skip, 0).Sum(1)
		case "mean":
			out = rows.MaskedFill(skip, 0).Sum(1).Div(count.ClampMin(1))
		case "max":
			out = rows.MaskedFill(skip, math.Inf(-1)).Max(1).MaskedFill(count.EqScalar(0), 0)
		}
		vram.Keep(out)
	})
	return out
}
