package nn_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// lossCase is one of the margin and likelihood losses on fixed data: run
// computes it from tensors made of data with reduction r, and want gives
// its elementwise losses, worked out here from PyTorch's formulas.
type lossCase struct {
	name   string
	data   [][]float64
	shapes []vram.Shape
	ints   []int64 // class indices, passed last, when the loss takes them
	run    func(in []*vram.Tensor, r nn.Reduction) *vram.Tensor
	want   func(d [][]float64) []float64
}

func relu(v float64) float64 { return math.Max(v, 0) }

func logSig(v float64) float64 { return math.Min(v, 0) - math.Log1p(math.Exp(-math.Abs(v))) }

var (
	lossX  = []float64{0.5, -1.2, 2, 0.1, -0.3, 1.5}
	lossX2 = []float64{-0.4, 0.7, 1.9, 0.6, -2, 0.2}
	lossY  = []float64{1, -1, 1, -1, -1, 1}
	lossP  = []float64{0.9, 0, 1, 0, 1, 0}
	lossT  = []float64{0, 1, 3, 0.5, 2, 7}
	lossV  = []float64{0.5, 0.05, 2, 0.3, 1, 4}
	lossX3 = []float64{1.1, 0.3, -0.9, 0.4, 2.2, -1.3}
)

func lossCases() []lossCase {
	s23 := vram.Shape{2, 3}
	return []lossCase{
		{"margin ranking", [][]float64{lossX, lossX2, lossY}, []vram.Shape{s23, s23, s23}, nil,
			func(in []*vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.MarginRankingLoss(in[0], in[1], in[2], 0.3, r)
			},
			func(d [][]float64) []float64 {
				out := make([]float64, 6)
				for i := range out {
					out[i] = relu(-d[2][i]*(d[0][i]-d[1][i]) + 0.3)
				}
				return out
			}},
		{"hinge embedding", [][]float64{lossX, {1, -1, 1, -1, 0, -1}}, []vram.Shape{s23, s23}, nil,
			func(in []*vram.Tensor, r nn.Reduction) *vram.Tensor { return nn.HingeEmbeddingLoss(in[0], in[1], 1, r) },
			func(d [][]float64) []float64 {
				out := make([]float64, 6)
				for i := range out {
					if d[1][i] != 1 {
						out[i] += relu(1 - d[0][i])
					}
					if d[1][i] != -1 {
						out[i] += d[0][i]
					}
				}
				return out
			}},
		{"soft margin", [][]float64{lossX, lossY}, []vram.Shape{s23, s23}, nil,
			func(in []*vram.Tensor, r nn.Reduction) *vram.Tensor { return nn.SoftMarginLoss(in[0], in[1], r) },
			func(d [][]float64) []float64 {
				out := make([]float64, 6)
				for i := range out {
					out[i] = math.Log1p(math.Exp(-d[1][i] * d[0][i]))
				}
				return out
			}},
		{"multilabel soft margin", [][]float64{lossX, lossP, {0.5, 2, 1}}, []vram.Shape{s23, s23, {3}}, nil,
			func(in []*vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.MultiLabelSoftMarginLoss(in[0], in[1], in[2], r)
			},
			func(d [][]float64) []float64 {
				out := make([]float64, 2)
				for n := range 2 {
					for c := range 3 {
						i := n*3 + c
						out[n] -= d[2][c] * (d[1][i]*logSig(d[0][i]) + (1-d[1][i])*logSig(-d[0][i])) / 3
					}
				}
				return out
			}},
		{"multi margin p1", [][]float64{lossX}, []vram.Shape{s23}, []int64{2, 0},
			func(in []*vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.MultiMarginLoss(in[0], in[1], 1, 1, nil, r)
			},
			func(d [][]float64) []float64 { return refMultiMargin(d[0], []int64{2, 0}, 1, 1, nil) }},
		{"multi margin p2 weighted", [][]float64{lossX, {0.5, 2, 3}}, []vram.Shape{s23, {3}}, []int64{1, 2},
			func(in []*vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.MultiMarginLoss(in[0], in[2], 2, 0.7, in[1], r)
			},
			func(d [][]float64) []float64 { return refMultiMargin(d[0], []int64{1, 2}, 2, 0.7, d[1]) }},
		{"triplet margin", [][]float64{lossX, lossX2, lossX3}, []vram.Shape{s23, s23, s23}, nil,
			func(in []*vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.TripletMarginLoss(in[0], in[1], in[2], 1, 2, 1e-6, false, r)
			},
			func(d [][]float64) []float64 { return refTriplet(d, 1, 2, 1e-6, false) }},
		{"triplet margin swap p1", [][]float64{lossX, lossX2, lossX3}, []vram.Shape{s23, s23, s23}, nil,
			func(in []*vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.TripletMarginLoss(in[0], in[1], in[2], 2, 1, 1e-6, true, r)
			},
			func(d [][]float64) []float64 { return refTriplet(d, 2, 1, 1e-6, true) }},
		{"poisson log input full", [][]float64{lossX, lossT}, []vram.Shape{s23, s23}, nil,
			func(in []*vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.PoissonNLLLoss(in[0], in[1], true, true, 1e-8, r)
			},
			func(d [][]float64) []float64 {
				out := make([]float64, 6)
				for i, x := range d[0] {
					t := d[1][i]
					out[i] = math.Exp(x) - t*x
					if t > 1 {
						out[i] += t*math.Log(t) - t + 0.5*math.Log(2*math.Pi*t)
					}
				}
				return out
			}},
		{"poisson rate", [][]float64{{0.5, 1.2, 2, 0.1, 0.3, 1.5}, lossT}, []vram.Shape{s23, s23}, nil,
			func(in []*vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.PoissonNLLLoss(in[0], in[1], false, false, 1e-8, r)
			},
			func(d [][]float64) []float64 {
				out := make([]float64, 6)
				for i, x := range d[0] {
					out[i] = x - d[1][i]*math.Log(x+1e-8)
				}
				return out
			}},
		{"gaussian", [][]float64{lossX, lossX2, lossV}, []vram.Shape{s23, s23, s23}, nil,
			func(in []*vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.GaussianNLLLoss(in[0], in[1], in[2], false, 1e-6, r)
			},
			func(d [][]float64) []float64 { return refGaussian(d[0], d[1], d[2], 1, false) }},
		{"gaussian full, one variance per row", [][]float64{lossX, lossX2, {0.5, 2}}, []vram.Shape{s23, s23, {2, 1}}, nil,
			func(in []*vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.GaussianNLLLoss(in[0], in[1], in[2], true, 1e-6, r)
			},
			func(d [][]float64) []float64 { return refGaussian(d[0], d[1], d[2], 3, true) }},
		{"gaussian, variance without last dimension", [][]float64{lossX, lossX2, {0.5, 2}}, []vram.Shape{s23, s23, {2}}, nil,
			func(in []*vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.GaussianNLLLoss(in[0], in[1], in[2], false, 1e-6, r)
			},
			func(d [][]float64) []float64 { return refGaussian(d[0], d[1], d[2], 3, false) }},
	}
}

