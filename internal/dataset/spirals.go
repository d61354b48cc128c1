package dataset

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/vramgo/vram"
)

// Defaults of [Config], used where a field is zero.
const (
	DefaultClasses      = 3    // spiral arms
	DefaultPerClass     = 600  // points per arm
	DefaultTurns        = 1.0  // full turns each arm winds through
	DefaultNoise        = 0.04 // standard deviation of the noise on x and y; arms end at radius 1
	DefaultDistractors  = 2    // noise features appended to x and y
	DefaultTestFraction = 0.2  // share of each class held out for testing
)

// Config describes a spiral dataset. Its zero value is the default problem
// (three arms, 600 points each, two distractor features, 20% held out, seed
// 0); each field says what zero means.
type Config struct {
	// Classes is the number of spiral arms, one class each; 0 means
	// DefaultClasses. It must not be 1.
	Classes int
	// PerClass is the number of points on each arm; 0 means
	// DefaultPerClass.
	PerClass int
	// Turns is how many full turns each arm winds through between the
	// centre and radius 1; 0 means DefaultTurns.
	Turns float64
	// Noise is the standard deviation of the Gaussian noise added to each
	// point's x and y; 0 means DefaultNoise, a negative value means none.
	Noise float64
	// Distractors is the number of extra features drawn from a standard
	// normal distribution, unrelated to the class; 0 means
	// DefaultDistractors, a negative value means none.
	Distractors int
	// TestFraction is the share of each class held out in the test set,
	// in (0, 1); 0 means DefaultTestFraction.
	TestFraction float64
	// Seed selects the points, the split and their order.
	Seed uint64
}

// withDefaults returns c with zero fields replaced by the defaults and
// negative "none" values by zero, or an error for an impossible setting.
func (c Config) withDefaults() (Config, error) {
	if c.Classes == 0 {
		c.Classes = DefaultClasses
	}
	if c.PerClass == 0 {
		c.PerClass = DefaultPerClass
	}
	if c.Turns == 0 {
		c.Turns = DefaultTurns
	}
	switch {
	case c.Noise == 0:
		c.Noise = DefaultNoise
	case c.Noise < 0:
		c.Noise = 0
	}
	switch {
	case c.Distractors == 0:
		c.Distractors = DefaultDistractors
	case c.Distractors < 0:
		c.Distractors = 0
	}
	if c.TestFraction == 0 {
		c.TestFraction = DefaultTestFraction
	}
	var errs []error
	if c.Classes < 2 {
		errs = append(errs, fmt.Errorf("Classes is %d, want at least 2", c.Classes))
	}
	if c.PerClass < 0 {
		errs = append(errs, fmt.Errorf("PerClass is %d, want a positive count", c.PerClass))
	}
	if math.IsNaN(c.Turns) || math.IsInf(c.Turns, 0) || c.Turns < 0 {
		errs = append(errs, fmt.Errorf("Turns is %v, want a positive number", c.Turns))
	}
	if math.IsNaN(c.Noise) || math.IsInf(c.Noise, 0) {
		errs = append(errs, fmt.Errorf("Noise is %v, want a finite number", c.Noise))
	}
	if !(c.TestFraction > 0 && c.TestFraction < 1) {
		errs = append(errs, fmt.Errorf("TestFraction is %v, want a value in (0, 1)", c.TestFraction))
	} else if c.PerClass > 0 {
		if nt := testCount(c); nt == 0 || nt == c.PerClass {
			errs = append(errs, fmt.Errorf("TestFraction %v of %d points per class leaves an empty split", c.TestFraction, c.PerClass))
		}
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("dataset: bad config: %w", errors.Join(errs...))
	}
	return c, nil
}

// testCount returns how many points of each class go to the test set.
func testCount(c Config) int { return int(math.Round(c.TestFraction * float64(c.PerClass))) }

// Set is a labelled set of examples held in Go memory.
type Set struct {
	// Features holds N rows of NumFeatures float32 values, row-major: x and
	// y of the spiral point first, then the distractors.
	Features []float32
	// Labels holds the class of each row, in [0, NumClasses).
	Labels []int64
	// NumFeatures is the length of one row of Features.
	NumFeatures int
	// NumClasses is the number of classes.
	NumClasses int
}

// Len returns the number of examples.
func (s *Set) Len() int { return len(s.Labels) }

// ClassCounts returns how many examples each class has.
func (s *Set) ClassCounts() []int {
	counts := make([]int, s.NumClasses)
	for _, l := range s.Labels {
		counts[l]++
	}
	return counts
}

