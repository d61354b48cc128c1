package vram

import (
	"errors"
	"slices"
	"testing"
)

// TestCheckpointReleasesForwardActivations: the tensors a checkpointed
// function computes and drops are gone once Checkpoint returns, even
// inside a caller's Tidy and when fn releases nothing itself (as a
// PyTorch user writes it), while the gradients stay those of the plain
// computation.
func TestCheckpointReleasesForwardActivations(t *testing.T) {
	d := Sim(0)
	const n = 64 // a [n, n] float32 block is 16 KiB
	block := int64(n * n * 4)
	tests := []struct {
		name string
		fn   func(w *Tensor) func(x *Tensor) *Tensor
		// live is the number of [n, n] blocks Checkpoint's result may
		// add: the result itself, or nothing when it is a view of x or w.
		live int64
	}{
		{"three activations", func(w *Tensor) func(*Tensor) *Tensor {
			return func(x *Tensor) *Tensor { return x.MatMul(w).Relu().MatMul(w).Tanh() }
		}, 1},
		{"nested", func(w *Tensor) func(*Tensor) *Tensor {
			return func(x *Tensor) *Tensor {
				inner := Checkpoint(func(y *Tensor) *Tensor { return y.MatMul(w).Relu() }, x.Tanh(), w)
				return inner.MatMul(w).Sigmoid()
			}
		}, 1},
		{"returns x", func(w *Tensor) func(*Tensor) *Tensor {
			return func(x *Tensor) *Tensor { x.MatMul(w).Relu(); return x }
		}, 0},
		{"returns the weight", func(w *Tensor) func(*Tensor) *Tensor {
			return func(x *Tensor) *Tensor { x.MatMul(w).Relu(); return w }
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			grads := func(ckpt bool) []float64 {
				w := Randn(Shape{n, n}, d, WithGenerator(NewGenerator(1))).MulScalar(0.1).SetRequiresGrad(true)
				defer w.Release()
				x := Randn(Shape{n, n}, d, WithGenerator(NewGenerator(2))).SetRequiresGrad(true)
				defer x.Release()
				settle(d)
				base := MemoryAllocated(d)
				Tidy(func() {
					var y *Tensor
					if ckpt {
						y = Checkpoint(tc.fn(w), x, w)
						if got := MemoryAllocated(d) - base; got > tc.live*block {
							t.Errorf("%d bytes live after Checkpoint, want at most %d", got, tc.live*block)
						}
					} else {
						y = tc.fn(w)(x)
					}
					y.Mul(y).Sum().Backward()
				})
				var out []float64
				for _, g := range []*Tensor{w.Grad(), x.Grad()} {
					if g != nil {
						out = append(out, g.Float64s()...)
					}
					out = append(out, -1) // a separator
				}
				return out
			}
			if plain, ck := grads(false), grads(true); !slices.Equal(plain, ck) {
				t.Error("checkpointed gradients differ from the plain ones")
			}
		})
	}
}

