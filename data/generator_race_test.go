package data_test

import (
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
)

// TestSharedGeneratorsConcurrently runs epochs at once from several
// goroutines whose loaders and samplers draw from one generator, or from
// the default generator (a nil Generator), while other code draws from
// and reseeds both, as a program that shuffles in several loops might:
// for the race detector, and to check that every epoch stays a whole
// permutation (or, with replacement, indices in range) whatever the
// interleaving.
func TestSharedGeneratorsConcurrently(t *testing.T) {
	const n = 23
	ds := rowsDataset(t, n, vram.CPU)
	shared := vram.NewGenerator(7)
	subset := make([]int, 0, n)
	for i := n - 1; i >= 0; i -= 2 {
		subset = append(subset, i)
	}
	type setup struct {
		name  string
		opts  data.Options
		check func(idx []int) bool
	}
	perm := func(idx []int) bool {
		s := slices.Clone(idx)
		slices.Sort(s)
		for i, v := range s {
			if v != i {
				return false
			}
		}
		return len(s) == n
	}
	inRange := func(k int) func(idx []int) bool {
		return func(idx []int) bool {
			return len(idx) == k && !slices.ContainsFunc(idx, func(i int) bool { return i < 0 || i >= n })
		}
	}
	sameSet := func(idx []int) bool {
		a, b := slices.Clone(idx), slices.Clone(subset)
		slices.Sort(a)
		slices.Sort(b)
		return slices.Equal(a, b)
	}
	var setups []setup
	for _, g := range []*vram.Generator{nil, shared} {
		name := "default generator"
		if g != nil {
			name = "shared generator"
		}
		setups = append(setups,
			setup{name + "/shuffle", data.Options{Shuffle: true, Generator: g}, perm},
			setup{name + "/shuffle with workers", data.Options{Shuffle: true, Generator: g, NumWorkers: 2}, perm},
			setup{name + "/replacement", data.Options{Sampler: data.RandomSampler{N: n, Generator: g, Replacement: true, NumSamples: 31}, NumWorkers: 1}, inRange(31)},
			setup{name + "/more samples than N", data.Options{Sampler: data.RandomSampler{N: n, Generator: g, NumSamples: 2*n + 3}}, inRange(2*n + 3)},
			setup{name + "/subset", data.Options{Sampler: data.SubsetRandomSampler{Indices: subset, Generator: g}, NumWorkers: 3}, sameSet},
		)
	}
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for _, s := range setups {
		l, err := data.NewLoader(ds, 4, s.opts)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		for range 2 {
			wg.Go(func() {
				for range 5 {
					var idx []int
					for b, err := range l.All() {
						if err != nil {
							t.Errorf("%s: %v", s.name, err)
							return
						}
						for k, i := range b.Tensors[1].Int64s() {
							if int(i) != b.Indices[k] {
								t.Errorf("%s: the batch holds sample %d where its indices say %d", s.name, i, b.Indices[k])
							}
						}
						idx = append(idx, b.Indices...)
					}
					if !s.check(idx) {
						t.Errorf("%s: an epoch of indices %v", s.name, idx)
					}
				}
			})
		}
	}
	// Other code draws from and reseeds the generators meanwhile.
	wg.Go(func() {
		for i := range 50 {
			shared.Float64()
			vram.DefaultGenerator().Float64()
			if i%10 == 0 {
				shared.ManualSeed(uint64(i))
				vram.ManualSeed(uint64(i))
			}
		}
	})
	wg.Go(func() {
		for range 5 {
			subs, err := data.RandomSplitFractions(ds, []float64{0.5, 0.5}, shared)
			if err != nil {
				t.Error(err)
				return
			}
			if got := subs[0].Len() + subs[1].Len(); got != n {
				t.Errorf("RandomSplitFractions split %d samples into %d", n, got)
			}
		}
	})
	wg.Wait()
	settled(t, before)
}
