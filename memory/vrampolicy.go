package memory

// policy:vram, vram's default placement policy.
//
// PyTorch's expandable segments remove the fragmentation that fixed segments
// cause, but the holes between live blocks in the growing range stay
// mapped: on workloads whose shapes change from step to step (variable
// sequence lengths, batch sizes, a KV cache grown by concatenation) they
// still reserve 7 to 23% more than the program ever asked for. Unmapping the
// pages of every hole at once and mapping them again where a request needs
// them reaches about 1.00x, but costs several driver calls per allocation.
// policy:vram does it lazily:
//
//  1. Best fit among free mapped blocks, as PyTorch does with expandable
//     segments: the cached path makes no driver call, and a free block
//     that unmapped space follows counts as big as it could grow, so that
//     small requests leave it to large ones. A request expected to live
//     long is placed apart, next to what outlives it. The allocator
//     remembers, per role of a request of the large pool (its rounded
//     size and those of the three requests before it: a tensor's place
//     in a repeating layer), how many allocations the last block of that
//     role lived. A request whose role lived at least 8 and that holds at
//     least a 32nd of the peak of the allocated bytes takes, of the 16
//     smallest free blocks that fit, the first with a neighbour expected
//     to outlive it (the segment's start or end, unmapped space, or an
//     allocated block whose role lives longer or is not known yet), from
//     that side, the low one first; best fit when none has one. By best
//     fit a transformer layer's output, which lives into the next layer,
//     lands in a hole between the layer's input and a short-lived tensor:
//     once the input dies the working set has moved up a hidden state,
//     and as the slack of step 3 is less than one, every layer of a large
//     request unmaps a hole below and maps as much above. Placed next to
//     what outlives it, the output alternates between the two ends of the
//     free space and the layers' memory stays where it is. At a request
//     boundary, once the allocated bytes have come back to within half
//     of the way from their low since the first free to their peak after
//     being above it (a server's request has given its working set
//     back), the next request of the large pool of at least a 16th of
//     that peak that is not placed apart takes the lowest-addressed free
//     block that fits rather than the best fit: the new request's
//     working set starts at the low end of the mapped memory, where the
//     one before started, rather than in the holes where it ended.
//  2. When nothing fits, place the request in a run of free and unmapped
//     blocks of a virtual segment (one per stream and pool kind, as large
//     as twice the device: address space is cheap), choosing the window
//     that needs the least memory mapped, then one that leaves one hole
//     rather than two, then the lowest address, whatever the size of its
//     run: the working set then stays away from the segment's unmapped
//     end rather than drifting towards it. A segment's unmapped tail is
//     one such run, so growing the segment is just the fallback.
//  3. Before mapping, check the budget: the reserve may grow to its
//     high-water mark (what the workload has already needed) or to the
//     peak of the allocated bytes plus 1/24 of it (vramSlackDiv),
//     whichever is larger. Above it, first unmap whole chunks inside free
//     blocks, lowest address first, until the new mapping fits the
//     budget: a segment's working set drifts towards its unmapped end,
//     and the holes it leaves behind are the ones it needs least. Of a
//     free block, unmap its lowest chunks until they hold 32 times what
//     is still over the budget (vramReclaimFactor), not always all of
//     them: a small request just over the budget (the small pool's 2 MiB,
//     a few MiB of a large one) would otherwise unmap a free range of
//     hundreds of MiB that the next requests map again, chunk by chunk.
//     For a request of at least a 32nd of that peak, a free block of the
//     large pool that became free within the last 4 allocations
//     (vramRecentFree) gives up only the chunks that hold what is over:
//     in a layer of a large request that is the hole of a hidden state
//     just given back, which the layer's next tensors take again.
//  4. Map the missing granules, in chunks: up to 52 MiB as one chunk,
//     larger ranges as power-of-two chunks aligned to their size and at
//     most a sixth of the range (16 MiB to 1 GiB), so that the hole a
//     freed block leaves behind contains whole chunks that step 3 can
//     unmap, while mapping a large tensor takes a few calls. Once a
//     sixteenth of the peak of the allocated bytes is more than 52 MiB
//     (vramPeakChunkDiv), a range is cut instead into chunks of that
//     sixteenth, at most 128 MiB (vramPeakChunkMax), from its start, the
//     last one holding the rest: a larger workload maps its tensors in
//     fewer calls, while a chunk that stays mapped because part of it
//     was reused holds at most a sixteenth of the peak.
//  5. A request of at most 4 MiB that maps memory at a segment's
//     unmapped end maps ahead of it, in the same call, so that the
//     mapping holds 20 MiB in all, as PyTorch's 20 MiB segments for small
//     requests do, as far as the reserve stays within 1/24 above the peak
//     (never past the budget of step 3). What is mapped ahead is a chunk
//     of its own, so step 3 can unmap it while it is free. A run of small
//     tensors (a model's weights as it loads, a decoder's per-token
//     tensors) then takes one mapping per few tensors rather than one per
//     tensor. Until the allocator's first free (a model's weights
//     loading, before any activation is given back), a request of 3 to
//     4 MiB (vramLoadAheadMin to vramAheadMax) maps its 20 MiB whatever
//     the slack: the peak grows with every tensor loaded, so what is
//     mapped ahead is the next tensors' memory, and the slack of a small
//     peak would otherwise allow a few MiB ahead or none. Should the
//     device or the memory limit refuse the memory ahead, the request is
//     placed again without it.
//  6. A larger request that raises the peak of the allocated bytes and
//     maps memory at a segment's unmapped end maps ahead of it, in the
//     same call, all the room that the slack of step 3 leaves (the
//     reserve up to that peak plus 1/24 of it), if that is at least 64
//     MiB (vramClimbAheadMin), as chunks of their own that step 3 can
//     unmap while they are free. While a training step's forward pass
//     keeps its activations, the allocated bytes climb with every layer
//     and each layer would otherwise grow the segment by a mapping or
//     more; the next layers' tensors land in what was mapped ahead. Less
//     than 64 MiB ahead would not save a mapping per tensor on a smaller
//     workload, and its chunks would come back as holes to unmap (the
//     sweep below measured 32 to 96 MiB). A refusal of the memory ahead
//     is handled as in step 5.
//
// On a repeating workload (a training loop) the driver calls die out: a
// remap that cannot be avoided raises the high-water mark, so the next
// iteration finds room under the budget; with shapes that keep changing,
// memory is moved only when the reserve would otherwise pass 1/24 above
// the largest allocation the workload has made. Measuring the slack from
// the peak rather than from what is allocated now keeps an inference
// server, whose requests come and go, from moving memory on every request
// smaller than the largest. The measured
// effect on real and synthetic traces is in the package documentation,
// "# Policies". On an arena without virtual memory the allocator falls back
// to PyTorch's fixed segments; expandable_segments is then unavailable too.

import (
	"math"
	"math/bits"
	"sort"
)

