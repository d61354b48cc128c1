package nn_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// recNet is one of RNN, LSTM and GRU behind one face for the tests.
type recNet struct {
	mod     nn.Module
	kind    string // "tanh", "relu", "lstm" or "gru"
	weights []nn.RecurrentWeights
	run     func(x, h0, c0 *vram.Tensor) (out, hn, cn *vram.Tensor)
}

func newRecNet(kind string, in, hidden int, o nn.RecurrentOptions, opts ...vram.Option) recNet {
	switch kind {
	case "lstm":
		m := nn.NewLSTM(in, hidden, o, opts...)
		return recNet{m, kind, m.Weights, m.ForwardState}
	case "gru":
		m := nn.NewGRU(in, hidden, o, opts...)
		return recNet{m, kind, m.Weights, func(x, h0, _ *vram.Tensor) (out, hn, cn *vram.Tensor) {
			out, hn = m.ForwardState(x, h0)
			return out, hn, nil
		}}
	}
	o.Nonlinearity = kind
	m := nn.NewRNN(in, hidden, o, opts...)
	return recNet{m, kind, m.Weights, func(x, h0, _ *vram.Tensor) (out, hn, cn *vram.Tensor) {
		out, hn = m.ForwardState(x, h0)
		return out, hn, nil
	}}
}

