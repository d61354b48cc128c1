package memory

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/vramgo/vram/internal/fuzztest"
	"github.com/vramgo/vram/memory/trace"
)

// fuzzConfigs are the settings FuzzAllocator and the random test cycle
// through; there are eight, so that three bits of a fuzz input pick one.
var fuzzConfigs = []string{
	"",
	"policy:pytorch",
	"policy:pytorch,expandable_segments:True",
	"policy:pytorch,max_split_size_mb:40",
	"policy:pytorch,roundup_power2_divisions:[1:2,16:4,>:8],garbage_collection_threshold:0.5",
	"garbage_collection_threshold:0.7,per_process_memory_fraction:0.8",
	"policy:pytorch,expandable_segments:True,per_process_memory_fraction:0.6",
	"roundup_power2_divisions:4,max_split_size_mb:64",
}

// fuzzCapacity is the simulated device of the allocator fuzz target and the
// random test: small enough that out-of-memory paths are reached within a
// few operations.
const fuzzCapacity = 256 * mib

// maxFuzzOps bounds the operations FuzzAllocator runs per input; bytes
// beyond them are ignored, so the engine trims them first when it
// minimises. Each operation costs a full invariant check, so the bound is
// what keeps an execution under a millisecond and a minimisation short.
const maxFuzzOps = 48

// Bits of the first byte of a FuzzAllocator input, above the three that
// pick the configuration.
const (
	fuzzFixCheck   = 1 << 3 // out-of-memory errors run the (slow) fix check
	fuzzPlainArena = 1 << 4 // the arena has no virtual memory
	fuzzFineGran   = 1 << 5 // mapping granularity 64 KiB instead of 2 MiB
	fuzzWaitEvents = 1 << 6 // the event source can wait (EventWaiter)
	fuzzHistory    = 1 << 7 // history recording is on from the start
)

// Operations of opRunner.step, by the low four bits of the operation byte.
const (
	opAllocFirst   = 0  // 0 to 5: allocate
	opFree         = 6  // 6 to 9: free a live block
	opRecordStream = 10 // use a live block on another stream
	opEvents       = 11 // complete events or empty the cache
	opStats        = 12 // reset statistics, change history recording
	opOthers       = 13 // other processes take or give back memory
	opFraction     = 14 // change the per-process memory fraction
	opSnapshot     = 15 // snapshot, validated and written as JSON
)

// liveBlock is a block the runner holds, with what it asked for.
type liveBlock struct {
	b      *Block
	size   int64
	stream Stream
}

// opRunner applies decoded operations to an allocator and, after each one,
// checks the allocator's invariants and compares its statistics with the
// runner's own account of the blocks it holds.
type opRunner struct {
	t        testing.TB
	a        *Allocator
	sim      *SimArena
	ev       *fakeEvents
	live     []liveBlock
	quick    bool  // out-of-memory errors skip the fix check
	others   int64 // bytes the simulated other processes hold
	fraction float64
}

// newOpRunner returns a runner for the settings conf over a SimArena of
// fuzzCapacity bytes; flags are the fuzz* bits above.
func newOpRunner(t testing.TB, conf string, flags byte) *opRunner {
	cfg, err := ParseConfig(conf)
	if err != nil {
		t.Fatalf("ParseConfig(%q): %v", conf, err)
	}
	gran := int64(SimGranularity)
	if flags&fuzzFineGran != 0 {
		gran = 64 << 10
	}
	sim := NewSimArenaGranularity(fuzzCapacity, gran)
	var arena Arena = sim
	if flags&fuzzPlainArena != 0 {
		arena = plainArena{sim}
	}
	ev := newFakeEvents()
	var src EventSource = ev
	if flags&fuzzWaitEvents != 0 {
		src = waitingEvents{ev}
	}
	opts := []Option{WithEvents(src)}
	quick := flags&fuzzFixCheck == 0
	if quick {
		opts = append(opts, withQuickOOM())
	}
	r := &opRunner{t: t, a: New(arena, cfg, opts...), sim: sim, ev: ev, quick: quick, fraction: cfg.PerProcessMemoryFraction}
	if flags&fuzzHistory != 0 {
		r.a.SetHistory(true, 64, false)
	}
	return r
}

