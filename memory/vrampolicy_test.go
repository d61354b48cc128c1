package memory

import (
	"slices"
	"testing"
)

// TestVRAMMapsAhead checks step 5 of policy:vram: a request of at most
// vramAheadMax bytes that grows a segment maps up to vramAheadChunk in
// all, the part ahead of the window as a mapping of its own, within 1/24
// above the peak (whatever the slack before the first free for requests
// of at least vramLoadAheadMin bytes), and falls back to the window alone
// when the device has no room for more.
func TestVRAMMapsAhead(t *testing.T) {
	const (
		base = 480 * mib // allocated first: a peak whose slack is 20 MiB
		gran = SimGranularity
	)
	tests := []struct {
		name   string
		base   int64 // allocated first (0: nothing)
		others int64 // held by other processes on the simulated device
		freed  bool  // a block is allocated and freed first: loading is over
		limit  int64 // the allocator's memory limit (0: the device)
		size   int64
		// reserved is the growth of the reserve for the request;
		// maps the mappings it makes.
		reserved int64
		maps     int64
		// more is how many more requests of size bytes then come from
		// the memory mapped ahead.
		more int
	}{
		{name: "small request under a large peak", base: base, size: 3 * mib, reserved: vramAheadChunk, maps: 2, more: 3},
		{name: "largest request that maps ahead", base: base, size: vramAheadMax, reserved: vramAheadChunk, maps: 2, more: 3},
		// Step 6 maps ahead for it only where the slack leaves at
		// least vramClimbAheadMin, 64 MiB; here it leaves 18.
		{name: "larger request maps only its window", base: base, size: vramAheadMax + 1, reserved: vramAheadMax + gran, maps: 1},
		{name: "small pool", base: base, size: 4096, reserved: vramAheadChunk, maps: 2, more: 3},
		// The slack of a 3 MiB peak is 128 KiB: no room ahead, and the
		// freed block's 2 MiB are given back to stay within it.
		{name: "no slack above the peak", freed: true, size: 3 * mib, reserved: 4*mib - 2*mib, maps: 1},
		// Before the first free, a 3 MiB request maps 20 MiB whatever
		// the slack; the next five like it come from there.
		{name: "loading without slack", size: vramLoadAheadMin, reserved: vramAheadChunk, maps: 2, more: 5},
		{name: "loading, largest request", size: vramAheadMax, reserved: vramAheadChunk, maps: 2, more: 3},
		// Smaller requests keep to the slack while loading too.
		{name: "loading, smaller request", size: vramLoadAheadMin - mib/2, reserved: 4 * mib, maps: 1},
		// The device has 8 MiB free: the 20 MiB mapping is refused and
		// the request maps its 4 MiB window alone, without an OOM.
		{name: "device without room ahead", base: base, others: 1<<30 - base - 8*mib, size: 3 * mib, reserved: 4 * mib, maps: 1},
		// A limit 8 MiB above the reserve: only 4 MiB ahead.
		{name: "limit without room ahead", base: base, limit: base + 8*mib, size: 3 * mib, reserved: 8 * mib, maps: 2, more: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, sim := newTestAllocator(t, "", 1<<30)
			if tc.base > 0 {
				mustAlloc(t, a, tc.base, 0)
			}
			if tc.freed {
				a.Free(mustAlloc(t, a, 512, 0))
			}
			if tc.others > 0 {
				if err := sim.SetOtherProcesses([]ProcessMemory{{PID: 1, Bytes: tc.others}}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.limit > 0 {
				if err := a.SetMemoryFraction(float64(tc.limit) / (1 << 30)); err != nil {
					t.Fatal(err)
				}
			}
			refused := sim.Counts().Refused
			before := a.Stats()
			b := mustAlloc(t, a, tc.size, 0)
			s := a.Stats()
			if got := s.ReservedBytes[StatAll].Current - before.ReservedBytes[StatAll].Current; got != tc.reserved {
				t.Errorf("the reserve grew by %d bytes, want %d", got, tc.reserved)
			}
			if got := s.NumMaps - before.NumMaps; got != tc.maps {
				t.Errorf("%d mappings, want %d", got, tc.maps)
			}
			if s.NumOOMs != 0 || s.NumAllocRetries != 0 {
				t.Errorf("%d OOMs, %d retries", s.NumOOMs, s.NumAllocRetries)
			}
			// Only the device's refusal makes the policy try again.
			if got, want := sim.Counts().Refused-refused, min(tc.others, 1); got != want {
				t.Errorf("%d mappings refused, want %d", got, want)
			}
			if peak := max(s.AllocatedBytes[StatAll].Peak, 1); tc.maps == 2 && (tc.base > 0 || tc.freed) && s.ReservedBytes[StatAll].Current > peak+peak/vramSlackDiv {
				t.Errorf("reserve %d above the peak %d and its slack", s.ReservedBytes[StatAll].Current, peak)
			}
			if tc.maps == 2 {
				// The memory ahead is a mapping of its own, starting
				// where the window's granules end.
				at := b.addr + uint64(alignUp(b.size, gran))
				if c := a.chunkOf(b, at); c.addr != at || c.addr+uint64(c.size) != b.addr+uint64(tc.reserved) {
					t.Errorf("mapping ahead at 0x%x: got [0x%x, +%d)", at, c.addr, c.size)
				}
				// Tensors like it then come from the memory mapped
				// ahead, with no driver call.
				for i := 0; i < tc.more; i++ {
					mustAlloc(t, a, tc.size, 0)
				}
				if n := a.Stats().NumMaps - s.NumMaps; n != 0 {
					t.Errorf("%d more mappings for %d more requests of %d bytes", n, tc.more, tc.size)
				}
			}
			check(t, a, sim)
		})
	}
}

// TestVRAMMapsAheadWhileClimbing checks step 6 of policy:vram: a request
// of more than vramAheadMax bytes that raises the peak of the allocated
// bytes and grows a segment maps ahead, as mappings of their own, all the
// room the slack leaves (a 24th of the new peak) when that is at least
// vramClimbAheadMin, and the next tensors come from there with no driver
// call. Less room, a request below the peak, a memory limit or a device
// without the room leave the window alone mapped, without an OOM.
func TestVRAMMapsAheadWhileClimbing(t *testing.T) {
	const (
		capacity = 4 << 30 // shape-only: a SimArena holds no memory
		gran     = SimGranularity
	)
	tests := []struct {
		name string
		// first is allocated and freed first on stream 1 (0: nothing),
		// so that the request stays below the peak.
		first  int64
		others int64 // held by other processes on the simulated device
		limit  int64 // the allocator's memory limit (0: the device)
		size   int64
		ahead  int64 // bytes mapped past the window's granules
	}{
		{name: "a 24th of the peak is the minimum", size: 1536 * mib, ahead: 64 * mib},
		{name: "a 24th of a larger peak", size: 2400 * mib, ahead: 100 * mib},
		{name: "odd size", size: 2400*mib + 3, ahead: 98 * mib},
		// 1500 MiB / 24 = 62.5 MiB: less than vramClimbAheadMin.
		{name: "less room than the minimum", size: 1500 * mib},
		{name: "request below the peak", first: 1600 * mib, size: 1000 * mib},
		{name: "limit without room ahead", limit: 1536*mib + 32*mib, size: 1536 * mib},
		// The device refuses the 1600 MiB mapping: the request maps its
		// window alone.
		{name: "device without room ahead", others: capacity - 1536*mib - 32*mib, size: 1536 * mib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, sim := newTestAllocator(t, "", capacity)
			if tc.first > 0 {
				a.Free(mustAlloc(t, a, tc.first, 1))
			}
			if tc.others > 0 {
				if err := sim.SetOtherProcesses([]ProcessMemory{{PID: 1, Bytes: tc.others}}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.limit > 0 {
				if err := a.SetMemoryFraction(float64(tc.limit) / capacity); err != nil {
					t.Fatal(err)
				}
			}
			refused := sim.Counts().Refused
			before := a.Stats()
			b := mustAlloc(t, a, tc.size, 0)
			s := a.Stats()
			if s.NumOOMs != 0 || s.NumAllocRetries != 0 {
				t.Errorf("%d OOMs, %d retries", s.NumOOMs, s.NumAllocRetries)
			}
			if got, want := sim.Counts().Refused-refused, min(tc.others, 1); got != want {
				t.Errorf("%d mappings refused, want %d", got, want)
			}
			end := b.addr + uint64(alignUp(b.size, gran))
			if tc.first == 0 {
				if got, want := s.ReservedBytes[StatAll].Current-before.ReservedBytes[StatAll].Current, alignUp(tc.size, gran)+tc.ahead; got != want {
					t.Errorf("the reserve grew by %d MiB, want %d MiB", got/mib, want/mib)
				}
			}
			if peak := s.AllocatedBytes[StatAll].Peak; s.ReservedBytes[StatAll].Current > max(before.ReservedBytes[StatAll].Peak, peak+peak/vramSlackDiv) {
				t.Errorf("reserve %d above the peak %d and its slack", s.ReservedBytes[StatAll].Current, peak)
			}
			next := b.next
			for next != nil && next.addr < end {
				next = next.next
			}
			if tc.ahead == 0 {
				if next != nil && next.state != stateUnmapped {
					t.Errorf("memory mapped past the window: %v block [0x%x, +%d)", next.state, next.addr, next.size)
				}
				check(t, a, sim)
				return
			}
			// The memory ahead starts a mapping of its own where the
			// window's granules end, and the next tensors come from it.
			if c := a.chunkOf(b, end); c.addr != end {
				t.Errorf("mapping ahead at 0x%x: got [0x%x, +%d)", end, c.addr, c.size)
			}
			maps := s.NumMaps
			for _, n := range []int64{tc.ahead / 2, tc.ahead - tc.ahead/2} {
				mustAlloc(t, a, alignDown(n, gran), 0)
			}
			if n := a.Stats().NumMaps - maps; n != 0 {
				t.Errorf("%d more mappings for the tensors after it, in the %d MiB mapped ahead", n, tc.ahead/mib)
			}
			check(t, a, sim)
		})
	}
}

// TestVRAMReclaimsWhatIsNeeded checks step 3 of policy:vram: a request
// just over the budget unmaps the lowest chunks of a large free block
// until they hold vramReclaimFactor times what is over, not the whole
// block, and a request far over it still unmaps all it needs. A request of
// at least a vramLongDiv-th of the peak unmaps of a block freed within the
// last vramRecentFree allocations only the chunks for what is over. The
// large requests come on another stream, so that the freed block cannot
// serve them.
func TestVRAMReclaimsWhatIsNeeded(t *testing.T) {
	tests := []struct {
		name   string
		size   int64 // the request over the budget, in the small or the large pool
		stream Stream
		age    int // allocations served from the cache between the free and the request
		// unmapped is the most the request may give back, least the
		// least (the request's size when 0); kept the least that stays
		// mapped of the freed 480 MiB.
		unmapped, least, kept int64
	}{
		{name: "small pool, 2 MiB over", size: 4096, unmapped: vramReclaimFactor*2*mib + 80*mib, kept: 400 * mib},
		{name: "large pool, 4 MiB over", size: 4 * mib, stream: 1, unmapped: vramReclaimFactor*4*mib + 80*mib, kept: 300 * mib},
		{name: "large pool, 400 MiB over", size: 400 * mib, stream: 1, unmapped: 480 * mib, kept: 0},
		// The freed block's chunks are 64 MiB: one holds what is over.
		{name: "large request, block just freed", size: 32 * mib, stream: 1, unmapped: 64 * mib, kept: 416 * mib},
		{name: "large request, block freed earlier", size: 32 * mib, stream: 1, age: vramRecentFree, unmapped: 480 * mib,
			least: 480 * mib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, sim := newTestAllocator(t, "", 1<<30)
			x := mustAlloc(t, a, 480*mib, 0)
			mustAlloc(t, a, 20*mib, 0)
			if tc.age > 0 {
				// A small block to allocate again from the cache.
				a.Free(mustAlloc(t, a, mib, 0))
			}
			// A limit at the reserve: any new mapping is over the budget.
			reserved := a.Stats().ReservedBytes[StatAll].Current
			if err := a.SetMemoryFraction(float64(reserved) / (1 << 30)); err != nil {
				t.Fatal(err)
			}
			a.Free(x)
			for i := 0; i < tc.age; i++ {
				b := mustAlloc(t, a, mib, 0)
				if i < tc.age-1 {
					a.Free(b)
				}
			}
			before := a.Stats()
			mustAlloc(t, a, tc.size, tc.stream)
			s := a.Stats()
			if s.NumMaps-before.NumMaps == 0 {
				t.Fatalf("the request mapped nothing")
			}
			gone := before.ReservedBytes[StatAll].Current + alignUp(tc.size, SimGranularity) - s.ReservedBytes[StatAll].Current
			least := tc.least
			if least == 0 {
				least = alignUp(tc.size, SimGranularity)
			}
			if gone > tc.unmapped || gone < least {
				t.Errorf("unmapped %d MiB for a request of %d bytes, want %d to %d MiB", gone/mib, tc.size,
					least/mib, tc.unmapped/mib)
			}
			if kept := 480*mib - gone; kept < tc.kept {
				t.Errorf("%d MiB of the freed block still mapped, want at least %d", kept/mib, tc.kept/mib)
			}
			if s.NumOOMs != 0 || s.NumAllocRetries != 0 {
				t.Errorf("%d OOMs, %d retries", s.NumOOMs, s.NumAllocRetries)
			}
			check(t, a, sim)
		})
	}
}

// TestVRAMChunker checks how step 4 of policy:vram cuts a mapping: below a
// peak of 16 times vramSingleChunk, one chunk up to vramSingleChunk and
// power-of-two chunks of at most a sixth of the range beyond; above it,
// chunks of a sixteenth of the peak (at most vramPeakChunkMax) from the
// range's start, the last one holding the rest.
func TestVRAMChunker(t *testing.T) {
	const gran = SimGranularity
	tests := []struct {
		name      string
		peak      int64
		off, size int64 // the range, from the segment's base
		want      []int64
	}{
		{"small range, no peak", 0, 0, 40 * mib, []int64{40 * mib}},
		{"large range, no peak", 0, 0, 200 * mib, []int64{32 * mib, 32 * mib, 32 * mib, 32 * mib, 32 * mib, 32 * mib, 8 * mib}},
		{"unaligned start, no peak", 0, 2 * mib, 60 * mib, []int64{2 * mib, 4 * mib, 8 * mib, 16 * mib, 16 * mib, 8 * mib, 4 * mib, 2 * mib}},
		{"peak whose sixteenth is one single chunk", 16 * vramSingleChunk, 0, 200 * mib, []int64{32 * mib, 32 * mib, 32 * mib, 32 * mib, 32 * mib, 32 * mib, 8 * mib}},
		{"1 GiB peak", 1 << 30, 2 * mib, 200 * mib, []int64{64 * mib, 64 * mib, 64 * mib, 8 * mib}},
		{"sixteenth rounded down to granules", 1<<30 + 31*mib, 0, 130 * mib, []int64{64 * mib, 64 * mib, 2 * mib}},
		{"large peak, at most vramPeakChunkMax", 4 << 30, 0, 300 * mib, []int64{128 * mib, 128 * mib, 44 * mib}},
		{"large peak, range within one chunk", 4 << 30, 6 * mib, 100 * mib, []int64{100 * mib}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seg := &segment{addr: 1 << 40}
			lo := seg.addr + uint64(tc.off)
			at := lo
			var got []int64
			vramChunker(gran, tc.peak)(seg, lo, lo+uint64(tc.size), func(l uint64, n int64) bool {
				if l != at {
					t.Fatalf("chunk at +%d, want +%d", l-lo, at-lo)
				}
				at += uint64(n)
				got = append(got, n)
				return true
			})
			if !slices.Equal(got, tc.want) {
				t.Errorf("chunks %v MiB, want %v MiB", inMiB(got), inMiB(tc.want))
			}
			// A chunker stops when emit says so.
			n := 0
			vramChunker(gran, tc.peak)(seg, lo, lo+uint64(tc.size), func(uint64, int64) bool { n++; return false })
			if n != 1 {
				t.Errorf("%d chunks emitted after emit returned false, want 1", n)
			}
		})
	}
}

