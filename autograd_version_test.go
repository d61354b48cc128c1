package vram_test

import (
	"errors"
	"fmt"
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

// TestInPlaceOnComputedTensor checks every in-place method on a tensor
// computed from a leaf (h = 3x) with an operand y that requires grad: the
// write is recorded as the out-of-place operation, so both get PyTorch's
// gradients, and h keeps its storage.
func TestInPlaceOnComputedTensor(t *testing.T) {
	tests := []struct {
		name         string
		op           func(h, y *vram.Tensor)
		gradX, gradY []float64 // of h.Sum(), for x = [1, 2], y = [4, 5]
	}{
		{"AddInPlace", func(h, y *vram.Tensor) { h.AddInPlace(y) }, []float64{3, 3}, []float64{1, 1}},
		{"SubInPlace", func(h, y *vram.Tensor) { h.SubInPlace(y) }, []float64{3, 3}, []float64{-1, -1}},
		{"MulInPlace", func(h, y *vram.Tensor) { h.MulInPlace(y) }, []float64{12, 15}, []float64{3, 6}},
		{"DivInPlace", func(h, y *vram.Tensor) { h.DivInPlace(y) }, []float64{3.0 / 4, 3.0 / 5}, []float64{-3.0 / 16, -6.0 / 25}},
		{"AddScaledInPlace", func(h, y *vram.Tensor) { h.AddScaledInPlace(y, 0.5) }, []float64{3, 3}, []float64{0.5, 0.5}},
		{"AddScalarInPlace", func(h, _ *vram.Tensor) { h.AddScalarInPlace(1) }, []float64{3, 3}, nil},
		{"MulScalarInPlace", func(h, _ *vram.Tensor) { h.MulScalarInPlace(2) }, []float64{6, 6}, nil},
		{"FillInPlace", func(h, _ *vram.Tensor) { h.FillInPlace(1) }, []float64{0, 0}, nil},
		{"CopyFrom", func(h, y *vram.Tensor) { h.CopyFrom(y) }, []float64{0, 0}, []float64{1, 1}},
		{"CopyFrom another device", func(h, y *vram.Tensor) { h.CopyFrom(y.To(vram.Sim(1))) }, []float64{0, 0}, []float64{1, 1}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				vram.Tidy(func() {
					x := vram.FromSlice([]float64{1, 2}, nil, dev, vram.WithGrad())
					y := vram.FromSlice([]float64{4, 5}, nil, dev, vram.WithGrad())
					h := x.MulScalar(3)
					before := h.Version()
					tc.op(h, y)
					if h.Version() == before {
						t.Error("the write did not count in the version counter")
					}
					if h.IsLeaf() || !h.RequiresGrad() {
						t.Fatal("h is no longer a computed tensor")
					}
					h.Sum().Backward()
					if got := x.Grad().Float64s(); !near(got, tc.gradX) {
						t.Errorf("x gradient %v, want %v", got, tc.gradX)
					}
					if tc.gradY == nil {
						return
					}
					if y.Grad() == nil {
						t.Fatalf("y got no gradient, want %v", tc.gradY)
					}
					if got := y.Grad().Float64s(); !near(got, tc.gradY) {
						t.Errorf("y gradient %v, want %v", got, tc.gradY)
					}
				})
			})
		}
	}
}

func near(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(p, q float64) bool { return p-q < 1e-12 && q-p < 1e-12 })
}