func gatesOf(kind string) int {
	switch kind {
	case "lstm":
		return 4
	case "gru":
		return 3
	}
	return 1
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// refStep computes one step of a cell in float64 for one batch row:
// gi = W_ih x + b_ih and gh = W_hh h + b_hh ([G·H] each), h and c the
// states of that row, which it updates.
func refStep(kind string, gi, gh, h, c []float64) {
	hs := len(h)
	for j := range hs {
		switch kind {
		case "tanh":
			h[j] = math.Tanh(gi[j] + gh[j])
		case "relu":
			h[j] = math.Max(0, gi[j]+gh[j])
		case "lstm":
			i := sigmoid(gi[j] + gh[j])
			f := sigmoid(gi[hs+j] + gh[hs+j])
			g := math.Tanh(gi[2*hs+j] + gh[2*hs+j])
			o := sigmoid(gi[3*hs+j] + gh[3*hs+j])
			c[j] = f*c[j] + i*g
			h[j] = o * math.Tanh(c[j])
		case "gru":
			r := sigmoid(gi[j] + gh[j])
			z := sigmoid(gi[hs+j] + gh[hs+j])
			n := math.Tanh(gi[2*hs+j] + r*gh[2*hs+j])
			h[j] = (1-z)*n + z*h[j]
		}
	}
}

// affine returns W v + b for W [rows, len(v)], b [rows] or nil.
func affine(w, b, v []float64) []float64 {
	rows := len(w) / len(v)
	y := make([]float64, rows)
	for r := range rows {
		if b != nil {
			y[r] = b[r]
		}
		for k, x := range v {
			y[r] += w[r*len(v)+k] * x
		}
	}
	return y
}

// refRecurrent runs a recurrent network in float64 loops on x [L, N, in]
// from h0 and c0 [layers·dirs, N, H] and returns the output [L, N,
// dirs·H] and the final states.
func refRecurrent(kind string, ws []nn.RecurrentWeights, layers, dirs, in, hs, L, N int, x, h0, c0 []float64) (out, hn, cn []float64) {
	vals := func(t *vram.Tensor) []float64 {
		if t == nil {
			return nil
		}
		return t.Float64s()
	}
	cur, width := x, in
	hn, cn = make([]float64, len(h0)), make([]float64, len(c0))
	for l := range layers {
		out = make([]float64, L*N*dirs*hs)
		for d := range dirs {
			w := ws[l*dirs+d]
			wih, whh, bih, bhh := vals(w.WeightIH), vals(w.WeightHH), vals(w.BiasIH), vals(w.BiasHH)
			for b := range N {
				off := ((l*dirs+d)*N + b) * hs
				h := slices.Clone(h0[off : off+hs])
				c := make([]float64, hs)
				if c0 != nil {
					copy(c, c0[off:off+hs])
				}
				for s := range L {
					t := s
					if d == 1 {
						t = L - 1 - s
					}
					gi := affine(wih, bih, cur[(t*N+b)*width:(t*N+b+1)*width])
					gh := affine(whh, bhh, h)
					refStep(kind, gi, gh, h, c)
					copy(out[(t*N+b)*dirs*hs+d*hs:], h)
				}
				copy(hn[off:], h)
				if c0 != nil {
					copy(cn[off:], c)
				}
			}
		}
		cur, width = out, dirs*hs
	}
	if c0 == nil {
		cn = nil
	}
	return out, hn, cn
}

// swap01 swaps the first two dimensions of a [a, b, c] slice.
func swap01(v []float64, a, b, c int) []float64 {
	out := make([]float64, len(v))
	for i := range a {
		for j := range b {
			copy(out[(j*a+i)*c:(j*a+i+1)*c], v[(i*b+j)*c:(i*b+j+1)*c])
		}
	}
	return out
}

func randVals(g *vram.Generator, n int) []float64 {
	t := vram.Randn(vram.Shape{n}, vram.Float64, vram.WithGenerator(g))
	defer t.Release()
	return t.Float64s()
}

// TestRecurrentMatchesReference runs every kind of network over the
// layouts and settings PyTorch has and compares the output and final
// states with float64 loops.
func TestRecurrentMatchesReference(t *testing.T) {
	type layout int
	const (
		seqFirst layout = iota
		batchFirst
		unbatched
	)
	const in, hs, L = 3, 4, 5
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, kind := range []string{"tanh", "relu", "lstm", "gru"} {
			for _, tc := range []struct {
				layers int
				bidir  bool
				noBias bool
				lay    layout
				withH0 bool
			}{
				{1, false, false, seqFirst, false},
				{1, false, true, seqFirst, true},
				{2, false, false, batchFirst, true},
				{1, true, false, seqFirst, true},
				{2, true, false, batchFirst, false},
				{3, true, true, unbatched, true},
				{2, false, false, unbatched, false},
			} {
				name := fmt.Sprintf("%s/%s/layers=%d,bidir=%v,nobias=%v,layout=%d,h0=%v", dev, kind, tc.layers, tc.bidir, tc.noBias, tc.lay, tc.withH0)
				t.Run(name, func(t *testing.T) {
					vram.Tidy(func() {
						g := vram.NewGenerator(7)
						net := newRecNet(kind, in, hs, nn.RecurrentOptions{NumLayers: tc.layers, Bidirectional: tc.bidir,
							NoBias: tc.noBias, BatchFirst: tc.lay == batchFirst}, dev, vram.Float64, vram.WithGenerator(g))
						dirs := 1
						if tc.bidir {
							dirs = 2
						}
						n := 2
						if tc.lay == unbatched {
							n = 1
						}
						ld := tc.layers * dirs
						x := randVals(g, L*n*in)
						h0 := make([]float64, ld*n*hs)
						var c0 []float64
						if kind == "lstm" {
							c0 = make([]float64, ld*n*hs)
						}
						var h0t, c0t *vram.Tensor
						stateShape := vram.Shape{ld, n, hs}
						if tc.lay == unbatched {
							stateShape = vram.Shape{ld, hs}
						}
						if tc.withH0 {
							h0 = randVals(g, ld*n*hs)
							h0t = vram.FromSlice(h0, stateShape, dev)
							if c0 != nil {
								c0 = randVals(g, ld*n*hs)
								c0t = vram.FromSlice(c0, stateShape, dev)
							}
						}
						wantOut, wantH, wantC := refRecurrent(kind, net.weights, tc.layers, dirs, in, hs, L, n, x, h0, c0)
						var xt *vram.Tensor
						outShape := vram.Shape{L, n, dirs * hs}
						switch tc.lay {
						case seqFirst:
							xt = vram.FromSlice(x, vram.Shape{L, n, in}, dev)
						case batchFirst:
							xt = vram.FromSlice(swap01(x, L, n, in), vram.Shape{n, L, in}, dev)
							wantOut = swap01(wantOut, L, n, dirs*hs)
							outShape = vram.Shape{n, L, dirs * hs}
						case unbatched:
							xt = vram.FromSlice(x, vram.Shape{L, in}, dev)
							outShape = vram.Shape{L, dirs * hs}
						}
						out, hn, cn := net.run(xt, h0t, c0t)
						if !slices.Equal(out.Shape(), outShape) || !slices.Equal(hn.Shape(), stateShape) {
							t.Fatalf("shapes %v and %v, want %v and %v", out.Shape(), hn.Shape(), outShape, stateShape)
						}
						if out.Device() != dev {
							t.Fatalf("output on %s, want %s", out.Device(), dev)
						}
						checkValues(t, "output", out.Float64s(), wantOut, 1e-12)
						checkValues(t, "h_n", hn.Float64s(), wantH, 1e-12)
						if kind == "lstm" {
							if !slices.Equal(cn.Shape(), stateShape) {
								t.Fatalf("c_n shape %v, want %v", cn.Shape(), stateShape)
							}
							checkValues(t, "c_n", cn.Float64s(), wantC, 1e-12)
						} else if cn != nil {
							t.Fatal("c_n for a network without cell states")
						}
						// Forward is ForwardState's output from zero states.
						if !tc.withH0 {
							checkValues(t, "Forward", net.mod.Forward(xt).Float64s(), out.Float64s(), 0)
						}
					})
				})
			}
		}
	}
}

