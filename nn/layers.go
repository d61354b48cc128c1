package nn

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/vramgo/vram"
)

// uniformParam returns a parameter of the given shape with values uniform
// in [-bound, bound), made with opts, requiring grad and kept from any
// enclosing Tidy. It draws into the tensor and scales it in place, so no
// temporaries are left behind.
func uniformParam(shape vram.Shape, bound float64, opts []vram.Option) *vram.Tensor {
	var t *vram.Tensor
	vram.Region(ParametersRegion, func() {
		t = vram.Rand(shape, opts...)
		vram.NoGrad(func() { t.MulScalarInPlace(2 * bound).AddScalarInPlace(-bound) })
	})
	t.SetRequiresGrad(true)
	return vram.Keep(t)
}

// fullParam returns a parameter filled with v, requiring grad and kept.
func fullParam(shape vram.Shape, v float64, opts []vram.Option) *vram.Tensor {
	var t *vram.Tensor
	vram.Region(ParametersRegion, func() { t = vram.Full(shape, v, append(slices.Clone(opts), vram.WithGrad())...) })
	return vram.Keep(t)
}

// identity returns a new reference to x that passes gradients through, for
// layers that leave their input unchanged: the caller owns Forward's result
// and may release it without releasing x.
func identity(x *vram.Tensor) *vram.Tensor { return x.To(x.Device()) }

// Linear applies an affine map y = x Wᵀ + b to the last dimension of its
// input (torch.nn.Linear).
type Linear struct {
	Base
	// Weight is [out, in].
	Weight *vram.Tensor
	// Bias is [out], or nil for a layer made by NewLinearNoBias.
	Bias *vram.Tensor
	// WeightMask and BiasMask, set by package nn/prune through
	// [Linear.SetParameterMask], are nil or tensors of zeros and ones of
	// their parameter's shape: Forward then computes with Weight⊙WeightMask
	// and Bias⊙BiasMask, so the pruned elements get no gradient.
	WeightMask, BiasMask *vram.Tensor
	// Scale is nil for a float layer. Package nn/quant sets it to one
	// scale per output channel, [out], and makes Weight int8: Forward then
	// computes with Weight·Scale ([vram.LinearInt8]), for inference, and
	// Weight, Bias and Scale are buffers, not parameters
	// ([Linear.SetInt8Weight]).
	Scale *vram.Tensor
}

// NewLinear returns a Linear layer from in to out features with weight
// [out, in] and bias [out], both initialised like PyTorch's default:
// uniform in [-1/sqrt(in), 1/sqrt(in)). opts (device, dtype, generator) go
// to vram's factory functions.
func NewLinear(in, out int, opts ...vram.Option) *Linear {
	l := NewLinearNoBias(in, out, opts...)
	// A weight made before the bias fails to allocate is released, since
	// the caller gets no layer to release.
	made := false
	defer func() {
		if !made {
			l.Weight.Release()
		}
	}()
	l.Bias = uniformParam(vram.Shape{out}, linearBound(in), opts)
	l.RegisterParameterField("bias", &l.Bias)
	made = true
	return l
}

// NewLinearNoBias returns a Linear layer without bias (bias=False).
func NewLinearNoBias(in, out int, opts ...vram.Option) *Linear {
	if in < 0 || out < 0 {
		panic(&vram.Error{Op: "linear", Kind: vram.ErrArgument, Detail: fmt.Sprintf("negative size: in=%d, out=%d", in, out)})
	}
	l := &Linear{}
	l.Weight = uniformParam(vram.Shape{out, in}, linearBound(in), opts)
	l.RegisterParameterField("weight", &l.Weight)
	return l
}

func linearBound(in int) float64 {
	if in == 0 {
		return 0
	}
	return 1 / math.Sqrt(float64(in))
}

// Forward returns x Wᵀ + b for x of shape [..., in], of shape [..., out]
// ([vram.Linear]; [vram.LinearInt8] for a quantized layer), with the
// masks of a pruned layer applied.
func (l *Linear) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "linear", "Linear")
	return l.ForwardAct(x, vram.ActNone)
}

