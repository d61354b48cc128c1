package quiesce

import (
	"testing"
	"time"
)

// TestWait checks that Wait returns after three quiet collections in a row,
// counting again from the last change.
func TestWait(t *testing.T) {
	for _, tt := range []struct {
		name    string
		changes int // reads that return a new count before it stays
		want    int // reads Wait makes
	}{
		{"quiet at once", 0, 4},
		{"one change", 1, 5},
		{"three changes", 3, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reads := 0
			start := time.Now()
			Wait(func() []int {
				reads++
				return []int{min(reads, tt.changes+1)}
			})
			if reads != tt.want {
				t.Errorf("%d reads, want %d", reads, tt.want)
			}
			if el := time.Since(start); el > time.Second {
				t.Errorf("took %v", el)
			}
		})
	}
}
