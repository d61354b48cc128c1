package data_test

import (
	"errors"
	"iter"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
)

// exitAt is a dataset of n numbers whose Get ends its goroutine with
// runtime.Goexit at index at, as a test's dataset calling t.FailNow does.
type exitAt struct{ n, at int }

func (d exitAt) Len() int { return d.n }
func (d exitAt) Get(i int) (data.Sample, error) {
	if i == d.at {
		runtime.Goexit()
	}
	return data.Sample{float64(i)}, nil
}

// exitStream yields the numbers 0 to n-1 from each shard, and ends its
// goroutine with runtime.Goexit at number at.
type exitStream struct{ n, at int }

func (s exitStream) All() iter.Seq2[data.Sample, error] { return s.Shard(data.WorkerInfo{}) }
func (s exitStream) Shard(data.WorkerInfo) iter.Seq2[data.Sample, error] {
	return func(yield func(data.Sample, error) bool) {
		for i := range s.n {
			if i == s.at {
				runtime.Goexit()
			}
			if !yield(data.Sample{float64(i)}, nil) {
				return
			}
		}
	}
}

// TestGoexitInWorkers ends a goroutine of a loader with workers by
// runtime.Goexit in a dataset's Get, a collate function, a sampler, a
// stream or a shard: the epoch must end with an error that says so (one
// that matches vram.ErrArgument), not as if the data had ended there, and
// leave no goroutine behind.
func TestGoexitInWorkers(t *testing.T) {
	exitingCollate := func(s []data.Sample, dev vram.Device) ([]*vram.Tensor, error) {
		if s[0][0].(float64) == 4 {
			runtime.Goexit()
		}
		return data.Collate(s, dev)
	}
	exitingSampler := data.SamplerFunc(func() iter.Seq[int] {
		return func(yield func(int) bool) {
			for i := range 10 {
				if i == 5 {
					runtime.Goexit()
				}
				if !yield(i) {
					return
				}
			}
		}
	})
	newLoader := map[string]func(workers int) (*data.Loader, error){
		"Get": func(w int) (*data.Loader, error) {
			return data.NewLoader(exitAt{10, 5}, 2, data.Options{NumWorkers: w})
		},
		"collate": func(w int) (*data.Loader, error) {
			return data.NewLoader(exitAt{10, -1}, 2, data.Options{NumWorkers: w, Collate: exitingCollate})
		},
		"sampler": func(w int) (*data.Loader, error) {
			return data.NewLoader(exitAt{10, -1}, 2, data.Options{NumWorkers: w, Sampler: exitingSampler})
		},
		"stream": func(w int) (*data.Loader, error) {
			return data.NewIterableLoader(data.StreamFunc(exitStream{10, 5}.All), 2, data.Options{NumWorkers: w})
		},
		"shard": func(w int) (*data.Loader, error) {
			return data.NewIterableLoader(exitStream{10, 5}, 2, data.Options{NumWorkers: w})
		},
	}
	for name, mk := range newLoader {
		for _, workers := range []int{1, 3} {
			t.Run(name+"/"+strings.Repeat("w", workers), func(t *testing.T) {
				before := runtime.NumGoroutine()
				l, err := mk(workers)
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() {
					var last error
					for _, err := range l.All() {
						if err != nil {
							last = err
						}
					}
					done <- last
				}()
				select {
				case err := <-done:
					if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), "Goexit") {
						t.Fatalf("an epoch whose goroutine exited ended with %v, want an error that says so", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the epoch did not end")
				}
				settled(t, before)
			})
		}
	}
}
