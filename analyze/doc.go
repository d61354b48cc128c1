// Package analyze explains where an allocator's memory went, from a
// snapshot or trace file: fragmentation (waste inside blocks, and memory
// reserved but not allocated), the largest live allocations by region and
// by the user's code that allocated them, out-of-memory events with what
// was asked, what was free and a fix checked by replaying the history, and
// allocated and reserved memory over the history. [WriteHTML] draws it
// all as one self-contained page; "vram analyze" is its command line.
//
// It reads what package memory/trace reads: vram JSON snapshots
// (vram.MemorySnapshot written with trace.WriteJSON), PyTorch snapshots,
// pickled (torch.cuda.memory._dump_snapshot) or saved as JSON (json.dump of
// torch.cuda.memory._snapshot()), and text traces:
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
// live blocks (EmptyCache cannot return it) against wholly free segments
// and the whole pages inside free blocks of expandable segments, which
// PyTorch unmaps. Segments of private pools (a CUDA graph's, which
// torch.cuda.graph captures into, or a torch.cuda.MemPool's) are counted
// apart, with what is held there: they serve their own pool alone, and
// empty_cache keeps their free memory for it.
//
// # Attribution
//
// Live memory, out-of-memory events and the hover text of the timeline
// are attributed to the frame of the user's own code that allocated: the
// innermost frame of a stack that is neither C++ (no Python or Go source
// file: the "??" frames and .cpp, .cu, .so paths that PyTorch's default
// stacks="all" history records, with names such as torch::unwind::unwind(),
// gather_with_cpp() and c10::, at::, std:: functions, and the
// interpreter's own C functions), nor Python code of torch, of installed
// packages (site-packages, dist-packages) or of the standard library.
// When a stack has no such frame, the innermost Python frame stands in.
// It is shown as "function (dir/file.py:line)". A stack of C++ frames
// alone is what autograd's threads record for the memory of the backward
// pass: it is attributed to the autograd function that ran, under the
// name PyTorch gives a tensor's grad_fn ("AddmmBackward0 (autograd
// backward)"), else to the outermost ATen operator ("aten::mm"), else to
// the innermost frame that is neither the allocator's machinery nor the
// thread's start (pthread, __clone). When PyTorch records only the
// allocator's own frames for an OOM event (older versions did), the
// report names the site of the allocation just before it (OOM.PrevSite).
// The whole stack stays in the JSON report and, one click away, in the
// HTML page's <details>. Each stack is attributed once, however many
// blocks and events share it, and attribution reads at most 8 KiB of a
// frame's file and function; a name longer than that (no real one is)
// is cut in the report, so that the work and the report of an analysis
// follow what a snapshot holds rather than how often it refers to it.
//
// # Fix checks
//
// Each explained out-of-memory event gets a checked fix (OOM.Fix): the
// history up to the failed allocation, then that allocation, is replayed
// through package memory's allocator on a simulated device as large as the
// memory the run was allowed, first under policy:pytorch with the recorded
// settings, which must fail as the run did (else nothing is concluded),
// then under expandable_segments:True, max_split_size_mb of 128, 256 and
// 512, garbage_collection_threshold:0.8, a change of
// roundup_power2_divisions, and vram's own policy. The fix names the first
// setting that fits and its peak, in the run's own terms ("with
// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run peaks at 960.00
// MiB, under the 1000.00 MiB allowed"); when none does, how much memory is
// missing: the least limit, to 2 MiB, under which the recorded settings or
// one of those tried (vram's policy aside for PyTorch's runs) serve the
// request, less the limit. That is at least what the tensors live at once
// and the request take beyond the limit, and more where new segments are
// larger than the requests they serve.
//
// The simulated device of a replay with fixed segments places each new
// segment at the address the recorded run's driver gave the next segment
// of that size, while that range is free in the replay: PyTorch picks the
// free block of the best size at the lowest address, and the driver hands
// large segments out at falling addresses, so a device that hands them out
// at rising ones breaks those ties the other way, splits other segments,
// and gives back others under a limit; the replay of a real run under its
// own limit then fails before the run did.
//
// The limit is Options.Limit when given (`vram analyze --limit`), else a
// vram snapshot's per_process_memory_fraction of its capacity (or the
// capacity; either less what other processes held, when the event says
// what was free), else inferred from the event, and LimitHow says how: when the
// device had less free than the allocator asked for (PyTorch asks for a
// 2 MiB segment for requests up to 1 MiB, 20 MiB below 10 MiB, else the
// request rounded up to 2 MiB), the limit is what this process held plus
// what was free; when the device had room, a limit of the allocator
// stopped it (torch.cuda.set_per_process_memory_fraction, which PyTorch's
// snapshots do not record): it was at least the most the run reserved
// before and less than what it held at the OOM plus what it asked for,
// and less than the least limit under which the replay of the recorded
// settings serves the request; when the run gave segments back to the
// device before (as PyTorch does when a reservation would pass its limit),
// only limits under which a replay gives back as many remain. A setting is
// then said to fit when it fits under the least such limit, or to need a
// limit (the least found by bisection, FixTrial.MinLimitSearched, or one
// under which it fits when the budget allows no search) within that range
// (OOM.LimitBytes to OOM.LimitMaxBytes).
//
// Replays are bounded: those of one device together replay at most
// Options.ReplayEvents events (DefaultReplayEvents, about ten seconds),
// each also counting one event per 2 MiB of its simulated device, so that
// a history that claims a huge device cannot take memory or time beyond
// the budget; the devices of one file share four times that, so that a
// snapshot of many devices cannot multiply it. The settings get the
// budget first: the searches that narrow
// the limit run only when it allows several dozen replays; settings left
// out are named as not replayed.
//
// # Concurrency
//
// [Analyze], [File] and [WriteHTML] may run concurrently on different
// reports. A [Recorder] is safe for concurrent use.
package analyze
