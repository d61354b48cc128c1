package trace

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestNilArgumentsAreErrors checks that the readers and writers given a nil
// io.Reader, io.Writer or *Snapshot (what vram.MemorySnapshot returns for
// a device without a caching allocator) return an error of the documented
// type instead of panicking.
func TestNilArgumentsAreErrors(t *testing.T) {
	var buf bytes.Buffer
	snap := &Snapshot{}
	tests := []struct {
		name  string
		call  func() error
		parse bool // the error must be a *ParseError, else an *InvalidSnapshotError unless plain
		plain bool // any error saying "nil"
	}{
		{"Read", func() error { _, err := Read(nil, "x"); return err }, true, false},
		{"Limits.Read", func() error { _, err := (Limits{MaxBytes: 1 << 20}).Read(nil, "x"); return err }, true, false},
		{"ReadJSON", func() error { _, err := ReadJSON(nil); return err }, true, false},
		{"ReadPickle", func() error { _, err := ReadPickle(nil); return err }, true, false},
		{"NewTextReader", func() error { _, err := NewTextReader(nil); return err }, true, false},
		{"ReadTextAll", func() error { _, err := ReadTextAll(nil); return err }, true, false},
		{"WriteJSON of a nil snapshot", func() error { return WriteJSON(&buf, nil) }, false, false},
		{"Validate of a nil snapshot", func() error { return (*Snapshot)(nil).Validate() }, false, false},
		{"StateAt of a nil snapshot", func() error { _, err := StateAt(nil, 0); return err }, false, false},
		{"WriteJSON to a nil writer", func() error { return WriteJSON(nil, snap) }, false, true},
		{"WriteText to a nil writer", func() error { return WriteText(nil, nil) }, false, true},
		{"TextWriter.Write to a nil writer", func() error { return NewTextWriter(nil, "h").Write(Event{Action: ActionAlloc, Size: 1}) }, false, true},
		{"TextWriter.Flush to a nil writer", func() error { return NewTextWriter(nil).Flush() }, false, true},
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
			if err == nil || !strings.Contains(err.Error(), "nil") {
				t.Fatalf("error %v, want one saying what is nil", err)
			}
			var pe *ParseError
			var ie *InvalidSnapshotError
			switch {
			case tc.plain:
			case tc.parse && !errors.As(err, &pe):
				t.Errorf("%T is not a *ParseError", err)
			case !tc.parse && !errors.As(err, &ie):
				t.Errorf("%T is not an *InvalidSnapshotError", err)
			}
		})
	}
	if buf.Len() != 0 {
		t.Errorf("WriteJSON of a nil snapshot wrote %q", buf.String())
	}
}
