package vram

import (
	"fmt"
	"testing"
)

// TestTidyResult checks that TidyResult releases fn's temporaries at
// once and leaves its result to the caller's own Tidy, or to the caller
// outside any Tidy.
func TestTidyResult(t *testing.T) {
	d := Sim(0)
	tests := []struct {
		name  string
		outer bool // call it inside a Tidy of the caller's
		nilFn bool // fn returns nil
	}{
		{"inside a Tidy", true, false},
		{"outside any Tidy", false, false},
		{"nil result inside a Tidy", true, true},
		{"nil result outside any Tidy", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			settle(d)
			start := MemoryAllocated(d)
			var r, tmp *Tensor
			body := func() {
				r = TidyResult(func() *Tensor {
					tmp = Ones(Shape{64}, d)
					if tc.nilFn {
						return nil
					}
					return tmp.MulScalar(2)
				})
				if !tmp.Released() {
					t.Errorf("the temporary outlived TidyResult")
				}
				if tc.nilFn != (r == nil) {
					t.Fatalf("result %v, want nil: %v", r, tc.nilFn)
				}
				if r != nil && (r.Released() || r.Float64s()[0] != 2) {
					t.Errorf("result released or wrong before the caller is done with it")
				}
			}
			if tc.outer {
				Tidy(body)
				if r != nil && !r.Released() {
					t.Errorf("the caller's Tidy did not release the result")
				}
			} else {
				body()
				if r != nil {
					if r.Released() {
						t.Errorf("outside any Tidy the result was released")
					}
					r.Release()
				}
			}
			if got := MemoryAllocated(d); got != start {
				t.Errorf("allocated %d bytes after, %d before", got, start)
			}
		})
	}
}

func ExampleTidyResult() {
	double := func(x *Tensor) *Tensor {
		return TidyResult(func() *Tensor {
			ones := OnesLike(x) // released when TidyResult returns
			return x.Add(x.Mul(ones))
		})
	}
	Tidy(func() {
		y := double(FromSlice([]float64{1, 2, 3}, Shape{3}))
		fmt.Println(y.Float64s()) // y is released by this Tidy
	})
	// Output: [2 4 6]
}

// TestTidyResultOfAnOlderTensor checks that TidyResult leaves a result
// that existed before fn ran (fn returned one of its inputs as it is, as
// an identity layer does) to whoever owned it: the caller's Tidy released
// a tensor of the caller's own, or of an outer Tidy, as soon as it ended.
func TestTidyResultOfAnOlderTensor(t *testing.T) {
	tests := []struct {
		name string
		// run calls TidyResult with fn returning x, made as it says, and
		// reports whether x survived the caller's Tidy, and then whether
		// its owner released it as it should.
		run func(t *testing.T) (survived, ownerDone bool)
	}{
		{"the caller's own", func(t *testing.T) (bool, bool) {
			x := Ones(Shape{2})
			Tidy(func() { TidyResult(func() *Tensor { return x }) })
			survived := !x.Released()
			x.Release()
			return survived, true
		}},
		{"kept", func(t *testing.T) (bool, bool) {
			var x *Tensor
			Tidy(func() { x = Keep(Ones(Shape{2})) })
			Tidy(func() { TidyResult(func() *Tensor { return x }) })
			survived := !x.Released()
			x.Release()
			return survived, true
		}},
		{"an outer Tidy's", func(t *testing.T) (bool, bool) {
			var x *Tensor
			survived := false
			Tidy(func() {
				x = Ones(Shape{2})
				Tidy(func() { TidyResult(func() *Tensor { return x }) })
				survived = !x.Released()
			})
			return survived, x.Released()
		}},
		{"made by fn and kept", func(t *testing.T) (bool, bool) {
			// Not older: it stays in the caller's Tidy, as any result.
			var x *Tensor
			Tidy(func() { x = TidyResult(func() *Tensor { return Keep(Ones(Shape{2})) }) })
			return true, x.Released()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			survived, done := tc.run(t)
			if !survived {
				t.Errorf("the caller's Tidy released a tensor fn did not make")
			}
			if !done {
				t.Errorf("the tensor's owner did not release it")
			}
		})
	}
}
