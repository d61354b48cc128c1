package nn_test

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

func ExampleLSTM() {
	g := vram.NewGenerator(0)
	lstm := nn.NewLSTM(8, 16, nn.RecurrentOptions{NumLayers: 2, Bidirectional: true, BatchFirst: true}, vram.WithGenerator(g))
	defer nn.Release(lstm)
	for _, p := range lstm.NamedParameters()[:4] {
		fmt.Println(p.Name, p.Tensor.Shape())
	}

	x := vram.Randn(vram.Shape{4, 10, 8}, vram.WithGenerator(g)) // batch 4, 10 steps, 8 features
	defer x.Release()
	out, hn, cn := lstm.ForwardState(x, nil, nil) // zero initial states
	defer out.Release()
	defer hn.Release()
	defer cn.Release()
	fmt.Println(out.Shape(), hn.Shape(), cn.Shape())
	// Output:
	// weight_ih_l0 [64, 8]
	// weight_hh_l0 [64, 16]
	// bias_ih_l0 [64]
	// bias_hh_l0 [64]
	// [4, 10, 32] [4, 4, 16] [4, 4, 16]
}

func ExampleGRUCell() {
	g := vram.NewGenerator(0)
	cell := nn.NewGRUCell(3, 5, nn.CellOptions{}, vram.WithGenerator(g))
	defer nn.Release(cell)
	vram.Tidy(func() {
		seq := vram.Randn(vram.Shape{6, 2, 3}, vram.WithGenerator(g)) // 6 steps, batch 2
		var h *vram.Tensor                                            // nil: zeros
		for _, x := range seq.Unbind(0) {
			h = cell.ForwardState(x, h)
		}
		fmt.Println(h.Shape())
	})
	// Output:
	// [2, 5]
}

func ExampleRNN() {
	rnn := nn.NewRNN(2, 3, nn.RecurrentOptions{Nonlinearity: "relu"}, vram.WithGenerator(vram.NewGenerator(0)))
	defer nn.Release(rnn)
	vram.Tidy(func() {
		x := vram.Ones(vram.Shape{5, 2}) // unbatched: 5 steps of 2 features
		h0 := vram.Zeros(vram.Shape{1, 3})
		out, hn := rnn.ForwardState(x, h0)
		fmt.Println(out.Shape(), hn.Shape())
	})
	// Output:
	// [5, 3] [1, 3]
}
