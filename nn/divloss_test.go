package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// KLDivLoss, CosineSimilarity and CosineEmbeddingLoss give PyTorch's values,
// computed here in float64, and gradients that agree with central finite
// differences of those values, in every floating-point dtype and on the
// CPU and a simulated device.
func TestDivergenceLosses(t *testing.T) {
	x1 := []float64{-1.2, -0.3, -2.5, -0.7, -0.9, -1.6} // [2, 3]
	x2 := []float64{0.2, 0.5, 0.3, 0, 0.9, 0.1}
	ylab := []float64{1, -1}
	klElem := func(x, y []float64, logT bool) []float64 {
		out := make([]float64, len(x))
		for i := range x {
			switch {
			case logT:
				out[i] = math.Exp(y[i]) * (y[i] - x[i])
			case y[i] != 0:
				out[i] = y[i] * (math.Log(y[i]) - x[i])
			}
		}
		return out
	}
	sum := func(v []float64) float64 {
		s := 0.0
		for _, e := range v {
			s += e
		}
		return s
	}
	cosRows := func(a, b []float64, eps float64, pyEmb bool) []float64 {
		var out []float64
		for r := 0; r < len(a)/3; r++ {
			d, na, nb := 0.0, 0.0, 0.0
			for c := 0; c < 3; c++ {
				i := 3*r + c
				d += a[i] * b[i]
				na += a[i] * a[i]
				nb += b[i] * b[i]
			}
			if pyEmb {
				out = append(out, d/math.Sqrt((na+1e-12)*(nb+1e-12)))
			} else {
				out = append(out, d/(math.Max(math.Sqrt(na), eps)*math.Max(math.Sqrt(nb), eps)))
			}
		}
		return out
	}
	emb := func(a, b []float64, margin float64) []float64 {
		c := cosRows(a, b, 0, true)
		out := make([]float64, len(c))
		for i := range c {
			if ylab[i] == 1 {
				out[i] = 1 - c[i]
			} else {
				out[i] = math.Max(0, c[i]-margin)
			}
		}
		return out
	}
	tests := []struct {
		name string
		f    func(a, b *vram.Tensor) *vram.Tensor
		ref  func(a, b []float64) []float64
	}{
		{"kl_div batchmean", func(a, b *vram.Tensor) *vram.Tensor { return nn.KLDivLoss(a, b, false, nn.ReductionBatchMean) },
			func(a, b []float64) []float64 { return []float64{sum(klElem(a, b, false)) / 2} }},
		{"kl_div mean", func(a, b *vram.Tensor) *vram.Tensor { return nn.KLDivLoss(a, b, false, nn.ReductionMean) },
			func(a, b []float64) []float64 { return []float64{sum(klElem(a, b, false)) / 6} }},
		{"kl_div none (target 0 gives 0)", func(a, b *vram.Tensor) *vram.Tensor { return nn.KLDivLoss(a, b, false, nn.ReductionNone) },
			func(a, b []float64) []float64 { return klElem(a, b, false) }},
		{"kl_div log_target sum", func(a, b *vram.Tensor) *vram.Tensor { return nn.KLDivLoss(a, b, true, nn.ReductionSum) },
			func(a, b []float64) []float64 { return []float64{sum(klElem(a, b, true))} }},
		{"cosine similarity dim 1", func(a, b *vram.Tensor) *vram.Tensor { return nn.CosineSimilarity(a, b, 1, 1e-8) },
			func(a, b []float64) []float64 { return cosRows(a, b, 1e-8, false) }},
		{"cosine similarity dim -1 eps 1", func(a, b *vram.Tensor) *vram.Tensor { return nn.CosineSimilarity(a, b, -1, 1) },
			func(a, b []float64) []float64 { return cosRows(a, b, 1, false) }},
		{"cosine embedding margin 0", func(a, b *vram.Tensor) *vram.Tensor {
			y := vram.FromSlice(ylab, vram.Shape{2}, a.Device())
			return nn.CosineEmbeddingLoss(a, b, y, 0, nn.ReductionNone)
		}, func(a, b []float64) []float64 { return emb(a, b, 0) }},
		{"cosine embedding margin -0.5 mean", func(a, b *vram.Tensor) *vram.Tensor {
			y := vram.FromSlice(ylab, vram.Shape{2}, vram.Int64, a.Device())
			return nn.CosineEmbeddingLoss(a, b, y, -0.5, nn.ReductionMean)
		}, func(a, b []float64) []float64 { return []float64{sum(emb(a, b, -0.5)) / 2} }},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, dt := range []vram.DType{vram.Float64, vram.Float32, vram.Float16, vram.BFloat16} {
			tol := map[vram.DType]float64{vram.Float16: 4e-3, vram.BFloat16: 3e-2, vram.Float32: 1e-5, vram.Float64: 1e-12}[dt]
			for _, tc := range tests {
				t.Run(dev.String()+" "+dt.String()+" "+tc.name, func(t *testing.T) {
					vram.Tidy(func() {
						a := vram.FromSlice(x1, vram.Shape{2, 3}, dt, dev, vram.WithGrad())
						b := vram.FromSlice(x2, vram.Shape{2, 3}, dt, dev, vram.WithGrad())
						av, bv := a.Float64s(), b.Float64s()
						l := tc.f(a, b)
						checkValues(t, "loss", l.Float64s(), tc.ref(av, bv), tol)
						if dt != vram.Float64 {
							return
						}
						l.Sum().Backward()
						for _, in := range []struct {
							name string
							t    *vram.Tensor
							v    []float64
						}{{"d/dx1", a, av}, {"d/dx2", b, bv}} {
							g := in.t.Grad().Float64s()
							for i := range in.v {
								if in.name == "d/dx2" && bv[i] == 0 && tc.name[:6] == "kl_div" {
									continue // the divergence has a kink at a target of 0
								}
								const h = 1e-6
								orig := in.v[i]
								in.v[i] = orig + h
								up := sum(tc.ref(av, bv))
								in.v[i] = orig - h
								down := sum(tc.ref(av, bv))
								in.v[i] = orig
								if fd := (up - down) / (2 * h); math.Abs(fd-g[i]) > 1e-6*math.Max(1, math.Abs(fd)) {
									t.Errorf("%s[%d] = %v, finite difference %v", in.name, i, g[i], fd)
								}
							}
						}
					})
				})
			}
		}
	}
}