// ForwardAct returns act(x Wᵀ + b) as one fused op ([vram.LinearAct]):
// what [Sequential] runs for a Linear followed by a ReLU or GELU.
func (l *Linear) ForwardAct(x *vram.Tensor, act vram.Activation) *vram.Tensor {
	nilLayer(l == nil, "linear", "Linear")
	w, rw := masked(l.Weight, l.WeightMask)
	if rw {
		defer w.Release()
	}
	b, rb := masked(l.Bias, l.BiasMask)
	if rb {
		defer b.Release()
	}
	if l.Scale == nil {
		return vram.LinearAct(x, w, b, act)
	}
	if act > vram.ActGELU {
		panic(&vram.Error{Op: "linear", Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("unknown activation %v; use ActNone, ActReLU or ActGELU", act)})
	}
	y := vram.LinearInt8(x, w, l.Scale, b)
	if act == vram.ActNone {
		return y
	}
	defer y.Release()
	if act == vram.ActReLU {
		return y.Relu()
	}
	return y.Gelu()
}

// ReLU applies max(x, 0) elementwise.
type ReLU struct{ Base }

// NewReLU returns a ReLU module.
func NewReLU() *ReLU { return &ReLU{} }

// Forward returns x.Relu().
func (*ReLU) Forward(x *vram.Tensor) *vram.Tensor { return x.Relu() }

// GELU applies the exact Gaussian error linear unit x·Φ(x) elementwise,
// or its tanh approximation when Tanh is set (torch.nn.GELU with
// approximate="tanh").
type GELU struct {
	Base
	// Tanh selects the tanh approximation.
	Tanh bool
}

// NewGELU returns a GELU module.
func NewGELU() *GELU { return &GELU{} }

// NewGELUTanh returns a GELU module with the tanh approximation.
func NewGELUTanh() *GELU { return &GELU{Tanh: true} }

// Forward returns x.Gelu(), or x.GeluTanh() when Tanh is set.
func (l *GELU) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "gelu", "GELU")
	if l.Tanh {
		return x.GeluTanh()
	}
	return x.Gelu()
}

// Tanh applies tanh elementwise.
type Tanh struct{ Base }

// NewTanh returns a Tanh module.
func NewTanh() *Tanh { return &Tanh{} }

// Forward returns x.Tanh().
func (*Tanh) Forward(x *vram.Tensor) *vram.Tensor { return x.Tanh() }

// Sigmoid applies the logistic function 1/(1+e⁻ˣ) elementwise.
type Sigmoid struct{ Base }

// NewSigmoid returns a Sigmoid module.
func NewSigmoid() *Sigmoid { return &Sigmoid{} }

// Forward returns x.Sigmoid().
func (*Sigmoid) Forward(x *vram.Tensor) *vram.Tensor { return x.Sigmoid() }

// Dropout zeroes each element of its input with probability P in training
// mode and scales the others by 1/(1-P) (inverted dropout), so that
// evaluation mode, where it passes its input through, needs no rescaling.
type Dropout struct {
	Base
	// P is the probability of zeroing an element, in [0, 1].
	P    float64
	opts []vram.Option
}

// NewDropout returns a Dropout layer. Its random masks come from the
// generator of a [vram.WithGenerator] option in opts, or from vram's
// default generator; the masks always take the input's device, so other
// options do not matter. It panics with an *vram.Error of kind
// vram.ErrArgument unless 0 <= p <= 1 (1 drops everything).
func NewDropout(p float64, opts ...vram.Option) *Dropout {
	if !(p >= 0 && p <= 1) {
		panic(&vram.Error{Op: "dropout", Kind: vram.ErrArgument, Detail: fmt.Sprintf("probability must be in [0, 1], got %v", p)})
	}
	return &Dropout{P: p, opts: slices.Clone(opts)}
}

// Forward returns x with elements dropped in training mode, and a new
// reference to x in evaluation mode or when P is 0.
func (d *Dropout) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(d == nil, "dropout", "Dropout")
	notNil("dropout", x)
	if !d.Training() || d.P == 0 || x.NumElements() == 0 {
		return identity(x)
	}
	if !(d.P >= 0 && d.P <= 1) {
		panic(&vram.Error{Op: "dropout", Kind: vram.ErrArgument, Detail: fmt.Sprintf("probability must be in [0, 1], got %v", d.P)})
	}
	return vram.Dropout(x, d.P, d.opts...)
}

// LayerNorm normalises its input over the trailing NormalizedShape
// dimensions to zero mean and unit variance, then applies an elementwise
// affine map (torch.nn.LayerNorm).
type LayerNorm struct {
	Base
	NormalizedShape []int
	Eps             float64
	// Weight (ones at first) and Bias (zeros) have NormalizedShape, or
	// are both nil for a layer made by NewLayerNormNoAffine; Bias alone
	// is nil for one made by NewLayerNormNoBias.
	Weight, Bias *vram.Tensor
}

