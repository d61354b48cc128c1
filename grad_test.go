package vram

import (
	"errors"
	"math"
	"testing"
)

// TestGrad checks Grad against hand-computed gradients, and that it stores
// nothing in any leaf or retained gradient.
func TestGrad(t *testing.T) {
	tests := []struct {
		name string
		// run builds a graph from w = [1, 2] and v = [3, 4] (both leaves
		// requiring grad) and calls Grad.
		run  func(w, v *Tensor) []*Tensor
		want [][]float64 // nil entry: nil result
	}{
		{"leaf", func(w, v *Tensor) []*Tensor {
			return Grad([]*Tensor{w.Mul(w).Sum()}, []*Tensor{w}) // 2w
		}, [][]float64{{2, 4}}},
		{"two inputs", func(w, v *Tensor) []*Tensor {
			return Grad([]*Tensor{w.Mul(v).Sum()}, []*Tensor{w, v})
		}, [][]float64{{3, 4}, {1, 2}}},
		{"same input twice", func(w, v *Tensor) []*Tensor {
			return Grad([]*Tensor{w.Sum()}, []*Tensor{w, w})
		}, [][]float64{{1, 1}, {1, 1}}},
		{"non-leaf input", func(w, v *Tensor) []*Tensor {
			h := w.MulScalar(3)
			return Grad([]*Tensor{h.Mul(h).Sum()}, []*Tensor{h}) // 2h = 6w
		}, [][]float64{{6, 12}}},
		{"non-leaf and the leaf under it", func(w, v *Tensor) []*Tensor {
			h := w.MulScalar(3)
			return Grad([]*Tensor{h.Mul(h).Sum()}, []*Tensor{h, w}) // 6w, 18w
		}, [][]float64{{6, 12}, {18, 36}}},
		{"several outputs add up", func(w, v *Tensor) []*Tensor {
			return Grad([]*Tensor{w.Sum(), w.Mul(w).Sum()}, []*Tensor{w}) // 1 + 2w
		}, [][]float64{{3, 5}}},
		{"grad outputs", func(w, v *Tensor) []*Tensor {
			y := w.Mul(v)
			return Grad([]*Tensor{y}, []*Tensor{w}, GradOutputs(FromSlice([]float64{10, 100}, nil)))
		}, [][]float64{{30, 400}}},
		{"grad outputs with a nil for a scalar", func(w, v *Tensor) []*Tensor {
			return Grad([]*Tensor{w.MulScalar(2), v.Sum()}, []*Tensor{w, v},
				GradOutputs(FromSlice([]float64{1, -1}, nil), nil))
		}, [][]float64{{2, -2}, {1, 1}}},
		{"Gradient for one output", func(w, v *Tensor) []*Tensor {
			return Grad([]*Tensor{w.MulScalar(5)}, []*Tensor{w}, Gradient(FromSlice([]float64{1, 2}, nil)))
		}, [][]float64{{5, 10}}},
		{"output is the input", func(w, v *Tensor) []*Tensor {
			return Grad([]*Tensor{w}, []*Tensor{w}, GradOutputs(FromSlice([]float64{7, 8}, nil)))
		}, [][]float64{{7, 8}}},
		{"leaf output and a path to it", func(w, v *Tensor) []*Tensor {
			return Grad([]*Tensor{w, w.MulScalar(2)}, []*Tensor{w}, GradOutputs(w.NewOnes(Shape{2}), w.NewOnes(Shape{2})))
		}, [][]float64{{3, 3}}},
		{"unused allowed", func(w, v *Tensor) []*Tensor {
			return Grad([]*Tensor{w.Sum()}, []*Tensor{v, w}, AllowUnused())
		}, [][]float64{nil, {1, 1}}},
		{"only the part between outputs and inputs runs", func(w, v *Tensor) []*Tensor {
			h := w.Exp() // not on the path to h: Exp's backward must not run
			return Grad([]*Tensor{h.Mul(v).Sum()}, []*Tensor{v})
		}, [][]float64{{math.E, math.Exp(2)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := FromSlice([]float64{1, 2}, nil, WithGrad())
				v := FromSlice([]float64{3, 4}, nil, WithGrad())
				got := tc.run(w, v)
				if len(got) != len(tc.want) {
					t.Fatalf("%d results, want %d", len(got), len(tc.want))
				}
				for i, g := range got {
					if tc.want[i] == nil {
						if g != nil {
							t.Errorf("result %d = %v, want nil", i, g.Float64s())
						}
						continue
					}
					if g == nil {
						t.Fatalf("result %d is nil, want %v", i, tc.want[i])
					}
					if g.RequiresGrad() {
						t.Errorf("result %d requires grad", i)
					}
					closeTo(t, "gradient", g.Float64s(), tc.want[i], 1e-12)
				}
				if w.Grad() != nil || v.Grad() != nil {
					t.Errorf("Grad accumulated into a leaf: w.Grad()=%v v.Grad()=%v", w.Grad(), v.Grad())
				}
			})
		})
	}
}

