package memory

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// TestBlockTree checks the treap against a sorted slice under random
// inserts, removals, in-place re-keying and replacement.
func TestBlockTree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	tr := &blockTree{bySize: true, rng: 99}
	var in []*Block
	addr := uint64(0)
	for i := 0; i < 5000; i++ {
		switch op := rng.IntN(5); {
		case op <= 1 || len(in) == 0:
			addr += 512
			b := &Block{stream: Stream(rng.IntN(3)), size: int64(1+rng.IntN(20)) * 512, addr: addr}
			tr.insert(b)
			in = append(in, b)
		case op == 2:
			k := rng.IntN(len(in))
			tr.remove(in[k])
			in = append(in[:k], in[k+1:]...)
		case op == 3:
			b := in[rng.IntN(len(in))]
			b.size = int64(1+rng.IntN(20)) * 512
			tr.rekeyed(b)
		default:
			k := rng.IntN(len(in))
			nw := &Block{stream: in[k].stream, size: in[k].size, addr: in[k].addr}
			tr.replace(in[k], nw)
			in[k] = nw
			nw.size += 512
			tr.rekeyed(nw)
		}
		if err := tr.check(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		want := append([]*Block(nil), in...)
		sort.Slice(want, func(i, j int) bool { return tr.less(want[i], want[j]) })
		j := 0
		for b := tr.first(); b != nil; b = nextIn(b) {
			if j >= len(want) || b != want[j] {
				t.Fatalf("step %d: order differs at %d", i, j)
			}
			j++
		}
		if j != len(want) || tr.Len() != len(want) {
			t.Fatalf("step %d: %d blocks, want %d", i, j, len(want))
		}
		if len(want) > 0 {
			q := want[rng.IntN(len(want))]
			if got := tr.seek(q.stream, q.size, 0); got == nil || tr.less(got, &Block{stream: q.stream, size: q.size}) {
				t.Fatalf("seek below its key")
			}
			if tr.last() != want[len(want)-1] || prevIn(want[0]) != nil {
				t.Fatal("last or prevIn wrong")
			}
		}
	}
}
