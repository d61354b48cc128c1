package swa_test

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim/swa"
)

// The averaged copy holds the mean of the weights it was given.
func ExampleAveragedModel() {
	model := nn.NewLinearNoBias(2, 1)
	defer nn.Release(model)
	avg, err := swa.NewAveragedModel(model, swa.Options{})
	if err != nil {
		panic(err)
	}
	defer nn.Release(avg)
	for _, w := range [][]float32{{1, 2}, {3, 4}, {5, 9}} {
		vram.NoGrad(func() {
			src := vram.FromSlice(w, vram.Shape{1, 2})
			model.Weight.CopyFrom(src)
			src.Release()
		})
		if err := avg.UpdateParameters(model); err != nil {
			panic(err)
		}
	}
	fmt.Println(avg.NumAveraged(), avg.Parameters()[0].Float64s())
	// Output: 3 [3 5]
}

// An exponential moving average of the weights, as
// get_ema_multi_avg_fn(0.5) gives.
func ExampleEMA() {
	model := nn.NewLinearNoBias(1, 1)
	defer nn.Release(model)
	avg, err := swa.NewAveragedModel(model, swa.Options{MultiAvgFunc: swa.EMA(0.5)})
	if err != nil {
		panic(err)
	}
	defer nn.Release(avg)
	for _, w := range []float32{4, 8, 0} {
		vram.NoGrad(func() { model.Weight.FillInPlace(float64(w)) })
		if err := avg.UpdateParameters(model); err != nil {
			panic(err)
		}
	}
	fmt.Println(avg.Parameters()[0].Float64s())
	// Output: [3]
}
