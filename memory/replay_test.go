package memory

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

// traceFiles are the traces in testdata: eight recorded from PyTorch 2.11
// on an H200 (resnet50_train from DESIGN.md, the others by
// testdata/record_traces.py; bert_infer_varlen_cap1228MiB is
// bert_infer_varlen run under a 1228 MiB cap) and ten synthetic ones written by
// testdata/gentraces, three of them (the _seed files) the generators of
// two others drawn with other seeds. TestPolicies replays these and any
// other trace found there.
var traceFiles = []string{
	"resnet50_train.trace.gz",
	"gpt2_train_varlen.trace.gz",
	"bert_train_varlen.trace.gz",
	"gpt2_generate_varbatch.trace.gz",
	"resnet50_infer_varbatch.trace.gz",
	"bert_infer_varlen.trace.gz",
	"bert_infer_varlen_cap1228MiB.trace.gz",
	"two_models.trace.gz",
	"gpt_generate_kvcache.trace.gz",
	"synth_transformer_train_varlen.trace.gz",
	"synth_gpt_generate_varbatch.trace.gz",
	"synth_resnet50_infer_varbatch.trace.gz",
	"synth_bert_infer_varlen.trace.gz",
	"synth_bert_infer_varlen_long.trace.gz",
	"synth_gpt_serve_kvcache.trace.gz",
	"synth_two_models.trace.gz",
	"synth_resnet50_infer_varbatch_seed3.trace.gz",
	"synth_resnet50_infer_varbatch_seed5.trace.gz",
	"synth_transformer_train_varlen_seed1.trace.gz",
	// Recorded on an H100 on 2026-12-06, after the policy's tuning: the
	// same kinds of run with other requests (record_traces.py --seed), and
	// ViT-B/16 inference, a workload the policy had not seen.
	"bert_infer_varlen_seed1.trace.gz",
	"bert_infer_varlen_seed2.trace.gz",
	"resnet50_infer_varbatch_seed1.trace.gz",
	"resnet50_infer_varbatch_seed2.trace.gz",
	"vit_infer_varbatch.trace.gz",
	"vit_infer_varbatch_seed1.trace.gz",
}

