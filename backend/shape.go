package backend

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// NumElements returns the product of shape (1 for an empty shape). It does
// not check for overflow: shapes that reach a backend have passed
// [CheckShape].
func NumElements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// CheckShape returns the number of elements of shape and their size in
// bytes at elemSize bytes each (elemSize > 0). It fails, naming the shape,
// when a size is negative, or when the product of the sizes other than 0
// (which sets the row-major strides), or that product times elemSize, does
// not fit an int and an int64: such a shape can describe no tensor, not even
// an empty one, and would wrap every computation of offsets and sizes.
func CheckShape(shape []int, elemSize int) (elems int, nbytes int64, err error) {
	span := uint64(1) // product of the nonzero sizes, at most maxCount
	zero := false
	const maxCount = uint64(math.MaxInt)
	for i, d := range shape {
		switch {
		case d < 0:
			return 0, 0, fmt.Errorf("shape %s has a negative size at dimension %d", formatShape(shape), i)
		case d == 0:
			zero = true
			continue
		}
		hi, lo := bits.Mul64(span, uint64(d))
		if hi != 0 || lo > maxCount {
			return 0, 0, fmt.Errorf("shape %s has more elements than an int can count (%d)", formatShape(shape), math.MaxInt)
		}
		span = lo
	}
	if hi, lo := bits.Mul64(span, uint64(elemSize)); hi != 0 || lo > math.MaxInt64 {
		return 0, 0, fmt.Errorf("shape %s of %d-byte elements needs more than %d bytes (8 EiB)", formatShape(shape), elemSize, int64(math.MaxInt64))
	}
	if zero {
		return 0, 0, nil
	}
	return int(span), int64(span) * int64(elemSize), nil
}

// formatShape writes shape as "[2, 3]".
func formatShape(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// ContiguousStrides returns the row-major strides of shape, in elements. A
// size of 0 counts as 1, as in PyTorch: the strides of [3, 0] are [1, 1],
// not [0, 1], so that no dimension of an empty tensor reads as expanded.
func ContiguousStrides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= max(shape[i], 1)
	}
	return s
}
