package vram

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
)

// TestSearchSorted checks positions against PyTorch's definitions: left
// and right sides, batched rows, a sorter, NaN and integer sequences.
func TestSearchSorted(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name   string
		seq    []float64
		sshape Shape
		vals   []float64
		vshape Shape
		opts   SearchSortedOptions
		sorter []int64
		want   []int64
	}{
		{"left", []float64{1, 3, 5, 7, 9}, Shape{5}, []float64{3, 6, 9}, Shape{3}, SearchSortedOptions{}, nil, []int64{1, 3, 4}},
		{"right", []float64{1, 3, 5, 7, 9}, Shape{5}, []float64{3, 6, 9}, Shape{3}, SearchSortedOptions{Right: true}, nil, []int64{2, 3, 5}},
		{"side right", []float64{1, 3, 5, 7, 9}, Shape{5}, []float64{3, 6, 9}, Shape{3}, SearchSortedOptions{Side: "right"}, nil, []int64{2, 3, 5}},
		{"ties", []float64{1, 2, 2, 2, 3}, Shape{5}, []float64{2, 2}, Shape{2}, SearchSortedOptions{}, nil, []int64{1, 1}},
		{"ends", []float64{1, 2}, Shape{2}, []float64{-5, 5}, Shape{2}, SearchSortedOptions{}, nil, []int64{0, 2}},
		{"values 2-D", []float64{1, 3, 5}, Shape{3}, []float64{0, 2, 4, 6}, Shape{2, 2}, SearchSortedOptions{}, nil, []int64{0, 1, 2, 3}},
		{"scalar value", []float64{1, 3, 5}, Shape{3}, []float64{4}, Shape{}, SearchSortedOptions{}, nil, []int64{2}},
		{"batched", []float64{1, 3, 5, 7, 9, 2, 4, 6, 8, 10}, Shape{2, 5}, []float64{3, 6, 9, 3, 6, 9}, Shape{2, 3}, SearchSortedOptions{Right: true}, nil, []int64{2, 3, 5, 1, 3, 4}},
		{"sorter", []float64{5, 1, 3}, Shape{3}, []float64{2, 5}, Shape{2}, SearchSortedOptions{}, []int64{1, 2, 0}, []int64{1, 2}},
		{"nan value last", []float64{1, 2, nan}, Shape{3}, []float64{nan, 1.5}, Shape{2}, SearchSortedOptions{}, nil, []int64{3, 1}},
		{"empty sequence", []float64{}, Shape{0}, []float64{1}, Shape{1}, SearchSortedOptions{}, nil, []int64{0}},
	}
	for _, d := range orderDevices {
		for _, tc := range cases {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				s := FromSlice(tc.seq, tc.sshape, d)
				defer s.Release()
				v := FromSlice(tc.vals, tc.vshape, d)
				defer v.Release()
				if tc.sorter != nil {
					tc.opts.Sorter = FromSlice(tc.sorter, nil, d)
					defer tc.opts.Sorter.Release()
				}
				got := SearchSorted(s, v, tc.opts)
				defer got.Release()
				if got.DType() != Int64 || !slices.Equal(got.Shape(), tc.vshape) || !slices.Equal(got.Int64s(), tc.want) {
					t.Errorf("got %v %v, want %v %v", got.Shape(), got.Int64s(), tc.vshape, tc.want)
				}
			})
		}
	}
	t.Run("int64 exact and int32 out", func(t *testing.T) {
		s := FromSlice([]int64{1 << 60, 1<<60 + 2}, nil)
		defer s.Release()
		v := FromSlice([]int64{1<<60 + 1}, nil)
		defer v.Release()
		got := SearchSorted(s, v, SearchSortedOptions{OutInt32: true})
		defer got.Release()
		if got.DType() != Int32 || got.Int64s()[0] != 1 {
			t.Errorf("got %v", got)
		}
	})
}