// TestCheckpointMulti compares CheckpointMulti with the plain computation:
// results, and gradients from Backward and from Grad, for a function of
// two inputs (one without grad) with three results, a dropout draw inside,
// on the CPU and a simulated device.
func TestCheckpointMulti(t *testing.T) {
	fn := func(w *Tensor) func(xs []*Tensor) []*Tensor {
		return func(xs []*Tensor) []*Tensor {
			a, mask := xs[0], xs[1]
			h := a.MatMul(w).Tanh()
			d := h.Mul(Rand(h.Shape(), h.Device()).GtScalar(0.5).Cast(h.DType())) // a dropout mask
			return []*Tensor{d.Mul(mask), h.Sum(), a}
		}
	}
	tests := []struct {
		name string
		dev  Device
		grad bool // Grad, else Backward
		use  []int
	}{
		{"cpu, all results", CPU, false, []int{0, 1, 2}},
		{"cpu, one result", CPU, false, []int{1}},
		{"sim, all results", Sim(0), false, []int{0, 1, 2}},
		{"cpu, Grad", CPU, true, []int{0, 1, 2}},
		{"sim, Grad of two", Sim(0), true, []int{0, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := func(ck bool) (outs [][]float64, grads [][]float64) {
				Tidy(func() {
					w := FromSlice([]float64{0.5, -0.2, 0.3, 0.8, -0.6, 0.1}, Shape{3, 2}, tc.dev, WithGrad())
					a := FromSlice([]float64{1, -2, 0.5, 0.3, 0.7, -1}, Shape{2, 3}, tc.dev, WithGrad())
					mask := FromSlice([]float64{1, 0, 1, 1}, Shape{2, 2}, tc.dev)
					ManualSeed(42)
					var ys []*Tensor
					if ck {
						ys = CheckpointMulti(fn(w), []*Tensor{a, mask}, w)
					} else {
						ys = fn(w)([]*Tensor{a, mask})
					}
					loss := Scalar(0, tc.dev, Float64)
					for _, i := range tc.use {
						loss = loss.Add(ys[i].Mul(ys[i]).Sum())
					}
					for _, y := range ys {
						outs = append(outs, y.Float64s())
					}
					if tc.grad {
						for _, g := range Grad([]*Tensor{loss}, []*Tensor{a, w}) {
							grads = append(grads, g.Float64s())
						}
						if a.Grad() != nil || w.Grad() != nil {
							t.Errorf("checkpoint=%v: Grad stored a gradient", ck)
						}
						return
					}
					loss.Backward()
					grads = [][]float64{a.Grad().Float64s(), w.Grad().Float64s()}
				})
				return outs, grads
			}
			po, pg := run(false)
			co, cg := run(true)
			for i := range po {
				closeTo(t, "result", co[i], po[i], 0)
			}
			for i := range pg {
				closeTo(t, "gradient", cg[i], pg[i], 1e-12)
			}
		})
	}
}

// TestCheckpointMultiRefusals: bad functions and inputs fail with the
// right kind.
func TestCheckpointMultiRefusals(t *testing.T) {
	x := FromSlice([]float64{1, 2}, nil, WithGrad())
	defer x.Release()
	tests := []struct {
		name string
		fn   func(xs []*Tensor) []*Tensor
		xs   []*Tensor
		kind error
	}{
		{"nil function", nil, []*Tensor{x}, ErrArgument},
		{"no inputs", func(xs []*Tensor) []*Tensor { return []*Tensor{x.MulScalar(2)} }, nil, ErrArgument},
		{"nil input", func(xs []*Tensor) []*Tensor { return xs }, []*Tensor{nil}, ErrArgument},
		{"no results", func(xs []*Tensor) []*Tensor { return nil }, []*Tensor{x}, ErrArgument},
		{"a nil result", func(xs []*Tensor) []*Tensor { return []*Tensor{xs[0].Exp(), nil} }, []*Tensor{x}, ErrArgument},
		{"mixed dtypes", func(xs []*Tensor) []*Tensor { return []*Tensor{xs[0].Exp(), xs[0].Float()} }, []*Tensor{x}, ErrDType},
		{"mixed devices", func(xs []*Tensor) []*Tensor { return []*Tensor{xs[0].Exp(), xs[0].To(Sim(0))} }, []*Tensor{x}, ErrDevice},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				err := Catch(func() { CheckpointMulti(tc.fn, tc.xs) })
				if !errors.Is(err, tc.kind) {
					t.Fatalf("got %v, want %v", err, tc.kind)
				}
			})
		})
	}
}

// TestCheckpointMultiKeepsNoActivations: after CheckpointMulti returns,
// only the results (one packed block) and what Backward needs stay
// allocated, not the intermediates fn computed, and Backward frees the
// recompute's.
func TestCheckpointMultiKeepsNoActivations(t *testing.T) {
	dev := Sim(1)
	Tidy(func() {
		w := Randn(Shape{32, 32}, dev).SetRequiresGrad(true)
		x := Randn(Shape{64, 32}, dev)
		fn := func(xs []*Tensor) []*Tensor {
			h := xs[0]
			for range 6 {
				h = h.MatMul(w).Tanh()
			}
			return []*Tensor{h, h.Sum()}
		}
		act := int64(64 * 32 * 4)
		settle(dev)
		before := MemoryAllocated(dev)
		ys := CheckpointMulti(fn, []*Tensor{x}, w)
		if grew := MemoryAllocated(dev) - before; grew > 2*act {
			t.Fatalf("checkpoint kept %d bytes, one activation is %d", grew, act)
		}
		ys[0].Sum().Add(ys[1]).Backward()
		if w.Grad() == nil {
			t.Fatal("no gradient")
		}
	})
}

