package vram

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// withinAbs reports whether got and want agree to within tol each.
func withinAbs(got, want []float64, tol float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		if !(math.Abs(got[i]-want[i]) <= tol) && !(math.IsInf(want[i], 0) && got[i] == want[i]) {
			return false
		}
	}
	return true
}

var linalgDevices = []Device{CPU, Sim(0)}

// TestLinalgExact checks the ops against values worked out by hand on
// small integer matrices, on the CPU and a simulated device, in float64
// and float32, and that the results stay on the input's device.
func TestLinalgExact(t *testing.T) {
	a3 := []float64{1, 2, 3, 0, 1, 4, 5, 6, 0}                           // det 1
	a3inv := []float64{-24, 18, 5, 20, -15, -4, -5, 4, 1}                // its inverse
	spd := []float64{4, 12, -16, 12, 37, -43, -16, -43, 98}              // L below
	spdL := []float64{2, 0, 0, 6, 1, 0, -8, 5, 3}                        // Cholesky factor
	m := []float64{1, -2, 3, 4}                                          // for the norms
	s1, s2 := math.Sqrt(15+5*math.Sqrt(5)), math.Sqrt(15-5*math.Sqrt(5)) // m's singular values
	tests := []struct {
		name string
		f    func(dev Device, dt DType) *Tensor
		want []float64
		dims Shape
	}{
		{"det 2x2", func(d Device, dt DType) *Tensor { return Det(FromSlice([]float64{2, 1, 1, 3}, Shape{2, 2}, d, dt)) }, []float64{5}, Shape{}},
		{"det batch", func(d Device, dt DType) *Tensor {
			return Det(FromSlice(append(slices.Clone(a3), 2, 0, 0, 0, 2, 0, 0, 0, 2), Shape{2, 3, 3}, d, dt))
		}, []float64{1, 8}, Shape{2}},
		{"det singular", func(d Device, dt DType) *Tensor { return Det(FromSlice([]float64{1, 2, 2, 4}, Shape{2, 2}, d, dt)) }, []float64{0}, Shape{}},
		{"det swap", func(d Device, dt DType) *Tensor { return Det(FromSlice([]float64{0, 1, 1, 0}, Shape{2, 2}, d, dt)) }, []float64{-1}, Shape{}},
		{"det 0x0", func(d Device, dt DType) *Tensor { return Det(Zeros(Shape{3, 0, 0}, d, dt)) }, []float64{1, 1, 1}, Shape{3}},
		{"slogdet sign", func(d Device, dt DType) *Tensor {
			s, _ := Slogdet(FromSlice([]float64{0, 1, 1, 0, 1, 2, 2, 4, 2, 0, 0, 3}, Shape{3, 2, 2}, d, dt))
			return s
		}, []float64{-1, 0, 1}, Shape{3}},
		{"slogdet log", func(d Device, dt DType) *Tensor {
			_, l := Slogdet(FromSlice([]float64{0, 1, 1, 0, 1, 2, 2, 4, 2, 0, 0, 3}, Shape{3, 2, 2}, d, dt))
			return l
		}, []float64{0, math.Inf(-1), math.Log(6)}, Shape{3}},
		{"inv", func(d Device, dt DType) *Tensor { return Inv(FromSlice(a3, Shape{3, 3}, d, dt)) }, a3inv, Shape{3, 3}},
		{"solve vector", func(d Device, dt DType) *Tensor {
			return Solve(FromSlice(a3, Shape{3, 3}, d, dt), FromSlice([]float64{1, 2, 3}, nil, d, dt), true)
		}, []float64{27, -22, 6}, Shape{3}},
		{"solve matrix", func(d Device, dt DType) *Tensor {
			return Solve(FromSlice(a3, Shape{3, 3}, d, dt), FromSlice([]float64{1, 0, 2, 1, 3, 0}, Shape{3, 2}, d, dt), true)
		}, []float64{27, 18, -22, -15, 6, 4}, Shape{3, 2}},
		{"solve right", func(d Device, dt DType) *Tensor {
			return Solve(FromSlice(a3, Shape{3, 3}, d, dt), FromSlice([]float64{1, 2, 3, 5, 6, 0}, Shape{2, 3}, d, dt), false)
		}, []float64{1, 0, 0, 0, 0, 1}, Shape{2, 3}},
		{"solve broadcast batch", func(d Device, dt DType) *Tensor {
			a := FromSlice(append(slices.Clone(a3), 2, 0, 0, 0, 2, 0, 0, 0, 2), Shape{2, 3, 3}, d, dt)
			return Solve(a, FromSlice([]float64{1, 2, 3}, nil, d, dt), true)
		}, []float64{27, -22, 6, 0.5, 1, 1.5}, Shape{2, 3}},
		{"solve batch of vectors", func(d Device, dt DType) *Tensor {
			a := FromSlice(append(slices.Clone(a3), 2, 0, 0, 0, 2, 0, 0, 0, 2), Shape{2, 3, 3}, d, dt)
			return Solve(a, FromSlice([]float64{1, 2, 3, 2, 4, 6}, Shape{2, 3}, d, dt), true)
		}, []float64{27, -22, 6, 1, 2, 3}, Shape{2, 3}},
		{"cholesky", func(d Device, dt DType) *Tensor { return Cholesky(FromSlice(spd, Shape{3, 3}, d, dt), false) }, spdL, Shape{3, 3}},
		{"cholesky reads lower", func(d Device, dt DType) *Tensor {
			return Cholesky(FromSlice([]float64{4, 99, 2, 5}, Shape{2, 2}, d, dt), false)
		}, []float64{2, 0, 1, 2}, Shape{2, 2}},
		{"cholesky upper", func(d Device, dt DType) *Tensor { return Cholesky(FromSlice(spd, Shape{3, 3}, d, dt), true) },
			[]float64{2, 6, -8, 0, 1, 5, 0, 0, 3}, Shape{3, 3}},
		{"qr r sign", func(d Device, dt DType) *Tensor {
			_, r := QR(FromSlice([]float64{3, 4}, Shape{2, 1}, d, dt), "reduced")
			return r
		}, []float64{-5}, Shape{1, 1}},
		{"qr q sign", func(d Device, dt DType) *Tensor {
			q, _ := QR(FromSlice([]float64{3, 4}, Shape{2, 1}, d, dt), "reduced")
			return q
		}, []float64{-0.6, -0.8}, Shape{2, 1}},
		{"eigh", func(d Device, dt DType) *Tensor {
			w, _ := Eigh(FromSlice([]float64{2, 1, 1, 2}, Shape{2, 2}, d, dt), "L")
			return w
		}, []float64{1, 3}, Shape{2}},
		{"eigh lower", func(d Device, dt DType) *Tensor {
			w, _ := Eigh(FromSlice([]float64{2, 99, 1, 2}, Shape{2, 2}, d, dt), "L")
			return w
		}, []float64{1, 3}, Shape{2}},
		{"eigh upper", func(d Device, dt DType) *Tensor {
			w, _ := Eigh(FromSlice([]float64{2, 1, 99, 2}, Shape{2, 2}, d, dt), "U")
			return w
		}, []float64{1, 3}, Shape{2}},
		{"eigh diagonal", func(d Device, dt DType) *Tensor {
			w, _ := Eigh(FromSlice([]float64{5, 0, 0, -1}, Shape{2, 2}, d, dt), "L")
			return w
		}, []float64{-1, 5}, Shape{2}},
		{"svdvals", func(d Device, dt DType) *Tensor { return Svdvals(FromSlice([]float64{1, 1, 1, 1}, Shape{2, 2}, d, dt)) }, []float64{2, 0}, Shape{2}},
		{"svd values", func(d Device, dt DType) *Tensor {
			_, s, _ := SVD(FromSlice([]float64{0, 2, -3, 0, 0, 0}, Shape{3, 2}, d, dt), false)
			return s
		}, []float64{3, 2}, Shape{2}},
		{"pinv rank 1", func(d Device, dt DType) *Tensor { return Pinv(FromSlice([]float64{1, 2, 2, 4}, Shape{2, 2}, d, dt)) },
			[]float64{1. / 25, 2. / 25, 2. / 25, 4. / 25}, Shape{2, 2}},
		{"pinv wide", func(d Device, dt DType) *Tensor {
			return Pinv(FromSlice([]float64{2, 0, 0, 0, 4, 0}, Shape{2, 3}, d, dt))
		},
			[]float64{0.5, 0, 0, 0.25, 0, 0}, Shape{3, 2}},
		{"lstsq vector", func(d Device, dt DType) *Tensor {
			return Lstsq(FromSlice([]float64{1, 0, 0, 1, 1, 1}, Shape{3, 2}, d, dt), FromSlice([]float64{1, 2, 4}, nil, d, dt))
		}, []float64{4. / 3, 7. / 3}, Shape{2}},
		{"lstsq rank deficient", func(d Device, dt DType) *Tensor {
			return Lstsq(FromSlice([]float64{1, 1, 1, 1}, Shape{2, 2}, d, dt), FromSlice([]float64{2, 4}, Shape{2, 1}, d, dt))
		}, []float64{1.5, 1.5}, Shape{2, 1}},
		{"lstsq exact batch", func(d Device, dt DType) *Tensor {
			return Lstsq(FromSlice(a3, Shape{1, 3, 3}, d, dt), FromSlice([]float64{1, 2, 3}, Shape{1, 3}, d, dt))
		}, []float64{27, -22, 6}, Shape{1, 3}},
		{"matrix rank", func(d Device, dt DType) *Tensor {
			return MatrixRank(FromSlice([]float64{1, 2, 2, 4, 1, 0, 0, 1, 0, 0, 0, 0}, Shape{3, 2, 2}, d, dt)).Cast(Float64)
		}, []float64{1, 2, 0}, Shape{3}},
		{"norm fro", func(d Device, dt DType) *Tensor { return MatrixNorm(FromSlice(m, Shape{2, 2}, d, dt), "fro", false) }, []float64{math.Sqrt(30)}, Shape{}},
		{"norm inf", func(d Device, dt DType) *Tensor { return MatrixNorm(FromSlice(m, Shape{2, 2}, d, dt), "inf", false) }, []float64{7}, Shape{}},
		{"norm -inf", func(d Device, dt DType) *Tensor { return MatrixNorm(FromSlice(m, Shape{2, 2}, d, dt), "-inf", false) }, []float64{3}, Shape{}},
		{"norm 1", func(d Device, dt DType) *Tensor { return MatrixNorm(FromSlice(m, Shape{2, 2}, d, dt), "1", false) }, []float64{6}, Shape{}},
		{"norm -1", func(d Device, dt DType) *Tensor { return MatrixNorm(FromSlice(m, Shape{2, 2}, d, dt), "-1", false) }, []float64{4}, Shape{}},
		{"norm 2", func(d Device, dt DType) *Tensor { return MatrixNorm(FromSlice(m, Shape{2, 2}, d, dt), "2", false) }, []float64{s1}, Shape{}},
		{"norm -2", func(d Device, dt DType) *Tensor { return MatrixNorm(FromSlice(m, Shape{2, 2}, d, dt), "-2", false) }, []float64{s2}, Shape{}},
		{"norm nuc keepdim", func(d Device, dt DType) *Tensor { return MatrixNorm(FromSlice(m, Shape{1, 2, 2}, d, dt), "nuc", true) }, []float64{s1 + s2}, Shape{1, 1, 1}},
		{"norm inf keepdim", func(d Device, dt DType) *Tensor { return MatrixNorm(FromSlice(m, Shape{2, 2}, d, dt), "inf", true) }, []float64{7}, Shape{1, 1}},
		{"vector norm", func(d Device, dt DType) *Tensor {
			return VectorNorm(FromSlice([]float64{3, -4, 12}, nil, d, dt), 2, nil, false)
		}, []float64{13}, Shape{}},
		{"vector norm inf", func(d Device, dt DType) *Tensor {
			return VectorNorm(FromSlice([]float64{3, -4, 1, 2}, Shape{2, 2}, d, dt), math.Inf(1), []int{1}, true)
		}, []float64{4, 2}, Shape{2, 1}},
		{"matrix power 5", func(d Device, dt DType) *Tensor {
			return MatrixPower(FromSlice([]float64{1, 1, 0, 1}, Shape{2, 2}, d, dt), 5)
		}, []float64{1, 5, 0, 1}, Shape{2, 2}},
		{"matrix power -3", func(d Device, dt DType) *Tensor {
			return MatrixPower(FromSlice([]float64{1, 1, 0, 1}, Shape{2, 2}, d, dt), -3)
		}, []float64{1, -3, 0, 1}, Shape{2, 2}},
		{"matrix power 0", func(d Device, dt DType) *Tensor {
			return MatrixPower(FromSlice([]float64{7, 1, 0, 1, 2, 2, 2, 2}, Shape{2, 2, 2}, d, dt), 0)
		},
			[]float64{1, 0, 0, 1, 1, 0, 0, 1}, Shape{2, 2, 2}},
		{"matrix power min int", func(d Device, dt DType) *Tensor {
			return MatrixPower(FromSlice([]float64{-1, 0, 0, 1}, Shape{2, 2}, d, dt), math.MinInt)
		},
			[]float64{1, 0, 0, 1}, Shape{2, 2}},
		{"matrix power max int", func(d Device, dt DType) *Tensor {
			return MatrixPower(FromSlice([]float64{-1, 0, 0, 1}, Shape{2, 2}, d, dt), math.MaxInt)
		},
			[]float64{-1, 0, 0, 1}, Shape{2, 2}},
		{"matrix power 1", func(d Device, dt DType) *Tensor {
			return MatrixPower(FromSlice([]float64{7, 1, 0, 1}, Shape{2, 2}, d, dt), 1)
		}, []float64{7, 1, 0, 1}, Shape{2, 2}},
		{"trace", func(d Device, dt DType) *Tensor { return Trace(FromSlice(a3, Shape{3, 3}, d, dt)) }, []float64{2}, Shape{}},
		{"trace wide", func(d Device, dt DType) *Tensor {
			return Trace(FromSlice([]float64{1, 2, 3, 4, 5, 6}, Shape{2, 3}, d, dt))
		}, []float64{6}, Shape{}},
		{"outer", func(d Device, dt DType) *Tensor {
			return Outer(FromSlice([]float64{1, 2}, nil, d, dt), FromSlice([]float64{3, 4, 5}, nil, d, dt))
		},
			[]float64{3, 4, 5, 6, 8, 10}, Shape{2, 3}},
		{"kron", func(d Device, dt DType) *Tensor {
			return Kron(FromSlice([]float64{1, 2, 3, 4}, Shape{2, 2}, d, dt), FromSlice([]float64{0, 1, 1, 0}, Shape{2, 2}, d, dt))
		}, []float64{0, 1, 0, 2, 1, 0, 2, 0, 0, 3, 0, 4, 3, 0, 4, 0}, Shape{4, 4}},
		{"kron vectors", func(d Device, dt DType) *Tensor {
			return Kron(FromSlice([]float64{1, 2}, nil, d, dt), FromSlice([]float64{1, 10, 100}, nil, d, dt))
		},
			[]float64{1, 10, 100, 2, 20, 200}, Shape{6}},
		{"kron ranks", func(d Device, dt DType) *Tensor {
			return Kron(FromSlice([]float64{1, 2}, nil, d, dt), FromSlice([]float64{1, 3}, Shape{2, 1}, d, dt))
		},
			[]float64{1, 2, 3, 6}, Shape{2, 2}},
		{"diag above", func(d Device, dt DType) *Tensor { return Diag(FromSlice([]float64{1, 2}, nil, d, dt), 1) },
			[]float64{0, 1, 0, 0, 0, 2, 0, 0, 0}, Shape{3, 3}},
		{"diag below", func(d Device, dt DType) *Tensor { return Diag(FromSlice([]float64{1, 2}, nil, d, dt), -1) },
			[]float64{0, 0, 0, 1, 0, 0, 0, 2, 0}, Shape{3, 3}},
		{"diag of matrix", func(d Device, dt DType) *Tensor { return Diag(FromSlice([]float64{1, 2, 3, 4}, Shape{2, 2}, d, dt), 1) }, []float64{2}, Shape{1}},
		{"diag embed batch", func(d Device, dt DType) *Tensor {
			return DiagEmbed(FromSlice([]float64{1, 2, 3, 4}, Shape{2, 2}, d, dt), 0)
		},
			[]float64{1, 0, 0, 2, 3, 0, 0, 4}, Shape{2, 2, 2}},
	}
	for _, dev := range linalgDevices {
		for _, dt := range []DType{Float64, Float32} {
			tol := 1e-12
			if dt == Float32 {
				tol = 2e-5
			}
			for _, tc := range tests {
				t.Run(dev.String()+"/"+dt.String()+"/"+tc.name, func(t *testing.T) {
					Tidy(func() {
						got := tc.f(dev, dt)
						if got.Device() != dev || !slices.Equal(got.Shape(), tc.dims) {
							t.Fatalf("got %v on %s, want shape %v on %s", got.Shape(), got.Device(), tc.dims, dev)
						}
						if v := got.Float64s(); !withinAbs(v, tc.want, tol*math.Max(1, math.Abs(tc.want[0]))) {
							t.Errorf("got %v, want %v", v, tc.want)
						}
					})
				})
			}
		}
	}
}