// TestBucketizeBincountHistc checks the counting ops against hand-worked
// values.
func TestBucketizeBincountHistc(t *testing.T) {
	for _, d := range orderDevices {
		t.Run(d.String(), func(t *testing.T) {
			b := FromSlice([]float64{1, 3, 5, 7, 9}, nil, d)
			defer b.Release()
			x := FromSlice([]int64{3, 6, 9, 1, 10, 0}, Shape{2, 3}, d)
			defer x.Release()
			for _, right := range []bool{false, true} {
				got := x.Bucketize(b, right)
				want := []int64{1, 3, 4, 0, 5, 0}
				if right {
					want = []int64{2, 3, 5, 1, 5, 0}
				}
				if !slices.Equal(got.Shape(), Shape{2, 3}) || !slices.Equal(got.Int64s(), want) {
					t.Errorf("bucketize right=%v: got %v, want %v", right, got.Int64s(), want)
				}
				got.Release()
			}
			in := FromSlice([]int64{1, 1, 3, 0}, nil, d)
			defer in.Release()
			c := in.Bincount(nil, 0)
			defer c.Release()
			if c.DType() != Int64 || !slices.Equal(c.Int64s(), []int64{1, 2, 0, 1}) {
				t.Errorf("bincount got %v", c)
			}
			cm := in.Bincount(nil, 6)
			defer cm.Release()
			if !slices.Equal(cm.Int64s(), []int64{1, 2, 0, 1, 0, 0}) {
				t.Errorf("bincount minlength got %v", cm)
			}
			for _, wt := range []struct {
				dt, want DType
			}{{Float32, Float32}, {Float64, Float64}, {Int64, Float64}} {
				w := FromSlice([]float64{0.5, 1, 2, 4}, nil, d, wt.dt)
				cw := in.Bincount(w, 0)
				if wt.dt == Int64 {
					if cw.DType() != wt.want || !slices.Equal(cw.Float64s(), []float64{4, 1, 0, 2}) {
						t.Errorf("bincount %s weights got %v", wt.dt, cw)
					}
				} else if cw.DType() != wt.want || !slices.Equal(cw.Float64s(), []float64{4, 1.5, 0, 2}) {
					t.Errorf("bincount %s weights got %v", wt.dt, cw)
				}
				cw.Release()
				w.Release()
			}
			e := FromSlice([]int64{}, Shape{0}, d)
			defer e.Release()
			ce := e.Bincount(nil, 2)
			defer ce.Release()
			if !slices.Equal(ce.Int64s(), []int64{0, 0}) {
				t.Errorf("empty bincount got %v", ce)
			}
			hx := FromSlice([]float32{1, 2, 1, 4, 2.5, float32(math.NaN()), -1}, nil, d)
			defer hx.Release()
			for _, tc := range []struct {
				bins     int
				min, max float64
				want     []float64
			}{
				{4, 0, 3, []float64{0, 2, 1, 1}}, // 4 and -1 outside; 2.5 in [2.25, 3]
				{3, 0, 0, []float64{1, 2, 3}},    // data range [-1, 4]; NaN skipped
				{2, 1, 1, []float64{0, 3}},       // [0, 2]: 1, 1, 2 fall in; 2 is max
				{1, -1, 4, []float64{6}},         // max counts in the last bin
			} {
				if tc.min == 0 && tc.max == 0 {
					// the data range holds NaN: refused, like PyTorch
					if err := Catch(func() { hx.Histc(tc.bins, 0, 0) }); !errors.Is(err, ErrArgument) {
						t.Errorf("histc of NaN data range: got %v", err)
					}
					continue
				}
				h := hx.Histc(tc.bins, tc.min, tc.max)
				if h.DType() != Float32 || !slices.Equal(h.Float64s(), tc.want) {
					t.Errorf("histc(%d, %v, %v) got %v, want %v", tc.bins, tc.min, tc.max, h.Float64s(), tc.want)
				}
				h.Release()
			}
			hr := FromSlice([]float64{1, 2, 1, 4}, nil, d)
			defer hr.Release()
			h := hr.Histc(3, 0, 0)
			defer h.Release()
			if !slices.Equal(h.Float64s(), []float64{2, 1, 1}) {
				t.Errorf("histc data range got %v", h.Float64s())
			}
		})
	}
}

