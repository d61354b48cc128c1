package nn

import (
	"slices"

	"github.com/vramgo/vram"
)

// temps collects the intermediate tensors of a loss or of a layer's
// forward, released when it returns (a vram.Tidy would release them too,
// but its Keep would take the result out of the caller's own Tidy as
// well).
type temps []*vram.Tensor

// add records x and returns it.
func (ts *temps) add(x *vram.Tensor) *vram.Tensor {
	*ts = append(*ts, x)
	return x
}

// keep takes x out of ts, so that release leaves it alone, and returns it.
func (ts *temps) keep(x *vram.Tensor) *vram.Tensor {
	*ts = slices.DeleteFunc(*ts, func(t *vram.Tensor) bool { return t == x })
	return x
}

// release releases every tensor recorded. Its receiver is a pointer so
// that "defer ts.release()" releases what was recorded after the defer
// statement, not the (empty) slice it saw.
func (ts *temps) release() {
	for _, x := range *ts {
		x.Release()
	}
	*ts = nil
}