// eyeLike returns a float64 n×n identity on dev.
func eyeLike(n int, dev Device) *Tensor {
	return DiagEmbed(Ones(Shape{n}, Float64, dev), 0)
}

// TestLinalgDecompositions checks QR, Eigh and SVD by reconstruction,
// orthonormality and triangularity on random batched matrices of several
// shapes, in every mode.
func TestLinalgDecompositions(t *testing.T) {
	shapes := []Shape{{3, 2}, {2, 3}, {4, 4}, {2, 3, 5}, {2, 5, 3}, {1, 1}, {3, 0}, {0, 3}, {0, 2, 2}}
	for _, dev := range linalgDevices {
		for _, sh := range shapes {
			t.Run(dev.String()+"/"+sh.String(), func(t *testing.T) {
				Tidy(func() {
					a := rnd(3, sh...).To(dev)
					r := len(sh)
					m, n := sh[r-2], sh[r-1]
					k := min(m, n)
					orth := func(name string, q *Tensor) { // columns orthonormal
						c := q.Shape()[len(q.Shape())-1]
						g := q.MT().MatMul(q)
						if !withinAbs(g.Float64s(), eyeLike(c, dev).Expand(g.Shape()...).Float64s(), 1e-12) {
							t.Errorf("%s: columns not orthonormal: %v", name, g.Float64s())
						}
					}
					for _, mode := range []string{"reduced", "complete", "r"} {
						q, rr := QR(a, mode)
						rows := k
						if mode == "complete" {
							rows = m
						}
						if got := rr.Shape(); got[r-2] != rows || got[r-1] != n {
							t.Errorf("qr %s: R shape %v", mode, got)
						}
						if !withinAbs(rr.Float64s(), rr.Triu(0).Float64s(), 0) {
							t.Errorf("qr %s: R not upper triangular", mode)
						}
						if mode == "r" {
							if q.NumElements() != 0 {
								t.Errorf("qr r: Q has %d elements", q.NumElements())
							}
							continue
						}
						orth("qr "+mode, q)
						if !withinAbs(q.MatMul(rr).Float64s(), a.Float64s(), 1e-12) {
							t.Errorf("qr %s: QR != A", mode)
						}
					}
					for _, full := range []bool{false, true} {
						u, s, vh := SVD(a, full)
						uc, vr := k, k
						if full {
							uc, vr = m, n
						}
						if got := u.Shape(); got[r-2] != m || got[r-1] != uc {
							t.Errorf("svd full=%v: U shape %v", full, got)
						}
						if got := vh.Shape(); got[r-2] != vr || got[r-1] != n {
							t.Errorf("svd full=%v: Vh shape %v", full, got)
						}
						orth("svd U", u)
						orth("svd V", vh.MT())
						us := u.Narrow(-1, 0, k).Mul(s.Unsqueeze(-2))
						if !withinAbs(us.MatMul(vh.Narrow(-2, 0, k)).Float64s(), a.Float64s(), 1e-12) {
							t.Errorf("svd full=%v: U S Vh != A", full)
						}
						sv := s.Float64s()
						if !withinAbs(Svdvals(a).Float64s(), sv, 1e-12) {
							t.Errorf("svdvals differ from svd's S")
						}
						for i := 1; i < len(sv); i++ {
							if i%k != 0 && sv[i] > sv[i-1] {
								t.Errorf("singular values not descending: %v", sv)
							}
						}
					}
					if m != n {
						return
					}
					sym := a.Add(a.MT())
					w, v := Eigh(sym, "L")
					orth("eigh V", v)
					if !withinAbs(v.Mul(w.Unsqueeze(-2)).MatMul(v.MT()).Float64s(), sym.Float64s(), 1e-12) {
						t.Errorf("eigh: V diag(w) Vt != A")
					}
					wv := w.Float64s()
					for i := 1; i < len(wv); i++ {
						if i%n != 0 && wv[i] < wv[i-1] {
							t.Errorf("eigenvalues not ascending: %v", wv)
						}
					}
					p := Pinv(a)
					if !withinAbs(a.MatMul(p).MatMul(a).Float64s(), a.Float64s(), 1e-11) {
						t.Errorf("pinv: A A+ A != A")
					}
				})
			})
		}
	}
}

