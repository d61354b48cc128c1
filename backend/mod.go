package backend

// Modder is an optional interface of a [Device] with a remainder kernel,
// which cannot be composed exactly from [Kernels] (a - trunc(a/b)·b rounds
// twice). Callers find it with a type assertion and report an error where
// a device lacks it.
type Modder interface {
	// Fmod sets dst to the remainder of a divided by b truncated toward
	// zero, elementwise: C's fmod for floating-point dtypes (exact, with
	// the sign of a; NaN for a zero b or an infinite a), Go's % for
	// integer ones, where a zero b is an error. dst, a and b have one dtype
	// (not bool) and dst's shape (a and b may be broadcast views), as in
	// [Kernels.Binary].
	Fmod(s Stream, dst, a, b View) error
}
