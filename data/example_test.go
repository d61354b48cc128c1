package data_test

import (
	"bufio"
	"fmt"
	"iter"
	"strings"

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

// ExampleNewIterableLoader batches a stream of records read from a text
// source, one "x,label" line each, with two workers sharing the stream.
func ExampleNewIterableLoader() {
	const records = "0.5,1\n1.5,0\n2.5,1\n3.5,0\n4.5,1\n"
	lines := data.StreamFunc(func() iter.Seq2[data.Sample, error] {
		return func(yield func(data.Sample, error) bool) {
			sc := bufio.NewScanner(strings.NewReader(records)) // an os.File in practice
			for sc.Scan() {
				var x float32
				var label int64
				if _, err := fmt.Sscanf(sc.Text(), "%g,%d", &x, &label); err != nil {
					yield(nil, fmt.Errorf("record %q: %w", sc.Text(), err))
					return
				}
				if !yield(data.Sample{[]float32{x, 2 * x}, label}, nil) {
					return
				}
			}
			if err := sc.Err(); err != nil {
				yield(nil, err)
			}
		}
	})
	loader, err := data.NewIterableLoader(lines, 2, data.Options{NumWorkers: 2})
	if err != nil {
		panic(err)
	}
	for batch, err := range loader.All() {
		if err != nil {
			panic(err)
		}
		x, y := batch.Tensors[0], batch.Tensors[1]
		fmt.Println(x.Shape(), x.Float32s(), y.Int64s())
	}
	// Output:
	// [2, 2] [0.5 1 1.5 3] [1 0]
	// [2, 2] [2.5 5 3.5 7] [1 0]
	// [1, 2] [4.5 9] [1]
}

// evenOdd is a stream of the numbers 0 to 9 that a loader's workers split:
// worker k of n reads the numbers equal to k modulo n.
type evenOdd struct{}

func (evenOdd) All() iter.Seq2[data.Sample, error] {
	return evenOdd{}.Shard(data.WorkerInfo{ID: 0, NumWorkers: 1})
}

func (evenOdd) Shard(w data.WorkerInfo) iter.Seq2[data.Sample, error] {
	return func(yield func(data.Sample, error) bool) {
		for i := w.ID; i < 10; i += w.NumWorkers {
			if !yield(data.Sample{i}, nil) {
				return
			}
		}
	}
}

// ExampleShardedDataset splits a stream between two workers, each of which
// reads and batches its own shard.
func ExampleShardedDataset() {
	loader, err := data.NewIterableLoader(evenOdd{}, 3, data.Options{NumWorkers: 2})
	if err != nil {
		panic(err)
	}
	for batch, err := range loader.All() {
		if err != nil {
			panic(err)
		}
		fmt.Println(batch.Tensors[0].Int64s())
	}
	// Output:
	// [0 2 4]
	// [1 3 5]
	// [6 8]
	// [7 9]
}

// ExampleLoader_AllFrom resumes an epoch after its first batch: the
// loader's generator gets back the state it had when the epoch began, so
// the epoch's order is the same.
func ExampleLoader_AllFrom() {
	y := vram.Arange(0, 6, 1, vram.Int64)
	defer y.Release()
	ds, err := data.NewTensorDataset(y)
	if err != nil {
		panic(err)
	}
	gen := vram.NewGenerator(1)
	loader, err := data.NewLoader(ds, 2, data.Options{Shuffle: true, Generator: gen})
	if err != nil {
		panic(err)
	}
	epochStart := gen.State() // saved in the checkpoint with the batch count
	for batch := range loader.All() {
		fmt.Println("before:", batch.Tensors[0].Int64s())
	}
	if err := gen.SetState(epochStart); err != nil { // after a restart
		panic(err)
	}
	for batch := range loader.AllFrom(1) {
		fmt.Println("resumed:", batch.Tensors[0].Int64s())
	}
	// Output:
	// before: [1 3]
	// before: [4 5]
	// before: [2 0]
	// resumed: [4 5]
	// resumed: [2 0]
}