// NewLayerNorm returns a LayerNorm over the trailing dimensions shape, with
// eps added to the variance (PyTorch uses 1e-5), weight ones and bias
// zeros. opts go to vram's factory functions. It panics with an
// *vram.Error of kind vram.ErrArgument for an empty shape or one with a
// negative size, and for an eps that is negative, infinite or NaN (which
// would make every output NaN).
func NewLayerNorm(shape []int, eps float64, opts ...vram.Option) *LayerNorm {
	l := NewLayerNormNoBias(shape, eps, opts...)
	made := false
	defer func() {
		if !made {
			l.Weight.Release() // as NewLinear's
		}
	}()
	l.Bias = fullParam(shape, 0, opts)
	l.RegisterParameterField("bias", &l.Bias)
	made = true
	return l
}

// NewLayerNormNoBias returns a LayerNorm over the trailing dimensions
// shape with weight ones and no bias (bias=False): Bias is nil and the
// state dict holds "weight" alone. It panics as [NewLayerNorm] does.
func NewLayerNormNoBias(shape []int, eps float64, opts ...vram.Option) *LayerNorm {
	l := NewLayerNormNoAffine(shape, eps)
	l.Weight = fullParam(shape, 1, opts)
	l.RegisterParameterField("weight", &l.Weight)
	return l
}

// NewLayerNormNoAffine returns a LayerNorm over the trailing dimensions
// shape without weight and bias (elementwise_affine=False): it only
// normalises. It panics as [NewLayerNorm] does.
func NewLayerNormNoAffine(shape []int, eps float64) *LayerNorm {
	const op = "layer_norm"
	if len(shape) == 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "normalized shape is empty"})
	}
	if slices.ContainsFunc(shape, func(d int) bool { return d < 0 }) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("normalized shape %v has a negative size", shape)})
	}
	checkEps(op, eps)
	return &LayerNorm{NormalizedShape: slices.Clone(shape), Eps: eps}
}

// checkEps panics with an *vram.Error of kind vram.ErrArgument unless the
// variance epsilon eps of a normalization layer is finite and not
// negative.
func checkEps(op string, eps float64) {
	if !(eps >= 0) || math.IsInf(eps, 1) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("eps %v must be finite and not negative", eps)})
	}
}

// Forward returns the normalised x, of x's shape and dtype. The statistics
// are computed in float32 or wider whatever x's dtype; when x is 16-bit and
// the parameters are float32 (a model converted with Half or BFloat16), the
// result is cast back to x's dtype. Inside an Autocast region a 16-bit x
// gives float32, as PyTorch's autocast runs layer_norm in float32. An
// Eps changed since construction into one the constructors refuse panics
// with an *vram.Error of kind vram.ErrArgument.
func (l *LayerNorm) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "layer_norm", "LayerNorm")
	checkEps("layer_norm", l.Eps)
	w, b, done := l.maskedParams(l.Weight, l.Bias)
	defer done()
	y := vram.LayerNorm(x, l.NormalizedShape, w, b, l.Eps)
	if y.DType() == x.DType() || !x.DType().IsFloat() || y.DType() == autocastFloat32(x.DType()) {
		return y
	}
	defer y.Release()
	return y.Cast(x.DType())
}

// KeepsFloat32 marks LayerNorm as a [Float32Layer]: Half and BFloat16 leave
// its weight and bias float32.
func (*LayerNorm) KeepsFloat32() {}

// ToDType converts the weight and bias to float32 when dt is a 16-bit type
// and to dt otherwise (dt must be a floating-point type): LayerNorm is a
// [Float32Layer].
func (l *LayerNorm) ToDType(dt vram.DType) { ConvertDType(l, dt) }

// Half keeps LayerNorm float32 (see [LayerNorm.ToDType]).
func (l *LayerNorm) Half() { l.ToDType(vram.Float16) }

// BFloat16 keeps LayerNorm float32 (see [LayerNorm.ToDType]).
func (l *LayerNorm) BFloat16() { l.ToDType(vram.BFloat16) }

// Float converts LayerNorm's parameters to float32.
func (l *LayerNorm) Float() { l.ToDType(vram.Float32) }

