package data

import (
	"iter"

	"github.com/vramgo/vram"
)

// Sampler chooses the order in which a [Loader] reads a dataset
// (torch.utils.data.Sampler): each call of All starts one epoch and yields
// dataset indices. A sampler may also have a Len() int method, the number
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

// RandomSampler yields a new random permutation of 0, ..., N-1 every epoch
// (torch.utils.data.RandomSampler without replacement), drawn from
// Generator when the epoch starts, or from [vram.DefaultGenerator] when
// Generator is nil: the same seed gives the same sequence of epochs.
type RandomSampler struct {
	N         int
	Generator *vram.Generator
}

// All draws a permutation and yields it.
func (s RandomSampler) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for _, i := range permutation(s.N, s.Generator) {
			if !yield(i) {
				return
			}
		}
	}
}

// Len returns N.
func (s RandomSampler) Len() int { return s.N }
