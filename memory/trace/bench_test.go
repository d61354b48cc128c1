package trace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// syntheticPickle builds a PyTorch-like snapshot pickle with n trace
// entries the way Python's pickler lays it out: every string and container
// memoized, keys and shared frame dicts referenced through the memo, a new
// frames list per entry drawn from a few hundred distinct stacks (as a
// training loop produces).
func syntheticPickle(n int) []byte {
	w := &memoWriter{ids: map[any]uint32{}}
	w.b = append(w.b, opProto, 4)
	rng := rand.New(rand.NewPCG(1, 2))
	const nFrames = 2000
	stacks := make([][]int, 300)
	for i := range stacks {
		stacks[i] = make([]int, 10+rng.IntN(20))
		for j := range stacks[i] {
			stacks[i][j] = rng.IntN(nFrames)
		}
	}
	w.b = append(w.b, opEmptyDict)
	w.put(nil)
	w.b = append(w.b, opMark)
	w.str("segments")
	w.b = append(w.b, opEmptyList)
	w.put(nil)
	w.str("device_traces")
	w.b = append(w.b, opEmptyList, opMark, opEmptyList)
	w.put(nil)
	w.b = append(w.b, opMark)
	const base = 139638008184832
	var live []int
	addr := base
	for i := range n {
		action, a, size := "alloc", addr, 1+rng.IntN(1<<20)
		if len(live) > 0 && rng.IntN(2) == 0 {
			k := rng.IntN(len(live))
			a = live[k]
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
			action = "free_completed"
		} else {
			live = append(live, addr)
			addr += (size + 511) &^ 511
		}
		w.b = append(w.b, opEmptyDict)
		w.put(nil)
		w.b = append(w.b, opMark)
		w.str("action")
		w.str(action)
		w.str("addr")
		w.long(int64(a))
		w.str("size")
		w.long(int64(size))
		w.str("stream")
		w.long(0)
		w.str("time_us")
		w.long(1_700_000_000_000_000 + int64(i))
		w.str("compile_context")
		w.str("N/A")
		w.str("user_metadata")
		w.str("")
		w.str("frames")
		w.b = append(w.b, opEmptyList)
		w.put(nil)
		w.b = append(w.b, opMark)
		for _, f := range stacks[rng.IntN(len(stacks))] {
			if w.get(frameKey(f)) {
				continue
			}
			w.b = append(w.b, opEmptyDict)
			w.put(frameKey(f))
			w.b = append(w.b, opMark)
			w.str("filename")
			w.str(fmt.Sprintf("/usr/lib/python3/site-packages/torch/nn/modules/mod%d.py", f%50))
			w.str("line")
			w.long(int64(f))
			w.str("name")
			w.str(fmt.Sprintf("func_%d", f))
			w.b = append(w.b, opSetItems)
		}
		w.b = append(w.b, opAppends, opSetItems)
		if i%1000 == 999 {
			w.b = append(w.b, opAppends, opMark)
		}
	}
	w.b = append(w.b, opAppends, opAppends, opSetItems, opStop)
	return w.b
}

// frameKey names a frame dict in memoWriter.ids.
type frameKey int

// memoWriter writes pickle opcodes with Python's memo discipline.
type memoWriter struct {
	b    []byte
	ids  map[any]uint32
	next uint32
}

// put memoizes the object just written; key, if not nil, lets get find it.
func (w *memoWriter) put(key any) {
	w.b = append(w.b, opMemoize)
	if key != nil {
		w.ids[key] = w.next
	}
	w.next++
}

// get writes a reference to the memoized key, if there is one.
func (w *memoWriter) get(key any) bool {
	id, ok := w.ids[key]
	if !ok {
		return false
	}
	if id < 256 {
		w.b = append(w.b, opBinGet, byte(id))
	} else {
		w.b = binary.LittleEndian.AppendUint32(append(w.b, opLongBinGet), id)
	}
	return true
}

func (w *memoWriter) str(s string) {
	if w.get(s) {
		return
	}
	w.b = append(w.b, opShortBinUni, byte(len(s)))
	w.b = append(w.b, s...)
	w.put(s)
}

func (w *memoWriter) long(v int64) {
	if v >= 0 && v < 256 {
		w.b = append(w.b, opBinInt1, byte(v))
		return
	}
	w.b = append(w.b, opLong1, 8)
	w.b = binary.LittleEndian.AppendUint64(w.b, uint64(v))
}

var (
	syntheticOnce sync.Once
	synthetic     []byte
)

func BenchmarkReadPickle(b *testing.B) {
	const n = 100_000
	syntheticOnce.Do(func() { synthetic = syntheticPickle(n) })
	b.SetBytes(int64(len(synthetic)))
	b.ReportAllocs()
	for b.Loop() {
		snaps, err := ReadPickle(bytes.NewReader(synthetic))
		if err != nil {
			b.Fatal(err)
		}
		if len(snaps) != 1 || len(snaps[0].History) != n {
			b.Fatalf("got %d snapshots", len(snaps))
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
}

func TestSyntheticPickle(t *testing.T) {
	snaps, err := ReadPickle(bytes.NewReader(syntheticPickle(3000)))
	if err != nil {
		t.Fatal(err)
	}
	h := snaps[0].History
	if len(h) != 3000 || len(h[0].Frames) < 10 || h[0].Frames[0].File == "" || snaps[0].Truncated {
		t.Errorf("synthetic pickle read as %d events, first %+v", len(h), h[0])
	}
}

func BenchmarkReadJSON(b *testing.B) {
	snaps, err := ReadPickle(bytes.NewReader(syntheticPickle(20_000)))
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, snaps[0]); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadJSON(bytes.NewReader(buf.Bytes())); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(20_000*b.N)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkWriteJSON(b *testing.B) {
	snaps, err := ReadPickle(bytes.NewReader(syntheticPickle(20_000)))
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := WriteJSON(&buf, snaps[0]); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(buf.Len()))
	b.ReportMetric(float64(20_000*b.N)/b.Elapsed().Seconds(), "events/s")
}
