package vram

import (
	"errors"
	"strings"
	"testing"
)

// TestZeroStreamAndGraph checks that a zero Stream (&vram.Stream{}, not
// made by NewStream, DefaultStream or CurrentStream) is refused as a nil
// one is, with an ErrArgument error, and that a zero Graph (not made by
// CaptureGraph) behaves as a nil one: each was a nil-pointer dereference,
// and WithStream ran its function on the zero stream. A zero Event is what
// NewEvent returns, and works.
func TestZeroStreamAndGraph(t *testing.T) {
	x := Ones(Shape{2})
	defer x.Release()
	def := DefaultStream(CPU)
	for _, tc := range []struct {
		name string
		fn   func()
	}{
		{"WithStream", func() { WithStream(&Stream{}, func() { t.Error("ran on a zero stream") }) }},
		{"Device", func() { (&Stream{}).Device() }},
		{"Priority", func() { (&Stream{}).Priority() }},
		{"IsDefault", func() { (&Stream{}).IsDefault() }},
		{"Synchronize", func() { _ = (&Stream{}).Synchronize() }},
		{"Query", func() { (&Stream{}).Query() }},
		{"WaitEvent", func() { (&Stream{}).WaitEvent(NewEvent()) }},
		{"WaitStream", func() { (&Stream{}).WaitStream(def) }},
		{"WaitStream other", func() { def.WaitStream(&Stream{}) }},
		{"RecordEvent", func() { (&Stream{}).RecordEvent() }},
		{"Event.Record", func() { NewEvent().Record(&Stream{}) }},
		{"Event.Wait", func() { e := def.RecordEvent(); defer e.Release(); e.Wait(&Stream{}) }},
		{"RecordStream", func() { x.RecordStream(&Stream{}) }},
	} {
		t.Run("Stream/"+tc.name, func(t *testing.T) {
			err := Catch(tc.fn)
			if !errors.Is(err, ErrArgument) || !strings.Contains(err.Error(), "zero Stream") {
				t.Errorf("got %v, want an ErrArgument error naming the zero Stream", err)
			}
		})
	}
	if s := (&Stream{}).String(); s != "zero stream" {
		t.Errorf("String: %q", s)
	}
	if err := Catch(func() { (&Stream{}).Release() }); err != nil {
		t.Errorf("Release of a zero Stream: %v, want nothing done", err)
	}

	var g Graph
	if err := g.Replay(); !errors.Is(err, ErrArgument) {
		t.Errorf("Replay of a zero Graph: %v, want ErrArgument", err)
	}
	if err := Catch(func() {
		if n := g.Nodes(); n != 0 {
			t.Errorf("Nodes of a zero Graph: %d", n)
		}
		g.Release()
		g.Release()
	}); err != nil {
		t.Errorf("a zero Graph: %v", err)
	}

	var e Event
	if err := Catch(func() {
		e.Record(def)
		if !e.Query() {
			t.Error("a zero Event recorded on the CPU's stream is not done")
		}
		e.Release()
	}); err != nil {
		t.Errorf("a zero Event: %v", err)
	}
}