func refMultiMargin(x []float64, y []int64, p int, margin float64, w []float64) []float64 {
	out := make([]float64, len(y))
	for n, t := range y {
		row := x[n*3 : n*3+3]
		for i := range row {
			if int64(i) == t {
				continue
			}
			h := math.Pow(relu(margin-row[t]+row[i]), float64(p))
			if w != nil {
				h *= w[t]
			}
			out[n] += h / 3
		}
	}
	return out
}

func refTriplet(d [][]float64, margin, p, eps float64, swap bool) []float64 {
	dist := func(u, v []float64) float64 {
		var s float64
		for i := range u {
			s += math.Pow(math.Abs(u[i]-v[i]+eps), p)
		}
		return math.Pow(s, 1/p)
	}
	out := make([]float64, 2)
	for n := range out {
		a, pos, neg := d[0][n*3:n*3+3], d[1][n*3:n*3+3], d[2][n*3:n*3+3]
		dan := dist(a, neg)
		if swap {
			dan = math.Min(dan, dist(pos, neg))
		}
		out[n] = relu(dist(a, pos) - dan + margin)
	}
	return out
}

// refGaussian takes one variance for every per elements of x.
func refGaussian(x, t, v []float64, per int, full bool) []float64 {
	out := make([]float64, len(x))
	for i := range x {
		vi := math.Max(v[i/per], 1e-6)
		out[i] = 0.5 * (math.Log(vi) + (x[i]-t[i])*(x[i]-t[i])/vi)
		if full {
			out[i] += 0.5 * math.Log(2*math.Pi)
		}
	}
	return out
}

