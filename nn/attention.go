package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// MultiheadAttentionOptions are the settings of [NewMultiheadAttention]
// besides the sizes. The zero value is PyTorch's default: no dropout,
// with biases, sequence-first inputs, keys and values of the embedding
// size.
type MultiheadAttentionOptions struct {
	// Dropout is the probability of dropping an attention weight in
	// training mode, in [0, 1].
	Dropout float64
	// NoBias leaves out in_proj_bias and out_proj.bias (bias=False).
	NoBias bool
	// BatchFirst takes and returns [N, L, E] rather than [L, N, E]
	// (batch_first=True).
	BatchFirst bool
	// KDim and VDim are the feature sizes of keys and values (kdim,
	// vdim); 0 means the embedding size. When either differs from it, the
	// projections are three separate weights (q_proj_weight,
	// k_proj_weight, v_proj_weight) instead of in_proj_weight, as in
	// PyTorch.
	KDim, VDim int
}

// MultiheadAttention is torch.nn.MultiheadAttention: queries, keys and
// values are projected, split into NumHeads heads of EmbedDim/NumHeads
// features, attend with [vram.ScaledDotProductAttention], and the heads'
// outputs are joined and projected by OutProj. Its state dict has
// PyTorch's names and shapes (in_proj_weight [3E, E], in_proj_bias [3E],
// out_proj.weight [E, E], out_proj.bias [E]), so PyTorch's weights load
// with [Load].
//
// Inputs are [L, N, E] (sequence first, PyTorch's default), [N, L, E]
// with BatchFirst, or [L, E] unbatched.
type MultiheadAttention struct {
	Base
	// EmbedDim is the model's feature size E, NumHeads the number of
	// heads (dividing E), KDim and VDim the feature sizes of keys and
	// values.
	EmbedDim, NumHeads, KDim, VDim int
	// BatchFirst says whether inputs and outputs are [N, L, E].
	BatchFirst bool
	// Dropout is the probability of dropping an attention weight in
	// training mode.
	Dropout float64
	// InProjWeight is the packed query, key and value projection
	// [3E, E], or nil when KDim or VDim differs from EmbedDim.
	InProjWeight *vram.Tensor
	// QProjWeight [E, E], KProjWeight [E, KDim] and VProjWeight [E, VDim]
	// are the separate projections used when KDim or VDim differs from
	// EmbedDim, and nil otherwise.
	QProjWeight, KProjWeight, VProjWeight *vram.Tensor
	// InProjBias is the packed bias [3E] of the three projections, or nil
	// with NoBias.
	InProjBias *vram.Tensor
	// OutProj is the output projection from E to E.
	OutProj *Linear
	gen     *vram.Generator
}