// TestCheckpointParamHooksRunOnce: a parameter used inside and outside a
// checkpoint gets its RegisterHook hooks once, on its whole gradient, and
// (from Backward) its post-accumulate hooks once, as without checkpoint.
func TestCheckpointParamHooksRunOnce(t *testing.T) {
	tests := []struct {
		name  string
		multi bool
		grad  bool
	}{
		{"Checkpoint, Backward", false, false},
		{"Checkpoint, Grad", false, true},
		{"CheckpointMulti, Backward", true, false},
		{"CheckpointMulti, Grad", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				x := FromSlice([]float64{1, 2}, nil, WithGrad())
				p := FromSlice([]float64{3}, nil, WithGrad())
				var seen []float64
				post := 0
				p.RegisterHook(func(g *Tensor) *Tensor { seen = append(seen, g.Item()); return nil })
				p.RegisterPostAccumulateGradHook(func(*Tensor) { post++ })
				fn := func(x *Tensor) *Tensor { return x.Mul(p).Add(x.Mul(p)) } // 2xp
				var y *Tensor
				if tc.multi {
					y = CheckpointMulti(func(xs []*Tensor) []*Tensor { return []*Tensor{fn(xs[0])} }, []*Tensor{x}, p)[0]
				} else {
					y = Checkpoint(fn, x, p)
				}
				loss := y.Sum().Add(p.Sum()) // d/dp = 2 sum(x) + 1 = 7
				wantPost := 1
				if tc.grad {
					g := Grad([]*Tensor{loss}, []*Tensor{p})
					closeTo(t, "dp", g[0].Float64s(), []float64{7}, 0)
					wantPost = 0
				} else {
					loss.Backward()
					closeTo(t, "p.Grad()", p.Grad().Float64s(), []float64{7}, 0)
				}
				if len(seen) != 1 || seen[0] != 7 {
					t.Errorf("RegisterHook saw %v, want [7]", seen)
				}
				if post != wantPost {
					t.Errorf("post-accumulate hook ran %d times, want %d", post, wantPost)
				}
			})
		})
	}
}

// TestCheckpointIntegerResults: a checkpointed function whose result is
// an integer or bool tensor (indices, a mask) returns it outside the
// graph, as PyTorch does: such tensors cannot require grad, and Backward
// from them fails rather than running a backward that gives nothing.
func TestCheckpointIntegerResults(t *testing.T) {
	w := Randn(Shape{4, 4}, WithGrad())
	tests := []struct {
		name  string
		multi bool
		fn    func(x *Tensor) *Tensor
		want  DType
	}{
		{"argmax", false, func(x *Tensor) *Tensor { return x.MatMul(w).ArgMax(1, false) }, Int64},
		{"mask", false, func(x *Tensor) *Tensor { return x.MatMul(w).GtScalar(0) }, Bool},
		{"int32 cast", false, func(x *Tensor) *Tensor { return x.MatMul(w).Cast(Int32) }, Int32},
		{"argmax, multi", true, func(x *Tensor) *Tensor { return x.MatMul(w).ArgMax(1, false) }, Int64},
		{"mask, multi", true, func(x *Tensor) *Tensor { return x.MatMul(w).GtScalar(0) }, Bool},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := Randn(Shape{3, 4}, WithGrad())
			want := tc.fn(x)
			var got *Tensor
			if tc.multi {
				outs := CheckpointMulti(func(xs []*Tensor) []*Tensor { return []*Tensor{tc.fn(xs[0]), tc.fn(xs[0])} }, []*Tensor{x}, w)
				got = outs[1]
				if outs[0].RequiresGrad() {
					t.Errorf("result 0 requires grad")
				}
			} else {
				got = Checkpoint(tc.fn, x, w)
			}
			if got.DType() != tc.want || !slices.Equal(got.Float64s(), want.Float64s()) {
				t.Errorf("result %s %v, want %s %v", got.DType(), got.Float64s(), tc.want, want.Float64s())
			}
			if got.RequiresGrad() || got.GradFn() != "" {
				t.Errorf("the %s result requires grad %v, grad_fn %q; want neither", got.DType(), got.RequiresGrad(), got.GradFn())
			}
			err := Catch(func() { got.Cast(Float32).Sum().Backward() })
			if !errors.Is(err, ErrAutograd) {
				t.Errorf("Backward from the result gave %v, want an error matching ErrAutograd", err)
			}
		})
	}
}