// TestLinalgErrors checks that bad input panics with a vram error of the
// right kind naming the op, and leaves the input unchanged.
func TestLinalgErrors(t *testing.T) {
	sq := func() *Tensor { return FromSlice([]float64{1, 2, 3, 4}, Shape{2, 2}) }
	sing := func() *Tensor { return FromSlice([]float64{1, 2, 2, 4, 1, 0, 0, 1}, Shape{2, 2, 2}) }
	wide := func() *Tensor { return FromSlice([]float64{1, 2, 3, 4, 5, 6}, Shape{2, 3}) }
	nan := func() *Tensor { return FromSlice([]float64{1, math.NaN(), math.NaN(), 4}, Shape{2, 2}) }
	tests := []struct {
		name string
		in   func() *Tensor
		f    func(a *Tensor)
		kind error
		op   string
	}{
		{"det wide", wide, func(a *Tensor) { Det(a) }, ErrShape, "linalg.det"},
		{"det vector", func() *Tensor { return FromSlice([]float64{1, 2}, nil) }, func(a *Tensor) { Det(a) }, ErrShape, "linalg.det"},
		{"det int", func() *Tensor { return FromSlice([]int64{1, 2, 3, 4}, Shape{2, 2}) }, func(a *Tensor) { Det(a) }, ErrDType, "linalg.det"},
		{"inv half", func() *Tensor { return sq().Half() }, func(a *Tensor) { Inv(a) }, ErrDType, "linalg.inv"},
		{"inv singular", sing, func(a *Tensor) { Inv(a) }, ErrArgument, "linalg.inv"},
		{"inv wide", wide, func(a *Tensor) { Inv(a) }, ErrShape, "linalg.inv"},
		{"solve singular", sing, func(a *Tensor) { Solve(a, FromSlice([]float64{1, 1}, nil), true) }, ErrArgument, "linalg.solve"},
		{"solve size", sq, func(a *Tensor) { Solve(a, FromSlice([]float64{1, 1, 1}, nil), true) }, ErrShape, "linalg.solve"},
		{"solve batch", sing, func(a *Tensor) { Solve(a, Ones(Shape{3, 2, 1}, Float64), true) }, ErrShape, "linalg.solve"},
		{"solve dtype", sq, func(a *Tensor) { Solve(a, FromSlice([]float32{1, 1}, nil), true) }, ErrDType, "linalg.solve"},
		{"solve device", sq, func(a *Tensor) { Solve(a, FromSlice([]float64{1, 1}, nil, Sim(0)), true) }, ErrDevice, "linalg.solve"},
		{"solve right vector", sq, func(a *Tensor) { Solve(a, FromSlice([]float64{1, 1}, nil), false) }, ErrShape, "linalg.solve"},
		{"solve wide", wide, func(a *Tensor) { Solve(a, FromSlice([]float64{1, 1}, nil), true) }, ErrShape, "linalg.solve"},
		{"cholesky not pd", sq, func(a *Tensor) { Cholesky(a, false) }, ErrArgument, "linalg.cholesky"},
		{"cholesky upper not pd", sq, func(a *Tensor) { Cholesky(a, true) }, ErrArgument, "linalg.cholesky"},
		{"cholesky nan", nan, func(a *Tensor) { Cholesky(a, false) }, ErrArgument, "linalg.cholesky"},
		{"qr mode", sq, func(a *Tensor) { QR(a, "full") }, ErrArgument, "linalg.qr"},
		{"qr complete tall grad", func() *Tensor { return wide().MT().Contiguous().SetRequiresGrad(true) },
			func(a *Tensor) { QR(a, "complete") }, ErrAutograd, "linalg.qr"},
		{"qr singular backward", func() *Tensor { return FromSlice([]float64{1, 0, 2, 0, 3, 0}, Shape{3, 2}).SetRequiresGrad(true) },
			func(a *Tensor) { q, r := QR(a, "reduced"); q.Sum().Add(r.Sum()).Backward() }, ErrArgument, "linalg.qr"},
		{"qr r mode singular backward", func() *Tensor { return FromSlice([]float64{0, 0, 0, 0}, Shape{2, 2}).SetRequiresGrad(true) },
			func(a *Tensor) { _, r := QR(a, "r"); r.Sum().Backward() }, ErrArgument, "linalg.qr"},
		{"eigh uplo", sq, func(a *Tensor) { Eigh(a, "l") }, ErrArgument, "linalg.eigh"},
		{"eigh nan", nan, func(a *Tensor) { Eigh(a, "L") }, ErrArgument, "linalg.eigh"},
		{"eigh wide", wide, func(a *Tensor) { Eigh(a, "L") }, ErrShape, "linalg.eigh"},
		{"svd nan", nan, func(a *Tensor) { SVD(a, false) }, ErrArgument, "linalg.svd"},
		{"svdvals inf", func() *Tensor { return FromSlice([]float64{math.Inf(1), 0, 0, 1}, Shape{2, 2}) }, func(a *Tensor) { Svdvals(a) }, ErrArgument, "linalg.svdvals"},
		{"slogdet singular backward", func() *Tensor { return FromSlice([]float64{1, 2, 2, 4}, Shape{2, 2}).SetRequiresGrad(true) },
			func(a *Tensor) { _, l := Slogdet(a); l.Backward() }, ErrArgument, "linalg.slogdet"},
		{"pinv nan", nan, func(a *Tensor) { Pinv(a) }, ErrArgument, "linalg.pinv"},
		{"matrix rank int", func() *Tensor { return FromSlice([]int32{1, 2, 3, 4}, Shape{2, 2}) }, func(a *Tensor) { MatrixRank(a) }, ErrDType, "linalg.matrix_rank"},
		{"lstsq rows", wide, func(a *Tensor) { Lstsq(a, FromSlice([]float64{1, 1, 1}, nil)) }, ErrShape, "linalg.lstsq"},
		{"lstsq dtype", sq, func(a *Tensor) { Lstsq(a, FromSlice([]float32{1, 1}, nil)) }, ErrDType, "linalg.lstsq"},
		{"matrix norm ord", sq, func(a *Tensor) { MatrixNorm(a, "3", false) }, ErrArgument, "linalg.matrix_norm"},
		{"matrix norm vector", func() *Tensor { return FromSlice([]float64{1, 2}, nil) }, func(a *Tensor) { MatrixNorm(a, "fro", false) }, ErrShape, "linalg.matrix_norm"},
		{"matrix norm empty", func() *Tensor { return Zeros(Shape{0, 2}, Float64) }, func(a *Tensor) { MatrixNorm(a, "inf", false) }, ErrShape, "linalg.matrix_norm"},
		{"matrix norm int", func() *Tensor { return FromSlice([]int64{1, 2, 3, 4}, Shape{2, 2}) }, func(a *Tensor) { MatrixNorm(a, "fro", false) }, ErrDType, "linalg.matrix_norm"},
		{"vector norm nan ord", sq, func(a *Tensor) { VectorNorm(a, math.NaN(), nil, false) }, ErrArgument, "linalg.vector_norm"},
		{"matrix power wide", wide, func(a *Tensor) { MatrixPower(a, 2) }, ErrShape, "linalg.matrix_power"},
		{"matrix power singular", sing, func(a *Tensor) { MatrixPower(a, -1) }, ErrArgument, "linalg.matrix_power"},
		{"trace batch", sing, func(a *Tensor) { Trace(a) }, ErrShape, "trace"},
		{"outer matrix", sq, func(a *Tensor) { Outer(a, a) }, ErrShape, "outer"},
		{"kron device", sq, func(a *Tensor) { Kron(a, a.To(Sim(0))) }, ErrDevice, "kron"},
		{"diag 3-D", sing, func(a *Tensor) { Diag(a, 0) }, ErrShape, "diag"},
		{"diag embed scalar", func() *Tensor { return Scalar(1, Float64) }, func(a *Tensor) { DiagEmbed(a, 0) }, ErrShape, "diag_embed"},
		{"diag embed max offset", func() *Tensor { return Ones(Shape{2}, Float64) }, func(a *Tensor) { DiagEmbed(a, math.MaxInt) }, ErrShape, "diag_embed"},
		{"diag min offset", func() *Tensor { return Ones(Shape{2}, Float64) }, func(a *Tensor) { Diag(a, math.MinInt) }, ErrShape, "diag"},
		{"nil", func() *Tensor { return nil }, func(a *Tensor) { Det(a) }, ErrArgument, "linalg.det"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.in()
			var before []float64
			if a != nil {
				before = a.Float64s()
			}
			err := Catch(func() { tc.f(a) })
			var ve *Error
			if !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want an error of kind %v", err, tc.kind)
			}
			if errors.As(err, &ve) && ve.Op != tc.op {
				t.Errorf("error names op %q, want %q: %v", ve.Op, tc.op, err)
			}
			if a != nil && !withinAbs(a.Float64s(), before, 0) && !math.IsNaN(before[1]) {
				t.Errorf("input changed: %v, was %v", a.Float64s(), before)
			}
		})
	}
}