// NewMultiheadAttention returns a MultiheadAttention of embedDim features
// split into numHeads heads, initialised as PyTorch does: the projection
// weights by Xavier-uniform, the biases zeros, OutProj's weight as any
// [Linear]'s. opts (device, dtype, generator) go to vram's factory
// functions; a [vram.WithGenerator] generator also draws the dropout
// masks. It panics with an *vram.Error of kind vram.ErrArgument when a
// size is not positive, numHeads does not divide embedDim, the sizes give
// more parameter elements than an int counts, or the dropout probability
// is outside [0, 1].
func NewMultiheadAttention(embedDim, numHeads int, o MultiheadAttentionOptions, opts ...vram.Option) *MultiheadAttention {
	const op = "multihead_attention"
	kdim, vdim := o.KDim, o.VDim
	if kdim == 0 {
		kdim = embedDim
	}
	if vdim == 0 {
		vdim = embedDim
	}
	checkAttentionSizes(op, embedDim, numHeads, kdim, vdim, o.Dropout)
	// The projections from the query, key and value, the output
	// projection and the biases, in float64, which does not overflow:
	// 3·embed_dim alone can wrap an int.
	e := float64(embedDim)
	checkParamElems(op, e*(e+float64(kdim)+float64(vdim))+e*e+4*e,
		fmt.Sprintf("embed_dim %d, kdim %d and vdim %d", embedDim, kdim, vdim))
	m := &MultiheadAttention{EmbedDim: embedDim, NumHeads: numHeads, KDim: kdim, VDim: vdim,
		BatchFirst: o.BatchFirst, Dropout: o.Dropout, gen: vram.GeneratorOf(opts...)}
	// The parameters made before one fails to allocate are released,
	// since the caller gets no layer to release.
	made := false
	defer func() {
		if made {
			return
		}
		for _, t := range []*vram.Tensor{m.InProjWeight, m.QProjWeight, m.KProjWeight, m.VProjWeight, m.InProjBias} {
			if t != nil {
				t.Release()
			}
		}
		if m.OutProj != nil {
			m.OutProj.Weight.Release()
			if m.OutProj.Bias != nil {
				m.OutProj.Bias.Release()
			}
		}
	}()
	xavier := func(out, in int) *vram.Tensor {
		return uniformParam(vram.Shape{out, in}, math.Sqrt(6/float64(in+out)), opts)
	}
	if kdim == embedDim && vdim == embedDim {
		m.InProjWeight = xavier(3*embedDim, embedDim)
		m.RegisterParameterField("in_proj_weight", &m.InProjWeight)
	} else {
		m.QProjWeight = xavier(embedDim, embedDim)
		m.KProjWeight = xavier(embedDim, kdim)
		m.VProjWeight = xavier(embedDim, vdim)
		m.RegisterParameterField("q_proj_weight", &m.QProjWeight)
		m.RegisterParameterField("k_proj_weight", &m.KProjWeight)
		m.RegisterParameterField("v_proj_weight", &m.VProjWeight)
	}
	if o.NoBias {
		m.OutProj = NewLinearNoBias(embedDim, embedDim, opts...)
	} else {
		m.InProjBias = fullParam(vram.Shape{3 * embedDim}, 0, opts)
		m.RegisterParameterField("in_proj_bias", &m.InProjBias)
		m.OutProj = NewLinearNoBias(embedDim, embedDim, opts...)
		m.OutProj.Bias = fullParam(vram.Shape{embedDim}, 0, opts)
		m.OutProj.RegisterParameterField("bias", &m.OutProj.Bias)
	}
	m.RegisterModule("out_proj", m.OutProj)
	made = true
	return m
}

// checkAttentionSizes panics with an *vram.Error of kind vram.ErrArgument
// naming op when a MultiheadAttention of these sizes and dropout
// probability cannot run: a size that is not positive, numHeads not
// dividing embedDim, or a dropout probability outside [0, 1].
func checkAttentionSizes(op string, embedDim, numHeads, kdim, vdim int, dropout float64) {
	switch {
	case embedDim < 1 || numHeads < 1 || kdim < 1 || vdim < 1:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("sizes must be positive, got embed_dim %d, num_heads %d, kdim %d, vdim %d", embedDim, numHeads, kdim, vdim)})
	case embedDim%numHeads != 0:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("embed_dim %d must be divisible by num_heads %d", embedDim, numHeads)})
	case !(dropout >= 0 && dropout <= 1):
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("dropout probability must be in [0, 1], got %v", dropout)})
	}
}