// TestRecurrentStateDict checks PyTorch's parameter names, shapes and
// order, and the initialisation bound 1/sqrt(hidden).
func TestRecurrentStateDict(t *testing.T) {
	tests := []struct {
		kind   string
		o      nn.RecurrentOptions
		want   []string
		shapes []vram.Shape
	}{
		{"tanh", nn.RecurrentOptions{}, []string{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"},
			[]vram.Shape{{16, 10}, {16, 16}, {16}, {16}}},
		{"lstm", nn.RecurrentOptions{NumLayers: 2, NoBias: true}, []string{"weight_ih_l0", "weight_hh_l0", "weight_ih_l1", "weight_hh_l1"},
			[]vram.Shape{{64, 10}, {64, 16}, {64, 16}, {64, 16}}},
		{"gru", nn.RecurrentOptions{NumLayers: 2, Bidirectional: true}, []string{
			"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
			"weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
			"weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1",
			"weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"},
			[]vram.Shape{{48, 10}, {48, 16}, {48}, {48}, {48, 10}, {48, 16}, {48}, {48},
				{48, 32}, {48, 16}, {48}, {48}, {48, 32}, {48, 16}, {48}, {48}}},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			net := newRecNet(tc.kind, 10, 16, tc.o, vram.WithGenerator(vram.NewGenerator(1)))
			defer nn.Release(net.mod)
			ps := net.mod.NamedParameters()
			if len(ps) != len(tc.want) {
				t.Fatalf("%d parameters, want %d", len(ps), len(tc.want))
			}
			for i, p := range ps {
				if p.Name != tc.want[i] || !slices.Equal(p.Tensor.Shape(), tc.shapes[i]) {
					t.Errorf("parameter %d: %s %v, want %s %v", i, p.Name, p.Tensor.Shape(), tc.want[i], tc.shapes[i])
				}
				if !p.Tensor.RequiresGrad() {
					t.Errorf("%s does not require grad", p.Name)
				}
				bound := 0.25 // 1/sqrt(16)
				var lo, hi float64
				for _, v := range p.Tensor.Float64s() {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
				if lo < -bound || hi > bound || hi-lo < bound {
					t.Errorf("%s spans [%v, %v], want most of [-%v, %v)", p.Name, lo, hi, bound, bound)
				}
			}
		})
	}
}

// TestRecurrentGradients compares the gradients of the parameters, the
// input and the initial states with finite differences.
func TestRecurrentGradients(t *testing.T) {
	tests := []struct {
		kind string
		o    nn.RecurrentOptions
	}{
		{"tanh", nn.RecurrentOptions{NumLayers: 2}},
		{"relu", nn.RecurrentOptions{Bidirectional: true, BatchFirst: true}},
		{"lstm", nn.RecurrentOptions{NumLayers: 2, Bidirectional: true}},
		{"gru", nn.RecurrentOptions{NumLayers: 2, Bidirectional: true, BatchFirst: true}},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			g := vram.NewGenerator(3)
			net := newRecNet(tc.kind, 2, 2, tc.o, vram.Float64, vram.WithGenerator(g))
			dirs := 1
			if tc.o.Bidirectional {
				dirs = 2
			}
			layers := max(tc.o.NumLayers, 1)
			xShape, outShape := vram.Shape{3, 2, 2}, vram.Shape{3, 2, 2 * dirs}
			if tc.o.BatchFirst {
				xShape, outShape = vram.Shape{2, 3, 2}, vram.Shape{2, 3, 2 * dirs}
			}
			x := vram.Randn(xShape, vram.Float64, vram.WithGenerator(g), vram.WithGrad())
			h0 := vram.Randn(vram.Shape{layers * dirs, 2, 2}, vram.Float64, vram.WithGenerator(g), vram.WithGrad())
			var c0 *vram.Tensor
			leaves := []nn.NamedParameter{{Name: "x", Tensor: x}, {Name: "h0", Tensor: h0}}
			if tc.kind == "lstm" {
				c0 = vram.Randn(vram.Shape{layers * dirs, 2, 2}, vram.Float64, vram.WithGenerator(g), vram.WithGrad())
				leaves = append(leaves, nn.NamedParameter{Name: "c0", Tensor: c0})
			}
			rOut := vram.Randn(outShape, vram.Float64, vram.WithGenerator(g))
			rH := vram.Randn(vram.Shape{layers * dirs, 2, 2}, vram.Float64, vram.WithGenerator(g))
			loss := func() *vram.Tensor {
				out, hn, cn := net.run(x, h0, c0)
				l := out.Mul(rOut).Sum().Add(hn.Mul(rH).Sum())
				if cn != nil {
					l = l.Add(cn.Mul(rH).Sum())
				}
				return l
			}
			loss().Backward()
			const eps = 1e-6
			for _, p := range append(net.mod.NamedParameters(), leaves...) {
				grad := p.Tensor.Grad()
				if grad == nil {
					t.Fatalf("%s: no gradient", p.Name)
				}
				gv, vals := grad.Float64s(), p.Tensor.Float64s()
				// A few elements of each tensor keep the test fast: the
				// first, middle and last, only the middle one with -short
				// (which CI runs under the race detector).
				at := []int{0, len(vals) / 2, len(vals) - 1}
				if testing.Short() {
					at = at[1:2]
				}
				for _, i := range at {
					orig := vals[i]
					lossAt := func(v float64) float64 {
						vals[i] = v
						var r float64
						vram.NoGrad(func() {
							p.Tensor.CopyFrom(vram.FromSlice(vals, p.Tensor.Shape()))
							r = loss().Item()
						})
						return r
					}
					fd := (lossAt(orig+eps) - lossAt(orig-eps)) / (2 * eps)
					lossAt(orig)
					if math.IsNaN(gv[i]) || math.Abs(gv[i]-fd) > 1e-6+1e-4*math.Abs(fd) {
						t.Fatalf("%s[%d]: gradient %v, finite difference %v", p.Name, i, gv[i], fd)
					}
				}
			}
		})
	}
}