// Tuning of policy:vram, chosen by replaying every trace in testdata (five
// recorded from PyTorch 2.11 on an H200, seven synthetic) on 2026-12-01:
// the sweep kept the settings that met the bounds of TestPolicies on the
// most traces, with the lowest worst-case driver time. The outcome is
// sensitive to the slack: 1/22 breaks resnet50_infer_varbatch (1.077x) and
// 1/26 gpt2_generate_varbatch (1.098x), where a tighter budget leaves holes
// without a whole chunk to unmap.
//
// Swept again for the cost model corrected from run 3 (cuMemAlloc
// 45 to 126 µs, one cuMemSetAccess per run of chunks), on all 14 traces
// (the recorded bert_infer_varlen added): single chunks of 32 to 1024
// MiB, smallest chunks of 8 to 128 MiB, a largest chunk of a sixth, a third
// or a twelfth of the range, slack of 1/23 to 1/25. Only the settings below
// (and a slack of 1/23, no better) keep every trace within the
// fragmentation bounds: larger chunks leave holes with no whole chunk to
// unmap (1 to 6 traces above 1.05x or PyTorch's best), smaller ones cost
// more calls. No setting meets the driver-time bound on more than 4
// traces, these on 3 (replay_test.go's policyGaps has the numbers).
//
// Swept again on 2026-12-01, each change measured on all 14 traces
// against the settings above (3 within the driver bound, worst 13.3x), the
// chunk sizes and the setting kept also on two_models, recorded from
// PyTorch later that day (at 1.065x and 6.9x before, outside both bounds
// with every setting tried on it):
//
//   - Mapping ahead (step 5): for requests of at most 2, 3, 4, 5, 6, 8 or
//     10 MiB or any size, to 8, 12, 16, 20, 24 or 32 MiB in all, within
//     1/24 or 1/48 above the peak, as part of the window's chunk or as a
//     chunk of its own. Part of the window's chunk, the ahead bytes stay
//     pinned by the tensors placed in them and two or three traces pass
//     1.05x; as a chunk of its own, requests of 2 to 4 MiB mapping 12 to
//     24 MiB keep every trace's fragmentation and meet the driver bound on
//     5 or 6 (4 MiB and 20 MiB: 6, kept), larger requests or 32 MiB break
//     a fragmentation bound again. Only while the allocated bytes are at
//     their peak: fewer traces met.
//
//   - Unmapping in step 3 by highest address, by oldest free block, by
//     largest or smallest free block first: none meets more traces, and
//     the highest address and smallest block break 1.05x on
//     resnet50_infer_varbatch or bert_infer_varlen. Unmapping only as many
//     chunks of a block as the budget needs: three traces pass 1.05x.
//
//   - Best fit without the preference for blocks that cannot grow, the
//     lowest- or the highest-addressed free block that fits: worse on
//     most traces.
//
//   - One virtual segment per power-of-two size class of large requests
//     (from 4, 16 or 64 MiB, one or two classes per segment): worse on
//     every inference trace (up to 22x), fragmentation broken on two.
//     Requests of at least 32 to 128 MiB in segments of their own, best
//     fit kept apart too (15 traces): worse still (up to 270x, 3 to 8
//     fragmentation bounds broken), as neither side can use the other's
//     free memory without moving it.
//
//   - Unmapping every free chunk when over budget and mapping all the room
//     at the segment's end (compaction): up to 270x.
//
//   - Single chunks of 20 to 64 MiB and a largest chunk of a quarter to an
//     eighth of a range, with and without step 5: single chunks of 32 or
//     40 MiB with a sixth keep every trace within the fragmentation
//     bounds, two_models included, but meet the driver bound on 1 or 2
//     traces (worst 14 to 23x); the others break one to three
//     fragmentation bounds, two_models' among them.
//
//   - Reusing unmapped physical handles (cuMemUnmap without cuMemRelease,
//     then cuMemMap of the kept handle) would save 33 µs per chunk moved
//     within one placement; counted on the replays, with any pairing of
//     handles to chunks it would bring one more trace (synth_gpt_serve
//     _kvcache) under the bound and bert_infer_varlen to 11x, with exact
//     sizes only to 12.9x: not worth a new arena interface yet.
//
//   - Carving an allocation from the high end of the free block it splits
//     (always; when unmapped space or the segment's end follows the block;
//     when an allocated block follows and none precedes it; each also
//     only for requests of at least 8 or 32 MiB, or below half the
//     block), measured on all 16 traces: all bounds met on 1 to 5 traces,
//     fragmentation broken on 2 to 12, worst 21 to 43x.
//
// Measured on all 16 traces on 2026-12-01 against the settings above (6
// within every bound, 15 within the fragmentation bounds, worst 13.9x),
// the placements first:
//
//   - Two-ended placement: requests of at least 1/8 of the peak (or of
//     32 MiB) from the high end of the highest-addressed free block that
//     fits, the rest by best fit as before or from the lowest-addressed
//     block: all bounds met on 3, 2 and 1 traces, fragmentation broken
//     on 7, 7 and 5 (bert_infer_varlen 1.133, 1.093, 1.060x), worst
//     17.5, 18.6 and 17.9x.
//
//   - Exact-size reuse: a request placed where the last freed block of
//     its size lay, when that memory is free: 2 traces, fragmentation
//     broken on 9, bert_infer_varlen 37x (609 maps, 536 unmaps). Keyed
//     by the size and the two sizes requested before it (a tensor's
//     role in a repeating layer), with the last 2 or 4 addresses: 3 and
//     4 traces, bert_infer_varlen 1.083x and 24x.
//
//   - Rounding requests up to size classes, so that a request one size
//     off its layer's hole finds the hole's class (the policy with
//     roundup_power2_divisions of 16, 32 or 64 steps a power of two,
//     from 8 or 64 MiB; measured on all 16 traces on 2026-12-05): no
//     trace brought under the driver bound (the best, from 8 MiB in 32
//     steps: resnet50_infer_varbatch 7.9 to 4.5x, synth_two_models 5.3
//     to 3.7x), fragmentation broken on 3 to 6 more (bert_infer_varlen
//     1.066 to 1.097x): the rounding takes the slack that step 3 needs.
//
// Then the cost of loading: the weights (before the first free) took one
// mapping per tensor, 2.0 ms of bert_infer_varlen's 15.2 ms, since the
// slack of a small peak leaves little or no room ahead. Mapping ahead
// whatever the slack, for every request of up to 4 MiB: 4 traces,
// fragmentation broken on 8; only for requests that raise the peak: 6
// (gpt2_generate_varbatch in, synth_gpt_serve_kvcache out at 2.38x,
// resnet50_infer_varbatch 1.094x, synth_two_models 1.063x); for requests
// of up to 10 MiB: worse. Only before the first free, and only in the
// large pool: requests of 1 or 2 to 4 MiB break both ResNet-50
// inference traces (1.084, 1.082x); of 2.5 or 3 to 4 MiB, 7 traces,
// every bound met before still met and every trace's driver time lower
// or the same (kept, step 5); up to 4.5 MiB, gpt_generate_kvcache
// 1.056x; from 3.5 MiB, gpt2_generate_varbatch stays at 2.20x; 16 or 32
// MiB ahead instead of 20: 6 or 5 traces. bert_infer_varlen's loading
// then costs 1.2 ms, its budget 2.2 ms for the whole trace.
//
// Then what step 3 unmaps: of the lowest free block it took every chunk,
// so that on gpt_generate_kvcache a 2 MiB segment of the small pool,
// just over the budget, unmapped 442 MiB in 34 chunks (1.4 ms) that the
// next requests mapped again. Unmapping of each free block only its
// lowest chunks for as many bytes as are over: 7 traces
// (gpt_generate_kvcache in at 1.67x, gpt2_generate_varbatch out at 2.04x),
// fragmentation broken on resnet50_infer_varbatch (1.090x) and
// synth_resnet50_infer_varbatch (1.060x); its highest chunks instead:
// 7, bert_infer_varlen at 1.063x. For 4 to 16 times what is over: 8,
// resnet50_infer_varbatch at 1.074x (4 times); 24 to 48 times: 8, every
// bound met before still met (32 kept, vramReclaimFactor); 64 times: 7.
// At least 64 MiB rather than a multiple: 8, one fragmentation bound
// broken; 128 or 256 MiB: 7. Applied also to the block holding the
// window: no change.
//
// Then the side of a free block an allocation is carved from, by the age of
// the neighbours rather than by geometry: next to the older neighbour (a
// segment's start and its unmapped end counting as oldest), so that the
// free space stays beside the blocks that die first. On a model of
// bert_infer_varlen's layer (in units of its 44 MiB hidden state: a 3 QKV,
// two 1 for attention, a 1 output, a 4 intermediate, a 1 layer output that
// lives into the next layer) this keeps every layer in 7 units, the least
// possible, with the layer output alternating between the two ends, where
// carving from the low end drifts one unit a layer until a layer no longer
// fits, after three; on a model of synth_bert_infer_varlen's layer both
// keep to the least. Replayed, for every request or for those of at least
// 16 or 64 MiB: bert_infer_varlen at 4.0, 3.5 and 16x (1.020x reserved at
// 16 MiB), two_models within 1.05x (1.034), but synth_bert_infer_varlen at
// 28 to 31x and synth_bert_infer_varlen_long at 44 to 47x, fragmentation
// broken on 5 to 8 traces: all bounds met on 0 to 4. There a request larger
// than the one before finds the mapped memory in islands between unmapped
// holes that step 3 left, each too small for a 256 MiB attention matrix,
// and each layer maps one again. Counting unmapped space as youngest,
// counting only allocated neighbours, the rule only for requests that do
// not raise the peak or, beside unmapped space, only in blocks 2 to 8 times
// the request, and reclaiming by highest address, largest or smallest
// block, latest freed, or chunks next to unmapped space first: 0 to 8
// traces, none with bert_infer_varlen under 12x and synth_bert_infer_varlen
// under 13x together. Next to the younger neighbour: 6 traces,
// bert_infer_varlen at 38x.
//
// Step 3 reclaiming only free blocks next to unmapped space (never opening
// a new hole in the mapped memory), with either carving side: the driver
// bound met on 8 to 12 traces (bert_infer_varlen 2.1x with the age side),
// but up to 1.29x reserved, the fragmentation bound met on 1 to 8: the
// holes inside the working set are what the driver calls buy back.
//
// Then the chunks of step 4 for requests that raise the peak (optimizer
// states, a larger batch's activations): of up to 96 or 128 MiB rather than
// sixths, 9 traces (synth_transformer_train_varlen in at 2.00x;
// synth_bert_infer_varlen_long at 2.82x and synth_two_models at 2.84x, from
// 11.4 and 5.75x), but resnet50_infer_varbatch at 1.120x,
// synth_resnet50_infer_varbatch at 1.165x and synth_bert_infer_varlen_long
// at 1.054x reserved: the memory such a chunk leaves when its tensor dies
// is reused in part, and the whole chunk stays mapped. Up to 64 MiB: 8
// traces, two more fragmentation bounds broken; 192 MiB or 1 GiB: 8 and 6;
// a half, a third or a quarter of the request: 4 or 5. Before the first
// free only: 8, both ResNet-50 inference traces broken (1.064, 1.066x).
//
// Then the size of step 4's chunks bound to the peak rather than to the
// request, on all 16 traces against the settings above (8 within every
// bound, 15 within the fragmentation bounds, worst 13.2x): the single
// chunks of up to 128 MiB for requests that raise the peak (9 traces,
// three fragmentation bounds broken, as above) break a bound only where
// the chunk is large beside the peak. Single chunks of up to 128 MiB only
// for peak-raising requests of at most a fourth, sixth, seventh, eighth,
// twelfth or sixteenth of the peak: 8 traces each,
// synth_transformer_train_varlen at 2.13, 2.20, 2.05, 2.07, 2.14 and
// 2.28x (resnet50_infer_varbatch at 1.156x with a fourth); only before the
// first unmap, or while the allocated bytes are at their peak: 8,
// resnet50_infer_varbatch at 1.077 and 1.064x. Chunks of a sixteenth of
// the peak, at most 128 MiB, cut from the start of each range
// (vramPeakChunkDiv, vramPeakChunkMax, kept in step 4): for mappings of
// peak-raising requests, 9 traces (synth_transformer_train_varlen in at
// 1.97x); for every mapping, 9 traces with every bound met before still
// met and every trace's driver time lower or the same
// (synth_transformer_train_varlen 2.63 to 1.84x,
// synth_bert_infer_varlen_long 11.4 to 6.46x, synth_two_models 5.75 to
// 5.26x, resnet50_train 1.65 to 1.17x, bert_train_varlen 1.93 to 1.69x).
// For every mapping, a twelfth, twentieth, 24th or 32nd of the peak: 9
// traces each (1.90, 1.80, 1.85, 1.97x; two_models 1.077x reserved with
// a twelfth); an eighth: 9, but fragmentation broken on bert_infer_varlen
// (1.056x), resnet50_infer_varbatch (1.107x) and
// synth_bert_infer_varlen_long (1.054x); at most 96 or 160 MiB: 9 (1.92,
// 1.85x); 192 MiB, 256 MiB or 1 GiB: 7, 8 and 7, bert_train_varlen or
// synth_transformer_train_varlen above 1.05x. The range cut into equal
// chunks of at most that size instead (no small last chunk): 7 or 8
// traces; power-of-two chunks aligned to their size, as below 52 MiB, with
// that size as the smallest largest chunk: 8 or 9 (2.11x at a sixteenth,
// 1.99x at a twelfth with two_models at 1.118x). With these chunks, a
// slack of 1/23 or 1/25: 8 traces (gpt2_generate_varbatch out at 2.06x,
// or synth_bert_infer_varlen out at 2.65x); vramReclaimFactor 16, 48 or
// 64: 9, 9 and 8 traces, 16 breaking two more fragmentation bounds
// (resnet50_infer_varbatch 1.068x, synth_bert_infer_varlen_long 1.054x),
// 48 no better; carving next to the older neighbour again: 3 traces (5
// for requests of at least 16 MiB), fragmentation broken on 9 (8). Also
// with these chunks: vramSingleChunk at 32, 40, 64 or 80 MiB, or a largest
// chunk of a fourth, eighth or twelfth of the range below the peak's
// threshold: 9 traces each, no more (fragmentation broken on one more
// with 32, 64 or 80 MiB, on two with a fourth). What step 5 maps ahead cut
// into chunks of 2 or 4 MiB (so that its unused end can be unmapped): 5
// and 6 traces; with mapping ahead while loading from 1 MiB on: 2 and 7.
// A larger slack (1/20 to 1/23 of the peak) for a request whose size, to
// the MiB, had already needed mapping 1, 2, 3, 4 or 6 times (a hysteresis
// per size): 7 to 9 traces, never more (synth_two_models at 2.73x with 2
// and 1/22, but gpt2_generate_varbatch out at 2.15x).
//
// Also measured then, with the earlier chunks: step 3 unmapping first the
// free blocks of the smallest mapped island (the mapped blocks between
// two unmapped ones), by all its bytes or by its free bytes: 8 traces,
// resnet50_infer_varbatch at 1.068x, bert_infer_varlen at 19.9 and 15.1x;
// with the older-neighbour carving: 0, synth_bert_infer_varlen at 13.7x
// and synth_bert_infer_varlen_long at 42 to 49x. Best fit counting a free
// block as big as it could grow also when unmapped space precedes it: 7
// traces, bert_infer_varlen at 1.097x; with the older-neighbour carving,
// one. That carving also for the block step 2 maps (the window's start
// next to the older neighbour too): one trace, 13 fragmentation bounds
// broken.
//
// Then, late on 2026-12-01, for the cost model that charges cuMemSetAccess
// 250 ns a MiB beyond 120 MiB (synth_transformer_train_varlen back at
// 2.19x, 13.7 ms against 6.2; traced, 7.1 ms of it in 133 mappings while
// the weights load and the first forward pass grows the segment a layer at
// a time, 2 to 120 MiB each, and 6.6 ms in 18 mappings of 162 to 1484 MiB
// and 60 unmaps when longer sequences come), against the settings above (8
// traces within every bound). Splitting a run of chunks into runs of at
// most 120 MiB cannot help: their calls cost what the per-MiB charge does.
// A largest peak chunk of 96 MiB: 2.28x; of 192 or 256 MiB: 2.30 and 2.08x,
// fragmentation broken there (1.063, 1.064x) and on bert_train_varlen at
// 192 (1.0503x). Mapping ahead for requests of more than 4 MiB while
// loading, up to 20 MiB in all, up to 1 or 2 times the request or a 32nd of
// the peak: the fragmentation of gpt_generate_kvcache (1.0558 to 1.0585x),
// resnet50_infer_varbatch (1.0676 to 1.0871x) or
// synth_bert_infer_varlen_long (1.0514x) broken, the transformer at 2.03 to
// 2.23x. Mapping ahead for any request of more than 4 MiB that raises the
// peak a 16th to a 128th of it, within 1/24, 1/32, 1/40, 1/48 or 1/64 above
// the peak: the training traces up to 43% cheaper, the transformer at 1.80
// to 2.33x, but the generation traces pay for chunks of a few MiB mapped
// ahead and unmapped again one by one (gpt2_generate_varbatch 2.21 to
// 2.60x, synth_gpt_generate_varbatch 1.0385 to 1.0408x against PyTorch's
// 1.0362), with fragmentation broken on one to four traces. Only when what
// the slack leaves is at least a minimum (step 6), all of it: 32 MiB breaks
// synth_gpt_generate_varbatch (1.0408x, 2.08x); 40, 48, 52, 56, 60, 64 and
// 72 MiB bring the transformer to 1.92, 1.98, 1.97, 1.95, 1.95, 1.95 and
// 1.99x and keep every other bound (64 kept, vramClimbAheadMin: at 52,
// bert_train_varlen reserves 1.0483x, 1.0416x from 56 to 72); 80 and 96
// MiB, 2.02 and 2.05x. A 24th of the peak or more ahead is what the slack
// leaves; a 32nd with a 32 MiB minimum: 1.84x, but 2.16x with 52 MiB, so
// not kept. Also for requests that do not raise the peak: resnet50_train
// 1.0413x, past its 1.02 bound. Within 1/32 or 1/48 of the peak instead of
// the slack: the transformer at 2.03 and 2.20x. With 64 MiB: 9 traces
// within every bound; driver time lower on the four training traces, the
// others unchanged to the microsecond (resnet50_train 6.6 to 4.4 ms,
// bert_train_varlen 15.3 to 12.7, gpt2_train_varlen 14.1 to 11.5,
// synth_transformer_train_varlen 13.7 to 12.2); reserve higher on
// bert_train_varlen (1.025 to 1.042x) and gpt2_train_varlen (1.011 to
// 1.024x).
//
// Then, on all 16 traces against the settings above (9 within every bound),
// what step 2 prefers among windows that need as much mapped: it took the
// smaller run, then the lower address. The lower address whatever the run
// (kept, step 2): bert_infer_varlen and its cap copy 13.2 to 11.7x (14.5
// to 12.8 ms, 218 to 189 maps, 169 to 143 unmaps, 1.0496 to 1.0395x
// reserved), every other trace unchanged to the microsecond; without the
// preference for one hole rather than two, the same. The higher address
// (with or without it): 1 trace, 14 fragmentation bounds broken (up to
// 1.106x); the larger run: 8, two_models at 1.146x. Needs within 8 or 20
// MiB counted as equal, then the lower address: 8 traces each,
// resnet50_infer_varbatch at 1.051 and 1.068x, bert_infer_varlen at 15.5
// and 9.3x (1.103x reserved at 20 MiB). Windows of a run other than the
// segment's unmapped end preferred when they need at most 8 MiB more: 8,
// bert_infer_varlen at 1.066x. Then, for step 3, free blocks freed within
// the last 1, 4, 16, 32, 64 or 256 allocations unmapped after every older
// one (deferring the unmap of what the layer just gave back): 9, 7, 7, 7,
// 7 and 8 traces; from 4 to 64 allocations the inference traces' driver
// time falls (resnet50_infer_varbatch to 6.4x, synth_resnet50_infer
// _varbatch to 3.4x, synth_bert_infer_varlen_long to 6.1x,
// synth_two_models to 4.8x at 16) but gpt2_generate_varbatch passes the
// driver bound (2.02x) and synth_transformer_train_varlen too (2.04 to
// 2.15x); at 256, synth_transformer_train_varlen reserves 1.0456x with
// nothing gained; bert_infer_varlen unchanged with each.
// With the lower address kept: step 1 carving an allocation from the high
// end of a free block that unmapped space precedes and none follows (so
// that the rest stays beside the hole), for every request, for those of
// at least 16 MiB, or in blocks of at least twice the request: 9, 9 and
// 8 traces, bert_infer_varlen at 36, 36 and 34x (1.053x reserved),
// resnet50_infer_varbatch at 1.081x or (twice the request) 1.028x and
// 4.0x, two_models at 9.9 to 10.5x. Step 3 unmapping first the free
// blocks next to unmapped space (widening a hole rather than opening
// one), or last: 8 traces each, synth_transformer_train_varlen at 2.15
// and 2.11x, bert_infer_varlen at 11.8 and 11.7x,
// synth_resnet50_infer_varbatch at 3.0x with the first.
//
// Traced on bert_infer_varlen, a layer at a request's longest sequence
// holds, in units of its 40.5 MiB hidden state, the layer's two inputs
// (1 each), scores (4), the attention output (1), then the layer output
// (1, living into the next layer), the intermediate (3) and two more of 1,
// at most 8 units with the 1 that lives through the request; the slack is
// a 24th of the peak, 0.6 units. The scores then find four free units
// together only if the layer before placed its two outputs so that they
// leave them, which best fit, placing each tensor when it comes, does not
// look ahead to: each layer maps the scores' missing unit (and unmaps one
// elsewhere), then its output's.
//
// Then placements that use the repetition of a model's layers, on all 16
// traces against the settings above (9 within every bound), remembering
// per request its rounded size and the size requested before it (a
// tensor's role in a layer), or its size alone. A remembered window, where
// that request was placed last time (its address, or its offset from the
// block freed last), tried as one more window of step 2 and preferred over
// those that need as much mapped: every trace unchanged to the microsecond
// by address, either key; by offset, bert_infer_varlen at 1.0898x reserved
// and 12.7x, two_models 5.1x, bert_train_varlen 1.96x. Preferred over
// those that need up to 64 MiB less: by address, bert_infer_varlen 1.0462x
// and 12.1x, two_models 1.1008x (size alone: unchanged); by offset, 7
// traces, bert_infer_varlen 35x, synth_gpt_serve_kvcache 1.0661x. The
// remembered window taken in step 1, before best fit, when it is free and
// mapped: by address with the size before, 8 traces
// (resnet50_infer_varbatch 7.9 to 6.0x, synth_two_models 5.28 to 4.61x,
// but bert_infer_varlen 15.0x and gpt2_generate_varbatch out at 1.0684x);
// only for requests of at least 16 MiB, 7 (synth_transformer_train_varlen
// 2.10x); by size alone, 4, five or six fragmentation bounds broken; by
// offset, 0 and (from 16 MiB) 4, bert_infer_varlen 48x. Looking ahead in
// step 1, remembering which requests followed the same two last time:
// when the largest of the next 1 to 8 is larger than this one, and best
// fit's block is the only free block that holds it and would not after the
// carve, the request goes to the smallest other free block that holds it.
// With 1 or 2 requests ahead every trace unchanged; with 3 to 8,
// bert_infer_varlen 11.65 to 9.02x (189 to 164 maps, 143 to 108 unmaps)
// but 1.0395 to 1.0965x reserved, two_models 4.88 to 4.74x (still
// 1.0865x), synth_bert_infer_varlen 1.55 to 1.96x from 4 ahead: 9 traces
// within every bound, as before; the same only for requests of at least 16
// or 64 MiB. The other block at most 1.1 or 1.5 times the request: the
// reserve kept, bert_infer_varlen at 12.7 and 12.5x; at most 2 or 4 times:
// as without a bound. A block that unmapped space follows counted as big
// as it could grow: no trace changed. Keyed by the size alone: 8 traces,
// synth_gpt_serve_kvcache 1.0568x. The largest other block instead of the
// smallest: the same. Never a block that unmapped space follows: no trace
// changed, so the other block was always the one at the edge of the
// mapped memory, which step 1 keeps for large requests; only while the
// reserve plus the expected request stays within the slack: no gain
// (bert_infer_varlen unchanged, synth_bert_infer_varlen 1.0403x).
//
// The traces still outside the driver bound move memory inside a request
// near the largest, in every layer, as policyGaps explains. Traced on
// bert_infer_varlen: a layer's output (40.5 MiB) lands in the hole its
// attention scores (162 MiB) just left, the next layer's intermediate
// (121.5 MiB) and scores then go above it, and the working set climbs
// 40.5 MiB a layer towards the segment's unmapped end, each step a remap
// under the budget. Meeting the bound needs a placement that finds a layout
// for such a request without moving memory per layer, not other constants.
//
// Then, late on 2026-12-01, loading again (on all 16 traces, 9 within every
// bound): mapping 20 MiB ahead while loading for requests of 3 MiB up to
// 4.5, 5, 6, 8 or 10 MiB rather than 4 (PyTorch takes a 20 MiB segment for
// requests under 10 MiB): 8 traces each, gpt_generate_kvcache at 1.0585x
// (its 4.5 MiB weights), though driver time falls on most
// (resnet50_infer_varbatch 7.9 to 5.6x, synth_resnet50_infer_varbatch 4.5
// to 3.3x, synth_bert_infer_varlen 1.55 to 1.11x); 16, 24 or 40 MiB in
// all: 8, 8 and 6. Unmapping at the first free what loading mapped ahead
// and left unused (so that no leftover stays): 8 traces with the 4 MiB
// limit, 7 with 10 MiB, synth_transformer_train_varlen at 1.0527x, whose
// first free comes early in the first forward pass. Step 1 taking the
// lowest-addressed free block that fits, step 3 unmapping the
// highest-addressed chunks first, or both (a stack's discipline): 8
// traces each, bert_infer_varlen at 19.2, 13.3 and 17.0x. The slack of
// step 3 raised to a 20th for requests that raise the peak, or the budget
// counting the request twice: 8 and 5 traces (synth_two_models 3.3 and
// 1.9x, but gpt2_generate_varbatch 2.12x, or nine fragmentation bounds
// broken).
//
// On 2026-12-05, every map and unmap replayed event by event, with a
// trace's requests cut where the allocated bytes come back to what the
// weights hold. On bert_infer_varlen (189 maps, 143 unmaps, in 19 of its
// 300 requests): loading 26 maps (1.29 ms); in requests that raised the
// running peak, 11 maps and 1 unmap at the events that raised it and 4
// and 9 at others before the request's largest allocation (1.2 ms in all)
// but 32 and 53 after it (3.9 ms); in requests within 5% of the running
// peak 40 and 53 (4.0 ms), within 10% 23 and 27 (2.1 ms); elsewhere 5
// maps. On two_models (216, 131, in 18 of 212 requests): loading 45
// maps (2.3 ms), 12 maps where the peak rose and 8 and 11 before the
// request's largest allocation (1.4 ms), 29 and 55 after it (3.7 ms),
// 25 and 52 within 5% of the peak (3.5 ms), 5 and 5 within 10%, 33 and 8
// elsewhere (1.8 ms). Per-layer churn in the layers of the largest
// requests, not the rise of the peak, dominates (as on
// synth_bert_infer_varlen_long, 8.6 of its 11.3 ms). The same memory
// comes back: of bert_infer_varlen's 143 unmapped chunks 78 were mapped
// again in the same request (132 in the run), the request's next
// allocation of at least 1 MiB landed in the hole just unmapped 64 times
// and a later one 118 times (two_models: 40 of 131, 27, 75). Traced, a
// layer's scores (4 hidden states) come just after a hidden state was
// freed; the only whole chunks outside the scores' window lie in that
// hole, freed 1 to 4 allocations before, which step 3 unmaps and the
// next hidden state maps again. On synth_bert_infer_varlen_long the
// working set drifts up a hidden state (58 MiB) a layer, the layer's
// output placed by best fit next to its input: one map and 1 to 5 unmaps
// a layer. Measured on all 16 traces against the settings above (9
// within every bound, 15 within the fragmentation bounds, worst 11.65x):
//
//   - Hysteresis in events: step 3 unmapping only free blocks freed at
//     least 16 or 256 allocations before, unless the reserve would pass
//     a 20th or 23rd of the peak: 7 or 8 traces, synth_two_models down to
//     2.47x (256, a 20th) and resnet50_infer_varbatch to 6.1x, but
//     gpt2_generate_varbatch's fragmentation (1.0501x) or
//     synth_transformer_train_varlen's driver time (2.04x) broken,
//     bert_infer_varlen 11.5x with each: its scores find no other chunk
//     to unmap.
//   - The lifetime-anchored placement of step 1 (kept): 9 traces within
//     every bound and 15 within the fragmentation bounds, as before, every
//     trace's driver time lower or the same: bert_infer_varlen 11.65 to
//     6.97x (1.0395 to 1.0328x reserved, 189 to 123 maps, 143 to 76
//     unmaps), resnet50_infer_varbatch 7.90 to 7.13x,
//     synth_bert_infer_varlen_long 6.50 to 2.27x (1.0468 to 1.0315x),
//     synth_two_models 5.28 to 3.16x (1.0462 to 1.0371x), two_models 4.88
//     to 3.32x (1.0865 to 1.0603x reserved, still above 1.05),
//     resnet50_train 1.0183x unchanged. The layers of one large request
//     then stop moving memory (TestVRAMResidualStream); the churn within
//     5 to 10% of the running peak falls from 10.0 to 4.1 ms on
//     bert_infer_varlen. Its constants were swept with it (below). The
//     high side first when both neighbours anchor: bert_infer_varlen
//     2.55x, two_models 2.08x, synth_two_models 3.12x, but
//     gpt2_generate_varbatch reserves 1.0537x (with roles of 2 sizes,
//     lifetimes of 4 to 8, a 24th or 48th of the peak, only for lifetimes
//     up to 24 to 100 allocations, in blocks of twice the request or for
//     requests that do not raise the peak: the same or a fragmentation
//     bound more broken). There the reserve peaks at 574 MiB rather than
//     566, past the budget of 567 MiB, where no free chunk outside the
//     window is whole. A role not seen yet predicted from its shape (the
//     sizes before it as ratios to its own, quantized to an 8th to a
//     128th of a power of two, and the shorter of that shape's last two
//     lifetimes or the last): bert_infer_varlen 2.86x and two_models 2.08x
//     (1.0579x), but synth_gpt_generate_varbatch reserves 1.0408x, more
//     than PyTorch's 1.0362, and passes the driver bound (2.14x);
//     synth_bert_infer_varlen_long unchanged. Anchoring only where
//     best fit's block has no neighbour that outlives the request, else
//     best fit: bert_infer_varlen 17.7x, two_models 4.78x. Unmapped
//     space not counted as an anchor: no trace better than before,
//     two_models 5.9x. Without the size bound, or from 16 MiB: 6 and 7
//     traces, resnet50_train at 1.0295 and 1.0280x (and
//     gpt2_generate_varbatch at 2.37x, synth_transformer_train_varlen at
//     2.02 to 2.04x). From 32 MiB rather than a 32nd of the peak (with
//     lifetimes of 6): 9 traces, bert_infer_varlen 9.28x,
//     synth_bert_infer_varlen_long 2.75x, synth_two_models 3.41x,
//     two_models 3.65x (1.0674x). Roles hashed so that any request after
//     one of its own size shared a role: resnet50_infer_varbatch 1.0676x,
//     gpt2_generate_varbatch 2.00x.
//
// Then, later on 2026-12-05, the loading again, on all 16 traces against
// the settings above (9 within every bound, 15 within the fragmentation
// bounds, worst 7.13x). Replayed event by event, the traces outside the
// driver bound spend before the first free, in allocations that raise the
// running peak, and elsewhere: bert_infer_varlen 1.29, 0.59 and 5.77 ms
// (loading in 26 mappings of 34 chunks), resnet50_infer_varbatch 0.99,
// 2.77 and 4.40, synth_bert_infer_varlen_long 1.13, 1.06 and 1.76,
// synth_resnet50_infer_varbatch 0.86, 0.84 and 2.35, synth_two_models
// 1.72, 1.54 and 2.16, two_models 2.33, 0.56 and 6.10. Every trace's peak
// requested is at least 1.72 times what is allocated at its first free,
// so what is mapped ahead of the weights is memory the first activations
// take. Mapping ahead geometrically before the first free (each mapping
// at a segment's unmapped end maps ahead a fraction of what the segment
// holds, as chunks of their own), so that the weights take a logarithmic
// number of mappings: a quarter in 20 MiB chunks takes bert_infer_varlen's
// loading to 0.60 ms, but 7 traces, bert_infer_varlen (1.073x),
// gpt_generate_kvcache (1.0585x) and synth_transformer_train_varlen
// (1.051x) past 1.05; a half, a third or an eighth: 9, 9 and 6 traces,
// three or four fragmentation bounds broken (bert_infer_varlen 1.060,
// 1.053, 1.093x). At most 40 MiB ahead, one chunk: 9 traces,
// synth_bert_infer_varlen_long in (2.27 to 1.89x), two_models within 1.05
// (1.0436x), driver time lower on every trace but resnet50_train (0.82 to
// 0.89x; bert_infer_varlen 5.76x, resnet50_infer_varbatch 4.69x,
// synth_two_models 2.48x), but gpt_generate_kvcache at 1.0585x: late in
// its run, as the KV cache grows, the 9 MiB free block past its weights
// lies inside the 40 MiB chunk, partly in use, and holds no whole chunk,
// so the reserve passes its budget three times (778 MiB against 766). At
// most 32 or 48 MiB, or a third or a sixth with 40: 8, 9, 9 and 9 traces,
// gpt_generate_kvcache at 1.0585x in each (bert_infer_varlen 1.083x at
// 32 and 48 MiB); only in the large pool, or only for requests of up to 5
// or 10 MiB: the same. The 40 MiB cut into chunks of 4, 6, 8, 10 or 20
// MiB: 7, 9, 8, 8 and 9 traces; with 6 MiB every fragmentation bound met
// (two_models 1.0436x), but driver time higher on gpt2_generate_varbatch
// (1.80 to 1.93x), resnet50_train (0.82 to 0.94x) and two_models (3.32 to
// 3.42x), and 6 MiB chunks with 32 or 48 MiB, a third or a sixth break one
// to three fragmentation bounds (two_models 1.096x at 48 MiB,
// bert_train_varlen 1.0515x with a third). Step 3 skipped before the first
// free (a 2 MiB request of the small pool unmapped the chunk just mapped
// ahead): gpt_generate_kvcache within, but resnet50_train 1.037x and
// synth_transformer_train_varlen 1.0527x, whose first forward pass frees
// nothing; skipped only for the small pool's requests: the transformer
// still at 1.0527x. Unmapping at the first free what loading mapped ahead
// and left free at the segment's end: gpt_generate_kvcache still 1.0585x,
// the transformer 1.0527x, two_models 1.058x. The bounds these break are
// decided by where chunk boundaries fall past the weights, thousands of
// events later, not by the memory ahead. The maps of the climb were left
// to step 6.
//
// Then, in the evening of 2026-12-05, what the rest is, replayed event by
// event with each map and unmap traced to its request (against the
// settings above: 9 traces within every bound, 15 within the
// fragmentation bounds, worst 7.13x). bert_infer_varlen's rest (5.77 ms)
// is in repeated layers: 5.11 ms in requests whose role had been seen,
// none of them predicted long-lived (the scores, 4 hidden states, live 1
// allocation; a hidden state 3), 0.66 ms in roles seen for the first
// time. Of its 28 unmapped ranges (1608 MiB) 21 held a block freed 1 to 4
// allocations before (12 the allocation before): a layer's scores, over
// the budget, unmap the hole of the hidden state just given back, and
// with 32 times what is over, more than the scores map (78 MiB unmapped
// for 44 mapped). Of its 72 chunks mapped (1586 MiB), 11 (258 MiB) fill a
// hole unmapped within the last 20 allocations, 10 of them by the very
// next request (the layer's next hidden state), 30 (820 MiB) a hole that
// an earlier request left, 31 (508 MiB) address space never mapped
// before. resnet50_infer_varbatch's rest (4.40 ms) is the other way
// round: 3.55 ms in roles not seen before (the first layers at a new
// batch size, 76 to 202 MiB), 0.85 ms in repeated ones; 47 of its 67
// chunks (586 MiB) are fresh address space, a range cut into 7 or 8
// power-of-two chunks of 2 to 16 MiB, 20 (276 MiB) holes of earlier
// requests; 8 of its 17 unmapped ranges (960 MiB) held a block freed 1 to
// 4 allocations before. Of a free block freed within the last 2, 3, 4,
// 6, 8 or 16 allocations, step 3 unmapping only the chunks for what is
// over, for every request: with 4, 9 traces, no driver time higher but
// gpt2_generate_varbatch's (3.6 to 3.9 ms), two_models at 1.106x
// reserved; with 2 or 3, bert_infer_varlen 7.6 to 7.8 ms; from 6,
// synth_resnet50_infer_varbatch past 1.05 (1.060x). For 2, 4 or 8 times
// what is over: synth_resnet50_infer_varbatch 1.060x,
// synth_transformer_train_varlen 2.06x, or little gained
// (resnet50_infer_varbatch 6.1x at 8).
// For blocks of the large pool and requests of at least a 32nd of the
// peak (kept, vramRecentFree; with 5 allocations, both ResNet-50
// inference traces past 1.05, with 3, bert_infer_varlen at 7.8 ms, twice
// what is over, synth_resnet50_infer_varbatch at 1.060x): 9
// traces within every bound and 15 within the fragmentation bounds, as
// before, every trace's driver time lower or the same:
// resnet50_infer_varbatch 7.13 to 5.30x (1.0447 to 1.0284x reserved, 157
// to 122 maps, 106 to 71 unmaps), bert_infer_varlen 6.97 to 6.60x (1.0328
// to 1.0395x), synth_resnet50_infer_varbatch 4.48 to 3.51x,
// synth_bert_infer_varlen_long 2.27 to 2.09x (1.0315 to 1.0345x),
// synth_two_models 3.16 to 3.04x, two_models 3.32 to 3.24x (1.0603 to
// 1.0531x), synth_transformer_train_varlen 1.95 to 1.85x (1.0415 to
// 1.0349x), gpt2_train_varlen 1.38 to 1.36x. Only one of the two
// conditions: two_models at 1.106x (the request's size alone) or
// gpt2_generate_varbatch at 3.8 ms (the pool alone); blocks of at least a
// 32nd of the peak instead of the request: two_models 1.058x,
// gpt2_generate_varbatch 3.9 ms. Roles anchored from a lifetime of 1, 2
// or 3 allocations rather than 8 (so that the scores or the hidden states
// take step 1 too): resnet50_infer_varbatch at 1.068x, synth_two_models
// 5.2 to 6.1x. Replayed again with it, before the first free, in
// allocations that raise the running peak, and elsewhere:
// bert_infer_varlen 1.29, 0.58 and 5.36 ms, resnet50_infer_varbatch 0.99,
// 2.34 and 2.74, two_models 2.32, 0.55 and 5.86. What is left on
// bert_infer_varlen is the drift of the largest requests into holes that
// earlier ones left and into fresh address space; on
// resnet50_infer_varbatch, the first layers of each new batch size,
// mapped in many small chunks.
//
// Then, late on 2026-12-05, the two traces nearest the bounds and the
// boundary between a server's requests, on all 16 traces against the
// settings above (9 within every bound, 15 within the fragmentation
// bounds, worst 6.60x), each also on 42 traces that gentraces writes with
// six other seeds and that testdata does not hold (15 within every bound,
// 34 within the fragmentation bounds). synth_bert_infer_varlen_long (3.63
// ms against a bound of 3.47) spends 1.13 ms loading, one mapping per 4.5
// MiB weight; of the rest, the second layer of four requests that raise
// the peak (0.74 ms): their first layer's output, of a role not seen yet,
// lands by best fit a hidden state above the layer's input, and the next
// layer's scores unmap that hidden state's hole (3 to 5 chunks of 2 to 16
// MiB, mapped while the peak was small) and map as much above; and 0.22 ms
// where a 1 MiB request of the small pool, just over the budget between
// two requests, unmaps 58 MiB in 4 chunks for 32 times what is over. On
// two_models the reserve passes 1.05 (884 MiB against 881) where a request
// over the budget finds no free chunk whole to unmap (26 of 33 MiB over
// given back), as before.
//
//   - Step 3 unmapping, for a request of the small pool, chunks for 1, 2,
//     4, 8, 12, 16 or 24 times what is over rather than 32: 8, 8, 9, 10,
//     9, 9 and 9 traces; at 8, synth_bert_infer_varlen_long in (1.98x) but
//     two_models at 1.1008x reserved, and on the other seeds 14 traces
//     within every bound and fragmentation broken on 3 more
//     (synth_resnet50_infer_varbatch of one seed 1.144x); at 1 and 2,
//     gpt2_generate_varbatch at 2.00x and synth_transformer_train_varlen
//     at 2.05x; at 12, synth_transformer_train_varlen at 1.058x reserved.
//   - Step 3 unmapping, of a block freed within the last 4 allocations,
//     the run of its whole chunks with the fewest chunks that holds what
//     is over (anywhere in the block) rather than its lowest chunks:
//     bert_infer_varlen 8.23x, synth_resnet50_infer_varbatch at 1.055x.
//   - Mapping 20 MiB ahead while loading for requests of up to 4.5, 6 or
//     10 MiB again: synth_bert_infer_varlen_long in, two_models 2.88x,
//     bert_infer_varlen 6.06x, and 19 rather than 15 of the other seeds'
//     traces within every bound (33 rather than 34 within the
//     fragmentation bounds), but gpt_generate_kvcache at 1.0585x and
//     synth_resnet50_infer_varbatch at 1.060x reserved.
//   - The request boundary (kept, step 1; vramBoundaryDiv,
//     vramBoundaryLarge): 9 traces within every bound and 15 within the
//     fragmentation bounds, as before, no trace's driver time higher:
//     bert_infer_varlen 6.60 to 5.08x (1.0395 to 1.0261x reserved, 123 to
//     99 maps, 68 to 46 unmaps), resnet50_infer_varbatch 5.30 to 5.27x
//     (1.0284 to 1.0218x), the others unchanged to the microsecond; on the
//     other seeds 35 traces within the fragmentation bounds rather than 34
//     (synth_resnet50_infer_varbatch of one seed 1.073 to 1.040x), 15
//     within every bound as before. It is sensitive to both settings: from
//     a 12th of the peak, bert_infer_varlen unchanged and
//     resnet50_infer_varbatch at 5.17x (1.048x); from a 20th, 24th or
//     32nd, bert_infer_varlen 4.14x (1.0328x) and two_models within 1.05
//     (1.0364, 1.0364 and 1.0412x; 3.07, 2.89 and 2.67x), but
//     resnet50_infer_varbatch at 1.1198x and 8.0x, where a new peak's
//     request then finds the free memory in pieces with no whole chunk and
//     maps 52 MiB with 2 given back; a third of the way rather than half:
//     bert_infer_varlen 6.56x; a quarter: synth_resnet50_infer_varbatch
//     1.060x. Taking the lowest block that unmapped space does not follow
//     (as best fit leaves those to large requests): fragmentation broken
//     on synth_resnet50_infer_varbatch (1.071 to 1.137x from a 16th to a
//     32nd), bert_infer_varlen 1.053x from a 16th. The lowest block that
//     also holds a quarter to all of what the peak leaves above the
//     allocated bytes: 6 to 9 traces, fragmentation broken on 2 to 7. The
//     boundary taken whenever the allocated bytes are within halfway (not
//     only after being above): bert_infer_varlen 4.14x and two_models
//     2.67x (1.0412x), but both ResNet-50 inference traces past 1.05
//     (1.061, 1.060x); every large request until the allocated bytes pass
//     halfway again: bert_infer_varlen 5.27x at 1.0496x, two_models
//     1.072x, synth_resnet50_infer_varbatch 1.060x. Forgetting, at the
//     boundary, a high-water mark above the peak's slack (a budget per
//     request): gpt_generate_kvcache 1.68 to 1.51x, two_models 3.24 to
//     3.28x, and on the other seeds one trace fewer within the
//     fragmentation bounds than with the boundary alone.
//   - With the boundary kept, from a 16th, 24th or 32nd of the peak, the
//     lowest block taken only when it is at least as large as best fit's:
//     every trace within the fragmentation bounds from a 24th, two_models
//     included (1.0364 and 1.0412x; 2.89 and 2.67x), bert_infer_varlen
//     4.14x, but resnet50_infer_varbatch at 8.27x (6.0 to 9.5 ms: step 3
//     unmapping 5 to 14 chunks of 2 to 16 MiB at once, cut while its peak
//     was below 832 MiB), and on the other seeds 33 traces within the
//     fragmentation bounds rather than 35; from a 16th,
//     bert_infer_varlen 5.27x. Only when it is at least twice the
//     request: bert_infer_varlen 6.21x from a 16th, 1.056x from a 24th.
//
// Then, at night on 2026-12-05, the traces of other seeds, now three of
// them in testdata (synth_resnet50_infer_varbatch_seed3 and _seed5,
// synth_transformer_train_varlen_seed1): of the 42 that gentraces writes
// with seeds 1 to 6, 7 pass 1.05 (synth_resnet50_infer_varbatch 1.0877,
// 1.0730 and 1.1111x with seeds 3 to 5, synth_transformer_train_varlen
// 1.0516 and 1.0548x with 1 and 6, synth_gpt_serve_kvcache 1.0503 and
// 1.0570x with 2 and 5), 35 meet the fragmentation bounds and 15 every
// bound. Each was replayed to the event that sets its peak reserve. On
// _seed5 that is a 94.9 MiB request (event 580): 362 MiB reserved, 239
// allocated, a peak of 357 so far (367 in the end), so a budget of 372 MiB
// from the slack (the high-water mark, 362, is below it and plays no
// part). No free block holds it and the runs of free and unmapped blocks
// inside the mapped memory hold at most 93.3 MiB (2 free, 44 unmapped,
// 47.5 free), so step 2 maps 94 MiB at the segment's end, 84 MiB over the
// budget. Of the 123 MiB free and mapped, only 48 MiB lie in whole chunks:
// the 47.5 MiB block lies in one 50 MiB chunk, mapped as one for a 76.6
// MiB request (event 330), whose last 2.5 MiB hold the start of a live
// 94.9 MiB block; a 71.2 MiB block between two live ones loses 13 and 10
// MiB at its ends to 16 MiB chunks that they share. Step 3 unmaps the 48,
// the mapping adds 94: 408 MiB, 1.111x. Every other trace past 1.05 fails
// the same way, with little over: at its peak reserve, of the free memory
// mapped, _seed3 holds 70 of 114 MiB in whole chunks (an 18 MiB block
// inside a 52 MiB chunk), seed 4's ResNet-50 74 of 105, the transformers
// 926 of 1513 and 1050 of 1600 MiB (a free 767 MiB block losing 97 MiB to
// two chunks of 128 MiB, a 16th of the peak, shared with live blocks: 14
// and 45 MiB past 1.05), the serving traces 40 of 84 and 22 of 102, and
// two_models none of 96. The chunks' boundaries, not the budget or the
// order of step 3, decide these traces. Measured on the 16 traces above
// (9 within every bound, 15 within the fragmentation bounds, worst 5.27x)
// and on the 42 of the other seeds (15 and 35, worst 4.72x):
//
//   - Single chunks, and the largest chunk below the peak's threshold of
//     step 4, bound to the peak: at most an 8th of it, at least 8 or 16
//     MiB: 9 traces within every bound, two fragmentation bounds broken
//     (resnet50_infer_varbatch 1.0512 and 1.0676x,
//     synth_resnet50_infer_varbatch 1.0712 and 1.0657x), and on the other
//     seeds 13 and 15 within every bound, 35 and 34 within the
//     fragmentation bounds (seeds 4 and 5 of synth_resnet50_infer_varbatch
//     in and seed 6 out at 1.0601x with 8 MiB, seed 5 in and seed 6 out
//     at 1.1209x with 16); a 16th, at least 8 or 16 MiB: 9 and 8 traces
//     (two_models 1.0507x; with 16, synth_gpt_serve_kvcache at 1.0521x and
//     synth_resnet50_infer_varbatch at 1.0657x), on the other seeds 6 and
//     12, 29 and 31 (the serving traces up to 1.0916x).
//   - Tapered chunks: each mapping cut into chunks doubling from a
//     smallest size at both ends to the largest of step 4 in the middle,
//     so that a free piece at a range's end holds whole chunks of about
//     half its length. From 2, 4 or 8 MiB: 8, 8 and 9 traces, two or
//     three more fragmentation bounds broken (resnet50_infer_varbatch 1.0904x
//     and 8.1x from 2 MiB), on the other seeds 8, 11 and 12 within every
//     bound, 35, 35 and 36 within the fragmentation bounds; from 16 MiB
//     (a single chunk up to 52 MiB, as before): two_models within 1.05
//     but synth_transformer_train_varlen at 1.0540x and 2.39x, on the
//     other seeds 15 and 35 as before, seed 6 of
//     synth_resnet50_infer_varbatch out at 1.0546x. Tapered only for
//     mappings over 256 MiB, from 16 or 32 MiB, smaller ones single
//     chunks: 9 and 10 traces, both ResNet-50 inference traces and
//     two_models at 1.11 to 1.17x, on the other seeds 24 and 25 within
//     the fragmentation bounds.
//
// Each of these moves chunk boundaries that a later request's blocks pin,
// and brings some traces under 1.05 while it takes as many others past
// it: no chunk size chosen when a range is mapped knows where the free
// pieces will be when the reserve peaks. Meeting the bound on unseen
// traces needs memory that step 3 can give back at that moment, not other
// constants for the chunks: placements that keep a live block from
// pinning a chunk that is mostly free, or a way to unmap part of a chunk.
//
// Then, on 2026-12-06, on all 25 traces (7 within every bound, 18 within
// the fragmentation bounds, 8 within the driver bound), two measurements of
// what placement alone could do. Without moving memory at all, placing
// every request in one address space at byte granularity, first fit and
// best fit reach a high-water mark of 1.00 to 1.32 times the peak of the
// requested bytes (bert_infer_varlen 1.12, the ResNet-50 inference traces
// 1.18 to 1.32): the holes a request leaves in its own working set cost
// more than the slack. Packed offline instead, knowing every size and
// lifetime (largest first, each at the lowest offset free for its whole
// life), one server request at a time over what the requests before left
// live: 1.005 to 1.012 on the BERT inference traces, 1.044 to 1.062 on the
// ResNet-50 ones. So on two of those three even this packing, which knows
// a request's future (a heuristic, not a proven optimum), passes 1.05
// without moving memory; an online placement, knowing only the requests
// before, has less to go on. And mapping
// ahead while loading by an 8th, a 4th or half of the allocated bytes (20
// to 256 MiB a call): 10, 6 and 7 traces within every bound, but
// fragmentation broken on 9 to 12 (vit_infer_varbatch_seed1 1.174x); not
// kept.
//
// Then, on 2026-12-06 (evening), on the 25 traces and on 24 more that
// gentraces' ResNet-50, BERT and transformer generators write with seeds 1,
// 2, 4, 6, 7 and 8 (3 within every bound, 19 within the fragmentation
// bounds, 5 within the driver bound, worst 4.2x), the two things the
// paragraphs above left to try:
//
//   - Placements that keep a live block from pinning a chunk that is free
//     whole: step 1 taking, among the first 4 or 16 free blocks that fit
//     (best fit's block first), the carve that makes the fewest bytes of
//     wholly free chunks impossible to unmap (the chunks it touches, less
//     what it covers), from either end of the block or from its low end
//     only; or best fit's block with only its end chosen so. On the 25
//     traces 3 to 4 within every bound, 9 to 14 within the fragmentation
//     bounds (1.07 to 1.16 times a bound at worst), worst 7.9 to 10.8x;
//     on the 24 others 0 to 2 within every bound. A carve that spares a
//     chunk now leaves a hole elsewhere that the next requests fill the
//     worse.
//   - How much fragmentation the driver bound leaves: the replay given
//     the answer in advance, step 3 unmapping nothing once the modelled
//     driver time has reached 50% or 80% of twice policy:pytorch's for
//     the whole trace (an oracle no allocator has). With 80%, 12 traces
//     within the driver bound but 6 within the fragmentation bounds
//     (bert_infer_varlen 1.090x, the ResNet-50 inference traces 1.15 to
//     1.34x, the transformers 1.11 to 1.13x, two_models 1.18x); with 50%,
//     15 and 4. bert_infer_varlen, with 50% unmapping nothing at all,
//     maps 60 times for 4.0 ms: 2.10 times policy:pytorch's 1.9 ms (23
//     segments of cudaMalloc, the larger weights and the small ones
//     packed in 20 MiB segments), so on that trace the mappings that load
//     the weights and grow the reserve to its peak, at 1.15x, already
//     spend the driver bound, before any memory moves to meet 1.05x.
//
// With chunks mapped and unmapped whole (cuMemMap maps a whole physical
// allocation; cuMemUnmap unmaps a whole mapping) and every mapping paying
// its own cuMemSetAccess, the two bounds together are out of this
// design's reach on the inference traces: meeting 1.05x there takes a
// remap per layer of the largest requests, and the driver bound leaves
// room for none.
const (
	// vramSlackDiv: the reserve may exceed the peak of the allocated bytes
	// (the request included) by 1/24 of it before free chunks are unmapped.
	vramSlackDiv = 24
	// vramReclaimFactor: step 3 unmaps a free block's lowest chunks until
	// they hold 32 times the bytes still over the budget, or all of them.
	// The sweep of 2026-12-01 chose it: 24 to 48 bring
	// gpt_generate_kvcache under the driver bound (2.99 to 1.68x) and keep
	// every other bound; 4 to 16 break resnet50_infer_varbatch's
	// fragmentation (1.074x at 4), 64 loses gpt_generate_kvcache again.
	vramReclaimFactor = 32
	// vramRecentFree: for a request of at least a vramLongDiv-th of the
	// peak, step 3 unmaps of a large free block that became free within
	// the last 4 allocations only the chunks that hold what is over. The
	// sweep of 2026-12-05 (evening, above) chose it: 3 leaves
	// bert_infer_varlen at 7.1x, 5 or 6 break the fragmentation bound of
	// both ResNet-50 inference traces.
	vramRecentFree = 4
	// vramSingleChunk: a mapping of up to 52 MiB is one chunk (one call).
	vramSingleChunk = 52 << 20
	// vramMinChunk and vramMaxChunk bound the largest chunk of a larger
	// mapping: 16 MiB to 1 GiB.
	vramMinChunk = 16 << 20
	vramMaxChunk = 1 << 30
	// vramChunkDiv: the largest chunk of a mapping is a sixth of it
	// (within the bounds above).
	vramChunkDiv = 6
	// vramPeakChunkDiv and vramPeakChunkMax: once the peak of the
	// allocated bytes exceeds 16 times vramSingleChunk (832 MiB), every
	// mapping is cut into chunks of a sixteenth of that peak, at most
	// 128 MiB. The sweep of 2026-12-01 below chose them: a twelfth to a
	// thirty-second and 96 to 160 MiB all bring
	// synth_transformer_train_varlen under the driver bound and keep
	// every other bound; an eighth, or 192 MiB and more, break the
	// fragmentation bound of one to four traces.
	vramPeakChunkDiv = 16
	vramPeakChunkMax = 128 << 20
	// vramAheadMax and vramAheadChunk: a request of at most 4 MiB that
	// maps memory at a segment's unmapped end maps a chunk ahead, so that
	// the mapping holds 20 MiB in all (PyTorch's kLargeBuffer, the segment
	// it takes for requests under 10 MiB). The sweep of 2026-12-01 below
	// chose the 4 MiB: up to 2 MiB helps fewer traces, above 4 MiB one
	// trace passes PyTorch's best fragmentation.
	vramAheadMax   = 4 << 20
	vramAheadChunk = kLargeBuffer
	// vramLoadAheadMin: until the first free, a request of at least 3 MiB
	// (and at most vramAheadMax) maps ahead whatever the slack. The sweep
	// of 2026-12-01 chose it: 2.5 or 3 MiB bring gpt2_generate_varbatch
	// under the driver bound, 3.5 MiB does not, 1 or 2 MiB break the
	// fragmentation bound of both ResNet-50 inference traces (1.084,
	// 1.082), where loading maps ahead for the many 1 to 2.25 MiB
	// convolution weights.
	vramLoadAheadMin = 3 << 20
	// vramClimbAheadMin: a request of more than vramAheadMax that raises
	// the peak of the allocated bytes maps ahead all the room the slack
	// leaves (step 6), if that is at least 64 MiB. The sweep of
	// 2026-12-01, late, chose it: 40 to 72 MiB bring
	// synth_transformer_train_varlen under the driver bound (1.92 to
	// 1.99x) and keep every other bound; 32 MiB breaks
	// synth_gpt_generate_varbatch (1.0408x, 2.08x) and costs
	// synth_bert_infer_varlen 70% more, 80 MiB and more leave
	// synth_transformer_train_varlen above 2x (2.02 to 2.08x).
	vramClimbAheadMin = 64 << 20
	// vramRoleDepth, vramLongLife, vramLongDiv and vramAnchorScan: step
	// 1 places a request apart when the last block of its role (its
	// rounded size and those of the 3 requests before it) lived at least
	// 8 allocations and it holds at least a 32nd of the peak of the
	// allocated bytes, looking at the 16 smallest free blocks that fit.
	// The sweep of 2026-12-05 (above) chose them, each against the
	// others: roles of 2 sizes leave synth_bert_infer_varlen_long at 6.50x
	// and synth_two_models at 5.28x; lifetimes of 6 give the same as 8, 4
	// take resnet50_infer_varbatch to 5.63x but synth_two_models to 5.15x,
	// 12 lose synth_bert_infer_varlen_long and synth_two_models again; a
	// 40th or 48th of the peak gives the same as a 32nd, a 64th breaks
	// resnet50_train's 1.02 (1.0413x), a 24th leaves synth_two_models at
	// 5.55x, a 16th keeps only bert_infer_varlen's gain (9.32x); 64 blocks
	// looked at give the same as 16.
	vramRoleDepth  = 3
	vramLongLife   = 8
	vramLongDiv    = 32
	vramAnchorScan = 16
	// vramBoundaryDiv and vramBoundaryLarge: once the allocated bytes
	// come back to within half of the way from their low since the first
	// free to their peak, after being above it (one request's working set
	// given back), the next request of at least a 16th of that peak that
	// step 1 does not anchor takes the lowest-addressed free block that
	// fits. The sweep of 2026-12-05 (late, above) chose them: a third or
	// a quarter of the way, or a 12th of the peak, gain little or break
	// synth_resnet50_infer_varbatch; a 20th to a 32nd break
	// resnet50_infer_varbatch (1.1198x).
	vramBoundaryDiv   = 2
	vramBoundaryLarge = 16
	// vramMaxRoles bounds the roles whose lifetime is remembered; the
	// table starts again when it is full.
	vramMaxRoles = 1 << 14
	// vramSpanFactor: each virtual segment reserves twice the device's
	// capacity of address space (at most maxDefaultSpan), so that
	// unmapped holes can be left behind while the segment grows.
	vramSpanFactor = 2
)

