package nn_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// refLSTMProj runs an LSTM with projections of size p in float64 loops
// on x [L, N, in] from h0 [layers·dirs, N, p] and c0 [layers·dirs, N, hs]
// and returns the output [L, N, dirs·p] and the final states:
// h_t = W_hr (o·tanh(c_t)).
func refLSTMProj(ws []nn.RecurrentWeights, layers, dirs, in, hs, p, L, N int, x, h0, c0 []float64) (out, hn, cn []float64) {
	vals := func(t *vram.Tensor) []float64 {
		if t == nil {
			return nil
		}
		return t.Float64s()
	}
	cur, width := x, in
	hn, cn = make([]float64, len(h0)), make([]float64, len(c0))
	for l := range layers {
		out = make([]float64, L*N*dirs*p)
		for d := range dirs {
			w := ws[l*dirs+d]
			wih, whh, bih, bhh, whr := vals(w.WeightIH), vals(w.WeightHH), vals(w.BiasIH), vals(w.BiasHH), vals(w.WeightHR)
			for b := range N {
				hOff, cOff := ((l*dirs+d)*N+b)*p, ((l*dirs+d)*N+b)*hs
				h := slices.Clone(h0[hOff : hOff+p])
				c := slices.Clone(c0[cOff : cOff+hs])
				for s := range L {
					t := s
					if d == 1 {
						t = L - 1 - s
					}
					gi := affine(wih, bih, cur[(t*N+b)*width:(t*N+b+1)*width])
					gh := affine(whh, bhh, h)
					full := make([]float64, hs)
					for j := range hs {
						i := sigmoid(gi[j] + gh[j])
						f := sigmoid(gi[hs+j] + gh[hs+j])
						g := math.Tanh(gi[2*hs+j] + gh[2*hs+j])
						o := sigmoid(gi[3*hs+j] + gh[3*hs+j])
						c[j] = f*c[j] + i*g
						full[j] = o * math.Tanh(c[j])
					}
					h = affine(whr, nil, full)
					copy(out[(t*N+b)*dirs*p+d*p:], h)
				}
				copy(hn[hOff:], h)
				copy(cn[cOff:], c)
			}
		}
		cur, width = out, dirs*p
	}
	return out, hn, cn
}

// TestLSTMProjSize compares an LSTM with proj_size over PyTorch's layouts
// and settings with float64 loops, from given and zero states.
func TestLSTMProjSize(t *testing.T) {
	const in, hs, p, L, N = 3, 5, 2, 4, 2
	tests := []struct {
		name      string
		o         nn.RecurrentOptions
		unbatched bool
		zero      bool
	}{
		{"one layer", nn.RecurrentOptions{}, false, false},
		{"zero states", nn.RecurrentOptions{NumLayers: 2}, false, true},
		{"two layers bidirectional", nn.RecurrentOptions{NumLayers: 2, Bidirectional: true}, false, false},
		{"batch first without bias", nn.RecurrentOptions{NumLayers: 2, BatchFirst: true, NoBias: true}, false, false},
		{"unbatched bidirectional", nn.RecurrentOptions{Bidirectional: true, BatchFirst: true}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vram.Tidy(func() {
				g := vram.NewGenerator(11)
				tc.o.ProjSize = p
				m := nn.NewLSTM(in, hs, tc.o, vram.Float64, vram.WithGenerator(g))
				defer nn.Release(m)
				dirs, layers := 1, max(tc.o.NumLayers, 1)
				if tc.o.Bidirectional {
					dirs = 2
				}
				n := N
				if tc.unbatched {
					n = 1
				}
				x := randVals(g, L*n*in)
				h0, c0 := make([]float64, layers*dirs*n*p), make([]float64, layers*dirs*n*hs)
				if !tc.zero {
					h0, c0 = randVals(g, len(h0)), randVals(g, len(c0))
				}
				wantOut, wantH, wantC := refLSTMProj(m.Weights, layers, dirs, in, hs, p, L, n, x, h0, c0)
				xShape, outShape := vram.Shape{L, n, in}, vram.Shape{L, n, dirs * p}
				hShape, cShape := vram.Shape{layers * dirs, n, p}, vram.Shape{layers * dirs, n, hs}
				switch {
				case tc.unbatched:
					xShape, outShape = vram.Shape{L, in}, vram.Shape{L, dirs * p}
					hShape, cShape = vram.Shape{layers * dirs, p}, vram.Shape{layers * dirs, hs}
				case tc.o.BatchFirst:
					x = swap01(x, L, n, in)
					xShape, outShape = vram.Shape{n, L, in}, vram.Shape{n, L, dirs * p}
					wantOut = swap01(wantOut, L, n, dirs*p)
				}
				var ht, ct *vram.Tensor
				if !tc.zero {
					ht, ct = vram.FromSlice(h0, hShape), vram.FromSlice(c0, cShape)
				}
				out, hn, cn := m.ForwardState(vram.FromSlice(x, xShape), ht, ct)
				for _, r := range []struct {
					name  string
					got   *vram.Tensor
					shape vram.Shape
					want  []float64
				}{{"output", out, outShape, wantOut}, {"h_n", hn, hShape, wantH}, {"c_n", cn, cShape, wantC}} {
					if !slices.Equal(r.got.Shape(), r.shape) {
						t.Fatalf("%s: shape %v, want %v", r.name, r.got.Shape(), r.shape)
					}
					checkValues(t, r.name, r.got.Float64s(), r.want, 1e-12)
				}
			})
		})
	}
}