// sizeFor maps a byte pair to a request size spread over the interesting
// ranges: kinds 0 to 3 are tiny, small-pool, medium and large requests (the
// only kinds TestConcurrent uses); 4 to 7 are odd byte counts, powers of
// two, sizes around the 1 MiB pool boundary and requests far beyond the
// device.
func sizeFor(kind, v byte) int64 {
	switch kind % 8 {
	case 0:
		return int64(v) * 8
	case 1:
		return int64(v) * 4096
	case 2:
		return int64(v) * 80 * 1024
	case 3:
		return int64(v) * 512 * 1024
	case 4:
		return int64(v)*4099 + 1
	case 5:
		return 1 << (v % 29)
	case 6:
		return 1<<20 + (int64(v)-128)*512
	default:
		if v == 255 {
			return math.MaxInt64
		}
		return (int64(v) + 1) << 34
	}
}

// step runs one operation encoded in op and its two argument bytes, then
// checks everything.
func (r *opRunner) step(op, arg, arg2 byte) {
	switch o := op % 16; {
	case o < opFree:
		r.alloc(sizeFor(op>>4, arg2), Stream(arg%3))
	case o < opRecordStream:
		if len(r.live) > 0 {
			i := int(arg) % len(r.live)
			r.a.Free(r.live[i].b)
			r.live[i] = r.live[len(r.live)-1]
			r.live = r.live[:len(r.live)-1]
		}
	case o == opRecordStream:
		if len(r.live) > 0 {
			r.a.RecordStream(r.live[int(arg)%len(r.live)].b, Stream(arg2%4))
		}
	case o == opEvents:
		if arg%4 == 0 {
			r.a.EmptyCache()
		} else {
			r.ev.completeAll()
		}
	case o == opStats:
		switch arg % 4 {
		case 0:
			r.a.ResetPeakStats()
			s := r.a.Stats()
			for _, st := range []StatArray{s.Allocation, s.AllocatedBytes, s.ReservedBytes, s.ActiveBytes, s.RequestedBytes} {
				for k := range st {
					if st[k].Peak != st[k].Current {
						r.t.Fatalf("after ResetPeakStats: peak %d, current %d", st[k].Peak, st[k].Current)
					}
				}
			}
		case 1:
			r.a.ResetAccumulatedStats()
		default:
			// A bounded ring: a maxEvents of 0 would allocate the
			// default 100,000 events on every execution.
			r.a.SetHistory(arg2%2 == 0, 1+int(arg2)%128, false)
		}
	case o == opOthers:
		// Other processes hold 0 to 159 MiB of the 256; a size that does
		// not fit beside what is in use is refused and changes nothing.
		want := int64(arg2%160) * mib
		if err := r.sim.SetOtherProcesses([]ProcessMemory{{PID: 1000 + int(arg), Name: "other", Bytes: want}}); err == nil {
			r.others = want
		} else if !errors.Is(err, ErrArenaFull) {
			r.t.Fatalf("SetOtherProcesses(%d bytes): %v", want, err)
		}
	case o == opFraction:
		f := float64(arg2%8+1) / 8
		if err := r.a.SetMemoryFraction(f); err != nil {
			r.t.Fatalf("SetMemoryFraction(%v): %v", f, err)
		}
		r.fraction = f
	case o == opSnapshot:
		r.checkSnapshot(arg%8 == 0)
	}
	r.check()
}

