package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// refRenorm applies PyTorch's max_norm rule in float64 to a table of rows
// of size dim: each row named in indices whose p-norm exceeds maxNorm is
// scaled by maxNorm/(norm+1e-7).
func refRenorm(w []float64, dim int, indices []int64, maxNorm, p float64) []float64 {
	w = append([]float64(nil), w...)
	seen := map[int64]bool{}
	for _, r := range indices {
		if seen[r] {
			continue
		}
		seen[r] = true
		row := w[int(r)*dim : int(r+1)*dim]
		var norm float64
		switch {
		case math.IsInf(p, 1):
			for _, v := range row {
				norm = math.Max(norm, math.Abs(v))
			}
		default:
			for _, v := range row {
				norm += math.Pow(math.Abs(v), p)
			}
			norm = math.Pow(norm, 1/p)
		}
		if norm > maxNorm {
			for j := range row {
				row[j] *= maxNorm / (norm + 1e-7)
			}
		}
	}
	return w
}

// TestEmbeddingMaxNorm checks max_norm and norm_type: the rows looked up
// are renormalised in place, the others left alone, and the output is
// the renormalised rows.
func TestEmbeddingMaxNorm(t *testing.T) {
	table := []float64{
		3, 4, // norm 5
		0.3, 0.4, // norm 0.5
		-6, 8, // norm 10
		1, 0, // norm 1: exactly at the bound, unchanged
		10, 10, // never looked up
	}
	tests := []struct {
		name     string
		maxNorm  float64
		normType float64
		indices  []int64
		shape    vram.Shape
	}{
		{"l2", 1, 0, []int64{0, 1, 2, 3}, vram.Shape{4}},
		{"l2 repeated, 2-D input", 1, 2, []int64{2, 0, 2, 2, 1, 0}, vram.Shape{2, 3}},
		{"l1", 2, 1, []int64{0, 3, 1}, vram.Shape{3}},
		{"inf", 3, math.Inf(1), []int64{2, 2, 4}, vram.Shape{3}},
		{"large bound", 100, 0, []int64{0, 1, 2, 3, 4}, vram.Shape{5}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				vram.Tidy(func() {
					w := vram.FromSlice(table, vram.Shape{5, 2}, dev)
					e := nn.NewEmbeddingFromPretrained(w, false, nn.EmbeddingOptions{MaxNorm: tc.maxNorm, NormType: tc.normType})
					x := vram.FromSlice(tc.indices, tc.shape, dev)
					y := e.Forward(x)
					p := tc.normType
					if p == 0 {
						p = 2
					}
					want := refRenorm(table, 2, tc.indices, tc.maxNorm, p)
					checkValues(t, "table", e.Weight.Float64s(), want, 1e-12)
					var rows []float64
					for _, r := range tc.indices {
						rows = append(rows, want[2*r:2*r+2]...)
					}
					checkValues(t, "output", y.Float64s(), rows, 1e-12)
					if !e.Weight.IsLeaf() || !e.Weight.RequiresGrad() {
						t.Fatal("weight is no longer a leaf requiring grad")
					}
					y.Sum().Backward()
					if e.Weight.Grad() == nil {
						t.Fatal("no gradient")
					}
					checkValues(t, "source weights", w.Float64s(), table, 0)
				})
			})
		}
	}
}

