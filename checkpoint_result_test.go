package vram

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestCheckpointCapturedResult pins a checkpointed function that returns a
// tensor it captured from elsewhere (a cached constant) rather than one it
// computed: that tensor stays as the caller made it (no graph, not
// released by the backward pass), and the result is a new view of it.
func TestCheckpointCapturedResult(t *testing.T) {
	for _, multi := range []bool{false, true} {
		name := "Checkpoint"
		if multi {
			name = "CheckpointMulti"
		}
		t.Run(name, func(t *testing.T) {
			c := FromSlice([]float64{1, 2, 3}, nil)
			defer c.Release()
			x := FromSlice([]float64{4, 5, 6}, nil, WithGrad())
			defer x.Release()
			var out *Tensor
			if multi {
				outs := CheckpointMulti(func(xs []*Tensor) []*Tensor { return []*Tensor{c, xs[0].MulScalar(2)} }, []*Tensor{x})
				out = outs[0]
				defer outs[1].Release()
			} else {
				out = Checkpoint(func(*Tensor) *Tensor { return c }, x)
			}
			defer out.Release()
			if out == c {
				t.Errorf("the result is the captured tensor itself, want a new view of it")
			}
			if c.RequiresGrad() {
				t.Errorf("the captured tensor requires grad after the checkpoint")
			}
			s := out.Sum()
			defer s.Release()
			if err := Catch(func() {
				if s.RequiresGrad() {
					s.Backward()
				}
			}); err != nil {
				t.Errorf("Backward: %v", err)
			}
			if c.Released() {
				t.Fatalf("the backward pass released the captured tensor")
			}
			if got := c.Float64s(); !slices.Equal(got, []float64{1, 2, 3}) {
				t.Errorf("captured tensor %v, want [1 2 3]", got)
			}
		})
	}
}

// TestCheckpointRecomputeDType pins a recompute that gives a result of
// another dtype than the forward gave: Backward refuses it with ErrDType,
// as PyTorch's checkpoint refuses recomputed values whose metadata
// changed, instead of converting the gradient silently.
func TestCheckpointRecomputeDType(t *testing.T) {
	for _, multi := range []bool{false, true} {
		name := "Checkpoint"
		if multi {
			name = "CheckpointMulti"
		}
		t.Run(name, func(t *testing.T) {
			x := FromSlice([]float32{1, 2, 3}, nil, WithGrad())
			defer x.Release()
			calls := 0
			fn := func(x *Tensor) *Tensor {
				calls++
				if calls == 2 {
					return x.Cast(Float64).MulScalar(3)
				}
				return x.MulScalar(2)
			}
			var out *Tensor
			if multi {
				out = CheckpointMulti(func(xs []*Tensor) []*Tensor { return []*Tensor{fn(xs[0])} }, []*Tensor{x})[0]
			} else {
				out = Checkpoint(fn, x)
			}
			defer out.Release()
			s := out.Sum()
			defer s.Release()
			err := Catch(func() { s.Backward() })
			if !errors.Is(err, ErrDType) {
				t.Errorf("Backward with a recompute of another dtype: %v, want an error matching ErrDType", err)
			}
			if x.Grad() != nil {
				t.Errorf("x has gradient %v after the refused Backward", x.Grad())
			}
		})
	}
}

// TestCheckpointWarnsOfUnlistedLeaves: when fn uses a leaf that requires
// grad but neither x nor params does, Checkpoint cannot tell that it must
// record, so fn runs as it is and keeps its activations; it says so once
// with a warning that names the fix, and stays quiet when the leaf is
// listed or nothing requires grad.
func TestCheckpointWarnsOfUnlistedLeaves(t *testing.T) {
	var warned []Warning
	defer SetWarningHandler(SetWarningHandler(func(w Warning) { warned = append(warned, w) }))
	Tidy(func() {
		p := Ones(Shape{3}, WithGrad())
		q := Ones(Shape{3})
		x := Ones(Shape{3})
		fn := func(w *Tensor) func(*Tensor) *Tensor {
			return func(x *Tensor) *Tensor { return x.Mul(w).Exp() }
		}
		multi := func(w *Tensor) func([]*Tensor) []*Tensor {
			return func(xs []*Tensor) []*Tensor { return []*Tensor{xs[0].Mul(w).Exp()} }
		}
		Checkpoint(fn(p), x, p)
		Checkpoint(fn(q), x)
		CheckpointMulti(multi(p), []*Tensor{x}, p)
		CheckpointMulti(multi(q), []*Tensor{x})
		if len(warned) != 0 {
			t.Fatalf("warnings with the leaf listed or none requiring grad: %v", warned)
		}
		for range 2 {
			y := Checkpoint(fn(p), x)
			if !y.RequiresGrad() {
				t.Errorf("the result of fn using an unlisted leaf does not require grad")
			}
		}
		CheckpointMulti(multi(p), []*Tensor{x})
	})
	if len(warned) != 2 || !strings.Contains(warned[0].Message, "params") {
		t.Errorf("warnings %v, want one per call site, naming params", warned)
	}
}