// vramChunker splits a mapping as step 4 of the policy says, for a peak
// of peak allocated bytes: when the peak's vramPeakChunkDiv-th part (at
// most vramPeakChunkMax) exceeds vramSingleChunk, chunks of that size from
// the range's start, the last one holding the rest; otherwise one chunk up
// to vramSingleChunk and, beyond, the largest power-of-two numbers of
// granules that are aligned to their own size (counted from the segment's
// base) and at most the range's vramChunkDiv-th part, so that any hole
// longer than twice that contains whole chunks.
func vramChunker(gran, peak int64) chunker {
	if size := min(alignDown(peak/vramPeakChunkDiv, gran), vramPeakChunkMax); size > vramSingleChunk {
		return func(seg *segment, lo, hi uint64, emit func(uint64, int64) bool) {
			for lo < hi {
				n := min(int64(hi-lo), size)
				if !emit(lo, n) {
					return
				}
				lo += uint64(n)
			}
		}
	}
	return func(seg *segment, lo, hi uint64, emit func(uint64, int64) bool) {
		if int64(hi-lo) <= vramSingleChunk {
			emit(lo, int64(hi-lo))
			return
		}
		largest := min(max(int64(hi-lo)/vramChunkDiv, vramMinChunk), vramMaxChunk)
		maxG := max(largest/gran, 1)
		for lo < hi {
			offG := int64(lo-seg.addr) / gran
			n := min(maxG, int64(hi-lo)/gran)
			sizeG := int64(1) << (bits.Len64(uint64(n)) - 1) // largest power of two <= n
			if offG != 0 {
				sizeG = min(sizeG, offG&-offG)
			}
			if !emit(lo, sizeG*gran) {
				return
			}
			lo += uint64(sizeG * gran)
		}
	}
}