// check panics with an *vram.Error naming op when m's fields were changed
// after [NewMultiheadAttention] into a layer it would not have made: of
// kind vram.ErrArgument for sizes or a dropout probability it refuses and
// for a missing projection, of kind vram.ErrShape for projections whose
// shapes do not follow EmbedDim, KDim and VDim. Forward would otherwise
// divide by a zero head count or fail inside a reshape.
func (m *MultiheadAttention) check(op string) {
	checkAttentionSizes(op, m.EmbedDim, m.NumHeads, m.KDim, m.VDim, m.Dropout)
	e := m.EmbedDim
	want := func(name string, p *vram.Tensor, shape vram.Shape) {
		switch {
		case p == nil:
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("%s is nil", name)})
		case !slices.Equal(p.Shape(), shape):
			panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf(
				"%s has shape %v, want %v for embed_dim %d, kdim %d and vdim %d", name, p.Shape(), shape, e, m.KDim, m.VDim)})
		}
	}
	if m.OutProj == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "out_proj is nil"})
	}
	if m.InProjWeight != nil || m.KDim == e && m.VDim == e && m.QProjWeight == nil {
		if m.KDim != e || m.VDim != e {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf(
				"in_proj_weight packs projections of embed_dim %d features, but kdim is %d and vdim %d", e, m.KDim, m.VDim)})
		}
		want("in_proj_weight", m.InProjWeight, vram.Shape{3 * e, e})
	} else {
		want("q_proj_weight", m.QProjWeight, vram.Shape{e, e})
		want("k_proj_weight", m.KProjWeight, vram.Shape{e, m.KDim})
		want("v_proj_weight", m.VProjWeight, vram.Shape{e, m.VDim})
	}
	if m.InProjBias != nil {
		want("in_proj_bias", m.InProjBias, vram.Shape{3 * e})
	}
	want("out_proj.weight", m.OutProj.Weight, vram.Shape{e, e})
}

// MultiheadForwardOptions are the optional arguments of
// [MultiheadAttention.ForwardQKV]. The zero value is PyTorch's default:
// no masks, weights returned averaged over the heads.
type MultiheadForwardOptions struct {
	// KeyPaddingMask is nil or [N, S] ([S] for unbatched inputs): bool,
	// true for a key to ignore (padding), or floating-point, added to the
	// scores of that key (key_padding_mask).
	KeyPaddingMask *vram.Tensor
	// AttnMask is nil, [L, S], or [N·NumHeads, L, S] ([NumHeads, L, S]
	// for unbatched inputs): bool, true where a query must NOT attend to a
	// key, or floating-point, added to the scores (attn_mask). Note that
	// bool masks mean the opposite of [vram.AttentionOptions].Mask's, as
	// in PyTorch.
	AttnMask *vram.Tensor
	// Causal excludes the keys after each query (key j for query i when
	// j > i), on top of AttnMask and KeyPaddingMask. PyTorch's is_causal
	// is only a hint that AttnMask is causal; here no AttnMask is needed.
	Causal bool
	// NoWeights skips the attention weights (need_weights=False):
	// ForwardQKV returns nil for them.
	NoWeights bool
	// PerHeadWeights returns the weights of each head, [N, NumHeads, L,
	// S], rather than their mean over the heads, [N, L, S]
	// (average_attn_weights=False).
	PerHeadWeights bool
}

// Forward returns the self-attention of x (query, key and value all x)
// without masks, of x's shape.
func (m *MultiheadAttention) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(m == nil, "multihead_attention", "MultiheadAttention")
	out, _ := m.ForwardQKV(x, x, x, MultiheadForwardOptions{NoWeights: true})
	return out
}

