// Package analyze explains where an allocator's memory went, from a
// snapshot or trace file: fragmentation (waste inside blocks, and memory
// reserved but not allocated), the largest live allocations by region and
// by stack, out-of-memory events with what was asked and what was free,
// and allocated and reserved memory over the history. [WriteHTML] draws it
// all as one self-contained page; "vram analyze" is its command line.
//
// It reads what package memory/trace reads: vram JSON snapshots
// (vram.MemorySnapshot written with trace.WriteJSON), PyTorch snapshot
// pickles (torch.cuda.memory._dump_snapshot) and text traces:
//
//	rep, err := analyze.File("snapshot.pickle", analyze.Options{})
//	if err != nil {
//		return err // names the file: "trace: snapshot.pickle: offset 12: ..."
//	}
//	for _, d := range rep.Devices {
//		fmt.Println(d.Fragmentation.ExternalBytes, d.Fragmentation.LargestFreeBlockBytes)
//	}
//	err = analyze.WriteHTMLFile("snapshot.html", rep)
//
// A [Recorder] records a run in-process, sampling an allocator's statistics
// and writing them with its snapshot, for the same view.
//
// The package reads snapshots only through memory/trace and does not
// import the root package vram: it works on any allocator's snapshot.
//
// # Fragmentation
//
// Of the memory an allocator reserved from the device, some is allocated
// to callers and the rest is cached: free blocks, and blocks waiting for a
// stream. Of the allocated memory, some was asked for and the rest is
// internal waste (sizes rounded up, blocks not split). [Fragmentation]
// gives both, the largest free block (the largest request served without
// the device), and how much free memory sits in segments that also hold
// live blocks (EmptyCache cannot return it) against wholly free segments.
//
// # Concurrency
//
// [Analyze], [File] and [WriteHTML] may run concurrently on different
// reports. A [Recorder] is safe for concurrent use.
package analyze