// Embedding is a lookup table of Num vectors of size Dim
// (torch.nn.Embedding).
type Embedding struct {
	Base
	// Weight is [num, dim].
	Weight *vram.Tensor
	// PaddingIdx, if not nil, is the row in [0, num) that Forward gives
	// no gradient (padding_idx): the vector of padding positions, zeros
	// unless changed, stays as it is during training.
	PaddingIdx *int
	// MaxNorm, if positive, is the largest NormType-norm a row may have
	// when Forward looks it up (max_norm); see [EmbeddingOptions].
	MaxNorm float64
	// NormType is the p of the norm MaxNorm bounds (norm_type); 0 means 2.
	NormType float64
	// ScaleGradByFreq divides the gradient of each row by the number of
	// times the row occurs in Forward's input (scale_grad_by_freq).
	ScaleGradByFreq bool
}

// EmbeddingOptions are the settings of [NewEmbeddingOptions]. The zero
// value is PyTorch's default.
type EmbeddingOptions struct {
	// PaddingIdx, if not nil, is the row initialised to zeros that gets
	// no gradient (padding_idx); a negative value counts from the end,
	// -1 being the last row.
	PaddingIdx *int
	// MaxNorm, if positive, bounds the norm of the rows Forward looks up
	// (max_norm): before the lookup, each row of the input whose
	// NormType-norm exceeds MaxNorm is scaled in place, without a
	// gradient, to norm MaxNorm (by MaxNorm/(norm+1e-7), as PyTorch does).
	// This changes Weight, so a graph built from Weight earlier must not
	// be differentiated afterwards, and Forward must not run concurrently
	// with other uses of the layer. It costs one pass over the whole table
	// per Forward. 0 means no bound (max_norm=None).
	MaxNorm float64
	// NormType is the p of the norm for MaxNorm (norm_type), any p that
	// [vram.Tensor.Norm] takes; 0 means PyTorch's default, 2.
	NormType float64
	// ScaleGradByFreq divides each row's gradient by the number of times
	// the row occurs in the mini-batch (scale_grad_by_freq).
	ScaleGradByFreq bool
}

// NewEmbedding returns an Embedding of num vectors of size dim, initialised
// from the standard normal distribution like PyTorch's. opts go to vram's
// factory functions.
func NewEmbedding(num, dim int, opts ...vram.Option) *Embedding {
	return NewEmbeddingOptions(num, dim, EmbeddingOptions{}, opts...)
}

// NewEmbeddingOptions returns an Embedding as [NewEmbedding] does, with the
// settings o. It panics with an *vram.Error of kind vram.ErrArgument for a
// negative size or a padding index outside [-num, num).
func NewEmbeddingOptions(num, dim int, o EmbeddingOptions, opts ...vram.Option) *Embedding {
	if num < 0 || dim < 0 {
		panic(&vram.Error{Op: "embedding", Kind: vram.ErrArgument, Detail: fmt.Sprintf("negative size: num=%d, dim=%d", num, dim)})
	}
	e := newEmbedding(num, o)
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

// newEmbedding checks the options of an Embedding of num rows and
// returns one without weights.
func newEmbedding(num int, o EmbeddingOptions) *Embedding {
	const op = "embedding"
	checkNormBound(op, o.MaxNorm, o.NormType)
	e := &Embedding{MaxNorm: o.MaxNorm, NormType: o.NormType, ScaleGradByFreq: o.ScaleGradByFreq}
	if o.PaddingIdx != nil {
		p := *o.PaddingIdx
		if p < -num || p >= num {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("padding index %d must be in [-%d, %d)", p, num, num)})
		}
		if p < 0 {
			p += num
		}
		e.PaddingIdx = &p
	}
	return e
}

// checkNormBound panics with an *vram.Error of kind vram.ErrArgument
// naming op unless maxNorm is 0 or positive and finite and normType is a
// number.
func checkNormBound(op string, maxNorm, normType float64) {
	switch {
	case !(maxNorm >= 0) || math.IsInf(maxNorm, 1):
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("max norm must be positive and finite, or 0 for none; got %v", maxNorm)})
	case math.IsNaN(normType):
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "norm type is NaN"})
	}
}

