package vram

import (
	"errors"
	"math"
	"testing"
)

// bruteCTC returns the CTC loss of one sample by enumerating every path of
// length len(lp) over the classes: −log of the summed probability of the
// paths that collapse to target.
func bruteCTC(lp [][]float64, target []int, blank int) float64 {
	tn := len(lp)
	if tn == 0 {
		if len(target) == 0 {
			return 0
		}
		return math.Inf(1)
	}
	c := len(lp[0])
	path := make([]int, tn)
	var total float64
	for {
		var got []int
		prev := -1
		for _, k := range path {
			if k != prev && k != blank {
				got = append(got, k)
			}
			prev = k
		}
		if equalInts(got, target) {
			var lsum float64
			for t, k := range path {
				lsum += lp[t][k]
			}
			total += math.Exp(lsum)
		}
		i := 0
		for i < tn {
			path[i]++
			if path[i] < c {
				break
			}
			path[i] = 0
			i++
		}
		if i == tn {
			break
		}
	}
	return -math.Log(total)
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ctcCase is a batch of samples for CTCLoss with its inputs' values.
type ctcCase struct {
	name    string
	t, c    int
	blank   int
	targets [][]int // each sample's labels
	inLens  []int
}

func (tc ctcCase) logProbs(seed uint64) *Tensor {
	return Randn(Shape{tc.t, len(tc.targets), tc.c}, Float64, WithGenerator(NewGenerator(seed))).LogSoftmax(2)
}

// padded returns the targets padded with pad to the longest one, and the
// target lengths.
func (tc ctcCase) padded(pad int64) (*Tensor, *Tensor) {
	s := 0
	for _, l := range tc.targets {
		s = max(s, len(l))
	}
	v := make([]int64, len(tc.targets)*s)
	lens := make([]int64, len(tc.targets))
	for b, l := range tc.targets {
		for i := range s {
			v[b*s+i] = pad
			if i < len(l) {
				v[b*s+i] = int64(l[i])
			}
		}
		lens[b] = int64(len(l))
	}
	return FromSlice(v, Shape{len(tc.targets), s}), FromSlice(lens, Shape{len(lens)})
}

// concatenated returns the targets in one dimension and their lengths.
func (tc ctcCase) concatenated() (*Tensor, *Tensor) {
	var v []int32
	lens := make([]int32, len(tc.targets))
	for b, l := range tc.targets {
		for _, k := range l {
			v = append(v, int32(k))
		}
		lens[b] = int32(len(l))
	}
	return FromSlice(v, Shape{len(v)}), FromSlice(lens, Shape{len(lens)})
}

func (tc ctcCase) want(lp []float64) []float64 {
	n := len(tc.targets)
	out := make([]float64, n)
	for b := range n {
		rows := make([][]float64, tc.inLens[b])
		for t := range rows {
			rows[t] = lp[(t*n+b)*tc.c : (t*n+b+1)*tc.c]
		}
		out[b] = bruteCTC(rows, tc.targets[b], tc.blank)
	}
	return out
}

var ctcCases = []ctcCase{
	{name: "T1 C2 one label", t: 1, c: 2, targets: [][]int{{1}}, inLens: []int{1}},
	{name: "T2 C2 one label", t: 2, c: 2, targets: [][]int{{1}}, inLens: []int{2}},
	{name: "T3 C3 two labels", t: 3, c: 3, targets: [][]int{{1, 2}}, inLens: []int{3}},
	{name: "T3 C3 repeated label", t: 3, c: 3, targets: [][]int{{1, 1}}, inLens: []int{3}},
	{name: "repeat too long for T2", t: 2, c: 3, targets: [][]int{{1, 1}}, inLens: []int{2}},
	{name: "empty target", t: 3, c: 2, targets: [][]int{{}}, inLens: []int{3}},
	{name: "zero input length", t: 2, c: 2, targets: [][]int{{}, {1}}, inLens: []int{0, 0}},
	{name: "blank last", t: 4, c: 3, blank: 2, targets: [][]int{{0, 1}, {1}}, inLens: []int{4, 3}},
	{name: "batch of lengths", t: 5, c: 3, targets: [][]int{{1, 2, 1}, {2}, {}, {2, 2}}, inLens: []int{5, 2, 4, 3}},
}

// TestCTCLossBruteForce compares CTCLoss with the sum over every path,
// for padded and concatenated targets.
func TestCTCLossBruteForce(t *testing.T) {
	for i, tc := range ctcCases {
		t.Run(tc.name, func(t *testing.T) {
			lp := tc.logProbs(uint64(i + 1))
			want := tc.want(lp.Float64s())
			in := FromSlice(tc.inLens, Shape{len(tc.inLens)})
			pt, pl := tc.padded(int64(tc.blank))
			ct, cl := tc.concatenated()
			for _, form := range []struct {
				name          string
				targets, lens *Tensor
			}{{"padded", pt, pl}, {"concatenated", ct, cl}} {
				got := CTCLoss(lp, form.targets, in, form.lens, tc.blank, false).Float64s()
				for b := range want {
					if !closeOrInf(got[b], want[b]) {
						t.Errorf("%s: sample %d: loss %v, want %v", form.name, b, got[b], want[b])
					}
				}
			}
		})
	}
}

func closeOrInf(got, want float64) bool {
	if math.IsInf(want, 1) {
		return math.IsInf(got, 1)
	}
	return math.Abs(got-want) <= 1e-12+1e-12*math.Abs(want)
}

// TestCTCLossUnbatched checks that [T, C] log-probabilities with [S]
// targets and scalar or [1] lengths give the scalar loss of that sample.
func TestCTCLossUnbatched(t *testing.T) {
	tc := ctcCases[2]
	lp := tc.logProbs(5)
	want := tc.want(lp.Float64s())[0]
	one := lp.Reshape(tc.t, tc.c)
	tg := FromSlice([]int64{1, 2, 0, 0}, Shape{4})
	for _, lens := range []struct {
		name    string
		in, tgt *Tensor
	}{
		{"scalars", FromSlice([]int64{3}, Shape{1}).Reshape(), FromSlice([]int64{2}, Shape{1}).Reshape()},
		{"[1]", FromSlice([]int64{3}, Shape{1}), FromSlice([]int64{2}, Shape{1})},
	} {
		t.Run(lens.name, func(t *testing.T) {
			got := CTCLoss(one, tg, lens.in, lens.tgt, 0, false)
			if got.Dim() != 0 || math.Abs(got.Item()-want) > 1e-12 {
				t.Fatalf("got %v of shape %v, want the scalar %v", got.Float64s(), got.Shape(), want)
			}
		})
	}
}

// TestCTCLossGradient checks the gradient against finite differences of
// the loss, normalized log-probabilities or not, with samples shorter than
// T (whose later steps get no gradient).
func TestCTCLossGradient(t *testing.T) {
	for i, tc := range []ctcCase{ctcCases[3], ctcCases[7], ctcCases[8]} {
		t.Run(tc.name, func(t *testing.T) {
			in := FromSlice(tc.inLens, Shape{len(tc.inLens)})
			tg, tl := tc.padded(0)
			for _, x := range []*Tensor{tc.logProbs(uint64(10 + i)), rnd(uint64(20+i), tc.t, len(tc.targets), tc.c)} {
				gradCheck(t, func(xs []*Tensor) *Tensor { return CTCLoss(xs[0], tg, in, tl, tc.blank, false) }, x)
				g := x.Grad().Float64s()
				for b, n := range tc.inLens {
					for s := n; s < tc.t; s++ {
						for k := range tc.c {
							if v := g[(s*len(tc.targets)+b)*tc.c+k]; v != 0 {
								t.Errorf("sample %d step %d class %d, past its input length: gradient %v, want 0", b, s, k, v)
							}
						}
					}
				}
			}
		})
	}
}

// TestCTCLossImpossible checks a target that no alignment produces: +Inf
// and a NaN gradient over its input, or 0 and a zero gradient with
// zeroInfinity; the other samples keep their loss and gradient.
func TestCTCLossImpossible(t *testing.T) {
	tc := ctcCase{t: 3, c: 3, targets: [][]int{{1, 1}, {2}}, inLens: []int{2, 3}}
	want := tc.want(tc.logProbs(3).Float64s())
	in := FromSlice(tc.inLens, Shape{2})
	tg, tl := tc.padded(0)
	for _, zi := range []bool{false, true} {
		lp := tc.logProbs(3).Detach().SetRequiresGrad(true)
		l := CTCLoss(lp, tg, in, tl, 0, zi)
		got := l.Float64s()
		if zi && got[0] != 0 || !zi && !math.IsInf(got[0], 1) || math.Abs(got[1]-want[1]) > 1e-12 {
			t.Errorf("zeroInfinity %v: losses %v, want sample 0 %v and sample 1 %v", zi, got, map[bool]float64{false: math.Inf(1), true: 0}[zi], want[1])
		}
		l.Backward(Gradient(FromSlice([]float64{1, 1}, Shape{2})))
		g := lp.Grad().Float64s()
		for s := range tc.t {
			for k := range tc.c {
				v := g[(s*2+0)*tc.c+k]
				switch {
				case zi && v != 0:
					t.Errorf("zeroInfinity: step %d class %d: gradient %v, want 0", s, k, v)
				case !zi && s < 2 && !math.IsNaN(v):
					t.Errorf("step %d class %d: gradient %v, want NaN", s, k, v)
				case !zi && s >= 2 && v != 0:
					t.Errorf("step %d class %d past the input: gradient %v, want 0", s, k, v)
				}
				if w := g[(s*2+1)*tc.c+k]; math.IsNaN(w) {
					t.Errorf("zeroInfinity %v: the possible sample's gradient is NaN at step %d class %d", zi, s, k)
				}
			}
		}
	}
}

// TestCTCLossDevicesAndDTypes runs log-probabilities on sim:0 with targets
// and lengths on the CPU, and in float32: the loss and gradient come back
// on log_probs' device and dtype.
func TestCTCLossDevicesAndDTypes(t *testing.T) {
	tc := ctcCases[8]
	lp := tc.logProbs(9)
	want := tc.want(lp.Float64s())
	in := FromSlice(tc.inLens, Shape{len(tc.inLens)})
	tg, tl := tc.padded(0)
	for _, c := range []struct {
		dev Device
		dt  DType
		tol float64
	}{{Sim(0), Float64, 1e-12}, {CPU, Float32, 1e-5}, {Sim(0), Float32, 1e-5}} {
		x := lp.To(c.dev).Cast(c.dt).Detach().SetRequiresGrad(true)
		l := CTCLoss(x, tg, in, tl, 0, false)
		if l.Device() != c.dev || l.DType() != c.dt {
			t.Fatalf("%v %v: loss on %v in %v", c.dev, c.dt, l.Device(), l.DType())
		}
		for b, v := range l.Float64s() {
			if math.Abs(v-want[b]) > c.tol*(1+math.Abs(want[b])) {
				t.Errorf("%v %v: sample %d: loss %v, want %v", c.dev, c.dt, b, v, want[b])
			}
		}
		l.Sum().Backward()
		if g := x.Grad(); g == nil || g.Device() != c.dev || g.DType() != c.dt {
			t.Fatalf("%v %v: gradient %v", c.dev, c.dt, g)
		}
	}
}

// TestCTCLossErrors checks that every bad argument panics with the right
// kind and leaves the inputs as they were.
func TestCTCLossErrors(t *testing.T) {
	lp := Randn(Shape{3, 2, 4}, Float64).LogSoftmax(2)
	before := lp.Float64s()
	i64 := func(v ...int64) *Tensor { return FromSlice(v, Shape{len(v)}) }
	tg := FromSlice([]int64{1, 2, 3, 0}, Shape{2, 2})
	in, tl := i64(3, 2), i64(2, 1)
	cases := []struct {
		name           string
		lp, tg, in, tl *Tensor
		blank          int
		want           error
	}{
		{"nil", nil, tg, in, tl, 0, ErrArgument},
		{"integer log_probs", Zeros(Shape{3, 2, 4}, Int64), tg, in, tl, 0, ErrDType},
		{"float targets", lp, Zeros(Shape{2, 2}), in, tl, 0, ErrDType},
		{"float lengths", lp, tg, Zeros(Shape{2}), tl, 0, ErrDType},
		{"bool target lengths", lp, tg, in, Zeros(Shape{2}, Bool), 0, ErrDType},
		{"log_probs 1-D", Zeros(Shape{4}), tg, in, tl, 0, ErrShape},
		{"input_lengths count", lp, tg, i64(3), tl, 0, ErrShape},
		{"target_lengths 2-D", lp, tg, in, tl.Reshape(2, 1), 0, ErrShape},
		{"padded rows", lp, FromSlice([]int64{1, 2, 3}, Shape{3, 1}), in, tl, 0, ErrShape},
		{"concatenated too short", lp, i64(1, 2), in, tl, 0, ErrShape},
		{"concatenated too long", lp, i64(1, 2, 3, 1), in, tl, 0, ErrShape},
		{"blank negative", lp, tg, in, tl, -1, ErrArgument},
		{"blank too big", lp, tg, in, tl, 4, ErrArgument},
		{"input length above T", lp, tg, i64(4, 2), tl, 0, ErrArgument},
		{"negative input length", lp, tg, i64(3, -1), tl, 0, ErrArgument},
		{"negative target length", lp, tg, in, i64(2, -1), 0, ErrArgument},
		{"target length above S", lp, tg, in, i64(3, 1), 0, ErrArgument},
		{"target is blank", lp, tg, in, tl, 2, ErrArgument},
		{"target above C", lp, FromSlice([]int64{1, 4, 3, 0}, Shape{2, 2}), in, tl, 0, ErrIndex},
		{"negative target", lp, FromSlice([]int64{1, -1, 3, 0}, Shape{2, 2}), in, tl, 0, ErrIndex},
		{"unbatched lengths [2]", lp.Select(1, 0), i64(1, 2), in, tl, 0, ErrShape},
		{"unbatched targets 2-D", lp.Select(1, 0), tg, i64(3), i64(2), 0, ErrShape},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Catch(func() { CTCLoss(c.lp, c.tg, c.in, c.tl, c.blank, false) })
			var ve *Error
			if !errors.Is(err, c.want) || !errors.As(err, &ve) || ve.Op != "ctc_loss" {
				t.Fatalf("got %v, want a ctc_loss error of kind %v", err, c.want)
			}
		})
	}
	for i, v := range lp.Float64s() {
		if v != before[i] {
			t.Fatalf("log_probs changed at %d", i)
		}
	}
}
