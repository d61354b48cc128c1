package data

import (
	"fmt"
	"math"
	"reflect"
	"slices"

	"github.com/vramgo/vram"
)

// Sample is one element of a [Dataset]: its fields in order, as the tuple
// (image, label) that a PyTorch dataset returns. A field is a *vram.Tensor,
// a number (float32, float64, int, int32, int64, bool) or a slice of
// numbers; [Collate] batches each field across samples.
type Sample []any

// Dataset is a map-style dataset (torch.utils.data.Dataset): Len elements,
// indexed from 0. Get returns element i, or an error for an element that
// cannot be read (a nil sample with no error ends a [Loader]'s epoch with
// an error that matches [vram.ErrArgument]). Tensors in the sample that Get makes (views such as
// Select, new tensors) belong to the loader, which releases them once the
// batch is assembled (Get runs inside [vram.Tidy]); tensors the dataset
// made before are left alone, and a tensor Get makes and caches for later
// calls must be passed to [vram.Keep]. A [Loader] with workers calls Get
// from several goroutines at once, so Get must be safe for concurrent use;
// a Get that draws random numbers (augmentation) should draw them from a
// generator of its own per index, vram.NewGenerator(seed + uint64(i)), so
// that its samples do not depend on which worker runs first.
type Dataset interface {
	Len() int
	Get(i int) (Sample, error)
}

// TensorDataset is a [Dataset] over tensors that share their first
// dimension (torch.utils.data.TensorDataset): element i holds row i of each
// tensor, as views. It does not own the tensors; the caller releases them
// when done with the dataset. It is safe for concurrent use.
type TensorDataset struct {
	tensors []*vram.Tensor
	n       int
}

// NewTensorDataset returns the dataset whose element i is
// (ts[0].Select(0, i), ts[1].Select(0, i), ...). It returns an error that
// matches [vram.ErrArgument] when there are no tensors or one is nil or
// released or 0-dimensional, and [vram.ErrShape] when their first
// dimensions differ.
func NewTensorDataset(ts ...*vram.Tensor) (*TensorDataset, error) {
	if len(ts) == 0 {
		return nil, fmt.Errorf("data: NewTensorDataset needs at least one tensor: %w", vram.ErrArgument)
	}
	for i, t := range ts {
		switch {
		case t == nil:
			return nil, fmt.Errorf("data: NewTensorDataset: tensor %d is nil: %w", i, vram.ErrArgument)
		case t.Released():
			return nil, fmt.Errorf("data: NewTensorDataset: tensor %d was released: %w", i, vram.ErrReleased)
		case t.Dim() == 0:
			return nil, fmt.Errorf("data: NewTensorDataset: tensor %d is 0-dimensional; its first dimension indexes the samples: %w", i, vram.ErrShape)
		case t.Size(0) != ts[0].Size(0):
			return nil, fmt.Errorf("data: NewTensorDataset: size mismatch between tensors: tensor 0 has shape %v, tensor %d has shape %v; their first dimensions must agree: %w",
				ts[0].Shape(), i, t.Shape(), vram.ErrShape)
		}
	}
	return &TensorDataset{tensors: append([]*vram.Tensor(nil), ts...), n: ts[0].Size(0)}, nil
}

// Len returns the first dimension of the tensors.
func (d *TensorDataset) Len() int { return d.n }

// Get returns row i of each tensor, as views that the caller releases. It
// returns an error that matches [vram.ErrIndex] when i is outside
// [0, Len()), and the panic of a tensor released since as an error.
func (d *TensorDataset) Get(i int) (s Sample, err error) {
	if i < 0 || i >= d.n {
		return nil, fmt.Errorf("data: index %d is out of range for a dataset of %d: %w", i, d.n, vram.ErrIndex)
	}
	s = make(Sample, 0, len(d.tensors))
	err = vram.Catch(func() {
		for _, t := range d.tensors {
			s = append(s, t.Select(0, i))
		}
	})
	if err != nil {
		releaseSample(s)
		return nil, err
	}
	return s, nil
}