// alloc allocates and checks what an allocation promises: a block of at
// least the request on the stream asked for, or an out-of-memory error that
// changed nothing the caller holds, and no such error when the device is
// clearly large enough.
func (r *opRunner) alloc(size int64, stream Stream) {
	idle := r.a.Stats().Active[StatAll].Current == 0
	before := r.a.Stats().AllocatedBytes[StatAll].Current
	held := r.a.Stats().Allocation[StatAll].Current
	b, err := r.a.Alloc(size, stream, "fuzz")
	if err == nil {
		if b.Size() < size || b.Requested() != size || b.Stream() != stream || b.Size()%kMinBlockSize != 0 {
			r.t.Fatalf("Alloc(%d, stream %d) = block of %d bytes (requested %d) on stream %d", size, stream, b.Size(), b.Requested(), b.Stream())
		}
		r.live = append(r.live, liveBlock{b: b, size: size, stream: stream})
		return
	}
	if size > MaxAllocSize && errors.Is(err, ErrTooLarge) {
		if r.a.Stats().AllocatedBytes[StatAll].Current != before {
			r.t.Fatalf("refused Alloc(%d) changed the allocated bytes", size)
		}
		return
	}
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) {
		r.t.Fatalf("Alloc(%d): %v", size, err)
	}
	if oom.Requested != size && size <= math.MaxInt64/2 {
		r.t.Fatalf("OutOfMemoryError.Requested = %d, want %d", oom.Requested, size)
	}
	if oom.Allocated != before || int64(oom.LiveBlocks) != held || r.a.Stats().AllocatedBytes[StatAll].Current != before {
		r.t.Fatalf("failed Alloc(%d): error says %d bytes in %d blocks allocated, stats %d, before %d in %d", size,
			oom.Allocated, oom.LiveBlocks, r.a.Stats().AllocatedBytes[StatAll].Current, before, held)
	}
	if oom.Error() == "" {
		r.t.Fatal("OutOfMemoryError with an empty message")
	}
	if oom.FixConfig != "" {
		if _, err := ParseConfig(oom.FixConfig); err != nil {
			r.t.Fatalf("the fix %q of an out-of-memory error does not parse: %v", oom.FixConfig, err)
		}
	}
	// With nothing held or pending, the whole cache can be released, so a
	// request whose segment fits with room to spare in what the device
	// and the limit leave must succeed.
	if idle && size <= fuzzCapacity {
		usable := int64(fuzzCapacity) - r.others
		if r.fraction > 0 {
			usable = min(usable, int64(float64(fuzzCapacity)*r.fraction))
		}
		rounded := r.a.roundSize(size)
		need := max(allocationSize(rounded), alignUp(rounded, SimGranularity))
		if r.a.mode == modeExpandable {
			// Expandable segments map whole units: 2 MiB in the small
			// pool, 20 MiB in the large one, as PyTorch's do.
			need = max(need, alignUp(rounded, r.a.expandableUnit(poolFor(rounded))))
		}
		if need+2*SimGranularity <= usable {
			r.t.Fatalf("Alloc(%d) failed with nothing held: it needs about %d bytes and %d are usable: %v", size, need, usable, err)
		}
	}
}