// TestVRAMChunksFollowThePeak checks that the allocator cuts mappings by
// the peak of the allocated bytes so far: after a 1 GiB tensor, a 200 MiB
// one on another stream maps four chunks (three of 64 MiB and the rest).
func TestVRAMChunksFollowThePeak(t *testing.T) {
	a, sim := newTestAllocator(t, "", 4<<30)
	a.Free(mustAlloc(t, a, 1<<30, 0))
	before := a.Stats().NumMaps
	b := mustAlloc(t, a, 200*mib, 1)
	if n := a.Stats().NumMaps - before; n != 4 {
		t.Errorf("200 MiB after a 1 GiB peak took %d mappings, want 4", n)
	}
	if c := a.chunkOf(b, b.addr); c.addr != b.addr || c.size != 64*mib {
		t.Errorf("first chunk [0x%x, +%d), want [0x%x, +%d)", c.addr, c.size, b.addr, 64*mib)
	}
	check(t, a, sim)
}

func inMiB(sizes []int64) []float64 {
	out := make([]float64, len(sizes))
	for i, n := range sizes {
		out[i] = float64(n) / mib
	}
	return out
}

// TestVRAMPlacementOrder checks the order in which step 2 of policy:vram
// ranks windows: less memory to map, then one hole rather than two, then
// the lower address, whatever the size of the run.
func TestVRAMPlacementOrder(t *testing.T) {
	tests := []struct {
		name string
		p, q placement
		want bool // p better than q
	}{
		{name: "less to map", p: placement{at: 900, need: 2 * mib}, q: placement{at: 100, need: 4 * mib, edge: true}, want: true},
		{name: "more to map", p: placement{at: 100, need: 4 * mib, edge: true}, q: placement{at: 900, need: 2 * mib}, want: false},
		{name: "one hole rather than two", p: placement{at: 900, need: 2 * mib, edge: true}, q: placement{at: 100, need: 2 * mib}, want: true},
		{name: "two holes rather than one", p: placement{at: 100, need: 2 * mib}, q: placement{at: 900, need: 2 * mib, edge: true}, want: false},
		{name: "lower address", p: placement{at: 100, need: 2 * mib, edge: true}, q: placement{at: 900, need: 2 * mib, edge: true}, want: true},
		{name: "higher address", p: placement{at: 900, need: 2 * mib, edge: true}, q: placement{at: 100, need: 2 * mib, edge: true}, want: false},
		{name: "itself", p: placement{at: 100, need: 2 * mib}, q: placement{at: 100, need: 2 * mib}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.better(tc.q); got != tc.want {
				t.Errorf("%+v better than %+v = %v, want %v", tc.p, tc.q, got, tc.want)
			}
		})
	}
}