// TestGradStoresNothing: RetainGrad tensors, post-accumulate hooks and
// leaves off the path see nothing, while RegisterHook hooks on the path
// run once, in graph order, and may replace the gradient.
func TestGradStoresNothing(t *testing.T) {
	Tidy(func() {
		w := FromSlice([]float64{1, 2}, nil, WithGrad())
		var order []string
		w.RegisterHook(func(g *Tensor) *Tensor { order = append(order, "w"); return g.MulScalar(10) })
		w.RegisterPostAccumulateGradHook(func(*Tensor) { order = append(order, "post") })
		h := w.MulScalar(3)
		h.RetainGrad()
		h.RegisterHook(func(g *Tensor) *Tensor { order = append(order, "h"); return nil })
		got := Grad([]*Tensor{h.Sum()}, []*Tensor{w}, RetainGraph())
		closeTo(t, "hooked gradient", got[0].Float64s(), []float64{30, 30}, 0)
		if want := []string{"h", "w"}; len(order) != 2 || order[0] != want[0] || order[1] != want[1] {
			t.Errorf("hooks ran %v, want %v", order, want)
		}
		if h.Grad() != nil || w.Grad() != nil {
			t.Errorf("Grad stored a gradient: h %v, w %v", h.Grad(), w.Grad())
		}
		// The graph is still there for Backward, which does store.
		h.Sum().Backward()
		closeTo(t, "Backward after Grad", w.Grad().Float64s(), []float64{30, 30}, 0)
	})
}

