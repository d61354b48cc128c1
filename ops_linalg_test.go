package vram

import (
	"math"
	"slices"
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