// TestEmbeddingScaleGradByFreq checks scale_grad_by_freq: each row's
// gradient is divided by its count in the input, the output unchanged,
// with and without a padding index.
func TestEmbeddingScaleGradByFreq(t *testing.T) {
	tests := []struct {
		name    string
		pad     *int
		indices []int64
	}{
		{"distinct", nil, []int64{0, 1, 2}},
		{"repeated", nil, []int64{2, 0, 2, 2, 1, 0}},
		{"padding", intp(0), []int64{0, 0, 3, 3, 1}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				vram.Tidy(func() {
					e := nn.NewEmbeddingOptions(4, 3, nn.EmbeddingOptions{PaddingIdx: tc.pad, ScaleGradByFreq: true},
						dev, vram.Float64, vram.WithGenerator(vram.NewGenerator(1)))
					w := e.Weight.Float64s()
					x := vram.FromSlice(tc.indices, vram.Shape{len(tc.indices)}, dev)
					y := e.Forward(x)
					var rows []float64
					for _, r := range tc.indices {
						rows = append(rows, w[3*r:3*r+3]...)
					}
					checkValues(t, "output", y.Float64s(), rows, 0)
					c := make([]float64, len(rows))
					for i := range c {
						c[i] = float64(i + 1)
					}
					y.Mul(vram.FromSlice(c, y.Shape(), dev)).Sum().Backward()
					count := map[int64]float64{}
					for _, r := range tc.indices {
						count[r]++
					}
					want := make([]float64, 12)
					for i, r := range tc.indices {
						if tc.pad != nil && int(r) == *tc.pad {
							continue
						}
						for j := range 3 {
							want[3*int(r)+j] += c[3*i+j] / count[r]
						}
					}
					checkValues(t, "gradient", e.Weight.Grad().Float64s(), want, 1e-12)
				})
			})
		}
	}
}

// TestEmbeddingScaleGradByFreqNonFinite checks that infinite rows come
// out as they are, not as NaN.
func TestEmbeddingScaleGradByFreqNonFinite(t *testing.T) {
	w := vram.FromSlice([]float64{math.Inf(1), 1, math.Inf(-1), 2}, vram.Shape{2, 2})
	e := nn.NewEmbeddingFromPretrained(w, false, nn.EmbeddingOptions{ScaleGradByFreq: true})
	y := e.Forward(vram.FromSlice([]int64{0, 1, 1}, vram.Shape{3}))
	got := y.Float64s()
	want := []float64{math.Inf(1), 1, math.Inf(-1), 2, math.Inf(-1), 2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("output %v, want %v", got, want)
		}
	}
}

// TestEmbeddingFromPretrained checks from_pretrained: a copy of the
// table, frozen or trainable, with padding rows left as given.
func TestEmbeddingFromPretrained(t *testing.T) {
	vals := []float32{1, 2, 3, 4, 5, 6}
	for _, freeze := range []bool{true, false} {
		t.Run(map[bool]string{true: "frozen", false: "trainable"}[freeze], func(t *testing.T) {
			w := vram.FromSlice(vals, vram.Shape{3, 2}, vram.Sim(0))
			e := nn.NewEmbeddingFromPretrained(w, freeze, nn.EmbeddingOptions{PaddingIdx: intp(1)})
			if e.Weight.Device() != vram.Sim(0) || e.Weight.DType() != vram.Float32 {
				t.Fatalf("weight on %s as %s, want sim:0 float32", e.Weight.Device(), e.Weight.DType())
			}
			if e.Weight.RequiresGrad() == freeze || !e.Weight.IsLeaf() {
				t.Fatalf("requires grad %v with freeze=%v", e.Weight.RequiresGrad(), freeze)
			}
			if ps := e.NamedParameters(); len(ps) != 1 || ps[0].Name != "weight" {
				t.Fatalf("parameters %v, want just weight", ps)
			}
			vram.NoGrad(func() { w.FillInPlace(0) })
			checkValues(t, "table", e.Weight.Float64s(), []float64{1, 2, 3, 4, 5, 6}, 0)
			y := e.Forward(vram.FromSlice([]int64{2, 1}, vram.Shape{2}, vram.Sim(0)))
			checkValues(t, "output", y.Float64s(), []float64{5, 6, 3, 4}, 0)
			if y.RequiresGrad() == freeze {
				t.Fatalf("output requires grad %v with freeze=%v", y.RequiresGrad(), freeze)
			}
			nn.Release(e)
		})
	}
}

