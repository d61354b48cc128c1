package vram

// Triu returns a copy of t with the elements below the diagonal-th
// diagonal of its last two dimensions set to zero (false for bool)
// (torch.triu): element [..., i, j] is kept when j - i >= diagonal.
// Diagonal 0 is the main diagonal, positive ones lie above it. Gradients
// flow to the kept elements. It panics with [ErrShape] for t of fewer
// than 2 dimensions.
func (t *Tensor) Triu(diagonal int) *Tensor { return t.tri("triu", diagonal, true) }

// Tril returns a copy of t with the elements above the diagonal-th
// diagonal of its last two dimensions set to zero (false for bool)
// (torch.tril): element [..., i, j] is kept when j - i <= diagonal. A
// causal attention mask is Ones(Shape{L, L}, Bool).Tril(0). Gradients and
// errors are as for [Tensor.Triu].
func (t *Tensor) Tril(diagonal int) *Tensor { return t.tri("tril", diagonal, false) }

// tri zeroes the elements of t on the wrong side of the diagonal.
func (t *Tensor) tri(op string, diagonal int, upper bool) *Tensor {
	defer asOp(op)
	notNil(op, t)
	t.live(op)
	if len(t.shape) < 2 {
		fail(op, ErrShape, "needs at least 2 dimensions, got shape %v", Shape(t.shape))
	}
	r, c := t.shape[len(t.shape)-2], t.shape[len(t.shape)-1]
	var drop *Tensor
	NoGrad(func() {
		Tidy(func() {
			rows := Arange(0, float64(r), 1, Int64, t.Device()).Unsqueeze(1).AddScalar(float64(diagonal))
			cols := Arange(0, float64(c), 1, Int64, t.Device())
			if upper {
				drop = Keep(cols.Lt(rows)) // j < i + diagonal
			} else {
				drop = Keep(cols.Gt(rows)) // j > i + diagonal
			}
		})
	})
	defer drop.Release()
	return t.MaskedFill(drop, 0)
}