// TestGradRefusals: bad calls fail before anything runs, with the right
// kind, and the graph is still usable after them.
func TestGradRefusals(t *testing.T) {
	tests := []struct {
		name string
		call func(w, v, loss *Tensor)
		kind error
	}{
		{"no outputs", func(w, v, loss *Tensor) { Grad(nil, []*Tensor{w}) }, ErrArgument},
		{"no inputs", func(w, v, loss *Tensor) { Grad([]*Tensor{loss}, nil) }, ErrArgument},
		{"nil output", func(w, v, loss *Tensor) { Grad([]*Tensor{nil}, []*Tensor{w}) }, ErrArgument},
		{"nil input", func(w, v, loss *Tensor) { Grad([]*Tensor{loss}, []*Tensor{nil}) }, ErrArgument},
		{"nil option", func(w, v, loss *Tensor) { Grad([]*Tensor{loss}, []*Tensor{w}, nil) }, ErrArgument},
		{"unused input", func(w, v, loss *Tensor) { Grad([]*Tensor{loss}, []*Tensor{w, v}) }, ErrAutograd},
		{"input without grad", func(w, v, loss *Tensor) { Grad([]*Tensor{loss}, []*Tensor{Ones(Shape{2})}) }, ErrAutograd},
		{"output without grad", func(w, v, loss *Tensor) { Grad([]*Tensor{Ones(Shape{})}, []*Tensor{w}) }, ErrAutograd},
		{"non-scalar output without a seed", func(w, v, loss *Tensor) { Grad([]*Tensor{w.MulScalar(2)}, []*Tensor{w}) }, ErrShape},
		{"too few grad outputs", func(w, v, loss *Tensor) { Grad([]*Tensor{loss, loss}, []*Tensor{w}, GradOutputs(nil)) }, ErrArgument},
		{"seed of another shape", func(w, v, loss *Tensor) { Grad([]*Tensor{loss}, []*Tensor{w}, GradOutputs(Ones(Shape{2}))) }, ErrShape},
		{"seed on another device", func(w, v, loss *Tensor) { Grad([]*Tensor{loss}, []*Tensor{w}, GradOutputs(Ones(Shape{}, Sim(0)))) }, ErrDevice},
		{"integer seed", func(w, v, loss *Tensor) { Grad([]*Tensor{loss}, []*Tensor{w}, GradOutputs(Ones(Shape{}, Int64))) }, ErrDType},
		{"Gradient and GradOutputs", func(w, v, loss *Tensor) {
			Grad([]*Tensor{loss}, []*Tensor{w}, Gradient(Ones(Shape{})), GradOutputs(Ones(Shape{})))
		}, ErrArgument},
		{"Gradient for two outputs", func(w, v, loss *Tensor) { Grad([]*Tensor{loss, loss}, []*Tensor{w}, Gradient(Ones(Shape{}))) }, ErrArgument},
		{"Backward with GradOutputs", func(w, v, loss *Tensor) { loss.Backward(GradOutputs(Ones(Shape{}))) }, ErrArgument},
		{"Backward with AllowUnused", func(w, v, loss *Tensor) { loss.Backward(AllowUnused()) }, ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := FromSlice([]float64{1, 2}, nil, WithGrad())
				v := FromSlice([]float64{3, 4}, nil, WithGrad())
				loss := w.Mul(w).Sum()
				err := Catch(func() { tc.call(w, v, loss) })
				if !errors.Is(err, tc.kind) {
					t.Fatalf("got %v, want %v", err, tc.kind)
				}
				if w.Grad() != nil {
					t.Errorf("refused call stored a gradient %v", w.Grad().Float64s())
				}
				g := Grad([]*Tensor{loss}, []*Tensor{w})
				closeTo(t, "gradient after the refused call", g[0].Float64s(), []float64{2, 4}, 0)
			})
		})
	}
}

// TestGradRetainGraph follows retain_graph: without it a second Grad or
// Backward through the nodes that ran fails with ErrAutograd (and loses
// nothing: the refused Grad runs no node), with it both work.
func TestGradRetainGraph(t *testing.T) {
	tests := []struct {
		name   string
		retain bool
		second func(loss, w *Tensor)
		kind   error // nil: the second call works
	}{
		{"Grad twice", false, func(loss, w *Tensor) { Grad([]*Tensor{loss}, []*Tensor{w}) }, ErrAutograd},
		{"Grad then Backward", false, func(loss, w *Tensor) { loss.Backward() }, ErrAutograd},
		{"Grad twice retained", true, func(loss, w *Tensor) { Grad([]*Tensor{loss}, []*Tensor{w}) }, nil},
		{"Grad then Backward retained", true, func(loss, w *Tensor) { loss.Backward() }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := FromSlice([]float64{1, 2}, nil, WithGrad())
				loss := w.Mul(w).Sum()
				var opts []BackwardOption
				if tc.retain {
					opts = append(opts, RetainGraph())
				}
				Grad([]*Tensor{loss}, []*Tensor{w}, opts...)
				err := Catch(func() { tc.second(loss, w) })
				if !errors.Is(err, tc.kind) && (err != nil || tc.kind != nil) {
					t.Fatalf("second call: %v, want %v", err, tc.kind)
				}
			})
		})
	}
	t.Run("refused before any node runs", func(t *testing.T) {
		Tidy(func() {
			w := FromSlice([]float64{1, 2}, nil, WithGrad())
			h := w.Mul(w)
			Grad([]*Tensor{h.Sum()}, []*Tensor{h}) // runs only the sum
			loss := h.Sum().Add(w.Exp().Sum())
			Grad([]*Tensor{loss}, []*Tensor{w}, RetainGraph()) // through h's mul, which did not run
			if err := Catch(func() { Grad([]*Tensor{h.Sum()}, []*Tensor{w}) }); err != nil {
				t.Fatalf("h's graph: %v", err)
			}
		})
	})
}