// TestLinalgGradients checks the gradients of the differentiable linalg
// ops against central finite differences.
func TestLinalgGradients(t *testing.T) {
	one := func(f func(x *Tensor) *Tensor) func([]*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return f(xs[0]) }
	}
	two := func(f func(a, b *Tensor) *Tensor) func([]*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return f(xs[0], xs[1]) }
	}
	// spd maps any square x to the positive-definite x·xᵀ + I.
	spd := func(x *Tensor) *Tensor {
		n := x.Shape()[len(x.Shape())-1]
		return x.MatMul(x.MT()).Add(eyeLike(n, x.Device()))
	}
	tests := []struct {
		name   string
		f      func([]*Tensor) *Tensor
		inputs func() []*Tensor
	}{
		{"det", one(Det), func() []*Tensor { return []*Tensor{rnd(1, 3, 3)} }},
		{"det batch", one(Det), func() []*Tensor { return []*Tensor{rnd(2, 2, 3, 3)} }},
		{"det singular", one(Det), func() []*Tensor { return []*Tensor{FromSlice([]float64{1, 2, 3, 2, 4, 6, 0, 1, 5}, Shape{3, 3})} }},
		{"det rank 1", one(Det), func() []*Tensor { return []*Tensor{FromSlice([]float64{1, 2, 3, 2, 4, 6, 3, 6, 9}, Shape{3, 3})} }},
		{"slogdet", one(func(x *Tensor) *Tensor { _, l := Slogdet(x); return l }), func() []*Tensor { return []*Tensor{rnd(22, 2, 3, 3)} }},
		{"inv", one(Inv), func() []*Tensor { return []*Tensor{rnd(3, 2, 3, 3)} }},
		{"solve", two(func(a, b *Tensor) *Tensor { return Solve(a, b, true) }), func() []*Tensor { return []*Tensor{rnd(4, 3, 3), rnd(5, 3, 2)} }},
		{"solve vector broadcast", two(func(a, b *Tensor) *Tensor { return Solve(a, b, true) }), func() []*Tensor { return []*Tensor{rnd(4, 2, 3, 3), rnd(5, 3)} }},
		{"solve right", two(func(a, b *Tensor) *Tensor { return Solve(a, b, false) }), func() []*Tensor { return []*Tensor{rnd(6, 3, 3), rnd(7, 2, 3)} }},
		{"cholesky", one(func(x *Tensor) *Tensor { return Cholesky(spd(x), false) }), func() []*Tensor { return []*Tensor{rnd(8, 2, 3, 3)} }},
		{"cholesky upper", one(func(x *Tensor) *Tensor { return Cholesky(spd(x), true) }), func() []*Tensor { return []*Tensor{rnd(9, 3, 3)} }},
		{"eigh values", one(func(x *Tensor) *Tensor { w, _ := Eigh(x.Add(x.MT()), "L"); return w }), func() []*Tensor { return []*Tensor{rnd(23, 2, 3, 3)} }},
		{"eigh vectors", one(func(x *Tensor) *Tensor { _, v := Eigh(x.Add(x.MT()), "U"); return v.Abs() }), func() []*Tensor { return []*Tensor{rnd(24, 3, 3)} }},
		{"eigh both", one(func(x *Tensor) *Tensor { w, v := Eigh(x.Add(x.MT()), "L"); return v.Square().Mul(w.Unsqueeze(-2)) }), func() []*Tensor { return []*Tensor{rnd(25, 4, 4)} }},
		{"svdvals", one(Svdvals), func() []*Tensor { return []*Tensor{rnd(26, 2, 3, 2)} }},
		{"matrix norm nuc", one(func(x *Tensor) *Tensor { return MatrixNorm(x, "nuc", false) }), func() []*Tensor { return []*Tensor{rnd(27, 2, 3)} }},
		{"matrix norm 2", one(func(x *Tensor) *Tensor { return MatrixNorm(x, "2", true) }), func() []*Tensor { return []*Tensor{rnd(28, 3, 3)} }},
		{"matrix norm -2", one(func(x *Tensor) *Tensor { return MatrixNorm(x, "-2", false) }), func() []*Tensor { return []*Tensor{rnd(29, 3, 2)} }},
		{"qr square", one(qrBoth("reduced")), func() []*Tensor { return []*Tensor{rnd(40, 3, 3)} }},
		{"qr tall", one(qrBoth("reduced")), func() []*Tensor { return []*Tensor{rnd(41, 5, 3)} }},
		{"qr wide", one(qrBoth("reduced")), func() []*Tensor { return []*Tensor{rnd(42, 2, 4)} }},
		{"qr batch", one(qrBoth("reduced")), func() []*Tensor { return []*Tensor{rnd(43, 2, 4, 2)} }},
		{"qr complete wide batch", one(qrBoth("complete")), func() []*Tensor { return []*Tensor{rnd(44, 2, 2, 3)} }},
		{"qr q only", one(func(x *Tensor) *Tensor { q, _ := QR(x, "reduced"); return q }), func() []*Tensor { return []*Tensor{rnd(45, 4, 3)} }},
		{"qr r only wide", one(func(x *Tensor) *Tensor { _, r := QR(x, "reduced"); return r }), func() []*Tensor { return []*Tensor{rnd(46, 3, 5)} }},
		{"qr mode r", one(func(x *Tensor) *Tensor { _, r := QR(x, "r"); return r }), func() []*Tensor { return []*Tensor{rnd(47, 2, 4, 3)} }},
		{"svd square", one(svdAll(false)), func() []*Tensor { return []*Tensor{rnd(50, 3, 3)} }},
		{"svd tall", one(svdAll(false)), func() []*Tensor { return []*Tensor{rnd(51, 5, 3)} }},
		{"svd wide", one(svdAll(false)), func() []*Tensor { return []*Tensor{rnd(52, 2, 4)} }},
		{"svd batch", one(svdAll(false)), func() []*Tensor { return []*Tensor{rnd(53, 2, 3, 2)} }},
		{"svd full tall", one(svdAll(true)), func() []*Tensor { return []*Tensor{rnd(54, 4, 2)} }},
		{"svd full wide batch", one(svdAll(true)), func() []*Tensor { return []*Tensor{rnd(55, 2, 2, 3)} }},
		{"svd u only", one(func(x *Tensor) *Tensor { u, _, _ := SVD(x, false); return u.Abs() }), func() []*Tensor { return []*Tensor{rnd(56, 4, 3)} }},
		{"svd vh only", one(func(x *Tensor) *Tensor { _, _, vh := SVD(x, false); return vh.Abs() }), func() []*Tensor { return []*Tensor{rnd(57, 2, 3, 4)} }},
		{"svd s only", one(func(x *Tensor) *Tensor { _, s, _ := SVD(x, false); return s }), func() []*Tensor { return []*Tensor{rnd(58, 3, 4)} }},
		{"svd rebuilt", one(func(x *Tensor) *Tensor { u, s, vh := SVD(x, false); return u.Mul(s.Unsqueeze(-2)).MatMul(vh) }), func() []*Tensor { return []*Tensor{rnd(59, 4, 3)} }},
		{"pinv square", one(Pinv), func() []*Tensor { return []*Tensor{rnd(60, 3, 3)} }},
		{"pinv tall", one(Pinv), func() []*Tensor { return []*Tensor{rnd(61, 5, 3)} }},
		{"pinv wide batch", one(Pinv), func() []*Tensor { return []*Tensor{rnd(62, 2, 2, 4)} }},
		{"pinv repeated singular values", one(Pinv), func() []*Tensor { return []*Tensor{FromSlice([]float64{2, 0, 0, 2, 0, 0}, Shape{3, 2})} }},
		{"lstsq tall", two(Lstsq), func() []*Tensor { return []*Tensor{rnd(63, 5, 3), rnd(64, 5, 2)} }},
		{"lstsq wide vector", two(Lstsq), func() []*Tensor { return []*Tensor{rnd(65, 2, 4), rnd(66, 2)} }},
		{"lstsq batch broadcast", two(Lstsq), func() []*Tensor { return []*Tensor{rnd(67, 2, 4, 3), rnd(68, 4, 1)} }},
		{"trace", one(Trace), func() []*Tensor { return []*Tensor{rnd(10, 3, 4)} }},
		{"vector norm", one(func(x *Tensor) *Tensor { return VectorNorm(x, 3, []int{1}, false) }), func() []*Tensor { return []*Tensor{rnd(11, 2, 3)} }},
		{"matrix norm fro", one(func(x *Tensor) *Tensor { return MatrixNorm(x, "fro", false) }), func() []*Tensor { return []*Tensor{rnd(12, 2, 3, 2)} }},
		{"matrix norm inf", one(func(x *Tensor) *Tensor { return MatrixNorm(x, "inf", true) }), func() []*Tensor { return []*Tensor{rnd(13, 3, 2)} }},
		{"matrix power 3", one(func(x *Tensor) *Tensor { return MatrixPower(x, 3) }), func() []*Tensor { return []*Tensor{rnd(14, 3, 3)} }},
		{"matrix power -2", one(func(x *Tensor) *Tensor { return MatrixPower(x, -2) }), func() []*Tensor { return []*Tensor{rnd(15, 3, 3)} }},
		{"outer", two(Outer), func() []*Tensor { return []*Tensor{rnd(16, 3), rnd(17, 2)} }},
		{"kron", two(Kron), func() []*Tensor { return []*Tensor{rnd(18, 2, 3), rnd(19, 2, 2)} }},
		{"diag embed", one(func(x *Tensor) *Tensor { return DiagEmbed(x, -1) }), func() []*Tensor { return []*Tensor{rnd(20, 2, 3)} }},
		{"diag", one(func(x *Tensor) *Tensor { return Diag(x, 1) }), func() []*Tensor { return []*Tensor{rnd(21, 3, 3)} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() { gradCheck(t, tc.f, tc.inputs()...) })
		})
	}
}