// loadTraceHeader reads a text trace from testdata, with its header
// comments.
func loadTraceHeader(t testing.TB, name string) ([]trace.Event, []string) {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := trace.NewTextReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var events []trace.Event
	for {
		e, err := r.Next()
		if err == io.EOF {
			return events, r.Header()
		}
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
}

// loadTrace reads a text trace from testdata.
func loadTrace(t testing.TB, name string) []trace.Event {
	ev, _ := loadTraceHeader(t, name)
	return ev
}

func TestReplayBasics(t *testing.T) {
	ev := []trace.Event{
		{Action: trace.ActionSegmentAlloc, Addr: 1 << 30, Size: 2 << 20},
		{Action: trace.ActionAlloc, Addr: 100, Size: 1000},
		{Action: trace.ActionAlloc, Addr: 200, Size: 3 << 20, Stream: 1},
		{Action: trace.ActionFreeRequested, Addr: 100, Size: 1000},
		{Action: trace.ActionAlloc, Addr: 300, Size: 10},
		{Action: trace.ActionFreeCompleted, Addr: 100, Size: 1000},
		{Action: trace.ActionFreeCompleted, Addr: 999, Size: 5}, // never allocated
		{Action: trace.ActionAlloc, Addr: 400, Size: 1 << 40},   // does not fit
		{Action: trace.ActionFreeCompleted, Addr: 400},          // its free is ignored
		{Action: trace.ActionOOM, Addr: 1 << 20, Size: 1 << 30}, // the recorded run's failure: counted, not replayed
		{Action: trace.ActionSnapshot},
	}
	r, err := Replay(ev, NewSimArena(1<<30), Config{Policy: PolicyPyTorch})
	if err != nil {
		t.Fatal(err)
	}
	want := Result{
		Events:         11,
		PeakRequested:  1000 + 3<<20 + 10,
		PeakAllocated:  1024 + 3<<20 + 512,
		PeakReserved:   kSmallBuffer + kLargeBuffer,
		DeviceAllocs:   2,
		DriverTimeUS:   154, // two cuMemAlloc of at most 128 MiB, 77 µs each
		NumOOMs:        1,
		UnmatchedFrees: 1,
		// The OOM released the cache once before failing.
		NumAllocRetries: 1,
		DeviceFrees:     0,
		RecordedOOMs:    1,
	}
	if r != want {
		t.Fatalf("Replay = %+v\nwant     %+v", r, want)
	}
	b, _ := json.Marshal(r)
	for _, key := range []string{"events", "peak_requested_bytes", "peak_allocated_bytes", "peak_reserved_bytes",
		"device_allocs", "device_frees", "device_maps", "device_unmaps", "driver_time_us", "num_alloc_retries",
		"num_ooms", "unmatched_frees", "recorded_ooms"} {
		if !strings.Contains(string(b), `"`+key+`":`) {
			t.Errorf("JSON %s lacks %q", b, key)
		}
	}
}

func TestReplayFreeRequestedFallback(t *testing.T) {
	ev := []trace.Event{
		{Action: trace.ActionAlloc, Addr: 1, Size: 4 << 20},
		{Action: trace.ActionFreeRequested, Addr: 1},
		{Action: trace.ActionAlloc, Addr: 2, Size: 4 << 20},
	}
	r, err := Replay(ev, NewSimArena(1<<30), Config{Policy: PolicyPyTorch})
	if err != nil {
		t.Fatal(err)
	}
	if r.PeakRequested != 4<<20 || r.DeviceAllocs != 1 {
		t.Fatalf("a trace without free_completed must free on free_requested: %+v", r)
	}
}

func TestReplayFrom(t *testing.T) {
	// Live at the snapshot: block 0xA (allocated before the history) and
	// 0xC (allocated by it). The history also frees 0xB, allocated
	// before it began.
	state := &trace.Snapshot{
		Truncated: true,
		Segments: []trace.Segment{{Addr: 0xA000, Size: 20 << 20, Pool: trace.PoolLarge, Blocks: []trace.Block{
			{Addr: 0xA000, Size: 8 << 20, Requested: 8 << 20, State: trace.StateActiveAllocated},
			{Addr: 0xA000 + 8<<20, Size: 4 << 20, Requested: 4 << 20, State: trace.StateActiveAllocated},
			{Addr: 0xA000 + 12<<20, Size: 8 << 20, State: trace.StateInactive},
		}}},
		History: []trace.Event{
			{Action: trace.ActionFreeCompleted, Addr: 0xB, Size: 6 << 20},
			{Action: trace.ActionAlloc, Addr: 0xA000 + 8<<20, Size: 4 << 20},
		},
	}
	r, err := ReplayFrom(state, NewSimArena(1<<30), Config{Policy: PolicyPyTorch})
	if err != nil {
		t.Fatal(err)
	}
	if r.PeakRequested != (8+6)<<20 || r.Events != 2 || r.UnmatchedFrees != 0 {
		t.Fatalf("ReplayFrom = %+v, want a peak of 14 MiB from the implied state", r)
	}
	state.Truncated = false
	r, err = ReplayFrom(state, NewSimArena(1<<30), Config{Policy: PolicyPyTorch})
	if err != nil {
		t.Fatal(err)
	}
	if r.PeakRequested != 4<<20 || r.UnmatchedFrees != 1 {
		t.Fatalf("untruncated ReplayFrom = %+v", r)
	}
}

func TestReplayConfigError(t *testing.T) {
	_, err := Replay([]trace.Event{{Action: trace.ActionAlloc, Addr: 1, Size: 1}}, plainArena{NewSimArena(1 << 30)},
		Config{Policy: PolicyPyTorch, ExpandableSegments: true})
	if err == nil {
		t.Fatal("replay with an impossible configuration succeeded")
	}
}

// policyResult is one replay's fragmentation and driver time.
type policyResult struct {
	ratio    float64
	driverUS int64
	res      Result
}

func replayPolicies(t testing.TB, ev []trace.Event) map[string]policyResult {
	out := map[string]policyResult{}
	for _, conf := range []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", "policy:vram"} {
		cfg, err := ParseConfig(conf)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Replay(ev, NewSimArena(80<<30), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.NumOOMs != 0 || r.UnmatchedFrees != 0 {
			t.Fatalf("%s: %+v", conf, r)
		}
		out[conf] = policyResult{float64(r.PeakReserved) / float64(r.PeakRequested), r.DriverTimeUS, r}
	}
	return out
}

// policyGaps lists the traces on which policy:vram misses bounds that
// TestPolicies checks, with the bounds it misses ("fragmentation",
// "driver", or both joined by "+"), kept visible here until the policy
// meets them. TestPolicies fails when a listed trace misses other bounds
// than those (remove it, or correct the entry, then) or an unlisted one
// misses any.
//
// Since the cost model's cuMemAlloc follows the card (45 µs up to 128 MiB,
// 76 µs up to 1 GiB, 126 µs above, measured in a replay on an H200 in
// run 3), a segment of policy:pytorch costs about as much as one
// mapping and less than one unmap and remap, and policy:vram misses the
// driver-time bound on most traces. Mapping each run of chunks with one
// cuMemSetAccess (RangeMapper) brought gpt2_train_varlen, resnet50_train
// and synth_bert_infer_varlen under it; mapping a 20 MiB chunk ahead for
// requests of up to 4 MiB (step 5 of the policy, as PyTorch's 20 MiB
// segments for small requests) brought bert_train_varlen,
// synth_gpt_generate_varbatch and synth_gpt_serve_kvcache; mapping those
// 20 MiB whatever the slack for requests of 3 to 4 MiB until the first
// free (a model's weights loading, one mapping per tensor before) brought
// gpt2_generate_varbatch, and cut bert_infer_varlen's loading from 2.0 to
// 1.2 ms; unmapping, of a free block over the budget, only chunks for 32
// times what is over (a 2 MiB segment of the small pool had unmapped 442
// MiB that the next requests mapped again) brought gpt_generate_kvcache;
// cutting every mapping into chunks of a sixteenth of the peak (at most
// 128 MiB) once that is more than 52 MiB brought
// synth_transformer_train_varlen (2.63 to 1.84x) and took
// synth_bert_infer_varlen_long from 11.4 to 6.5x. Since the model
// charges cuMemSetAccess by size beyond 120 MiB (250 ns a MiB, as a
// replay on the card measured), synth_transformer_train_varlen had passed
// the bound again (2.19x; 2.5x on the card); mapping ahead, for a request
// of more than 4 MiB that raises the peak, all the room the slack leaves
// when that is at least 64 MiB (step 6) brought it back (1.95x) and cut
// the other training traces' driver time by 17 to 33%. Taking, among
// windows that need as much mapped, the lowest address rather than the
// smallest run (step 2) took bert_infer_varlen from 13.2 to 11.7x.
// Placing a request expected to live long (its role's last block lived
// at least 8 allocations) of at least a 32nd of the peak next to a
// neighbour that outlives it (step 1) stopped the layer-by-layer drift of
// the working set: bert_infer_varlen 11.65 to 6.97x,
// resnet50_infer_varbatch 7.90 to 7.13x, synth_bert_infer_varlen_long
// 6.50 to 2.27x, synth_two_models 5.28 to 3.16x and two_models 4.88 to
// 3.32x (1.0865 to 1.0603x reserved), no trace higher. Unmapping, of a
// large free block that became free within the last 4 allocations, only
// the chunks for what is over when the request holds at least a 32nd of
// the peak (step 3: in a layer of a large request, the hole of the hidden
// state just given back, which the next tensor maps again) took
// resnet50_infer_varbatch from 7.13 to 5.30x, bert_infer_varlen 6.97 to
// 6.60x, synth_resnet50_infer_varbatch 4.48 to 3.51x,
// synth_bert_infer_varlen_long 2.27 to 2.09x, synth_two_models 3.16 to
// 3.04x and two_models 3.32 to 3.24x (1.0603 to 1.0531x), no trace
// higher. Taking, for a server's next request once the one before has
// given its working set back, the lowest-addressed free block for its
// first request of at least a 16th of the peak (step 1's request
// boundary) took bert_infer_varlen from 6.60 to 5.08x (1.0395 to 1.0261x
// reserved) and resnet50_infer_varbatch from 5.30 to 5.27x (1.0284 to
// 1.0218x), no trace higher. (Every figure so far came from the cost
// model fitted on H200s on 2026-12-01.)
//
// On 2026-12-06 the cost model was fitted again, to the means of a replay
// of every trace on an H100, with cuMemSetAccess priced per mapping, as a
// probe of the driver showed it is (sim.go): its totals came within -38 to
// +43% of what the card spent (they had read 18 to 65% low), and two more
// traces that the old model put just inside the driver bound are out
// (synth_gpt_generate_varbatch 1.81 to 2.01x and
// synth_transformer_train_varlen 1.85 to 2.16x; on the card 1.6 and 1.9x).
// The numbers with it, on a simulated 80 GiB device (peak reserved over
// peak requested; driver time of policy:vram and policy:pytorch, and their
// ratio), for the traces listed:
//
//	trace                           vram ratio  vram      pytorch       x
//	bert_infer_varlen               1.0261      9.3 ms    1.90 ms    4.86
//	bert_infer_varlen_cap1228MiB    1.0261      9.3 ms    1.90 ms    4.86
//	resnet50_infer_varbatch         1.0218     12.0 ms    2.02 ms    5.94
//	synth_bert_infer_varlen_long    1.0345      7.2 ms    3.11 ms    2.31
//	synth_gpt_generate_varbatch     1.0270      4.7 ms    2.35 ms    2.01
//	synth_resnet50_infer_varbatch   1.0381      6.2 ms    1.54 ms    4.01
//	  _seed3                        1.0877      5.9 ms    2.16 ms    2.72
//	  _seed5                        1.1111      5.4 ms    1.69 ms    3.17
//	synth_transformer_train_varlen  1.0349     22.2 ms   10.28 ms    2.16
//	  _seed1                        1.0516     22.9 ms   11.55 ms    1.98
//	synth_two_models                1.0335     10.1 ms    3.01 ms    3.36
//	two_models                      1.0531     14.5 ms    4.66 ms    3.11
//
// Six traces recorded on an H100 on 2026-12-06, after all of the above
// (the policy was not tuned on them): three are the recorded inference
// workloads with other requests (record_traces.py --seed) and two are
// ViT-B/16 inference, a model the policy had not seen. policy:vram keeps
// the fragmentation bound on three and the driver bound on none:
//
//	trace                           vram ratio  vram      pytorch       x   expandable
//	bert_infer_varlen_seed1         1.0388     12.4 ms    2.57 ms    4.82   1.218
//	bert_infer_varlen_seed2         1.0293      8.8 ms    2.20 ms    4.01   1.175
//	resnet50_infer_varbatch_seed1   1.0742     19.0 ms    2.17 ms    8.75   1.213
//	resnet50_infer_varbatch_seed2   1.0416     13.2 ms    2.19 ms    6.02   1.190
//	vit_infer_varbatch              1.1345      5.5 ms    2.08 ms    2.64   1.069
//	vit_infer_varbatch_seed1        1.1082      7.1 ms    1.93 ms    3.68   1.029
//
// On vit_infer_varbatch the reserve peaks early, in the sixth of 60
// requests, the first to come near the run's peak, where step 1's
// anchored placement leaves the free memory in chunks that live blocks
// also hold (66 MiB free, most of it a 36.5 MiB hole between two hidden
// states, when a 72.7 MiB MLP activation finds no room): without step 1
// they reserve 1.047 and 1.038 (PyTorch's expandable segments 1.069 and
// 1.029), but bert_infer_varlen's driver time goes back from 5.1x to
// 11.7x (this paragraph's sweeps ran with the earlier fit of the model). Restricting step 1 to free blocks at most 2 to 9
// times the request met every bound on 9 of the 25 traces, as the
// settings kept do (at 5 times, vit_infer_varbatch within 1.05 but
// synth_bert_infer_varlen_long out at 1.054 and 6.1x); changing the other
// settings one at a time (slack, chunk sizes, mapping ahead, reclaim
// factor, lifetimes, request boundary: 28 settings, each replayed on all
// 25 traces) met every bound on 6 to 10. Each moves some traces across a
// bound and others back.
//
// The inference traces remap the most, and not from one request to the
// next: most requests fit in what the largest ones left mapped, but a
// request near the largest (an attention matrix of 100 to 180 MiB per
// layer) finds its layer's holes one size off and moves memory in its
// layers, an unmap of 40 µs and a remap of 45 µs each time, while
// policy:pytorch allocates 20 to 58 segments in the whole run. Replayed
// event by event with the anchored placement (2026-12-05),
// bert_infer_varlen spends 1.29 ms loading, 1.5 ms in requests that raise
// the running peak until their largest allocation, 4.1 ms in the layers
// of requests within 10% of the running peak or past their largest
// allocation (10.0 ms before), 0.7 ms elsewhere; two_models 2.33, 1.1,
// 4.4 and 1.2 ms. On two_models (a BERT-sized encoder and a GPT-2-sized
// decoder with a KV cache served by one process, recorded with PyTorch)
// the same requests also find no free chunk whole to unmap: the reserve
// passes its budget and the fragmentation bound too (1.065 before mapping
// ahead, 1.087 with it, 1.060 with the anchored placement, 1.053 with
// step 3 keeping what was just freed; PyTorch's
// expandable segments reach 1.232). The _seed traces are two of the
// generators of gentraces drawn with other seeds, on which the policy was
// not tuned: of 42 traces that the seven generators write with six other
// seeds, 35 met the fragmentation bounds and 15 every bound, and these
// three are among the seven that break 1.05 (the worst ResNet-50 seeds and
// one of the two transformer seeds). They break it as two_models does: at
// the event that sets the peak reserve, the free memory mapped lies mostly
// in chunks that a live block also holds, so step 3 cannot give back what
// is over the budget (on _seed5 48 of 123 MiB free in whole chunks, 84 MiB
// over; vrampolicy.go has the numbers). What was tried and measured on all
// traces without meeting more bounds is in vrampolicy.go.
//
// Where the driver time went before the anchored placement, split by
// phase (replayed event by event on 2026-12-01, late): while loading
// (before the first free), within 2,000 events after the allocated bytes
// reached a new peak, and the rest.
//
//	trace                           loading  new peak  rest     bound
//	bert_infer_varlen               1.29 ms  5.95 ms   5.55 ms  2.2 ms
//	resnet50_infer_varbatch         0.99     6.41      1.65     2.3
//	synth_bert_infer_varlen_long    1.13     7.96      2.20     3.5
//	synth_resnet50_infer_varbatch   0.86     1.91      1.27     1.8
//	synth_two_models                1.72     4.89      2.46     3.4
//	two_models                      2.33     5.06      5.81     5.4
//
// No phase alone would meet the bound. After a new peak the budget of step
// 3 is that peak's own slack, so a layer whose layout does not repeat
// unmaps a chunk that the next request, raising the peak again, maps back
// (on bert_infer_varlen a 24 MiB chunk of a 77 MiB hole between the
// request's first tensor and a 32 MiB block that lives through the run,
// once a layer); later the working set drifts up a hidden state a layer
// and leaves unmapped holes below it. The budget's timing is not the
// cause: given from the first event the budget of the run's final peak,
// bert_infer_varlen is still at 7.1x, resnet50_infer_varbatch 4.9x,
// synth_bert_infer_varlen_long 3.9x, synth_resnet50_infer_varbatch 4.0x,
// synth_two_models 2.6x and two_models 5.5x (at 1.101x reserved). Loading
// alone costs bert_infer_varlen 1.29 ms (25 mappings of 2 to 46 MiB for
// 208 MiB of weights) of its 2.2 ms: the bound leaves it about 20
// mappings for 300 requests. Nor does knowing every lifetime ahead give a
// layout that fits the slack: an offline plan of each request's tensors
// of more than 1 MiB, largest first at the lowest offset free for its
// lifetime (as arena planners for inference do), needs 1.125 times the
// request's peak on each of bert_infer_varlen's 124 requests above 100 MiB
// (9 hidden states where 8 are live at once; ordering by lifetime, by
// lifetime times size or by start gives the same). On 3 of those requests
// that plan passes 1.05 times the run's peak, so memory must move inside
// each of them. If, as the ninth unit suggests, every two of a request's
// 12 layers need one move, that is some 18 unmaps and maps of a 44 MiB
// hidden state, 1.5 ms, which with loading at PyTorch's own cost (about
// 0.55 ms) and the mappings that grow the reserve to the peak already
// passes the bound of 2.2 ms: on this trace the bounds together look out
// of reach for any placement that leaves live blocks where they are.
var policyGaps = map[string]string{
	"bert_infer_varlen.trace.gz":                    "driver",
	"bert_infer_varlen_cap1228MiB.trace.gz":         "driver",
	"bert_infer_varlen_seed1.trace.gz":              "driver",
	"bert_infer_varlen_seed2.trace.gz":              "driver",
	"resnet50_infer_varbatch.trace.gz":              "driver",
	"resnet50_infer_varbatch_seed1.trace.gz":        "fragmentation+driver",
	"resnet50_infer_varbatch_seed2.trace.gz":        "driver",
	"synth_bert_infer_varlen_long.trace.gz":         "driver",
	"synth_resnet50_infer_varbatch.trace.gz":        "driver",
	"synth_resnet50_infer_varbatch_seed3.trace.gz":  "fragmentation+driver",
	"synth_resnet50_infer_varbatch_seed5.trace.gz":  "fragmentation+driver",
	"synth_gpt_generate_varbatch.trace.gz":          "driver",
	"synth_transformer_train_varlen.trace.gz":       "driver",
	"synth_transformer_train_varlen_seed1.trace.gz": "fragmentation",
	"synth_two_models.trace.gz":                     "driver",
	"two_models.trace.gz":                           "fragmentation+driver",
	"vit_infer_varbatch.trace.gz":                   "fragmentation+driver",
	"vit_infer_varbatch_seed1.trace.gz":             "fragmentation+driver",
}

// testdataTraces returns the names of every text trace in testdata.
func testdataTraces(t testing.TB) []string {
	names, err := filepath.Glob("testdata/*.trace.gz")
	if err != nil || len(names) == 0 {
		t.Fatalf("no traces in testdata: %v", err)
	}
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	return names
}

// TestPolicies replays every trace in testdata under the three policies
// and checks the policy's bounds on each: policy:vram reserves at
// most 1.05 times the peak requested (1.02 on the ResNet-50 training
// trace), never more than PyTorch's best setting, with modelled driver
// time at most twice policy:pytorch's. For traces recorded with
// record_traces.py it also checks that the PyTorch policies reproduce what
// PyTorch itself reserved. Traces in policyGaps must miss exactly the bound
// listed there.
func TestPolicies(t *testing.T) {
	names := testdataTraces(t)
	for _, want := range traceFiles {
		if !slices.Contains(names, want) {
			t.Errorf("testdata lacks %s", want)
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			ev, header := loadTraceHeader(t, name)
			res := replayPolicies(t, ev)
			pt, ex, vr := res["policy:pytorch"], res["policy:pytorch,expandable_segments:True"], res["policy:vram"]
			t.Logf("pytorch %.4f %d µs | expandable %.4f %d µs | vram %.4f %d µs (%d maps, %d unmaps)",
				pt.ratio, pt.driverUS, ex.ratio, ex.driverUS, vr.ratio, vr.driverUS, vr.res.DeviceMaps, vr.res.DeviceUnmaps)
			limit := 1.05
			if name == "resnet50_train.trace.gz" {
				limit = 1.02
				// DESIGN.md: PyTorch reserved 7.03 GB (1.206x), 5.95 GB
				// (1.020x) with expandable segments.
				if pt.res.PeakReserved != 7029653504 || ex.ratio > 1.0206 {
					t.Errorf("PyTorch policies do not reproduce PyTorch: %d, %.4f", pt.res.PeakReserved, ex.ratio)
				}
			}
			var missed []string
			if vr.ratio > limit || vr.ratio > min(pt.ratio, ex.ratio) {
				missed = append(missed, "fragmentation")
			}
			if vr.driverUS > 2*pt.driverUS {
				missed = append(missed, "driver")
			}
			gap := policyGaps[name]
			switch {
			case strings.Join(missed, "+") != gap:
				t.Errorf("policy:vram misses %v (listed gap %q): reserves %.4fx (at most %.2f and PyTorch's best %.4f), driver time %d µs (at most twice policy:pytorch's %d)",
					missed, gap, vr.ratio, limit, min(pt.ratio, ex.ratio), vr.driverUS, pt.driverUS)
			case gap != "":
				t.Logf("known gap: %s", gap)
			}
			for _, h := range header {
				var reserved, requested int64
				if n, _ := fmt.Sscanf(h, "PyTorch default: peak reserved %d, peak requested %d", &reserved, &requested); n == 2 {
					checkClose(t, "policy:pytorch peak reserved", pt.res.PeakReserved, reserved)
					checkClose(t, "peak requested", pt.res.PeakRequested, requested)
				}
				if n, _ := fmt.Sscanf(h, "PyTorch expandable_segments:True: peak reserved %d, peak requested %d", &reserved, &requested); n == 2 {
					checkClose(t, "expandable peak reserved", ex.res.PeakReserved, reserved)
				}
			}
		})
	}
}