// Tensors returns the tensors of the dataset, in order.
func (d *TensorDataset) Tensors() []*vram.Tensor { return append([]*vram.Tensor(nil), d.tensors...) }

// Subset is the part of a [Dataset] at given indices
// (torch.utils.data.Subset): its element i is the dataset's element
// Indices[i].
type Subset struct {
	Dataset Dataset
	Indices []int
}

// NewSubset returns the subset of ds at indices, which it copies. It returns
// an error that matches [vram.ErrIndex] for an index outside [0, ds.Len())
// and [vram.ErrArgument] for a nil ds.
func NewSubset(ds Dataset, indices []int) (*Subset, error) {
	if isNil(ds) {
		return nil, fmt.Errorf("data: NewSubset of a nil dataset: %w", vram.ErrArgument)
	}
	n, err := length(ds)
	if err != nil {
		return nil, wrap(err, "NewSubset: the dataset's Len")
	}
	for k, i := range indices {
		if i < 0 || i >= n {
			return nil, fmt.Errorf("data: NewSubset: index %d (position %d) is out of range for a dataset of %d: %w", i, k, n, vram.ErrIndex)
		}
	}
	return &Subset{Dataset: ds, Indices: append([]int(nil), indices...)}, nil
}

// Len returns the number of indices.
func (s *Subset) Len() int { return len(s.Indices) }

// Get returns the dataset's element Indices[i]. It returns an error that
// matches [vram.ErrIndex] when i is outside [0, Len()).
func (s *Subset) Get(i int) (Sample, error) {
	if i < 0 || i >= len(s.Indices) {
		return nil, fmt.Errorf("data: index %d is out of range for a subset of %d: %w", i, len(s.Indices), vram.ErrIndex)
	}
	return s.Dataset.Get(s.Indices[i])
}

// ConcatDataset is datasets one after another
// (torch.utils.data.ConcatDataset): its elements are the first dataset's,
// then the second's, and so on. It reads the datasets' lengths when it is
// made.
type ConcatDataset struct {
	datasets []Dataset
	ends     []int // ends[k]: the number of elements in datasets[:k+1]
}

// NewConcatDataset returns the concatenation of datasets. It returns an
// error that matches [vram.ErrArgument] for no datasets, a nil one, one of
// negative length, or lengths whose sum overflows an int.
func NewConcatDataset(datasets ...Dataset) (*ConcatDataset, error) {
	if len(datasets) == 0 {
		return nil, fmt.Errorf("data: NewConcatDataset needs at least one dataset: %w", vram.ErrArgument)
	}
	ends := make([]int, len(datasets))
	total := 0
	for k, d := range datasets {
		if isNil(d) {
			return nil, fmt.Errorf("data: NewConcatDataset: dataset %d is nil: %w", k, vram.ErrArgument)
		}
		n, err := length(d)
		if err != nil {
			return nil, wrap(err, "NewConcatDataset: dataset %d's Len", k)
		}
		if n < 0 || n > math.MaxInt-total {
			return nil, fmt.Errorf("data: NewConcatDataset: dataset %d has length %d after %d elements: %w", k, n, total, vram.ErrArgument)
		}
		total += n
		ends[k] = total
	}
	return &ConcatDataset{datasets: append([]Dataset(nil), datasets...), ends: ends}, nil
}

// Len returns the sum of the datasets' lengths.
func (c *ConcatDataset) Len() int { return c.ends[len(c.ends)-1] }

// Get returns element i of the concatenation. It returns an error that
// matches [vram.ErrIndex] when i is outside [0, Len()).
func (c *ConcatDataset) Get(i int) (Sample, error) {
	if i < 0 || i >= c.Len() {
		return nil, fmt.Errorf("data: index %d is out of range for a concatenation of %d: %w", i, c.Len(), vram.ErrIndex)
	}
	k, _ := slices.BinarySearch(c.ends, i+1) // the first dataset that ends after i
	start := 0
	if k > 0 {
		start = c.ends[k-1]
	}
	return c.datasets[k].Get(i - start)
}

