package data_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
)

// TestNilPointers checks that a nil pointer or function held as a dataset,
// a stream or a sampler (a "var ds *data.TensorDataset" left unset) is
// taken for the nil value it is: the constructors refuse a nil dataset with
// an error matching vram.ErrArgument, and a loader given a nil sampler
// reads in order, as with no sampler, rather than dereferencing it.
func TestNilPointers(t *testing.T) {
	var td *data.TensorDataset
	var sub *data.Subset
	var cat *data.ConcatDataset
	for _, ds := range []data.Dataset{td, sub, cat} {
		for _, tc := range []struct {
			name string
			call func() error
		}{
			{"NewLoader", func() error { _, err := data.NewLoader(ds, 2, data.Options{}); return err }},
			{"NewSubset", func() error { _, err := data.NewSubset(ds, []int{0}); return err }},
			{"NewConcatDataset", func() error { _, err := data.NewConcatDataset(ds); return err }},
			{"RandomSplit", func() error { _, err := data.RandomSplit(ds, []int{1}, vram.NewGenerator(1)); return err }},
			{"RandomSplitFractions", func() error {
				_, err := data.RandomSplitFractions(ds, []float64{1}, vram.NewGenerator(1))
				return err
			}},
		} {
			t.Run(fmt.Sprintf("%s/%T", tc.name, ds), func(t *testing.T) {
				var err error
				if p := vram.Catch(func() { err = tc.call() }); p != nil {
					t.Fatalf("panicked with %v", p)
				}
				if !errors.Is(err, vram.ErrArgument) {
					t.Errorf("got %v, want an error matching vram.ErrArgument", err)
				}
			})
		}
	}
	t.Run("NewIterableLoader", func(t *testing.T) {
		var err error
		if p := vram.Catch(func() { _, err = data.NewIterableLoader(data.StreamFunc(nil), 2, data.Options{}) }); p != nil {
			t.Fatalf("panicked with %v", p)
		}
		if !errors.Is(err, vram.ErrArgument) {
			t.Errorf("got %v, want an error matching vram.ErrArgument", err)
		}
	})
	ds := rowsDataset(t, 5, vram.CPU)
	for _, s := range []data.Sampler{(*data.RandomSampler)(nil), (*data.SequentialSampler)(nil), data.SamplerFunc(nil)} {
		t.Run(fmt.Sprintf("sampler %T", s), func(t *testing.T) {
			var got [][]int
			err := vram.Catch(func() {
				l, err := data.NewLoader(ds, 2, data.Options{Sampler: s})
				if err != nil {
					t.Fatal(err)
				}
				if l.Len() != 3 {
					t.Errorf("Len %d, want 3", l.Len())
				}
				got = epoch(t, l)
			})
			if err != nil {
				t.Fatalf("panicked with %v", err)
			}
			if want := [][]int{{0, 1}, {2, 3}, {4}}; !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("batches %v, want %v", got, want)
			}
		})
	}
}