// Spirals generates the dataset that cfg describes and returns its training
// and test sets. Both hold every class in the same proportion, in an order
// shuffled by the seed. It returns an error for an impossible configuration.
func Spirals(cfg Config) (train, test *Set, err error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x5851f42d4c957f2d))
	nf := 2 + c.Distractors
	nTest := testCount(c)
	train = &Set{NumFeatures: nf, NumClasses: c.Classes}
	test = &Set{NumFeatures: nf, NumClasses: c.Classes}
	row := make([]float32, nf)
	for k := range c.Classes {
		// Which points of this arm are held out, chosen at random.
		held := make([]bool, c.PerClass)
		for _, i := range rng.Perm(c.PerClass)[:nTest] {
			held[i] = true
		}
		for i := range c.PerClass {
			// Radius from near the centre to 1; the angle winds with it.
			r := 0.05 + 0.95*float64(i)/float64(max(c.PerClass-1, 1))
			theta := 2*math.Pi*float64(k)/float64(c.Classes) + 2*math.Pi*c.Turns*r
			row[0] = float32(r*math.Cos(theta) + c.Noise*rng.NormFloat64())
			row[1] = float32(r*math.Sin(theta) + c.Noise*rng.NormFloat64())
			for j := 2; j < nf; j++ {
				row[j] = float32(rng.NormFloat64())
			}
			dst := train
			if held[i] {
				dst = test
			}
			dst.Features = append(dst.Features, row...)
			dst.Labels = append(dst.Labels, int64(k))
		}
	}
	train.shuffle(rng)
	test.shuffle(rng)
	return train, test, nil
}

// shuffle permutes the examples of s.
func (s *Set) shuffle(rng *rand.Rand) {
	nf := s.NumFeatures
	rng.Shuffle(s.Len(), func(i, j int) {
		s.Labels[i], s.Labels[j] = s.Labels[j], s.Labels[i]
		a, b := s.Features[i*nf:(i+1)*nf], s.Features[j*nf:(j+1)*nf]
		for f := range nf {
			a[f], b[f] = b[f], a[f]
		}
	})
}

// Tensors returns the whole set as a float32 tensor x of shape [N,
// NumFeatures] and an int64 tensor y of shape [N], created with opts (a
// device, typically). The caller owns both and releases them.
func (s *Set) Tensors(opts ...vram.Option) (x, y *vram.Tensor) {
	x = vram.FromSlice(s.Features, vram.Shape{s.Len(), s.NumFeatures}, opts...)
	y = vram.FromSlice(s.Labels, vram.Shape{s.Len()}, opts...)
	return x, y
}

// Batch returns the examples at the given indices as tensors, like
// [Set.Tensors]. It panics if an index is out of range.
func (s *Set) Batch(idx []int, opts ...vram.Option) (x, y *vram.Tensor) {
	nf := s.NumFeatures
	xs := make([]float32, 0, len(idx)*nf)
	ys := make([]int64, 0, len(idx))
	for _, i := range idx {
		xs = append(xs, s.Features[i*nf:(i+1)*nf]...)
		ys = append(ys, s.Labels[i])
	}
	x = vram.FromSlice(xs, vram.Shape{len(idx), nf}, opts...)
	y = vram.FromSlice(ys, vram.Shape{len(idx)}, opts...)
	return x, y
}

// Sampler deals mini-batches of indices into a set of n examples: each
// epoch visits every index once, in an order shuffled by the seed, and a
// batch never spans two epochs (the last one of an epoch may be short).
// A Sampler is not safe for concurrent use.
type Sampler struct {
	rng   *rand.Rand
	perm  []int
	pos   int
	batch int
}

// NewSampler returns a sampler of batches of up to batch indices in [0, n).
// It panics if n or batch is not positive.
func NewSampler(n, batch int, seed uint64) *Sampler {
	if n <= 0 || batch <= 0 {
		panic(fmt.Sprintf("dataset: NewSampler(%d, %d): sizes must be positive", n, batch))
	}
	s := &Sampler{rng: rand.New(rand.NewPCG(seed, 0xda3e39cb94b95bdb)), perm: make([]int, n), batch: batch}
	for i := range s.perm {
		s.perm[i] = i
	}
	s.pos = n // shuffle on the first call
	return s
}

// Next returns the indices of the next batch. The slice is the caller's.
func (s *Sampler) Next() []int {
	if s.pos >= len(s.perm) {
		s.rng.Shuffle(len(s.perm), func(i, j int) { s.perm[i], s.perm[j] = s.perm[j], s.perm[i] })
		s.pos = 0
	}
	end := min(s.pos+s.batch, len(s.perm))
	out := slices.Clone(s.perm[s.pos:end])
	s.pos = end
	return out
}