// placement is where policy:vram would put a request: a window of a run of
// free and unmapped blocks.
type placement struct {
	run  *Block // the run's first block
	at   uint64 // the window's first byte
	need int64  // bytes to map
	edge bool   // the window touches an end of the run (leaves one hole, not two)
}

// better reports whether p is a better placement than q: less memory to
// map, then one hole rather than two, then the lower address (whatever the
// size of the run, so that the working set stays away from the segment's
// unmapped end: step 2 of the policy).
func (p placement) better(q placement) bool {
	if p.need != q.need {
		return p.need < q.need
	}
	if p.edge != q.edge {
		return p.edge
	}
	return p.at < q.at
}

// inRun reports whether b can be part of a placement.
func inRun(b *Block) bool { return b.state == stateFree || b.state == stateUnmapped }

// needIn returns the bytes to map for the window [lo, hi) of the run
// starting at s: the granules of its unmapped blocks that the window
// touches.
func (a *Allocator) needIn(s *Block, lo, hi uint64) int64 {
	var need int64
	for b := s; b != nil && inRun(b) && b.addr < hi; b = b.next {
		if b.state != stateUnmapped || b.end() <= lo {
			continue
		}
		gran := uint64(a.gran)
		base := b.seg.addr
		from := max(b.addr, base+(lo-base)/gran*gran)
		to := min(b.end(), base+(hi-base+gran-1)/gran*gran)
		need += int64(to - from)
	}
	return need
}

