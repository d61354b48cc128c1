package data_test

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
)

// TestWorkerErrorsNameTheWorker: an error that a worker met preparing a
// batch (in Get or the collate function) names the worker, as PyTorch's
// "in DataLoader worker process 1" does and as a ShardedDataset's errors
// do, and still matches the original; an error of the sampler, which no
// worker runs, and any error without workers name none.
func TestWorkerErrorsNameTheWorker(t *testing.T) {
	dev := vram.Sim(0)
	errBad := errors.New("bad sample")
	outOfRange := data.SamplerFunc(func() iter.Seq[int] { return slices.Values([]int{0, 1, 2, 3, 99}) })
	badCollate := func(s []data.Sample, d vram.Device) ([]*vram.Tensor, error) {
		if s[0][1].(int) >= 4 {
			return nil, fmt.Errorf("collate: %w", vram.ErrDType)
		}
		return data.Collate(s, d)
	}
	tests := []struct {
		name    string
		ds      faulty
		opts    data.Options
		want    error  // matched by errors.Is, or nil for a *PanicError
		worker  string // what the error says, or "" for no worker
		workers int
	}{
		{"get error, 3 workers", faulty{n: 20, bad: 5, err: errBad, dev: dev}, data.Options{}, errBad, "worker 2:", 3},
		{"get error, 2 workers", faulty{n: 20, bad: 5, err: errBad, dev: dev}, data.Options{}, errBad, "worker 0:", 2},
		{"get panic, 3 workers", faulty{n: 20, bad: 7, dev: dev}, data.Options{}, nil, "worker 0:", 3},
		{"collate error, 3 workers", faulty{n: 20, bad: -1, dev: dev}, data.Options{Collate: badCollate}, vram.ErrDType, "worker 2:", 3},
		{"get error, resumed", faulty{n: 20, bad: 5, err: errBad, dev: dev}, data.Options{}, errBad, "worker 1:", 3},
		{"sampler error, 3 workers", faulty{n: 20, bad: -1, dev: dev}, data.Options{Sampler: outOfRange}, vram.ErrIndex, "", 3},
		{"get error, no workers", faulty{n: 20, bad: 5, err: errBad, dev: dev}, data.Options{}, errBad, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.NumWorkers = tc.workers
			l, err := data.NewLoader(tc.ds, 2, opts)
			if err != nil {
				t.Fatal(err)
			}
			start := 0
			if strings.Contains(tc.name, "resumed") {
				start = 1 // batch 2 is then the second the workers prepare
			}
			var got error
			for b, err := range l.AllFrom(start) {
				if err != nil {
					got = err
					break
				}
				b.Release()
			}
			switch {
			case got == nil:
				t.Fatal("no error")
			case tc.want != nil && !errors.Is(got, tc.want):
				t.Errorf("error %q does not match %v", got, tc.want)
			case tc.want == nil && !errors.As(got, new(*data.PanicError)):
				t.Errorf("error %q is not a *PanicError", got)
			}
			if tc.worker == "" {
				if strings.Contains(got.Error(), "worker") {
					t.Errorf("error %q names a worker; none ran the failing code", got)
				}
			} else if !strings.Contains(got.Error(), tc.worker) {
				t.Errorf("error %q does not say %q", got, tc.worker)
			}
			if n := strings.Count(got.Error(), "data:"); n != 1 {
				t.Errorf("error %q says \"data:\" %d times, want once", got, n)
			}
		})
	}
}