// TestEmbeddingOptionArguments checks the refusal of bad options and
// pretrained tables.
func TestEmbeddingOptionArguments(t *testing.T) {
	tests := []struct {
		name string
		fn   func()
		kind error
	}{
		{"negative max norm", func() { nn.NewEmbeddingOptions(3, 2, nn.EmbeddingOptions{MaxNorm: -1}) }, vram.ErrArgument},
		{"NaN max norm", func() { nn.NewEmbeddingOptions(3, 2, nn.EmbeddingOptions{MaxNorm: math.NaN()}) }, vram.ErrArgument},
		{"infinite max norm", func() { nn.NewEmbeddingOptions(3, 2, nn.EmbeddingOptions{MaxNorm: math.Inf(1)}) }, vram.ErrArgument},
		{"NaN norm type", func() { nn.NewEmbeddingOptions(3, 2, nn.EmbeddingOptions{MaxNorm: 1, NormType: math.NaN()}) }, vram.ErrArgument},
		{"nil pretrained", func() { nn.NewEmbeddingFromPretrained(nil, true, nn.EmbeddingOptions{}) }, vram.ErrArgument},
		{"1-D pretrained", func() { nn.NewEmbeddingFromPretrained(vram.Zeros(vram.Shape{3}), true, nn.EmbeddingOptions{}) }, vram.ErrShape},
		{"integer pretrained", func() {
			nn.NewEmbeddingFromPretrained(vram.Zeros(vram.Shape{3, 2}, vram.Int64), true, nn.EmbeddingOptions{})
		}, vram.ErrDType},
		{"pretrained padding out of range", func() {
			nn.NewEmbeddingFromPretrained(vram.Zeros(vram.Shape{3, 2}), true, nn.EmbeddingOptions{PaddingIdx: intp(3)})
		}, vram.ErrArgument},
		{"max norm index out of range", func() {
			nn.NewEmbeddingOptions(3, 2, nn.EmbeddingOptions{MaxNorm: 1}).Forward(vram.FromSlice([]int64{3}, vram.Shape{1}))
		}, vram.ErrIndex},
		{"scaled index out of range", func() {
			nn.NewEmbeddingOptions(3, 2, nn.EmbeddingOptions{ScaleGradByFreq: true}).Forward(vram.FromSlice([]int64{-1}, vram.Shape{1}))
		}, vram.ErrIndex},
		{"max norm float indices", func() {
			nn.NewEmbeddingOptions(3, 2, nn.EmbeddingOptions{MaxNorm: 1}).Forward(vram.Zeros(vram.Shape{1}))
		}, vram.ErrDType},
		{"nil input", func() { nn.NewEmbedding(3, 2).Forward(nil) }, vram.ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := vram.Catch(tc.fn); !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want an error of kind %v", err, tc.kind)
			}
		})
	}
}

// TestEmbeddingOptionsReleaseEverything checks that max_norm and
// scale_grad_by_freq leave nothing allocated on a simulated device.
func TestEmbeddingOptionsReleaseEverything(t *testing.T) {
	dev := vram.Sim(1)
	e := nn.NewEmbeddingOptions(10, 4, nn.EmbeddingOptions{MaxNorm: 0.5, ScaleGradByFreq: true, PaddingIdx: intp(0)}, dev)
	defer nn.Release(e)
	x := vram.FromSlice([]int64{0, 3, 3, 9, 1, 3}, vram.Shape{2, 3}, dev)
	defer x.Release()
	for _, grad := range []bool{false, true} {
		memtest.Settle(dev)
		base := vram.MemoryAllocated(dev)
		run := func() {
			y := e.Forward(x)
			if grad {
				s := y.Sum()
				s.Backward()
				s.Release()
			}
			y.Release()
		}
		if grad {
			run()
		} else {
			vram.NoGrad(run)
		}
		e.Weight.ZeroGrad()
		if got := vram.MemoryAllocated(dev); got != base {
			t.Errorf("grad=%v: %d bytes allocated after the step, want %d", grad, got, base)
		}
	}
}
