package memory

import (
	"testing"
)

// BenchmarkCachedAllocFree measures one Alloc and one Free of a block the
// cache already holds, history off (target: at most 150 ns a pair).
func BenchmarkCachedAllocFree(b *testing.B) {
	for _, bc := range []struct {
		name string
		conf string
		size int64
		busy bool
	}{
		{"small/vram", "", 4096, false},
		{"large/vram", "", 16 << 20, false},
		{"busy/vram", "", 200 << 10, true},
		{"small/pytorch", "policy:pytorch", 4096, false},
		{"large/pytorch", "policy:pytorch", 16 << 20, false},
		{"busy/pytorch", "policy:pytorch", 200 << 10, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg, err := ParseConfig(bc.conf)
			if err != nil {
				b.Fatal(err)
			}
			a := New(NewSimArena(1<<30), cfg)
			if bc.busy {
				// Thousands of live blocks and a thousand holes of other
				// sizes in the pools: a realistic tree depth.
				var live []*Block
				for i := 0; i < 3000; i++ {
					blk, err := a.Alloc(int64(1+i%97)*1536, 0, "")
					if err != nil {
						b.Fatal(err)
					}
					live = append(live, blk)
				}
				for i := 0; i < len(live); i += 3 {
					a.Free(live[i])
				}
			}
			warm, err := a.Alloc(bc.size, 0, "")
			if err != nil {
				b.Fatal(err)
			}
			a.Free(warm)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				blk, err := a.Alloc(bc.size, 0, "")
				if err != nil {
					b.Fatal(err)
				}
				a.Free(blk)
			}
		})
	}
}

// BenchmarkReplayResNet replays the ResNet-50 training trace under the
// default policy and reports events per second (target: at least one
// million).
func BenchmarkReplayResNet(b *testing.B) {
	ev := loadTrace(b, "resnet50_train.trace.gz")
	for _, conf := range []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", ""} {
		name := conf
		if name == "" {
			name = "policy:vram"
		}
		b.Run(name, func(b *testing.B) {
			cfg, _ := ParseConfig(conf)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := Replay(ev, NewSimArena(80<<30), cfg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(ev))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkCachedAllocFreeHistory is BenchmarkCachedAllocFree with history
// on, without and with stacks.
func BenchmarkCachedAllocFreeHistory(b *testing.B) {
	for _, stacks := range []bool{false, true} {
		name := "nostacks"
		if stacks {
			name = "stacks"
		}
		b.Run(name, func(b *testing.B) {
			a := New(NewSimArena(1<<30), Config{})
			a.SetHistory(true, 1<<16, stacks)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				blk, err := a.Alloc(4096, 0, "")
				if err != nil {
					b.Fatal(err)
				}
				a.Free(blk)
			}
		})
	}
}