// TestGradMatchesFiniteDifferences compares Grad through a small network
// with central differences.
func TestGradMatchesFiniteDifferences(t *testing.T) {
	f := func(x, w *Tensor) *Tensor { return x.MatMul(w).Tanh().Mul(x.MatMul(w)).Sum() }
	xs := []float64{0.1, -0.3, 0.5, 0.7, -0.2, 0.4}
	ws := []float64{0.3, -0.1, 0.2, 0.6, -0.5, 0.05}
	Tidy(func() {
		x := FromSlice(xs, Shape{2, 3}, WithGrad())
		w := FromSlice(ws, Shape{3, 2}, WithGrad())
		g := Grad([]*Tensor{f(x, w)}, []*Tensor{x, w})
		for k, vals := range [][]float64{xs, ws} {
			got := g[k].Float64s()
			for i := range vals {
				const eps = 1e-6
				at := func(d float64) float64 {
					c := append([]float64(nil), vals...)
					c[i] += d
					if k == 0 {
						return f(FromSlice(c, Shape{2, 3}), FromSlice(ws, Shape{3, 2})).Item()
					}
					return f(FromSlice(xs, Shape{2, 3}), FromSlice(c, Shape{3, 2})).Item()
				}
				want := (at(eps) - at(-eps)) / (2 * eps)
				if math.Abs(got[i]-want) > 1e-6 {
					t.Errorf("input %d element %d: %g, finite differences %g", k, i, got[i], want)
				}
			}
		}
	})
}

// TestGradDType: results have their inputs' dtypes, also through mixed
// dtypes and a float32 seed of a float64 output.
func TestGradDType(t *testing.T) {
	Tidy(func() {
		h := FromSlice([]float64{1, 2}, nil, Float16, WithGrad())
		f := FromSlice([]float64{3, 4}, nil, Float32, WithGrad())
		y := h.Mul(f)
		g := Grad([]*Tensor{y}, []*Tensor{h, f}, GradOutputs(FromSlice([]float64{1, 1}, nil, Float64)))
		if g[0].DType() != Float16 || g[1].DType() != Float32 {
			t.Fatalf("dtypes %s %s, want float16 float32", g[0].DType(), g[1].DType())
		}
		closeTo(t, "float16", g[0].Float64s(), []float64{3, 4}, 0)
		closeTo(t, "float32", g[1].Float64s(), []float64{1, 2}, 0)
	})
}

