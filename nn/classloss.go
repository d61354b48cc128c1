package nn

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/vramgo/vram"
)

// CrossEntropyOptions are the settings of [CrossEntropyLossWith]. The zero
// value is PyTorch's default: no class weights, targets of -100 ignored,
// no label smoothing, the mean.
type CrossEntropyOptions struct {
	// Weight, if not nil, is a rescaling weight for each class, [C]
	// (weight): a target of class c counts Weight[c] times, in the loss
	// and in the mean's denominator.
	Weight *vram.Tensor
	// IgnoreIndex, if not nil, is the class target left out of the loss,
	// its gradient and the mean's denominator; nil means
	// vram.CrossEntropyIgnoreIndex, -100, as in PyTorch. Targets given as
	// probabilities take no ignored class: it must then be negative.
	IgnoreIndex *int
	// LabelSmoothing, in [0, 1], mixes the target distribution with the
	// uniform one over the C classes (label_smoothing): a class target
	// then counts 1 − ε + ε/C for its class and ε/C for each other.
	LabelSmoothing float64
	// Reduction combines the losses of the targets.
	Reduction Reduction
}

// NLLLossOptions are the settings of [NLLLossWith]. The zero value is
// PyTorch's default: no class weights, targets of -100 ignored, the mean.
type NLLLossOptions struct {
	// Weight, if not nil, is a rescaling weight for each class, [C], as
	// in [CrossEntropyOptions].
	Weight *vram.Tensor
	// IgnoreIndex, if not nil, is the class target left out; nil means
	// -100, as in PyTorch.
	IgnoreIndex *int
	// Reduction combines the losses of the targets.
	Reduction Reduction
}

// ignoreIndex returns the class target left out: *p, or -100 for nil.
func ignoreIndex(p *int) int {
	if p == nil {
		return vram.CrossEntropyIgnoreIndex
	}
	return *p
}

// CrossEntropyLossWith returns the cross entropy between logits and
// targets with the settings o (torch.nn.functional.cross_entropy with
// weight, ignore_index, reduction and label_smoothing). The class
// dimension of logits is 1, or 0 for unbatched logits [C]; targets are
// either
//
//   - int64 or int32 class indices of logits' shape without the class
//     dimension ([N] for logits [N, C], [N, d1, ...] for [N, C, d1, ...],
//     a scalar for [C]): target t of class y has the loss
//     −w[y]·((1 − ε)·log p[y] + ε/C·Σc log p[c]·w[c]/w[y]), 0 for an
//     ignored one, and the mean divides the sum by the total weight w[y]
//     of the targets not ignored (NaN when there are none, with zero
//     gradients), as PyTorch's does; or
//   - floating-point class probabilities of logits' shape: the loss of
//     each row is −Σc w[c]·q[c]·log p[c] with q = (1 − ε)·target + ε/C,
//     and the mean divides the sum by the number of rows, weights or not.
//
// p is the softmax of logits over the classes, w the weights (ones when
// nil) and ε the label smoothing. ReductionNone gives the targets' shape
// (logits' without the class dimension for probabilities). 16-bit logits
// are computed in float32 and the result rounded once to their dtype
// (float32 inside an Autocast region, as PyTorch's autocast runs
// cross_entropy).
//
// As in PyTorch, targets of logits' shape are probabilities and others
// class indices. It panics with an *vram.Error of kind vram.ErrShape for
// mismatched shapes or a weight that is not [C], of kind vram.ErrIndex
// for a class index outside [0, C) that is not ignored, of kind
// vram.ErrDType for logits that are not floating point, probabilities
// that are not floating point or class indices that are not int64 or
// int32, and of kind vram.ErrArgument for a label smoothing outside
// [0, 1], an unknown reduction, or an IgnoreIndex that is not negative
// with probabilities.
func CrossEntropyLossWith(logits, targets *vram.Tensor, o CrossEntropyOptions) *vram.Tensor {
	const op = "cross_entropy"
	defer asOp(op)
	notNil(op, logits)
	notNil(op, targets)
	o.Reduction.check(op)
	eps := o.LabelSmoothing
	if !(eps >= 0 && eps <= 1) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("label smoothing must be in [0, 1], got %v", eps)})
	}
	if classProbabilities(op, logits, targets) {
		return softCrossEntropy(op, logits, targets, o)
	}
	if o == (CrossEntropyOptions{}) && logits.Dim() == 2 {
		return vram.CrossEntropy(logits, targets)
	}
	dt := lossDType(op, logits, o.Weight)
	var ts temps
	defer ts.release()
	rows, idx, shape := classRows(op, &ts, logits, targets, o.Weight)
	lsm := ts.add(ts.operand(rows).LogSoftmax(1))
	return inDType(classLoss(&ts, lsm, idx, shape, ts.weight(o.Weight), ignoreIndex(o.IgnoreIndex), eps, o.Reduction), dt)
}