// TestMatrixRankRequiresGrad checks that the rank of a matrix that
// requires a gradient is computed, as torch.linalg.matrix_rank's, an
// integer tensor outside autograd.
func TestMatrixRankRequiresGrad(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    *Tensor
		want []int64
	}{
		{"full", FromSlice([]float64{1, 2, 3, 4}, Shape{2, 2}), []int64{2}},
		{"batch", FromSlice([]float64{1, 2, 2, 4, 0, 0, 0, 0}, Shape{2, 2, 2}), []int64{1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				var r *Tensor
				if err := Catch(func() { r = MatrixRank(tc.a.SetRequiresGrad(true)) }); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(r.Int64s(), tc.want) || r.RequiresGrad() {
					t.Errorf("got %v (requires grad %v), want %v", r.Int64s(), r.RequiresGrad(), tc.want)
				}
			})
		})
	}
}

// qrBoth returns a function of x giving QR(x, mode)'s Q and R, flattened
// and joined, so that one check covers both gradients.
func qrBoth(mode string) func(x *Tensor) *Tensor {
	return func(x *Tensor) *Tensor {
		q, r := QR(x, mode)
		return Cat([]*Tensor{q.Reshape(-1), r.Reshape(-1)}, 0)
	}
}

// svdAll returns a function of x giving SVD(x, full)'s |U|, S and |Vh|
// (their first min(m, n) columns and rows), flattened and joined: a loss
// of them does not depend on the singular vectors' signs.
func svdAll(full bool) func(x *Tensor) *Tensor {
	return func(x *Tensor) *Tensor {
		u, s, vh := SVD(x, full)
		k := s.Shape()[s.Dim()-1]
		u, vh = u.Narrow(-1, 0, k), vh.Narrow(-2, 0, k)
		return Cat([]*Tensor{u.Abs().Reshape(-1), s.Reshape(-1), vh.Abs().Reshape(-1)}, 0)
	}
}

