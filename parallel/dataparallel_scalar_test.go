package parallel

import (
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestDataParallelScalarShape: on one device, Forward returns the
// module's output as it is, a scalar staying a scalar, as PyTorch's
// DataParallel with one device calls the module directly; on several, the
// scalars are gathered into a vector of one per replica that ran, with a
// warning, as PyTorch's gather does.
func TestDataParallelScalarShape(t *testing.T) {
	for _, tc := range []struct {
		name  string
		devs  []vram.Device
		rows  int
		shape vram.Shape
		warns bool
	}{
		{"one device", simDevs(1), 4, vram.Shape{}, false},
		{"two devices", simDevs(2), 4, vram.Shape{2}, true},
		{"two devices, one row", simDevs(2), 1, vram.Shape{1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var warnings []string
			old := vram.SetWarningHandler(func(w vram.Warning) { warnings = append(warnings, w.Message) })
			defer vram.SetWarningHandler(old)
			lin := nn.NewLinear(3, 1)
			m := &lossNet{lin: lin}
			m.RegisterModule("lin", lin)
			defer nn.Release(m)
			dp, err := NewDataParallel(m, tc.devs)
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Release()
			vram.Tidy(func() {
				out := dp.Forward(vram.Randn(vram.Shape{tc.rows, 3}))
				if !slices.Equal(out.Shape(), tc.shape) {
					t.Fatalf("output of shape %v, want %v", out.Shape(), tc.shape)
				}
				out.Sum().Backward()
				if g := dp.Replicas()[0].Parameters()[0].Grad(); g == nil {
					t.Fatal("no gradient reached the module")
				}
			})
			warned := slices.ContainsFunc(warnings, func(s string) bool { return strings.Contains(s, "scalar") })
			if warned != tc.warns {
				t.Errorf("warnings %q; want a warning about scalars: %v", warnings, tc.warns)
			}
		})
	}
}
