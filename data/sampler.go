package data

import (
	"fmt"
	"iter"

	"github.com/vramgo/vram"
)

// Sampler chooses the order in which a [Loader] reads a dataset
// (torch.utils.data.Sampler): each call of All starts one epoch and yields
// dataset indices (a nil sequence ends the epoch with an error that
// matches [vram.ErrArgument]). A sampler may also have a Len() int method, the number
// of indices an epoch yields, which [Loader.Len] uses.
type Sampler interface {
	All() iter.Seq[int]
}

// SamplerFunc adapts a function that returns one epoch's indices to a
// [Sampler].
type SamplerFunc func() iter.Seq[int]

// All returns f().
func (f SamplerFunc) All() iter.Seq[int] { return f() }

// SequentialSampler yields 0, 1, ..., N-1 every epoch
// (torch.utils.data.SequentialSampler).
type SequentialSampler struct{ N int }

// All yields 0 to N-1 in order.
func (s SequentialSampler) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := range s.N {
			if !yield(i) {
				return
			}
		}
	}
}

// Len returns N.
func (s SequentialSampler) Len() int { return s.N }

// within returns an error when the indices reach past a dataset of n.
func (s SequentialSampler) within(n int) error {
	if s.N > n {
		return fmt.Errorf("SequentialSampler yields indices 0 to %d, past the dataset's last, %d; N is at most the dataset's length", s.N-1, n-1)
	}
	return nil
}

// RandomSampler yields random indices of 0, ..., N-1 every epoch
// (torch.utils.data.RandomSampler), drawn from Generator when the epoch
// starts, or from [vram.DefaultGenerator] when Generator is nil: the same
// seed gives the same sequence of epochs. Without Replacement an epoch is
// a permutation of all N indices, or of NumSamples of them (whole
// permutations one after another when NumSamples exceeds N); with it, each
// of the NumSamples indices is drawn independently. NumSamples 0 means N.
// An epoch that draws as it goes (with Replacement, or NumSamples above N)
// takes one seed from Generator when it starts and draws the rest from a
// generator of its own, as PyTorch's does without a generator, so that its
// indices are the same whatever else draws from Generator during the
// epoch and whatever the number of a loader's workers.
type RandomSampler struct {
	N           int
	Generator   *vram.Generator
	Replacement bool
	NumSamples  int
}

// check returns an error for N 0: indices cannot be drawn from none
// (PyTorch raises, for NumSamples 0 as the sampler is made, for more as
// the epoch starts).
func (s RandomSampler) check() error {
	switch {
	case s.N == 0 && s.NumSamples > 0:
		return fmt.Errorf("RandomSampler draws NumSamples %d indices from N 0; N must be at least 1", s.NumSamples)
	case s.N == 0:
		return fmt.Errorf("RandomSampler has N 0 indices to draw from; set N to the dataset's length")
	}
	return nil
}

// within returns an error when the indices reach past a dataset of n.
func (s RandomSampler) within(n int) error {
	if s.N > n {
		return fmt.Errorf("RandomSampler draws indices from 0 to %d, past the dataset's last, %d; N is at most the dataset's length", s.N-1, n-1)
	}
	return nil
}

// All draws the epoch's indices and yields them. It yields nothing when N
// or NumSamples is negative, or N is 0 (which [NewLoader] refuses).
func (s RandomSampler) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		total := s.Len()
		if s.N <= 0 || total <= 0 {
			return
		}
		g := s.Generator
		if g == nil {
			g = vram.DefaultGenerator()
		}
		if s.Replacement || total > s.N {
			// The epoch draws as it yields. Draw from a generator of its
			// own, seeded now, so that its indices do not depend on what
			// else draws from g meanwhile (a loop body's dropout, another
			// epoch) nor on when a loader's workers pull them.
			g = vram.NewGenerator(uint64(g.Float64() * (1 << 53)))
		}
		if s.Replacement {
			for range total {
				if !yield(min(int(g.Float64()*float64(s.N)), s.N-1)) {
					return
				}
			}
			return
		}
		for total > 0 {
			for _, i := range permutation(s.N, g)[:min(s.N, total)] {
				if !yield(i) {
					return
				}
			}
			total -= s.N
		}
	}
}

// Len returns the number of indices an epoch yields: NumSamples, or N
// when NumSamples is 0, and 0 when N is 0. It is negative when N or
// NumSamples is, which [NewLoader] rejects.
func (s RandomSampler) Len() int {
	switch {
	case s.N < 0:
		return s.N
	case s.NumSamples < 0:
		return s.NumSamples
	case s.N == 0:
		return 0
	case s.NumSamples != 0:
		return s.NumSamples
	}
	return s.N
}

// SubsetRandomSampler yields Indices in a new random order every epoch
// (torch.utils.data.SubsetRandomSampler), drawn from Generator, or from
// [vram.DefaultGenerator] when Generator is nil.
type SubsetRandomSampler struct {
	Indices   []int
	Generator *vram.Generator
}

// All draws a permutation of Indices and yields it.
func (s SubsetRandomSampler) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for _, k := range permutation(len(s.Indices), s.Generator) {
			if !yield(s.Indices[k]) {
				return
			}
		}
	}
}

// Len returns the number of indices.
func (s SubsetRandomSampler) Len() int { return len(s.Indices) }

// within returns an error when an index is outside a dataset of n.
func (s SubsetRandomSampler) within(n int) error {
	for k, i := range s.Indices {
		if i < 0 || i >= n {
			return fmt.Errorf("SubsetRandomSampler's index %d (position %d) is out of range for a dataset of %d", i, k, n)
		}
	}
	return nil
}
