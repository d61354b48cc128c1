package nn_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestNewLayersRefuseOtherDevice gives layers with parameters or buffers
// on sim:0 an input on the CPU: each must panic with a device mismatch
// naming the layer and leave its state as it was.
func TestNewLayersRefuseOtherDevice(t *testing.T) {
	sim := vram.Sim(0)
	in := nn.InstanceNormOptions{Affine: true, TrackRunningStats: true}
	tests := []struct {
		name, op string
		mk       func() nn.Module
		fwd      func(m nn.Module, x *vram.Tensor) *vram.Tensor
		shape    vram.Shape
	}{
		{"InstanceNorm1d", "instance_norm1d", func() nn.Module { return nn.NewInstanceNorm1d(3, in) }, nil, vram.Shape{2, 3, 4}},
		{"InstanceNorm1d unbatched", "instance_norm1d", func() nn.Module { return nn.NewInstanceNorm1d(3, in) }, nil, vram.Shape{3, 4}},
		{"InstanceNorm2d stats only", "instance_norm2d", func() nn.Module {
			return nn.NewInstanceNorm2d(3, nn.InstanceNormOptions{TrackRunningStats: true})
		}, nil, vram.Shape{2, 3, 2, 2}},
		{"PReLU", "prelu", func() nn.Module { return nn.NewPReLU(3, 0.25) }, nil, vram.Shape{2, 3, 4}},
		{"PReLU shared", "prelu", func() nn.Module { return nn.NewPReLU(1, 0.25) }, nil, vram.Shape{2, 3, 4}},
		{"Bilinear", "bilinear", func() nn.Module { return nn.NewBilinear(4, 4, 2) }, nil, vram.Shape{2, 4}},
		{"Bilinear pair", "bilinear", func() nn.Module { return nn.NewBilinear(4, 4, 2) }, func(m nn.Module, x *vram.Tensor) *vram.Tensor {
			return m.(*nn.Bilinear).ForwardPair(x, x)
		}, vram.Shape{2, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.mk()
			m.To(sim)
			fwd := tt.fwd
			if fwd == nil {
				fwd = func(m nn.Module, x *vram.Tensor) *vram.Tensor { return m.Forward(x) }
			}
			// One step on the layer's device makes its running statistics
			// other than their initial values.
			warm := vram.Randn(tt.shape, sim)
			fwd(m, warm).Release()
			warm.Release()
			before := map[string][]float64{}
			for k, v := range nn.StateDict(m) {
				before[k] = v.Float64s()
			}
			x := vram.Randn(tt.shape)
			defer x.Release()
			err := vram.Catch(func() { fwd(m, x).Release() })
			if !errors.Is(err, vram.ErrDevice) || !strings.Contains(err.Error(), tt.op+":") {
				t.Errorf("got %v, want a device mismatch naming %s", err, tt.op)
			}
			for k, v := range nn.StateDict(m) {
				if got := v.Float64s(); !slices.Equal(got, before[k]) {
					t.Errorf("%s changed from %v to %v", k, before[k], got)
				}
			}
		})
	}
}

// TestNewLayersNameThemselves checks that the errors of the operations a
// layer is built from name the layer, as the older layers' do.
func TestNewLayersNameThemselves(t *testing.T) {
	released := func() *vram.Tensor {
		x := vram.Randn(vram.Shape{2, 4, 6})
		x.Release()
		return x
	}
	ints := func() *vram.Tensor { return vram.Zeros(vram.Shape{2, 4, 6}, vram.Int64) }
	tests := []struct {
		name, op string
		m        nn.Module
		x        func() *vram.Tensor
		kind     error
	}{
		{"Softmin dim", "softmin", nn.NewSoftmin(3), func() *vram.Tensor { return vram.Randn(vram.Shape{2, 3}) }, vram.ErrIndex},
		{"Softmin released", "softmin", nn.NewSoftmin(1), released, vram.ErrReleased},
		{"Softsign released", "softsign", nn.NewSoftsign(), released, vram.ErrReleased},
		{"Tanhshrink released", "tanhshrink", nn.NewTanhshrink(), released, vram.ErrReleased},
		{"Hardshrink released", "hardshrink", nn.NewHardshrink(0.5), released, vram.ErrReleased},
		{"Softshrink released", "softshrink", nn.NewSoftshrink(0.5), released, vram.ErrReleased},
		{"Threshold released", "threshold", nn.NewThreshold(0.1, 2), released, vram.ErrReleased},
		{"LogSigmoid int", "log_sigmoid", nn.NewLogSigmoid(), ints, vram.ErrDType},
		{"Hardsigmoid int", "hardsigmoid", nn.NewHardsigmoid(), ints, vram.ErrDType},
		{"CELU released", "celu", nn.NewCELU(1), released, vram.ErrReleased},
		{"SELU int", "selu", nn.NewSELU(), ints, vram.ErrDType},
		{"GLU released", "glu", nn.NewGLU(-1), released, vram.ErrReleased},
		{"PReLU released", "prelu", nn.NewPReLU(1, 0.25), released, vram.ErrReleased},
		{"RReLU released", "rrelu", nn.NewRReLU(0.1, 0.3), released, vram.ErrReleased},
		{"LocalResponseNorm released", "local_response_norm", nn.NewLocalResponseNorm(2, 1e-4, 0.75, 1), released, vram.ErrReleased},
		{"InstanceNorm int", "instance_norm1d", nn.NewInstanceNorm1d(4, nn.InstanceNormOptions{TrackRunningStats: true}), ints, vram.ErrDType},
		{"InstanceNorm released", "instance_norm1d", nn.NewInstanceNorm1d(4, nn.InstanceNormOptions{}), released, vram.ErrReleased},
		{"Bilinear int", "bilinear", nn.NewBilinear(6, 6, 2), ints, vram.ErrDType},
		{"Bilinear released", "bilinear", nn.NewBilinear(6, 6, 2), released, vram.ErrReleased},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := tt.x()
			defer x.Release()
			err := vram.Catch(func() { tt.m.Forward(x).Release() })
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.op+":") {
				t.Fatalf("got %v, want %v naming %s", err, tt.kind, tt.op)
			}
		})
	}
}