// TestPolicyTable prints, with -v, the per-trace table of BENCHMARKS.md:
// fragmentation (peak reserved over peak requested) and modelled driver
// time under each policy, replaying every trace in testdata on a
// simulated 80 GiB device.
func TestPolicyTable(t *testing.T) {
	if !testing.Verbose() {
		t.Skip("prints a table with -v")
	}
	var b strings.Builder
	b.WriteString("| trace | pytorch | pytorch+expandable | vram | vram maps / unmaps |\n|---|---|---|---|---|\n")
	for _, name := range testdataTraces(t) {
		res := replayPolicies(t, loadTrace(t, name))
		pt, ex, vr := res["policy:pytorch"], res["policy:pytorch,expandable_segments:True"], res["policy:vram"]
		cell := func(p policyResult) string { return fmt.Sprintf("%.3f, %.1f ms", p.ratio, float64(p.driverUS)/1000) }
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d / %d |\n", strings.TrimSuffix(name, ".trace.gz"), cell(pt), cell(ex), cell(vr),
			vr.res.DeviceMaps, vr.res.DeviceUnmaps)
	}
	t.Log("\n" + b.String())
}

// checkClose fails if got is more than 1% away from PyTorch's own want.
func checkClose(t *testing.T, what string, got, want int64) {
	t.Helper()
	if d := float64(got-want) / float64(want); d > 0.01 || d < -0.01 {
		t.Errorf("%s: replay %d, PyTorch %d", what, got, want)
	}
}