// TestRecurrentCells compares each cell, batched and unbatched, from
// given and zero states, with the float64 step.
func TestRecurrentCells(t *testing.T) {
	const in, hs, n = 3, 4, 2
	type cell struct {
		mod  nn.Module
		w    nn.RecurrentWeights
		step func(x, h, c *vram.Tensor) (hn, cn *vram.Tensor)
	}
	newCell := func(kind string, o nn.CellOptions, opts ...vram.Option) cell {
		switch kind {
		case "lstm":
			m := nn.NewLSTMCell(in, hs, o, opts...)
			return cell{m, nn.RecurrentWeights{WeightIH: m.WeightIH, WeightHH: m.WeightHH, BiasIH: m.BiasIH, BiasHH: m.BiasHH}, m.ForwardState}
		case "gru":
			m := nn.NewGRUCell(in, hs, o, opts...)
			return cell{m, nn.RecurrentWeights{WeightIH: m.WeightIH, WeightHH: m.WeightHH, BiasIH: m.BiasIH, BiasHH: m.BiasHH},
				func(x, h, _ *vram.Tensor) (hn, cn *vram.Tensor) { return m.ForwardState(x, h), nil }}
		}
		o.Nonlinearity = kind
		m := nn.NewRNNCell(in, hs, o, opts...)
		return cell{m, nn.RecurrentWeights{WeightIH: m.WeightIH, WeightHH: m.WeightHH, BiasIH: m.BiasIH, BiasHH: m.BiasHH},
			func(x, h, _ *vram.Tensor) (hn, cn *vram.Tensor) { return m.ForwardState(x, h), nil }}
	}
	for _, kind := range []string{"tanh", "relu", "lstm", "gru"} {
		for _, tc := range []struct {
			name      string
			batched   bool
			withState bool
			noBias    bool
		}{
			{"batched", true, true, false},
			{"batched zero state", true, false, false},
			{"unbatched", false, true, true},
			{"unbatched zero state", false, false, false},
		} {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				vram.Tidy(func() {
					g := vram.NewGenerator(4)
					c := newCell(kind, nn.CellOptions{NoBias: tc.noBias}, vram.Float64, vram.WithGenerator(g))
					rows := n
					xShape, sShape := vram.Shape{n, in}, vram.Shape{n, hs}
					if !tc.batched {
						rows, xShape, sShape = 1, vram.Shape{in}, vram.Shape{hs}
					}
					x := randVals(g, rows*in)
					h, cs := make([]float64, rows*hs), make([]float64, rows*hs)
					var ht, ct *vram.Tensor
					if tc.withState {
						h, cs = randVals(g, rows*hs), randVals(g, rows*hs)
						ht = vram.FromSlice(h, sShape)
						if kind == "lstm" {
							ct = vram.FromSlice(cs, sShape)
						}
					}
					if kind != "lstm" {
						cs = nil
					}
					// refRecurrent with one step, one layer and the cell's
					// weights is the cell.
					wantH, _, _ := refRecurrent(kind, []nn.RecurrentWeights{c.w}, 1, 1, in, hs, 1, rows, x, h, cs)
					_, _, wantC := refRecurrent(kind, []nn.RecurrentWeights{c.w}, 1, 1, in, hs, 1, rows, x, h, cs)
					gotH, gotC := c.step(vram.FromSlice(x, xShape), ht, ct)
					if !slices.Equal(gotH.Shape(), sShape) {
						t.Fatalf("shape %v, want %v", gotH.Shape(), sShape)
					}
					checkValues(t, "h'", gotH.Float64s(), wantH, 1e-12)
					if kind == "lstm" {
						checkValues(t, "c'", gotC.Float64s(), wantC, 1e-12)
					}
					if !tc.withState {
						checkValues(t, "Forward", c.mod.Forward(vram.FromSlice(x, xShape)).Float64s(), wantH, 1e-12)
					}
					names := []string{"weight_ih", "weight_hh", "bias_ih", "bias_hh"}
					if tc.noBias {
						names = names[:2]
					}
					var got []string
					for _, p := range c.mod.NamedParameters() {
						got = append(got, p.Name)
					}
					if !slices.Equal(got, names) {
						t.Fatalf("parameters %v, want %v", got, names)
					}
				})
			})
		}
	}
}

