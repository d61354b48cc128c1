package vram

import "github.com/vramgo/vram/backend"

// DType is the element type of a tensor. DType values are also [Option]s
// for the factory functions: vram.Zeros(vram.Shape{2, 3}, vram.Float64).
type DType uint8

// The element types; their values equal those of package backend.
const (
	Float32  = DType(backend.Float32)
	Float64  = DType(backend.Float64)
	Float16  = DType(backend.Float16)
	BFloat16 = DType(backend.BFloat16)
	Int32    = DType(backend.Int32)
	Int64    = DType(backend.Int64)
	Bool     = DType(backend.Bool)
	// Int8 holds quantized weights (package nn/quant); the elementwise
	// ops, copies and reductions take it like the other integer types.
	Int8 = DType(backend.Int8)
)

// String returns the PyTorch-style name ("float32", "bfloat16", ...).
func (d DType) String() string { return backend.DType(d).String() }

// Size returns the size of one element in bytes.
func (d DType) Size() int { return backend.DType(d).Size() }

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return backend.DType(d).IsFloat() }

// ParseDType returns the dtype named s ("float32", "bf16", "half", "long", ...).
func ParseDType(s string) (DType, error) {
	d, err := backend.ParseDType(s)
	return DType(d), err
}

func (d DType) applyOption(o *options) { o.dtype = d }

func (d DType) b() backend.DType { return backend.DType(d) }

func promote(a, b DType) DType { return DType(backend.Promote(a.b(), b.b())) }