// check panics with an *vram.Error naming op when e's fields were changed
// after construction into a layer that its constructors would not make,
// before Forward changes anything: of kind vram.ErrArgument for a nil
// Weight, a MaxNorm or NormType they refuse, or a PaddingIdx outside
// [0, num); of kind vram.ErrShape for a Weight that is not 2-D; of kind
// vram.ErrDType for a Weight that MaxNorm must renormalise and that is not
// floating-point.
func (e *Embedding) check(op string) {
	checkNormBound(op, e.MaxNorm, e.NormType)
	switch w := e.Weight; {
	case w == nil:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "weight is nil"})
	case w.Dim() != 2:
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("weight must be [num_embeddings, dim], got %v", w.Shape())})
	case e.MaxNorm > 0 && !w.DType().IsFloat():
		panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("max norm renormalises a floating-point weight, got %s", w.DType())})
	case e.PaddingIdx != nil && (*e.PaddingIdx < 0 || *e.PaddingIdx >= w.Size(0)):
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("padding index %d must be in [0, %d)", *e.PaddingIdx, w.Size(0))})
	}
}

// NewEmbeddingFromPretrained returns an Embedding whose table is a copy
// of weights [num, dim] (Embedding.from_pretrained), on weights' device
// and in its dtype, with the settings o; the caller keeps ownership of
// weights. With freeze, the table gets no gradient (freeze=True, PyTorch's
// default); it stays a parameter either way. As in PyTorch, the
// PaddingIdx row is left as weights has it. It panics with an
// *vram.Error of kind vram.ErrArgument for a nil weights or bad options,
// of kind vram.ErrShape unless weights is 2-D, and of kind vram.ErrDType
// unless it is floating-point.
func NewEmbeddingFromPretrained(weights *vram.Tensor, freeze bool, o EmbeddingOptions) *Embedding {
	const op = "embedding_from_pretrained"
	notNil(op, weights)
	if weights.Dim() != 2 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("weights must be 2-D [num_embeddings, dim], got %v", weights.Shape())})
	}
	if !weights.DType().IsFloat() {
		panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("weights must be floating-point, got %s", weights.DType())})
	}
	e := newEmbedding(weights.Size(0), o)
	vram.Region(ParametersRegion, func() {
		vram.NoGrad(func() { e.Weight = vram.Keep(weights.Clone()) })
	})
	e.Weight.SetRequiresGrad(!freeze)
	e.RegisterParameterField("weight", &e.Weight)
	return e
}

// Forward looks up the rows of Weight for x, a tensor of int64 (or int32)
// indices of any shape, returning x's shape + [dim]. Positions of
// PaddingIdx get its row and pass no gradient to it. With MaxNorm, the
// rows looked up are first renormalised in place; with ScaleGradByFreq,
// each row's gradient is divided by its count in x.
//
// It panics with an *vram.Error naming embedding, before it changes
// Weight: of kind vram.ErrIndex for an index outside [0, num), as
// PyTorch refuses one, of kind vram.ErrDType for indices that are not
// int64 or int32, and as the constructors do for fields changed since
// into what they refuse (a nil or non-2-D Weight, a PaddingIdx outside
// [0, num), a MaxNorm that is negative, NaN or infinite).
func (e *Embedding) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(e == nil, "embedding", "Embedding")
	const op = "embedding"
	defer asOp(op)
	notNil(op, x)
	e.check(op)
	if e.MaxNorm > 0 {
		e.renorm(x)
	}
	y := e.lookup(x)
	if !e.ScaleGradByFreq || !y.RequiresGrad() {
		return y
	}
	defer y.Release()
	return scaleGradByFreq(x, x, y, e.Weight.Size(0))
}

// renorm scales the rows of Weight that x names and whose norm exceeds
// MaxNorm down to MaxNorm, in place and without a gradient, as PyTorch's
// embedding_renorm_.
func (e *Embedding) renorm(x *vram.Tensor) {
	if x.DType() != vram.Int64 && x.DType() != vram.Int32 {
		return // vram.Embedding reports the dtype
	}
	renormRows(e.Weight, x, e.MaxNorm, e.NormType)
}

// renormRows scales the rows of w that the int64 or int32 indices x name
// and whose normType-norm (0 meaning 2) exceeds maxNorm down to maxNorm,
// in place and without a gradient, as PyTorch's embedding_renorm_.
func renormRows(w, x *vram.Tensor, maxNorm, normType float64) {
	p := normType
	if p == 0 {
		p = 2
	}
	vram.NoGrad(func() {
		vram.Tidy(func() {
			used := rowCounts(x, w.Size(0), w.DType()).GtScalar(0).Unsqueeze(1)
			norms := w.Norm(p, []int{1}, true)
			scale := vram.Where(used.LogicalAnd(norms.GtScalar(maxNorm)), norms.AddScalar(1e-7).RDivScalar(maxNorm), vram.OnesLike(norms))
			w.MulInPlace(scale)
		})
	})
}