// TestRecurrentErrors checks that bad sizes, inputs and states panic
// with the package's sentinels.
func TestRecurrentErrors(t *testing.T) {
	x := func(shape ...int) *vram.Tensor { return vram.Zeros(vram.Shape(shape)) }
	lstm := nn.NewLSTM(3, 4, nn.RecurrentOptions{NumLayers: 2})
	gru := nn.NewGRU(3, 4, nn.RecurrentOptions{Bidirectional: true, BatchFirst: true})
	rnn := nn.NewRNN(3, 4, nn.RecurrentOptions{})
	lc, gc, rc := nn.NewLSTMCell(3, 4, nn.CellOptions{}), nn.NewGRUCell(3, 4, nn.CellOptions{}), nn.NewRNNCell(3, 4, nn.CellOptions{})
	tests := []struct {
		name string
		fn   func()
		kind error
	}{
		{"zero hidden size", func() { nn.NewLSTM(3, 0, nn.RecurrentOptions{}) }, vram.ErrArgument},
		{"zero input size", func() { nn.NewRNN(0, 3, nn.RecurrentOptions{}) }, vram.ErrArgument},
		{"negative layers", func() { nn.NewGRU(3, 3, nn.RecurrentOptions{NumLayers: -1}) }, vram.ErrArgument},
		{"dropout above 1", func() { nn.NewGRU(3, 3, nn.RecurrentOptions{Dropout: 1.5}) }, vram.ErrArgument},
		{"dropout NaN", func() { nn.NewLSTM(3, 3, nn.RecurrentOptions{Dropout: math.NaN()}) }, vram.ErrArgument},
		{"unknown nonlinearity", func() { nn.NewRNN(3, 3, nn.RecurrentOptions{Nonlinearity: "sigmoid"}) }, vram.ErrArgument},
		{"nonlinearity on LSTM", func() { nn.NewLSTM(3, 3, nn.RecurrentOptions{Nonlinearity: "relu"}) }, vram.ErrArgument},
		{"nonlinearity on GRUCell", func() { nn.NewGRUCell(3, 3, nn.CellOptions{Nonlinearity: "relu"}) }, vram.ErrArgument},
		{"cell zero size", func() { nn.NewRNNCell(3, 0, nn.CellOptions{}) }, vram.ErrArgument},
		{"nil input", func() { lstm.Forward(nil) }, vram.ErrArgument},
		{"1-D input", func() { lstm.Forward(x(3)) }, vram.ErrShape},
		{"4-D input", func() { rnn.Forward(x(2, 2, 2, 3)) }, vram.ErrShape},
		{"wrong input size", func() { lstm.Forward(x(5, 2, 4)) }, vram.ErrShape},
		{"empty sequence", func() { gru.Forward(x(2, 0, 3)) }, vram.ErrShape},
		{"h0 wrong layers", func() { rnn.ForwardState(x(5, 2, 3), x(2, 2, 4)) }, vram.ErrShape},
		{"h0 wrong batch", func() { lstm.ForwardState(x(5, 2, 3), x(2, 3, 4), x(2, 2, 4)) }, vram.ErrShape},
		{"c0 wrong hidden", func() { lstm.ForwardState(x(5, 2, 3), x(2, 2, 4), x(2, 2, 5)) }, vram.ErrShape},
		{"h0 batched for unbatched input", func() { gru.ForwardState(x(5, 3), x(2, 1, 4)) }, vram.ErrShape},
		{"h0 of batch first layout", func() { gru.ForwardState(x(2, 5, 3), x(2, 5, 4)) }, vram.ErrShape},
		{"cell 3-D input", func() { rc.Forward(x(1, 2, 3)) }, vram.ErrShape},
		{"cell wrong input size", func() { gc.Forward(x(2, 4)) }, vram.ErrShape},
		{"cell wrong h", func() { gc.ForwardState(x(2, 3), x(3, 4)) }, vram.ErrShape},
		{"cell unbatched h for batched x", func() { rc.ForwardState(x(2, 3), x(4)) }, vram.ErrShape},
		{"layers changed after construction", func() {
			g := nn.NewGRU(3, 4, nn.RecurrentOptions{})
			g.NumLayers = 2
			g.Forward(x(5, 2, 3))
		}, vram.ErrArgument},
		{"nonlinearity changed after construction", func() {
			r := nn.NewRNN(3, 4, nn.RecurrentOptions{})
			r.Nonlinearity = "gelu"
			r.Forward(x(5, 2, 3))
		}, vram.ErrArgument},
		{"lstm h0 without c0", func() { lstm.ForwardState(x(5, 2, 3), x(2, 2, 4), nil) }, vram.ErrArgument},
		{"lstm c0 without h0", func() { lstm.ForwardState(x(5, 2, 3), nil, x(2, 2, 4)) }, vram.ErrArgument},
		{"h0 of another dtype", func() { rnn.ForwardState(x(5, 2, 3), vram.Zeros(vram.Shape{1, 2, 4}, vram.Float64)) }, vram.ErrDType},
		{"cell h of another dtype", func() { gc.ForwardState(x(2, 3), vram.Zeros(vram.Shape{2, 4}, vram.Float64)) }, vram.ErrDType},
		{"lstm cell only h", func() { lc.ForwardState(x(2, 3), x(2, 4), nil) }, vram.ErrArgument},
		{"lstm cell wrong c", func() { lc.ForwardState(x(2, 3), x(2, 4), x(2, 3)) }, vram.ErrShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			if !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want an error of kind %v", err, tc.kind)
			}
		})
	}
}