// TestLinalgReleases checks that the linalg ops leave no temporaries
// behind on a device: after the results are released, forward, backward
// and failed calls alike, the allocated memory is back where it was.
func TestLinalgReleases(t *testing.T) {
	dev := Sim(1)
	calls := []struct {
		name string
		f    func(a, b *Tensor)
	}{
		{"forward", func(a, b *Tensor) {
			Det(a)
			Slogdet(a)
			Inv(a)
			Solve(a, b.Unsqueeze(0), false)
			Cholesky(a.MatMul(a.MT()), true)
			QR(a, "complete")
			Eigh(a, "U")
			SVD(a, true)
			Pinv(a)
			MatrixRank(a)
			MatrixNorm(a, "nuc", true)
			MatrixPower(a, -3)
			Kron(a, b)
			DiagEmbed(b, 2)
		}},
		{"backward", func(a, b *Tensor) {
			a.SetRequiresGrad(true)
			b.SetRequiresGrad(true)
			l := Det(a).Sum().Add(Solve(a, b, true).Sum()).Add(Inv(a).Sum()).Add(Cholesky(a.MatMul(a.MT()), false).Sum())
			w, v := Eigh(a, "L")
			_, ld := Slogdet(a)
			l = l.Add(MatrixNorm(a, "nuc", false).Sum()).Add(w.Sum()).Add(v.Square().Sum()).Add(ld.Sum())
			l = l.Add(MatrixPower(a, -2).Sum())
			q, r := QR(a, "reduced")
			_, r2 := QR(a.Narrow(-1, 0, 2), "r")
			u, s, vh := SVD(a, true)
			l = l.Add(q.Square().Sum()).Add(r.Sum()).Add(r2.Sum()).Add(u.MatMul(vh).Sum()).Add(s.Sum())
			l.Add(Pinv(a).Sum()).Add(Lstsq(a.Narrow(-2, 0, 2), b.Narrow(-1, 0, 2)).Sum()).Backward()
		}},
		{"errors", func(a, b *Tensor) {
			s := a.MulScalar(0)
			Catch(func() { Inv(s) })
			Catch(func() { Solve(s, b, true) })
			Catch(func() { Cholesky(s, false) })
			Catch(func() { MatrixPower(s, -1) })
			Catch(func() { MatrixNorm(a, "x", false) })
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			a := rnd(1, 2, 3, 3).To(dev)
			b := rnd(2, 3).To(dev)
			settle(dev)
			before := MemoryAllocated(dev)
			Tidy(func() { c.f(a, b) })
			a.ZeroGrad()
			b.ZeroGrad()
			if after := MemoryAllocated(dev); after != before {
				t.Errorf("allocated %d bytes, was %d", after, before)
			}
			a.Release()
			b.Release()
		})
	}
}