// RandomSplit splits ds into non-overlapping subsets of the given lengths,
// which must add up to ds.Len(), in a random order drawn from g
// (torch.utils.data.random_split with lengths); a nil g is
// [vram.DefaultGenerator]. The same seed gives the same split. It returns
// an error that matches [vram.ErrArgument] for a negative length or lengths
// whose sum is not ds.Len().
func RandomSplit(ds Dataset, lengths []int, g *vram.Generator) ([]*Subset, error) {
	if isNil(ds) {
		return nil, fmt.Errorf("data: RandomSplit of a nil dataset: %w", vram.ErrArgument)
	}
	sum := 0
	for i, n := range lengths {
		if n < 0 {
			return nil, fmt.Errorf("data: RandomSplit: length %d is negative (%d): %w", i, n, vram.ErrArgument)
		}
		if n > math.MaxInt-sum {
			return nil, fmt.Errorf("data: RandomSplit: the lengths %v overflow an int: %w", lengths, vram.ErrArgument)
		}
		sum += n
	}
	n, err := length(ds)
	if err != nil {
		return nil, wrap(err, "RandomSplit: the dataset's Len")
	}
	if sum != n {
		return nil, fmt.Errorf("data: RandomSplit: the lengths %v add up to %d, not to the dataset's length %d: %w", lengths, sum, n, vram.ErrArgument)
	}
	perm := permutation(sum, g)
	out := make([]*Subset, len(lengths))
	off := 0
	for i, n := range lengths {
		out[i] = &Subset{Dataset: ds, Indices: perm[off : off+n : off+n]}
		off += n
	}
	return out, nil
}

// RandomSplitFractions is [RandomSplit] with lengths given as fractions of
// ds.Len() that add up to 1, as torch.utils.data.random_split takes them:
// each subset gets floor(fraction·Len) elements, and the remainder goes one
// by one to the subsets in order. It returns an error that matches
// [vram.ErrArgument] for a fraction outside [0, 1] or fractions that do not
// add up to 1.
func RandomSplitFractions(ds Dataset, fractions []float64, g *vram.Generator) ([]*Subset, error) {
	if isNil(ds) {
		return nil, fmt.Errorf("data: RandomSplitFractions of a nil dataset: %w", vram.ErrArgument)
	}
	var sum float64
	for i, f := range fractions {
		if !(f >= 0 && f <= 1) {
			return nil, fmt.Errorf("data: RandomSplitFractions: fraction %d is %v, not in [0, 1]: %w", i, f, vram.ErrArgument)
		}
		sum += f
	}
	// PyTorch accepts sums within math.isclose's default tolerance.
	if math.Abs(sum-1) > 1e-9 || len(fractions) == 0 {
		return nil, fmt.Errorf("data: RandomSplitFractions: the fractions %v add up to %v, not to 1: %w", fractions, sum, vram.ErrArgument)
	}
	n, err := length(ds)
	if err != nil {
		return nil, wrap(err, "RandomSplitFractions: the dataset's Len")
	}
	lengths := make([]int, len(fractions))
	total := 0
	for i, f := range fractions {
		lengths[i] = int(math.Floor(float64(n) * f))
		total += lengths[i]
	}
	for i := 0; total < n; i = (i + 1) % len(lengths) {
		lengths[i]++
		total++
	}
	return RandomSplit(ds, lengths, g)
}

// permutation returns a random permutation of [0, n) drawn from g, or from
// vram's default generator when g is nil (torch.randperm).
func permutation(n int, g *vram.Generator) []int {
	if g == nil {
		g = vram.DefaultGenerator()
	}
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := min(int(g.Float64()*float64(i+1)), i)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// releaseSample releases every tensor among s's fields.
func releaseSample(s Sample) {
	for _, f := range s {
		if t, ok := f.(*vram.Tensor); ok {
			t.Release()
		}
	}
}

// isNil reports whether v is nil or holds a nil pointer or function (a
// "var ds *TensorDataset" left unset, a nil [SamplerFunc]), which the
// constructors take for nil.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func:
		return rv.IsNil()
	}
	return false
}