// ForwardQKV returns the attention output of query [L, N, E] over key
// [S, N, KDim] and value [S, N, VDim] (batch first with BatchFirst; [L,
// E], [S, KDim], [S, VDim] unbatched), of query's shape, and the
// attention weights, [N, L, S] averaged over the heads (see
// [MultiheadForwardOptions]), after dropout as PyTorch returns them. The
// caller owns and releases both. Dropout applies in training mode only.
// A query whose keys are all masked gets zero weights and an output of
// OutProj's bias.
//
// It panics with an *vram.Error of kind vram.ErrShape for inputs or masks
// of the wrong rank or sizes, and of kind vram.ErrDType for masks that
// are neither bool nor floating-point and for inputs that are not
// floating-point or, outside [vram.Autocast], not of the parameters'
// dtype. Fields changed since [NewMultiheadAttention] into what it
// refuses (a NumHeads that does not divide EmbedDim, a nil or misshapen
// projection) panic with kind vram.ErrArgument or vram.ErrShape before
// anything is computed.
func (m *MultiheadAttention) ForwardQKV(query, key, value *vram.Tensor, o MultiheadForwardOptions) (out, weights *vram.Tensor) {
	nilLayer(m == nil, "multihead_attention", "MultiheadAttention")
	const op = "multihead_attention"
	defer asOp(op) // the projections' and attention's errors name the layer
	notNil(op, query)
	notNil(op, key)
	notNil(op, value)
	m.check(op)
	var ts temps
	defer ts.release()
	tmp := ts.add
	bad := func(kind error, format string, args ...any) {
		panic(&vram.Error{Op: op, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	batched := query.Dim() == 3
	if query.Dim() != 2 && !batched || key.Dim() != query.Dim() || value.Dim() != query.Dim() {
		bad(vram.ErrShape, "query, key and value must all be 3-D (batched) or 2-D (unbatched), got shapes %v, %v and %v",
			query.Shape(), key.Shape(), value.Shape())
	}
	// q, k, v are [N, L, E], [N, S, KDim], [N, S, VDim] views, to check
	// the sizes.
	q, k, v := query, key, value
	switch {
	case !batched:
		q, k, v = tmp(q.Unsqueeze(0)), tmp(k.Unsqueeze(0)), tmp(v.Unsqueeze(0))
	case !m.BatchFirst:
		q, k, v = tmp(q.Transpose(0, 1)), tmp(k.Transpose(0, 1)), tmp(v.Transpose(0, 1))
	}
	n, l, s, e, h := q.Size(0), q.Size(1), k.Size(1), m.EmbedDim, m.NumHeads
	switch {
	case q.Size(2) != e || k.Size(2) != m.KDim || v.Size(2) != m.VDim:
		bad(vram.ErrShape, "query, key and value must have %d, %d and %d features, got shapes %v, %v and %v",
			e, m.KDim, m.VDim, query.Shape(), key.Shape(), value.Shape())
	case k.Size(0) != n || v.Size(0) != n || v.Size(1) != s:
		bad(vram.ErrShape, "query, key and value must share the batch size, and key and value the sequence length; got shapes %v, %v and %v",
			query.Shape(), key.Shape(), value.Shape())
	}
	mask := m.mask(op, tmp, n, l, s, batched, query.DType(), query.Device(), o)
	var wq, wk, wv, bq, bk, bv *vram.Tensor
	if m.InProjWeight != nil {
		wq, wk, wv = tmp(m.InProjWeight.Narrow(0, 0, e)), tmp(m.InProjWeight.Narrow(0, e, e)), tmp(m.InProjWeight.Narrow(0, 2*e, e))
	} else {
		wq, wk, wv = m.QProjWeight, m.KProjWeight, m.VProjWeight
	}
	if m.InProjBias != nil {
		bq, bk, bv = tmp(m.InProjBias.Narrow(0, 0, e)), tmp(m.InProjBias.Narrow(0, e, e)), tmp(m.InProjBias.Narrow(0, 2*e, e))
	}
	// heads projects x, one of the caller's query, key and value, and
	// turns the result into [N, H, T, E/H]. The projection takes x in its
	// own layout and its result is transposed, not x: a sequence-first x
	// made batch-first would be a copy, which each projection would keep
	// for its weight's gradient.
	heads := func(x, w, b *vram.Tensor, t int) *vram.Tensor {
		y := tmp(vram.Linear(x, w, b))
		switch {
		case !batched:
			y = tmp(y.Unsqueeze(0))
		case !m.BatchFirst:
			y = tmp(y.Transpose(0, 1))
		}
		return tmp(tmp(y.Reshape(n, t, h, e/h)).Transpose(1, 2))
	}
	qh := heads(query, wq, bq, l)
	kh := heads(key, wk, bk, s)
	vh := heads(value, wv, bv, s)
	ao := vram.AttentionOptions{Mask: mask, Generator: m.gen}
	if m.Training() {
		ao.DropoutP = m.Dropout
	}
	var a, w *vram.Tensor
	if o.NoWeights {
		a = tmp(vram.ScaledDotProductAttention(qh, kh, vh, ao))
	} else {
		a, w = vram.ScaledDotProductAttentionWeights(qh, kh, vh, ao)
		tmp(a)
		tmp(w)
	}
	joined := tmp(tmp(a.Transpose(1, 2)).Reshape(n, l, e))
	out = m.OutProj.Forward(joined)
	switch {
	case !batched:
		tmp(out)
		out = out.Squeeze(0)
	case !m.BatchFirst:
		tmp(out)
		out = out.Transpose(0, 1)
	}
	if w == nil {
		return out, nil
	}
	if !o.PerHeadWeights {
		w = tmp(w.Mean(1))
	}
	if !batched {
		return out, w.Squeeze(0)
	}
	return out, identity(w)
}

// mask returns the mask of [vram.AttentionOptions] that o's masks make
// for a batch of n queries of length l over keys of length s, broadcast
// to [n, NumHeads, l, s], or nil when there is none: bool (true = attend)
// when every mask is bool, else floating-point of dtype dt, added to the
// scores.
func (m *MultiheadAttention) mask(op string, tmp func(*vram.Tensor) *vram.Tensor, n, l, s int, batched bool,
	dt vram.DType, dev vram.Device, o MultiheadForwardOptions) *vram.Tensor {
	bad := func(kind error, format string, args ...any) {
		panic(&vram.Error{Op: op, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	var parts []*vram.Tensor // bool (true = excluded) or float (added)
	if am := o.AttnMask; am != nil {
		switch {
		case am.Dim() == 2 && slices.Equal(am.Shape(), vram.Shape{l, s}):
			parts = append(parts, am)
		case am.Dim() == 3 && batched && slices.Equal(am.Shape(), vram.Shape{n * m.NumHeads, l, s}),
			am.Dim() == 3 && !batched && slices.Equal(am.Shape(), vram.Shape{m.NumHeads, l, s}):
			parts = append(parts, tmp(am.Reshape(n, m.NumHeads, l, s)))
		default:
			want := fmt.Sprintf("[%d, %d] or [%d, %d, %d]", l, s, n*m.NumHeads, l, s)
			bad(vram.ErrShape, "attention mask must be %s, got shape %v", want, am.Shape())
		}
	}
	if kp := o.KeyPaddingMask; kp != nil {
		want := vram.Shape{n, s}
		if !batched {
			want = vram.Shape{s}
		}
		if !slices.Equal(kp.Shape(), want) {
			bad(vram.ErrShape, "key padding mask must be %v, got shape %v", want, kp.Shape())
		}
		parts = append(parts, tmp(kp.Reshape(n, 1, 1, s)))
	}
	floats := false
	for _, p := range parts {
		switch {
		case p.DType() == vram.Bool:
		case p.DType().IsFloat():
			floats = true
		default:
			bad(vram.ErrDType, "masks must be bool or floating-point, got %s", p.DType())
		}
	}
	if o.Causal {
		var future *vram.Tensor
		vram.NoGrad(func() {
			rows := tmp(tmp(vram.Arange(0, float64(l), 1, vram.Int64, dev)).Unsqueeze(1))
			cols := tmp(vram.Arange(0, float64(s), 1, vram.Int64, dev))
			future = tmp(cols.Gt(rows))
		})
		parts = append(parts, future)
	}
	if len(parts) == 0 {
		return nil
	}
	var sum *vram.Tensor
	for _, p := range parts {
		switch {
		case floats && p.DType() == vram.Bool:
			p = tmp(tmp(vram.Zeros(p.Shape(), dt, dev)).MaskedFill(p, math.Inf(-1)))
		case floats:
			p = tmp(p.Cast(dt))
		}
		switch {
		case sum == nil:
			sum = p
		case floats:
			sum = tmp(sum.Add(p))
		default:
			sum = tmp(sum.LogicalOr(p))
		}
	}
	if floats {
		return sum
	}
	return tmp(sum.LogicalNot())
}
