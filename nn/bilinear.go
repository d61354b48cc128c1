package nn

import (
	"fmt"
	"slices"

	"github.com/vramgo/vram"
)

// Bilinear applies y = x1ᵀ A x2 + b to pairs of inputs (torch.nn.Bilinear):
// y[o] = Σ_ij x1[i]·Weight[o, i, j]·x2[j] + Bias[o].
type Bilinear struct {
	Base
	// Weight is [out, in1, in2] ("weight") and Bias [out] ("bias"), or nil
	// for a layer made by NewBilinearNoBias; both start uniform in
	// [−1/√in1, 1/√in1), as PyTorch's.
	Weight, Bias *vram.Tensor
}

// NewBilinear returns a Bilinear layer from in1 and in2 features to out.
// opts go to vram's factory functions. It panics with an *vram.Error of
// kind vram.ErrArgument for a negative size.
func NewBilinear(in1, in2, out int, opts ...vram.Option) *Bilinear {
	l := NewBilinearNoBias(in1, in2, out, opts...)
	l.Bias = uniformParam(vram.Shape{out}, linearBound(in1), opts)
	l.RegisterParameterField("bias", &l.Bias)
	return l
}

// NewBilinearNoBias returns a Bilinear layer without a bias (bias=False),
// as [NewBilinear] does.
func NewBilinearNoBias(in1, in2, out int, opts ...vram.Option) *Bilinear {
	if in1 < 0 || in2 < 0 || out < 0 {
		panic(&vram.Error{Op: "bilinear", Kind: vram.ErrArgument, Detail: fmt.Sprintf("sizes must not be negative, got %d, %d and %d", in1, in2, out)})
	}
	l := &Bilinear{Weight: uniformParam(vram.Shape{out, in1, in2}, linearBound(in1), opts)}
	l.RegisterParameterField("weight", &l.Weight)
	return l
}

// Forward returns ForwardPair(x, x), for a layer whose two inputs have
// the same number of features.
func (l *Bilinear) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "bilinear", "Bilinear")
	return l.ForwardPair(x, x)
}

// ForwardPair returns the layer applied to x1 [..., in1] and x2
// [..., in2], of shape [..., out]. It panics with an *vram.Error of kind
// vram.ErrShape unless x1 and x2 have the layer's features and the same
// leading dimensions, and for a Weight or Bias set since construction to
// a tensor that is not 3-D [out, in1, in2] or [out].
func (l *Bilinear) ForwardPair(x1, x2 *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "bilinear", "Bilinear")
	const op = "bilinear"
	defer asOp(op)
	notNil(op, x1)
	notNil(op, x2)
	notNil(op, l.Weight)
	ws := l.Weight.Shape()
	if len(ws) != 3 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("weight must be 3-D [out, in1, in2], got shape %v", ws)})
	}
	out, in1, in2 := ws[0], ws[1], ws[2]
	if l.Bias != nil && !slices.Equal(l.Bias.Shape(), vram.Shape{out}) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("bias must be [%d], the weight's out, got shape %v", out, l.Bias.Shape())})
	}
	s1, s2 := x1.Shape(), x2.Shape()
	if len(s1) < 1 || len(s2) < 1 || s1[len(s1)-1] != in1 || s2[len(s2)-1] != in2 || !slices.Equal(s1[:len(s1)-1], s2[:len(s2)-1]) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects inputs [..., %d] and [..., %d] with the same leading dimensions, got %v and %v", in1, in2, s1, s2)})
	}
	lead := s1[:len(s1)-1]
	var ts temps
	defer ts.release()
	mw, mb, done := l.maskedParams(l.Weight, l.Bias)
	defer done()
	// x1 [B, in1] times the weight as [in1, out·in2] gives, for every
	// row and output, x1ᵀA as [B, out, in2]; its product with x2 summed
	// over in2 is the bilinear form.
	a := ts.add(x1.Reshape(-1, in1))
	b := ts.add(x2.Reshape(-1, 1, in2))
	w := ts.add(ts.add(mw.Permute(1, 0, 2)).Reshape(in1, out*in2))
	t := ts.add(ts.add(a.MatMul(w)).Reshape(-1, out, in2))
	y := ts.add(ts.add(t.Mul(b)).Sum(-1))
	if mb != nil {
		y = ts.add(y.Add(mb))
	}
	return ts.keep(ts.add(y.Reshape(append(slices.Clone(lead), out)...)))
}
