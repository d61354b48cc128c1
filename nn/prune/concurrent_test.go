package prune_test

import (
	"sync"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/prune"
)

// TestConcurrentPruning prunes different layers from several goroutines
// at once, drawing from one shared generator (the default one, for the
// random methods), and runs each pruned layer forward in the goroutine
// that pruned it; run under -race, it checks that the package keeps no
// state of its own that the goroutines share.
func TestConcurrentPruning(t *testing.T) {
	methods := []struct {
		name  string
		prune func(l *nn.Linear) error
		zeros int // weight elements of the 8x16 weight pruned
	}{
		{"L1Unstructured", func(l *nn.Linear) error { return prune.L1Unstructured(l, "weight", prune.Fraction(0.5)) }, 64},
		{"RandomUnstructured", func(l *nn.Linear) error { return prune.RandomUnstructured(l, "weight", prune.Count(10), nil) }, 10},
		{"LnStructured", func(l *nn.Linear) error { return prune.LnStructured(l, "weight", prune.Count(2), 2, 0) }, 32},
		{"RandomStructured", func(l *nn.Linear) error { return prune.RandomStructured(l, "weight", prune.Count(3), 1, nil) }, 24},
	}
	const perMethod = 4
	g := vram.WithGenerator(vram.NewGenerator(11))
	var layers []*nn.Linear
	for range len(methods) * perMethod {
		layers = append(layers, nn.NewLinear(16, 8, g))
	}
	defer func() {
		for _, l := range layers {
			nn.Release(l)
		}
	}()
	x := vram.Randn(vram.Shape{3, 16}, g)
	defer x.Release()
	var wg sync.WaitGroup
	errs := make([]error, len(layers))
	for i, l := range layers {
		wg.Go(func() {
			errs[i] = vram.Catch(func() {
				if err := methods[i%len(methods)].prune(l); err != nil {
					panic(err)
				}
				vram.NoGrad(func() { vram.Tidy(func() { l.Forward(x).Float64s() }) })
			})
		})
	}
	wg.Wait()
	for i, l := range layers {
		m := methods[i%len(methods)]
		if errs[i] != nil {
			t.Fatalf("%s: %v", m.name, errs[i])
		}
		_, total := prune.Sparsity(l)
		if zeros := total.Zeros; zeros < m.zeros {
			t.Errorf("%s: layer %d has %d zeros, want at least the %d pruned", m.name, i, zeros, m.zeros)
		}
		mask := l.WeightMask.Float64s()
		n := 0
		for _, v := range mask {
			if v == 0 {
				n++
			}
		}
		if n != m.zeros {
			t.Errorf("%s: layer %d mask prunes %d elements, want %d", m.name, i, n, m.zeros)
		}
	}
}
