package prune_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/prune"
)

// TestNilModules checks that a nil module, and a nil pointer held as one
// (a "var l *nn.Linear" left unset), is refused with an error matching
// vram.ErrArgument by every function that prunes, and reads as a module
// with nothing pruned by those that ask, rather than being dereferenced.
func TestNilModules(t *testing.T) {
	var lin *nn.Linear
	for _, m := range []nn.Module{nil, lin} {
		for _, tc := range []struct {
			name string
			call func() error
		}{
			{"L1Unstructured", func() error { return prune.L1Unstructured(m, "weight", prune.Fraction(0.5)) }},
			{"RandomUnstructured", func() error {
				return prune.RandomUnstructured(m, "weight", prune.Fraction(0.5), vram.NewGenerator(1))
			}},
			{"LnStructured", func() error { return prune.LnStructured(m, "weight", prune.Count(1), 2, 0) }},
			{"RandomStructured", func() error {
				return prune.RandomStructured(m, "weight", prune.Count(1), 0, vram.NewGenerator(1))
			}},
			{"Identity", func() error { return prune.Identity(m, "weight") }},
			{"CustomFromMask", func() error { return prune.CustomFromMask(m, "weight", vram.Ones(vram.Shape{2, 2})) }},
			{"GlobalUnstructured", func() error {
				return prune.GlobalUnstructured([]prune.Target{{Module: m, Name: "weight"}}, prune.Fraction(0.5))
			}},
			{"Remove", func() error { return prune.Remove(m, "weight") }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var err error
				if perr := vram.Catch(func() { err = tc.call() }); perr != nil {
					t.Fatalf("%T: panicked with %v", m, perr)
				}
				if !errors.Is(err, vram.ErrArgument) {
					t.Errorf("%T: got %v, want an error matching vram.ErrArgument", m, err)
				}
			})
		}
		t.Run("queries", func(t *testing.T) {
			err := vram.Catch(func() {
				if prune.IsPruned(m, "weight") || prune.AnyPruned(m) {
					t.Errorf("%T reads as pruned", m)
				}
				if n, err := prune.RemoveAll(m); n != 0 || err != nil {
					t.Errorf("%T: RemoveAll gave %d, %v", m, n, err)
				}
				if ps, total := prune.Sparsity(m); len(ps) != 0 || total.Total != 0 {
					t.Errorf("%T: Sparsity gave %v, %v", m, ps, total)
				}
				if ts := prune.Params(m, "weight"); len(ts) != 0 {
					t.Errorf("%T: Params gave %v", m, ts)
				}
			})
			if err != nil {
				t.Fatalf("%T: %v", m, err)
			}
		})
	}
}
