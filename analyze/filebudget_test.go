package analyze

import (
	"strings"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

// TestReplayBudgetPerFile checks that the fix checks of all the devices of
// one file together replay at most maxFileReplays times
// Options.ReplayEvents, the later devices' fixes saying that the budget
// is spent: each device had a budget of its own, so that a file of 1,024
// devices (trace.MaxDevices) of five events each, an out-of-memory error
// under a limit of hundreds of GiB, took 0.8 s a device, some 14 minutes.
func TestReplayBudgetPerFile(t *testing.T) {
	const gib = int64(1) << 30
	const x = uint64(1) << 40
	history := []trace.Event{
		{Action: trace.ActionSegmentAlloc, Addr: x, Size: 500 * gib},
		{Action: trace.ActionAlloc, Addr: x, Size: 250 * gib},
		{Action: trace.ActionAlloc, Addr: x + uint64(250*gib), Size: 250 * gib},
		{Action: trace.ActionFreeCompleted, Addr: x, Size: 250 * gib},
		{Action: trace.ActionOOM, Addr: uint64(2000 * gib), Size: 300 * gib},
	}
	const devices = 3 * maxFileReplays
	f := &trace.File{Name: "many.pickle", Kind: trace.KindPickle}
	for i := range devices {
		f.Snapshots = append(f.Snapshots, &trace.Snapshot{Device: i, History: history, Meta: map[string]string{trace.MetaSource: "pytorch"}})
	}
	const budget = 2_000_000
	r, err := Analyze(f, Options{ReplayEvents: budget})
	if err != nil {
		t.Fatal(err)
	}
	var replayed int64
	spent := 0
	for _, d := range r.Devices {
		replayed += d.replayed
		if len(d.OOMs) != 1 {
			t.Fatalf("device %d: %d OOMs", d.Device, len(d.OOMs))
		}
		if strings.Contains(d.OOMs[0].Fix, "replay budget") && strings.Contains(d.OOMs[0].Fix, "spent") {
			spent++
		}
	}
	if replayed > maxFileReplays*budget {
		t.Errorf("the devices replayed %d events together, more than %d times the budget of %d", replayed, maxFileReplays, budget)
	}
	if spent == 0 || r.Devices[devices-1].replayed != 0 {
		t.Errorf("%d fixes say the budget is spent; the last device replayed %d events", spent, r.Devices[devices-1].replayed)
	}
	if r.Devices[0].replayed == 0 {
		t.Error("the first device replayed nothing")
	}
}