// rowCounts returns how many times each of num rows occurs in the indices
// x, as a [num] tensor of dtype dt on x's device. It panics with the
// error of kind vram.ErrIndex for an index outside [0, num).
func rowCounts(x *vram.Tensor, num int, dt vram.DType) *vram.Tensor {
	idx := x.Long()
	defer idx.Release()
	flat := idx.Reshape(-1)
	defer flat.Release()
	ones := vram.Ones(vram.Shape{flat.Size(0)}, dt, x.Device())
	defer ones.Release()
	zeros := vram.Zeros(vram.Shape{num}, dt, x.Device())
	defer zeros.Release()
	return zeros.ScatterAdd(0, flat, ones)
}

// scaleGradByFreq returns y, looked up for x from a table of num rows,
// with the same values but the gradient of each position divided by the
// number of times its index occurs in counted.
func scaleGradByFreq(counted, x, y *vram.Tensor, num int) *vram.Tensor {
	var inv *vram.Tensor
	// In y's dtype even inside an Autocast region, where 1/freq alone
	// would be float32 and make the lookup float32.
	vram.NoAutocast(func() {
		vram.NoGrad(func() {
			vram.Tidy(func() {
				idx := x.Long().Reshape(-1)
				freq := rowCounts(counted, num, y.DType()).IndexSelect(0, idx)
				inv = vram.Keep(freq.RDivScalar(1).Reshape(append(x.Shape(), 1)...))
			})
		})
	})
	defer inv.Release()
	// out = y + (s - s), s = y·inv: y's values exactly, and y's gradient
	// times inv. s - s is NaN where y is not finite, and 0 there too.
	s := y.Mul(inv)
	defer s.Release()
	sd := s.Detach()
	defer sd.Release()
	delta := s.Sub(sd)
	defer delta.Release()
	bad := delta.IsNaN()
	defer bad.Release()
	zeroed := delta.MaskedFill(bad, 0)
	defer zeroed.Release()
	yd := y.Detach()
	defer yd.Release()
	return yd.Add(zeroed)
}

// lookup returns the rows of Weight for x, those of PaddingIdx passing no
// gradient.
func (e *Embedding) lookup(x *vram.Tensor) *vram.Tensor {
	w, _, done := e.maskedParams(e.Weight, nil)
	defer done()
	y := vram.Embedding(x, w)
	if e.PaddingIdx == nil || !y.RequiresGrad() {
		return y
	}
	defer y.Release()
	var pad, frozen *vram.Tensor
	vram.NoGrad(func() {
		p := x.EqScalar(float64(*e.PaddingIdx))
		defer p.Release()
		pad = p.Unsqueeze(-1)
	})
	defer pad.Release()
	frozen = y.Detach()
	defer frozen.Release()
	return vram.Where(pad, frozen, y)
}

// Sequential runs modules one after another, each on the previous one's
// output (torch.nn.Sequential). Its children are named "0", "1", ..., so
// its parameters are "0.weight", "0.bias", "2.weight", ...
//
// A nil *Sequential (a model declared and never made) answers the methods
// that only read as an empty one does: Len is 0, Training is true, and
// Modules, NamedModules, NamedChildren, NamedParameters, Parameters and
// NamedBuffers list nothing. Forward, At and every method that changes
// the model or what it holds (Append, To, CUDA, CPU, ToDType, Half,
// BFloat16, Float, Train, Eval, ZeroGrad and the Register methods) panic
// with an *vram.Error of kind vram.ErrArgument rather than dereference it.
type Sequential struct {
	Base
	mods []Module
}

// NewSequential returns a Sequential of mods.
func NewSequential(mods ...Module) *Sequential {
	s := &Sequential{}
	for _, m := range mods {
		s.Append(m)
	}
	return s
}

// Append adds m at the end and returns s. It panics with an *vram.Error
// of kind vram.ErrArgument for a nil m and a nil s.
func (s *Sequential) Append(m Module) *Sequential {
	s.mustExist("Append")
	s.RegisterModule(strconv.Itoa(len(s.mods)), m)
	s.mods = append(s.mods, m)
	return s
}

