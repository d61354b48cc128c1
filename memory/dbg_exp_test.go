package memory

import (
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

func TestExpDbg(t *testing.T) {
	for _, name := range expTraces {
		ev := loadTrace(t, name)
		vr, _ := ParseConfig("policy:vram")
		r := newReplayer(NewSimArena(80<<30), vr)
		r.al.SetHistory(true, 10000000, false)
		r.run(ev)
		snap := r.al.Snapshot()
		total := 0
		for _, e := range snap.History {
			if e.Action == trace.ActionAlloc {
				total++
			}
		}
		allocs := 0
		var q [10]int
		for _, e := range snap.History {
			if e.Action == trace.ActionAlloc {
				allocs++
			}
			if e.Action == trace.ActionSegmentMap || e.Action == trace.ActionSegmentUnmap {
				q[min(allocs*10/total, 9)]++
			}
		}
		t.Logf("%-40s calls per tenth of the trace: %v", name, q)
	}
}

func TestExpSteady(t *testing.T) {
	for _, name := range []string{"resnet50_train.trace.gz", "gpt2_train_varlen.trace.gz", "bert_train_varlen.trace.gz"} {
		ev := loadTrace(t, name)
		for _, conf := range []string{"policy:pytorch", "policy:vram"} {
			cfg, _ := ParseConfig(conf)
			r := newReplayer(NewSimArena(80<<30), cfg)
			r.run(ev)
			half := ev[len(ev)/2:]
			var calls []int64
			for i := 0; i < 10; i++ {
				s0 := r.al.Stats()
				r.run(half)
				s1 := r.al.Stats()
				calls = append(calls, s1.NumDeviceAlloc+s1.NumDeviceFree-s0.NumDeviceAlloc-s0.NumDeviceFree)
			}
			s := r.al.Stats()
			t.Logf("%-30s %-15s calls per repetition %v ratio %.4f", name, conf, calls, float64(s.ReservedBytes[0].Peak)/float64(s.RequestedBytes[0].Peak))
		}
	}
}