// TestSequenceLayerErrorsNameTheLayer checks that an input the layers'
// products refuse (integers, another float dtype than the parameters) is
// an error of the layer the caller called, and that a size error reports
// the number of layers in effect.
func TestSequenceLayerErrorsNameTheLayer(t *testing.T) {
	ints := vram.Zeros(vram.Shape{5, 2, 3}, vram.Int64)
	f64 := vram.Zeros(vram.Shape{5, 2, 3}, vram.Float64)
	mhaIn := vram.Zeros(vram.Shape{3, 2, 4}, vram.Float64)
	defer func() {
		for _, x := range []*vram.Tensor{ints, f64, mhaIn} {
			x.Release()
		}
	}()
	tests := []struct {
		name   string
		fn     func()
		kind   error
		op     string
		detail string // a part of the message, when not empty
	}{
		{"rnn of integers", func() { nn.NewRNN(3, 4, nn.RecurrentOptions{}).Forward(ints) }, vram.ErrDType, "rnn", ""},
		{"lstm of float64", func() { nn.NewLSTM(3, 4, nn.RecurrentOptions{}).Forward(f64) }, vram.ErrDType, "lstm", ""},
		{"gru of float64", func() { nn.NewGRU(3, 4, nn.RecurrentOptions{}).ForwardState(f64, nil) }, vram.ErrDType, "gru", ""},
		{"rnn cell of integers", func() { nn.NewRNNCell(3, 4, nn.CellOptions{}).Forward(ints.Select(0, 0)) }, vram.ErrDType, "rnn_cell", ""},
		{"lstm cell of float64", func() { nn.NewLSTMCell(3, 4, nn.CellOptions{}).Forward(f64.Select(0, 0)) }, vram.ErrDType, "lstm_cell", ""},
		{"gru cell of integers", func() { nn.NewGRUCell(3, 4, nn.CellOptions{}).Forward(ints.Select(0, 0)) }, vram.ErrDType, "gru_cell", ""},
		{"attention of float64", func() { nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{}).Forward(mhaIn) }, vram.ErrDType, "multihead_attention", ""},
		{"default layers reported", func() { nn.NewGRU(3, 0, nn.RecurrentOptions{}) }, vram.ErrArgument, "gru", "num_layers 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			var ve *vram.Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &ve) || ve.Op != tc.op {
				t.Fatalf("got %v, want an error of kind %v from %q", err, tc.kind, tc.op)
			}
			if !strings.Contains(ve.Detail, tc.detail) {
				t.Fatalf("got %q, want it to say %q", ve.Detail, tc.detail)
			}
		})
	}
}

// TestRecurrentSaveLoad saves one network and loads it into another
// made with other random values: both then compute the same.
func TestRecurrentSaveLoad(t *testing.T) {
	for _, kind := range []string{"tanh", "lstm", "gru"} {
		t.Run(kind, func(t *testing.T) {
			o := nn.RecurrentOptions{NumLayers: 2, Bidirectional: true}
			a := newRecNet(kind, 3, 4, o, vram.WithGenerator(vram.NewGenerator(1)))
			b := newRecNet(kind, 3, 4, o, vram.WithGenerator(vram.NewGenerator(2)))
			path := filepath.Join(t.TempDir(), "rnn.safetensors")
			if err := nn.Save(a.mod, path); err != nil {
				t.Fatal(err)
			}
			if err := nn.Load(b.mod, path); err != nil {
				t.Fatal(err)
			}
			x := vram.Randn(vram.Shape{5, 2, 3}, vram.WithGenerator(vram.NewGenerator(3)))
			checkValues(t, "loaded", b.mod.Forward(x).Float64s(), a.mod.Forward(x).Float64s(), 0)
			// An LSTM's state dict does not load into a GRU.
			if kind == "lstm" {
				g := nn.NewGRU(3, 4, o)
				if err := nn.Load(g, path); !errors.Is(err, vram.ErrShape) {
					t.Fatalf("loading an LSTM into a GRU: %v, want ErrShape", err)
				}
			}
		})
	}
}