// TestUnique checks sorted unique values, inverse and counts, NaN
// staying distinct, and consecutive runs.
func TestUnique(t *testing.T) {
	nan := math.NaN()
	for _, d := range orderDevices {
		t.Run(d.String(), func(t *testing.T) {
			x := FromSlice([]int64{3, 1, 3, 2, 1, 3}, Shape{2, 3}, d)
			defer x.Release()
			v, inv, c := x.Unique(true, true, true)
			defer v.Release()
			defer inv.Release()
			defer c.Release()
			if v.DType() != Int64 || !slices.Equal(v.Int64s(), []int64{1, 2, 3}) ||
				!slices.Equal(inv.Shape(), Shape{2, 3}) || !slices.Equal(inv.Int64s(), []int64{2, 0, 2, 1, 0, 2}) ||
				!slices.Equal(c.Int64s(), []int64{2, 1, 3}) {
				t.Errorf("got %v %v %v", v, inv, c)
			}
			only, none1, none2 := x.Unique(false, false, false)
			defer only.Release()
			if none1 != nil || none2 != nil || !slices.Equal(only.Int64s(), []int64{1, 2, 3}) {
				t.Errorf("values only: got %v %v %v", only, none1, none2)
			}
			f := FromSlice([]float64{nan, 2, nan, 1, 2}, nil, d)
			defer f.Release()
			fv, _, fc := f.Unique(true, false, true)
			defer fv.Release()
			defer fc.Release()
			if !sameFloats(fv.Float64s(), []float64{1, 2, nan, nan}, 0) || !slices.Equal(fc.Int64s(), []int64{1, 2, 1, 1}) {
				t.Errorf("nan: got %v %v", fv, fc)
			}
			r := FromSlice([]float32{1, 1, 2, 2, 3, 1, 1, 2}, nil, d)
			defer r.Release()
			rv, ri, rc := r.UniqueConsecutive(true, true)
			defer rv.Release()
			defer ri.Release()
			defer rc.Release()
			if !slices.Equal(rv.Float64s(), []float64{1, 2, 3, 1, 2}) || !slices.Equal(ri.Int64s(), []int64{0, 0, 1, 1, 2, 3, 3, 4}) ||
				!slices.Equal(rc.Int64s(), []int64{2, 2, 1, 2, 1}) {
				t.Errorf("consecutive: got %v %v %v", rv, ri, rc)
			}
			s := Scalar(5, Float32, d)
			defer s.Release()
			sv, si, _ := s.Unique(true, true, false)
			defer sv.Release()
			defer si.Release()
			if !slices.Equal(sv.Shape(), Shape{1}) || si.Dim() != 0 {
				t.Errorf("0-d: got %v %v", sv, si)
			}
			e := Zeros(Shape{0, 2}, d)
			defer e.Release()
			ev, ei, ec := e.Unique(true, true, true)
			defer ev.Release()
			defer ei.Release()
			defer ec.Release()
			if ev.NumElements() != 0 || !slices.Equal(ei.Shape(), Shape{0, 2}) || ec.NumElements() != 0 {
				t.Errorf("empty: got %v %v %v", ev, ei, ec)
			}
		})
	}
}

// TestSearchErrors checks the documented refusals.
func TestSearchErrors(t *testing.T) {
	s := FromSlice([]float64{1, 2, 3}, nil)
	defer s.Release()
	s2 := Zeros(Shape{2, 3})
	defer s2.Release()
	v := FromSlice([]float64{1, 2, 3, 4}, Shape{4, 1})
	defer v.Release()
	neg := FromSlice([]int64{1, -1}, nil)
	defer neg.Release()
	w3 := Ones(Shape{3})
	defer w3.Release()
	bad := FromSlice([]int64{0, 3, 1}, nil)
	defer bad.Release()
	sc := Scalar(1, Float64)
	defer sc.Release()
	for _, tc := range []struct {
		name string
		fn   func()
		kind error
	}{
		{"side contradicts right", func() { SearchSorted(s, s, SearchSortedOptions{Right: true, Side: "left"}) }, ErrArgument},
		{"bad side", func() { SearchSorted(s, s, SearchSortedOptions{Side: "up"}) }, ErrArgument},
		{"rows differ", func() { SearchSorted(s2, v, SearchSortedOptions{}) }, ErrShape},
		{"0-d sequence", func() { SearchSorted(sc, s, SearchSortedOptions{}) }, ErrShape},
		{"sorter out of range", func() { SearchSorted(s, s, SearchSortedOptions{Sorter: bad}) }, ErrArgument},
		{"sorter dtype", func() { SearchSorted(s, s, SearchSortedOptions{Sorter: s}) }, ErrDType},
		{"bucketize 2-D boundaries", func() { s.Bucketize(s2, false) }, ErrShape},
		{"bool values", func() { SearchSorted(s, FromSlice([]bool{true}, nil), SearchSortedOptions{}) }, ErrDType},
		{"bool sequence", func() { SearchSorted(FromSlice([]bool{false, true}, nil), s, SearchSortedOptions{}) }, ErrDType},
		{"bucketize bool input", func() { FromSlice([]bool{true, false}, nil).Bucketize(s, false) }, ErrDType},
		{"bucketize bool boundaries", func() { s.BucketizeWith(FromSlice([]bool{false, true}, nil), BucketizeOptions{OutInt32: true}) }, ErrDType},
		{"bincount negative", func() { neg.Bincount(nil, 0) }, ErrArgument},
		{"bincount minlength", func() { bad.Bincount(nil, -1) }, ErrArgument},
		{"bincount float", func() { s.Bincount(nil, 0) }, ErrDType},
		{"bincount 2-D", func() { s2.Long().Bincount(nil, 0) }, ErrShape},
		{"bincount weights shape", func() { neg.Bincount(w3, 0) }, ErrShape},
		{"histc bins", func() { s.Histc(0, 0, 1) }, ErrArgument},
		{"histc min > max", func() { s.Histc(2, 3, 1) }, ErrArgument},
		{"histc infinite", func() { s.Histc(2, 0, math.Inf(1)) }, ErrArgument},
		{"histc int", func() { bad.Histc(2, 0, 1) }, ErrDType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Catch(func() { Tidy(tc.fn) }); !errors.Is(err, tc.kind) {
				t.Errorf("got %v, want %v", err, tc.kind)
			}
		})
	}
}

