package memory

import (
	"os"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

func loadTrace(t testing.TB, name string) []trace.Event {
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ev, err := trace.ReadTextAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

var expTraces = []string{"resnet50_train.trace.gz", "gpt2_train_varlen.trace.gz", "bert_train_varlen.trace.gz", "gpt2_generate_varbatch.trace.gz", "resnet50_infer_varbatch.trace.gz", "synth_transformer_train_varlen.trace.gz", "synth_gpt_generate_varbatch.trace.gz", "synth_resnet50_infer_varbatch.trace.gz"}

func TestExpReplay(t *testing.T) {
	for _, name := range expTraces {
		ev := loadTrace(t, name)
		var base float64
		for _, conf := range []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", "policy:vram"} {
			cfg, _ := ParseConfig(conf)
			r, err := Replay(ev, NewSimArena(80<<30), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if base == 0 {
				base = float64(r.DriverTimeUS)
			}
			t.Logf("%-34s %-40s ratio %.4f drv %7.1fms (x%.2f) maps %d unmaps %d allocs %d", name, conf, float64(r.PeakReserved)/float64(r.PeakRequested), float64(r.DriverTimeUS)/1000, float64(r.DriverTimeUS)/base, r.DeviceMaps, r.DeviceUnmaps, r.DeviceAllocs)
		}
	}
}

func TestExpInvariants(t *testing.T) {
	ev := loadTrace(t, "resnet50_train.trace.gz")
	for _, conf := range []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", "policy:vram"} {
		cfg, _ := ParseConfig(conf)
		r := newReplayer(NewSimArena(80<<30), cfg)
		for i := range ev {
			if _, err := r.run(ev[i : i+1]); err != nil {
				t.Fatal(err)
			}
			if err := r.al.checkInvariants(); err != nil {
				t.Fatalf("%s: event %d: %v", conf, i, err)
			}
		}
		r.al.EmptyCache()
		if err := r.al.checkInvariants(); err != nil {
			t.Fatalf("%s: after EmptyCache: %v", conf, err)
		}
		t.Logf("%s: reserved after EmptyCache %d", conf, r.al.Stats().ReservedBytes[0].Current)
	}
}
