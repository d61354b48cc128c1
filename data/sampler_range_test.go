package data_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
)

// TestNewLoaderRefusesSamplersBeyondTheDataset: a sampler of the
// package's whose indices reach past the dataset (N above its length, a
// subset index out of range) is refused by NewLoader with ErrIndex, rather
// than failing some epoch part way, after the batches before the first
// such index (at a random place, when shuffled); one within it is taken.
func TestNewLoaderRefusesSamplersBeyondTheDataset(t *testing.T) {
	ds := rowsDataset(t, 10, vram.CPU)
	tests := []struct {
		name    string
		sampler data.Sampler
		want    error // nil: taken
	}{
		{"sequential beyond", data.SequentialSampler{N: 11}, vram.ErrIndex},
		{"sequential pointer beyond", &data.SequentialSampler{N: 11}, vram.ErrIndex},
		{"random beyond", data.RandomSampler{N: 12}, vram.ErrIndex},
		{"random pointer beyond", &data.RandomSampler{N: 12, Replacement: true}, vram.ErrIndex},
		{"subset beyond", data.SubsetRandomSampler{Indices: []int{1, 10}}, vram.ErrIndex},
		{"subset negative", data.SubsetRandomSampler{Indices: []int{-1}}, vram.ErrIndex},
		{"sequential within", data.SequentialSampler{N: 10}, nil},
		{"random of a part", data.RandomSampler{N: 5, NumSamples: 20}, nil},
		{"subset within", &data.SubsetRandomSampler{Indices: []int{0, 9}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := data.NewLoader(ds, 2, data.Options{Sampler: tc.sampler})
			switch {
			case tc.want == nil && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}