// NLLLossWith returns the negative log-likelihood of class index targets
// under log-probabilities logProbs with the settings o
// (torch.nn.functional.nll_loss with weight, ignore_index and reduction):
// the loss of target y is −w[y]·logProbs[y] (0 for an ignored target),
// and the mean divides the sum by the total weight of the targets not
// ignored. Shapes, dtypes and panics are those of class indices in
// [CrossEntropyLossWith].
func NLLLossWith(logProbs, targets *vram.Tensor, o NLLLossOptions) *vram.Tensor {
	const op = "nll_loss"
	defer asOp(op)
	notNil(op, logProbs)
	notNil(op, targets)
	o.Reduction.check(op)
	// The log-probabilities themselves must be floating point, whatever
	// the weights: gathered from integers they would be truncated.
	lossDType(op, logProbs)
	dt := floatDType(logProbs, o.Weight)
	if o == (NLLLossOptions{}) && logProbs.Dim() == 2 {
		return vram.NLLLoss(logProbs, targets)
	}
	var ts temps
	defer ts.release()
	rows, idx, shape := classRows(op, &ts, logProbs, targets, o.Weight)
	return inDType(classLoss(&ts, ts.operand(rows), idx, shape, ts.weight(o.Weight), ignoreIndex(o.IgnoreIndex), 0, o.Reduction), dt)
}

// inDType returns x in the dtype of a loss of operands of dtype dt: dt,
// or float32 for a 16-bit dt inside an Autocast region. x is released
// when it is converted.
func inDType(x *vram.Tensor, dt vram.DType) *vram.Tensor {
	if dt = autocastFloat32(dt); x.DType() == dt {
		return x
	}
	defer x.Release()
	return x.Cast(dt)
}

// classProbabilities returns whether targets are class probabilities
// rather than class indices of scores, deciding as PyTorch does: targets
// of scores' shape are probabilities, and others indices. It panics with
// an *vram.Error of kind vram.ErrDType when the targets' dtype is not the
// one of their form: probabilities that are not floating point, or
// floating-point targets of the shape of class indices, which would
// otherwise be refused for their shape.
func classProbabilities(op string, scores, targets *vram.Tensor) bool {
	ss, ts := scores.Shape(), targets.Shape()
	float := targets.DType().IsFloat()
	if slices.Equal(ss, ts) && len(ss) > 0 {
		if !float {
			panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("targets of the input's shape %v are class probabilities and must be floating point, got %s", ss, targets.DType())})
		}
		return true
	}
	if float && len(ss) > 0 && slices.Equal(ts, indexShape(ss)) {
		panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("targets %v are class indices and must be int64 or int32, got %s (class probabilities have the input's shape %v)", ts, targets.DType(), ss)})
	}
	return float
}

// indexShape returns the shape of the class index targets of scores of
// shape ss, which has at least one dimension: ss without its class
// dimension, 1 (or 0 for one sample [C]).
func indexShape(ss vram.Shape) vram.Shape {
	return slices.Delete(slices.Clone(ss), min(1, len(ss)-1), min(2, len(ss)))
}

// weight returns the class weights w widened as operand does, or nil.
func (ts *temps) weight(w *vram.Tensor) *vram.Tensor {
	if w == nil {
		return nil
	}
	return ts.operand(w)
}