// Len returns the number of modules, 0 for a nil s.
func (s *Sequential) Len() int {
	if s == nil {
		return 0
	}
	return len(s.mods)
}

// Modules returns s and every module inside it, recursively, s first, as
// PyTorch's model.modules() does: nn.Modules(s) (which takes any Module)
// as a method, for the common case of a Sequential model.
func (s *Sequential) Modules() []Module { return Modules(s) }

// NamedModules returns [NamedModules] of s (named_modules()).
func (s *Sequential) NamedModules() []NamedModule { return NamedModules(s) }

// At returns module i (PyTorch's model[i]); a negative i counts from the
// end, so At(-1) is the last module. It panics with an *vram.Error of
// kind vram.ErrIndex when there is no module i, and of kind
// vram.ErrArgument for a nil s.
func (s *Sequential) At(i int) Module {
	s.mustExist("At")
	j := i
	if j < 0 {
		j += len(s.mods)
	}
	if j < 0 || j >= len(s.mods) {
		panic(&vram.Error{Op: "sequential_at", Kind: vram.ErrIndex,
			Detail: fmt.Sprintf("index %d is out of range for a Sequential of %d modules", i, len(s.mods))})
	}
	return s.mods[j]
}

// actFuser is a layer that can apply the activation that follows it in
// the same op: [Linear] and [Conv2d].
type actFuser interface {
	ForwardAct(x *vram.Tensor, act vram.Activation) *vram.Tensor
}

// fuser returns m as an actFuser when m is a *Linear or a *Conv2d itself,
// and nil otherwise: a type of the caller's that embeds one of them has
// their ForwardAct too, but a Forward of its own (an adapter added to the
// output, say) that fusing would skip.
func fuser(m Module) actFuser {
	switch l := m.(type) {
	case *Linear:
		return l
	case *Conv2d:
		return l
	}
	return nil
}

// Forward runs the modules in order. A [Linear] or [Conv2d] directly
// followed by a [ReLU] or an exact [GELU] runs as one fused op ([vram.LinearAct],
// [vram.Conv2dAct]): the same result, fewer kernels and no intermediate
// tensor. A type that embeds a Linear or a Conv2d runs its own Forward. Intermediate results are
// released as soon as the next module has consumed them, and when a
// module panics; the autograd graph keeps what backward needs. It panics
// with an *vram.Error of kind vram.ErrArgument for a nil s and when a
// module returns a nil tensor, naming the module.
func (s *Sequential) Forward(x *vram.Tensor) (out *vram.Tensor) {
	s.mustExist("Forward")
	cur := x
	defer func() {
		if out == nil && cur != x && cur != nil {
			cur.Release() // a module panicked
		}
	}()
	for i := 0; i < len(s.mods); i++ {
		m := s.mods[i]
		var next *vram.Tensor
		if l := fuser(m); l != nil && i+1 < len(s.mods) {
			switch s.mods[i+1].(type) {
			case *ReLU:
				next = l.ForwardAct(cur, vram.ActReLU)
				i++
			case *GELU:
				if !s.mods[i+1].(*GELU).Tanh {
					next = l.ForwardAct(cur, vram.ActGELU)
					i++
				}
			}
		}
		if next == nil {
			next = m.Forward(cur)
		}
		if next == nil {
			panic(&vram.Error{Op: "sequential", Kind: vram.ErrArgument,
				Detail: fmt.Sprintf("module %d (%T) returned a nil tensor", i, m)})
		}
		if cur != x && next != cur {
			cur.Release()
		}
		cur = next
	}
	if cur == x {
		return identity(x)
	}
	return cur
}

// mustExist panics with an *vram.Error of kind vram.ErrArgument, naming
// method, when s is nil: the methods that would have to run, index or
// change a Sequential call it first, rather than dereference nil.
func (s *Sequential) mustExist(method string) {
	if s == nil {
		panic(&vram.Error{Op: "sequential", Kind: vram.ErrArgument,
			Detail: method + " of a nil *Sequential (make one with NewSequential)"})
	}
}

// The methods below are [Base]'s, which a nil *Sequential could not reach
// without a nil-pointer dereference: those that read answer for nil as an
// empty Sequential does, the others panic with mustExist's error.

// NamedParameters returns [Base.NamedParameters] of s, nil for a nil s.
func (s *Sequential) NamedParameters() []NamedParameter {
	if s == nil {
		return nil
	}
	return s.Base.NamedParameters()
}