// TestVRAMPlacesInTheLowerHole checks step 2 of policy:vram on an
// allocator: of two unmapped holes that a request fits in, each needing
// the request's size mapped, it takes the lower one, even when it is the
// larger.
func TestVRAMPlacesInTheLowerHole(t *testing.T) {
	tests := []struct {
		name         string
		lower, upper int64 // sizes of the two holes, lower address first
		size         int64 // the request
		inLower      bool  // placed at the lower hole's start
	}{
		{name: "lower hole larger", lower: 200 * mib, upper: 100 * mib, size: 64 * mib, inLower: true},
		{name: "lower hole smaller", lower: 100 * mib, upper: 200 * mib, size: 64 * mib, inLower: true},
		{name: "only the upper hole fits", lower: 60 * mib, upper: 200 * mib, size: 64 * mib, inLower: false},
	}
	const sep = 8 * mib // allocated between the holes: no step 5 or 6
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, sim := newTestAllocator(t, "", 4<<30)
			// A segment of the small pool, for the allocations
			// below that age the freed blocks.
			mustAlloc(t, a, 512, 0)
			small := a.Stats().ReservedBytes[StatAll].Current
			lo := mustAlloc(t, a, tc.lower, 0)
			mustAlloc(t, a, sep, 0)
			up := mustAlloc(t, a, tc.upper, 0)
			mustAlloc(t, a, sep, 0)
			loAddr, upAddr := lo.Addr(), up.Addr()
			a.Free(lo)
			a.Free(up)
			for i := 0; i < vramRecentFree; i++ {
				mustAlloc(t, a, 512, 0)
			}
			// Over the budget (the reserve at the peak plus 1/24),
			// with blocks freed more than vramRecentFree allocations
			// before: step 3 unmaps both freed blocks, and the
			// request goes to the segment's unmapped end.
			mustAlloc(t, a, tc.lower+tc.upper, 0)
			if s := a.Stats(); s.ReservedBytes[StatAll].Current != small+tc.lower+tc.upper+2*sep {
				t.Fatalf("reserved %d MiB, want both holes unmapped (%d MiB)", s.ReservedBytes[StatAll].Current/mib,
					(small+tc.lower+tc.upper+2*sep)/mib)
			}
			b := mustAlloc(t, a, tc.size, 0)
			want := upAddr
			if tc.inLower {
				want = loAddr
			}
			if b.Addr() != want {
				t.Errorf("placed at %#x, want %#x (lower hole %#x, upper %#x)", b.Addr(), want, loAddr, upAddr)
			}
			check(t, a, sim)
		})
	}
}

