package tensorfile

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/safetensors"
)

// LoadInto loads tensors, the state dict of a file described as src in
// messages, into m, an nn.Module, as nn.Load loads a safetensors file:
// strictly or not, converting dtypes, each tensor decoded and copied in
// turn. A tensor without Data has its bytes from fetch, called when they
// are needed; verify, called with the names of those to load before m
// changes, checks that fetch will give them, so that a file that fails
// leaves m as it was. It returns PyTorch's missing and unexpected keys.
// Package nn sets it, so that readers of other formats (nn/torchload)
// hand their raw bytes over without first building tensors of them.
var LoadInto func(m any, src string, tensors map[string]safetensors.Tensor, strict bool,
	fetch func(name string) ([]byte, error), verify func(names []string) error) (missing, unexpected []string, err error)

// CheckDecode returns the error that [Decode] of st into dt would give:
// a dtype it cannot decode, data of the wrong length, a shape no tensor
// of dt can have, or a value out of dt's range. Integers into
// an integer dt are checked without allocating; other conversions are
// decoded into a tensor that is released at once.
func CheckDecode(st safetensors.Tensor, dt vram.DType) error {
	if err := checkTensor(st, dt); err != nil {
		return err
	}
	if name, ok := stNames[dt]; ok && name == st.DType {
		return nil
	}
	if lo, hi, ok := intRange(dt); ok {
		if dec := intDecoder(st.DType); dec != nil {
			n := vram.Shape(st.Shape).NumElements()
			for i := range n {
				if v, ok := dec(st.Data, i); !ok || v < lo || v > hi {
					return &vram.Error{Op: "decode", Kind: vram.ErrArgument,
						Detail: fmt.Sprintf("value %s of element %d of %s does not fit in %s", intString(st, i), i, st.DType, dt)}
				}
			}
			return nil
		}
	}
	if _, err := decoder(st.DType); err != nil {
		return err
	}
	t, err := Decode(st, dt)
	if t != nil {
		t.Release()
	}
	return err
}

// AsIs reports whether st's bytes are those of a tensor of dtype dt, as
// [Decode] would take them: st holds dt's own safetensors dtype, and dt
// is not bool (whose bytes other than 0 and 1 Decode makes 1).
func AsIs(st safetensors.Tensor, dt vram.DType) bool {
	name, ok := stNames[dt]
	return ok && name == st.DType && dt != vram.Bool
}

// Header returns t's safetensors dtype and shape, without its bytes: what
// [Encode] gives but Data.
func Header(t *vram.Tensor) (safetensors.Tensor, error) {
	name, ok := stNames[t.DType()]
	if !ok {
		return safetensors.Tensor{}, fmt.Errorf("dtype %s cannot be saved", t.DType())
	}
	return safetensors.Tensor{DType: name, Shape: []int(t.Shape())}, nil
}
