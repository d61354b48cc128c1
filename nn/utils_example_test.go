package nn_test

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// Apply initialises every layer of a model, from the leaves up, as
// PyTorch's model.apply(init_weights) does.
func ExampleApply() {
	model := nn.NewSequential(nn.NewLinear(4, 8), nn.NewTanh(), nn.NewLinear(8, 2))
	g := vram.NewGenerator(1)
	nn.Apply(model, func(m nn.Module) {
		if l, ok := m.(*nn.Linear); ok {
			nn.XavierUniform(l.Weight, nn.CalculateGain("tanh"), g)
			nn.Zeros(l.Bias)
		}
	})
	total, trainable := nn.NumParameters(model)
	fmt.Println(total, trainable)
	nn.SetRequiresGrad(model, false) // frozen
	_, trainable = nn.NumParameters(model)
	fmt.Println(trainable)
	// Output:
	// 58 58
	// 0
}

// Orthogonal fills a weight with orthonormal rows (or columns), times a
// gain; Dirac makes a convolution pass its input through.
func ExampleOrthogonal() {
	w := vram.Zeros(vram.Shape{2, 3})
	nn.Orthogonal(w, 1, vram.NewGenerator(0))
	gram := w.MatMul(w.Transpose(0, 1))
	fmt.Printf("%.3f\n", gram.Float64s())

	conv := vram.Zeros(vram.Shape{2, 2, 3})
	nn.Dirac(conv, 1)
	fmt.Println(conv.Float64s())
	// Output:
	// [1.000 0.000 0.000 1.000]
	// [0 1 0 0 0 0 0 0 0 0 1 0]
}

// ParametersToVector flattens a model's parameters into one vector, and
// VectorToParameters writes such a vector back.
func ExampleParametersToVector() {
	lin := nn.NewLinear(2, 1)
	nn.Constant(lin.Weight, 0.5)
	nn.Ones(lin.Bias)
	v := nn.ParametersToVector(lin.Parameters())
	fmt.Println(v.Float64s())
	nn.VectorToParameters(v.MulScalar(2), lin.Parameters())
	fmt.Println(lin.Weight.Float64s(), lin.Bias.Float64s())
	// Output:
	// [0.5 0.5 1]
	// [1 1] [2]
}