// TestVRAMSteadyState replays the second half of the ResNet-50 trace (two
// training steps) again and again after the whole trace: policy:vram must
// stop calling the driver once its high-water mark covers the workload.
func TestVRAMSteadyState(t *testing.T) {
	ev := loadTrace(t, "resnet50_train.trace.gz")
	r := newReplayer(NewSimArena(80<<30), Config{})
	if _, err := r.run(trace.Events(ev), trace.ActionFreeCompleted); err != nil {
		t.Fatal(err)
	}
	half := ev[len(ev)/2:]
	var calls []int64
	for i := 0; i < 12; i++ {
		before := r.al.Stats()
		if _, err := r.run(trace.Events(half), trace.ActionFreeCompleted); err != nil {
			t.Fatal(err)
		}
		after := r.al.Stats()
		calls = append(calls, after.NumDeviceAlloc+after.NumDeviceFree-before.NumDeviceAlloc-before.NumDeviceFree)
	}
	s := r.al.Stats()
	ratio := float64(s.ReservedBytes[StatAll].Peak) / float64(s.RequestedBytes[StatAll].Peak)
	t.Logf("driver calls per repetition %v, ratio %.4f", calls, ratio)
	if calls[len(calls)-1] != 0 || calls[len(calls)-2] != 0 {
		t.Errorf("still remapping after %d repetitions: %v", len(calls), calls)
	}
	if ratio > 1.02 {
		t.Errorf("ratio %.4f after the repetitions", ratio)
	}
}
