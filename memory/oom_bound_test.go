package memory

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// oomAfterFragmenting fills a 512 MiB device with 5 MiB blocks, frees
// three in four and asks for 30 MiB, which policy:pytorch cannot place.
func oomAfterFragmenting(t *testing.T, a *Allocator) *OutOfMemoryError {
	t.Helper()
	var all []*Block
	for i := 0; i < 100; i++ {
		all = append(all, mustAllocRegion(t, a, 5*mib, ""))
	}
	for i, b := range all {
		if i%4 != 0 {
			a.Free(b)
		}
	}
	_, err := a.Alloc(30*mib, 0, "")
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatalf("got %v, want an OutOfMemoryError", err)
	}
	return oom
}

// TestFixCheckBounded checks the two bounds on the fix check of an
// OutOfMemoryError: the share of the allocator's time its checks may take,
// and the time one check may take.
func TestFixCheckBounded(t *testing.T) {
	tests := []struct {
		name      string
		spent     time.Duration // fix checks' time before the error
		wantFix   string        // prefix of Fix
		wantCheck string        // CheckedBy
	}{
		{"first error", 0, "with VRAM_ALLOC_CONF=", "history"},
		{"checks took their share", time.Hour, "not checked: out-of-memory errors came too fast", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := New(NewSimArena(512*mib), Config{Policy: PolicyPyTorch})
			a.fixCheckTime = tc.spent
			oom := oomAfterFragmenting(t, a)
			if !strings.HasPrefix(oom.Fix, tc.wantFix) || oom.CheckedBy != tc.wantCheck {
				t.Fatalf("fix %q checked by %q, want %q... by %q", oom.Fix, oom.CheckedBy, tc.wantFix, tc.wantCheck)
			}
			msg := oom.Error()
			if tc.wantCheck == "" && (strings.Contains(msg, "checked by replaying") || !strings.Contains(msg, "  fix: not checked")) {
				t.Fatalf("message claims a check or omits why there was none:\n%s", msg)
			}
			if tc.spent == 0 && a.fixCheckTime <= 0 {
				t.Fatal("the check's time was not counted")
			}
		})
	}
}

// TestFixCheckTimeout runs a fix check with a deadline already past: it
// reports that it did not check rather than a conclusion of replays that
// did not run.
func TestFixCheckTimeout(t *testing.T) {
	a := New(NewSimArena(512*mib), Config{Policy: PolicyPyTorch})
	a.fixCheckTime = time.Hour // the allocator does not check; the test does
	oom := oomAfterFragmenting(t, a)
	oom.Fix, oom.CheckedBy = "", "history"
	oom.checkFix(time.Nanosecond)
	if oom.Fix != "not checked: replaying the history took more than 1ns" || oom.FixConfig != "" || oom.CheckedBy != "" ||
		oom.NeededBytes != 0 || oom.FitsNow != 0 {
		t.Fatalf("fix %q config %q checked by %q needed %d fits %d", oom.Fix, oom.FixConfig, oom.CheckedBy, oom.NeededBytes, oom.FitsNow)
	}
	// With time enough the same error finds the fix.
	oom.expired = false
	oom.checkFix(time.Minute)
	if oom.FixConfig != "policy:vram" || oom.CheckedBy != "" && oom.CheckedBy != "history" {
		t.Fatalf("fix %q config %q", oom.Fix, oom.FixConfig)
	}
}

// TestOOMLoopStaysFast runs out of memory 400 times in a loop, each time
// after a few allocations and frees, as a search for the largest batch or
// a server catching the error per request does: the fix checks must not
// take most of the time (each replays up to 16,384 operations under a
// dozen settings).
func TestOOMLoopStaysFast(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a few seconds without the bound")
	}
	a := New(NewSimArena(1<<30), Config{Policy: PolicyPyTorch})
	var live []*Block
	for i := 0; i < 4000; i++ {
		b, err := a.Alloc(int64(1+i*7919%37)*mib, Stream(i%50), "")
		if err == nil {
			live = append(live, b)
		}
		if len(live) > 20 {
			a.Free(live[0])
			live = live[1:]
		}
	}
	start := time.Now()
	var checked, unchecked int
	for i := 0; i < 400; i++ {
		_, err := a.Alloc(900*mib, Stream(i%50), "")
		var oom *OutOfMemoryError
		if !errors.As(err, &oom) {
			t.Fatalf("got %v, want an OutOfMemoryError", err)
		}
		if oom.CheckedBy != "" {
			checked++
		} else {
			unchecked++
		}
		b, err := a.Alloc(mib, 0, "")
		if err == nil {
			a.Free(b)
		}
	}
	a.mu.Lock()
	spent := a.fixCheckTime
	a.mu.Unlock()
	if spent == 0 {
		t.Fatal("no error was checked")
	}
	if life := time.Since(a.start); spent > life/fixCheckShare+fixCheckTimeout {
		t.Fatalf("fix checks took %v of the allocator's %v (%d checked, %d not)", spent, life, checked, unchecked)
	}
	t.Logf("%d checked, %d not, in %v", checked, unchecked, time.Since(start))
}