// check verifies the allocator's invariants, that its reserve is what the
// arena handed out, and that its statistics match the blocks the runner
// holds, which must be disjoint.
func (r *opRunner) check() {
	check(r.t, r.a, r.sim)
	s := r.a.Stats()
	var allocated, requested, counted int64
	spans := make([][2]uint64, 0, len(r.live))
	for _, l := range r.live {
		if l.size == 0 {
			// Zero-byte blocks take no memory and count in no statistic.
			if l.b.Size() != 0 || l.b.Addr() != 0 {
				r.t.Fatalf("zero-byte block of %d bytes at 0x%x", l.b.Size(), l.b.Addr())
			}
			continue
		}
		counted++
		allocated += l.b.Size()
		requested += l.size
		spans = append(spans, [2]uint64{l.b.Addr(), l.b.Addr() + uint64(l.b.Size())})
	}
	if n := s.Allocation[StatAll].Current; n != counted {
		r.t.Fatalf("%d allocations counted, %d blocks held", n, counted)
	}
	if s.AllocatedBytes[StatAll].Current != allocated || s.RequestedBytes[StatAll].Current != requested {
		r.t.Fatalf("stats say %d bytes allocated (%d requested), the held blocks %d (%d)",
			s.AllocatedBytes[StatAll].Current, s.RequestedBytes[StatAll].Current, allocated, requested)
	}
	if s.ReservedBytes[StatAll].Current > fuzzCapacity {
		r.t.Fatalf("%d bytes reserved on a %d-byte device", s.ReservedBytes[StatAll].Current, fuzzCapacity)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	for i := 1; i < len(spans); i++ {
		if spans[i][0] < spans[i-1][1] {
			r.t.Fatalf("held blocks [0x%x, 0x%x) and [0x%x, 0x%x) overlap", spans[i-1][0], spans[i-1][1], spans[i][0], spans[i][1])
		}
	}
}

// checkSnapshot takes a snapshot and checks it against the statistics;
// with viaJSON, it also checks that the JSON writer and reader carry it
// unchanged (which costs more than the rest of an operation).
func (r *opRunner) checkSnapshot(viaJSON bool) {
	snap := r.a.Snapshot()
	if err := snap.Validate(); err != nil {
		r.t.Fatalf("invalid snapshot: %v", err)
	}
	s := r.a.Stats()
	if snap.Allocated() != s.AllocatedBytes[StatAll].Current || snap.Reserved() != s.ReservedBytes[StatAll].Current ||
		snap.Requested() != s.RequestedBytes[StatAll].Current {
		r.t.Fatalf("snapshot: %d allocated, %d reserved, %d requested; stats: %d, %d, %d", snap.Allocated(), snap.Reserved(),
			snap.Requested(), s.AllocatedBytes[StatAll].Current, s.ReservedBytes[StatAll].Current, s.RequestedBytes[StatAll].Current)
	}
	if !viaJSON {
		return
	}
	var buf bytes.Buffer
	if err := trace.WriteJSON(&buf, snap); err != nil {
		r.t.Fatalf("WriteJSON of a snapshot: %v", err)
	}
	text := buf.String()
	back, err := trace.ReadJSON(&buf)
	if err != nil {
		r.t.Fatalf("ReadJSON of WriteJSON: %v", err)
	}
	buf.Reset()
	if err := trace.WriteJSON(&buf, back); err != nil || buf.String() != text {
		r.t.Fatalf("snapshot changed through JSON (%v):\n%s\nbecame\n%s", err, text, buf.String())
	}
}

// finish frees everything, empties the cache and checks nothing is left.
func (r *opRunner) finish() {
	for _, l := range r.live {
		r.a.Free(l.b)
	}
	r.live = nil
	r.ev.completeAll()
	r.a.EmptyCache()
	r.check()
	s := r.a.Stats()
	if s.ReservedBytes[StatAll].Current != 0 || s.Active[StatAll].Current != 0 || r.sim.Used() != 0 {
		r.t.Fatalf("after freeing everything: reserved %d active %d arena %d", s.ReservedBytes[StatAll].Current, s.Active[StatAll].Current, r.sim.Used())
	}
}

// FuzzAllocator decodes an operation sequence from the input (the first
// byte picks the settings and the fuzz* flags, then three bytes per
// operation, at most maxFuzzOps of them) and checks the allocator after
// every step. Seeds are in testdata/fuzz/FuzzAllocator.
func FuzzAllocator(f *testing.F) {
	f.Add([]byte{0, 0, 1, 10, 6, 0, 0})
	f.Add([]byte{fuzzFixCheck | 1, 0x13, 0, 200, 0x03, 1, 90, 10, 0, 1, 6, 1, 0, 11, 0, 0})
	f.Add([]byte{fuzzPlainArena | 2, 0x70, 0, 255, 0x15, 2, 3, opSnapshot, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		data = data[:min(len(data), 1+3*maxFuzzOps)]
		r := newOpRunner(t, fuzzConfigs[data[0]%8], data[0])
		if r.a.cfgErr != nil {
			// The settings do not suit the arena (expandable segments
			// without virtual memory): every Alloc must say so.
			if _, err := r.a.Alloc(1, 0, ""); !errors.Is(err, r.a.cfgErr) {
				t.Fatalf("Alloc with a bad configuration: %v, want %v", err, r.a.cfgErr)
			}
			return
		}
		for i := 1; i+2 < len(data); i += 3 {
			r.step(data[i], data[i+1], data[i+2])
		}
		r.finish()
	})
}

// TestRandomOps runs long random operation sequences under every setting.
func TestRandomOps(t *testing.T) {
	n := 3000
	if testing.Short() || raceOn {
		n = 600
	}
	for i, conf := range fuzzConfigs {
		t.Run(conf, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			var flags byte
			if i%4 == 0 { // the fix check of out-of-memory errors is slow: two settings get it
				flags |= fuzzFixCheck
			}
			if len(conf)%2 == 1 {
				flags |= fuzzWaitEvents
			}
			r := newOpRunner(t, conf, flags)
			if r.a.cfgErr != nil {
				t.Fatal(r.a.cfgErr)
			}
			for j := 0; j < n; j++ {
				op := byte(rng.IntN(256))
				if rng.IntN(10) < 6 && len(r.live) > 40 {
					op = opFree // keep the live set bounded
				}
				r.step(op, byte(rng.IntN(256)), byte(rng.IntN(256)))
			}
			r.finish()
		})
	}
}

// Seed corpora.

// opSeq builds FuzzAllocator inputs: the first byte, then operations.
type opSeq []byte

func ops(conf int, flags byte) opSeq { return opSeq{byte(conf) | flags} }