// TestLinalgAutocast checks the dtypes of the linalg results under
// Autocast: the host solvers keep the input's dtype, Lstsq included, and
// MatrixPower's products follow MatMul into the autocast dtype.
func TestLinalgAutocast(t *testing.T) {
	a := FromSlice([]float32{1, 1, 0, 1}, Shape{2, 2})
	tests := []struct {
		name string
		f    func() *Tensor
		want DType
	}{
		{"lstsq", func() *Tensor { return Lstsq(a, a) }, Float32},
		{"solve", func() *Tensor { return Solve(a, a, true) }, Float32},
		{"inv", func() *Tensor { return Inv(a) }, Float32},
		{"det", func() *Tensor { return Det(a) }, Float32},
		{"matrix power", func() *Tensor { return MatrixPower(a, 3) }, Float16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Autocast(Float16, func() {
				if got := tc.f().DType(); got != tc.want {
					t.Errorf("got %s, want %s", got, tc.want)
				}
			})
		})
	}
}

// TestLinalgConcurrent runs the host solvers on one shared input from
// several goroutines (under -race in CI): they share nothing but the
// input, which they only read.
func TestLinalgConcurrent(t *testing.T) {
	a := rnd(5, 4, 4).To(Sim(0))
	defer a.Release()
	inv := Inv(a)
	defer inv.Release()
	want := inv.Float64s()
	done := make(chan []float64)
	for range 4 {
		go func() {
			var got []float64
			Tidy(func() {
				Det(a)
				SVD(a, true)
				Eigh(a, "L")
				got = Inv(a).Float64s()
			})
			done <- got
		}()
	}
	for range 4 {
		if got := <-done; !withinAbs(got, want, 0) {
			t.Errorf("concurrent inverse %v, want %v", got, want)
		}
	}
}

