// Package trace reads and writes every file format vram uses for
// allocation histories and allocator snapshots: the text trace, the vram
// JSON snapshot, and PyTorch's snapshot, pickled or saved as JSON. It is
// the only package that knows these formats; package memory, `vram replay`
// and `vram analyze` all go through it. It does not depend on package
// memory.
//
// The simplest call reads any supported file, detecting its format from its
// bytes (never from its name):
//
//	f, err := trace.Open("resnet50_train.trace.gz")
//	if err != nil {
//		return err // "trace: resnet50_train.trace.gz: line 12: unknown action ..."
//	}
//	switch f.Kind {
//	case trace.KindText:
//		use(f.Events)
//	case trace.KindJSON, trace.KindPickle, trace.KindPyTorchJSON:
//		use(f.Snapshots)
//	}
//
// For large text traces, [NewTextReader] streams one [Event] at a time
// without allocating, and [OpenStream] opens a file whose [File.History]
// reads a text trace from the file on each pass, as `vram replay` and `vram
// analyze` do. [ReadJSON] and [WriteJSON] read and write one [Snapshot];
// [ReadPickle] reads a PyTorch snapshot, one Snapshot per device.
//
// # Limits
//
// Memory follows what an input really holds, never what it claims: no
// length field makes a reader reserve memory before the data arrives, and
// streamed text traces take memory independent of their length. Inputs
// read whole (JSON snapshots, pickles, and text traces collected by Read
// or Open) are limited to [Limits.MaxBytes] after decompression, 1 GiB
// by default ([DefaultMaxBytes]), so that a small gzip file cannot expand
// into gigabytes; a pickle, or a PyTorch snapshot saved as JSON, whose
// values take far more memory than a real snapshot of its size is refused
// too (see [Limits]). The failure is a
// [*ParseError] wrapping a [*LimitError] that says how to raise the limit:
//
//	trace: big.pickle: input larger than 1.00 GiB after decompression, the most read whole (trace.Limits.MaxBytes, ...)
//
// Sizes and capacities are read as recorded, up to 2^63-1; deciding that
// one is beyond any device is for the user of the data (memory's
// CheckSimCapacity for a simulated device).
//
// The data model: a [Snapshot] is one device's allocator at one moment, its
// [Segment]s (memory reserved from the device) tiled by [Block]s (held,
// pending free, or cached), and a History of [Event]s that led there, oldest
// first. [Snapshot.Validate] states the invariants; [Snapshot.Allocated],
// [Snapshot.Reserved] and [Snapshot.Requested] sum bytes as PyTorch's stats
// do. [StateAt] gives the blocks held at any point of a history, which is
// where a replay of a truncated history starts; [StartsEmpty] tells whether
// a history is complete.
//
// # Text traces
//
// A text trace is a list of events, one per line, UTF-8, optionally
// gzip-compressed (recognised by the magic bytes 1f 8b, not by a ".gz"
// name). Lines end in "\n" ("\r\n" is accepted). Blank lines and lines whose
// first non-blank character is '#' are comments; the comment lines before
// the first event are the header ([TextReader.Header]). Writers start with
// the line
//
//	# action addr size stream [time_us]
//
// Every other line is an event: four or five fields separated by spaces or
// tabs:
//
//	action addr size stream [time_us]
//
// where:
//   - action is one of alloc, free_requested, free_completed, segment_alloc,
//     segment_free, segment_map, segment_unmap, oom, snapshot (see [Action]);
//   - addr is the block's or segment's address as an unsigned decimal
//     number (no "0x"), up to 2^64-1; for oom it is the bytes the device had
//     free, PyTorch's "device_free";
//   - size is a byte count, decimal, 0 to 2^63-1: the requested, unrounded
//     size for alloc, free_requested and free_completed; the segment's or
//     mapping's size for segment actions; the failed request for oom; 0 for
//     snapshot;
//   - stream is the stream, unsigned decimal (PyTorch writes the
//     cudaStream_t value; 0 is the default stream);
//   - time_us, optional, is a signed decimal time in microseconds; absent
//     means unknown, and writers omit it when it is 0.
//
// Call stacks and region labels are not part of the text format. A replay
// allocates on alloc and frees on free_completed, the moment the block
// really returned to the pool; segment lines record the recording
// allocator's own decisions, there to compare against. Errors name the line:
//
//	trace: line 12: unknown action "allocx"
//
// # JSON snapshots
//
// A vram JSON snapshot holds one [Snapshot]: a JSON object (RFC 8259, UTF-8)
// with these keys, in this order when vram writes it:
//
//	{
//	  "format": "vram-memory-snapshot",   required, exactly this string
//	  "version": 1,                       required, exactly 1
//	  "device": 0,                        device index, >= 0
//	  "capacity_bytes": 0,                device memory; 0 = unknown
//	  "config": "",                       allocator settings, VRAM_ALLOC_CONF syntax
//	  "meta": {"key": "value", ...},      strings only; see "# Meta keys"
//	  "history_truncated": false,         see "# Truncated histories"
//	  "segments": [                       sorted by address, disjoint
//	    {"address": 139638008184832, "size": 2097152, "stream": 0,
//	     "pool": "small",                 "small" or "large"
//	     "expandable": false,
//	     "private_pool": [1, 0],          optional, default [0, 0]: none
//	     "blocks": [                      tile the segment, in address order
//	       {"address": 139638008184832, "size": 37888,
//	        "requested_size": 37632,
//	        "state": "active_allocated",  or "active_pending_free", "inactive"
//	        "region": "conv1",            optional, default ""
//	        "frames": [{"function": "main.train", "file": "train.go", "line": 42}]}
//	     ]}                               frames optional, innermost first
//	  ],
//	  "history": [                        oldest first
//	    {"action": "alloc", "address": 139638008184832, "size": 37632,
//	     "stream": 0,
//	     "time_us": 1700000000000000,     optional, default 0 = unknown
//	     "region": "conv1",               optional
//	     "frames": [...]}                 optional
//	  ]
//	}
//
// Addresses, sizes and streams are JSON integers written in full (no
// exponent, no fraction); streams and addresses are unsigned 64-bit.
// (Readers in languages whose numbers are float64 lose precision above
// 2^53; device addresses on x86-64 stay below 2^48.) The meanings of the
// fields are those of the Go fields they mirror, and of the text format
// for events. Missing optional keys take the defaults shown, missing
// lists are empty, and keys a reader does not know are ignored, so that
// version 1 can gain keys; anything that changes the meaning of an existing
// key gets a new version. A file with another "format", a "version" other
// than 1, or either key missing is rejected, as is one whose snapshot
// fails [Snapshot.Validate]. vram writes one segment, block or event per
// line so that files diff and grep well; readers must not rely on layout.
//
// # PyTorch pickles
//
// [ReadPickle] reads what torch.cuda.memory._dump_snapshot(path) writes:
// the pickle (protocol 2 to 5; Python's default is 4, or 5 from Python 3.14)
// of the dict torch.cuda.memory._snapshot() returns. It also accepts the
// pickle of torch.cuda.memory_snapshot(), a bare list of segments, and
// either saved with torch.save: a zip archive (recognised by its magic
// bytes 50 4b 03 04) whose NAME/data.pkl record is that pickle. The
// layout read, from PyTorch's torch/csrc/cuda/Module.cpp and
// torch/cuda/memory.py (2.1 to 2.11):
//
//	{"segments": [                      one per segment, any device
//	   {"device": int, "address": int, "total_size": int,
//	    "allocated_size": int, "active_size": int, "requested_size": int,
//	    "stream": int, "segment_type": "small" | "large",
//	    "segment_pool_id": (int, int), "is_expandable": bool,
//	    "frames": [...],
//	    "blocks": [
//	      {"address": int, "size": int, "requested_size": int,
//	       "state": "active_allocated" | "active_pending_free" | "inactive",
//	       "frames": [{"filename": str, "line": int, "name": str}, ...]}]}],
//	 "device_traces": [                 one list per device index
//	   [{"action": str, "addr": int, "size": int, "stream": int,
//	     "time_us": int, "frames": [...],
//	     "compile_context": str, "user_metadata": str}, ...]],
//	 "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": str, ...},
//	 "external_annotations": [...]}
//
// How it maps: a Snapshot per device that has segments or a trace with
// events (the device of a segment is its "device", default 0; of a trace,
// its index in "device_traces"; below [MaxDevices]), sorted by device. Segment: address, size
// = total_size, stream, pool = segment_type, expandable = is_expandable,
// private pool = segment_pool_id (a CUDA graph's or a MemPool's).
// Block: address (blocks of PyTorch before 2.1 have none; it is then
// computed from the segment's address and the sizes of the blocks before
// it, as PyTorch itself does), size, requested = requested_size, state
// ("active_awaiting_free", the spelling of PyTorch's typing stubs, reads as
// "active_pending_free"), frames, region = the user_metadata of the alloc
// event in the history that produced the block (the last alloc at its
// address that no free_completed follows), if any: PyTorch records it on
// trace entries only. Blocks of PyTorch before 2.1 have no frames but a
// "history" list, newest first, of {"addr", "real_size", "frames"}: a held
// block takes its frames, and its requested size when it has no
// requested_size (PyTorch 1.13), from the newest entry at its own address;
// a held block with neither has requested = size, as PyTorch's viewer
// assumes, rather than 0. Event: action, addr (for an oom entry,
// which has "device_free" instead, Addr holds device_free), size, stream,
// time_us, frames, region = user_metadata when it is a str. Frame: function
// = name, file = filename, line. Config is allocator_settings'
// PYTORCH_CUDA_ALLOC_CONF (or PYTORCH_ALLOC_CONF); its other entries go to
// Meta (see "# Meta keys"). That string is the last one PyTorch was given,
// which may leave out settings its allocator ran with (expandable_segments
// set in code by torch.cuda.memory._set_allocator_settings, or by an
// earlier string); the entries record those, and Config.WithSnapshotSettings
// of package memory puts them over the string. Capacity is 0: the pickle
// does not record it.
// Not kept: allocated_size, active_size and requested_size of segments
// (they are sums over the blocks), segment frames, compile_context, external_annotations, the FX
// annotations newer PyTorch adds to frames, and the trace entries of
// action "user_defined" (PyTorch 2.4 and later records one where each
// torch.profiler.record_function range starts and ends; they allocate
// nothing), so that a history's events are its allocator's. Required keys:
// a segment's address, total_size, segment_type and blocks; a block's size
// and state; an event's action, and, unless it is a snapshot marker, its
// size and addr (device_free for oom), which PyTorch always writes: without
// them an event would act at address 0 or report a request of 0 bytes;
// None in place of a required value is an error too.
// Any other unknown action is an error, not
// skipped: a replay that silently drops events would mislead. The input
// must end with the pickle: data after its STOP is an error, as after a
// JSON snapshot, and a gzip-compressed pickle is read to its end, so that
// a stream cut short or failing its checksum is refused.
//
// Why a minimal unpickler of its own rather than
// github.com/nlpodyssey/gopickle (v0.2.0, the newest served): on corrupt
// input gopickle panics (opcode 0xff indexes past its 255-entry dispatch
// table) and allocates whatever length a corrupt header claims before
// reading it, and its generic values need a linear, reflect-based search per
// dict key. The decoder here (unpickle.go on package internal/pickle,
// which nn/torchload shares) handles the opcodes plain data needs (None,
// bools, ints (beyond 64 bits only as placeholders), floats, str, bytes,
// tuples, lists, dicts, sets, memo, frames), refuses any opcode that would
// construct a Python object (GLOBAL, REDUCE, BUILD, ...) with an error
// naming it, never recurses, reads the input once through a buffer, allocates only as data
// arrives, and counts the memory of what it builds, so that memory stays
// within a small multiple of the input (see [Limits]). Identical stacks share
// one []Frame, as PyTorch shares frames. Measured on a 2-core development
// machine (2026-11-30): a 145 MB pickle of 1,000,000 trace entries with
// 10-30 frame stacks from 300 distinct ones reads in about 4.5 s (Python's
// own pickle.load: 8 s) with a peak heap of 0.9 GB, and the result holds
// 77 MB; when every stack is distinct, about 10 s and 1.6 GB, most of it the
// converted frames.
//
// # PyTorch snapshots saved as JSON
//
// Users who want a text file save the dict of torch.cuda.memory._snapshot()
// with json.dump; its values are all plain data. [Read] and [Open] read
// such a file as the pickle of the same dict (Kind is KindPyTorchJSON):
// the same layout, mapping, required keys and errors, one Snapshot per
// device, Meta "source" "pytorch". A JSON object is a vram snapshot when it
// has a "format" key, wherever the key is; without one, it is a PyTorch
// snapshot when it has a "segments" or "device_traces" key, and otherwise
// an error. A JSON array is the list of segments of
// torch.cuda.memory_snapshot(), as its pickle is. JSON values map onto
// Python's as json.load makes them: objects are dicts (a later duplicate key
// wins), arrays lists (json.dump writes tuples as arrays, so a tuple among
// allocator_settings reads "[0, 0]" in Meta rather than "(0, 0)"), integers
// ints of any size (beyond 64 bits they are too large for any field, as in
// a pickle), other numbers floats; NaN and Infinity, which json.dump writes
// by default but JSON lacks, are errors. [ReadJSON] reads vram snapshots
// only.
//
// JSON repeats what a pickle shares: every frame dict is written out in
// full in each stack that holds it, so the file is tens of times the size
// of the pickle. The reader shares equal frames and short strings again as
// it decodes, so that memory follows the pickle's: on a 2-core development
// machine (2026-12-06), a 72 MB JSON file of 6,800 trace entries with
// stacks="all" read in 1.8 s with a peak heap of about 25 MB (the 1 MB
// pickle of the same dict: under 0.1 s). The values decoded count against
// the budget of a pickle of the same size, arrays and objects nest at most
// 10000 deep, and keys that neither format reads (external_annotations)
// are checked as JSON and skipped. Until the "format" key, if any, the
// values of the keys a vram snapshot reads are held as they were read, at
// most the size of the input.
//
// # Truncated histories
//
// PyTorch keeps a bounded history (max_entries, 100000 by default) that may
// also have been switched on after the process started, so a snapshot's
// history often starts mid-way. [StartsEmpty] decides, and ReadPickle sets
// Truncated to its negation: a history is complete only if it never frees
// a block it did not allocate, never allocates over a held block or
// outside the segments it allocated or mapped, never frees or unmaps
// memory it did not allocate or map, and allocated or mapped every byte of
// the snapshot's segments. Writers of vram JSON set history_truncated
// themselves; the memory package knows whether it dropped events. A replay
// of a truncated history should start from [StateAt](s, 0) rather than
// from an empty allocator.
//
// # Meta keys
//
//   - "source" ([MetaSource]): where the snapshot came from; ReadPickle sets
//     "pytorch".
//   - "allocator_settings.NAME": each entry of a PyTorch snapshot's
//     allocator_settings other than the configuration string, formatted as
//     Python's repr does (True, None, -1, 0.0, [1, 2], (0, 0)) except that
//     strings, also inside lists and dicts, are not quoted:
//     {"1": 0, "2": 0} reads "{1: 0, 2: 0}".
//
// Other keys are free for tools to add; use a prefix of your own.
//
// # Errors
//
// Readers return errors and never panic, whatever the input. Malformed
// input gives a [*ParseError] that names the file (when known) and the
// line (text) or byte offset (JSON, pickle) of the decompressed input:
//
//	trace: model.pickle: offset 1234: pickle: unknown opcode 0xff (not a pickle, or a corrupt one)
//
// A snapshot that parses but breaks the invariants gives a *ParseError
// wrapping an [*InvalidSnapshotError]; input beyond the [Limits], one
// wrapping a [*LimitError]. Input that is almost a trace says what it is:
// a valid gzip stream of unknown content, a JSON object that is neither a
// vram snapshot nor a PyTorch one, a JSON version that is a string rather
// than the number 1.
//
// # Concurrency
//
// The functions are safe for concurrent use on different data. A
// [TextReader] or [TextWriter] is used by one goroutine at a time. Values
// returned by readers belong to the caller, except that Frames slices may
// be shared between events and blocks of one result: do not modify them.
package trace
