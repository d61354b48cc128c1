package prune

import (
	"cmp"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// Amount is how much to prune: a [Fraction] of what is still unpruned or
// a [Count] of elements (slices, for structured pruning). The zero value
// prunes nothing.
type Amount struct {
	frac    float64
	count   int
	isCount bool
}

// Fraction returns the amount f of the unpruned elements, f in [0, 1]
// (PyTorch's float amount); the number pruned is f times their number,
// rounded to nearest, ties to even, as PyTorch rounds.
func Fraction(f float64) Amount { return Amount{frac: f} }

// Count returns the amount of n elements, or n slices for structured
// pruning (PyTorch's int amount).
func Count(n int) Amount { return Amount{count: n, isCount: true} }

// String returns "fraction 0.3" or "count 12".
func (a Amount) String() string {
	if a.isCount {
		return fmt.Sprintf("count %d", a.count)
	}
	return fmt.Sprintf("fraction %v", a.frac)
}

// check reports a bad amount before any count is known.
func (a Amount) check() error {
	switch {
	case a.isCount && a.count < 0:
		return pruneErr(vram.ErrArgument, "amount %s is negative", a)
	case !a.isCount && !(a.frac >= 0 && a.frac <= 1):
		return pruneErr(vram.ErrArgument, "amount %s is not in [0, 1]", a)
	}
	return nil
}

// of returns the number of units to prune out of left unpruned ones;
// units names them in errors ("elements", "slices along dimension 0").
func (a Amount) of(left int, units string) (int, error) {
	if err := a.check(); err != nil {
		return 0, err
	}
	if a.isCount {
		if a.count > left {
			return 0, pruneErr(vram.ErrArgument, "amount %s exceeds the %d %s left unpruned", a, left, units)
		}
		return a.count, nil
	}
	return int(math.RoundToEven(a.frac * float64(left))), nil
}

// pruneErr returns the error of a bad call: an *vram.Error of the given
// kind (vram.ErrArgument, vram.ErrDType, vram.ErrIndex), so that
// errors.Is matches it.
func pruneErr(kind error, format string, args ...any) error {
	return &vram.Error{Op: "prune", Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// Target names one parameter of a layer, for [GlobalUnstructured].
type Target struct {
	Module nn.Module
	Name   string // the layer's own parameter name: "weight", "bias"
	// Importance, when not nil, holds the scores that rank the
	// parameter's elements in place of their absolute values (PyTorch's
	// importance_scores): a floating-point tensor of the parameter's
	// shape, on any device; the elements of smallest score are pruned.
	Importance *vram.Tensor
}

// Params returns a Target for the parameter name of each [nn.Maskable]
// layer of m and its sub-modules that has one (m included), in the order
// of [nn.Modules].
func Params(m nn.Module, name string) []Target {
	var out []Target
	for _, sub := range nn.Modules(m) {
		mk, ok := sub.(nn.Maskable)
		if !ok {
			continue
		}
		if _, ok := mk.ParameterMask(name); ok && param(sub, name) != nil {
			out = append(out, Target{Module: sub, Name: name})
		}
	}
	return out
}

// state is a parameter being pruned: the tensor, its values, its current
// mask (all ones when there is none) and the layer.
type state struct {
	t      Target
	mk     nn.Maskable
	p      *vram.Tensor
	values []float64
	mask   []float64
}

// param returns m's own parameter name, or nil.
func param(m nn.Module, name string) *vram.Tensor {
	for _, p := range m.NamedParameters() {
		if p.Name == name {
			return p.Tensor
		}
	}
	return nil
}

// ownBuffer returns m's own buffer name, or nil.
func ownBuffer(m nn.Module, name string) *vram.Tensor {
	for _, b := range nn.NamedBuffers(m) {
		if b.Name == name {
			return b.Tensor
		}
	}
	return nil
}

// isNil reports whether m is nil or holds a nil pointer (a "var l
// *nn.Linear" left unset), which this package refuses alike.
func isNil(m nn.Module) bool {
	if m == nil {
		return true
	}
	v := reflect.ValueOf(m)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// load checks t and reads its parameter and mask.
func load(t Target) (*state, error) {
	if isNil(t.Module) {
		return nil, pruneErr(vram.ErrArgument, "nil module")
	}
	mk, ok := t.Module.(nn.Maskable)
	if !ok {
		return nil, pruneErr(vram.ErrArgument, "%T cannot be pruned: its Forward applies no masks (it does not implement nn.Maskable)", t.Module)
	}
	mask, ok := mk.ParameterMask(t.Name)
	p := param(t.Module, t.Name)
	if b := ownBuffer(t.Module, t.Name); p == nil && b != nil && !b.DType().IsFloat() {
		// A quantized layer's int8 weight is a buffer, not a parameter.
		return nil, pruneErr(vram.ErrDType, "%q of %T is a %s buffer (a quantized weight); prune floating-point parameters (before quantizing)", t.Name, t.Module, b.DType())
	}
	if !ok || p == nil || strings.HasSuffix(t.Name, "_mask") {
		return nil, pruneErr(vram.ErrArgument, "%T has no parameter %q that it can mask", t.Module, t.Name)
	}
	if p.Released() || mask != nil && mask.Released() {
		return nil, pruneErr(vram.ErrReleased, "parameter %q of %T or its mask was released", t.Name, t.Module)
	}
	if !p.DType().IsFloat() {
		return nil, pruneErr(vram.ErrDType, "parameter %q has dtype %s; prune floating-point parameters (before quantizing)", t.Name, p.DType())
	}
	s := &state{t: t, mk: mk, p: p, values: p.Float64s()}
	if mask != nil {
		s.mask = mask.Float64s()
	} else {
		s.mask = make([]float64, len(s.values))
		for i := range s.mask {
			s.mask[i] = 1
		}
	}
	return s, nil
}

// commit sets s's mask on its layer.
func (s *state) commit() error {
	var m *vram.Tensor
	err := vram.Catch(func() {
		vram.Region(nn.ParametersRegion, func() {
			m = vram.Keep(vram.FromSlice(s.mask, s.p.Shape(), s.p.Device(), s.p.DType()))
		})
	})
	if err != nil {
		return fmt.Errorf("prune: %s: %w", s.t.Name, err)
	}
	if err := s.mk.SetParameterMask(s.t.Name, m); err != nil {
		m.Release()
		return err
	}
	return nil
}

// entry is one candidate for pruning: its score and where it is.
type entry struct {
	score float64
	param int // index into the states
	index int // element (or slice) index
}

// pruneSmallest sets the mask of the k entries of smallest score to 0,
// ties broken by order in es; zero applies it to the states. A NaN score
// counts as larger than any number, as in PyTorch's topk, so that NaN
// values are pruned last rather than first.
func pruneSmallest(es []entry, k int, zero func(e entry)) {
	slices.SortStableFunc(es, func(a, b entry) int {
		if an, bn := math.IsNaN(a.score), math.IsNaN(b.score); an || bn {
			return cmp.Compare(b2i(an), b2i(bn))
		}
		return cmp.Compare(a.score, b.score)
	})
	for _, e := range es[:k] {
		zero(e)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// L1Unstructured prunes the amount of the unpruned elements of m's
// parameter name that have the smallest absolute values
// (torch.nn.utils.prune.l1_unstructured).
func L1Unstructured(m nn.Module, name string, amount Amount) error {
	return GlobalUnstructured([]Target{{Module: m, Name: name}}, amount)
}

// GlobalUnstructured prunes the amount of the unpruned elements of all the
// targets taken together that have the smallest absolute values (or
// smallest [Target].Importance scores, where given), so that layers lose
// different shares of their elements
// (torch.nn.utils.prune.global_unstructured with L1Unstructured). A
// parameter listed twice is an error, and so is an importance tensor that
// is not floating-point (vram.ErrDType), of another shape, or released.
func GlobalUnstructured(targets []Target, amount Amount) error {
	if err := amount.check(); err != nil {
		return err
	}
	if len(targets) == 0 {
		return pruneErr(vram.ErrArgument, "no parameters to prune")
	}
	states := make([]*state, len(targets))
	seen := map[*vram.Tensor]bool{}
	for i, t := range targets {
		s, err := load(t)
		if err != nil {
			return err
		}
		if seen[s.p] {
			return pruneErr(vram.ErrArgument, "parameter %q of %T is listed twice", t.Name, t.Module)
		}
		seen[s.p] = true
		states[i] = s
	}
	scores := make([][]float64, len(states))
	for i, s := range states {
		sc, err := importance(s)
		if err != nil {
			return err
		}
		scores[i] = sc
	}
	var es []entry
	for pi, s := range states {
		for i := range s.values {
			if s.mask[i] != 0 {
				es = append(es, entry{score: scores[pi][i], param: pi, index: i})
			}
		}
	}
	k, err := amount.of(len(es), "elements")
	if err != nil {
		return err
	}
	pruneSmallest(es, k, func(e entry) { states[e.param].mask[e.index] = 0 })
	for _, s := range states {
		if err := s.commit(); err != nil {
			return err
		}
	}
	return nil
}

// importance returns the score of each element of s's parameter: its
// Importance values, or the absolute values of the parameter.
func importance(s *state) ([]float64, error) {
	imp := s.t.Importance
	if imp == nil {
		out := make([]float64, len(s.values))
		for i, v := range s.values {
			out[i] = math.Abs(v)
		}
		return out, nil
	}
	switch {
	case imp.Released():
		return nil, pruneErr(vram.ErrReleased, "importance scores of %q of %T were released", s.t.Name, s.t.Module)
	case !imp.DType().IsFloat():
		return nil, pruneErr(vram.ErrDType, "importance scores of %q have dtype %s, want floating-point", s.t.Name, imp.DType())
	case !slices.Equal(imp.Shape(), s.p.Shape()):
		return nil, pruneErr(vram.ErrArgument, "importance scores of %q have shape %v, want the parameter's %v", s.t.Name, imp.Shape(), s.p.Shape())
	}
	return imp.Float64s(), nil
}

// Identity prunes nothing but attaches a mask of ones to m's parameter
// name, or leaves the mask it has (torch.nn.utils.prune.identity), so
// that the layer saves and loads as a pruned one.
func Identity(m nn.Module, name string) error {
	s, err := load(Target{Module: m, Name: name})
	if err != nil {
		return err
	}
	return s.commit()
}

// CustomFromMask prunes the elements of m's parameter name where mask is
// zero (torch.nn.utils.prune.custom_from_mask): mask has the parameter's
// shape, any dtype (bool too) and any device, and holds only zeros and
// ones; the new mask is the product of the old one and mask. A mask of
// another shape, with other values or released is an error
// (vram.ErrArgument, vram.ErrReleased), changing nothing.
func CustomFromMask(m nn.Module, name string, mask *vram.Tensor) error {
	if mask == nil {
		return pruneErr(vram.ErrArgument, "nil mask")
	}
	s, err := load(Target{Module: m, Name: name})
	if err != nil {
		return err
	}
	switch {
	case mask.Released():
		return pruneErr(vram.ErrReleased, "the mask for %q was released", name)
	case !slices.Equal(mask.Shape(), s.p.Shape()):
		return pruneErr(vram.ErrArgument, "mask has shape %v, want the shape %v of parameter %q", mask.Shape(), s.p.Shape(), name)
	}
	vals := mask.Float64s()
	for i, v := range vals {
		if v != 0 && v != 1 {
			return pruneErr(vram.ErrArgument, "mask for %q holds %v at element %d; want only zeros and ones", name, v, i)
		}
	}
	for i, v := range vals {
		s.mask[i] *= v
	}
	return s.commit()
}

// LnStructured prunes whole slices of m's parameter name along dimension
// dim (0: the rows of a Linear weight, its output channels; negative
// counts from the end): the amount of the slices not yet pruned whose
// L-n norm of the masked values is smallest
// (torch.nn.utils.prune.ln_structured). n is any order that torch.norm
// takes but NaN: 1, 2, math.Inf(1) for the largest magnitude,
// math.Inf(-1) for the smallest, 0 for the number of non-zero values, or
// a negative p for (Σ|x|ᵖ)^(1/p), which is 0 for a slice holding a zero.
// The parameter must have at least two dimensions, as in PyTorch: a bias
// or a norm's weight is refused with an error matching vram.ErrArgument.
// A slice counts as pruned once all its elements are; the pruned elements
// of a slice that is not count as zeros in its norm, as PyTorch computes
// the norm of weight_orig⊙weight_mask, so that with n = math.Inf(-1) or a
// negative n such a slice goes first. A NaN n is an error matching
// vram.ErrArgument.
func LnStructured(m nn.Module, name string, amount Amount, n float64, dim int) error {
	if err := amount.check(); err != nil {
		return err
	}
	if math.IsNaN(n) {
		return pruneErr(vram.ErrArgument, "norm order is NaN; it must be a number or an infinity (1, 2, math.Inf(1), ...)")
	}
	return structured(m, name, amount, dim, func(s *state, slice func(i int) int, alive []bool) []float64 {
		norms := make([]float64, len(alive))
		if math.IsInf(n, -1) {
			for j := range norms {
				norms[j] = math.Inf(1) // the smallest of none
			}
		}
		for i, v := range s.values {
			if s.mask[i] == 0 {
				// The masked value is 0, as in weight_orig⊙weight_mask.
				v = 0
			}
			j := slice(i)
			a := math.Abs(v)
			switch {
			case math.IsInf(n, 1):
				norms[j] = math.Max(norms[j], a)
			case math.IsInf(n, -1):
				norms[j] = math.Min(norms[j], a)
			case n == 0:
				if v != 0 {
					norms[j]++
				}
			default:
				norms[j] += math.Pow(a, n)
			}
		}
		if n < 0 && !math.IsInf(n, -1) {
			// Σ|x|ᵖ falls as the norm grows for a negative p; the
			// norm itself orders the slices (the root keeps the
			// order of positive ones, and is left out for them).
			for j := range norms {
				norms[j] = math.Pow(norms[j], 1/n)
			}
		}
		return norms
	})
}

// RandomStructured prunes the amount of the slices of m's parameter name
// along dimension dim that are not yet pruned, chosen at random with g
// (vram.DefaultGenerator when nil)
// (torch.nn.utils.prune.random_structured). Dimensions and amounts are
// as for [LnStructured].
func RandomStructured(m nn.Module, name string, amount Amount, dim int, g *vram.Generator) error {
	if err := amount.check(); err != nil {
		return err
	}
	return structured(m, name, amount, dim, func(_ *state, _ func(int) int, alive []bool) []float64 {
		return draws(g, len(alive))
	})
}

// structured prunes the amount of the live slices of m's parameter name
// along dim that have the smallest scores, which scores gives for every
// slice (those of slices already pruned are not read) once the amount is
// known to be valid.
func structured(m nn.Module, name string, amount Amount, dim int, scores func(s *state, slice func(i int) int, alive []bool) []float64) error {
	s, err := load(Target{Module: m, Name: name})
	if err != nil {
		return err
	}
	shape := s.p.Shape()
	if len(shape) < 2 {
		return pruneErr(vram.ErrArgument, "parameter %q of %T has shape %v: structured pruning takes a parameter of at least 2 dimensions, as PyTorch's does; prune a vector element by element (L1Unstructured, RandomUnstructured)", name, m, shape)
	}
	given := dim
	if dim < 0 {
		dim += len(shape)
	}
	if dim < 0 || dim >= len(shape) {
		return pruneErr(vram.ErrIndex, "dimension %d is out of range for parameter %q of shape %v", given, name, shape)
	}
	inner := 1
	for _, d := range shape[dim+1:] {
		inner *= d
	}
	size := shape[dim]
	// The slice of each element and whether it still has an element.
	of := func(i int) int { return (i / inner) % size }
	alive := make([]bool, size)
	for i := range s.values {
		if s.mask[i] != 0 {
			alive[of(i)] = true
		}
	}
	var es []entry
	for j := range size {
		if alive[j] {
			es = append(es, entry{index: j})
		}
	}
	k, err := amount.of(len(es), fmt.Sprintf("slices along dimension %d", dim))
	if err != nil {
		return err
	}
	score := scores(s, of, alive)
	for i := range es {
		es[i].score = score[es[i].index]
	}
	cut := make([]bool, size)
	pruneSmallest(es, k, func(e entry) { cut[e.index] = true })
	for i := range s.mask {
		if cut[of(i)] {
			s.mask[i] = 0
		}
	}
	return s.commit()
}

// RandomUnstructured prunes the amount of the unpruned elements of m's
// parameter name, chosen at random with g (vram.DefaultGenerator when
// nil) (torch.nn.utils.prune.random_unstructured).
func RandomUnstructured(m nn.Module, name string, amount Amount, g *vram.Generator) error {
	if err := amount.check(); err != nil {
		return err
	}
	s, err := load(Target{Module: m, Name: name})
	if err != nil {
		return err
	}
	var es []entry
	for i := range s.values {
		if s.mask[i] != 0 {
			es = append(es, entry{index: i})
		}
	}
	k, err := amount.of(len(es), "elements")
	if err != nil {
		return err
	}
	for i, r := range draws(g, len(es)) {
		es[i].score = r
	}
	pruneSmallest(es, k, func(e entry) { s.mask[e.index] = 0 })
	return s.commit()
}

// draws returns n uniform values in [0, 1) from g, or from
// vram.DefaultGenerator when g is nil.
func draws(g *vram.Generator, n int) []float64 {
	if g == nil {
		g = vram.DefaultGenerator()
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = g.Float64()
	}
	return out
}

// IsPruned reports whether m's parameter name has a mask.
func IsPruned(m nn.Module, name string) bool {
	mk, ok := m.(nn.Maskable)
	if !ok || isNil(m) {
		return false
	}
	mask, _ := mk.ParameterMask(name)
	return mask != nil
}

// AnyPruned reports whether a parameter of m or of one of its sub-modules
// has a mask (torch.nn.utils.prune.is_pruned, which takes a module).
func AnyPruned(m nn.Module) bool {
	for _, sub := range nn.Modules(m) {
		for _, p := range sub.NamedParameters() {
			if !strings.Contains(p.Name, ".") && IsPruned(sub, p.Name) {
				return true
			}
		}
	}
	return false
}

// Remove makes the pruning of m's parameter name permanent
// (torch.nn.utils.prune.remove): the parameter is multiplied by its mask in
// place, so that the pruned elements are zeros in the tensor itself, and
// the mask is released. It returns an error, changing nothing, for a
// parameter that is not pruned and, matching vram.ErrArgument, for a nil
// m (a nil pointer too); one matching vram.ErrReleased for a parameter or
// mask that was released.
func Remove(m nn.Module, name string) error {
	r, err := removable(m, name)
	if err != nil {
		return err
	}
	return r.apply()
}

// removal is a pruned parameter that [Remove] can make permanent.
type removal struct {
	mk      nn.Maskable
	name    string
	p, mask *vram.Tensor
}

// removable checks that m's parameter name is pruned and that neither it
// nor its mask was released.
func removable(m nn.Module, name string) (removal, error) {
	if isNil(m) {
		return removal{}, pruneErr(vram.ErrArgument, "nil module")
	}
	mk, ok := m.(nn.Maskable)
	if !ok {
		return removal{}, pruneErr(vram.ErrArgument, "%T cannot be pruned (it does not implement nn.Maskable)", m)
	}
	mask, _ := mk.ParameterMask(name)
	if mask == nil {
		return removal{}, pruneErr(vram.ErrArgument, "parameter %q of %T is not pruned", name, m)
	}
	p := param(m, name)
	switch {
	case p == nil:
		return removal{}, pruneErr(vram.ErrArgument, "%T has a mask for %q but no such parameter", m, name)
	case p.Released() || mask.Released():
		return removal{}, pruneErr(vram.ErrReleased, "parameter %q of %T or its mask was released", name, m)
	}
	return removal{mk: mk, name: name, p: p, mask: mask}, nil
}

// apply folds r's mask into its parameter and drops the mask.
func (r removal) apply() error {
	err := vram.Catch(func() { vram.NoGrad(func() { r.p.MulInPlace(r.mask) }) })
	if err != nil {
		return fmt.Errorf("prune: remove %s: %w", r.name, err)
	}
	return r.mk.SetParameterMask(r.name, nil)
}

// RemoveAll makes every pruning in m and its sub-modules permanent, as
// [Remove] does, and returns how many parameters it changed. Every pruned
// parameter is checked first, so that one that cannot be made permanent
// (a parameter or mask that was released) returns its error with no
// layer changed.
func RemoveAll(m nn.Module) (int, error) {
	var todo []removal
	for _, sub := range nn.Modules(m) {
		if _, ok := sub.(nn.Maskable); !ok {
			continue
		}
		for _, p := range sub.NamedParameters() {
			if strings.Contains(p.Name, ".") || !IsPruned(sub, p.Name) {
				continue
			}
			r, err := removable(sub, p.Name)
			if err != nil {
				return 0, err
			}
			todo = append(todo, r)
		}
	}
	for i, r := range todo {
		if err := r.apply(); err != nil {
			return i, err
		}
	}
	return len(todo), nil
}

// Stat is the sparsity of one parameter: how many of its elements are zero
// as the layer computes with it (after its mask, if pruned).
type Stat struct {
	Name  string // dotted name, as in NamedParameters
	Zeros int
	Total int
}

// Fraction returns Zeros/Total, or 0 for an empty parameter.
func (s Stat) Fraction() float64 {
	if s.Total == 0 {
		return 0
	}
	return float64(s.Zeros) / float64(s.Total)
}

// Sparsity returns the sparsity of each parameter of m, in the order of
// NamedParameters, and of all of them together, under the name "total"
// (no parameters for a nil m). It
// reads every parameter to the host, and panics with a *vram.Error of kind
// vram.ErrReleased when one of them or a mask was released.
func Sparsity(m nn.Module) (params []Stat, total Stat) {
	total.Name = "total"
	if isNil(m) {
		return nil, total
	}
	masks := map[*vram.Tensor]*vram.Tensor{} // parameter -> mask
	for _, sub := range nn.Modules(m) {
		mk, ok := sub.(nn.Maskable)
		if !ok {
			continue
		}
		for _, p := range sub.NamedParameters() {
			if mask, _ := mk.ParameterMask(p.Name); mask != nil {
				masks[p.Tensor] = mask
			}
		}
	}
	for _, p := range m.NamedParameters() {
		vals := p.Tensor.Float64s()
		var mv []float64
		if mask := masks[p.Tensor]; mask != nil {
			mv = mask.Float64s()
		}
		st := Stat{Name: p.Name, Total: len(vals)}
		for i, v := range vals {
			if v == 0 || mv != nil && mv[i] == 0 {
				st.Zeros++
			}
		}
		params = append(params, st)
		total.Zeros += st.Zeros
		total.Total += st.Total
	}
	return params, total
}
