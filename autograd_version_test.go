package vram_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// TestBackwardSeesInPlaceChanges checks PyTorch's version-counter rule: a
// backward pass that would read a tensor its graph saved, modified in
// place since, fails with ErrAutograd rather than giving a wrong gradient;
// a change the graph does not depend on is fine.
func TestBackwardSeesInPlaceChanges(t *testing.T) {
	tests := []struct {
		name    string
		run     func(a, b *vram.Tensor) (loss *vram.Tensor, change func())
		refused bool
	}{
		{"saved operand changed", func(a, b *vram.Tensor) (*vram.Tensor, func()) {
			return a.Mul(b).Sum(), func() { b.MulScalarInPlace(2) }
		}, true},
		{"a view of the saved operand changed", func(a, b *vram.Tensor) (*vram.Tensor, func()) {
			return a.Mul(b).Sum(), func() { b.Narrow(0, 1, 1).FillInPlace(0) }
		}, true},
		{"saved operand overwritten", func(a, b *vram.Tensor) (*vram.Tensor, func()) {
			return a.Mul(b).Sum(), func() { b.CopyFrom(vram.OnesLike(b)) }
		}, true},
		{"saved output changed", func(a, b *vram.Tensor) (*vram.Tensor, func()) {
			e := a.Exp() // saves its output
			var s *vram.Tensor
			vram.NoGrad(func() { s = e.Detach() })
			return e.Sum(), func() { s.AddScalarInPlace(1) }
		}, true},
		{"a saved gradient accumulated into", func(a, b *vram.Tensor) (*vram.Tensor, func()) {
			c := vram.FromSlice([]float64{1, 2, 3}, nil, b.Device(), vram.WithGrad())
			c.Sum().Backward()
			return a.Mul(c.Grad()).Sum(), func() { c.Sum().Backward() } // c.grad += 1
		}, true},
		{"operand not saved (Add)", func(a, b *vram.Tensor) (*vram.Tensor, func()) {
			return a.Add(b).Sum(), func() { b.MulScalarInPlace(2) }
		}, false},
		{"a clone changed", func(a, b *vram.Tensor) (*vram.Tensor, func()) {
			c := b.Clone()
			return a.Mul(c).Sum(), func() { b.MulScalarInPlace(2) }
		}, false},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				vram.Tidy(func() {
					a := vram.FromSlice([]float64{1, 2, 3}, nil, dev, vram.WithGrad())
					b := vram.FromSlice([]float64{10, 20, 30}, nil, dev)
					loss, change := tc.run(a, b)
					change()
					err := vram.Catch(func() { loss.Backward() })
					if !tc.refused {
						if err != nil {
							t.Fatalf("refused: %v", err)
						}
						return
					}
					if !errors.Is(err, vram.ErrAutograd) || !strings.Contains(err.Error(), "modified by an in-place operation") {
						t.Fatalf("error %v, want ErrAutograd about an in-place change", err)
					}
					if a.Grad() != nil {
						t.Errorf("a gradient was stored: %v", a.Grad().Float64s())
					}
				})
			})
		}
	}
}

// TestStepBeforeBackwardRefused checks that a parameter updated by an
// optimizer (fused or composed) after a graph saved it cannot be used by
// that graph's backward pass, as in PyTorch.
func TestStepBeforeBackwardRefused(t *testing.T) {
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		t.Run(dev.String(), func(t *testing.T) {
			w := vram.FromSlice([]float64{1, 2}, nil, dev, vram.WithGrad())
			defer w.Release()
			x := vram.FromSlice([]float64{3, 4}, nil, dev, vram.WithGrad())
			defer x.Release()
			opt, err := optim.NewSGD([]*vram.Tensor{w}, optim.SGDConfig{LR: 0.1, Momentum: 0.9})
			if err != nil {
				t.Fatal(err)
			}
			defer opt.Release()
			vram.Tidy(func() {
				loss := w.Mul(x).Sum() // saves w for x's gradient
				loss.Backward(vram.RetainGraph())
				opt.Step()
				err := vram.Catch(func() { loss.Backward() })
				if !errors.Is(err, vram.ErrAutograd) {
					t.Errorf("backward after the step: %v, want ErrAutograd", err)
				}
			})
		})
	}
}