// The divergence losses refuse bad arguments with the package's sentinels.
func TestDivergenceLossArguments(t *testing.T) {
	x := func(shape ...int) *vram.Tensor { return vram.Ones(vram.Shape(shape)) }
	tests := []struct {
		name string
		f    func()
		kind error
	}{
		{"kl_div unknown reduction", func() { nn.KLDivLoss(x(2), x(2), false, nn.Reduction(9)) }, vram.ErrArgument},
		{"kl_div nil", func() { nn.KLDivLoss(nil, x(2), false, nn.ReductionSum) }, vram.ErrArgument},
		{"batchmean elsewhere", func() { nn.MSELossWith(x(2), x(2), nn.ReductionBatchMean) }, vram.ErrArgument},
		{"cosine similarity eps < 0", func() { nn.CosineSimilarity(x(2), x(2), 0, -1) }, vram.ErrArgument},
		{"cosine embedding shapes", func() { nn.CosineEmbeddingLoss(x(2, 3), x(2, 4), x(2), 0, nn.ReductionMean) }, vram.ErrShape},
		{"cosine embedding labels", func() { nn.CosineEmbeddingLoss(x(2, 3), x(2, 3), x(3), 0, nn.ReductionMean) }, vram.ErrShape},
		{"cosine embedding batchmean", func() { nn.CosineEmbeddingLoss(x(2, 3), x(2, 3), x(2), 0, nn.ReductionBatchMean) }, vram.ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vram.Tidy(func() {
				var err error
				func() {
					defer func() { err, _ = recover().(error) }()
					tc.f()
				}()
				if !errors.Is(err, tc.kind) {
					t.Fatalf("got %v, want an error of kind %v", err, tc.kind)
				}
			})
		})
	}
}

// CosineSimilarity of a zero vector is 0 (its norm clamped to eps), with
// PyTorch's finite gradients, and an unbatched pair gives a scalar.
func TestCosineSimilarityEdges(t *testing.T) {
	vram.Tidy(func() {
		a := vram.FromSlice([]float64{0, 0, 1, 2}, vram.Shape{2, 2}, vram.WithGrad())
		b := vram.FromSlice([]float64{3, 4, 2, 4}, vram.Shape{2, 2})
		c := nn.CosineSimilarity(a, b, 1, 1e-8)
		checkValues(t, "cos", c.Float64s(), []float64{0, 1}, 1e-12)
		c.Sum().Backward()
		// PyTorch's: the zero vector's norm has gradient 0, so x1's is
		// (x2/‖x2‖)/eps; the parallel pair's is 0.
		checkValues(t, "d/dx1", a.Grad().Float64s(), []float64{0.6e8, 0.8e8, 0, 0}, 1e-9)
		s := nn.CosineSimilarity(vram.FromSlice([]float64{1, 0}, vram.Shape{2}), vram.FromSlice([]float64{1, 1}, vram.Shape{2}), 0, 1e-8)
		if s.Dim() != 0 || !near(s.Item(), 1/math.Sqrt2, 1e-12) {
			t.Fatalf("unbatched: %v %v", s.Shape(), s.Item())
		}
	})
}