// bestIn returns the best window of size bytes in the run starting at s:
// windows that start at a block's start or end at a block's end.
func (a *Allocator) bestIn(s *Block, size int64) (best placement, ok bool) {
	var span int64
	var end *Block
	for b := s; b != nil && inRun(b); b = b.next {
		span += b.size
		end = b
	}
	if span < size {
		return best, false
	}
	lo, hi := s.addr, end.end()
	try := func(at uint64) {
		if at < lo || at+uint64(size) > hi {
			return
		}
		p := placement{run: s, at: at, edge: at == lo || at+uint64(size) == hi}
		p.need = a.needIn(s, at, at+uint64(size))
		if !ok || p.better(best) {
			best, ok = p, true
		}
	}
	for b := s; b != nil && inRun(b); b = b.next {
		try(b.addr)
		if b.end() >= lo+uint64(size) {
			try(b.end() - uint64(size))
		}
	}
	return best, ok
}

// bestPlacement returns the cheapest placement of size bytes among the runs
// of stream's virtual segments in p (see placement.better).
func (a *Allocator) bestPlacement(p *pool, stream Stream, size int64) (best placement, ok bool) {
	var last *Block
	for u := p.firstUnmapped(stream); u != nil && u.stream == stream; u = nextIn(u) {
		s := u
		for s.prev != nil && inRun(s.prev) {
			s = s.prev
		}
		if s == last {
			continue
		}
		last = s
		if c, fits := a.bestIn(s, size); fits && (!ok || c.better(best)) {
			best, ok = c, true
		}
	}
	return best, ok
}