// TestVRAMResidualStream checks step 1's placement of long-lived requests
// on the layers of a transformer encoder serving one request, as traced on
// synth_bert_infer_varlen_long: each layer's output (one hidden state, H)
// is allocated while the layer's input is still live and lives into the
// next layer. By best fit the output lands next to the input, in a hole
// that the layer's short-lived tensors leave, and when the input dies the
// working set has moved up by H: every layer then unmaps a hole below it
// and maps as much above (the slack, a 24th of the peak, is less than H).
// Placed next to a neighbour that outlives it, the output alternates
// between the ends of the free space, and once the layers' roles are
// known the driver calls stop.
func TestVRAMResidualStream(t *testing.T) {
	tests := []struct {
		name      string
		h, scores int64 // a hidden state and one head group's scores
		weights   int64 // allocated first, live throughout
	}{
		{name: "long sequences", h: 58 * mib, scores: 298 * mib, weights: 200 * mib},
		{name: "shorter sequences", h: 40 * mib, scores: 162 * mib, weights: 240 * mib},
	}
	const layers = 24
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, sim := newTestAllocator(t, "", 8<<30)
			for w := int64(0); w < tc.weights; w += 20 * mib {
				mustAlloc(t, a, 20*mib, 0)
			}
			h := tc.h
			x := mustAlloc(t, a, h, 0) // the embeddings: the first layer's input
			var calls []int64
			for l := 0; l < layers; l++ {
				before := a.Stats()
				live := map[string]*Block{}
				al := func(name string, size int64) { live[name] = mustAlloc(t, a, size, 0) }
				fr := func(name string) { a.Free(live[name]); delete(live, name) }
				// The layer, in the order synth_bert_infer_varlen_long
				// allocates and frees it: QKV, the scores of three
				// head groups, the attention output and projections,
				// then the feed-forward block and the layer output.
				al("qkv", 3*h)
				al("s1", tc.scores)
				al("s2", tc.scores)
				fr("s1")
				al("s3", tc.scores)
				fr("s2")
				al("e", h)
				fr("s3")
				fr("qkv")
				al("f", h)
				fr("e")
				al("g", h)
				fr("f")
				al("hh", h)
				fr("g")
				a.Free(x)
				al("i", h)
				fr("hh")
				al("j", 4*h)
				al("k", 4*h)
				fr("j")
				al("l", h)
				fr("k")
				al("m", h)
				fr("l")
				x = mustAlloc(t, a, h, 0) // the layer output
				fr("m")
				fr("i")
				after := a.Stats()
				calls = append(calls, after.NumMaps+after.NumUnmaps-before.NumMaps-before.NumUnmaps)
			}
			s := a.Stats()
			ratio := float64(s.ReservedBytes[StatAll].Peak) / float64(s.RequestedBytes[StatAll].Peak)
			t.Logf("maps and unmaps per layer %v, peak reserved %.4fx the peak requested", calls, ratio)
			for l := layers / 2; l < layers; l++ {
				if calls[l] != 0 {
					t.Errorf("layer %d still maps or unmaps memory: %v", l, calls)
					break
				}
			}
			if ratio > 1.05 {
				t.Errorf("peak reserved %.4fx the peak requested, want at most 1.05", ratio)
			}
			check(t, a, sim)
		})
	}
}