// The margin, ranking and likelihood losses give PyTorch's values with
// every reduction on the CPU and a simulated device, and their gradients
// match finite differences.
func TestMarginAndLikelihoodLosses(t *testing.T) {
	for _, tc := range lossCases() {
		per := tc.want(tc.data)
		var sum float64
		for _, v := range per {
			sum += v
		}
		for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
			t.Run(dev.String()+" "+tc.name, func(t *testing.T) {
				vram.Tidy(func() {
					var in []*vram.Tensor
					for i, d := range tc.data {
						in = append(in, vram.FromSlice(d, tc.shapes[i], dev))
					}
					if tc.ints != nil {
						in = append(in, vram.FromSlice(tc.ints, vram.Shape{len(tc.ints)}, dev))
					}
					none := tc.run(in, nn.ReductionNone)
					if none.Device() != dev || none.NumElements() != len(per) {
						t.Fatalf("none: %v on %v, want %d elements", none.Shape(), none.Device(), len(per))
					}
					checkValues(t, "none", none.Float64s(), per, 1e-12)
					checkValues(t, "sum", []float64{tc.run(in, nn.ReductionSum).Item()}, []float64{sum}, 1e-12)
					checkValues(t, "mean", []float64{tc.run(in, nn.ReductionMean).Item()}, []float64{sum / float64(len(per))}, 1e-12)
					if dev != vram.CPU {
						return
					}
					// The floating-point inputs other than labels: the
					// first of every loss, and the second and third
					// where they are values rather than labels.
					grads := in[:1]
					switch tc.name {
					case "margin ranking":
						grads = in[:2]
					case "triplet margin", "triplet margin swap p1", "gaussian", "gaussian full, one variance per row",
						"gaussian, variance without last dimension":
						grads = in[:3]
					case "multi margin p2 weighted":
						grads = in[:2]
					}
					finiteDifferences(t, func() *vram.Tensor { return tc.run(in, nn.ReductionNone) }, grads...)
				})
			})
		}
	}
}

// GaussianNLLLoss clamps small variances to eps in value but passes the
// gradient to them unchanged, as PyTorch's in-place clamp under no_grad
// does, and float16 inputs give float16 losses computed in float32.
func TestGaussianNLLLossClampAndHalf(t *testing.T) {
	x := vram.FromSlice([]float64{1}, vram.Shape{1})
	tgt := vram.FromSlice([]float64{0}, vram.Shape{1})
	v := vram.FromSlice([]float64{1e-9}, vram.Shape{1}, vram.WithGrad())
	l := nn.GaussianNLLLoss(x, tgt, v, false, 1e-3, nn.ReductionSum)
	want := 0.5 * (math.Log(1e-3) + 1/1e-3)
	checkValues(t, "clamped", []float64{l.Item()}, []float64{want}, 1e-12)
	l.Backward()
	// d/dv of ½(log v + d²/v) at the clamped value 1e-3.
	checkValues(t, "gradient", v.Grad().Float64s(), []float64{0.5 * (1/1e-3 - 1/1e-6)}, 1e-9)

	h := nn.MarginRankingLoss(vram.FromSlice(lossX, vram.Shape{6}, vram.Float16), vram.FromSlice(lossX2, vram.Shape{6}, vram.Float16),
		vram.FromSlice(lossY, vram.Shape{6}, vram.Float16), 0, nn.ReductionNone)
	if h.DType() != vram.Float16 {
		t.Fatalf("float16 inputs gave %v", h.DType())
	}
	checkValues(t, "float16", h.Float64s(), []float64{0, 0, 0, 0, 1.7, 0}, 2e-3)
}

