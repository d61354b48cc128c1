package nn_test

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// InstanceNorm2d with running statistics normalizes each image by itself
// in training mode and by the running statistics in evaluation mode.
func ExampleNewInstanceNorm2d() {
	norm := nn.NewInstanceNorm2d(1, nn.InstanceNormOptions{Affine: true, TrackRunningStats: true})
	for _, p := range norm.NamedParameters() {
		fmt.Println(p.Name, p.Tensor.Shape())
	}
	x := vram.FromSlice([]float32{1, 2, 3, 4}, vram.Shape{1, 1, 2, 2})
	vram.Tidy(func() {
		fmt.Printf("%.3f\n", norm.Forward(x).Float32s())
		fmt.Printf("running mean %.2f, running var %.4f\n", norm.RunningMean.Item(), norm.RunningVar.Item())
		norm.Eval()
		fmt.Printf("%.3f\n", norm.Forward(x).Float32s())
	})
	// Output:
	// weight [1]
	// bias [1]
	// [-1.342 -0.447 0.447 1.342]
	// running mean 0.25, running var 1.0667
	// [0.726 1.694 2.663 3.631]
}

// PReLU learns one slope per channel, PyTorch's "weight", 0.25 at first.
func ExampleNewPReLU() {
	act := nn.NewPReLU(2, 0.25)
	x := vram.FromSlice([]float32{-4, 4, -8, 8}, vram.Shape{1, 2, 2})
	vram.Tidy(func() { fmt.Println(act.Forward(x).Float32s()) })
	// Output:
	// [-1 4 -2 8]
}

// TripletMarginLoss pulls each anchor towards its positive and pushes it
// away from its negative, until they are margin apart.
func ExampleTripletMarginLoss() {
	anchor := vram.FromSlice([]float64{0, 0, 1, 1}, vram.Shape{2, 2})
	positive := vram.FromSlice([]float64{0, 1, 1, 1}, vram.Shape{2, 2})
	negative := vram.FromSlice([]float64{3, 0, 1, 1.5}, vram.Shape{2, 2})
	vram.Tidy(func() {
		l := nn.TripletMarginLoss(anchor, positive, negative, 1, 2, 0, false, nn.ReductionNone)
		fmt.Println(l.Float64s())
	})
	// Output:
	// [0 0.5]
}

// TripletMarginWithDistanceLoss takes any distance: here the L1 one.
func ExampleTripletMarginWithDistanceLoss() {
	anchor := vram.FromSlice([]float64{0, 0, 1, 1}, vram.Shape{2, 2})
	positive := vram.FromSlice([]float64{0, 1, 1, 1}, vram.Shape{2, 2})
	negative := vram.FromSlice([]float64{3, 0, 1, 1.5}, vram.Shape{2, 2})
	l1 := func(x1, x2 *vram.Tensor) *vram.Tensor {
		return nn.PairwiseDistance(x1, x2, 1, 0, false)
	}
	vram.Tidy(func() {
		l := nn.TripletMarginWithDistanceLoss(anchor, positive, negative, l1, 1, false, nn.ReductionNone)
		fmt.Println(l.Float64s())
	})
	// Output:
	// [0 0.5]
}

// GaussianNLLLoss takes one variance per sample, shared by its features,
// as [N, 1] (or [N]).
func ExampleGaussianNLLLoss() {
	mean := vram.FromSlice([]float64{1, 2, 0, 0}, vram.Shape{2, 2})
	target := vram.FromSlice([]float64{1, 2, 1, -1}, vram.Shape{2, 2})
	variance := vram.FromSlice([]float64{1, 0.5}, vram.Shape{2, 1})
	vram.Tidy(func() {
		l := nn.GaussianNLLLoss(mean, target, variance, false, 1e-6, nn.ReductionNone)
		fmt.Printf("%.4f\n", l.Float64s())
	})
	// Output:
	// [0.0000 0.0000 0.6534 0.6534]
}

// MaxPool1d pools sequences [N, C, L] as a 2-D pool of height one.
func ExampleNewMaxPool1d() {
	pool := nn.NewMaxPool1d(2, 2, 0)
	x := vram.FromSlice([]float32{1, 3, 2, 5, 4, 0}, vram.Shape{1, 1, 6})
	vram.Tidy(func() {
		y := pool.Forward(x)
		fmt.Println(y.Shape(), y.Float32s())
	})
	// Output:
	// [1, 1, 3] [3 5 4]
}

// Bilinear scores pairs of inputs; with weight 1 at [0, i, i] and zero
// bias its single output is the dot product of the pair.
func ExampleNewBilinear() {
	l := nn.NewBilinear(2, 2, 1, vram.Float64)
	defer nn.Release(l)
	nn.Zeros(l.Weight)
	nn.Zeros(l.Bias)
	nn.Eye(l.Weight.Select(0, 0))
	x1 := vram.FromSlice([]float64{1, 2, 3, 4}, vram.Shape{2, 2})
	x2 := vram.FromSlice([]float64{5, 6, 7, 8}, vram.Shape{2, 2})
	vram.Tidy(func() { fmt.Println(l.ForwardPair(x1, x2).Float64s()) })
	for _, p := range l.NamedParameters() {
		fmt.Println(p.Name, p.Tensor.Shape())
	}
	// Output:
	// [17 53]
	// weight [1, 2, 2]
	// bias [1]
}

// LocalResponseNorm divides each element by (k + alpha·a)^beta, a being
// the mean square over a window of channels: here the element's channel
// and the one before it.
func ExampleNewLocalResponseNorm() {
	lrn := nn.NewLocalResponseNorm(2, 1, 1, 1)
	x := vram.FromSlice([]float64{1, 2, 3}, vram.Shape{1, 3, 1})
	vram.Tidy(func() { fmt.Printf("%.4f\n", lrn.Forward(x).Float64s()) })
	// Output:
	// [0.6667 0.5714 0.4000]
}
