package vram

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Einsum evaluates the Einstein summation eq over operands (torch.einsum).
// eq names each operand's dimensions with letters (a-z, A-Z), operands
// separated by commas, as in "ij,jk->ik". A letter repeated within one
// operand takes that operand's diagonal; a letter missing from the output
// is summed over. Without "->" the output holds the letters that appear
// exactly once, in alphabetical order (upper case first). "..." stands for
// any number of leading, middle or trailing dimensions, which broadcast
// across operands and come first in an implicit output. Dimensions of size
// 1 broadcast against the same letter's size in another operand.
//
// Einsum is composed of diagonals, sums, permutations and batched matrix
// products, contracting the operands left to right, so it runs on every
// device and passes gradients back to every operand. The operands must
// share one dtype, except inside an [Autocast] region, where float32,
// float16 and bfloat16 operands are taken in the region's dtype, as
// PyTorch's contractions are; integer operands are multiplied elementwise
// and summed. As in PyTorch, a sum over one operand alone, such as
// "ij->j", gives int64 for integer and bool operands, while a product of
// two keeps their integer dtype ("ij,jk->ik" of int32 is int32, wrapping
// on overflow as the dtype does), and bool stays bool where nothing is
// summed ("i,j->ij") and counts in int64 where something is.
// It panics with [ErrArgument] for a malformed equation or a wrong number
// of operands (the message names the problem), [ErrShape] when an
// operand's dimensions do not match its letters or sizes of a letter
// differ, and [ErrDType] for mixed dtypes.
func Einsum(eq string, operands ...*Tensor) *Tensor {
	const op = "einsum"
	defer asOp(op)
	if len(operands) == 0 {
		fail(op, ErrArgument, "needs at least one operand")
	}
	_, held := sameDevice(op, operands...)
	defer held.unpin()
	if mixedAutocastFloats(operands) {
		// PyTorch's einsum contracts through bmm, which autocast runs in
		// the region's dtype whatever float32, float16 or bfloat16 mix
		// it is given.
		low, done := autocastLow(op, operands...)
		defer done()
		operands = low
	}
	for _, t := range operands[1:] {
		if t.dtype != operands[0].dtype {
			fail(op, ErrDType, "operands must share one dtype, got %s and %s; Cast one of them", operands[0].dtype, t.dtype)
		}
	}
	spec := parseEinsum(op, eq, operands)
	return spec.run(op, operands)
}

// mixedAutocastFloats reports whether an Autocast region is active and ts
// mix float32, float16 and bfloat16, and nothing else.
func mixedAutocastFloats(ts []*Tensor) bool {
	if _, on := AutocastDType(); !on {
		return false
	}
	for _, t := range ts {
		if t.dtype != Float32 && t.dtype != Float16 && t.dtype != BFloat16 {
			return false
		}
	}
	return slices.ContainsFunc(ts, func(t *Tensor) bool { return t.dtype != ts[0].dtype })
}

// einsumSpec is a parsed equation. Labels are ints: a letter's byte value,
// and for the dimensions that "..." covers, -1, -2, ... from the last one.
type einsumSpec struct {
	inputs [][]int
	output []int
}

// isEinsumLetter reports whether c may name a dimension.
func isEinsumLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// parseTerm parses one operand's or the output's letters; ellipsis reports
// whether it held "...", at position at among the letters.
func parseTerm(op, term, what string) (letters []int, ellipsis bool, at int) {
	for i := 0; i < len(term); i++ {
		c := term[i]
		switch {
		case c == ' ':
		case c == '.':
			if !strings.HasPrefix(term[i:], "...") {
				fail(op, ErrArgument, "%s %q: a '.' that is not part of \"...\"", what, term)
			}
			if ellipsis {
				fail(op, ErrArgument, "%s %q: \"...\" appears more than once", what, term)
			}
			ellipsis, at = true, len(letters)
			i += 2
		case isEinsumLetter(c):
			letters = append(letters, int(c))
		default:
			// The character, not its first byte: "é" is reported as 'é', not 'Ã'.
			if r, size := utf8.DecodeRuneInString(term[i:]); r != utf8.RuneError || size > 1 {
				fail(op, ErrArgument, "%s %q: invalid character %q (subscripts are letters a-z and A-Z)", what, term, r)
			}
			fail(op, ErrArgument, "%s %q: invalid byte %#x, not UTF-8 (subscripts are letters a-z and A-Z)", what, term, c)
		}
	}
	return letters, ellipsis, at
}