// TestRecurrentDropout checks that dropout between layers applies in
// training mode only and never to the last layer's output.
func TestRecurrentDropout(t *testing.T) {
	// One layer with dropout warns ([TestRecurrentDropoutOneLayerWarns]).
	defer vram.SetWarningHandler(vram.SetWarningHandler(nil))
	g := vram.NewGenerator(1)
	x := vram.Randn(vram.Shape{4, 2, 3}, vram.WithGenerator(g))
	for _, kind := range []string{"tanh", "lstm", "gru"} {
		t.Run(kind, func(t *testing.T) {
			one := newRecNet(kind, 3, 4, nn.RecurrentOptions{Dropout: 1}, vram.WithGenerator(g))
			two := newRecNet(kind, 3, 4, nn.RecurrentOptions{NumLayers: 2, Dropout: 1}, vram.WithGenerator(g))
			plain := newRecNet(kind, 3, 4, nn.RecurrentOptions{NumLayers: 2}, vram.WithGenerator(g))
			for i, p := range plain.mod.Parameters() {
				vram.NoGrad(func() { p.CopyFrom(two.mod.Parameters()[i]) })
			}
			// One layer: dropout has nothing to act on.
			one.mod.Eval()
			want := one.mod.Forward(x).Float64s()
			one.mod.Train()
			checkValues(t, "one layer in training", one.mod.Forward(x).Float64s(), want, 0)
			// Two layers, p = 1: the second layer sees zeros in training.
			zeros := vram.Zeros(vram.Shape{4, 2, 4})
			w := two.weights[1]
			ref, _, _ := refRecurrent(kind, []nn.RecurrentWeights{w}, 1, 1, 4, 4, 4, 2, zeros.Float64s(), make([]float64, 8), func() []float64 {
				if kind == "lstm" {
					return make([]float64, 8)
				}
				return nil
			}())
			checkValues(t, "training", two.mod.Forward(x).Float64s(), ref, 1e-6)
			two.mod.Eval()
			checkValues(t, "evaluation", two.mod.Forward(x).Float64s(), plain.mod.Forward(x).Float64s(), 0)
		})
	}
}

// TestRecurrentReleasesEverything checks that a forward and backward pass
// leave nothing allocated on a simulated device once the results and
// gradients are released.
func TestRecurrentReleasesEverything(t *testing.T) {
	dev := vram.Sim(1)
	for _, kind := range []string{"tanh", "lstm", "gru"} {
		t.Run(kind, func(t *testing.T) {
			net := newRecNet(kind, 3, 4, nn.RecurrentOptions{NumLayers: 2, Bidirectional: true, Dropout: 0.3, BatchFirst: true},
				dev, vram.WithGenerator(vram.NewGenerator(1)))
			defer nn.Release(net.mod)
			x := vram.Randn(vram.Shape{2, 5, 3}, dev)
			defer x.Release()
			h0 := vram.Zeros(vram.Shape{4, 2, 4}, dev)
			defer h0.Release()
			var c0 *vram.Tensor
			if kind == "lstm" {
				c0 = vram.Zeros(vram.Shape{4, 2, 4}, dev)
				defer c0.Release()
			}
			for _, grad := range []bool{false, true} {
				memtest.Settle(dev)
				base := vram.MemoryAllocated(dev)
				run := func() {
					out, hn, cn := net.run(x, h0, c0)
					if grad {
						s := out.Sum()
						s.Backward()
						s.Release()
					}
					out.Release()
					hn.Release()
					if cn != nil {
						cn.Release()
					}
				}
				if grad {
					run()
				} else {
					vram.NoGrad(run)
				}
				for _, p := range net.mod.Parameters() {
					p.ZeroGrad()
				}
				if got := vram.MemoryAllocated(dev); got != base {
					t.Errorf("grad=%v: %d bytes allocated after the step, want %d", grad, got, base)
				}
			}
		})
	}
}

// TestRecurrentConcurrentForward runs one network from several
// goroutines, dropout drawing from its shared generator.
func TestRecurrentConcurrentForward(t *testing.T) {
	for _, kind := range []string{"lstm", "gru"} {
		t.Run(kind, func(t *testing.T) {
			net := newRecNet(kind, 3, 4, nn.RecurrentOptions{NumLayers: 2, Dropout: 0.2}, vram.WithGenerator(vram.NewGenerator(1)))
			x := vram.Randn(vram.Shape{3, 2, 3}, vram.WithGenerator(vram.NewGenerator(2)))
			net.mod.Eval()
			want := net.mod.Forward(x).Float64s()
			net.mod.Train()
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = vram.Catch(func() {
						out := net.mod.Forward(x)
						out.Sum().Backward()
						out.Release()
					})
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			net.mod.Eval()
			checkValues(t, "evaluation output", net.mod.Forward(x).Float64s(), want, 0)
		})
	}
}