// classRows checks the scores and class index targets of a class loss
// and returns the scores as rows [M, C] with the classes last, the
// targets as int64 [M], and the targets' shape. Its tensors are recorded
// in ts.
func classRows(op string, ts *temps, scores, targets, weight *vram.Tensor) (rows, idx *vram.Tensor, shape vram.Shape) {
	if dt := targets.DType(); dt != vram.Int64 && dt != vram.Int32 {
		panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("class targets must be int64 or int32, got %s", dt)})
	}
	ss, shape := scores.Shape(), targets.Shape()
	if len(ss) == 0 || !slices.Equal(shape, indexShape(ss)) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects input [N, C, d1, ...] with targets [N, d1, ...] (or [C] with a scalar target), got %v and %v", ss, shape)})
	}
	cd := min(1, len(ss)-1) // the class dimension
	c := ss[cd]
	if weight != nil && (weight.Dim() != 1 || weight.Size(0) != c) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("weight must be [C] = [%d], got %v", c, weight.Shape())})
	}
	rows = scores
	if len(ss) > 2 {
		perm := []int{0}
		for i := 2; i < len(ss); i++ {
			perm = append(perm, i)
		}
		rows = ts.add(scores.Permute(append(perm, 1)...))
	}
	m := targets.NumElements()
	rows = ts.add(rows.Reshape(m, c))
	idx = ts.add(ts.add(targets.Reshape(m)).Cast(vram.Int64))
	return rows, idx, shape
}

// classLoss returns the loss of class index targets idx [M] under the
// log-probabilities lsm [M, C], with class weights w (nil for none),
// targets equal to ignore left out, label smoothing eps and reduction r;
// ReductionNone gives shape.
func classLoss(ts *temps, lsm, idx *vram.Tensor, shape vram.Shape, w *vram.Tensor, ignore int, eps float64, r Reduction) *vram.Tensor {
	defer targetBounds(lsm.Size(1), &ignore)
	ignored := ts.add(idx.EqScalar(float64(ignore)))
	// The rows of ignored targets are replaced by zeros rather than
	// weighed by 0: they may hold −Inf (a class masked out), and 0·−Inf
	// is NaN, in the loss and in the weights' gradient. The zeros are
	// negative, so that the loss, their negation, is +0 as PyTorch's.
	lsm = ts.add(vram.Where(ts.add(ignored.Unsqueeze(1)), ts.add(lsm.NewFull(nil, math.Copysign(0, -1))), lsm))
	zero := ts.add(idx.NewZeros(nil))
	safe := ts.add(vram.Where(ignored, zero, idx)) // ignored targets pick class 0, weighed 0
	kept := ts.add(ts.add(ignored.LogicalNot()).Cast(lsm.DType()))
	wy := kept
	if w != nil {
		wy = ts.add(ts.add(w.Gather(0, safe)).Mul(kept))
	}
	picked := ts.add(ts.add(lsm.Gather(1, ts.add(safe.Unsqueeze(1)))).Squeeze(1))
	l := ts.add(ts.add(picked.Mul(wy)).Neg())
	if eps > 0 {
		// PyTorch's smoothing term: −Σc w[c]·log p[c] for each target not
		// ignored, weighed ε/C against the likelihood's 1 − ε.
		wl := lsm
		if w != nil {
			wl = ts.add(lsm.Mul(w))
		}
		s := ts.add(ts.add(wl.Sum(1)).Mul(kept))
		c := float64(lsm.Size(1))
		l = ts.add(ts.add(l.MulScalar(1 - eps)).Sub(ts.add(s.MulScalar(eps / c))))
	}
	switch r {
	case ReductionNone:
		return l.Reshape(shape...)
	case ReductionSum:
		return l.Sum()
	}
	// The sum over the total weight, NaN when every target is ignored
	// (0/0, PyTorch's value) with a gradient of zeros there, as PyTorch
	// gives: the division is by 1 then, and NaN is added as a constant.
	cnt := ts.add(kept.Sum())
	none := ts.add(cnt.EqScalar(0))
	den := ts.add(vram.Where(none, ts.add(cnt.NewOnes(nil)), ts.add(wy.Sum())))
	nan := ts.add(cnt.RDivScalar(0)) // 0/0 = NaN, or 0
	return ts.add(ts.add(l.Sum()).Div(den)).Add(nan)
}

