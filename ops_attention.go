package vram

import (
	"math"
	"slices"
)

// AttentionOptions are the optional arguments of
// [ScaledDotProductAttention]. The zero value is PyTorch's default: no
// mask, no dropout, not causal, scale 1/sqrt(E).
type AttentionOptions struct {
	// Mask is nil or PyTorch's attn_mask, broadcast to the scores
	// [..., L, S]: either bool, true where a query may attend to a key
	// (the mask only selects, it never grows the batch), or
	// floating-point, added to the scores (-Inf excludes a key).
	Mask *Tensor
	// DropoutP is the probability of dropping each attention weight
	// (dropout_p), in [0, 1]; the weights kept are scaled by 1/(1-P). As
	// in PyTorch's functional form it applies whenever it is not zero:
	// pass 0 in evaluation.
	DropoutP float64
	// Causal applies a lower-triangular mask aligned to the upper left
	// (is_causal): query i attends to keys 0..i. It cannot be combined
	// with Mask.
	Causal bool
	// Scale multiplies q·kᵀ; 0 means 1/sqrt(E), PyTorch's default.
	Scale float64
	// Generator draws the dropout masks; nil means vram's default
	// generator.
	Generator *Generator
	// EnableGQA allows grouped-query attention (enable_gqa): k and v may
	// have fewer heads (dimension -3) than q, a number that divides q's,
	// and each of their heads serves q's heads in consecutive groups, as
	// repeat_interleave gives them.
	EnableGQA bool
}

// ScaledDotProductAttention returns softmax(q·kᵀ·scale + mask)·v, with
// dropout on the weights, as torch.nn.functional.scaled_dot_product_attention
// does: q is [..., L, E], k [..., S, E] and v [..., S, Ev], their batch
// dimensions broadcast, and the result is [..., L, Ev]. It is composed
// from matrix products, a masked fill and a softmax, so it runs and
// differentiates on every device and inside [Autocast].
//
// Float16 and bfloat16 operands are computed in float32 and the result
// rounded once to their dtype, as PyTorch's math implementation does by
// default. Inside [Autocast], float32 operands are first rounded to the
// region's dtype (PyTorch lists attention among the ops autocast runs in
// 16 bits) and the result has that dtype.
//
// A query whose keys are all masked gets a row of zero weights, and so a
// zero output, as PyTorch's math implementation gives it, rather than NaN.
//
// It panics with [ErrShape] for operands of fewer than 2 dimensions, for
// sizes that do not match (k's E, v's S, batch dimensions that do not
// broadcast) and for a mask that does not broadcast to the scores; with
// [ErrDType] for operands that are not floating-point of one dtype or a
// mask that is neither bool nor floating-point; with [ErrArgument] for a
// DropoutP outside [0, 1], a Scale that is not finite, or both Mask and
// Causal (as PyTorch refuses them); and with [ErrDevice] for operands on
// different devices.
func ScaledDotProductAttention(q, k, v *Tensor, o AttentionOptions) *Tensor {
	out, _ := attention(q, k, v, o, false)
	return out
}

// ScaledDotProductAttentionWeights is [ScaledDotProductAttention] that
// also returns the attention weights [..., L, S] that multiplied v (after
// dropout), as PyTorch's MultiheadAttention returns them with need_weights.
// The caller owns and releases both.
func ScaledDotProductAttentionWeights(q, k, v *Tensor, o AttentionOptions) (out, weights *Tensor) {
	return attention(q, k, v, o, true)
}