// alloc asks for sizeFor(kind, v) bytes on stream.
func (s opSeq) alloc(kind, v byte, stream byte) opSeq {
	return append(s, kind<<4|opAllocFirst, stream, v)
}
func (s opSeq) free(i byte) opSeq          { return append(s, opFree, i, 0) }
func (s opSeq) op(o, arg, arg2 byte) opSeq { return append(s, o, arg, arg2) }

// allocatorSeeds are operation sequences of the kinds a training step or a
// server makes, under every setting, plus random ones.
func allocatorSeeds() []fuzztest.Seed {
	var seeds []fuzztest.Seed
	add := func(name string, s opSeq) { seeds = append(seeds, fuzztest.Seed{Name: name, Args: []any{[]byte(s)}}) }

	// A training step: activations of growing sizes, a workspace, the
	// backward pass freeing them in reverse, the cache kept.
	step := func(s opSeq) opSeq {
		for i := byte(0); i < 6; i++ {
			s = s.alloc(i%4, 20+i*37, 0)
		}
		s = s.alloc(3, 64, 0).free(6)
		for i := byte(0); i < 6; i++ {
			s = s.free(5 - i)
		}
		return s
	}
	for c := range 8 {
		add(fmt.Sprintf("train-step-conf%d", c), step(step(ops(c, 0))).op(opSnapshot, 0, 0))
	}
	// Fragmentation: small and large blocks interleaved, every other one
	// freed, then a request that needs a whole free range, with the fix
	// check of the out-of-memory error that follows.
	frag := ops(1, fuzzFixCheck)
	for i := byte(0); i < 12; i++ {
		frag = frag.alloc(2+i%2, 90+i, 0)
	}
	for i := byte(0); i < 6; i++ {
		frag = frag.free(i)
	}
	add("fragmentation-oom", frag.alloc(3, 250, 0).op(opEvents, 0, 0).alloc(3, 250, 0))
	// Blocks used on other streams: freed, waiting for events, reused.
	add("streams", ops(1, fuzzWaitEvents).alloc(1, 100, 0).op(opRecordStream, 0, 1).alloc(2, 30, 1).
		op(opRecordStream, 1, 2).free(0).free(0).alloc(1, 100, 0).op(opEvents, 1, 0).alloc(1, 100, 0).op(opEvents, 0, 0))
	// Expandable segments growing and shrinking while other processes
	// take memory, and the out-of-memory error that names them.
	add("expandable-others", ops(2, fuzzFixCheck).alloc(3, 100, 0).alloc(3, 100, 0).op(opOthers, 1, 120).
		alloc(3, 200, 0).free(0).op(opEvents, 0, 0).alloc(3, 200, 0).op(opOthers, 2, 0).alloc(3, 200, 0))
	// The vram policy on a fine granularity, and on an arena without
	// virtual memory (fixed segments).
	add("vram-fine", ops(0, fuzzFineGran).alloc(3, 33, 0).alloc(1, 3, 0).alloc(4, 77, 1).free(0).alloc(3, 20, 0).
		op(opEvents, 0, 0).op(opSnapshot, 0, 0))
	add("vram-plain-arena", ops(0, fuzzPlainArena).alloc(3, 33, 0).alloc(0, 3, 0).free(1).alloc(6, 128, 2).op(opEvents, 0, 0))
	// A memory fraction lowered under what is held.
	add("fraction", ops(5, 0).alloc(3, 200, 0).op(opFraction, 0, 1).alloc(3, 10, 0).free(0).alloc(3, 10, 0).op(opFraction, 0, 7))
	// History recording, a reset, snapshots written as JSON.
	add("history", ops(3, fuzzHistory).alloc(0, 9, 0).alloc(5, 21, 1).op(opStats, 2, 4).free(0).alloc(1, 2, 2).
		op(opStats, 0, 0).op(opStats, 1, 0).op(opSnapshot, 0, 0).op(opStats, 2, 1))
	// Requests beyond the device, of zero bytes, of powers of two.
	add("extremes", ops(4, 0).alloc(7, 255, 0).alloc(7, 0, 1).alloc(0, 0, 0).alloc(5, 28, 0).alloc(5, 9, 2).alloc(6, 0, 0).alloc(6, 255, 1))
	add("extremes-fix-check", ops(6, fuzzFixCheck).alloc(7, 3, 0).alloc(5, 27, 0).alloc(7, 0, 0))
	// Random sequences, one per setting.
	for c := range 8 {
		rng := rand.New(rand.NewPCG(uint64(c), 1))
		s := ops(c, byte(rng.IntN(256))&^(fuzzFixCheck|7))
		for range maxFuzzOps {
			s = append(s, byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)))
		}
		add(fmt.Sprintf("random-conf%d", c), s)
	}
	return seeds
}

