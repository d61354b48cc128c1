package dataset

import (
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
)

func TestSpiralsDeterministic(t *testing.T) {
	a, at, err := Spirals(Config{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	b, bt, err := Spirals(Config{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Features, b.Features) || !slices.Equal(a.Labels, b.Labels) ||
		!slices.Equal(at.Features, bt.Features) || !slices.Equal(at.Labels, bt.Labels) {
		t.Fatal("the same seed gave different data")
	}
	c, _, err := Spirals(Config{Seed: 8})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a.Features, c.Features) {
		t.Fatal("seeds 7 and 8 gave the same features")
	}
}

func TestSpiralsSizesAndBalance(t *testing.T) {
	tests := []struct {
		name              string
		cfg               Config
		classes, feats    int
		trainPer, testPer int
	}{
		{"defaults", Config{}, 3, 4, 480, 120},
		{"five arms no distractors", Config{Classes: 5, PerClass: 100, Distractors: -1, TestFraction: 0.3}, 5, 2, 70, 30},
		{"two arms many distractors", Config{Classes: 2, PerClass: 10, Distractors: 6, Noise: -1}, 2, 8, 8, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			train, test, err := Spirals(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []struct {
				name string
				set  *Set
				per  int
			}{{"train", train, tc.trainPer}, {"test", test, tc.testPer}} {
				if s.set.NumClasses != tc.classes || s.set.NumFeatures != tc.feats {
					t.Errorf("%s: %d classes, %d features; want %d, %d", s.name, s.set.NumClasses, s.set.NumFeatures, tc.classes, tc.feats)
				}
				if s.set.Len() != tc.classes*s.per || len(s.set.Features) != s.set.Len()*tc.feats {
					t.Errorf("%s: %d labels, %d feature values; want %d rows of %d", s.name, s.set.Len(), len(s.set.Features), tc.classes*s.per, tc.feats)
				}
				for k, n := range s.set.ClassCounts() {
					if n != s.per {
						t.Errorf("%s: class %d has %d examples, want %d", s.name, k, n, s.per)
					}
				}
				for _, v := range s.set.Features {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("%s: non-finite feature %v", s.name, v)
					}
				}
			}
		})
	}
}

func TestSpiralsShuffled(t *testing.T) {
	train, _, err := Spirals(Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A shuffled set does not keep one class in a long run at the start.
	first := train.Labels[0]
	run := 0
	for _, l := range train.Labels[:50] {
		if l == first {
			run++
		}
	}
	if run == 50 {
		t.Fatal("the first 50 training examples all have the same class; the set is not shuffled")
	}
}

func TestSpiralsNoiseFree(t *testing.T) {
	// Without noise, each point lies on its arm: radius in [0.05, 1].
	train, _, err := Spirals(Config{Noise: -1, Distractors: -1, PerClass: 50})
	if err != nil {
		t.Fatal(err)
	}
	for i := range train.Len() {
		x, y := float64(train.Features[2*i]), float64(train.Features[2*i+1])
		if r := math.Hypot(x, y); r < 0.05-1e-6 || r > 1+1e-6 {
			t.Fatalf("point %d at radius %v, want it in [0.05, 1]", i, r)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for name, cfg := range map[string]Config{
		"one class":          {Classes: 1},
		"negative per class": {PerClass: -3},
		"test fraction 1":    {TestFraction: 1},
		"empty test split":   {PerClass: 2, TestFraction: 0.1},
		"NaN turns":          {Turns: math.NaN()},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := Spirals(cfg); err == nil {
				t.Fatalf("Spirals(%+v) returned no error", cfg)
			}
		})
	}
}

func TestSampler(t *testing.T) {
	s := NewSampler(10, 4, 3)
	var sizes []int
	seen := map[int]int{}
	for range 6 { // two epochs: 4+4+2, 4+4+2
		b := s.Next()
		sizes = append(sizes, len(b))
		for _, i := range b {
			seen[i]++
		}
	}
	if !slices.Equal(sizes, []int{4, 4, 2, 4, 4, 2}) {
		t.Errorf("batch sizes %v, want [4 4 2 4 4 2]", sizes)
	}
	for i := range 10 {
		if seen[i] != 2 {
			t.Errorf("index %d seen %d times in two epochs, want 2", i, seen[i])
		}
	}
	a, b := NewSampler(100, 10, 5), NewSampler(100, 10, 5)
	for range 25 {
		if !slices.Equal(a.Next(), b.Next()) {
			t.Fatal("samplers with the same seed dealt different batches")
		}
	}
}

func TestTensors(t *testing.T) {
	train, _, err := Spirals(Config{PerClass: 20, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	x, y := train.Tensors(vram.CPU)
	defer x.Release()
	defer y.Release()
	if got, want := x.Shape(), (vram.Shape{train.Len(), train.NumFeatures}); !slices.Equal(got, want) {
		t.Errorf("x shape %v, want %v", got, want)
	}
	if x.DType() != vram.Float32 || y.DType() != vram.Int64 {
		t.Errorf("dtypes %s, %s; want float32, int64", x.DType(), y.DType())
	}
	if !slices.Equal(x.Float32s(), train.Features) || !slices.Equal(y.Int64s(), train.Labels) {
		t.Error("tensors do not hold the set's values")
	}

	bx, by := train.Batch([]int{3, 0}, vram.CPU)
	defer bx.Release()
	defer by.Release()
	nf := train.NumFeatures
	want := append(slices.Clone(train.Features[3*nf:4*nf]), train.Features[:nf]...)
	if !slices.Equal(bx.Float32s(), want) || !slices.Equal(by.Int64s(), []int64{train.Labels[3], train.Labels[0]}) {
		t.Error("batch does not hold rows 3 and 0")
	}
}
