package nn_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// The functions below compute the transformer layers from their
// definitions in PyTorch's documentation, on plain slices in float64,
// from the layers' parameter values. Batches are [N][T][E].

// refAttn holds one attention block's parameters: in_proj_weight [3E,
// E], in_proj_bias [3E] (nil without bias), out_proj [E, E] and [E].
type refAttn struct{ w, b, ow, ob []float64 }

func attnParams(m *nn.MultiheadAttention) refAttn {
	r := refAttn{w: m.InProjWeight.Float64s(), ow: m.OutProj.Weight.Float64s()}
	if m.InProjBias != nil {
		r.b, r.ob = m.InProjBias.Float64s(), m.OutProj.Bias.Float64s()
	}
	return r
}

// refAffine returns x Wᵀ + b for w [out, in] (b nil for none).
func refAffine(x []float64, w, b []float64, out int) []float64 {
	in := len(x)
	y := make([]float64, out)
	for o := range out {
		s := 0.0
		if b != nil {
			s = b[o]
		}
		for i := range in {
			s += w[o*in+i] * x[i]
		}
		y[o] = s
	}
	return y
}

// refLayerAttn is multi-head attention of queries q [L][E] over keys and
// values kv [S][E] with h heads; mask(head, i, j) is added to the scores.
// A query whose scores are all -Inf gets a zero attention output (so the
// block returns out_proj's bias), which is what vram documents.
func refLayerAttn(p refAttn, q, kv [][]float64, h int, mask func(head, i, j int) float64) [][]float64 {
	e := len(q[0])
	dh := e / h
	part := func(x []float64, k int) []float64 {
		var b []float64
		if p.b != nil {
			b = p.b[k*e : (k+1)*e]
		}
		return refAffine(x, p.w[k*e*e:(k+1)*e*e], b, e)
	}
	qs, ks, vs := make([][]float64, len(q)), make([][]float64, len(kv)), make([][]float64, len(kv))
	for i := range q {
		qs[i] = part(q[i], 0)
	}
	for j := range kv {
		ks[j], vs[j] = part(kv[j], 1), part(kv[j], 2)
	}
	out := make([][]float64, len(q))
	for i := range q {
		cat := make([]float64, e)
		for hd := range h {
			scores := make([]float64, len(kv))
			top := math.Inf(-1)
			for j := range kv {
				s := 0.0
				for d := hd * dh; d < (hd+1)*dh; d++ {
					s += qs[i][d] * ks[j][d]
				}
				scores[j] = s/math.Sqrt(float64(dh)) + mask(hd, i, j)
				top = math.Max(top, scores[j])
			}
			if math.IsInf(top, -1) {
				continue
			}
			sum := 0.0
			for j := range scores {
				scores[j] = math.Exp(scores[j] - top)
				sum += scores[j]
			}
			for j := range kv {
				for d := hd * dh; d < (hd+1)*dh; d++ {
					cat[d] += scores[j] / sum * vs[j][d]
				}
			}
		}
		out[i] = refAffine(cat, p.ow, p.ob, e)
	}
	return out
}

// refNorm is layer normalisation with the biased variance.
func refNorm(x []float64, w, b []float64, eps float64) []float64 {
	mean, vari := 0.0, 0.0
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		vari += (v - mean) * (v - mean)
	}
	vari /= float64(len(x))
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = (v - mean) / math.Sqrt(vari+eps) * w[i]
		if b != nil {
			y[i] += b[i]
		}
	}
	return y
}

// refFF is linear2(act(linear1(x))).
func refFF(x []float64, w1, b1, w2, b2 []float64, act func(float64) float64) []float64 {
	h := refAffine(x, w1, b1, len(w1)/len(x))
	for i, v := range h {
		h[i] = act(v)
	}
	return refAffine(h, w2, b2, len(x))
}

// refAct returns the activation that a layer's Activation names, or silu
// for a layer given an ActivationFunc (the one the tests give).
func refAct(name string, custom bool) func(float64) float64 {
	switch {
	case custom:
		return func(v float64) float64 { return v / (1 + math.Exp(-v)) }
	case name == "gelu":
		return func(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) }
	}
	return func(v float64) float64 { return math.Max(v, 0) }
}

