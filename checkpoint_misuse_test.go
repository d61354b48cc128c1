package vram

import (
	"errors"
	"testing"
)

// TestCheckpointRefusesReleasedTensors: a released tensor among params, or
// one the checkpointed function returns, makes Checkpoint and
// CheckpointMulti panic with ErrReleased for "checkpoint" at once, with
// params checked before fn runs, rather than recording a graph node over
// freed memory that fails later, far from the mistake, or handing the
// released tensor back.
func TestCheckpointRefusesReleasedTensors(t *testing.T) {
	type call func(fn func(x *Tensor) *Tensor, x *Tensor, params ...*Tensor) *Tensor
	single := func(fn func(x *Tensor) *Tensor, x *Tensor, params ...*Tensor) *Tensor {
		return Checkpoint(fn, x, params...)
	}
	multi := func(fn func(x *Tensor) *Tensor, x *Tensor, params ...*Tensor) *Tensor {
		return CheckpointMulti(func(xs []*Tensor) []*Tensor { return []*Tensor{fn(xs[0])} }, []*Tensor{x}, params...)[0]
	}
	tests := []struct {
		name      string
		call      call
		xGrad     bool // whether x requires grad (the recording path even without w)
		goneParam bool // pass a released tensor in params
		goneOut   bool // fn returns a released tensor
		runs      bool // whether fn runs before the refusal
	}{
		{"Checkpoint released param", single, false, true, false, false},
		{"Checkpoint released param beside x requiring grad", single, true, true, false, false},
		{"Checkpoint released result", single, false, false, true, true},
		{"Checkpoint released result without grad", nil, false, false, true, true},
		{"CheckpointMulti released param", multi, false, true, false, false},
		{"CheckpointMulti released result", multi, false, false, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := Ones(Shape{2}, WithGrad())
				gone := Ones(Shape{2}, WithGrad())
				gone.Release()
				x := Ones(Shape{2})
				if tc.xGrad {
					x.SetRequiresGrad(true)
				}
				params := []*Tensor{w}
				if tc.goneParam {
					params = append(params, gone)
				}
				call := tc.call
				if call == nil {
					call = single
					params = nil
				}
				ran := false
				fn := func(x *Tensor) *Tensor {
					ran = true
					y := x.Mul(w)
					if tc.goneOut {
						y.Release()
					}
					return y
				}
				err := Catch(func() { call(fn, x, params...) })
				var e *Error
				if !errors.Is(err, ErrReleased) || !errors.As(err, &e) || e.Op != "checkpoint" {
					t.Fatalf("got %v, want an *Error of kind ErrReleased for checkpoint", err)
				}
				if ran != tc.runs {
					t.Errorf("fn ran: %v, want %v", ran, tc.runs)
				}
				if w.Grad() != nil || x.Grad() != nil {
					t.Error("a refused checkpoint left a gradient")
				}
			})
		})
	}
}

// TestCheckpointRefusesZeroTensors: a zero Tensor (&Tensor{}, made
// without a factory) in params or among fn's results is refused with
// ErrArgument for "checkpoint", as a nil x is, rather than skipped as a
// param that does not require grad, or failing inside another op.
func TestCheckpointRefusesZeroTensors(t *testing.T) {
	tests := []struct {
		name string
		call func(w, x *Tensor)
	}{
		{"Checkpoint param", func(w, x *Tensor) {
			Checkpoint(func(x *Tensor) *Tensor { return x.Mul(w) }, x, w, &Tensor{})
		}},
		{"Checkpoint result", func(w, x *Tensor) {
			Checkpoint(func(x *Tensor) *Tensor { return &Tensor{} }, x, w)
		}},
		{"CheckpointMulti param", func(w, x *Tensor) {
			CheckpointMulti(func(xs []*Tensor) []*Tensor { return []*Tensor{xs[0].Mul(w)} }, []*Tensor{x}, &Tensor{})
		}},
		{"CheckpointMulti result", func(w, x *Tensor) {
			CheckpointMulti(func(xs []*Tensor) []*Tensor { return []*Tensor{xs[0].Mul(w), {}} }, []*Tensor{x}, w)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := Ones(Shape{2}, WithGrad())
				x := Ones(Shape{2})
				err := Catch(func() { tc.call(w, x) })
				var e *Error
				if !errors.Is(err, ErrArgument) || !errors.As(err, &e) || e.Op != "checkpoint" {
					t.Fatalf("got %v, want an *Error of kind ErrArgument for checkpoint", err)
				}
				if w.Grad() != nil {
					t.Error("a refused checkpoint left a gradient")
				}
			})
		})
	}
}
