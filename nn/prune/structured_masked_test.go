package prune_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/prune"
)

// TestLnStructuredAfterUnstructured: LnStructured ranks the slices of a
// parameter already pruned by the norms of its masked values, the pruned
// elements counting as zeros, as PyTorch's ln_structured computes
// torch.norm over weight_orig⊙weight_mask: a slice holding a pruned
// element has a smallest magnitude of 0 and an L-p norm of 0 for p < 0,
// and goes first. Rows [1, 5] and [3, 4]; L1Unstructured prunes the 1.
func TestLnStructuredAfterUnstructured(t *testing.T) {
	tests := []struct {
		name string
		n    float64
		want []float64
	}{
		// PyTorch: row 0 is [0, 5], of norms 0 (-Inf), 0 (-1), 1 (0),
		// 5 (1), 5 (Inf); row 1 is [3, 4], of norms 3, 1.71, 2, 7, 4.
		{"min", math.Inf(-1), []float64{0, 0, 1, 1}},
		{"L-1", -1, []float64{0, 0, 1, 1}},
		{"L-0.5", -0.5, []float64{0, 0, 1, 1}},
		{"count of non-zeros", 0, []float64{0, 0, 1, 1}},
		{"L1", 1, []float64{0, 0, 1, 1}},
		{"max", math.Inf(1), []float64{0, 1, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := linear(t, 2, 2, []float32{1, 5, 3, 4})
			defer nn.Release(l)
			if err := prune.L1Unstructured(l, "weight", prune.Count(1)); err != nil {
				t.Fatal(err)
			}
			if err := prune.LnStructured(l, "weight", prune.Count(1), tc.n, 0); err != nil {
				t.Fatal(err)
			}
			if got := maskOf(l); !slices.Equal(got, tc.want) {
				t.Errorf("mask %v, want %v", got, tc.want)
			}
		})
	}
}

// TestStructuredRefusesVectors: LnStructured and RandomStructured refuse
// a parameter of fewer than two dimensions (a bias, a norm's weight) with
// vram.ErrArgument, drawing nothing and attaching no mask, as PyTorch's
// "Structured pruning can only be applied to multidimensional tensors"
// does; unstructured pruning takes it.
func TestStructuredRefusesVectors(t *testing.T) {
	tests := []struct {
		name  string
		prune func(m nn.Module, name string, g *vram.Generator) error
		ok    bool
	}{
		{"LnStructured", func(m nn.Module, name string, _ *vram.Generator) error {
			return prune.LnStructured(m, name, prune.Count(1), 2, 0)
		}, false},
		{"LnStructured, negative dim", func(m nn.Module, name string, _ *vram.Generator) error {
			return prune.LnStructured(m, name, prune.Fraction(0.5), 1, -1)
		}, false},
		{"RandomStructured", func(m nn.Module, name string, g *vram.Generator) error {
			return prune.RandomStructured(m, name, prune.Count(1), 0, g)
		}, false},
		{"L1Unstructured", func(m nn.Module, name string, _ *vram.Generator) error {
			return prune.L1Unstructured(m, name, prune.Count(1))
		}, true},
	}
	for _, tc := range tests {
		for _, target := range []struct {
			m    nn.Module
			name string
		}{{nn.NewLinear(2, 3), "bias"}, {nn.NewLayerNorm([]int{4}, 1e-5), "weight"}} {
			t.Run(tc.name+"/"+fmt.Sprintf("%T.%s", target.m, target.name), func(t *testing.T) {
				defer nn.Release(target.m)
				g := vram.NewGenerator(3)
				want := vram.NewGenerator(3).Float64()
				err := tc.prune(target.m, target.name, g)
				if tc.ok {
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				if !errors.Is(err, vram.ErrArgument) {
					t.Fatalf("got %v, want an error matching vram.ErrArgument", err)
				}
				if prune.IsPruned(target.m, target.name) {
					t.Error("a mask was attached")
				}
				if got := g.Float64(); got != want {
					t.Error("the generator was drawn from")
				}
			})
		}
	}
}