// refBlock applies x + f(norm(x)) (normFirst) or norm(x + f(x)) to each
// row of x.
func refBlock(x [][]float64, normFirst bool, norm func([]float64) []float64, f func([][]float64) [][]float64) [][]float64 {
	in := x
	if normFirst {
		in = make([][]float64, len(x))
		for i := range x {
			in[i] = norm(x[i])
		}
	}
	y := f(in)
	out := make([][]float64, len(x))
	for i := range x {
		out[i] = make([]float64, len(x[i]))
		for d := range x[i] {
			out[i][d] = x[i][d] + y[i][d]
		}
		if !normFirst {
			out[i] = norm(out[i])
		}
	}
	return out
}

func paramOrNil(t *vram.Tensor) []float64 {
	if t == nil {
		return nil
	}
	return t.Float64s()
}

func normFn(n *nn.LayerNorm) func([]float64) []float64 {
	w, b := n.Weight.Float64s(), paramOrNil(n.Bias)
	return func(x []float64) []float64 { return refNorm(x, w, b, n.Eps) }
}

func ffFn(l1, l2 *nn.Linear, act func(float64) float64) func([][]float64) [][]float64 {
	w1, b1, w2, b2 := l1.Weight.Float64s(), paramOrNil(l1.Bias), l2.Weight.Float64s(), paramOrNil(l2.Bias)
	return func(x [][]float64) [][]float64 {
		out := make([][]float64, len(x))
		for i := range x {
			out[i] = refFF(x[i], w1, b1, w2, b2, act)
		}
		return out
	}
}

// toBatches turns x ([T, N, E], [N, T, E] batch first, or [T, E]) into
// [N][T][E]; fromBatches turns such batches back into x's layout.
func toBatches(x *vram.Tensor, batchFirst bool) [][][]float64 {
	v, s := x.Float64s(), x.Shape()
	if len(s) == 2 {
		s = vram.Shape{s[0], 1, s[1]}
	}
	t, n, e := s[0], s[1], s[2]
	if batchFirst && x.Dim() == 3 {
		n, t = t, n
	}
	out := make([][][]float64, n)
	for b := range n {
		out[b] = make([][]float64, t)
		for i := range t {
			at := (i*n + b) * e
			if batchFirst && x.Dim() == 3 {
				at = (b*t + i) * e
			}
			out[b][i] = v[at : at+e]
		}
	}
	return out
}

func fromBatches(b [][][]float64, batchFirst bool) []float64 {
	n, t, e := len(b), len(b[0]), len(b[0][0])
	out := make([]float64, n*t*e)
	for bi := range n {
		for i := range t {
			at := (i*n + bi) * e
			if batchFirst {
				at = (bi*t + i) * e
			}
			copy(out[at:at+e], b[bi][i])
		}
	}
	return out
}

// refMask returns the additive mask of batch b, head h, query i, key j
// that an attention mask ([L, S] or [N·H, L, S]), a key padding mask
// ([N, S] or [S]) and a causal flag make; bool masks add -Inf where true.
func refMask(attn, pad *vram.Tensor, causal bool, heads int) func(b, h, i, j int) float64 {
	val := func(t *vram.Tensor) []float64 {
		if t == nil {
			return nil
		}
		if t.DType() == vram.Bool {
			out := make([]float64, t.NumElements())
			for k, v := range t.Bools() {
				if v {
					out[k] = math.Inf(-1)
				}
			}
			return out
		}
		return t.Float64s()
	}
	av, pv := val(attn), val(pad)
	return func(b, h, i, j int) float64 {
		m := 0.0
		if av != nil {
			l, s := attn.Size(-2), attn.Size(-1)
			at := i*s + j
			if attn.Dim() == 3 {
				at += (b*heads + h) * l * s
			}
			m += av[at]
		}
		if pv != nil {
			m += pv[b*pad.Size(-1)+j]
		}
		if causal && j > i {
			m += math.Inf(-1)
		}
		return m
	}
}

// randomize gives every parameter of m values drawn from g, so that
// biases and norms, zeros and ones at first, count.
func randomize(m nn.Module, g *rand.Rand) {
	for _, p := range m.Parameters() {
		v := make([]float64, p.NumElements())
		for i := range v {
			v[i] = g.NormFloat64() * 0.5
		}
		set(p, v...)
	}
}