// parseEinsum checks eq against the operands' ranks and resolves "...".
func parseEinsum(op, eq string, operands []*Tensor) einsumSpec {
	lhs, rhs, explicit := strings.Cut(eq, "->")
	if strings.Contains(rhs, "->") {
		fail(op, ErrArgument, "equation %q has more than one \"->\"", eq)
	}
	if strings.ContainsAny(rhs, ",") {
		fail(op, ErrArgument, "equation %q: the output after \"->\" cannot hold a ','", eq)
	}
	terms := strings.Split(lhs, ",")
	if len(terms) != len(operands) {
		fail(op, ErrArgument, "equation %q names %d operand(s), got %d tensor(s)", eq, len(terms), len(operands))
	}
	var spec einsumSpec
	nell := 0 // dimensions "..." covers, the most over the operands
	for k, term := range terms {
		what := fmt.Sprintf("operand %d", k)
		letters, ell, at := parseTerm(op, term, what)
		rank := len(operands[k].shape)
		if !ell && len(letters) != rank {
			fail(op, ErrShape, "%s subscripts %q name %d dimensions, but the tensor has %d (shape %v)",
				what, strings.TrimSpace(term), len(letters), rank, Shape(operands[k].shape))
		}
		if ell && len(letters) > rank {
			fail(op, ErrShape, "%s subscripts %q name at least %d dimensions, but the tensor has %d (shape %v)",
				what, strings.TrimSpace(term), len(letters), rank, Shape(operands[k].shape))
		}
		labels := letters
		if ell {
			n := rank - len(letters)
			nell = max(nell, n)
			mid := make([]int, n)
			for i := range mid {
				mid[i] = -(n - i) // the last covered dimension is -1
			}
			labels = slices.Concat(letters[:at], mid, letters[at:])
		}
		spec.inputs = append(spec.inputs, labels)
	}
	// The implicit output holds the letters that occur once in the
	// whole of the left-hand side.
	occ := map[int]int{}
	for _, in := range spec.inputs {
		for _, l := range in {
			if l > 0 {
				occ[l]++
			}
		}
	}
	ellDims := make([]int, nell)
	for i := range ellDims {
		ellDims[i] = -(nell - i)
	}
	if !explicit {
		spec.output = ellDims
		var once []int
		for l, c := range occ {
			if c == 1 {
				once = append(once, l)
			}
		}
		slices.Sort(once)
		spec.output = append(spec.output, once...)
		return spec
	}
	letters, ell, at := parseTerm(op, rhs, "output")
	seen := map[int]bool{}
	for _, l := range letters {
		if seen[l] {
			fail(op, ErrArgument, "output subscript %q appears more than once in %q", rune(l), eq)
		}
		seen[l] = true
		if occ[l] == 0 {
			fail(op, ErrArgument, "output subscript %q does not appear in any operand of %q", rune(l), eq)
		}
	}
	if !ell && nell > 0 {
		// PyTorch sums the dimensions "..." covers when the output omits it.
		spec.output = letters
		return spec
	}
	spec.output = slices.Concat(letters[:at], ellDims, letters[at:])
	return spec
}

// einsumTerm is an operand during the contraction: a tensor whose
// dimensions carry distinct labels.
type einsumTerm struct {
	t      *Tensor
	labels []int
}

