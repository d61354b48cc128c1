package nn

import (
	"fmt"
	"slices"

	"github.com/vramgo/vram"
)

// LocalResponseNorm normalizes each element of its input [N, C, *] by the
// activity of the neighbouring channels (torch.nn.LocalResponseNorm):
// x / (K + Alpha·a)^Beta, where a is the sum of the squares over a window
// of Size channels around the element's (Size/2 before it, (Size−1)/2
// after, zeros outside) divided by Size.
type LocalResponseNorm struct {
	Base
	// Size is the number of channels in a window.
	Size int
	// Alpha, Beta and K are PyTorch's alpha, beta and k, used as they
	// are: a zero is zero, not PyTorch's default (1e-4, 0.75 and 1), so
	// torch.nn.LocalResponseNorm(size) is NewLocalResponseNorm(size,
	// 1e-4, 0.75, 1).
	Alpha, Beta, K float64
}

// NewLocalResponseNorm returns a LocalResponseNorm over windows of size
// channels. It panics with an *vram.Error of kind vram.ErrArgument for a
// size below 1 or an alpha, beta or k that is not finite.
func NewLocalResponseNorm(size int, alpha, beta, k float64) *LocalResponseNorm {
	l := &LocalResponseNorm{Size: size, Alpha: alpha, Beta: beta, K: k}
	l.check()
	return l
}

// check panics as [NewLocalResponseNorm] does for a Size that is not
// positive or an Alpha, Beta or K that is not finite.
func (l *LocalResponseNorm) check() {
	const op = "local_response_norm"
	if l.Size < 1 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("size must be positive, got %d", l.Size)})
	}
	checkFinite(op, "alpha", l.Alpha)
	checkFinite(op, "beta", l.Beta)
	checkFinite(op, "k", l.K)
}

// Forward returns the normalized x, of x's shape. It panics with an
// *vram.Error of kind vram.ErrShape for an x of fewer than 3 dimensions,
// as PyTorch does, and as [NewLocalResponseNorm] does for settings
// changed since to what it refuses.
func (l *LocalResponseNorm) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "local_response_norm", "LocalResponseNorm")
	const op = "local_response_norm"
	defer asOp(op)
	notNil(op, x)
	l.check()
	if x.Dim() < 3 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects 3 or more dimensions, got shape %v", x.Shape())})
	}
	var ts temps
	defer ts.release()
	sq := ts.add(x.Square())
	c := x.Size(1)
	pad := func(n int) *vram.Tensor {
		s := slices.Clone(x.Shape())
		s[1] = n
		return ts.add(sq.NewZeros(s))
	}
	padded := ts.add(vram.Cat([]*vram.Tensor{pad(l.Size / 2), sq, pad((l.Size - 1) / 2)}, 1))
	sum := ts.add(padded.Narrow(1, 0, c))
	for i := 1; i < l.Size; i++ {
		sum = ts.add(sum.Add(ts.add(padded.Narrow(1, i, c))))
	}
	div := ts.add(ts.add(ts.add(sum.MulScalar(l.Alpha / float64(l.Size))).AddScalar(l.K)).PowScalar(l.Beta))
	return x.Div(div)
}
