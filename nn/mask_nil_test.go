package nn_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestMaskWithoutLayer calls ParameterMask and SetParameterMask on a nil
// layer of each [nn.Maskable] type and on its zero value (a layer made
// without its constructor, so without parameters): ParameterMask answers
// that nothing can be masked, and SetParameterMask returns an error
// matching vram.ErrArgument, leaving the mask given unreleased, rather
// than dereference nil.
func TestMaskWithoutLayer(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    nn.Maskable
	}{
		{"nil Linear", (*nn.Linear)(nil)},
		{"zero Linear", &nn.Linear{}},
		{"nil Conv1d", (*nn.Conv1d)(nil)},
		{"zero Conv1d", &nn.Conv1d{}},
		{"nil Conv2d", (*nn.Conv2d)(nil)},
		{"zero Conv2d", &nn.Conv2d{}},
		{"nil ConvTranspose2d", (*nn.ConvTranspose2d)(nil)},
		{"zero ConvTranspose2d", &nn.ConvTranspose2d{}},
		{"nil Embedding", (*nn.Embedding)(nil)},
		{"zero Embedding", &nn.Embedding{}},
		{"nil EmbeddingBag", (*nn.EmbeddingBag)(nil)},
		{"zero EmbeddingBag", &nn.EmbeddingBag{}},
		{"nil LayerNorm", (*nn.LayerNorm)(nil)},
		{"zero LayerNorm", &nn.LayerNorm{}},
		{"nil GroupNorm", (*nn.GroupNorm)(nil)},
		{"zero GroupNorm", &nn.GroupNorm{}},
		{"nil BatchNorm2d", (*nn.BatchNorm2d)(nil)},
		{"zero BatchNorm2d", &nn.BatchNorm2d{}},
		{"nil BatchNorm1d", (*nn.BatchNorm1d)(nil)},
		{"zero BatchNorm1d", &nn.BatchNorm1d{}},
		{"nil RMSNorm", (*nn.RMSNorm)(nil)},
		{"zero RMSNorm", &nn.RMSNorm{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{"weight", "bias"} {
				if perr := recovered(func() {
					if m, ok := tc.l.ParameterMask(name); m != nil || ok {
						t.Errorf("ParameterMask(%q) = %v, %v, want nil, false", name, m, ok)
					}
				}); perr != nil {
					t.Errorf("ParameterMask(%q) panicked: %v", name, perr)
				}
				for _, withMask := range []bool{false, true} {
					var mask *vram.Tensor
					if withMask {
						mask = vram.Ones(vram.Shape{2, 2})
					}
					var err error
					if perr := recovered(func() { err = tc.l.SetParameterMask(name, mask) }); perr != nil {
						t.Errorf("SetParameterMask(%q, mask %v) panicked: %v", name, withMask, perr)
					} else if !errors.Is(err, vram.ErrArgument) {
						t.Errorf("SetParameterMask(%q, mask %v) = %v, want an error matching vram.ErrArgument", name, withMask, err)
					}
					if mask != nil {
						if mask.Released() {
							t.Errorf("SetParameterMask(%q) released the refused mask", name)
						}
						mask.Release()
					}
				}
			}
		})
	}
}

// recovered runs f and returns what it panicked with, runtime errors
// included, or nil.
func recovered(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}
