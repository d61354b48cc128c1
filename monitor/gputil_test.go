package monitor

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestOptionsCheck(t *testing.T) {
	tests := []struct {
		order Order
		ok    bool
	}{
		{"", true}, {OrderFirst, true}, {OrderLast, true}, {OrderRandom, true}, {OrderLoad, true}, {OrderMemory, true},
		{"Memory", false}, {"mem", false}, {"memoryUtil", false}, {" first", false},
	}
	for _, tc := range tests {
		t.Run(string(tc.order), func(t *testing.T) {
			opts := Options{Order: tc.order}
			err := opts.Check()
			if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("Check: %v, want ok %v", err, tc.ok)
			}
			if tc.ok {
				return
			}
			// Refused before any GPU is read: the same error with or
			// without a driver.
			if _, err := GetAvailable(opts); !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("GetAvailable: %v", err)
			}
			if _, err := GetFirstAvailable(opts); !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("GetFirstAvailable: %v", err)
			}
			if _, err := FirstAvailable(context.Background(), NewRecorded(nil), opts, 1, 0); !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("FirstAvailable: %v", err)
			}
		})
	}
}

// closedAfter is a source that fails from its n-th read on.
type closedAfter struct {
	*Recorded
	n, reads int
}

func (c *closedAfter) Read() (Reading, error) {
	c.reads++
	if c.reads >= c.n {
		return Reading{}, ErrClosed
	}
	return c.Recorded.Read()
}

func TestFirstAvailable(t *testing.T) {
	busy := Reading{GPUs: fakeGPUs([3]int{90, 0, 90}, [3]int{90, 0, 90})}
	// GPU 0 went away; GPU 1 is free.
	oneFree := Reading{GPUs: fakeGPUs([3]int{90, 0, 90}, [3]int{10, 0, 90})[1:]}
	none := Reading{GPUs: []GPU{}}
	tests := []struct {
		name     string
		readings []Reading
		fail     int // the read that fails, 0 for none
		attempts int
		want     int
		err      error
		reads    int
	}{
		{"first try", []Reading{oneFree}, 0, 3, 1, nil, 1},
		{"third try", []Reading{busy, busy, oneFree}, 0, 3, 1, nil, 3},
		{"too few attempts", []Reading{busy, busy, oneFree}, 0, 2, -1, ErrNoneAvailable, 2},
		{"zero attempts read once", []Reading{busy, oneFree}, 0, 0, -1, ErrNoneAvailable, 1},
		{"no GPUs", []Reading{none}, 0, 2, -1, ErrNoneAvailable, 2},
		{"source fails", []Reading{busy}, 2, 5, -1, ErrClosed, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &closedAfter{Recorded: NewRecorded(tc.readings), n: tc.fail}
			if tc.fail == 0 {
				src.n = 1 << 30
			}
			id, err := FirstAvailable(context.Background(), src, Options{}, tc.attempts, time.Millisecond)
			if id != tc.want || !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) || src.reads != tc.reads {
				t.Errorf("got %d, %v after %d reads; want %d, %v after %d", id, err, src.reads, tc.want, tc.err, tc.reads)
			}
		})
	}

	// A context that ends stops the wait at once.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := FirstAvailable(ctx, NewRecorded([]Reading{busy}), Options{}, 1000, time.Hour)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Errorf("cancelled wait: %v after %v", err, time.Since(start))
	}
}

// TestFirstAvailableInterval checks the wait between attempts: a negative
// interval is refused before the source is read, as Python's time.sleep,
// which getFirstAvailable waits with, refuses one, rather than read the
// GPUs back to back and report "-1s apart"; zero reads them back to back.
func TestFirstAvailableInterval(t *testing.T) {
	busy := Reading{GPUs: fakeGPUs([3]int{90, 0, 90})}
	for _, tc := range []struct {
		name     string
		attempts int
		interval time.Duration
		err      error
		reads    int
	}{
		{"negative", 3, -time.Second, ErrInvalidOptions, 0},
		{"most negative", 3, math.MinInt64, ErrInvalidOptions, 0},
		{"negative, one attempt", 1, -time.Nanosecond, ErrInvalidOptions, 0},
		{"zero", 3, 0, ErrNoneAvailable, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &closedAfter{Recorded: NewRecorded([]Reading{busy}), n: 1 << 30}
			id, err := FirstAvailable(context.Background(), src, Options{}, tc.attempts, tc.interval)
			if id != -1 || !errors.Is(err, tc.err) || src.reads != tc.reads {
				t.Errorf("got %d, %v after %d reads; want -1, %v after %d", id, err, src.reads, tc.err, tc.reads)
			}
			if errors.Is(tc.err, ErrInvalidOptions) && (err == nil || !strings.Contains(err.Error(), "interval "+tc.interval.String())) {
				t.Errorf("error %v does not name the interval %s", err, tc.interval)
			}
		})
	}
}