func (spec einsumSpec) run(op string, operands []*Tensor) *Tensor {
	// The size of each label, checking that sizes agree (1 broadcasts).
	size := map[int]int{}
	for k, in := range spec.inputs {
		for i, l := range in {
			s := operands[k].shape[i]
			switch old, ok := size[l]; {
			case !ok || old == 1:
				size[l] = s
			case s != old && s != 1:
				fail(op, ErrShape, "subscript %s has size %d in operand %d but %d before", labelName(l), s, k, old)
			}
		}
	}
	var temps []*Tensor
	defer func() {
		for _, t := range temps {
			t.Release()
		}
	}()
	keep := func(t *Tensor) *Tensor { temps = append(temps, t); return t }

	terms := make([]einsumTerm, len(operands))
	for k, t := range operands {
		labels := slices.Clone(spec.inputs[k])
		// Take diagonals until every label appears once.
		for {
			i, j := repeatedLabel(labels)
			if i < 0 {
				break
			}
			if t.shape[i] != t.shape[j] {
				fail(op, ErrShape, "subscript %s repeats in operand %d over dimensions of sizes %d and %d",
					labelName(labels[i]), k, t.shape[i], t.shape[j])
			}
			t = keep(t.Diagonal(0, i, j))
			l := labels[i]
			labels = slices.Delete(labels, j, j+1)
			labels = slices.Delete(labels, i, i+1)
			labels = append(labels, l)
		}
		terms[k] = einsumTerm{t, labels}
	}
	out := spec.output
	// needed reports whether label l is used by the output or by a term
	// after the k-th.
	needed := func(l, k int) bool {
		if slices.Contains(out, l) {
			return true
		}
		for _, tm := range terms[k+1:] {
			if slices.Contains(tm.labels, l) {
				return true
			}
		}
		return false
	}
	// sumUnneeded sums out labels of term tm that no later term or the
	// output uses and the other term does not hold.
	sumUnneeded := func(tm einsumTerm, k int, other []int) einsumTerm {
		var axes []int
		var rest []int
		for i, l := range tm.labels {
			if !needed(l, k) && !slices.Contains(other, l) {
				axes = append(axes, i)
			} else {
				rest = append(rest, l)
			}
		}
		if len(axes) == 0 {
			return tm
		}
		return einsumTerm{keep(tm.t.Sum(axes...)), rest}
	}
	acc := sumUnneeded(terms[0], 0, nil)
	for k := 1; k < len(terms); k++ {
		b := sumUnneeded(terms[k], k, acc.labels)
		acc = sumUnneeded(acc, k, b.labels)
		acc = contractPair(op, acc, b, k, needed, size, keep)
	}
	// Sum what remains outside the output, then order as the output.
	acc = sumUnneeded(acc, len(terms)-1, nil)
	perm := make([]int, len(out))
	for i, l := range out {
		perm[i] = slices.Index(acc.labels, l)
	}
	r := acc.t
	shape := make([]int, len(out))
	for i, l := range out {
		shape[i] = size[l]
	}
	if len(perm) > 0 {
		r = keep(r.Permute(perm...))
	}
	if !slices.Equal(r.shape, shape) {
		r = keep(r.Expand(shape...))
	}
	return r.Contiguous()
}