// TestRefusedInPlaceKeepsGraph checks that an in-place operation refused
// with an error (a dtype it cannot write, a shape that does not broadcast)
// writes nothing and so leaves usable the graphs that saved its tensor.
func TestRefusedInPlaceKeepsGraph(t *testing.T) {
	tests := []struct {
		name   string
		change func(k *vram.Tensor)
	}{
		{"div_ of an integer tensor", func(k *vram.Tensor) { k.DivInPlace(vram.FullLike(k, 2, vram.Float64)) }},
		{"mul_ of an integer tensor by a fraction", func(k *vram.Tensor) { k.MulScalarInPlace(0.5) }},
		{"add_ of a float into an integer tensor", func(k *vram.Tensor) { k.AddInPlace(vram.OnesLike(k, vram.Float32)) }},
		{"add_ of a shape that does not broadcast", func(k *vram.Tensor) { k.AddInPlace(vram.Ones(vram.Shape{2}, vram.Int64, k.Device())) }},
		{"copy_ of a shape that does not broadcast", func(k *vram.Tensor) { k.CopyFrom(vram.Ones(vram.Shape{2}, vram.Int64, k.Device())) }},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				vram.Tidy(func() {
					x := vram.FromSlice([]float64{1, 2, 3}, nil, dev, vram.WithGrad())
					k := vram.FromSlice([]int64{4, 5, 6}, nil, dev)
					loss := x.Mul(k).Sum() // saves k
					if err := vram.Catch(func() { tc.change(k) }); err == nil {
						t.Fatal("the in-place operation was not refused")
					}
					if got := k.Int64s(); !slices.Equal(got, []int64{4, 5, 6}) {
						t.Fatalf("refused operation wrote %v", got)
					}
					if err := vram.Catch(func() { loss.Backward() }); err != nil {
						t.Fatalf("backward after a refused in-place operation: %v", err)
					}
					if got := x.Grad().Float64s(); !slices.Equal(got, []float64{4, 5, 6}) {
						t.Errorf("gradient %v, want [4 5 6]", got)
					}
				})
			})
		}
	}
}

// TestEvalBatchNormKeepsItsStatistics checks that the backward pass of a
// batch normalization in evaluation mode uses the running statistics that
// normalized its input, unaffected by a training step that updates them in
// place before it runs (as when a model is evaluated and trained within
// one step).
func TestEvalBatchNormKeepsItsStatistics(t *testing.T) {
	tests := []struct {
		name string
		bn   func(x, w, b, rm, rv *vram.Tensor, training bool) *vram.Tensor
	}{
		{"BatchNorm2d", func(x, w, b, rm, rv *vram.Tensor, training bool) *vram.Tensor {
			return vram.BatchNorm2d(x, w, b, rm, rv, training, 0.5, 1e-5)
		}},
		{"BatchNorm2dReLU", func(x, w, b, rm, rv *vram.Tensor, training bool) *vram.Tensor {
			return vram.BatchNorm2dReLU(x, nil, w, b, rm, rv, training, 0.5, 1e-5)
		}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				vram.Tidy(func() {
					x := vram.FromSlice([]float32{1, -2, 3, 4, 5, -6, 7, 8}, vram.Shape{1, 2, 2, 2}, dev)
					gradW := func(train bool) []float32 {
						w := vram.FromSlice([]float32{1.5, 2}, nil, dev, vram.WithGrad())
						b := vram.FromSlice([]float32{0.5, 1}, nil, dev, vram.WithGrad())
						rm := vram.FromSlice([]float32{0.5, -1}, nil, dev)
						rv := vram.FromSlice([]float32{2, 3}, nil, dev)
						loss := tc.bn(x, w, b, rm, rv, false).Sum()
						if train {
							tc.bn(x, w, b, rm, rv, true) // updates rm and rv in place
						}
						if err := vram.Catch(func() { loss.Backward() }); err != nil {
							t.Fatalf("backward: %v", err)
						}
						return w.Grad().Float32s()
					}
					want := gradW(false)
					if got := gradW(true); !slices.Equal(got, want) {
						t.Errorf("weight gradient %v after a training step, want %v", got, want)
					}
				})
			})
		}
	}
}