// TestGradThroughCheckpoint: Grad returns the gradients with respect to a
// checkpoint's input and params and stores none, while Backward through
// the same kind of graph stores them all, unlisted leaves included.
func TestGradThroughCheckpoint(t *testing.T) {
	tests := []struct {
		name   string
		grad   bool // Grad, else Backward
		listed bool // w in params
	}{
		{"Grad, w listed", true, true},
		{"Grad, w captured", true, false},
		{"Backward, w listed", false, true},
		{"Backward, w captured", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				x := FromSlice([]float64{1, 2}, nil, WithGrad())
				w := FromSlice([]float64{3, 4}, nil, WithGrad())
				var params []*Tensor
				if tc.listed {
					params = []*Tensor{w, w} // a duplicate counts once
				}
				fn := func(x *Tensor) *Tensor { return x.Mul(w).Mul(x) } // x² w
				loss := Checkpoint(fn, x, params...).Sum()
				wantX, wantW := []float64{6, 16}, []float64{1, 4}
				if !tc.grad {
					loss.Backward()
					closeTo(t, "x.Grad()", x.Grad().Float64s(), wantX, 0)
					closeTo(t, "w.Grad()", w.Grad().Float64s(), wantW, 0)
					return
				}
				g := Grad([]*Tensor{loss}, []*Tensor{x, w}, AllowUnused())
				closeTo(t, "dx", g[0].Float64s(), wantX, 0)
				switch {
				case tc.listed:
					closeTo(t, "dw", g[1].Float64s(), wantW, 0)
				case g[1] != nil:
					t.Errorf("dw = %v for a leaf not in params, want nil", g[1].Float64s())
				}
				if x.Grad() != nil || w.Grad() != nil {
					t.Errorf("Grad stored x.Grad()=%v w.Grad()=%v", x.Grad(), w.Grad())
				}
			})
		})
	}
}

// TestConcurrentGrad runs Grad and Backward on several goroutines through
// graphs that share leaves, and a retained graph they all walk.
func TestConcurrentGrad(t *testing.T) {
	const workers, steps = 4, 10
	a := FromSlice([]float64{1, 2, 3}, nil, WithGrad())
	b := FromSlice([]float64{0.5, 1, 2}, nil, WithGrad())
	defer a.Release()
	defer b.Release()
	var shared *Tensor
	Tidy(func() { shared = Keep(a.Mul(b).Sum()) })
	defer shared.Release()
	errs := make(chan error, workers)
	for i := range workers {
		go func() {
			errs <- Catch(func() {
				for range steps {
					Tidy(func() {
						l := a.Mul(a).Mul(b).Sum() // d/da = 2ab, d/db = a²
						if i%2 == 0 {
							l.Backward()
							return
						}
						g := Grad([]*Tensor{l, shared}, []*Tensor{a, b}, RetainGraph())
						ga, gb := g[0].Float64s(), g[1].Float64s()
						if ga[2] != 2*3*2+2 || gb[2] != 9+3 {
							panic(&Error{Op: "test", Kind: ErrArgument, Detail: "wrong gradient"})
						}
					})
				}
			})
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Only the Backward calls accumulated: (workers/2)*steps times 2ab.
	if got, want := a.Grad().Float64s()[2], float64(workers/2*steps)*2*3*2; got != want {
		t.Errorf("a.Grad()[2] = %g, want %g", got, want)
	}
}

// TestSecondBackwardLosesNothing: a Backward or Grad through a node that an
// earlier Backward freed fails with ErrAutograd before anything runs, so
// that no other leaf is left holding part of a gradient.
func TestSecondBackwardLosesNothing(t *testing.T) {
	tests := []struct {
		name string
		loss func(m, c *Tensor) *Tensor
		grad bool
	}{
		{"freed branch first", func(m, c *Tensor) *Tensor { return m.Sum().Add(c.Exp().Sum()) }, false},
		{"freed branch last", func(m, c *Tensor) *Tensor { return c.Exp().Sum().Add(m.Sum()) }, false},
		{"Grad", func(m, c *Tensor) *Tensor { return m.Sum().Add(c.Exp().Sum()) }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				a := FromSlice([]float64{1, 2}, nil, WithGrad())
				c := FromSlice([]float64{1, 2}, nil, WithGrad())
				m := a.Mul(a)
				m.Sum().Backward() // frees m's node
				a.ZeroGrad()
				l := tc.loss(m, c)
				err := Catch(func() {
					if tc.grad {
						Grad([]*Tensor{l}, []*Tensor{a, c})
					} else {
						l.Backward()
					}
				})
				if !errors.Is(err, ErrAutograd) {
					t.Fatalf("got %v, want ErrAutograd", err)
				}
				if c.Grad() != nil || a.Grad() != nil {
					t.Errorf("refused Backward left gradients: c %v, a %v", c.Grad(), a.Grad())
				}
				// The part of the graph that was not freed still works.
				g := Grad([]*Tensor{c.Exp().Sum()}, []*Tensor{c})
				closeTo(t, "dc", g[0].Float64s(), []float64{math.E, math.Exp(2)}, 1e-12)
			})
		})
	}
}