// attention computes scaled dot-product attention, and returns the
// weights too when want is set.
func attention(q, k, v *Tensor, o AttentionOptions, want bool) (out, weights *Tensor) {
	const op = "scaled_dot_product_attention"
	defer asOp(op)
	notNil(op, q, k, v)
	ts := []*Tensor{q, k, v}
	if o.Mask != nil {
		ts = append(ts, o.Mask)
	}
	_, held := sameDevice(op, ts...)
	defer held.unpin()
	for _, t := range ts {
		t.live(op)
	}
	if len(q.shape) < 2 || len(k.shape) < 2 || len(v.shape) < 2 {
		fail(op, ErrShape, "query, key and value need at least 2 dimensions ([..., L, E], [..., S, E], [..., S, Ev]), got shapes %v, %v and %v",
			Shape(q.shape), Shape(k.shape), Shape(v.shape))
	}
	// Autocast runs attention in its low dtype, as PyTorch's lists it:
	// the operands are rounded there first, then computed as below.
	qkv, release := autocastLow(op, q, k, v)
	defer release()
	q, k, v = qkv[0], qkv[1], qkv[2]
	if !q.dtype.IsFloat() || k.dtype != q.dtype || v.dtype != q.dtype {
		fail(op, ErrDType, "query, key and value must be floating-point of one dtype, got %s, %s and %s", q.dtype, k.dtype, v.dtype)
	}
	nq, nk, nv := len(q.shape), len(k.shape), len(v.shape)
	e, l, s := q.shape[nq-1], q.shape[nq-2], k.shape[nk-2]
	switch {
	case k.shape[nk-1] != e:
		fail(op, ErrShape, "key's last dimension %d must equal query's %d (shapes %v and %v)", k.shape[nk-1], e, Shape(q.shape), Shape(k.shape))
	case v.shape[nv-2] != s:
		fail(op, ErrShape, "value's sequence length %d must equal key's %d (shapes %v and %v)", v.shape[nv-2], s, Shape(k.shape), Shape(v.shape))
	}
	groups := 1
	if o.EnableGQA && nq >= 3 && nk >= 3 && nv >= 3 {
		hq, hk, hv := q.shape[nq-3], k.shape[nk-3], v.shape[nv-3]
		if hk != hv || hk == 0 || hq%hk != 0 {
			fail(op, ErrShape, "grouped-query attention needs key and value with one number of heads that divides the query's, got %d, %d and %d heads (shapes %v, %v, %v)",
				hq, hk, hv, Shape(q.shape), Shape(k.shape), Shape(v.shape))
		}
		groups = hq / hk
		// The dimensions before the heads broadcast on their own; checked
		// here, the error names the caller's shapes, not those of the
		// repeated key and value.
		broadcastShapes(op, q.shape[:nq-3], k.shape[:nk-3], v.shape[:nv-3])
	}
	kb, vb := slices.Clone(k.shape[:nk-2]), slices.Clone(v.shape[:nv-2])
	if groups != 1 { // 0 for a query of no heads, as in PyTorch
		kb[len(kb)-1] *= groups
		vb[len(vb)-1] *= groups
	}
	batch := broadcastShapes(op, q.shape[:nq-2], kb, vb)
	scores := append(slices.Clone(batch), l, s)
	if m := o.Mask; m != nil {
		if m.dtype != Bool && !m.dtype.IsFloat() {
			fail(op, ErrDType, "mask must be bool or floating-point, got %s", m.dtype)
		}
		if o.Causal {
			fail(op, ErrArgument, "a mask and Causal cannot both be given; fold the causal mask into Mask")
		}
		if b := broadcastShapes(op, m.shape, scores); !slices.Equal(b, scores) {
			fail(op, ErrShape, "mask of shape %v does not broadcast to the attention scores %v", Shape(m.shape), Shape(scores))
		}
	}
	if !(o.DropoutP >= 0 && o.DropoutP <= 1) {
		fail(op, ErrArgument, "dropout probability must be in [0, 1], got %v", o.DropoutP)
	}
	if math.IsNaN(o.Scale) || math.IsInf(o.Scale, 0) {
		fail(op, ErrArgument, "scale must be finite, got %v", o.Scale)
	}
	scale := o.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(max(e, 1)))
	}
	outDT := q.dtype
	Tidy(func() {
		withoutAutocast(func() {
			if outDT == Float16 || outDT == BFloat16 {
				// 16-bit operands are computed in float32 and the result
				// rounded once, as PyTorch's math implementation does by
				// default (allow_fp16_bf16_reduction_math_sdp off) and its
				// fused kernels do in their accumulators: scores of order
				// 100 rounded to bfloat16 would move the weights by several
				// percent, and a float32 mask of -1e9 would become -Inf.
				q, k, v = q.Cast(Float32), k.Cast(Float32), v.Cast(Float32)
			}
			if groups != 1 {
				k, v = repeatHeads(k, groups), repeatHeads(v, groups)
			}
			// Scaling q rather than the scores keeps 16-bit products in range
			// and costs L·E multiplications rather than L·S.
			a := q.MulScalar(scale).MatMul(k.MT())
			// Only a mask can exclude every key of a query: the causal mask
			// leaves query i keys 0..i.
			masked := o.Mask != nil
			switch {
			case o.Causal:
				var future *Tensor
				NoGrad(func() {
					rows := tableOn(q.ds(), rampFrom(0, l), Shape{l, 1}, Int64)
					cols := tableOn(q.ds(), rampFrom(0, s), Shape{s}, Int64)
					future = cols.Gt(rows)
				})
				a = a.MaskedFill(future, math.Inf(-1))
			case o.Mask != nil && o.Mask.dtype == Bool:
				a = a.MaskedFill(o.Mask.LogicalNot(), math.Inf(-1))
			case o.Mask != nil:
				a = a.Add(o.Mask.Cast(a.dtype))
			}
			var dead *Tensor
			if masked && s > 0 && a.NumElements() > 0 {
				// Rows with every key excluded: softmax would give NaN.
				// Their scores become 0 before it and their weights 0 after
				// it, so that neither the values nor the gradients see NaN.
				NoGrad(func() { dead = a.MaxKeepDim(-1).EqScalar(math.Inf(-1)) })
				a = a.MaskedFill(dead, 0)
			}
			p := a.Softmax(-1)
			if dead != nil {
				p = p.MaskedFill(dead, 0)
			}
			if o.DropoutP > 0 {
				p = dropout(op, p, o.DropoutP, 0, []Option{WithGenerator(o.Generator)})
			}
			res, w := p.MatMul(v), p
			if outDT != res.dtype {
				res = res.Cast(outDT)
				if want {
					w = w.Cast(outDT)
				}
			}
			out = Keep(res)
			if want {
				weights = Keep(w)
			}
		})
	})
	track(out) // by the caller's Tidy, which Keep took it from
	if weights != nil {
		track(weights)
	}
	return out, weights
}

// repeatHeads returns t [..., H, S, E] with each head repeated n times
// in a row, [..., H·n, S, E] (repeat_interleave along dimension -3).
func repeatHeads(t *Tensor, n int) *Tensor {
	s := t.shape
	d := len(s)
	wide := append(slices.Clone(s[:d-2]), n, s[d-2], s[d-1])
	grown := append(slices.Clone(s[:d-3]), s[d-3]*n, s[d-2], s[d-1])
	return t.Unsqueeze(-3).Expand(wide...).Reshape(grown...)
}

// GeneratorOf returns the generator that a [WithGenerator] option among
// opts names (the last one wins), or nil when there is none, which means
// vram's default generator. Layers that draw random values after they are
// made (dropout) use it to honour the options they were made with.
func GeneratorOf(opts ...Option) *Generator {
	return resolve(Float32, opts).gen
}
