package data_test

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
)

// ExampleLoader batches a TensorDataset of 10 samples in a shuffled order,
// with two worker goroutines preparing batches ahead.
func ExampleLoader() {
	x := vram.Arange(0, 20, 1).Reshape(10, 2) // 10 samples of 2 features
	y := vram.Arange(0, 10, 1, vram.Int64)    // and their labels
	defer x.Release()
	defer y.Release()
	ds, err := data.NewTensorDataset(x, y)
	if err != nil {
		panic(err)
	}
	loader, err := data.NewLoader(ds, 4, data.Options{
		Shuffle:    true,
		Generator:  vram.NewGenerator(1),
		NumWorkers: 2,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(loader.Len(), "batches an epoch")
	for epoch := range 2 {
		for batch, err := range loader.All() {
			if err != nil {
				panic(err)
			}
			xb, yb := batch.Tensors[0], batch.Tensors[1]
			fmt.Println(epoch, xb.Shape(), yb.Int64s())
		}
	}
	// Output:
	// 3 batches an epoch
	// 0 [4, 2] [7 6 4 8]
	// 0 [4, 2] [2 1 5 9]
	// 0 [2, 2] [3 0]
	// 1 [4, 2] [8 5 0 9]
	// 1 [4, 2] [1 3 4 7]
	// 1 [2, 2] [2 6]
}

// ExampleRandomSplit holds out a fifth of a dataset for validation.
func ExampleRandomSplit() {
	x := vram.Randn(vram.Shape{100, 3})
	defer x.Release()
	ds, err := data.NewTensorDataset(x)
	if err != nil {
		panic(err)
	}
	parts, err := data.RandomSplitFractions(ds, []float64{0.8, 0.2}, vram.NewGenerator(42))
	if err != nil {
		panic(err)
	}
	train, val := parts[0], parts[1]
	fmt.Println(train.Len(), val.Len())
	// Output:
	// 80 20
}