// Bad arguments and shapes give errors of vram's kinds.
func TestMarginAndLikelihoodLossErrors(t *testing.T) {
	x := vram.Randn(vram.Shape{2, 3})
	y := vram.FromSlice([]int64{0, 2}, vram.Shape{2})
	tests := []struct {
		name string
		fn   func()
		kind error
	}{
		{"ranking nil", func() { nn.MarginRankingLoss(x, nil, x, 0, nn.ReductionMean) }, vram.ErrArgument},
		{"ranking dimensions", func() { nn.MarginRankingLoss(x, x, vram.Ones(vram.Shape{3}), 0, nn.ReductionMean) }, vram.ErrShape},
		{"multi margin [C] with [2] targets", func() {
			nn.MultiMarginLoss(vram.Randn(vram.Shape{3}), y, 1, 1, nil, nn.ReductionMean)
		}, vram.ErrShape},
		{"ranking NaN margin", func() { nn.MarginRankingLoss(x, x, x, math.NaN(), nn.ReductionMean) }, vram.ErrArgument},
		{"hinge reduction", func() { nn.HingeEmbeddingLoss(x, x, 1, nn.ReductionBatchMean) }, vram.ErrArgument},
		{"soft margin shapes", func() { nn.SoftMarginLoss(x, vram.Randn(vram.Shape{4}), nn.ReductionMean) }, vram.ErrShape},
		{"multilabel shapes", func() { nn.MultiLabelSoftMarginLoss(x, vram.Randn(vram.Shape{2, 2}), nil, nn.ReductionMean) }, vram.ErrShape},
		{"multilabel weight", func() { nn.MultiLabelSoftMarginLoss(x, x, vram.Randn(vram.Shape{2}), nn.ReductionMean) }, vram.ErrShape},
		{"multilabel 3-d", func() {
			z := vram.Randn(vram.Shape{1, 2, 3})
			nn.MultiLabelSoftMarginLoss(z, z, nil, nn.ReductionMean)
		}, vram.ErrShape},
		{"multi margin p", func() { nn.MultiMarginLoss(x, y, 3, 1, nil, nn.ReductionMean) }, vram.ErrArgument},
		{"multi margin target shape", func() { nn.MultiMarginLoss(x, y.Reshape(2, 1), 1, 1, nil, nn.ReductionMean) }, vram.ErrShape},
		{"multi margin target range", func() {
			nn.MultiMarginLoss(x, vram.FromSlice([]int64{0, 3}, vram.Shape{2}), 1, 1, nil, nn.ReductionMean)
		}, vram.ErrIndex},
		{"multi margin weight", func() { nn.MultiMarginLoss(x, y, 1, 1, vram.Randn(vram.Shape{2}), nn.ReductionMean) }, vram.ErrShape},
		{"triplet shapes", func() { nn.TripletMarginLoss(x, x, vram.Randn(vram.Shape{2, 4}), 1, 2, 1e-6, false, nn.ReductionMean) }, vram.ErrShape},
		{"triplet p", func() { nn.TripletMarginLoss(x, x, x, 1, 0, 1e-6, false, nn.ReductionMean) }, vram.ErrArgument},
		{"triplet NaN p", func() { nn.TripletMarginLoss(x, x, x, 1, math.NaN(), 1e-6, false, nn.ReductionMean) }, vram.ErrArgument},
		{"poisson eps", func() { nn.PoissonNLLLoss(x, x, true, false, -1, nn.ReductionMean) }, vram.ErrArgument},
		{"gaussian negative variance", func() {
			nn.GaussianNLLLoss(x, x, vram.FromSlice([]float32{1, -0.5}, vram.Shape{2, 1}), false, 1e-6, nn.ReductionMean)
		}, vram.ErrArgument},
		{"gaussian variance shape", func() { nn.GaussianNLLLoss(x, x, vram.Ones(vram.Shape{3}), false, 1e-6, nn.ReductionMean) }, vram.ErrShape},
		{"gaussian variance shape 2", func() { nn.GaussianNLLLoss(x, x, vram.Ones(vram.Shape{2, 2}), false, 1e-6, nn.ReductionMean) }, vram.ErrShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := vram.Catch(tc.fn); !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want %v", err, tc.kind)
			}
		})
	}
}

