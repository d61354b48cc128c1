package nn_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestResizeLayers checks the padding, upsampling, pixel-shuffle and
// fold layers against values worked out from PyTorch's definitions, on the
// CPU and a simulated device.
func TestResizeLayers(t *testing.T) {
	img := func(d vram.Device) *vram.Tensor { // [[0, 1], [2, 3]]
		return vram.Arange(0, 4, 1, d, vram.Float64).Reshape(1, 1, 2, 2)
	}
	cases := []struct {
		name  string
		layer nn.Module
		in    func(d vram.Device) *vram.Tensor
		shape vram.Shape
		want  []float64
	}{
		{"zero pad", nn.NewZeroPad2d(1, 0, 0, 1), img, vram.Shape{1, 1, 3, 3}, []float64{0, 0, 1, 0, 2, 3, 0, 0, 0}},
		{"zero pad one size", nn.NewZeroPad2d(1), img, vram.Shape{1, 1, 4, 4},
			[]float64{0, 0, 0, 0, 0, 0, 1, 0, 0, 2, 3, 0, 0, 0, 0, 0}},
		{"constant pad 1d", nn.NewConstantPad1d(5, 2, 0), func(d vram.Device) *vram.Tensor { return img(d).Reshape(1, 4) },
			vram.Shape{1, 6}, []float64{5, 5, 0, 1, 2, 3}},
		{"constant pad 2d", nn.NewConstantPad2d(-1, 0, 1, 1, 0), img, vram.Shape{1, 1, 3, 3}, []float64{-1, -1, -1, 0, 1, -1, 2, 3, -1}},
		{"reflection pad 1d", nn.NewReflectionPad1d(1), func(d vram.Device) *vram.Tensor { return img(d).Reshape(1, 4) },
			vram.Shape{1, 6}, []float64{1, 0, 1, 2, 3, 2}},
		{"reflection pad 2d", nn.NewReflectionPad2d(1, 0, 1, 0), img, vram.Shape{1, 1, 3, 3}, []float64{3, 2, 3, 1, 0, 1, 3, 2, 3}},
		{"replication pad 1d", nn.NewReplicationPad1d(0, 2), func(d vram.Device) *vram.Tensor { return img(d).Reshape(1, 4) },
			vram.Shape{1, 6}, []float64{0, 1, 2, 3, 3, 3}},
		{"replication pad 2d", nn.NewReplicationPad2d(1, 0, 0, 1), img, vram.Shape{1, 1, 3, 3}, []float64{0, 0, 1, 2, 2, 3, 2, 2, 3}},
		{"zero pad 1d", nn.NewZeroPad1d(1), func(d vram.Device) *vram.Tensor { return img(d).Reshape(1, 4) },
			vram.Shape{1, 6}, []float64{0, 0, 1, 2, 3, 0}},
		{"zero pad 3d", nn.NewZeroPad3d(0, 0, 0, 0, 1, 0), img, vram.Shape{1, 2, 2, 2}, []float64{0, 0, 0, 0, 0, 1, 2, 3}},
		{"constant pad 3d", nn.NewConstantPad3d(4, 0, 1, 0, 0, 0, 0), img, vram.Shape{1, 1, 2, 3}, []float64{0, 1, 4, 2, 3, 4}},
		{"reflection pad 3d", nn.NewReflectionPad3d(1, 0, 0, 0, 0, 0), img, vram.Shape{1, 1, 2, 3}, []float64{1, 0, 1, 3, 2, 3}},
		{"replication pad 3d", nn.NewReplicationPad3d(0, 0, 0, 1, 0, 0), img, vram.Shape{1, 1, 3, 2}, []float64{0, 1, 2, 3, 2, 3}},
		{"circular pad 1d", nn.NewCircularPad1d(1, 2), func(d vram.Device) *vram.Tensor { return img(d).Reshape(1, 4) },
			vram.Shape{1, 7}, []float64{3, 0, 1, 2, 3, 0, 1}},
		{"circular pad 2d", nn.NewCircularPad2d(1, 0, 0, 1), img, vram.Shape{1, 1, 3, 3}, []float64{1, 0, 1, 3, 2, 3, 1, 0, 1}},
		{"circular pad 3d", nn.NewCircularPad3d(0, 0, 0, 0, 0, 1), img, vram.Shape{1, 2, 2, 2}, []float64{0, 1, 2, 3, 0, 1, 2, 3}},
		{"upsample nearest", nn.NewUpsamplingNearest2d(nil, []float64{2}), img, vram.Shape{1, 1, 4, 4},
			[]float64{0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3}},
		// UpsamplingBilinear2d aligns corners: rows and columns at 0, 1/2, 1.
		{"upsample bilinear", nn.NewUpsamplingBilinear2d([]int{3, 3}, nil), img, vram.Shape{1, 1, 3, 3},
			[]float64{0, 0.5, 1, 1, 1.5, 2, 2, 2.5, 3}},
		{"upsample", nn.NewUpsample(vram.InterpolateOptions{Size: []int{3}, Mode: vram.InterpLinear}),
			func(d vram.Device) *vram.Tensor { return img(d).Reshape(1, 2, 2) }, vram.Shape{1, 2, 3},
			[]float64{0, 0.5, 1, 2, 2.5, 3}},
		{"pixel shuffle", nn.NewPixelShuffle(2), func(d vram.Device) *vram.Tensor { return img(d).Reshape(4, 1, 1) },
			vram.Shape{1, 2, 2}, []float64{0, 1, 2, 3}},
		{"pixel unshuffle", nn.NewPixelUnshuffle(2), img, vram.Shape{1, 4, 1, 1}, []float64{0, 1, 2, 3}},
		{"unfold", nn.NewUnfold([2]int{1, 2}, vram.FoldParams{}), img, vram.Shape{1, 2, 2}, []float64{0, 2, 1, 3}},
		{"fold", nn.NewFold([2]int{2, 3}, [2]int{1, 2}, vram.FoldParams{}),
			func(d vram.Device) *vram.Tensor { return vram.Ones(vram.Shape{1, 2, 4}, d, vram.Float64) },
			vram.Shape{1, 1, 2, 3}, []float64{1, 2, 1, 1, 2, 1}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				vram.Tidy(func() {
					y := c.layer.Forward(c.in(dev))
					got := y.Float64s()
					if !slices.Equal(y.Shape(), c.shape) || len(got) != len(c.want) {
						t.Fatalf("got %v %v, want %v %v", y.Shape(), got, c.shape, c.want)
					}
					for i := range got {
						if math.Abs(got[i]-c.want[i]) > 1e-12 {
							t.Fatalf("got %v, want %v", got, c.want)
						}
					}
					if n := len(c.layer.Parameters()); n != 0 {
						t.Errorf("%d parameters, want none", n)
					}
				})
			})
		}
	}
}

