// Package data loads datasets in batches for training, as
// torch.utils.data does: a [Dataset] (Len and Get), [TensorDataset] over
// tensors that share their first dimension, [Subset], [ConcatDataset],
// [RandomSplit] and [RandomSplitFractions], and a [Loader] that batches a dataset, shuffles
// it every epoch from a seeded generator, prepares batches ahead on worker
// goroutines and puts them on a device:
//
//	ds, err := data.NewTensorDataset(x, y)
//	if err != nil {
//		return err
//	}
//	loader, err := data.NewLoader(ds, 64, data.Options{Shuffle: true, Generator: vram.NewGenerator(1), NumWorkers: 2, Device: dev})
//	if err != nil {
//		return err
//	}
//	for epoch := range epochs {
//		for batch, err := range loader.All() {
//			if err != nil {
//				return err
//			}
//			x, y := batch.Tensors[0], batch.Tensors[1]
//			...
//		}
//	}
//
// A [Sample] is one element: its fields in order, tensors or numbers;
// [Collate] (or an [Options].Collate of the caller's) joins the samples of
// a batch into one tensor per field. A [Sampler] chooses the order of the
// indices ([SequentialSampler], [RandomSampler] with or without
// replacement, [SubsetRandomSampler], [SamplerFunc]).
//
// # Resuming
//
// An epoch's order depends only on the state of the loader's generator
// when the epoch begins. To resume a run that stopped within an epoch,
// keep that state ([vram.Generator.State]) and the number of batches done
// in the checkpoint, restore the state ([vram.Generator.SetState]) and go
// on with [Loader.AllFrom], which skips the batches done without reading
// their samples.
//
// # Streams
//
// An [IterableDataset] is a stream with no length (records read from a
// file, say), and [NewIterableLoader] batches it with the same options,
// less Shuffle and Sampler. The loader reads the stream once per epoch and
// its workers share it: one goroutine reads, the workers collate, so no
// sample comes twice. A [ShardedDataset] splits the stream instead: each
// worker reads the shard that its [WorkerInfo] names (PyTorch's
// get_worker_info) and batches it, the batches coming from the workers in
// turn.
//
// # Memory ownership
//
// The loader owns each [Batch]: it releases its tensors when the loop body
// that received it returns, and releases the batches its workers prepared
// ahead when the loop ends early. [Batch.Keep] hands the tensors to the
// caller. Tensors a dataset makes for a sample (the views of a
// TensorDataset, say) are released once the batch is assembled; the
// tensors a dataset holds are its owner's to release.
//
// # Errors
//
// Constructors return errors that match vram's sentinels ([vram.ErrArgument],
// [vram.ErrShape], [vram.ErrIndex], [vram.ErrDType], [vram.ErrUnavailable]),
// and a panic of a dataset's or a sampler's Len as a [*PanicError]; they
// read each Len once. During iteration, an error or a panic of a dataset's
// Get, a stream, a collate function or a sampler (a [*PanicError]) is
// returned by the loop at the position of its batch, and ends the epoch. A
// sampler or a stream that panics when the loop stops it (its yield
// returned false) panics the loop's goroutine once the epoch has ended,
// with workers as without. Code of the caller's that ends a goroutine of
// the loader's with runtime.Goexit (testing's FailNow, in a test's
// dataset) ends the epoch likewise, with an error that matches
// [vram.ErrArgument], rather than cutting it short without a word;
// without workers, it ends the loop's own goroutine, as it would anywhere.
//
// # Concurrency
//
// With Options.NumWorkers > 0, Get and the collate function run on several
// goroutines at once, and must be safe for that; [TensorDataset], [Subset]
// and [Collate] are. Batches come in the order they would without workers.
// When the loop ends, for whatever reason, every goroutine of the loader
// has returned.
package data