// TestChangedSavedTensorLosesNothing checks that a Backward or Grad
// refused because a tensor its graph saved was changed in place since is
// refused before any node runs: no leaf is left holding part of a
// gradient, and the nodes the refused walk would have gone through before
// reaching the stale one are not freed, so that the rest of the graph
// still gives its gradients.
func TestChangedSavedTensorLosesNothing(t *testing.T) {
	tests := []struct {
		name string
		run  func(l, p, q *Tensor)
		op   string
	}{
		{"Backward", func(l, p, q *Tensor) { l.Backward() }, "backward"},
		{"Backward retained", func(l, p, q *Tensor) { l.Backward(RetainGraph()) }, "backward"},
		{"Grad", func(l, p, q *Tensor) { Grad([]*Tensor{l}, []*Tensor{p, q}) }, "grad"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				p := FromSlice([]float64{1, 2}, nil, WithGrad())
				q := FromSlice([]float64{3, 4}, nil, WithGrad())
				h := p.Sin() // saves p
				l := h.Mul(q).Sum()
				NoGrad(func() { p.MulScalarInPlace(2) })
				err := Catch(func() { tc.run(l, p, q) })
				var e *Error
				if !errors.As(err, &e) || !errors.Is(err, ErrAutograd) || e.Op != tc.op {
					t.Fatalf("got %v, want ErrAutograd from %s", err, tc.op)
				}
				if q.Grad() != nil || p.Grad() != nil {
					t.Errorf("refused walk left gradients: q %v, p %v", q.Grad(), p.Grad())
				}
				// The sum and the mul did not run: the gradient with
				// respect to h is still there.
				var g []*Tensor
				if err := Catch(func() { g = Grad([]*Tensor{l}, []*Tensor{h}) }); err != nil {
					t.Fatalf("the graph above the stale node: %v", err)
				}
				closeTo(t, "dh", g[0].Float64s(), []float64{3, 4}, 1e-12)
			})
		})
	}
}

// TestGradOfTensorWhoseNodeRan checks that Grad with respect to a tensor
// computed by an operation needs only the nodes between the outputs and
// that tensor, as torch.autograd.grad does: that tensor's own node may
// have gone through a Backward without RetainGraph, or saved a tensor
// changed in place since, and its RegisterHook hooks run on the gradient
// all the same, as they stay with the graph.
func TestGradOfTensorWhoseNodeRan(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(p, h *Tensor)
	}{
		{"node ran", func(p, h *Tensor) { h.Sum().Backward() }},
		{"node's saved tensor changed", func(p, h *Tensor) { NoGrad(func() { p.MulScalarInPlace(2) }) }},
		{"node ran retained", func(p, h *Tensor) { h.Sum().Backward(RetainGraph()) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				p := FromSlice([]float64{1, 2}, nil, WithGrad())
				q := FromSlice([]float64{3, 4}, nil, WithGrad())
				h := p.Sin()
				calls := 0
				h.RegisterHook(func(g *Tensor) *Tensor { calls++; return g.MulScalar(10) })
				tc.spoil(p, h)
				before := calls
				l := h.Mul(q).Sum()
				var g []*Tensor
				if err := Catch(func() { g = Grad([]*Tensor{l}, []*Tensor{h}) }); err != nil {
					t.Fatalf("Grad: %v", err)
				}
				if calls != before+1 {
					t.Errorf("h's hook ran %d times in Grad, want once", calls-before)
				}
				closeTo(t, "dh", g[0].Float64s(), []float64{30, 40}, 1e-12)
			})
		})
	}
}