// TestRecurrentReplicate copies a network to another device: the replica
// computes the same and shares no tensor with the original.
func TestRecurrentReplicate(t *testing.T) {
	for _, kind := range []string{"tanh", "lstm", "gru"} {
		t.Run(kind, func(t *testing.T) {
			net := newRecNet(kind, 3, 4, nn.RecurrentOptions{NumLayers: 2, Bidirectional: true}, vram.WithGenerator(vram.NewGenerator(1)))
			rep, err := nn.Replicate(net.mod, vram.Sim(0))
			if err != nil {
				t.Fatal(err)
			}
			defer nn.Release(rep)
			x := vram.Randn(vram.Shape{3, 2, 3}, vram.WithGenerator(vram.NewGenerator(2)))
			xs := x.To(vram.Sim(0))
			checkValues(t, "replica", rep.Forward(xs).Float64s(), net.mod.Forward(x).Float64s(), 1e-6)
		})
	}
}

// TestRecurrentInferenceMemory checks that without autograd a step's
// intermediate results are freed before the next step: the peak stays
// within a few times the output's size rather than growing with the
// intermediate results of every step.
func TestRecurrentInferenceMemory(t *testing.T) {
	dev := vram.Sim(1)
	const steps, n, hs = 32, 4, 64
	for _, kind := range []string{"tanh", "lstm", "gru"} {
		t.Run(kind, func(t *testing.T) {
			net := newRecNet(kind, 8, hs, nn.RecurrentOptions{}, dev, vram.WithGenerator(vram.NewGenerator(1)))
			defer nn.Release(net.mod)
			x := vram.Randn(vram.Shape{steps, n, 8}, dev)
			defer x.Release()
			memtest.Settle(dev)
			base := vram.MemoryAllocated(dev)
			vram.ResetPeakMemoryStats(dev)
			vram.NoGrad(func() { net.mod.Forward(x).Release() })
			// gi is G outputs' worth, the steps' states and their stack
			// two more; allow two more for the rest.
			limit := int64((gatesOf(kind) + 4) * steps * n * hs * 4)
			peak := vram.MaxMemoryAllocated(dev) - base
			if peak > limit {
				t.Errorf("peak %d bytes above the start, want at most %d", peak, limit)
			}
		})
	}
}

// TestRecurrentAutocast checks that inside an autocast region the whole
// recurrence, states included, runs in its dtype, as PyTorch's does,
// close to the float32 result, with float32 gradients.
func TestRecurrentAutocast(t *testing.T) {
	for _, kind := range []string{"tanh", "lstm", "gru"} {
		t.Run(kind, func(t *testing.T) {
			net := newRecNet(kind, 3, 4, nn.RecurrentOptions{NumLayers: 2}, vram.WithGenerator(vram.NewGenerator(1)))
			x := vram.Randn(vram.Shape{5, 2, 3}, vram.WithGenerator(vram.NewGenerator(2)))
			h0 := vram.Randn(vram.Shape{2, 2, 4}, vram.WithGenerator(vram.NewGenerator(3)))
			var c0 *vram.Tensor
			if kind == "lstm" {
				c0 = vram.Randn(vram.Shape{2, 2, 4}, vram.WithGenerator(vram.NewGenerator(4)))
			}
			want, wantH, _ := net.run(x, h0, c0)
			vram.Autocast(vram.BFloat16, func() {
				out, hn, cn := net.run(x, h0, c0)
				for _, r := range []*vram.Tensor{out, hn, cn} {
					if r != nil && r.DType() != vram.BFloat16 {
						t.Fatalf("result of dtype %s, want bfloat16", r.DType())
					}
				}
				checkValues(t, "output", out.Float64s(), want.Float64s(), 0.05)
				checkValues(t, "h_n", hn.Float64s(), wantH.Float64s(), 0.05)
				out.Float().Sum().Backward()
			})
			for _, p := range net.mod.NamedParameters() {
				if g := p.Tensor.Grad(); g == nil || g.DType() != vram.Float32 {
					t.Fatalf("%s: gradient %v, want float32", p.Name, g)
				}
			}
		})
	}
	t.Run("cells", func(t *testing.T) {
		x := vram.Randn(vram.Shape{2, 3}, vram.WithGenerator(vram.NewGenerator(2)))
		h := vram.Zeros(vram.Shape{2, 4})
		lc := nn.NewLSTMCell(3, 4, nn.CellOptions{})
		gc := nn.NewGRUCell(3, 4, nn.CellOptions{})
		vram.Autocast(vram.BFloat16, func() {
			hn, cn := lc.ForwardState(x, h, h)
			for _, r := range []*vram.Tensor{hn, cn, gc.Forward(x), gc.ForwardState(x, h)} {
				if r.DType() != vram.BFloat16 {
					t.Fatalf("result of dtype %s, want bfloat16", r.DType())
				}
			}
		})
	})
}
