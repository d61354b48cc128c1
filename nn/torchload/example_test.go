package torchload_test

import (
	"fmt"

	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/torchload"
)

// The checkpoint holds {"model": state_dict, "epoch": 3}, saved from a
// model wrapped in DistributedDataParallel: LoadPyTorch finds the state
// dict under "model" and removes the "module." prefix.
func ExampleLoadPyTorch() {
	model := nn.NewLinear(3, 2)
	res, err := torchload.LoadPyTorch(model, "testdata/linear.pt", true)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(model.Weight.Float64s(), model.Bias.Float64s(), res.Missing)
	// Output: [1 3 5 2 4 6] [0.5 -1] []
}

func ExampleReadStateDictFile() {
	sd, err := torchload.ReadStateDictFile("testdata/linear.pt", torchload.Options{Key: "model", StripPrefix: "module."})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sd.Release()
	for _, e := range sd {
		fmt.Println(e.Key, e.DType, e.Tensor.Shape(), e.Tensor.Float64s())
	}
	// Output:
	// weight float32 [2, 3] [1 3 5 2 4 6]
	// bias float32 [2] [0.5 -1]
}