// TestVRAMRequestStart checks the request boundary of step 1: once the
// allocated bytes have come back from above halfway to their peak (a
// request's working set given back), the next request of at least a 16th
// of the peak takes the lowest-addressed free block that fits rather than
// the best fit; smaller requests and the rest of the request keep best
// fit.
func TestVRAMRequestStart(t *testing.T) {
	tests := []struct {
		name  string
		sizes []int64  // the next request's first allocations
		want  []string // the hole each lands in: "low" (64 MiB) or "high" (48 MiB)
	}{
		{name: "first large request", sizes: []int64{40 * mib, 40 * mib}, want: []string{"low", "high"}},
		{name: "a smaller request first", sizes: []int64{8 * mib, 40 * mib}, want: []string{"high", "low"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, sim := newTestAllocator(t, "", 8<<30)
			for i := 0; i < 5; i++ {
				mustAlloc(t, a, 20*mib, 0) // weights
			}
			a.Free(mustAlloc(t, a, 20*mib, 0)) // a warm-up: loading ends
			// The request before: two large tensors given back and two
			// small ones that outlive it, one between them.
			low := mustAlloc(t, a, 64*mib, 0)
			mustAlloc(t, a, 8*mib, 0)
			high := mustAlloc(t, a, 48*mib, 0)
			mustAlloc(t, a, 8*mib, 0)
			lowAt, highAt := low.addr, high.addr
			a.Free(low)
			a.Free(high)
			for i, size := range tc.sizes {
				b := mustAlloc(t, a, size, 0)
				var got string
				switch {
				case b.addr >= lowAt && b.end() <= lowAt+64*mib:
					got = "low"
				case b.addr >= highAt && b.end() <= highAt+48*mib:
					got = "high"
				}
				if got != tc.want[i] {
					t.Errorf("request %d of %d MiB landed in the %q hole, want %q", i, size/mib, got, tc.want[i])
				}
			}
			check(t, a, sim)
		})
	}
}