// TestCountsHugeSizes checks that Bincount and Histc refuse a result too
// large for the device, or for any tensor, with an error, where they used
// to allocate it on the host first (an out-of-memory crash of the whole
// process, or a runtime panic for the largest int64), and that a large but
// sparse result still holds the right counts.
func TestCountsHugeSizes(t *testing.T) {
	dev := Sim(0)
	big := FromSlice([]int64{1 << 40}, nil, dev)
	defer big.Release()
	top := FromSlice([]int64{2, math.MaxInt64}, nil, dev)
	defer top.Release()
	one := FromSlice([]int64{1}, nil, dev)
	defer one.Release()
	x := FromSlice([]float32{0.5, 1}, nil, dev)
	defer x.Release()
	w := FromSlice([]float32{2}, nil, dev)
	defer w.Release()
	for _, tc := range []struct {
		name string
		fn   func()
		kind error
	}{
		{"bincount value beyond the device", func() { big.Bincount(nil, 0) }, ErrOutOfMemory},
		{"bincount weighted value beyond the device", func() { big.Bincount(w, 0) }, ErrOutOfMemory},
		{"bincount largest int64", func() { top.Bincount(nil, 0) }, ErrShape},
		{"bincount minlength beyond any tensor", func() { one.Bincount(nil, math.MaxInt) }, ErrShape},
		{"bincount minlength beyond the device", func() { one.Bincount(nil, 1<<40) }, ErrOutOfMemory},
		{"histc bins beyond the device", func() { x.Histc(1<<40, 0, 1) }, ErrOutOfMemory},
		{"histc bins beyond any tensor", func() { x.Histc(math.MaxInt, 0, 1) }, ErrShape},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Catch(func() { Tidy(tc.fn) })
			if !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want %v", err, tc.kind)
			}
			var e *Error
			if !errors.As(err, &e) || (e.Op != "bincount" && e.Op != "histc") {
				t.Errorf("error %v does not name the op", err)
			}
		})
	}
	// A sparse result: two counts a million elements apart.
	sparse := FromSlice([]int64{1 << 20, 3, 1 << 20}, nil, dev)
	defer sparse.Release()
	c := sparse.Bincount(nil, 0)
	defer c.Release()
	if c.Size(0) != 1<<20+1 || c.DType() != Int64 {
		t.Fatalf("bincount: got %v %v, want [%d] int64", c.Shape(), c.DType(), 1<<20+1)
	}
	got := c.Int64s()
	var sum int64
	for _, v := range got {
		sum += v
	}
	if got[3] != 1 || got[1<<20] != 2 || sum != 3 {
		t.Errorf("bincount: counts %d at 3 and %d at 2^20, %d in all; want 1, 2 and 3", got[3], got[1<<20], sum)
	}
}

// TestSearchSortedInt32Limit checks that int32 positions are refused, with
// ErrArgument and before the sequence is read, for a sequence whose last
// dimension holds 2^31-1 elements or more, as PyTorch's searchsorted and
// bucketize refuse out_int32 there: position 2^31-1 would not fit.
func TestSearchSortedInt32Limit(t *testing.T) {
	tests := []struct {
		name string
		f    func(seq, v *Tensor)
	}{
		{"searchsorted", func(seq, v *Tensor) { SearchSorted(seq, v, SearchSortedOptions{OutInt32: true}) }},
		{"searchsorted right", func(seq, v *Tensor) { SearchSorted(seq, v, SearchSortedOptions{OutInt32: true, Side: "right"}) }},
		{"bucketize", func(seq, v *Tensor) { v.BucketizeWith(seq, BucketizeOptions{OutInt32: true}) }},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, n := range []int{math.MaxInt32, 1 << 40} {
			for _, tc := range tests {
				t.Run(fmt.Sprintf("%s/%s/%d", dev, tc.name, n), func(t *testing.T) {
					Tidy(func() {
						seq := Zeros(Shape{1}, dev).Expand(n) // a view: no storage of n elements
						v := FromSlice([]float32{1}, nil, dev)
						if err := Catch(func() { tc.f(seq, v) }); !errors.Is(err, ErrArgument) {
							t.Fatalf("got %v, want ErrArgument", err)
						}
					})
				})
			}
		}
	}
}