// Parameters returns [Base.Parameters] of s, nil for a nil s.
func (s *Sequential) Parameters() []*vram.Tensor {
	if s == nil {
		return nil
	}
	return s.Base.Parameters()
}

// NamedChildren returns [Base.NamedChildren] of s, nil for a nil s.
func (s *Sequential) NamedChildren() []NamedModule {
	if s == nil {
		return nil
	}
	return s.Base.NamedChildren()
}

// NamedBuffers returns [Base.NamedBuffers] of s, nil for a nil s.
func (s *Sequential) NamedBuffers() []NamedParameter {
	if s == nil {
		return nil
	}
	return s.Base.NamedBuffers()
}

// Training reports whether s is in training mode; a nil s is, as a new
// Sequential is.
func (s *Sequential) Training() bool {
	if s == nil {
		return true
	}
	return s.Base.Training()
}

// To moves s to device d as [Base.To] does.
func (s *Sequential) To(d vram.Device) {
	s.mustExist("To")
	s.Base.To(d)
}

// CUDA moves s to a CUDA device as [Base.CUDA] does.
func (s *Sequential) CUDA(index ...int) {
	s.mustExist("CUDA")
	s.Base.CUDA(index...)
}

// CPU moves s to the CPU as [Base.CPU] does.
func (s *Sequential) CPU() {
	s.mustExist("CPU")
	s.Base.CPU()
}

// ToDType converts s to dt as [Base.ToDType] does.
func (s *Sequential) ToDType(dt vram.DType) {
	s.mustExist("ToDType")
	s.Base.ToDType(dt)
}

// Half converts s to float16 as [Base.Half] does.
func (s *Sequential) Half() {
	s.mustExist("Half")
	s.Base.Half()
}

// BFloat16 converts s to bfloat16 as [Base.BFloat16] does.
func (s *Sequential) BFloat16() {
	s.mustExist("BFloat16")
	s.Base.BFloat16()
}

// Float converts s to float32 as [Base.Float] does.
func (s *Sequential) Float() {
	s.mustExist("Float")
	s.Base.Float()
}

// Train puts s and its modules in training mode.
func (s *Sequential) Train() {
	s.mustExist("Train")
	s.Base.Train()
}

// Eval puts s and its modules in evaluation mode.
func (s *Sequential) Eval() {
	s.mustExist("Eval")
	s.Base.Eval()
}

// ZeroGrad releases the gradients of s's parameters as [Base.ZeroGrad]
// does.
func (s *Sequential) ZeroGrad() {
	s.mustExist("ZeroGrad")
	s.Base.ZeroGrad()
}

// RegisterModule adds m to s under name as [Base.RegisterModule] does.
func (s *Sequential) RegisterModule(name string, m Module) {
	s.mustExist("RegisterModule")
	s.Base.RegisterModule(name, m)
}

// RegisterParameter adds t to s under name as [Base.RegisterParameter]
// does.
func (s *Sequential) RegisterParameter(name string, t *vram.Tensor) {
	s.mustExist("RegisterParameter")
	s.Base.RegisterParameter(name, t)
}

// RegisterParameterField adds the parameter in field to s under name as
// [Base.RegisterParameterField] does.
func (s *Sequential) RegisterParameterField(name string, field **vram.Tensor) {
	s.mustExist("RegisterParameterField")
	s.Base.RegisterParameterField(name, field)
}

// RegisterBuffer adds t to s under name as [Base.RegisterBuffer] does.
func (s *Sequential) RegisterBuffer(name string, t *vram.Tensor) {
	s.mustExist("RegisterBuffer")
	s.Base.RegisterBuffer(name, t)
}

// RegisterBufferField adds the buffer in field to s under name as
// [Base.RegisterBufferField] does.
func (s *Sequential) RegisterBufferField(name string, field **vram.Tensor) {
	s.mustExist("RegisterBufferField")
	s.Base.RegisterBufferField(name, field)
}

// Identity passes its input through (torch.nn.Identity): a placeholder
// where a model expects a layer, such as a classifier head removed for
// feature extraction.
type Identity struct{ Base }

// NewIdentity returns an Identity module.
func NewIdentity() *Identity { return &Identity{} }

// Forward returns a new reference to x, which the caller releases like
// any other result; x itself stays the caller's.
func (*Identity) Forward(x *vram.Tensor) *vram.Tensor {
	notNil("identity", x)
	return identity(x)
}
