package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestEmbeddingPaddingIdx checks padding_idx: the row starts as zeros,
// positions of it give its row, and it gets no gradient while the other
// rows get PyTorch's (one per use), for each way of naming it.
func TestEmbeddingPaddingIdx(t *testing.T) {
	tests := []struct {
		name    string
		pad     *int
		row     int // the padding row, -1 for none
		indices []int64
	}{
		{"none", nil, -1, []int64{0, 2, 2, 3}},
		{"row 0", intp(0), 0, []int64{0, 2, 0, 3}},
		{"row 2", intp(2), 2, []int64{0, 2, 2, 3}},
		{"last, as -1", intp(-1), 3, []int64{3, 1, 3, 3}},
		{"first, as -4", intp(-4), 0, []int64{0, 1}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				vram.Tidy(func() {
					e := nn.NewEmbeddingOptions(4, 3, nn.EmbeddingOptions{PaddingIdx: tc.pad}, dev, vram.Float64)
					w := e.Weight.Float64s()
					if tc.row >= 0 {
						if e.PaddingIdx == nil || *e.PaddingIdx != tc.row {
							t.Fatalf("PaddingIdx %v, want %d", e.PaddingIdx, tc.row)
						}
						for _, v := range w[3*tc.row : 3*tc.row+3] {
							if v != 0 {
								t.Fatalf("padding row %v, want zeros", w[3*tc.row:3*tc.row+3])
							}
						}
					}
					if !e.Weight.RequiresGrad() || !e.Weight.IsLeaf() {
						t.Fatal("weight is not a leaf requiring grad")
					}
					x := vram.FromSlice(tc.indices, vram.Shape{len(tc.indices)}, dev)
					y := e.Forward(x)
					if got, want := y.Shape(), (vram.Shape{len(tc.indices), 3}); !slicesEqual(got, want) {
						t.Fatalf("shape %v, want %v", got, want)
					}
					out := y.Float64s()
					for i, r := range tc.indices {
						for j := range 3 {
							if out[3*i+j] != w[3*r+int64(j)] {
								t.Fatalf("row %d of the output %v, want weight row %d", i, out[3*i:3*i+3], r)
							}
						}
					}
					// Loss Σ y·c with c[i][j] = i+j+1: row r's gradient sums
					// c over its positions, zero for the padding row.
					c := make([]float64, len(out))
					for i := range len(tc.indices) {
						for j := range 3 {
							c[3*i+j] = float64(i + j + 1)
						}
					}
					y.Mul(vram.FromSlice(c, y.Shape(), dev)).Sum().Backward()
					g := e.Weight.Grad().Float64s()
					want := make([]float64, 12)
					for i, r := range tc.indices {
						if int(r) == tc.row {
							continue
						}
						for j := range 3 {
							want[3*int(r)+j] += c[3*i+j]
						}
					}
					checkValues(t, "gradient", g, want, 0)
				})
			})
		}
	}
}

// TestEmbeddingPaddingIdxArguments checks the refusal of padding indices
// outside [-num, num).
func TestEmbeddingPaddingIdxArguments(t *testing.T) {
	for _, p := range []int{4, -5, math.MaxInt} {
		err := vram.Catch(func() { nn.NewEmbeddingOptions(4, 2, nn.EmbeddingOptions{PaddingIdx: intp(p)}) })
		if !errors.Is(err, vram.ErrArgument) {
			t.Errorf("padding index %d: error %v, want ErrArgument", p, err)
		}
	}
}

// TestLayerNormNoBias checks bias=False: a weight and no bias, in the
// state dict too, and the output and gradients of the layer with a bias of
// zeros.
func TestLayerNormNoBias(t *testing.T) {
	vram.Tidy(func() {
		nb := nn.NewLayerNormNoBias([]int{3}, 1e-5, vram.Float64)
		full := nn.NewLayerNorm([]int{3}, 1e-5, vram.Float64)
		if nb.Bias != nil || nb.Weight == nil {
			t.Fatalf("weight %v bias %v, want a weight and no bias", nb.Weight, nb.Bias)
		}
		params := nb.NamedParameters()
		if len(params) != 1 || params[0].Name != "weight" {
			t.Fatalf("parameters %v, want weight alone", params)
		}
		xs := []float64{1, 2, 4, -1, 0, 3}
		var outs [2][]float64
		var grads [2][]float64
		for i, l := range []*nn.LayerNorm{nb, full} {
			x := vram.FromSlice(xs, vram.Shape{2, 3}, vram.WithGrad())
			y := l.Forward(x)
			outs[i] = y.Float64s()
			y.Mul(vram.FromSlice([]float64{1, -2, 3, 0.5, 1, -1}, vram.Shape{2, 3})).Sum().Backward()
			grads[i] = append(x.Grad().Float64s(), l.Weight.Grad().Float64s()...)
		}
		checkValues(t, "output", outs[0], outs[1], 0)
		checkValues(t, "gradients", grads[0], grads[1], 0)
	})
}