// contractPair multiplies terms a and b (the k-th operand), summing the
// labels both hold that nothing later needs: their shared needed labels
// become batch dimensions of a batched matrix product.
func contractPair(op string, a, b einsumTerm, k int, needed func(l, k int) bool, size map[int]int,
	keep func(*Tensor) *Tensor) einsumTerm {
	var batch, sum, aOnly, bOnly []int
	for _, l := range a.labels {
		switch {
		case !slices.Contains(b.labels, l):
			aOnly = append(aOnly, l)
		case needed(l, k):
			batch = append(batch, l)
		default:
			sum = append(sum, l)
		}
	}
	for _, l := range b.labels {
		if !slices.Contains(a.labels, l) {
			bOnly = append(bOnly, l)
		}
	}
	arrange := func(tm einsumTerm, groups ...[]int) *Tensor {
		order := slices.Concat(groups...)
		perm := make([]int, len(order))
		shape := make([]int, len(order))
		for i, l := range order {
			perm[i] = slices.Index(tm.labels, l)
			shape[i] = size[l]
		}
		t := tm.t
		if len(perm) > 0 {
			t = keep(t.Permute(perm...))
		}
		if !slices.Equal(t.shape, shape) {
			t = keep(t.Expand(shape...))
		}
		return t
	}
	prod := func(ls []int) int {
		n := 1
		for _, l := range ls {
			n *= size[l]
		}
		return n
	}
	nb, m, kk, n := prod(batch), prod(aOnly), prod(sum), prod(bOnly)
	at := keep(arrange(a, batch, aOnly, sum).Reshape(nb, m, kk))
	bt := keep(arrange(b, batch, sum, bOnly).Reshape(nb, kk, n))
	var r *Tensor
	if at.dtype.IsFloat() {
		r = keep(at.MatMul(bt))
	} else {
		a4 := keep(at.Unsqueeze(3))
		b4 := keep(bt.Unsqueeze(1))
		p := keep(a4.Mul(b4))
		r = keep(p.Sum(2))
		// PyTorch multiplies a pair with mul, or with bmm where labels
		// are summed, and both keep the operands' integer dtype (bmm
		// wrapping as the dtype does); Sum counted in int64. Bool
		// operands stay bool where nothing is summed, as mul leaves
		// them, and are counted in int64 otherwise (there is no bool
		// bmm to follow).
		if r.dtype != p.dtype && (p.dtype != Bool || len(sum) == 0) {
			r = keep(r.Cast(p.dtype))
		}
	}
	labels := slices.Concat(batch, aOnly, bOnly)
	shape := make([]int, len(labels))
	for i, l := range labels {
		shape[i] = size[l]
	}
	return einsumTerm{keep(r.Reshape(shape...)), labels}
}

// repeatedLabel returns the positions of the first label that appears
// twice, or -1, -1.
func repeatedLabel(labels []int) (int, int) {
	for i, l := range labels {
		for j := i + 1; j < len(labels); j++ {
			if labels[j] == l {
				return i, j
			}
		}
	}
	return -1, -1
}

// labelName names a label for an error message.
func labelName(l int) string {
	if l < 0 {
		return fmt.Sprintf("\"...\" (dimension %d from its end)", -l)
	}
	return fmt.Sprintf("%q", rune(l))
}

// Meshgrid returns coordinate grids of the 0- or 1-D tensors ts
// (torch.meshgrid): result i holds ts[i]'s values along its own dimension,
// repeated along the others. With indexing "ij" (also "") the grids have
// shape (len(ts[0]), len(ts[1]), ...); with "xy" the first two dimensions
// swap, as in NumPy's Cartesian indexing. The results are broadcast views
// of the inputs and pass gradients back to them. It panics with
// [ErrArgument] for another indexing or no tensors, [ErrShape] for an
// input of more than one dimension, and [ErrDType] or [ErrDevice] when the
// inputs differ in dtype or device.
func Meshgrid(indexing string, ts ...*Tensor) []*Tensor {
	const op = "meshgrid"
	defer asOp(op)
	if len(ts) == 0 {
		fail(op, ErrArgument, "needs at least one tensor")
	}
	_, held := sameDevice(op, ts...)
	defer held.unpin()
	if indexing != "" && indexing != "ij" && indexing != "xy" {
		fail(op, ErrArgument, "indexing must be \"ij\" or \"xy\", got %q", indexing)
	}
	shape := make([]int, len(ts))
	for i, t := range ts {
		if len(t.shape) > 1 {
			fail(op, ErrShape, "tensor %d must be 0- or 1-D, got shape %v", i, Shape(t.shape))
		}
		if t.dtype != ts[0].dtype {
			fail(op, ErrDType, "tensors must share one dtype, got %s and %s", ts[0].dtype, t.dtype)
		}
		shape[i] = t.NumElements()
	}
	where := seq(len(ts)) // the output dimension of each input
	if indexing == "xy" && len(ts) > 1 {
		where[0], where[1] = 1, 0
		shape[0], shape[1] = shape[1], shape[0]
	}
	out := make([]*Tensor, len(ts))
	for i, t := range ts {
		view := make([]int, len(ts))
		for j := range view {
			view[j] = 1
		}
		view[where[i]] = t.NumElements()
		func() {
			r := t.Reshape(view...)
			defer r.Release()
			out[i] = r.Expand(shape...)
		}()
	}
	return out
}
