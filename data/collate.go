package data

import (
	"fmt"
	"slices"

	"github.com/vramgo/vram"
)

// CollateFunc turns the samples of one batch into its tensors, one per
// field, on device dev (the zero Device: wherever the samples' tensors
// are, the CPU for numbers). It runs inside [vram.Tidy] and [vram.NoGrad]
// on the goroutine that prepares the batch: tensors it makes and does not
// return are released for it, and those it returns become the batch's,
// which the loader releases. It may return a sample's tensor as it is
// (for samples that come batched already); the batch then gets a handle
// of its own, so that releasing the batch leaves the dataset's tensor
// alone. Any other tensor made before it ran (a constant it holds) it
// returns as a view, such as Detach(), not as it is. A CollateFunc may
// panic with a vram error or return an error; either ends the iteration
// with that error, and so does a nil or released tensor among its results
// (an error that matches [vram.ErrArgument]).
type CollateFunc func(samples []Sample, dev vram.Device) ([]*vram.Tensor, error)

// Collate is the default [CollateFunc] (torch.utils.data.default_collate):
// field j of the batch joins field j of every sample along a new first
// dimension. Tensors are stacked (they must share a shape and a device);
// numbers become a 1-D tensor of the batch's length, of dtype Float64 for
// float64, Float32 for float32, Int64 for int and int64, Int32 for int32,
// Int8 for int8 and Bool for bool, as torch.tensor makes them, and, vram
// having no unsigned or 16-bit integer dtype, Int32 for uint8, int16 and
// uint16 and Int64 for uint32, which hold all their values (PyTorch's
// collate keeps uint8, int16, uint16 and uint32); slices of numbers of one
// length become a 2-D tensor. Each result is then moved to dev unless dev is
// the zero Device. It returns an error that matches [vram.ErrShape] when
// samples have different numbers of fields or tensors of different shapes,
// [vram.ErrDType] for a field of an unsupported type or of types that
// differ between samples, and [vram.ErrArgument] for no samples or a nil
// *vram.Tensor.
func Collate(samples []Sample, dev vram.Device) ([]*vram.Tensor, error) {
	if len(samples) == 0 {
		return nil, fmt.Errorf("data: collate of no samples: %w", vram.ErrArgument)
	}
	nf := len(samples[0])
	for i, s := range samples {
		if len(s) != nf {
			return nil, fmt.Errorf("data: collate: sample %d has %d fields, sample 0 has %d; every sample must have the same fields: %w", i, len(s), nf, vram.ErrShape)
		}
	}
	out := make([]*vram.Tensor, 0, nf)
	release := func() {
		for _, t := range out {
			t.Release()
		}
	}
	for j := range nf {
		var t *vram.Tensor
		var ferr error
		if err := vram.Catch(func() { t, ferr = collateField(samples, j, dev) }); err != nil {
			ferr = fmt.Errorf("data: collate: field %d: %w", j, err)
		}
		if ferr != nil {
			release()
			return nil, ferr
		}
		out = append(out, t)
	}
	return out, nil
}

// collateField batches field j of samples on dev. It panics with vram's
// errors from Stack and To, and returns its own for bad fields.
func collateField(samples []Sample, j int, dev vram.Device) (*vram.Tensor, error) {
	first := samples[0][j]
	if _, ok := first.(*vram.Tensor); ok {
		ts := make([]*vram.Tensor, len(samples))
		for i, s := range samples {
			t, ok := s[j].(*vram.Tensor)
			if !ok || t == nil {
				return nil, fieldTypeError(samples, i, j)
			}
			ts[i] = t
			if s0 := ts[0].Shape(); !slices.Equal(t.Shape(), s0) {
				return nil, fmt.Errorf("data: collate: field %d of sample %d is a tensor of shape %v, of sample 0 one of shape %v; "+
					"the tensors of a field are stacked, so they must have one shape (pad or crop them in Get, or batch them with an Options.Collate of your own): %w",
					j, i, t.Shape(), s0, vram.ErrShape)
			}
		}
		b := vram.Stack(ts, 0)
		return moveTo(b, dev), nil
	}
	var t *vram.Tensor
	var err error
	switch first.(type) {
	case float64:
		t, err = numbers[float64](samples, j, dev)
	case float32:
		t, err = numbers[float32](samples, j, dev)
	case int:
		t, err = numbers[int](samples, j, dev)
	case int64:
		t, err = numbers[int64](samples, j, dev)
	case int32:
		t, err = numbers[int32](samples, j, dev)
	case bool:
		t, err = numbers[bool](samples, j, dev)
	case []float64:
		t, err = rows[float64](samples, j, dev)
	case []float32:
		t, err = rows[float32](samples, j, dev)
	case []int:
		t, err = rows[int](samples, j, dev)
	case []int64:
		t, err = rows[int64](samples, j, dev)
	case []int32:
		t, err = rows[int32](samples, j, dev)
	case []bool:
		t, err = rows[bool](samples, j, dev)
	case int8:
		t, err = widen[int8, int32](samples, j, dev, false, vram.Int8)
	case uint8:
		t, err = widen[uint8, int32](samples, j, dev, false, vram.Int32)
	case int16:
		t, err = widen[int16, int32](samples, j, dev, false, vram.Int32)
	case uint16:
		t, err = widen[uint16, int32](samples, j, dev, false, vram.Int32)
	case uint32:
		t, err = widen[uint32, int64](samples, j, dev, false, vram.Int64)
	case []int8:
		t, err = widen[int8, int32](samples, j, dev, true, vram.Int8)
	case []uint8:
		t, err = widen[uint8, int32](samples, j, dev, true, vram.Int32)
	case []int16:
		t, err = widen[int16, int32](samples, j, dev, true, vram.Int32)
	case []uint16:
		t, err = widen[uint16, int32](samples, j, dev, true, vram.Int32)
	case []uint32:
		t, err = widen[uint32, int64](samples, j, dev, true, vram.Int64)
	default:
		return nil, fieldTypeError(samples, 0, j)
	}
	return t, err
}

