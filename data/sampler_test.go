package data_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
)

func TestSamplers(t *testing.T) {
	count := func(idx []int, n int) []int {
		c := make([]int, n)
		for _, i := range idx {
			c[i]++
		}
		return c
	}
	for _, tc := range []struct {
		name    string
		sampler data.Sampler
		n       int   // indices are in [0, n)
		len     int   // indices an epoch yields
		each    []int // how often each index comes, when fixed
	}{
		{"sequential", data.SequentialSampler{N: 4}, 4, 4, []int{1, 1, 1, 1}},
		{"random", data.RandomSampler{N: 5, Generator: vram.NewGenerator(1)}, 5, 5, []int{1, 1, 1, 1, 1}},
		{"random, fewer", data.RandomSampler{N: 5, NumSamples: 3, Generator: vram.NewGenerator(1)}, 5, 3, nil},
		{"random, more", data.RandomSampler{N: 3, NumSamples: 7, Generator: vram.NewGenerator(1)}, 3, 7, nil},
		{"random, replacement", data.RandomSampler{N: 3, NumSamples: 50, Replacement: true, Generator: vram.NewGenerator(1)}, 3, 50, nil},
		{"subset random", data.SubsetRandomSampler{Indices: []int{7, 2, 9}, Generator: vram.NewGenerator(1)}, 10, 3, []int{0, 0, 1, 0, 0, 0, 0, 1, 0, 1}},
		{"empty", data.RandomSampler{N: 0}, 1, 0, []int{0}},
		{"empty, samples asked", data.RandomSampler{N: 0, NumSamples: 5}, 1, 0, []int{0}},
		{"empty, replacement", data.RandomSampler{N: 0, NumSamples: 5, Replacement: true}, 1, 0, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.Collect(tc.sampler.All())
			if len(got) != tc.len || tc.sampler.(interface{ Len() int }).Len() != tc.len {
				t.Fatalf("%d indices %v, Len %d; want %d", len(got), got, tc.sampler.(interface{ Len() int }).Len(), tc.len)
			}
			for _, i := range got {
				if i < 0 || i >= tc.n {
					t.Fatalf("index %d outside [0, %d): %v", i, tc.n, got)
				}
			}
			c := count(got, tc.n)
			if tc.each != nil && !slices.Equal(c, tc.each) {
				t.Errorf("counts %v, want %v (%v)", c, tc.each, got)
			}
			if r, ok := tc.sampler.(data.RandomSampler); ok && !r.Replacement && r.N > 0 && r.NumSamples > r.N {
				// Whole permutations first: every index r.NumSamples/r.N times at least.
				for i, k := range c {
					if k < r.NumSamples/r.N {
						t.Errorf("index %d came %d times in %v", i, k, got)
					}
				}
			}
		})
	}
}

func TestConcatDataset(t *testing.T) {
	a, b := rowsDataset(t, 3, vram.CPU), rowsDataset(t, 2, vram.CPU)
	empty, _ := data.NewSubset(a, nil)
	c, err := data.NewConcatDataset(a, empty, b)
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 5 {
		t.Fatalf("Len %d, want 5", c.Len())
	}
	for i, want := range []int64{0, 1, 2, 0, 1} {
		s, err := c.Get(i)
		if err != nil {
			t.Fatal(err)
		}
		if got := s[1].(*vram.Tensor).Item(); got != float64(want) {
			t.Errorf("element %d has y %v, want %d", i, got, want)
		}
		for _, f := range s {
			f.(*vram.Tensor).Release()
		}
	}
	for _, i := range []int{-1, 5} {
		if _, err := c.Get(i); !errors.Is(err, vram.ErrIndex) {
			t.Errorf("Get(%d): %v, want ErrIndex", i, err)
		}
	}
	for name, ds := range map[string][]data.Dataset{"none": nil, "nil": {a, nil}} {
		if _, err := data.NewConcatDataset(ds...); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("%s: %v, want ErrArgument", name, err)
		}
	}
}

// TestRandomSamplerDrawsOwnStream checks that an epoch of a RandomSampler
// that draws as it yields gives the same indices whatever else draws from
// its generator meanwhile, and so the same batches with and without a
// loader's workers.
func TestRandomSamplerDrawsOwnStream(t *testing.T) {
	ds := rowsDataset(t, 40, vram.CPU)
	for _, tc := range []struct {
		name    string
		sampler func(g *vram.Generator) data.RandomSampler
	}{
		{"replacement", func(g *vram.Generator) data.RandomSampler {
			return data.RandomSampler{N: 40, Replacement: true, Generator: g}
		}},
		{"replacement, default generator", func(*vram.Generator) data.RandomSampler {
			return data.RandomSampler{N: 40, NumSamples: 60, Replacement: true}
		}},
		{"more than N", func(g *vram.Generator) data.RandomSampler {
			return data.RandomSampler{N: 7, NumSamples: 40, Generator: g}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(workers int, body bool) [][]int {
				vram.ManualSeed(7)
				g := vram.NewGenerator(7)
				s := tc.sampler(g)
				other := s.Generator
				if other == nil {
					other = vram.DefaultGenerator()
				}
				l, err := data.NewLoader(ds, 2, data.Options{Sampler: s, NumWorkers: workers})
				if err != nil {
					t.Fatal(err)
				}
				var got [][]int
				for b, err := range l.All() {
					if err != nil {
						t.Fatal(err)
					}
					if body {
						other.Float64() // a draw in the loop body, as dropout makes
					}
					got = append(got, slices.Clone(b.Indices))
				}
				return got
			}
			want := run(0, false)
			for _, c := range []struct {
				workers int
				body    bool
			}{{0, true}, {1, true}, {3, true}, {3, false}} {
				if got := run(c.workers, c.body); !slices.EqualFunc(got, want, slices.Equal) {
					t.Errorf("%d workers, draws in the body %v:\n%v\nwant\n%v", c.workers, c.body, got, want)
				}
			}
		})
	}
}