// growVRAM finds or maps memory for a request of size bytes on stream in
// pool p under policy:vram and returns a free block of at least size bytes,
// in the pool.
func (a *Allocator) growVRAM(p *pool, stream Stream, size int64) (*Block, error) {
	b, aheadTried, err := a.placeVRAM(p, stream, size, true)
	if err != nil && aheadTried && isOOM(err) {
		// Mapping ahead is only worth it while memory lasts.
		b, _, err = a.placeVRAM(p, stream, size, false)
	}
	return b, err
}

// placeVRAM runs steps 2 to 5 of the policy for growVRAM, step 5 only if
// ahead, and reports whether it mapped or tried to map ahead.
func (a *Allocator) placeVRAM(p *pool, stream Stream, size int64, ahead bool) (*Block, bool, error) {
	pl, ok := a.bestPlacement(p, stream, size)
	if !ok {
		span := alignUp(max(scaleSpan(a.arena.Capacity(), vramSpanFactor, 1), size), a.gran)
		seg, err := a.newVirtualSegment(p, stream, span)
		if err != nil {
			return nil, false, err
		}
		pl = placement{run: seg.first, at: seg.addr, need: alignUp(size, a.gran), edge: true}
	}
	if pl.need > 0 {
		reserved := a.stats.ReservedBytes[StatAll].Current
		alloc := satAdd(a.stats.AllocatedBytes[StatAll].Current, size)
		peak := max(a.peakAlloc, alloc)
		budget := min(max(a.highWater, satAdd(peak, peak/vramSlackDiv)), a.limit)
		if over := satAdd(reserved, pl.need) - budget; over > 0 {
			seg := pl.run.seg
			if a.reclaim(over, seg, pl.at, pl.at+uint64(size)) > 0 {
				if pl, ok = a.bestPlacement(p, stream, size); !ok {
					panic("vram: internal: placement vanished during reclaim")
				}
			}
		}
	}
	var extra int64
	if ahead {
		extra = a.aheadFor(pl, size)
	}
	b, err := a.materialize(pl, size, extra)
	return b, extra > 0, err
}

