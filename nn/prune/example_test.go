package prune_test

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/prune"
)

func Example() {
	g := vram.WithGenerator(vram.NewGenerator(0))
	model := nn.NewSequential(nn.NewLinear(64, 32, g), nn.NewReLU(), nn.NewLinear(32, 10, g))
	defer nn.Release(model)

	// A quarter of the first layer's output channels by L2 norm, then 80%
	// of the remaining weights of both layers by magnitude, together.
	if err := prune.LnStructured(model.At(0), "weight", prune.Fraction(0.25), 2, 0); err != nil {
		panic(err)
	}
	if err := prune.GlobalUnstructured(prune.Params(model, "weight"), prune.Fraction(0.8)); err != nil {
		panic(err)
	}
	stats, total := prune.Sparsity(model)
	for _, s := range stats {
		fmt.Printf("%s: %d of %d zero\n", s.Name, s.Zeros, s.Total)
	}
	fmt.Printf("%s: %.3f\n", total.Name, total.Fraction())

	// Make it permanent: the masks are folded into the weights and freed.
	n, err := prune.RemoveAll(model)
	fmt.Println("removed", n, err, len(model.Parameters()), "parameters")
	// Output:
	// 0.weight: 1807 of 2048 zero
	// 0.bias: 0 of 32 zero
	// 2.weight: 190 of 320 zero
	// 2.bias: 0 of 10 zero
	// total: 0.829
	// removed 2 <nil> 4 parameters
}

func ExampleRandomStructured() {
	layer := nn.NewLinear(6, 4)
	defer nn.Release(layer)
	// Half of the output channels (rows of the weight), chosen at random.
	if err := prune.RandomStructured(layer, "weight", prune.Fraction(0.5), 0, vram.NewGenerator(3)); err != nil {
		panic(err)
	}
	mask := layer.WeightMask.Float64s()
	kept := 0
	for r := range 4 {
		if mask[r*6] == 1 {
			kept++
		}
	}
	fmt.Println("rows kept:", kept)
	// Output:
	// rows kept: 2
}
