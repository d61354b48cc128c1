package memory

import (
	"strings"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

// TestNilArgumentsAreErrors checks that the replay functions and an
// allocator given a nil arena, history or snapshot return an error naming
// it instead of panicking (vram.MemorySnapshot is nil for a device without
// a caching allocator).
func TestNilArgumentsAreErrors(t *testing.T) {
	arena := func() Arena { return NewSimArena(1 << 20) }
	alloc := []trace.Event{{Action: trace.ActionAlloc, Addr: 1, Size: 512}}
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"Replay over a nil arena", func() error { _, err := Replay(alloc, nil, Config{}); return err }, "nil arena"},
		{"ReplayHistory of a nil history", func() error { _, err := ReplayHistory(nil, arena(), Config{}); return err }, "nil history"},
		{"ReplayHistory over a nil arena", func() error { _, err := ReplayHistory(trace.Events(alloc), nil, Config{}); return err }, "nil arena"},
		{"ReplayFrom a nil snapshot", func() error { _, err := ReplayFrom(nil, arena(), Config{}); return err }, "nil snapshot"},
		{"ReplayFrom over a nil arena", func() error {
			_, err := ReplayFrom(&trace.Snapshot{History: alloc}, nil, Config{})
			return err
		}, "nil arena"},
		{"WithFailedRequests of a nil history", func() error { _, err := WithFailedRequests(nil); return err }, "nil history"},
		{"Alloc over a nil arena", func() error { _, err := New(nil, Config{}).Alloc(512, 0, ""); return err }, "nil arena"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				err = tc.call()
			}()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	if s := SnapshotWithFailedRequests(nil); s != nil {
		t.Errorf("SnapshotWithFailedRequests(nil) = %v, want nil", s)
	}
}