// configSeeds are VRAM_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF strings as
// people write them, and mistakes.
var configSeeds = []string{
	"expandable_segments:True",
	"max_split_size_mb:128",
	"garbage_collection_threshold:0.6,max_split_size_mb:128",
	"roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
	"roundup_power2_divisions:4",
	"backend:native,release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:False",
	"policy:pytorch , expandable_segments : true,\tper_process_memory_fraction:0.5",
	"expandable_segments:True,expandable_segments:False",
	"per_process_memory_fraction:1,garbage_collection_threshold:0.99",
	"backend:cudaMallocAsync",
	"max_split_size_mb:20",
	"garbage_collection_threshold:1",
	"roundup_power2_divisions:[>:8]",
	"roundup_power2_divisions:[2:4,1:2]",
	"roundup_power2_divisions:[1:3]",
	"per_process_memory_fraction:NaN",
	"max_split_size_mb:99999999999999999999",
	"expandable_segments",
	"policy:tpu",
	"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
	"max_split_size_mb=512",
	"max_split_size_mb:51 2",
	"pinned_num_register_threads:8,pinned_reserve_segment_size_mb:64,graph_capture_record_stream_reuse:True,pinned_use_background_threads:True",
}

// TestFuzzSeeds checks the committed seed corpora of this package (run with
// -update-fuzz-seeds to rewrite them).
func TestFuzzSeeds(t *testing.T) {
	fuzztest.Check(t, "FuzzAllocator", allocatorSeeds(), 1+3*maxFuzzOps)
	var conf []fuzztest.Seed
	for i, s := range configSeeds {
		conf = append(conf, fuzztest.Seed{Name: fmt.Sprintf("%02d", i), Args: []any{s}})
	}
	fuzztest.Check(t, "FuzzParseConfig", conf, maxFuzzConfig)
}

// TestConcurrent allocates and frees from several goroutines at once,
// with a hook and a checker running beside them; run it with -race.
func TestConcurrent(t *testing.T) {
	for i, conf := range []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", ""} {
		t.Run(conf, func(t *testing.T) {
			ev := newFakeEvents()
			opts := []Option{WithEvents(ev)}
			if i != 0 { // out-of-memory fix checks in one of them only: they are slow
				opts = append(opts, withQuickOOM())
			}
			a, sim := newTestAllocator(t, conf, 512*mib, opts...)
			a.OnOOM(func() { ev.completeAll() })
			a.SetHistory(true, 1000, false)
			var wg sync.WaitGroup
			stop := make(chan struct{})
			var checkErr error
			var checkOnce sync.Once
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := a.checkInvariants(); err != nil {
						checkOnce.Do(func() { checkErr = err })
					}
					_ = a.Summary()
					_ = a.Snapshot()
				}
			}()
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 7))
					var live []*Block
					for i := 0; i < 1500; i++ {
						if len(live) > 0 && (rng.IntN(2) == 0 || len(live) > 30) {
							k := rng.IntN(len(live))
							if rng.IntN(4) == 0 {
								a.RecordStream(live[k], Stream(rng.IntN(3)))
							}
							a.Free(live[k])
							live[k] = live[len(live)-1]
							live = live[:len(live)-1]
							continue
						}
						b, err := a.Alloc(sizeFor(byte(rng.IntN(4)), byte(rng.IntN(256))), Stream(g%2), "g")
						if err != nil {
							var oom *OutOfMemoryError
							if !errors.As(err, &oom) {
								t.Error(err)
								return
							}
							continue
						}
						_ = b.Addr() + uint64(b.Size()) // read while held
						live = append(live, b)
					}
					for _, b := range live {
						a.Free(b)
					}
				}(g)
			}
			wg.Wait()
			close(stop)
			if checkErr != nil {
				t.Fatal(checkErr)
			}
			ev.completeAll()
			a.EmptyCache()
			check(t, a, sim)
			if r := a.Stats().ReservedBytes[StatAll].Current; r != 0 {
				t.Fatalf("%d bytes left reserved", r)
			}
		})
	}
}