// TestLSTMProjSizeStateDict checks the names, order and shapes of an
// LSTM's parameters with proj_size, PyTorch's, and that they load.
func TestLSTMProjSizeStateDict(t *testing.T) {
	m := nn.NewLSTM(10, 16, nn.RecurrentOptions{NumLayers: 2, Bidirectional: true, ProjSize: 4}, vram.WithGenerator(vram.NewGenerator(1)))
	defer nn.Release(m)
	want := []struct {
		name  string
		shape vram.Shape
	}{
		{"weight_ih_l0", vram.Shape{64, 10}}, {"weight_hh_l0", vram.Shape{64, 4}}, {"bias_ih_l0", vram.Shape{64}}, {"bias_hh_l0", vram.Shape{64}}, {"weight_hr_l0", vram.Shape{4, 16}},
		{"weight_ih_l0_reverse", vram.Shape{64, 10}}, {"weight_hh_l0_reverse", vram.Shape{64, 4}}, {"bias_ih_l0_reverse", vram.Shape{64}}, {"bias_hh_l0_reverse", vram.Shape{64}}, {"weight_hr_l0_reverse", vram.Shape{4, 16}},
		{"weight_ih_l1", vram.Shape{64, 8}}, {"weight_hh_l1", vram.Shape{64, 4}}, {"bias_ih_l1", vram.Shape{64}}, {"bias_hh_l1", vram.Shape{64}}, {"weight_hr_l1", vram.Shape{4, 16}},
		{"weight_ih_l1_reverse", vram.Shape{64, 8}}, {"weight_hh_l1_reverse", vram.Shape{64, 4}}, {"bias_ih_l1_reverse", vram.Shape{64}}, {"bias_hh_l1_reverse", vram.Shape{64}}, {"weight_hr_l1_reverse", vram.Shape{4, 16}},
	}
	ps := m.NamedParameters()
	if len(ps) != len(want) {
		t.Fatalf("%d parameters, want %d", len(ps), len(want))
	}
	for i, p := range ps {
		if p.Name != want[i].name || !slices.Equal(p.Tensor.Shape(), want[i].shape) {
			t.Errorf("parameter %d: %s %v, want %s %v", i, p.Name, p.Tensor.Shape(), want[i].name, want[i].shape)
		}
		bound := 0.25 // 1/sqrt(hidden_size) for every parameter, weight_hr too
		var lo, hi float64
		for _, v := range p.Tensor.Float64s() {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		if lo < -bound || hi > bound || hi-lo < bound {
			t.Errorf("%s spans [%v, %v], want most of [-%v, %v)", p.Name, lo, hi, bound, bound)
		}
	}
	// Another LSTM of the same settings takes the state dict; one
	// without projections does not.
	sd := map[string]*vram.Tensor{}
	for _, p := range ps {
		sd[p.Name] = p.Tensor
	}
	other := nn.NewLSTM(10, 16, nn.RecurrentOptions{NumLayers: 2, Bidirectional: true, ProjSize: 4}, vram.WithGenerator(vram.NewGenerator(2)))
	if _, err := nn.LoadStateDict(other, sd, true); err != nil {
		t.Fatal(err)
	}
	x := vram.Randn(vram.Shape{3, 2, 10}, vram.WithGenerator(vram.NewGenerator(3)))
	checkValues(t, "loaded", other.Forward(x).Float64s(), m.Forward(x).Float64s(), 0)
	if _, err := nn.LoadStateDict(nn.NewLSTM(10, 16, nn.RecurrentOptions{NumLayers: 2, Bidirectional: true}), sd, true); err == nil {
		t.Fatal("a state dict with weight_hr loaded into an LSTM without projections")
	}
}

// TestLSTMProjSizeGradients compares the gradients of an LSTM with
// projections, of its parameters (weight_hr included), input and initial
// states, with finite differences.
func TestLSTMProjSizeGradients(t *testing.T) {
	g := vram.NewGenerator(5)
	m := nn.NewLSTM(2, 3, nn.RecurrentOptions{NumLayers: 2, Bidirectional: true, ProjSize: 2}, vram.Float64, vram.WithGenerator(g))
	x := vram.Randn(vram.Shape{3, 2, 2}, vram.Float64, vram.WithGenerator(g), vram.WithGrad())
	h0 := vram.Randn(vram.Shape{4, 2, 2}, vram.Float64, vram.WithGenerator(g), vram.WithGrad())
	c0 := vram.Randn(vram.Shape{4, 2, 3}, vram.Float64, vram.WithGenerator(g), vram.WithGrad())
	rOut := vram.Randn(vram.Shape{3, 2, 4}, vram.Float64, vram.WithGenerator(g))
	rH := vram.Randn(vram.Shape{4, 2, 2}, vram.Float64, vram.WithGenerator(g))
	rC := vram.Randn(vram.Shape{4, 2, 3}, vram.Float64, vram.WithGenerator(g))
	loss := func() *vram.Tensor {
		out, hn, cn := m.ForwardState(x, h0, c0)
		return out.Mul(rOut).Sum().Add(hn.Mul(rH).Sum()).Add(cn.Mul(rC).Sum())
	}
	loss().Backward()
	leaves := append(m.NamedParameters(), nn.NamedParameter{Name: "x", Tensor: x}, nn.NamedParameter{Name: "h0", Tensor: h0}, nn.NamedParameter{Name: "c0", Tensor: c0})
	const eps = 1e-6
	for _, p := range leaves {
		grad := p.Tensor.Grad()
		if grad == nil {
			t.Fatalf("%s: no gradient", p.Name)
		}
		gv, vals := grad.Float64s(), p.Tensor.Float64s()
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
}

// TestLSTMProjSizeErrors checks PyTorch's checks of proj_size and of the
// states' sizes with projections.
func TestLSTMProjSizeErrors(t *testing.T) {
	m := nn.NewLSTM(3, 4, nn.RecurrentOptions{ProjSize: 2})
	x := vram.Zeros(vram.Shape{5, 2, 3})
	tests := []struct {
		name   string
		fn     func()
		kind   error
		op     string
		detail string
	}{
		{"negative", func() { nn.NewLSTM(3, 4, nn.RecurrentOptions{ProjSize: -1}) }, vram.ErrArgument, "lstm", "proj_size"},
		{"equal to hidden size", func() { nn.NewLSTM(3, 4, nn.RecurrentOptions{ProjSize: 4}) }, vram.ErrArgument, "lstm", "smaller than hidden_size"},
		{"on a GRU", func() { nn.NewGRU(3, 4, nn.RecurrentOptions{ProjSize: 2}) }, vram.ErrArgument, "gru", "LSTM only"},
		{"on an RNN", func() { nn.NewRNN(3, 4, nn.RecurrentOptions{ProjSize: 2}) }, vram.ErrArgument, "rnn", "LSTM only"},
		{"h0 of hidden size", func() { m.ForwardState(x, vram.Zeros(vram.Shape{1, 2, 4}), vram.Zeros(vram.Shape{1, 2, 4})) }, vram.ErrShape, "lstm", "proj_size"},
		{"c0 of proj size", func() { m.ForwardState(x, vram.Zeros(vram.Shape{1, 2, 2}), vram.Zeros(vram.Shape{1, 2, 2})) }, vram.ErrShape, "lstm", "c0 must be [1, 2, 4]"},
		{"proj size changed", func() {
			l := nn.NewLSTM(3, 4, nn.RecurrentOptions{ProjSize: 2})
			l.ProjSize = 3
			l.Forward(x)
		}, vram.ErrShape, "lstm", "proj_size 3"},
		{"projection removed", func() {
			l := nn.NewLSTM(3, 4, nn.RecurrentOptions{ProjSize: 2})
			l.ProjSize = 0
			l.Forward(x)
		}, vram.ErrArgument, "lstm", "weight_hr_l0"},
		{"proj size set on a GRU", func() {
			l := nn.NewGRU(3, 4, nn.RecurrentOptions{})
			l.ProjSize = 2
			l.Forward(x)
		}, vram.ErrArgument, "gru", "LSTM only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			var ve *vram.Error
			if !errors.As(err, &ve) || !errors.Is(err, tc.kind) || ve.Op != tc.op || !strings.Contains(ve.Detail, tc.detail) {
				t.Fatalf("got %v, want an error of kind %v from %q naming %q", err, tc.kind, tc.op, tc.detail)
			}
		})
	}
}
