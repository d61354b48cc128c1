package backend

import "fmt"

// Sorter is an optional interface of a [Device] that sorts along an axis.
// Callers find it with a type assertion; the root package sorts a host
// copy on a device that lacks it, or whose ArgSort returns an error
// wrapping [ErrNotImplemented].
type Sorter interface {
	// ArgSort writes into indices (int64, src's shape) the positions along
	// axis that put each line of src along axis in order: ascending, or
	// descending when descending is set. The sort is stable in both
	// directions (equal elements keep their order in src), and NaN counts
	// as greater than every number, so it comes last ascending and first
	// descending, as in PyTorch.
	ArgSort(s Stream, indices, src View, axis int, descending bool) error
}

// CheckArgSort checks the arguments of [Sorter.ArgSort]: indices and src
// are well-formed views of one shape, indices is int64, src has any dtype,
// and 0 <= axis < their rank.
func CheckArgSort(indices, src View, axis int) error {
	if err := elementwise(indices, src); err != nil {
		return err
	}
	if indices.DType != Int64 {
		return fmt.Errorf("indices have dtype %s, want int64", indices.DType)
	}
	if axis < 0 || axis >= len(src.Shape) {
		return fmt.Errorf("axis %d out of range for shape %v", axis, src.Shape)
	}
	return nil
}