// aheadFor returns how many bytes steps 5 and 6 of the policy map past
// the window of pl for a request of size bytes, 0 when the window needs no
// mapping. A request of at most vramAheadMax bytes (step 5) gets up to
// vramAheadChunk in all, as far as the reserve stays within the peak of the
// allocated bytes and its slack (whatever the slack while loading). A
// larger one that raises that peak (step 6) gets all the room that the
// slack leaves, if that is at least vramClimbAheadMin. materialize maps
// them only where the window ends in the segment's unmapped end.
func (a *Allocator) aheadFor(pl placement, size int64) int64 {
	if pl.need == 0 {
		return 0
	}
	reserved := a.stats.ReservedBytes[StatAll].Current
	alloc := satAdd(a.stats.AllocatedBytes[StatAll].Current, size)
	peak := max(a.peakAlloc, alloc)
	room := min(satAdd(peak, peak/vramSlackDiv), a.allowed()) - reserved - pl.need
	if size > vramAheadMax {
		if alloc <= a.peakAlloc {
			return 0
		}
		if room = alignDown(room, a.gran); room < vramClimbAheadMin {
			return 0
		}
		return room
	}
	if !a.freedOnce && size >= vramLoadAheadMin {
		// Loading: what is mapped ahead holds the next tensors.
		room = a.allowed() - reserved - pl.need
	}
	return max(alignDown(min(vramAheadChunk-pl.need, room), a.gran), 0)
}

