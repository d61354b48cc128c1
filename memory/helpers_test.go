package memory

import (
	"sync"
	"testing"
)

const mib = 1 << 20

// newTestAllocator returns an allocator over a fresh SimArena of capacity
// bytes with the settings of conf, and the arena.
func newTestAllocator(t testing.TB, conf string, capacity int64, opts ...Option) (*Allocator, *SimArena) {
	t.Helper()
	cfg, err := ParseConfig(conf)
	if err != nil {
		t.Fatalf("ParseConfig(%q): %v", conf, err)
	}
	sim := NewSimArena(capacity)
	return New(sim, cfg, opts...), sim
}

// mustAlloc allocates or fails the test.
func mustAlloc(t testing.TB, a *Allocator, size int64, stream Stream) *Block {
	t.Helper()
	b, err := a.Alloc(size, stream, "")
	if err != nil {
		t.Fatalf("Alloc(%d, %d): %v", size, stream, err)
	}
	return b
}

// check fails the test if the allocator's invariants are broken or its
// reserve differs from what the arena has handed out.
func check(t testing.TB, a *Allocator, sim *SimArena) {
	t.Helper()
	if err := a.checkInvariants(); err != nil {
		t.Fatalf("invariants: %v", err)
	}
	if sim != nil {
		if got, want := a.Stats().ReservedBytes[StatAll].Current, sim.Used(); got != want {
			t.Fatalf("reserved %d bytes, arena has %d in use", got, want)
		}
	}
}

// fakeEvents is an EventSource whose events complete when the test says.
type fakeEvents struct {
	mu       sync.Mutex
	next     Event
	done     map[Event]bool
	recorded map[Event]Stream
}

func newFakeEvents() *fakeEvents {
	return &fakeEvents{done: map[Event]bool{}, recorded: map[Event]Stream{}}
}

func (f *fakeEvents) Record(s Stream) Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.recorded[f.next] = s
	return f.next
}

func (f *fakeEvents) Query(e Event) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done[e]
}

// completeAll marks every recorded event complete.
func (f *fakeEvents) completeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for e := range f.recorded {
		f.done[e] = true
	}
}

// waitingEvents is a fakeEvents that can also wait (EventWaiter): waiting
// completes the event.
type waitingEvents struct{ *fakeEvents }

func (w waitingEvents) Wait(e Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done[e] = true
}
