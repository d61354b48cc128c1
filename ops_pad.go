package vram

import (
	"fmt"
	"slices"
)

// PadMode says how [Pad] fills the entries it adds (the mode argument of
// torch.nn.functional.pad). The zero value is [PadConstant].
type PadMode int

// The padding modes.
const (
	// PadConstant fills with a value; any number of dimensions.
	PadConstant PadMode = iota
	// PadReflect mirrors the input at its edges, the edge entry itself
	// not repeated: [a b c] padded by 2 on the left gives [c b a b c].
	PadReflect
	// PadReplicate repeats the edge entry: [a b c] gives [a a a b c].
	PadReplicate
	// PadCircular wraps around: [a b c] gives [b c a b c].
	PadCircular
)

// String returns PyTorch's name of the mode: "constant", "reflect",
// "replicate" or "circular".
func (m PadMode) String() string {
	switch m {
	case PadConstant:
		return "constant"
	case PadReflect:
		return "reflect"
	case PadReplicate:
		return "replicate"
	case PadCircular:
		return "circular"
	}
	return fmt.Sprintf("PadMode(%d)", int(m))
}

// Pad returns t padded as torch.nn.functional.pad pads it. pads holds
// pairs (before, after) starting with the last dimension: {1, 2} pads the
// last dimension with one entry before and two after, {1, 2, 3, 4} also
// the second to last with three before and four after. A negative size
// removes entries instead. The result is new storage (channels-last when t
// is) and gradients flow
// back to t's entries (added up where an entry was copied several times).
//
// [PadConstant] fills with value and pads any number of dimensions of a
// tensor of any dtype. The other modes take value 0 and pad the last 1, 2
// or 3 dimensions of a tensor with one or two more dimensions than that
// (a 2-D or 3-D tensor for 1 pair, 3-D or 4-D for 2 pairs, 4-D or 5-D for
// 3 pairs), as PyTorch does; [PadReflect] needs each size smaller than
// the dimension it pads, [PadCircular] no larger than what is left of it
// after the negative sizes crop it, which it wraps around, as PyTorch's
// does: {-1, 2} pads [1, 2, 3] to [2, 3, 2, 3].
//
// It panics with [ErrArgument] for an odd number of sizes, more pairs than
// t has dimensions, a bad mode or a value with a mode other than
// constant, with [ErrShape] for a tensor of the wrong rank for its mode
// or sizes the mode cannot take, that leave a dimension with a negative
// size (or, except for constant padding, an empty one) or with more than
// 2^29 entries, or that give more entries in all than an int counts, which
// it finds before padding anything. A result with no entries is made
// without the position tables of the padding, however long its other
// sides.
func Pad(t *Tensor, pads []int, mode PadMode, value float64) *Tensor {
	const op = "pad"
	notNil(op, t)
	defer pin(op, t).unpin()
	nd := len(t.shape)
	switch {
	case len(pads)%2 != 0:
		fail(op, ErrArgument, "padding length must be divisible by 2, got %d sizes %v", len(pads), pads)
	case len(pads) > 2*nd:
		fail(op, ErrArgument, "padding length should be at most twice the input's dimensions, got %d sizes for an input of shape %v",
			len(pads), Shape(t.shape))
	case mode < PadConstant || mode > PadCircular:
		fail(op, ErrArgument, "unknown padding mode %v", mode)
	case mode != PadConstant && value != 0:
		fail(op, ErrArgument, "padding mode %q doesn't take a value, got %v", mode, value)
	}
	k := len(pads) / 2
	shape := slices.Clone(t.shape)
	if mode != PadConstant {
		if k < 1 || k > 3 || nd != k+1 && nd != k+2 {
			fail(op, ErrShape, "%s padding of %d dimensions needs a %dD or %dD input, got shape %v "+
				"(only the last 1, 2 or 3 dimensions of a 2D to 5D input pad in this mode)", mode, k, k+1, k+2, Shape(t.shape))
		}
	}
	// Check every dimension first, so that nothing is computed for bad
	// sizes.
	for j := range k {
		a := nd - 1 - j
		n, lo, hi := t.shape[a], pads[2*j], pads[2*j+1]
		f := float64(n) + float64(lo) + float64(hi)
		if f > maxIndexEntries {
			fail(op, ErrShape, "padding (%d, %d) at dimension %d of input %v gives %.0f entries, more than the %d the host index of the padding allows",
				lo, hi, a, Shape(t.shape), f, maxIndexEntries)
		}
		// In an int, sizes far below zero can wrap around to a small
		// positive sum (2·MinInt is 0); the float sum tells them.
		out := n + lo + hi
		if f < 0 {
			out = -1 // refused below
		}
		shape[a] = out
		switch mode {
		case PadConstant:
			if out < 0 {
				fail(op, ErrShape, "the input size %d, plus negative padding %d and %d, gives a negative output size %.0f at dimension %d of input %v",
					n, lo, hi, f, a, Shape(t.shape))
			}
		case PadReflect:
			if lo >= n || hi >= n {
				fail(op, ErrShape, "padding size should be less than the corresponding input dimension, but got padding (%d, %d) at dimension %d of input %v",
					lo, hi, a, Shape(t.shape))
			}
		case PadCircular:
			// PyTorch crops first and wraps what is left: a pad larger
			// than that would wrap around more than once (or, for one
			// within the uncropped size, copy between overlapping ranges,
			// which PyTorch refuses).
			if kept := n - max(-lo, 0) - max(-hi, 0); lo > kept || hi > kept {
				fail(op, ErrShape, "padding (%d, %d) at dimension %d of input %v would wrap around more than once (the %d entries left after cropping)",
					lo, hi, a, Shape(t.shape), kept)
			}
		}
		if mode != PadConstant && out < 1 {
			fail(op, ErrShape, "padding (%d, %d) at dimension %d of input %v gives an output of size %.0f; it must be at least 1",
				lo, hi, a, Shape(t.shape), f)
		}
		if mode == PadReplicate && n == 0 {
			fail(op, ErrShape, "replicate padding needs a non-empty dimension %d, got input %v", a, Shape(t.shape))
		}
	}
	// Refused before any dimension is padded: each within its bound, the
	// dimensions together may hold more entries than an int counts.
	if n, _ := checkShape(op, shape, t.dtype); n == 0 {
		return composed(op, func() *Tensor { return emptyResult(t, shape) })
	}
	return composed(op, func() *Tensor {
		out := t
		for j := range k {
			a := nd - 1 - j
			lo, hi := pads[2*j], pads[2*j+1]
			if lo == 0 && hi == 0 {
				continue
			}
			out = padAxis(out, a, lo, hi, mode, value)
		}
		if out == t {
			return t.Clone()
		}
		return keepFormat(t, out)
	})
}