// TestInPlaceRefusals checks the in-place operations that autograd refuses,
// as PyTorch does or where vram does not record them yet: each refusal is
// an ErrAutograd naming the reason, and leaves the tensor's values,
// version and graph as they were.
func TestInPlaceRefusals(t *testing.T) {
	tests := []struct {
		name   string
		target func(x *vram.Tensor) *vram.Tensor // the tensor written
		want   string
	}{
		{"a leaf that requires grad", func(x *vram.Tensor) *vram.Tensor { return x }, "leaf"},
		{"a view of a leaf that requires grad", func(x *vram.Tensor) *vram.Tensor { return x.Narrow(0, 0, 2) }, "view"},
		{"a view of a computed tensor", func(x *vram.Tensor) *vram.Tensor { return x.MulScalar(2).Narrow(0, 1, 2) }, "view"},
		{"a reshaped computed tensor", func(x *vram.Tensor) *vram.Tensor { return x.MulScalar(2).Reshape(3, 1) }, "view"},
		{"a computed tensor that has a view", func(x *vram.Tensor) *vram.Tensor {
			h := x.MulScalar(2)
			h.Transpose(0, 0)
			return h
		}, "view"},
	}
	writes := []struct {
		name string
		fn   func(t, y *vram.Tensor)
	}{
		{"AddInPlace", func(t, y *vram.Tensor) { t.AddInPlace(y) }},
		{"SubInPlace", func(t, y *vram.Tensor) { t.SubInPlace(y) }},
		{"MulInPlace", func(t, y *vram.Tensor) { t.MulInPlace(y) }},
		{"DivInPlace", func(t, y *vram.Tensor) { t.DivInPlace(y) }},
		{"AddScaledInPlace", func(t, y *vram.Tensor) { t.AddScaledInPlace(y, 2) }},
		{"AddScalarInPlace", func(t, _ *vram.Tensor) { t.AddScalarInPlace(1) }},
		{"MulScalarInPlace", func(t, _ *vram.Tensor) { t.MulScalarInPlace(2) }},
		{"FillInPlace", func(t, _ *vram.Tensor) { t.FillInPlace(7) }},
		{"CopyFrom", func(t, y *vram.Tensor) { t.CopyFrom(y) }},
	}
	for _, tc := range tests {
		for _, w := range writes {
			t.Run(tc.name+"/"+w.name, func(t *testing.T) {
				vram.Tidy(func() {
					x := vram.FromSlice([]float64{1, 2, 3}, nil, vram.Sim(0), vram.WithGrad())
					y := vram.FromSlice([]float64{5}, nil, vram.Sim(0))
					target := tc.target(x)
					vals, version, fn := target.Float64s(), target.Version(), target.GradFn()
					err := vram.Catch(func() { w.fn(target, y) })
					if !errors.Is(err, vram.ErrAutograd) || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("error %v, want ErrAutograd about a %s", err, tc.want)
					}
					if got := target.Float64s(); !slices.Equal(got, vals) {
						t.Errorf("refused write changed %v to %v", vals, got)
					}
					if target.Version() != version || target.GradFn() != fn {
						t.Errorf("refused write changed the version (%d, was %d) or graph (%q, was %q)",
							target.Version(), version, target.GradFn(), fn)
					}
					// Inside NoGrad the write goes through, unrecorded.
					vram.NoGrad(func() { w.fn(target, y) })
					if target.GradFn() != fn {
						t.Errorf("a write inside NoGrad changed the graph to %q, was %q", target.GradFn(), fn)
					}
				})
			})
		}
	}
}

// TestInPlaceAfterSave checks PyTorch's outcomes where a recorded in-place
// operation overwrites values that a graph saved: the backward pass that
// needs them fails, one that does not runs, and a detached view of the
// tensor sees the write.
func TestInPlaceAfterSave(t *testing.T) {
	tests := []struct {
		name    string
		run     func(x *vram.Tensor) *vram.Tensor // returns the loss
		refused bool
	}{
		{"exp saved its result", func(x *vram.Tensor) *vram.Tensor {
			h := x.Exp()
			h.MulScalarInPlace(2)
			return h.Sum()
		}, true},
		{"mul saved the tensor for the other operand", func(x *vram.Tensor) *vram.Tensor {
			h := x.MulScalar(2)
			p := x.Mul(h)
			h.AddScalarInPlace(1)
			return p.Sum().Add(h.Sum())
		}, true},
		{"h.MulInPlace(h) saves h itself", func(x *vram.Tensor) *vram.Tensor {
			h := x.MulScalar(2)
			h.MulInPlace(h)
			return h.Sum()
		}, true},
		{"add saved nothing", func(x *vram.Tensor) *vram.Tensor {
			h := x.MulScalar(2)
			p := x.Add(h)
			h.AddScalarInPlace(1)
			return p.Sum().Add(h.Sum())
		}, false},
		{"a detached view sees the write", func(x *vram.Tensor) *vram.Tensor {
			h := x.MulScalar(2)
			d := h.Detach()
			h.MulScalarInPlace(3)
			if got := d.Float64s(); !slices.Equal(got, []float64{6, 12, 18}) {
				panic("the detached view reads " + fmt.Sprint(got))
			}
			return h.Sum()
		}, false},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				vram.Tidy(func() {
					x := vram.FromSlice([]float64{1, 2, 3}, nil, dev, vram.WithGrad())
					loss := tc.run(x)
					err := vram.Catch(func() { loss.Backward() })
					if !tc.refused {
						if err != nil {
							t.Fatal(err)
						}
						return
					}
					if !errors.Is(err, vram.ErrAutograd) || !strings.Contains(err.Error(), "modified by an in-place operation") {
						t.Fatalf("error %v, want ErrAutograd about an in-place change", err)
					}
					if x.Grad() != nil {
						t.Errorf("a gradient was stored: %v", x.Grad().Float64s())
					}
				})
			})
		}
	}
}

