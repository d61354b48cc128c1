package vram_test

import (
	"errors"
	"strings"
	"testing"

	. "github.com/vramgo/vram"
)

// TestBackwardWithoutGradSaysWhy checks that Backward and Grad of a tensor
// that does not require grad name the reason when it is one they can see:
// an integer or bool result, which never carries a gradient, or a tensor
// computed inside InferenceMode. The generic hint about WithGrad and NoGrad
// sends the caller looking in the wrong place for those.
func TestBackwardWithoutGradSaysWhy(t *testing.T) {
	for _, dev := range []Device{CPU, Sim(0)} {
		leaf := func() *Tensor { return FromSlice([]float32{1.5, -2.5}, Shape{2}, dev, WithGrad()) }
		cases := []struct {
			name string
			out  func() *Tensor
			want string
		}{
			{"int cast", func() *Tensor { return leaf().Cast(Int64).Sum() }, "int64"},
			{"bool compare", func() *Tensor { return leaf().Gt(leaf()).Any() }, "bool"},
			{"argmax", func() *Tensor { return leaf().ArgMax(0, false) }, "int64"},
			{"inference mode", func() *Tensor {
				var l *Tensor
				InferenceMode(func() { l = leaf().Mul(leaf()).Sum() })
				return l
			}, "InferenceMode"},
			{"no grad", func() *Tensor {
				var l *Tensor
				NoGrad(func() { l = leaf().Sum() })
				return l
			}, "NoGrad"},
			{"plain", func() *Tensor { return FromSlice([]float32{1}, Shape{1}, dev) }, "WithGrad"},
		}
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				out := c.out()
				for _, run := range []struct {
					op string
					fn func()
				}{
					{"backward", func() { out.Backward() }},
					{"grad", func() { Grad([]*Tensor{out}, []*Tensor{leaf()}) }},
				} {
					err := Catch(run.fn)
					if !errors.Is(err, ErrAutograd) {
						t.Fatalf("%s: got %v, want ErrAutograd", run.op, err)
					}
					if !strings.Contains(err.Error(), c.want) {
						t.Errorf("%s: %q does not mention %q", run.op, err, c.want)
					}
				}
			})
		}
	}
}