// TestLinalgShapeOnly checks that on a shape-only device, which keeps no
// values (they read as zeros), the linalg ops give results of the right
// shapes instead of failing as for a singular or indefinite matrix, so a
// step planned there runs as on a real one; shape errors still happen.
func TestLinalgShapeOnly(t *testing.T) {
	d := planningDevice(t)
	tests := []struct {
		name string
		f    func(a *Tensor) *Tensor
		want Shape
	}{
		{"det", Det, Shape{2}},
		{"inv", Inv, Shape{2, 3, 3}},
		{"solve", func(a *Tensor) *Tensor { return Solve(a, a.Select(-1, 0), true) }, Shape{2, 3}},
		{"cholesky", func(a *Tensor) *Tensor { return Cholesky(a, true) }, Shape{2, 3, 3}},
		{"qr", func(a *Tensor) *Tensor { q, _ := QR(a, "complete"); return q }, Shape{2, 3, 3}},
		{"eigh", func(a *Tensor) *Tensor { w, _ := Eigh(a, "L"); return w }, Shape{2, 3}},
		{"svd", func(a *Tensor) *Tensor { _, _, vh := SVD(a, true); return vh }, Shape{2, 3, 3}},
		{"pinv", Pinv, Shape{2, 3, 3}},
		{"lstsq", func(a *Tensor) *Tensor { return Lstsq(a, a) }, Shape{2, 3, 3}},
		{"matrix rank", MatrixRank, Shape{2}},
		{"matrix norm nuc", func(a *Tensor) *Tensor { return MatrixNorm(a, "nuc", false) }, Shape{2}},
		{"matrix power", func(a *Tensor) *Tensor { return MatrixPower(a, -2) }, Shape{2, 3, 3}},
		{"det backward", func(a *Tensor) *Tensor {
			x := a.Detach().SetRequiresGrad(true)
			Det(x).Sum().Backward()
			return x.Grad()
		}, Shape{2, 3, 3}},
		{"qr svd pinv lstsq backward", func(a *Tensor) *Tensor {
			x := a.Detach().SetRequiresGrad(true)
			q, r := QR(x.Narrow(-2, 0, 2), "reduced")
			u, sv, vh := SVD(x.Narrow(-1, 0, 2), false)
			l := q.Sum().Add(r.Sum()).Add(u.Sum()).Add(sv.Sum()).Add(vh.Sum())
			l.Add(Pinv(x).Sum()).Add(Lstsq(x, x).Sum()).Backward()
			return x.Grad()
		}, Shape{2, 3, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				var got *Tensor
				if err := Catch(func() { got = tc.f(Zeros(Shape{2, 3, 3}, Float64, d)) }); err != nil {
					t.Fatalf("on a shape-only device: %v", err)
				}
				if !slices.Equal(got.Shape(), tc.want) || got.Device() != d {
					t.Errorf("got %v on %s, want %v on %s", got.Shape(), got.Device(), tc.want, d)
				}
			})
		})
	}
	if err := Catch(func() { Inv(Zeros(Shape{2, 3}, Float64, d)) }); !errors.Is(err, ErrShape) {
		t.Errorf("a non-square matrix on a shape-only device gave %v, want ErrShape", err)
	}
}

// TestMatrixNormDim checks torch.linalg.matrix_norm's dim: each order over
// chosen dimensions equals MatrixNorm of the tensor with those dimensions
// moved last (rows, then columns), and keepdim leaves size-1 dimensions
// where they were.
func TestMatrixNormDim(t *testing.T) {
	cases := []struct {
		name  string
		shape Shape
		dim   [2]int
		perm  []int // a.Permute(perm...) has the matrices last
		keep  Shape // the shape under keepDim
	}{
		{"last two", Shape{2, 3, 4}, [2]int{-2, -1}, []int{0, 1, 2}, Shape{2, 1, 1}},
		{"transposed", Shape{2, 3, 4}, [2]int{-1, -2}, []int{0, 2, 1}, Shape{2, 1, 1}},
		{"first two", Shape{3, 4, 2}, [2]int{0, 1}, []int{2, 0, 1}, Shape{1, 1, 2}},
		{"apart", Shape{3, 2, 4, 5}, [2]int{3, 0}, []int{1, 2, 3, 0}, Shape{1, 2, 4, 1}},
		{"2-D columns first", Shape{3, 2}, [2]int{1, 0}, []int{1, 0}, Shape{1, 1}},
	}
	ords := []string{"fro", "nuc", "inf", "-inf", "1", "-1", "2", "-2"}
	for _, d := range []Device{CPU, Sim(0)} {
		for _, tc := range cases {
			for _, ord := range ords {
				t.Run(d.String()+"/"+tc.name+"/"+ord, func(t *testing.T) {
					Tidy(func() {
						a := rnd(31, tc.shape...).To(d)
						want := MatrixNorm(a.Permute(tc.perm...), ord, false)
						got := MatrixNormDim(a, ord, tc.dim, false)
						if !slices.Equal(got.Shape(), want.Shape()) || !withinAbs(got.Float64s(), want.Float64s(), 1e-12) {
							t.Errorf("got %v %v, want %v %v", got.Shape(), got.Float64s(), want.Shape(), want.Float64s())
						}
						kept := MatrixNormDim(a, ord, tc.dim, true)
						if !slices.Equal(kept.Shape(), tc.keep) || !withinAbs(kept.Float64s(), want.Float64s(), 1e-12) {
							t.Errorf("keepdim: got %v %v, want %v %v", kept.Shape(), kept.Float64s(), tc.keep, want.Float64s())
						}
					})
				})
			}
		}
	}
	t.Run("gradient", func(t *testing.T) {
		for _, ord := range []string{"fro", "nuc", "inf", "-1", "2"} {
			Tidy(func() {
				gradCheck(t, func(xs []*Tensor) *Tensor { return MatrixNormDim(xs[0], ord, [2]int{2, 0}, true) }, rnd(32, 3, 2, 4))
			})
		}
	})
	for _, tc := range []struct {
		name  string
		shape Shape
		ord   string
		dim   [2]int
		kind  error
	}{
		{"equal dims", Shape{2, 2}, "fro", [2]int{1, -1}, ErrArgument},
		{"dim out of range", Shape{2, 2, 2}, "fro", [2]int{0, 3}, ErrIndex},
		{"negative dim out of range", Shape{2, 2}, "nuc", [2]int{-3, 0}, ErrIndex},
		{"vector", Shape{4}, "fro", [2]int{0, -1}, ErrShape},
		{"nothing to pick", Shape{0, 2, 3}, "inf", [2]int{0, 2}, ErrShape},
		{"bad ord", Shape{2, 3}, "3", [2]int{1, 0}, ErrArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Catch(func() { Tidy(func() { MatrixNormDim(Ones(tc.shape, Float64), tc.ord, tc.dim, false) }) })
			var ve *Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &ve) || ve.Op != "linalg.matrix_norm" {
				t.Errorf("got %v, want a linalg.matrix_norm error of kind %v", err, tc.kind)
			}
		})
	}
}

// TestSolveShapeErrorNamesTheOperands checks that a B that does not fit A
// is reported with the shapes the caller passed, not with the transposes
// or the column that Solve makes of them.
func TestSolveShapeErrorNamesTheOperands(t *testing.T) {
	a := Eye(2, 2, Float64)
	tests := []struct {
		name string
		b    Shape
		left bool
		want string
	}{
		{"left", Shape{3, 1}, true, "A [2, 2] and B [3, 1]"},
		{"right", Shape{2, 1}, false, "A [2, 2] and B [2, 1]"},
		{"vector", Shape{3}, true, "A [2, 2] and B [3]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Catch(func() { Solve(a, Ones(tc.b, Float64), tc.left) })
			if !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Solve(A, B %v, %v): %v, want an ErrShape error with %q", tc.b, tc.left, err, tc.want)
			}
		})
	}
}