// padAxis pads axis a of t by lo entries before and hi after (negative
// sizes crop) in mode, taking every entry from t, or from a slot of value
// appended to t for constant padding, with one IndexSelect.
func padAxis(t *Tensor, a, lo, hi int, mode PadMode, value float64) *Tensor {
	n := t.shape[a]
	src := t
	if mode == PadConstant {
		shape := slices.Clone(t.shape)
		shape[a] = 1
		src = Cat([]*Tensor{t, Full(shape, value, t.dtype, t.Device())}, a)
	}
	pos := make([]int64, n+lo+hi)
	for i := range pos {
		p := i - lo // the position in t, outside [0, n) where it pads
		switch {
		case p >= 0 && p < n:
		case mode == PadConstant:
			p = n
		case mode == PadReflect:
			if p < 0 {
				p = -p
			} else {
				p = 2*(n-1) - p
			}
		case mode == PadReplicate:
			p = min(max(p, 0), n-1)
		case mode == PadCircular:
			// Wrapped within the entries that negative sizes leave, as
			// PyTorch crops before it wraps: {-1, 2} turns [1, 2, 3]
			// into [2, 3, 2, 3].
			cl := max(-lo, 0)
			kept := n - cl - max(-hi, 0)
			p = ((p-cl)%kept+kept)%kept + cl
		}
		pos[i] = int64(p)
	}
	return src.selectPositions(a, pos)
}
