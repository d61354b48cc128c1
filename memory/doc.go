// Package memory implements vram's caching allocator of device memory: the
// counterpart of PyTorch's CUDA caching allocator, with its statistics,
// snapshots, an out-of-memory error that explains itself, and a replay of
// allocation traces on a simulated device. It knows nothing of CUDA: a
// device hands it memory through the small [Arena] interface, and
// [SimArena] simulates one, so everything here runs and is tested without a
// GPU.
//
// Read [Allocator] first, then [Config] for the settings, [Stats] for what
// is measured, and [OutOfMemoryError]. [Replay] runs a recorded trace (see
// package [github.com/vramgo/vram/memory/trace]) through an allocator, and
// [ReplayHistory] one read as a stream, in memory that follows the blocks
// live at once rather than the trace's length. [SmallestCapacity] bisects
// the smallest device a replay fits on, and [ReadRecorded] says what a
// history's own segment events show (memory given back mid-run, and the
// reserve it peaked at). [CallTimes] collects driver calls measured on a
// real device beside the cost model's figure for them ([ModelledCost]).
// A simulated device takes
// memory for every mapping it makes, so a capacity taken from input is
// checked against [MaxSimCapacity] (4 TiB) with [CheckSimCapacity] first.
//
//	a := memory.New(memory.NewSimArena(80<<30), memory.Config{})
//	b, err := a.Alloc(512<<20, 0, "activations") // bytes, stream, region
//	if err != nil {
//		var oom *memory.OutOfMemoryError
//		if errors.As(err, &oom) { ... }          // what failed, and a checked fix
//	}
//	a.Free(b)                 // cached for reuse on stream 0
//	a.EmptyCache()            // returned to the device
//	fmt.Print(a.Summary())    // torch.cuda.memory_summary()
//	stats := a.Stats().Map()  // torch.cuda.memory_stats() keys
//
// # Configuration
//
// [ParseConfig] reads the VRAM_ALLOC_CONF string: PyTorch's
// PYTORCH_CUDA_ALLOC_CONF keys max_split_size_mb, max_non_split_rounding_mb,
// roundup_power2_divisions, garbage_collection_threshold and
// expandable_segments; per_process_memory_fraction (also a function call,
// [Allocator.SetMemoryFraction], as in PyTorch); release_lock_on_cudamalloc,
// pinned_use_cuda_host_register, pinned_num_register_threads,
// pinned_reserve_segment_size_mb, pinned_use_background_threads and
// graph_capture_record_stream_reuse, checked, kept and not acted on
// ([Config.NotModelled] lists them; the first concerns PyTorch's locking
// around cudaMalloc, the last its CUDA graph capture, the others its pinned
// host allocator), with the ROCm spellings release_lock_on_hipmalloc and
// pinned_use_hip_host_register; backend:native; and
// vram's policy:pytorch|vram. An unknown key, a malformed value or a number
// out of range is a [*ConfigError] naming the key and what is allowed, and
// the accepted key a misspelt one most likely means. [Config.With] puts a
// string's settings over a Config, for a tool that adds its own to a
// user's; [Config.WithSnapshotSettings] puts a PyTorch snapshot's, its
// string and the allocator_settings entries recorded beside it. The defaults are PyTorch's (512-byte rounding, a small pool of 2 MiB segments
// for requests up to 1 MiB, 20 MiB segments below 10 MiB, larger requests
// rounded to 2 MiB, best fit, split and coalesce, per-stream pools), except
// the policy. As in PyTorch, a zero-byte request takes no memory at all.
//
// # Policies
//
// policy:pytorch is PyTorch's allocator: fixed segments from Arena.Alloc,
// or, with expandable_segments:True, one growing virtual segment per stream
// and pool mapped in 20 MiB (2 MiB for the small pool) units. Replays of
// PyTorch's own traces reproduce what PyTorch reserved to within 0.4%, most
// of them to the byte.
//
// policy:vram, the default, keeps PyTorch's best fit and cached path but
// places requests that miss the cache in virtual segments whose free pages
// are unmapped, lazily, when the reserve would otherwise grow past its
// high-water mark or 1/24 above the largest allocation so far, and mapped
// again where the request lands; small requests that grow a segment map
// 20 MiB at once, as PyTorch's segments for them hold, and larger ones
// that raise the peak map ahead what the slack leaves, when that is at
// least 64 MiB; a large request that the last request in its role (its
// size and those of the three requests before it) showed to live long is
// placed next to a block expected to outlive it rather than by best fit,
// so that a transformer layer's output does not leave the next layer's
// memory a hole off; and once a server's request has given its working
// set back, the next request's first large one takes the lowest free
// block that fits, so that each request's memory starts where the one
// before started (vrampolicy.go describes it in full). It needs a
// [VirtualArena]; on a plain [Arena] it falls back to PyTorch's fixed
// segments, with no other difference.
//
// Peak reserved over peak requested bytes, and driver time by the cost
// model of SimArena ([ModelledCost]: the mean cost of each driver call in
// a replay of these traces on an H100, cuMemSetAccess priced per mapping),
// replaying each trace in testdata on a simulated 80 GiB device
// (2026-12-06; TestPolicyTable prints it). Eight were recorded from
// PyTorch 2.11 on an H200 and six more on an H100
// (testdata/record_traces.py; the PyTorch columns match what PyTorch itself
// reserved), the others are synthetic (testdata/gentraces):
//
//	trace                          pytorch          pytorch+expandable  vram
//	bert_infer_varlen              1.717  1.9 ms    1.154  2.5 ms       1.026  9.3 ms
//	bert_infer_varlen_cap1228MiB   1.717  1.9 ms    1.154  2.5 ms       1.026  9.3 ms
//	  _seed1                       2.788  2.6 ms    1.218  2.7 ms       1.039 12.4 ms
//	  _seed2                       1.936  2.2 ms    1.175  2.6 ms       1.029  8.8 ms
//	bert_train_varlen              1.505 14.7 ms    1.082 25.3 ms       1.042 22.1 ms
//	gpt2_generate_varbatch         1.193  3.5 ms    1.124  3.0 ms       1.039  6.0 ms
//	gpt2_train_varlen              1.651 14.0 ms    1.071 46.0 ms       1.024 19.7 ms
//	gpt_generate_kvcache           1.192  4.2 ms    1.110  3.8 ms       1.042  6.8 ms
//	resnet50_infer_varbatch        2.795  2.0 ms    1.231  2.9 ms       1.022 12.0 ms
//	  _seed1                       2.452  2.2 ms    1.213  2.9 ms       1.074 19.0 ms
//	  _seed2                       2.015  2.2 ms    1.190  2.9 ms       1.042 13.2 ms
//	resnet50_train                 1.206  9.5 ms    1.020 20.5 ms       1.018  9.4 ms
//	synth_bert_infer_varlen        3.530  4.4 ms    1.040  4.5 ms       1.039  7.7 ms
//	synth_bert_infer_varlen_long   3.345  3.1 ms    1.061  4.8 ms       1.035  7.2 ms
//	synth_gpt_generate_varbatch    1.179  2.4 ms    1.036  3.5 ms       1.027  4.7 ms
//	synth_gpt_serve_kvcache        1.173  3.6 ms    1.075  3.7 ms       1.040  6.3 ms
//	synth_resnet50_infer_varbatch  2.562  1.5 ms    1.364  2.1 ms       1.038  6.2 ms
//	  _seed3                       4.147  2.2 ms    1.364  2.1 ms       1.088  5.9 ms
//	  _seed5                       2.653  1.7 ms    1.351  2.1 ms       1.111  5.4 ms
//	synth_transformer_train_varlen 2.039 10.3 ms    1.117 35.1 ms       1.035 22.2 ms
//	  _seed1                       1.709 11.6 ms    1.119 35.7 ms       1.052 22.9 ms
//	synth_two_models               2.471  3.0 ms    1.052  4.3 ms       1.033 10.1 ms
//	two_models                     1.746  4.7 ms    1.232  5.1 ms       1.053 14.5 ms
//	vit_infer_varbatch             1.949  2.1 ms    1.069  1.9 ms       1.135  5.5 ms
//	  _seed1                       1.410  1.9 ms    1.029  1.9 ms       1.108  7.1 ms
//
// policy:vram reserves at most 1.05 times the peak requested, and less
// than either PyTorch setting, on every trace it was tuned on but
// two_models (a BERT-sized encoder and a GPT-2-sized decoder served by one
// process, recorded), where it reserves 1.053x, still below PyTorch's
// 1.232 with expandable segments. The _seed traces are two generators of
// gentraces drawn with seeds the policy was not tuned on; on them it
// reserves up to 1.111x, where the free memory lies in chunks that live
// blocks also hold. So do three of the six traces recorded after its
// tuning (BERT and ResNet-50 inference with other requests, and ViT-B/16
// inference): up to 1.135x, above PyTorch's expandable segments on the ViT
// traces. Its driver time is within twice policy:pytorch's on 7 of the
// 16 traces it was tuned on (on the three recorded training traces 1.0 to
// 1.5 times it) and 2.0 to 5.9 times it on the others, and on none of the
// six recorded after (2.6 to 8.8 times): a segment of policy:pytorch costs
// about as much as one
// mapping, and the vram policy unmaps and remaps holes to stay within its
// slack, on the inference traces in the layers of the requests near the
// largest (policyGaps in replay_test.go has the numbers). Its driver calls
// die out on a repeating workload, since each remap that cannot be avoided
// raises the high-water mark: replaying the last two ResNet-50 training
// steps again and again, the calls stop (TestVRAMSteadyState).
// TestPolicies checks these bounds on every trace in testdata.
//
// Choosing: on training traces policy:vram reserves the least and spends
// the least driver time of the two virtual-memory settings (1.0 to 2.2
// times policy:pytorch's, where expandable segments spend 1.7 to 3.4
// times it, mapping 20 MiB at a time). On an inference server whose
// requests change shape, where the driver calls add to a request's
// latency, policy:pytorch,expandable_segments:True spends 0.9 to 1.5
// times policy:pytorch's driver time and reserves 1.03 to 1.36 times the
// peak; policy:vram reserves less and spends 1.6 to 8.8 times it. Giving
// policy:vram more slack does not buy a better trade: with a sixth of the
// peak rather than 1/24 (swept from 1/24 to 1/4 on every trace on
// 2026-12-06) it meets the driver bound on 17 traces rather than 8 but no
// fragmentation bound, and on bert_infer_varlen it reaches 1.96 times
// policy:pytorch's driver time only at 1.150 reserved, where expandable
// segments spend 1.33 times it at 1.154. So the policy has no slack
// setting; expandable segments are that trade.
//
// # Implementing
//
// A device provides an [Arena]: Alloc and Free of physical memory
// (cuMemAlloc, cuMemFree) and its Capacity. Alloc must wrap [ErrArenaFull]
// when memory runs out; the allocator then frees its cache and retries.
// Optional abilities, found by type assertion:
//   - [VirtualArena] (CUDA virtual memory): Granularity, Reserve and
//     Unreserve of address ranges, Map of a range with one new physical
//     allocation (one cuMemCreate, cuMemMap and cuMemSetAccess each) and
//     Unmap of exactly one earlier mapping (cuMemUnmap, cuMemRelease).
//     Without it, expandable_segments:True is a [*ConfigError] and
//     policy:vram uses fixed segments.
//   - [DeviceInfo]: the device's memory as a [DeviceMemory] (total, free,
//     this process's share, other processes), for the OOM message only (or
//     pass one with [WithDeviceInfo]), and through it [PeerInfo] (the
//     machine's other devices and their free memory). Without it the
//     message leaves them out.
//   - [DriverTimer]: the arena prices its own calls (SimArena's cost
//     model); without it the allocator times each call.
//
// Streams are plain numbers ([Stream]). Cross-stream frees need an
// [EventSource] ([WithEvents]): a block used on other streams
// ([Allocator.RecordStream]) returns to its pool only when events recorded
// on those streams at Free have completed. Without a source every event
// counts as complete at once. An [EventWaiter] lets the out-of-memory path
// wait for outstanding events before releasing the cache.
//
// A private pool ([Allocator.NewPrivatePool]) is a stream number no real
// stream has: a device serves a graph capture's requests from one, whose
// memory the allocator keeps, even free, until [Allocator.ReleasePool],
// and [Allocator.HoldReleases] stops every release while a capture runs
// (private.go says why).
//
// # Out of memory
//
// When a request does not fit, the allocator releases the cache that would
// make room, then all of it, then calls the OnOOM hook without its lock
// and retries once; only then does Alloc return an [*OutOfMemoryError].
// The error checks its suggested fix by replaying what the program did
// through fresh allocators on a [SimArena] of the memory this process can
// use: every allocator keeps its last 16,384 allocations and frees (a few
// nanoseconds each), and the replay allocates the blocks that were live
// before them, in address order, then repeats them, then the failed
// request. Replaying the program, not only its live blocks, reproduces the
// fragmentation each setting would have caused. It tries, in this order,
// the settings the device supports within the memory this process may use
// now (expandable segments, policy:vram, max_split_size_mb values, plain
// rounding in place of roundup_power2_divisions), then waiting for blocks
// still in use on other streams, then a larger per_process_memory_fraction
// (alone or with one of those settings, up to what the device has free),
// and suggests the first that fits. Only when none does it say "no setting
// makes it fit", with how much memory the most compact setting lacks, who
// holds memory on the device, the largest request that fits now, and the
// machine's other devices that have room ([PeerInfo]). The failure leaves
// every block and statistic exact.
//
// The check is bounded: one stops after a second of replays (thousands of
// streams, each caching memory the others cannot use, make every replayed
// allocation slow), and an allocator checks an error only while its checks
// so far took at most a tenth of its running time, so that a program that
// runs out of memory in a loop (a search for the largest batch, a server
// catching the error per request) is not slowed down by them. The first
// error is always checked; one not checked has CheckedBy "" and a Fix that
// says why.
//
// # Concurrency
//
// An Allocator is safe for concurrent use: one mutex guards it, every
// exported method takes it and none calls another. It is dropped only in
// Alloc, while the OnOOM hook runs and while an OutOfMemoryError checks
// its fix. Arena, EventSource and DeviceInfo methods are called with the
// lock held and must not call back into the allocator. [SimArena] is safe
// for concurrent use.
//
// # Memory ownership
//
// A [Block] belongs to whoever Alloc returned it to, until that caller
// passes it to Free; using it afterwards is a bug, and freeing it twice
// panics. The allocator's memory goes back to the device only through
// EmptyCache, the out-of-memory path, garbage_collection_threshold and, in
// policy:vram, the unmapping of cached pages. Go's garbage collector sees
// none of it: the root package releases blocks explicitly.
//
// # Errors
//
// Alloc returns errors: [*OutOfMemoryError], [*ConfigError], an error
// wrapping [ErrTooLarge] for a request above [MaxAllocSize] (a size no device
// has, so rounding and sums of sizes never overflow), or an arena failure
// wrapped. Misuse (freeing a block twice or one from another
// allocator) panics. Internal inconsistencies panic with a message
// starting "vram: internal:".
package memory
