package vram

import (
	"slices"
	"testing"
)

// partsSpy records how a node made with recordParts, and one made with
// recordInto on its output, got their gradients.
type partsSpy struct {
	calls, inParts int // backward runs, and those that got two parts
	into           int // recordInto runs that were given a tensor to add to
}

// partsOp returns a copy of x whose node takes its gradient in parts,
// passing g (+ g2) on to x.
func partsOp(x *Tensor, spy *partsSpy) *Tensor {
	var y *Tensor
	NoGrad(func() { y = x.Clone() })
	recordParts("parts", y, []*Tensor{x}, nil, func(g, g2 *Tensor) []*Tensor {
		spy.calls++
		if g2 != nil {
			spy.inParts++
			return []*Tensor{g.Add(g2)}
		}
		return []*Tensor{g.Clone()}
	})
	return y
}

// intoOp returns x·k, whose backward adds into x's gradient so far when
// the engine gives it one.
func intoOp(x *Tensor, k float64, spy *partsSpy) *Tensor {
	var y *Tensor
	NoGrad(func() { y = x.MulScalar(k) })
	recordInto("into", y, []*Tensor{x}, nil, func(g, into *Tensor) []*Tensor {
		if into != nil {
			spy.into++
			NoGrad(func() { into.AddInPlace(g.MulScalar(k)) })
			return []*Tensor{into}
		}
		return []*Tensor{g.MulScalar(k)}
	})
	return y
}

func TestGradientInParts(t *testing.T) {
	tests := []struct {
		name string
		// run builds on y (partsOp of x = [1, 2]) and runs the backward
		// pass; it returns x's gradient.
		run      func(x, y *Tensor, spy *partsSpy) *Tensor
		want     []float64
		inParts  int // backward runs of y's node that got two parts
		wantInto int
		notRun   bool // y's node is not on the way
	}{
		{"one use", func(x, y *Tensor, spy *partsSpy) *Tensor {
			y.MulScalar(3).Sum().Backward()
			return x.Grad()
		}, []float64{3, 3}, 0, 0, false},
		{"two uses", func(x, y *Tensor, spy *partsSpy) *Tensor {
			y.MulScalar(2).Add(y.MulScalar(3)).Sum().Backward()
			return x.Grad()
		}, []float64{5, 5}, 1, 0, false},
		{"added to itself", func(x, y *Tensor, spy *partsSpy) *Tensor {
			y.Add(y).Sum().Backward()
			return x.Grad()
		}, []float64{2, 2}, 1, 0, false},
		{"three uses", func(x, y *Tensor, spy *partsSpy) *Tensor {
			y.MulScalar(2).Add(y.MulScalar(3)).Add(y.Mul(y)).Sum().Backward()
			return x.Grad()
		}, []float64{7, 9}, 1, 0, false},
		{"an adding node leaves the sum to the parts", func(x, y *Tensor, spy *partsSpy) *Tensor {
			a := intoOp(y, 3, spy) // runs after y·2, which is made later
			a.Add(y.MulScalar(2)).Sum().Backward()
			return x.Grad()
		}, []float64{5, 5}, 1, 0, false},
		{"a hook sees the sum", func(x, y *Tensor, spy *partsSpy) *Tensor {
			var seen []float64
			y.RegisterHook(func(g *Tensor) *Tensor { seen = g.Float64s(); return nil })
			y.MulScalar(2).Add(y.MulScalar(3)).Sum().Backward()
			if !slices.Equal(seen, []float64{5, 5}) {
				t.Errorf("hook saw %v, want [5 5]", seen)
			}
			return x.Grad()
		}, []float64{5, 5}, 0, 0, false},
		{"RetainGrad keeps the sum", func(x, y *Tensor, spy *partsSpy) *Tensor {
			y.RetainGrad()
			y.MulScalar(2).Add(y.MulScalar(3)).Sum().Backward()
			if got := y.Grad().Float64s(); !slices.Equal(got, []float64{5, 5}) {
				t.Errorf("y.Grad() = %v, want [5 5]", got)
			}
			return x.Grad()
		}, []float64{5, 5}, 0, 0, false},
		{"Grad", func(x, y *Tensor, spy *partsSpy) *Tensor {
			return Grad([]*Tensor{y.MulScalar(2).Add(y.MulScalar(3)).Sum()}, []*Tensor{x})[0]
		}, []float64{5, 5}, 0, 0, false},
		{"Grad of the node's output", func(x, y *Tensor, spy *partsSpy) *Tensor {
			gy := Grad([]*Tensor{y.MulScalar(2).Add(y.MulScalar(3)).Sum()}, []*Tensor{y})[0]
			if got := gy.Float64s(); !slices.Equal(got, []float64{5, 5}) {
				t.Errorf("Grad(y) = %v, want [5 5]", got)
			}
			return FromSlice([]float64{5, 5}, Shape{2})
		}, []float64{5, 5}, 0, 0, true},
		{"mixed dtypes", func(x, y *Tensor, spy *partsSpy) *Tensor {
			y.MulScalar(2).Add(y.Cast(Float64).MulScalar(3).Cast(Float32)).Sum().Backward()
			return x.Grad()
		}, []float64{5, 5}, 1, 0, false},
		{"adding node without parts", func(x, y *Tensor, spy *partsSpy) *Tensor {
			z := y.MulScalar(1)
			a := intoOp(z, 3, spy)
			a.Add(z.MulScalar(2)).Sum().Backward()
			return x.Grad()
		}, []float64{5, 5}, 0, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := FromSlice([]float32{1, 2}, Shape{2}).SetRequiresGrad(true)
			spy := &partsSpy{}
			y := partsOp(x, spy)
			g := tc.run(x, y, spy)
			if g == nil {
				t.Fatal("no gradient")
			}
			if got := g.Float64s(); !slices.Equal(got, tc.want) {
				t.Errorf("gradient %v, want %v", got, tc.want)
			}
			calls := 1
			if tc.notRun {
				calls = 0
			}
			if spy.calls != calls || spy.inParts != tc.inParts {
				t.Errorf("y's backward ran %d times, %d in parts; want once, %d in parts", spy.calls, spy.inParts, tc.inParts)
			}
			if spy.into != tc.wantInto {
				t.Errorf("the adding node was given a tensor %d times, want %d", spy.into, tc.wantInto)
			}
		})
	}
}