func refEncoder(l *nn.TransformerEncoderLayer, x *vram.Tensor, m nn.EncoderMasks) []float64 {
	sa := attnParams(l.SelfAttn)
	mask := refMask(m.Mask, m.KeyPaddingMask, m.Causal, l.NHead)
	batches := toBatches(x, l.BatchFirst)
	for b, seq := range batches {
		seq = refBlock(seq, l.NormFirst, normFn(l.Norm1), func(x [][]float64) [][]float64 {
			return refLayerAttn(sa, x, x, l.NHead, func(h, i, j int) float64 { return mask(b, h, i, j) })
		})
		batches[b] = refBlock(seq, l.NormFirst, normFn(l.Norm2), ffFn(l.Linear1, l.Linear2, refAct(l.Activation, l.ActivationFunc != nil)))
	}
	return fromBatches(batches, l.BatchFirst)
}

func refDecoder(l *nn.TransformerDecoderLayer, tgt, mem *vram.Tensor, m nn.DecoderMasks) []float64 {
	sa, ca := attnParams(l.SelfAttn), attnParams(l.MultiheadAttn)
	tmask := refMask(m.TgtMask, m.TgtKeyPaddingMask, m.TgtCausal, l.NHead)
	mmask := refMask(m.MemoryMask, m.MemoryKeyPaddingMask, m.MemoryCausal, l.NHead)
	batches, mems := toBatches(tgt, l.BatchFirst), toBatches(mem, l.BatchFirst)
	for b, seq := range batches {
		seq = refBlock(seq, l.NormFirst, normFn(l.Norm1), func(x [][]float64) [][]float64 {
			return refLayerAttn(sa, x, x, l.NHead, func(h, i, j int) float64 { return tmask(b, h, i, j) })
		})
		seq = refBlock(seq, l.NormFirst, normFn(l.Norm2), func(x [][]float64) [][]float64 {
			return refLayerAttn(ca, x, mems[b], l.NHead, func(h, i, j int) float64 { return mmask(b, h, i, j) })
		})
		batches[b] = refBlock(seq, l.NormFirst, normFn(l.Norm3), ffFn(l.Linear1, l.Linear2, refAct(l.Activation, l.ActivationFunc != nil)))
	}
	return fromBatches(batches, l.BatchFirst)
}

// TestTransformerLayersFormula checks the encoder and decoder layers in
// evaluation mode against their definitions, with every parameter
// random, for both norm placements, both activations, without biases,
// another eps, batch first, unbatched inputs and each kind of mask. A
// query whose keys are all masked gets out_proj's bias from its
// attention block (PyTorch's fast path gives 0 there, its general path
// NaN).
func TestTransformerLayersFormula(t *testing.T) {
	const e, heads, n, l, s = 4, 2, 2, 3, 5
	g := vram.NewGenerator(7)
	rnd := func(shape vram.Shape) *vram.Tensor { return vram.Randn(shape, vram.Float64, vram.WithGenerator(g)) }
	boolMask := func(shape vram.Shape, set ...int) *vram.Tensor {
		v := make([]bool, shape.NumElements())
		for _, i := range set {
			v[i] = true
		}
		return vram.FromSlice(v, shape)
	}
	tests := []struct {
		name      string
		o         nn.TransformerOptions
		unbatched bool
		enc       nn.EncoderMasks
		dec       nn.DecoderMasks
	}{
		{name: "post-norm relu", o: nn.TransformerOptions{}},
		{name: "pre-norm gelu batch first", o: nn.TransformerOptions{NormFirst: true, Activation: "gelu", BatchFirst: true},
			enc: nn.EncoderMasks{Mask: rnd(vram.Shape{l, l}), KeyPaddingMask: boolMask(vram.Shape{n, l}, 2)},
			dec: nn.DecoderMasks{TgtMask: rnd(vram.Shape{l, l}), MemoryKeyPaddingMask: boolMask(vram.Shape{n, s}, 1, 9)}},
		{name: "no bias, eps", o: nn.TransformerOptions{NoBias: true, LayerNormEps: 0.3},
			enc: nn.EncoderMasks{Mask: boolMask(vram.Shape{l, l}, 1), Causal: true},
			dec: nn.DecoderMasks{MemoryMask: boolMask(vram.Shape{l, s}, 0, 4, 7), TgtCausal: true, TgtKeyPaddingMask: rnd(vram.Shape{n, l})}},
		{name: "per-head masks", o: nn.TransformerOptions{NormFirst: true},
			enc: nn.EncoderMasks{Mask: rnd(vram.Shape{n * heads, l, l}), KeyPaddingMask: rnd(vram.Shape{n, l})},
			dec: nn.DecoderMasks{TgtMask: boolMask(vram.Shape{n * heads, l, l}, 1, 5, 20), MemoryMask: rnd(vram.Shape{n * heads, l, s}), MemoryCausal: true}},
		{name: "unbatched", o: nn.TransformerOptions{Activation: "gelu"}, unbatched: true,
			enc: nn.EncoderMasks{Mask: rnd(vram.Shape{heads, l, l}), KeyPaddingMask: boolMask(vram.Shape{l}, 0)},
			dec: nn.DecoderMasks{TgtKeyPaddingMask: rnd(vram.Shape{l}), MemoryKeyPaddingMask: boolMask(vram.Shape{s}, 3)}},
		{name: "activation function", o: nn.TransformerOptions{ActivationFunc: (*vram.Tensor).Silu, BatchFirst: true},
			enc: nn.EncoderMasks{Causal: true}, dec: nn.DecoderMasks{TgtCausal: true}},
		// Query 0 of the encoder attends to nothing; so do the decoder's
		// queries of batch 1 in its attention to the memory.
		{name: "fully masked rows", o: nn.TransformerOptions{NormFirst: true},
			enc: nn.EncoderMasks{Mask: boolMask(vram.Shape{l, l}, 0, 1, 2)},
			dec: nn.DecoderMasks{MemoryKeyPaddingMask: boolMask(vram.Shape{n, s}, 5, 6, 7, 8, 9)}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.DimFeedforward = 6
			r := rand.New(rand.NewPCG(uint64(i), 1))
			shape := func(t int) vram.Shape {
				switch {
				case tc.unbatched:
					return vram.Shape{t, e}
				case o.BatchFirst:
					return vram.Shape{n, t, e}
				}
				return vram.Shape{t, n, e}
			}
			enc := nn.NewTransformerEncoderLayer(e, heads, o, vram.Float64)
			enc.Eval()
			randomize(enc, r)
			src := rnd(shape(l))
			got := enc.ForwardMasked(src, tc.enc).Float64s()
			checkValues(t, "encoder layer", got, refEncoder(enc, src, tc.enc), 1e-12)

			dec := nn.NewTransformerDecoderLayer(e, heads, o, vram.Float64)
			dec.Eval()
			randomize(dec, r)
			tgt, mem := rnd(shape(l)), rnd(shape(s))
			got = dec.ForwardMemory(tgt, mem, tc.dec).Float64s()
			checkValues(t, "decoder layer", got, refDecoder(dec, tgt, mem, tc.dec), 1e-12)
		})
	}
}