// targetBounds, deferred by a loss of class targets among c classes,
// gives a panic of kind vram.ErrIndex in flight, which only a gather of
// a target outside [0, c) raises, a detail that says so and which
// classes there are (and the ignored target, when ignore is not nil),
// rather than the bad index of a gather; the gather's error stays
// wrapped. Other panics go on unchanged.
func targetBounds(c int, ignore *int) {
	r := recover()
	if r == nil {
		return
	}
	if e, ok := r.(*vram.Error); ok && e.Kind == vram.ErrIndex {
		d := *e
		d.Detail = fmt.Sprintf("target out of bounds: the targets are classes 0 to %d", c-1)
		if ignore != nil {
			d.Detail += fmt.Sprintf(", or %d for a target left out", *ignore)
		}
		r = &d
	}
	panic(r)
}

// softCrossEntropy is CrossEntropyLossWith of class probabilities.
func softCrossEntropy(op string, logits, targets *vram.Tensor, o CrossEntropyOptions) *vram.Tensor {
	ss := logits.Shape()
	if len(ss) == 0 || !slices.Equal(ss, targets.Shape()) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("class probabilities %v must have the input's shape %v", targets.Shape(), ss)})
	}
	if ig := ignoreIndex(o.IgnoreIndex); ig >= 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("ignore index %d is not supported with class probabilities", ig)})
	}
	cd := min(1, len(ss)-1)
	c := ss[cd]
	if o.Weight != nil && (o.Weight.Dim() != 1 || o.Weight.Size(0) != c) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("weight must be [C] = [%d], got %v", c, o.Weight.Shape())})
	}
	dt := lossDType(op, logits, targets, o.Weight)
	var ts temps
	defer ts.release()
	lsm := ts.add(ts.operand(logits).LogSoftmax(cd))
	q := ts.operand(targets)
	if eps := o.LabelSmoothing; eps > 0 {
		q = ts.add(ts.add(q.MulScalar(1 - eps)).AddScalar(eps / float64(c)))
	}
	p := ts.add(lsm.Mul(q))
	if o.Weight != nil {
		ws := make([]int, len(ss))
		for i := range ws {
			ws[i] = 1
		}
		ws[cd] = c
		p = ts.add(p.Mul(ts.add(ts.operand(o.Weight).Reshape(ws...))))
	}
	switch o.Reduction {
	case ReductionNone:
		return inDType(ts.add(p.Sum(cd)).Neg(), dt)
	case ReductionSum:
		return inDType(ts.add(p.Sum()).Neg(), dt)
	}
	n := 0 // the number of rows
	if c > 0 {
		n = logits.NumElements() / c
	}
	return inDType(ts.add(ts.add(p.Sum()).Neg()).DivScalar(float64(n)), dt)
}

// asOp is deferred by a loss or an activation built from other
// operations: a vram error raised inside it then names the loss rather
// than the operation it delegated to, in its Op and wherever its Detail
// names that operation as a word ("hardtanh needs a floating-point
// tensor" becomes "hardsigmoid needs ..."). Other panics pass through
// unchanged.
func asOp(op string) {
	r := recover()
	if r == nil {
		return
	}
	switch e := r.(type) {
	case *vram.Error:
		if e.Op != op {
			c := *e
			c.Op = op
			c.Detail = renameWord(e.Detail, e.Op, op)
			r = &c
		}
	case *vram.DeviceMismatchError:
		if e.Op != op {
			c := *e
			c.Op = op
			r = &c
		}
	}
	panic(r)
}

// renameWord returns s with every occurrence of the word from, one not
// part of a longer name of letters, digits and underscores, replaced by
// to.
func renameWord(s, from, to string) string {
	if from == "" {
		return s
	}
	word := func(c byte) bool {
		return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	var b strings.Builder
	for {
		i := strings.Index(s, from)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := i + len(from)
		if (i > 0 && word(s[i-1])) || (j < len(s) && word(s[j])) {
			b.WriteString(s[:j])
		} else {
			b.WriteString(s[:i])
			b.WriteString(to)
		}
		s = s[j:]
	}
}