// splitAt returns a chunker that splits a range as split does, but
// separately below and above cut, so that no chunk straddles it.
func splitAt(split chunker, cut uint64) chunker {
	return func(seg *segment, lo, hi uint64, emit func(uint64, int64) bool) {
		if lo >= cut || hi <= cut {
			split(seg, lo, hi, emit)
			return
		}
		more := true
		split(seg, lo, cut, func(l uint64, n int64) bool { more = emit(l, n); return more })
		if more {
			split(seg, cut, hi, emit)
		}
	}
}

// materialize maps what is missing of the window of pl and returns a free
// block, in its pool, that starts at the window and holds at least size
// bytes. When the window ends in the segment's unmapped end, it also maps
// up to ahead bytes past the window's last granule, as chunks of their own
// (step 5 of the policy).
func (a *Allocator) materialize(pl placement, size, ahead int64) (*Block, error) {
	split := vramChunker(a.gran, a.peakAlloc)
	lo, hi := pl.at, pl.at+uint64(size)
	gran := uint64(a.gran)
	base := pl.run.seg.addr
	mlo := base + (lo-base)/gran*gran
	mhi := base + (hi-base+gran-1)/gran*gran
	if ahead > 0 {
		b := pl.run
		for b != nil && b.end() <= mhi {
			b = b.next
		}
		if b != nil && b.state == stateUnmapped && b.next == nil && b.addr <= mhi {
			split = splitAt(split, mhi)
			mhi = min(b.end(), mhi+uint64(ahead))
			hi = mhi
		}
	}
	// Mapping merges blocks, so pl.run may die; after a mapping the
	// window lies in the block mapBlock returned last.
	var last *Block
	for b := pl.run; b != nil && b.addr < hi; {
		if b.state != stateUnmapped || b.end() <= lo {
			b = b.next
			continue
		}
		split0 := false
		if from := max(b.addr, mlo); from > b.addr {
			p := a.pools[b.seg.kind]
			p.removeUnmapped(b)
			rest := a.blocks.splitOff(b, int64(from-b.addr))
			p.insertUnmapped(b)
			p.insertUnmapped(rest)
			b, split0 = rest, true
		}
		m, err := a.mapBlock(b, int64(min(b.end(), mhi)-b.addr), split)
		if err != nil {
			if split0 {
				a.mergeUnmapped(b)
			}
			return nil, err
		}
		last = m
		b = m.next
	}
	b := last
	if b == nil {
		for b = pl.run; b.end() <= lo; b = b.next {
		}
	}
	if b.state != stateFree || b.addr > lo || b.end() < hi {
		panic("vram: internal: window not mapped after materialize")
	}
	if lo > b.addr {
		p := a.pools[b.seg.kind]
		a.account(b, -1)
		front := a.blocks.cutFront(b, int64(lo-b.addr))
		p.free.rekeyed(b)
		a.account(b, 1)
		p.insertFree(front)
		a.account(front, 1)
	}
	return b, nil
}

// reclaim unmaps whole chunks inside free blocks of virtual segments,
// lowest address first, none inside the window [lo, hi) of seg, until at
// least want bytes are given back or nothing is left, and returns the
// bytes given back. seg may be nil for no window. Of a free block it
// unmaps the lowest chunks for vramReclaimFactor times what is still
// over, or, when the window holds at least a vramLongDiv-th of the peak
// of the allocated bytes and the block is of the large pool and became
// free within the last vramRecentFree allocations, for what is over.
func (a *Allocator) reclaim(want int64, seg *segment, lo, hi uint64) int64 {
	large := seg != nil && int64(hi-lo) >= a.peakAlloc/vramLongDiv
	var cands []*Block
	for _, p := range a.pools {
		p.free.each(func(b *Block) bool {
			// A block smaller than a granule holds no whole chunk: the
			// size test spares most free blocks the look-up.
			if b.seg.virtual && b.size >= a.gran && a.hasWholeChunk(b.addr, b.end()) {
				cands = append(cands, b)
			}
			return true
		})
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].addr < cands[j].addr })
	var got int64
	for _, b := range cands {
		if got >= want {
			break
		}
		if b.seg != seg || b.end() <= lo || b.addr >= hi {
			factor := int64(vramReclaimFactor)
			if large && b.seg.kind == poolLarge && b.freedAt+vramRecentFree >= a.tick {
				// Memory the layer just gave back: the next
				// requests take it again.
				factor = 1
			}
			n, _ := a.unmapFree(b, b.addr, a.chunksFor(b.addr, b.end(), satMul(factor, want-got)))
			got += n
			continue
		}
		// Only what lies outside the window: above it first, then below
		// (unmapFree returns the block still holding the part below).
		front := b
		if hi < b.end() {
			var n int64
			n, front = a.unmapFree(b, hi, b.end())
			got += n
		}
		if front != nil && front.addr < lo {
			n, _ := a.unmapFree(front, front.addr, lo)
			got += n
		}
	}
	return got
}

// chunksFor returns where the fewest whole chunks in [lo, hi), counted
// from lo, hold at least want bytes: the end of the last of them, or hi
// when all of them together hold less.
func (a *Allocator) chunksFor(lo, hi uint64, want int64) uint64 {
	end := hi
	var got int64
	a.chunks.AscendGreaterOrEqual(chunk{addr: lo}, func(c chunk) bool {
		if c.addr+uint64(c.size) > hi {
			return false
		}
		got += c.size
		if got >= want {
			end = c.addr + uint64(c.size)
			return false
		}
		return true
	})
	return end
}

// lifePrediction is what policy:vram expects of a request: its role (a
// hash of its rounded size and those of the vramRoleDepth requests before
// it: a tensor's place in a repeating layer), the tick its block will be
// freed at (0 when its role has not been seen freed yet), and whether it
// is long-lived and large enough for step 1's anchored placement.
type lifePrediction struct {
	role uint64
	dies uint64
	long bool
}

// set records the prediction on blk, allocated at tick.
func (l lifePrediction) set(blk *Block, tick uint64) {
	blk.born, blk.dies, blk.role = tick, l.dies, l.role
}

// predictLife returns the prediction for a request of size rounded bytes,
// the current one (a.tick counts it), and makes it the latest of the
// recent sizes.
func (a *Allocator) predictLife(size int64) lifePrediction {
	h := uint64(size)
	for _, s := range a.recentSizes {
		h = h*0x100000001b3 + uint64(s) // a polynomial hash of the sizes
	}
	copy(a.recentSizes[1:], a.recentSizes[:])
	a.recentSizes[0] = size
	l := lifePrediction{role: h}
	if poolFor(size) == poolSmall {
		// Small blocks never neighbour large ones: their lifetimes
		// would only cost the cached path a table look-up.
		return l
	}
	if life, ok := a.lifetimes[h]; ok {
		l.dies = a.tick + life
		l.long = life >= vramLongLife && size >= a.peakAlloc/vramLongDiv
	}
	return l
}

// learnLife records the lifetime of the allocated block b, being freed,
// for its role.
func (a *Allocator) learnLife(b *Block) {
	if b.born == 0 || b.seg.kind == poolSmall {
		return
	}
	if a.lifetimes == nil || len(a.lifetimes) >= vramMaxRoles {
		// Roles come and go with the shapes of a workload: start again
		// rather than grow without bound.
		a.lifetimes = make(map[uint64]uint64)
	}
	a.lifetimes[b.role] = a.tick - b.born
}

// outlives reports whether n, a neighbour of a free block, anchors a block
// expected to be freed at tick dies: no neighbour (the segment's start or
// end), unmapped space, or an allocated (or pending) block whose own free
// is not expected before.
func outlives(n *Block, dies uint64) bool {
	if n == nil {
		return true
	}
	switch n.state {
	case stateUnmapped:
		return true
	case stateAllocated, statePending:
		return n.dies == 0 || n.dies >= dies
	}
	return false
}

// findAnchored runs step 1 of the policy for a long-lived request (see
// lifePrediction): among the first vramAnchorScan free blocks of stream in
// p that fit size bytes, smallest first, the first with a neighbour that
// outlives the request, and whether to carve the request from its high end
// (only that neighbour anchors it). It returns nil when the request is not
// long-lived, when max_split_size_mb is set (whose rules findFree keeps),
// or when no block qualifies.
func (a *Allocator) findAnchored(p *pool, stream Stream, size int64, l lifePrediction) (*Block, bool) {
	if !l.long || a.oversize != math.MaxInt64 {
		return nil, false
	}
	n := 0
	for c := p.lowerBound(stream, size); c != nil && c.stream == stream && n < vramAnchorScan; c = nextIn(c) {
		n++
		if !c.seg.virtual {
			continue
		}
		if outlives(c.prev, l.dies) {
			return c, false
		}
		if outlives(c.next, l.dies) {
			return c, true
		}
	}
	return nil, false
}

// findRequestStart runs the request boundary of step 1 of the policy for a
// request of size rounded bytes in p that findAnchored did not place: it
// notes where the allocated bytes stand (see Allocator.lowAlloc) and, for
// the first request of the large pool of at least a vramBoundaryLarge-th
// of the peak of the allocated bytes since they came back to within
// halfway (vramBoundaryDiv) from their low to that peak, returns the
// lowest-addressed free block of stream in p that fits it. It returns nil
// otherwise, before the first free, or when max_split_size_mb is set
// (whose rules findFree keeps).
func (a *Allocator) findRequestStart(p *pool, stream Stream, size int64) *Block {
	if !a.freedOnce || a.oversize != math.MaxInt64 {
		return nil
	}
	cur := a.stats.AllocatedBytes[StatAll].Current
	if !a.lowSeen || cur < a.lowAlloc {
		a.lowAlloc, a.lowSeen = cur, true
	}
	if cur > a.lowAlloc+(a.peakAlloc-a.lowAlloc)/vramBoundaryDiv {
		a.aboveMid = true
	} else if a.aboveMid {
		// The working set of the request before is gone.
		a.aboveMid, a.newRequest = false, true
	}
	if !a.newRequest || p.kind != poolLarge || size < a.peakAlloc/vramBoundaryLarge {
		return nil
	}
	a.newRequest = false
	var low *Block
	for c := p.lowerBound(stream, size); c != nil && c.stream == stream; c = nextIn(c) {
		if c.seg.virtual && (low == nil || c.addr < low.addr) {
			low = c
		}
	}
	return low
}