// The errors of the operations a loss is built from name the loss.
func TestMarginLossErrorsNameTheLoss(t *testing.T) {
	x := vram.Randn(vram.Shape{2, 3})
	tests := []struct {
		name, op string
		fn       func()
		kind     error
	}{
		{"class out of range", "multi_margin_loss", func() {
			nn.MultiMarginLoss(x, vram.FromSlice([]int64{-1, 0}, vram.Shape{2}), 1, 1, nil, nn.ReductionMean)
		}, vram.ErrIndex},
		{"int32 classes", "multi_margin_loss", func() {
			nn.MultiMarginLoss(x, vram.Zeros(vram.Shape{2}, vram.Int32), 1, 1, nil, nn.ReductionMean)
		}, vram.ErrDType},
		{"devices", "gaussian_nll_loss", func() {
			nn.GaussianNLLLoss(x, x.To(vram.Sim(0)), vram.Ones(vram.Shape{2, 3}), false, 1e-6, nn.ReductionMean)
		}, vram.ErrDevice},
		{"shapes", "soft_margin_loss", func() { nn.SoftMarginLoss(x, vram.Randn(vram.Shape{4}), nn.ReductionMean) }, vram.ErrShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.op) {
				t.Fatalf("got %v, want %v naming %s", err, tc.kind, tc.op)
			}
		})
	}
}

// MultiMarginLoss takes one sample [C] with its class as a scalar, giving
// a scalar loss, or as [1], giving [1], as PyTorch does.
func TestMultiMarginLossOneSample(t *testing.T) {
	x := vram.FromSlice([]float64{0.5, -1.2, 2}, vram.Shape{3})
	want := refMultiMargin([]float64{0.5, -1.2, 2}, []int64{0}, 1, 1, nil)
	for _, tc := range []struct {
		y     *vram.Tensor
		shape vram.Shape
	}{
		{vram.FromSlice([]int64{0}, vram.Shape{}), vram.Shape{}},
		{vram.FromSlice([]int64{0}, vram.Shape{1}), vram.Shape{1}},
	} {
		l := nn.MultiMarginLoss(x, tc.y, 1, 1, nil, nn.ReductionNone)
		if l.Dim() != len(tc.shape) {
			t.Fatalf("target %v: loss shape %v, want %v", tc.y.Shape(), l.Shape(), tc.shape)
		}
		checkValues(t, "one sample", l.Float64s(), want, 1e-12)
		checkValues(t, "one sample mean", []float64{nn.MultiMarginLoss(x, tc.y, 1, 1, nil, nn.ReductionMean).Item()}, want, 1e-12)
	}
}

// A loss's result takes the dtype PyTorch's type promotion gives all its
// floating-point operands, the labels, weights and variances included.
func TestMarginLossesPromoteEveryOperand(t *testing.T) {
	f32 := func(v ...float32) *vram.Tensor { return vram.FromSlice(v, vram.Shape{len(v)}) }
	f64 := func(v ...float64) *vram.Tensor { return vram.FromSlice(v, vram.Shape{len(v)}) }
	x2 := vram.FromSlice([]float32{0.5, -1, 2, 0}, vram.Shape{2, 2})
	tests := []struct {
		name string
		fn   func() *vram.Tensor
		want vram.DType
	}{
		{"gaussian float64 variance", func() *vram.Tensor {
			return nn.GaussianNLLLoss(f32(1, 2), f32(0, 1), f64(1, 2), false, 1e-6, nn.ReductionNone)
		}, vram.Float64},
		{"gaussian float32", func() *vram.Tensor {
			return nn.GaussianNLLLoss(f32(1, 2), f32(0, 1), f32(1, 2), false, 1e-6, nn.ReductionMean)
		}, vram.Float32},
		{"ranking float64 labels", func() *vram.Tensor {
			return nn.MarginRankingLoss(f32(1, 2), f32(2, 1), f64(1, -1), 0.5, nn.ReductionSum)
		}, vram.Float64},
		{"soft margin float64 labels", func() *vram.Tensor {
			return nn.SoftMarginLoss(f32(1, 2), f64(1, -1), nn.ReductionMean)
		}, vram.Float64},
		{"soft margin int64 labels", func() *vram.Tensor {
			return nn.SoftMarginLoss(f32(1, 2), vram.FromSlice([]int64{1, -1}, vram.Shape{2}), nn.ReductionMean)
		}, vram.Float32},
		{"multilabel float64 targets", func() *vram.Tensor {
			return nn.MultiLabelSoftMarginLoss(x2, vram.FromSlice([]float64{1, 0, 0, 1}, vram.Shape{2, 2}), nil, nn.ReductionMean)
		}, vram.Float64},
		{"multilabel float64 weight", func() *vram.Tensor {
			return nn.MultiLabelSoftMarginLoss(x2, vram.FromSlice([]float32{1, 0, 0, 1}, vram.Shape{2, 2}), f64(1, 2), nn.ReductionNone)
		}, vram.Float64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fn().DType(); got != tc.want {
				t.Fatalf("dtype %v, want %v", got, tc.want)
			}
		})
	}
}