// TestInPlaceMovesRetainGrad checks that RetainGrad follows a tensor into
// its new version after an in-place operation, as in PyTorch, while a hook
// registered before sees the gradient with respect to the old values.
func TestInPlaceMovesRetainGrad(t *testing.T) {
	vram.Tidy(func() {
		x := vram.FromSlice([]float64{1, 2}, nil, vram.CPU, vram.WithGrad())
		h := x.MulScalar(3)
		h.RetainGrad()
		var hooked []float64
		h.RegisterHook(func(g *vram.Tensor) *vram.Tensor { hooked = g.Float64s(); return nil })
		h.MulScalarInPlace(2)
		if !h.RetainsGrad() {
			t.Fatal("RetainsGrad is false after the in-place operation")
		}
		h.MulScalar(5).Sum().Backward()
		if got := h.Grad().Float64s(); !slices.Equal(got, []float64{5, 5}) {
			t.Errorf("retained gradient %v, want [5 5]", got)
		}
		if !slices.Equal(hooked, []float64{10, 10}) {
			t.Errorf("hook saw %v, want [10 10]", hooked)
		}
	})
}

// TestInPlaceThroughDetachWithViews checks that a recorded write through a
// Detach view that has views of its own is refused, since those views'
// graphs would miss the write (PyTorch records it through them), and that
// the write is recorded once the views are released, or when the only
// other tensor on the storage is the one Detach was called on.
func TestInPlaceThroughDetachWithViews(t *testing.T) {
	views := []struct {
		name string
		make func(d *vram.Tensor) *vram.Tensor // a view of d, or nil
	}{
		{"no view", func(d *vram.Tensor) *vram.Tensor { return nil }},
		{"Narrow", func(d *vram.Tensor) *vram.Tensor { return d.Narrow(0, 0, 2) }},
		{"Reshape", func(d *vram.Tensor) *vram.Tensor { return d.Reshape(3, 1) }},
		{"a view of a view", func(d *vram.Tensor) *vram.Tensor {
			v := d.Narrow(0, 1, 2)
			defer v.Release()
			return v.Unsqueeze(0)
		}},
	}
	writes := []struct {
		name string
		fn   func(t, w *vram.Tensor)
	}{
		{"AddInPlace", func(t, w *vram.Tensor) { t.AddInPlace(w) }},
		{"SubInPlace", func(t, w *vram.Tensor) { t.SubInPlace(w) }},
		{"MulInPlace", func(t, w *vram.Tensor) { t.MulInPlace(w) }},
		{"DivInPlace", func(t, w *vram.Tensor) { t.DivInPlace(w) }},
		{"AddScaledInPlace", func(t, w *vram.Tensor) { t.AddScaledInPlace(w, 2) }},
		{"CopyFrom", func(t, w *vram.Tensor) { t.CopyFrom(w) }},
	}
	for _, vc := range views {
		for _, wc := range writes {
			t.Run(vc.name+"/"+wc.name, func(t *testing.T) {
				vram.Tidy(func() {
					x := vram.FromSlice([]float64{1, 2, 3}, nil, vram.Sim(0))
					w := vram.FromSlice([]float64{2}, nil, vram.Sim(0), vram.WithGrad())
					d := x.Detach()
					v := vc.make(d)
					if v != nil {
						vals := d.Float64s()
						err := vram.Catch(func() { wc.fn(d, w) })
						if !errors.Is(err, vram.ErrAutograd) || !strings.Contains(err.Error(), "Detach view") {
							t.Fatalf("error %v, want ErrAutograd about a Detach view with views", err)
						}
						if got := d.Float64s(); !slices.Equal(got, vals) || d.Version() != 0 || d.RequiresGrad() {
							t.Fatalf("refused write changed %v to %v (version %d, requires grad %v)", vals, got, d.Version(), d.RequiresGrad())
						}
						v.Release()
					}
					// With no view left, the write is recorded.
					wc.fn(d, w)
					if !d.RequiresGrad() {
						t.Fatal("the write was not recorded")
					}
					d.Sum().Backward()
					if w.Grad() == nil {
						t.Fatal("w got no gradient")
					}
				})
			})
		}
	}
}