// TestPadLayerSizes checks that the padding layers refuse a count of sizes
// PyTorch's would not take.
func TestPadLayerSizes(t *testing.T) {
	cases := []struct {
		name string
		make func()
	}{
		{"zero pad 2d three", func() { nn.NewZeroPad2d(1, 2, 3) }},
		{"zero pad 2d none", func() { nn.NewZeroPad2d() }},
		{"constant pad 1d four", func() { nn.NewConstantPad1d(0, 1, 2, 3, 4) }},
		{"reflection pad 2d two", func() { nn.NewReflectionPad2d(1, 2) }},
		{"replication pad 1d three", func() { nn.NewReplicationPad1d(1, 2, 3) }},
		{"circular pad 3d four", func() { nn.NewCircularPad3d(1, 2, 3, 4) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := vram.Catch(c.make); !errors.Is(err, vram.ErrArgument) {
				t.Errorf("got %v, want an error of kind ErrArgument", err)
			}
		})
	}
}

// ExamplePixelShuffle upsamples a feature map by a factor of two, as the
// sub-pixel convolution of ESPCN does: four channels become one channel of
// twice the height and width, then a reflection pad widens the border.
func ExamplePixelShuffle() {
	model := nn.NewSequential(nn.NewPixelShuffle(2), nn.NewReflectionPad2d(1))
	x := vram.Arange(0, 4, 1, vram.Float32).Reshape(1, 4, 1, 1)
	y := model.Forward(x)
	fmt.Println(y.Shape())
	fmt.Println(y.Float32s())
	// Output:
	// [1, 1, 4, 4]
	// [3 2 3 2 1 0 1 0 3 2 3 2 1 0 1 0]
}