// TripletMarginLoss takes p = ∞, as PyTorch's pairwise_distance does:
// the distance is the largest |u − v + eps|.
func TestTripletMarginLossInfinityNorm(t *testing.T) {
	a := vram.FromSlice([]float64{0, 0, 1, 1}, vram.Shape{2, 2})
	p := vram.FromSlice([]float64{3, -1, 1, 2}, vram.Shape{2, 2})
	n := vram.FromSlice([]float64{1, 1, -4, 1}, vram.Shape{2, 2})
	const eps, margin = 1e-6, 1.0
	dist := func(u, v []float64) float64 {
		return math.Max(math.Abs(u[0]-v[0]+eps), math.Abs(u[1]-v[1]+eps))
	}
	as, ps, ns := a.Float64s(), p.Float64s(), n.Float64s()
	tests := []struct {
		name string
		swap bool
	}{{"no swap", false}, {"swap", true}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := make([]float64, 2)
			for i := range want {
				dap, dan := dist(as[2*i:2*i+2], ps[2*i:2*i+2]), dist(as[2*i:2*i+2], ns[2*i:2*i+2])
				if tc.swap {
					dan = math.Min(dan, dist(ps[2*i:2*i+2], ns[2*i:2*i+2]))
				}
				want[i] = math.Max(dap-dan+margin, 0)
			}
			l := nn.TripletMarginLoss(a, p, n, margin, math.Inf(1), eps, tc.swap, nn.ReductionNone)
			checkValues(t, "loss", l.Float64s(), want, 1e-12)
		})
	}
}

// PairwiseDistance is ‖x1 − x2 + eps‖_p along the last dimension, the
// inputs broadcast, as torch.nn.functional.pairwise_distance.
func TestPairwiseDistance(t *testing.T) {
	x1 := vram.FromSlice([]float64{1, 2, 3, -1, 0, 4}, vram.Shape{2, 3})
	x2 := vram.FromSlice([]float64{0, 2, 5}, vram.Shape{3})
	rows := [][]float64{{1, 2, 3}, {-1, 0, 4}}
	ref := func(p, eps float64) []float64 {
		var out []float64
		for _, r := range rows {
			var s float64
			for i, v := range r {
				d := math.Abs(v - x2.Float64s()[i] + eps)
				switch {
				case math.IsInf(p, 1):
					s = math.Max(s, d)
				default:
					s += math.Pow(d, p)
				}
			}
			if !math.IsInf(p, 1) {
				s = math.Pow(s, 1/p)
			}
			out = append(out, s)
		}
		return out
	}
	tests := []struct {
		name    string
		p, eps  float64
		keepDim bool
		shape   vram.Shape
	}{
		{"p=2", 2, 1e-6, false, vram.Shape{2}},
		{"p=1 eps=0", 1, 0, false, vram.Shape{2}},
		{"p=3", 3, 0.5, false, vram.Shape{2}},
		{"p=inf", math.Inf(1), 1e-6, false, vram.Shape{2}},
		{"keepdim", 2, 1e-6, true, vram.Shape{2, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := nn.PairwiseDistance(x1, x2, tc.p, tc.eps, tc.keepDim)
			if !slices.Equal(d.Shape(), tc.shape) {
				t.Fatalf("shape %v, want %v", d.Shape(), tc.shape)
			}
			checkValues(t, "distance", d.Float64s(), ref(tc.p, tc.eps), 1e-12)
		})
	}
	h := nn.PairwiseDistance(x1.Cast(vram.Float16), x2.Cast(vram.Float16), 2, 1e-6, false)
	if h.DType() != vram.Float16 {
		t.Fatalf("float16 inputs gave %v", h.DType())
	}
	checkValues(t, "float16", h.Float64s(), ref(2, 1e-6), 2e-3)
}