// TestTransformerEmptySequences runs the layers on sequences and
// batches of length 0: the outputs have the inputs' shapes, and a target
// attending to an empty memory gets out_proj's bias from that block, as
// in PyTorch, where the softmax over no keys is empty and its product
// with no values zero.
func TestTransformerEmptySequences(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 1))
	o := nn.TransformerOptions{DimFeedforward: 6}
	enc := nn.NewTransformerEncoderLayer(4, 2, o, vram.Float64)
	dec := nn.NewTransformerDecoderLayer(4, 2, o, vram.Float64)
	defer nn.Release(enc)
	defer nn.Release(dec)
	enc.Eval()
	dec.Eval()
	randomize(dec, r)
	for _, shape := range []vram.Shape{{0, 2, 4}, {3, 0, 4}, {0, 4}} {
		if got := enc.Forward(vram.Zeros(shape, vram.Float64)); !slices.Equal(got.Shape(), shape) {
			t.Fatalf("encoder output %v for input %v", got.Shape(), shape)
		}
		mem := vram.Zeros(vram.Shape{5, shape[1], 4}, vram.Float64)
		if len(shape) == 2 {
			mem = vram.Zeros(vram.Shape{5, 4}, vram.Float64)
		}
		if got := dec.ForwardMemory(vram.Zeros(shape, vram.Float64), mem, nn.DecoderMasks{}); !slices.Equal(got.Shape(), shape) {
			t.Fatalf("decoder output %v for target %v", got.Shape(), shape)
		}
	}
	tgt := vram.Randn(vram.Shape{3, 2, 4}, vram.Float64)
	mem := vram.Zeros(vram.Shape{0, 2, 4}, vram.Float64)
	got := dec.ForwardMemory(tgt, mem, nn.DecoderMasks{TgtCausal: true})
	checkValues(t, "decoder over an empty memory", got.Float64s(), refDecoder(dec, tgt, mem, nn.DecoderMasks{TgtCausal: true}), 1e-12)
}