// TestVRAMLearnsLifetimes checks the lifetime prediction behind step 1:
// a request's role is its size and the sizes of the requests before it,
// the lifetime of a role is what its last block lived, in allocations,
// requests of the small pool are not predicted, and the table of roles
// starts again when full.
func TestVRAMLearnsLifetimes(t *testing.T) {
	tests := []struct {
		name    string
		context []int64 // sizes requested before the block, freed at once
		size    int64
		between int     // allocations while the block lives
		again   []int64 // the context before the request predicted
		known   bool    // the prediction has a lifetime
		long    bool
	}{
		{name: "same role, long", context: []int64{8 * mib, 16 * mib, 4 * mib}, size: 64 * mib, between: 12,
			again: []int64{8 * mib, 16 * mib, 4 * mib}, known: true, long: true},
		{name: "same role, short", context: []int64{8 * mib, 16 * mib, 4 * mib}, size: 64 * mib, between: 2,
			again: []int64{8 * mib, 16 * mib, 4 * mib}, known: true},
		{name: "other context", context: []int64{8 * mib, 16 * mib, 4 * mib}, size: 64 * mib, between: 12,
			again: []int64{8 * mib, 16 * mib, 6 * mib}},
		{name: "small pool", context: []int64{8 * mib, 16 * mib, 4 * mib}, size: 512 << 10, between: 12,
			again: []int64{8 * mib, 16 * mib, 4 * mib}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, sim := newTestAllocator(t, "", 4<<30)
			run := func(sizes []int64) {
				for _, s := range sizes {
					a.Free(mustAlloc(t, a, s, 0))
				}
			}
			run(tc.context)
			b := mustAlloc(t, a, tc.size, 0)
			for i := 0; i < tc.between; i++ {
				a.Free(mustAlloc(t, a, 2*mib, 0))
			}
			a.Free(b)
			run(tc.again)
			a.mu.Lock()
			l := a.predictLife(a.roundSize(tc.size))
			tick := a.tick
			a.mu.Unlock()
			if known := l.dies != 0; known != tc.known || l.long != tc.long {
				t.Errorf("prediction %+v at tick %d: known %v, long %v; want %v, %v", l, tick, known, l.long, tc.known, tc.long)
			}
			if tc.known && l.dies != tick+uint64(tc.between) {
				t.Errorf("expected free at tick %d, want %d", l.dies, tick+uint64(tc.between))
			}
			check(t, a, sim)
		})
	}
	t.Run("table full", func(t *testing.T) {
		a, _ := newTestAllocator(t, "", 4<<30)
		a.mu.Lock()
		defer a.mu.Unlock()
		blk := &Block{seg: &segment{kind: poolLarge}, born: 1}
		for i := 0; i < vramMaxRoles+1; i++ {
			blk.role = uint64(i)
			a.learnLife(blk)
		}
		if n := len(a.lifetimes); n != 1 {
			t.Errorf("%d roles remembered after %d, want the table started again", n, vramMaxRoles+1)
		}
	})
}