// TripletMarginWithDistanceLoss with no distance is TripletMarginLoss with
// p 2 and eps 1e-6, and with one it takes that distance, as PyTorch's.
func TestTripletMarginWithDistanceLoss(t *testing.T) {
	a := vram.FromSlice([]float64{0, 0, 1, 1, 2, -1}, vram.Shape{3, 2})
	p := vram.FromSlice([]float64{3, -1, 1, 2, 2, 0}, vram.Shape{3, 2})
	n := vram.FromSlice([]float64{1, 1, -4, 1, 2, -1.5}, vram.Shape{3, 2})
	l1 := func(x1, x2 *vram.Tensor) *vram.Tensor { return x1.Sub(x2).Abs().Sum(-1) }
	as, ps, ns := a.Float64s(), p.Float64s(), n.Float64s()
	refL1 := func(u, v []float64) float64 { return math.Abs(u[0]-v[0]) + math.Abs(u[1]-v[1]) }
	tests := []struct {
		name   string
		dist   func(x1, x2 *vram.Tensor) *vram.Tensor
		margin float64
		swap   bool
		want   func() []float64
	}{
		{"default", nil, 1, false, func() []float64 {
			return nn.TripletMarginLoss(a, p, n, 1, 2, 1e-6, false, nn.ReductionNone).Float64s()
		}},
		{"default swap", nil, 0.5, true, func() []float64 {
			return nn.TripletMarginLoss(a, p, n, 0.5, 2, 1e-6, true, nn.ReductionNone).Float64s()
		}},
		{"l1 swap", l1, 2, true, func() []float64 {
			out := make([]float64, 3)
			for i := range out {
				u, v, w := as[2*i:2*i+2], ps[2*i:2*i+2], ns[2*i:2*i+2]
				out[i] = math.Max(refL1(u, v)-math.Min(refL1(u, w), refL1(v, w))+2, 0)
			}
			return out
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := nn.TripletMarginWithDistanceLoss(a, p, n, tc.dist, tc.margin, tc.swap, nn.ReductionNone)
			checkValues(t, "loss", got.Float64s(), tc.want(), 1e-12)
		})
	}
}

// Bad arguments to the distances and the triplet loss with a distance
// give errors of vram's kinds naming the function.
func TestDistanceErrors(t *testing.T) {
	x := vram.Randn(vram.Shape{2, 3})
	tests := []struct {
		name, op string
		fn       func()
		kind     error
	}{
		{"pairwise nil", "pairwise_distance", func() { nn.PairwiseDistance(x, nil, 2, 1e-6, false) }, vram.ErrArgument},
		{"pairwise p 0", "pairwise_distance", func() { nn.PairwiseDistance(x, x, 0, 1e-6, false) }, vram.ErrArgument},
		{"pairwise NaN p", "pairwise_distance", func() { nn.PairwiseDistance(x, x, math.NaN(), 1e-6, false) }, vram.ErrArgument},
		{"pairwise eps", "pairwise_distance", func() { nn.PairwiseDistance(x, x, 2, -1, false) }, vram.ErrArgument},
		{"pairwise scalars", "pairwise_distance", func() { nn.PairwiseDistance(vram.Scalar(1), vram.Scalar(2), 2, 0, false) }, vram.ErrShape},
		{"pairwise shapes", "pairwise_distance", func() { nn.PairwiseDistance(x, vram.Randn(vram.Shape{4}), 2, 0, false) }, vram.ErrShape},
		{"with distance margin 0", "triplet_margin_with_distance_loss", func() {
			nn.TripletMarginWithDistanceLoss(x, x, x, nil, 0, false, nn.ReductionMean)
		}, vram.ErrArgument},
		{"with distance dims", "triplet_margin_with_distance_loss", func() {
			nn.TripletMarginWithDistanceLoss(x, x, vram.Randn(vram.Shape{3}), nil, 1, false, nn.ReductionMean)
		}, vram.ErrShape},
		{"with distance reduction", "triplet_margin_with_distance_loss", func() {
			nn.TripletMarginWithDistanceLoss(x, x, x, nil, 1, false, nn.Reduction(9))
		}, vram.ErrArgument},
		{"with distance shapes", "triplet_margin_with_distance_loss", func() {
			nn.TripletMarginWithDistanceLoss(x, x, vram.Randn(vram.Shape{2, 4}), nil, 1, false, nn.ReductionMean)
		}, vram.ErrShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			var e *vram.Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &e) || e.Op != tc.op {
				t.Fatalf("got %v, want %v naming %s", err, tc.kind, tc.op)
			}
		})
	}
}