// TestRecomputing: Recomputing is true inside the recompute of a
// checkpoint in the backward pass, nested ones included, and false in the
// checkpoint's forward and outside checkpoints.
func TestRecomputing(t *testing.T) {
	w := Randn(Shape{3, 3}, WithGrad())
	var seen []bool
	fn := func(x *Tensor) *Tensor {
		seen = append(seen, Recomputing())
		return x.MatMul(w).Tanh()
	}
	tests := []struct {
		name string
		run  func(x *Tensor) *Tensor
		want []bool // Recomputing as fn saw it, in order of its calls
	}{
		{"plain", fn, []bool{false}},
		{"checkpoint", func(x *Tensor) *Tensor { return Checkpoint(fn, x, w) }, []bool{false, true}},
		{"nested", func(x *Tensor) *Tensor {
			return Checkpoint(func(x *Tensor) *Tensor { return Checkpoint(fn, x, w) }, x, w)
		}, []bool{false, true, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			x := Randn(Shape{2, 3}, WithGrad())
			tc.run(x).Sum().Backward()
			if !slices.Equal(seen, tc.want) {
				t.Errorf("Recomputing was %v in fn's calls, want %v", seen, tc.want)
			}
			if Recomputing() {
				t.Error("Recomputing is true after the backward pass")
			}
		})
	}
}

// TestCheckpointInputChangedInPlace: a checkpointed function that changes
// its input in place makes the backward pass fail with ErrAutograd, as
// PyTorch's checkpoint does (it saves its inputs before running the
// function), rather than recompute from the changed input, which gave a
// wrong gradient and changed the input a second time. A function that
// changes in place only what it computes itself is checkpointed as usual.
func TestCheckpointInputChangedInPlace(t *testing.T) {
	tests := []struct {
		name    string
		multi   bool
		fn      func(x, w *Tensor) *Tensor
		refused bool
		x       []float64 // x after Backward
		grad    []float64 // w's gradient, when not refused
	}{
		{"input scaled in place", false, func(x, w *Tensor) *Tensor { return x.MulScalarInPlace(2).Mul(w) }, true, []float64{-2, 4, -6}, nil},
		{"input filled in place", false, func(x, w *Tensor) *Tensor { x.FillInPlace(1); return x.Mul(w) }, true, []float64{1, 1, 1}, nil},
		{"a view of the input changed", false, func(x, w *Tensor) *Tensor {
			x.Narrow(0, 0, 1).FillInPlace(0)
			return x.Mul(w)
		}, true, []float64{0, 2, -3}, nil},
		{"several inputs, one scaled in place", true, func(x, w *Tensor) *Tensor { return x.MulScalarInPlace(2).Mul(w) }, true, []float64{-2, 4, -6}, nil},
		{"own result changed in place", false, func(x, w *Tensor) *Tensor { return x.Mul(w).MulScalarInPlace(2) }, false, []float64{-1, 2, -3}, []float64{-2, 4, -6}},
		{"several inputs, own result changed", true, func(x, w *Tensor) *Tensor { return x.Mul(w).MulScalarInPlace(2) }, false, []float64{-1, 2, -3}, []float64{-2, 4, -6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := FromSlice([]float64{1, 2, 3}, nil, WithGrad())
				x := FromSlice([]float64{-1, 2, -3}, nil)
				mask := Ones(Shape{3})
				var y *Tensor
				if tc.multi {
					y = CheckpointMulti(func(xs []*Tensor) []*Tensor { return []*Tensor{tc.fn(xs[0], w)} }, []*Tensor{x, mask}, w)[0]
				} else {
					y = Checkpoint(func(x *Tensor) *Tensor { return tc.fn(x, w) }, x, w)
				}
				err := Catch(func() { y.Sum().Backward() })
				switch {
				case tc.refused && !errors.Is(err, ErrAutograd):
					t.Errorf("Backward gave %v, want an error matching ErrAutograd", err)
				case !tc.refused && err != nil:
					t.Errorf("Backward: %v", err)
				case !tc.refused && !slices.Equal(w.Grad().Float64s(), tc.grad):
					t.Errorf("w's gradient %v, want %v", w.Grad().Float64s(), tc.grad)
				}
				if got := x.Float64s(); !slices.Equal(got, tc.x) {
					t.Errorf("x is %v after Backward, want %v", got, tc.x)
				}
			})
		})
	}
}
