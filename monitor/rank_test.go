package monitor

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vramgo/vram/memory"
)

// TestLocalRankLabels checks that the collectors of a process of a
// distributed job carry its rank and local rank, so that the series of
// every rank of a job stay apart when one configuration scrapes them all.
func TestLocalRankLabels(t *testing.T) {
	a := memory.New(memory.NewSimArena(64<<20), memory.Config{})
	if _, err := a.Alloc(1<<20, 0, "test"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	for local, rank := range []int{4, 5} { // node 2 of a job of 2 ranks a node
		dev := "cuda:" + string(rune('0'+local))
		if err := RegisterAllocator(reg, dev, rank, a.Stats, LocalRank(local)); err != nil {
			t.Fatal(err)
		}
		if err := RegisterDeviceMemory(reg, dev, rank, func() (memory.DeviceMemory, error) {
			return memory.DeviceMemory{Total: 1 << 30, Free: 1 << 29}, nil
		}, LocalRank(local)); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		if name != "vram_allocator_allocated_bytes" && name != "vram_device_memory_total_bytes" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["pool"] != "" && l["pool"] != "all" {
				continue
			}
			seen[fmt.Sprintf("%s device=%s rank=%s local_rank=%s", name, l["device"], l["rank"], l["local_rank"])] = true
		}
	}
	for _, w := range []string{
		"vram_allocator_allocated_bytes device=cuda:0 rank=4 local_rank=0",
		"vram_allocator_allocated_bytes device=cuda:1 rank=5 local_rank=1",
		"vram_device_memory_total_bytes device=cuda:0 rank=4 local_rank=0",
		"vram_device_memory_total_bytes device=cuda:1 rank=5 local_rank=1",
	} {
		if !seen[w] {
			t.Errorf("no series %s; have %v", w, seen)
		}
	}
	// Without the option the labels are device and rank, as before.
	c := NewAllocatorCollector("sim:0", 0, a.Stats)
	ch := make(chan *prometheus.Desc, 100)
	c.Describe(ch)
	close(ch)
	for d := range ch {
		if strings.Contains(d.String(), "local_rank") {
			t.Fatalf("a collector without LocalRank has the label: %v", d)
		}
	}
}