// numbers batches field j, a number of type T in every sample, into a 1-D
// tensor on dev (on the CPU for the zero Device).
func numbers[T vram.Element](samples []Sample, j int, dev vram.Device) (*vram.Tensor, error) {
	vals := make([]T, len(samples))
	for i, s := range samples {
		v, ok := s[j].(T)
		if !ok {
			return nil, fieldTypeError(samples, i, j)
		}
		vals[i] = v
	}
	return vram.FromSlice(vals, vram.Shape{len(vals)}, hostOr(dev)), nil
}

// rows batches field j, a []T of one length in every sample, into a 2-D
// tensor on dev (on the CPU for the zero Device).
func rows[T vram.Element](samples []Sample, j int, dev vram.Device) (*vram.Tensor, error) {
	n := len(samples[0][j].([]T))
	vals := make([]T, 0, len(samples)*n)
	for i, s := range samples {
		v, ok := s[j].([]T)
		if !ok {
			return nil, fieldTypeError(samples, i, j)
		}
		if len(v) != n {
			return nil, fmt.Errorf("data: collate: field %d of sample %d has %d values, sample 0 has %d: %w", j, i, len(v), n, vram.ErrShape)
		}
		vals = append(vals, v...)
	}
	return vram.FromSlice(vals, vram.Shape{len(samples), n}, hostOr(dev)), nil
}

// widen batches field j, a number of type T in every sample or, when row,
// a []T of one length, as numbers or rows do values of type U, which
// holds every value of T, then casts the batch to dt.
func widen[T int8 | uint8 | int16 | uint16 | uint32, U int32 | int64](samples []Sample, j int, dev vram.Device, row bool, dt vram.DType) (*vram.Tensor, error) {
	conv := make([]Sample, len(samples))
	for i, s := range samples {
		var v any
		switch x := s[j].(type) {
		case T:
			if row {
				return nil, fieldTypeError(samples, i, j)
			}
			v = U(x)
		case []T:
			if !row {
				return nil, fieldTypeError(samples, i, j)
			}
			r := make([]U, len(x))
			for k, e := range x {
				r[k] = U(e)
			}
			v = r
		default:
			return nil, fieldTypeError(samples, i, j)
		}
		conv[i] = make(Sample, j+1) // field j, for the errors of rows
		conv[i][j] = v
	}
	var t *vram.Tensor
	var err error
	if row {
		t, err = rows[U](conv, j, vram.CPU)
	} else {
		t, err = numbers[U](conv, j, vram.CPU)
	}
	if err != nil {
		return nil, err
	}
	if t.DType() != dt {
		c := t.Cast(dt)
		t.Release()
		t = c
	}
	return moveTo(t, dev), nil
}

// fieldTypeError is the error for field j of sample i, whose type cannot be
// batched, differs from sample 0's or is a nil tensor.
func fieldTypeError(samples []Sample, i, j int) error {
	if t, ok := samples[i][j].(*vram.Tensor); ok && t == nil {
		return fmt.Errorf("data: collate: field %d of sample %d is a nil *vram.Tensor; Get must return a tensor there: %w", j, i, vram.ErrArgument)
	}
	if i == 0 || samples[i][j] == nil {
		return fmt.Errorf("data: collate: field %d of sample %d is %T, which cannot be batched (a *vram.Tensor, a number or a slice of numbers can): %w",
			j, i, samples[i][j], vram.ErrDType)
	}
	return fmt.Errorf("data: collate: field %d of sample %d is %T, of sample 0 %T; a field must have one type in every sample: %w",
		j, i, samples[i][j], samples[0][j], vram.ErrDType)
}

// hostOr returns dev, or the CPU for the zero Device.
func hostOr(dev vram.Device) vram.Device {
	if dev == (vram.Device{}) {
		return vram.CPU
	}
	return dev
}

// moveTo returns t on dev, releasing t when it moved; the zero Device keeps
// it where it is.
func moveTo(t *vram.Tensor, dev vram.Device) *vram.Tensor {
	if dev == (vram.Device{}) || t.Device() == dev {
		return t
	}
	defer t.Release()
	return t.To(dev)
}
