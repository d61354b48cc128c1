package nn_test

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// refMHA computes multi-head attention in float64 loops from batch-first
// q [N, L, E], k [N, S, KDim], v [N, S, VDim], following PyTorch's
// formulas: blocked(b, h, i, j) excludes a key, add(b, h, i, j) is added
// to its score. It returns the output [N, L, E] and the per-head weights
// [N, H, L, S].
func refMHA(m *nn.MultiheadAttention, q, k, v []float64, n, l, s int,
	blocked func(b, h, i, j int) bool, add func(b, h, i, j int) float64) (out, weights []float64) {
	e, hs, kd, vd := m.EmbedDim, m.NumHeads, m.KDim, m.VDim
	d := e / hs
	var wq, wk, wv []float64
	if m.InProjWeight != nil {
		w := m.InProjWeight.Float64s()
		wq, wk, wv = w[:e*e], w[e*e:2*e*e], w[2*e*e:]
	} else {
		wq, wk, wv = m.QProjWeight.Float64s(), m.KProjWeight.Float64s(), m.VProjWeight.Float64s()
	}
	bias := make([]float64, 3*e)
	if m.InProjBias != nil {
		bias = m.InProjBias.Float64s()
	}
	proj := func(x []float64, rows, in int, w, b []float64) []float64 {
		y := make([]float64, rows*e)
		for r := 0; r < rows; r++ {
			for o := 0; o < e; o++ {
				sum := b[o]
				for c := 0; c < in; c++ {
					sum += x[r*in+c] * w[o*in+c]
				}
				y[r*e+o] = sum
			}
		}
		return y
	}
	qp, kp, vp := proj(q, n*l, e, wq, bias[:e]), proj(k, n*s, kd, wk, bias[e:2*e]), proj(v, n*s, vd, wv, bias[2*e:])
	joined := make([]float64, n*l*e)
	weights = make([]float64, n*hs*l*s)
	for b := 0; b < n; b++ {
		for h := 0; h < hs; h++ {
			for i := 0; i < l; i++ {
				sc := make([]float64, s)
				top := math.Inf(-1)
				for j := 0; j < s; j++ {
					var dot float64
					for c := 0; c < d; c++ {
						dot += qp[(b*l+i)*e+h*d+c] * kp[(b*s+j)*e+h*d+c]
					}
					sc[j] = dot/math.Sqrt(float64(d)) + add(b, h, i, j)
					if blocked(b, h, i, j) {
						sc[j] = math.Inf(-1)
					}
					top = math.Max(top, sc[j])
				}
				if math.IsInf(top, -1) {
					continue
				}
				var sum float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - top)
					sum += sc[j]
				}
				for j := range sc {
					p := sc[j] / sum
					weights[((b*hs+h)*l+i)*s+j] = p
					for c := 0; c < d; c++ {
						joined[(b*l+i)*e+h*d+c] += p * vp[(b*s+j)*e+h*d+c]
					}
				}
			}
		}
	}
	ob := make([]float64, e)
	if m.OutProj.Bias != nil {
		ob = m.OutProj.Bias.Float64s()
	}
	return proj(joined, n*l, e, m.OutProj.Weight.Float64s(), ob), weights
}

func TestMultiheadAttentionStateDict(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(1))
	tests := []struct {
		name string
		m    *nn.MultiheadAttention
		want map[string]vram.Shape
	}{
		{"default", nn.NewMultiheadAttention(8, 2, nn.MultiheadAttentionOptions{}, g), map[string]vram.Shape{
			"in_proj_weight": {24, 8}, "in_proj_bias": {24}, "out_proj.weight": {8, 8}, "out_proj.bias": {8}}},
		{"no bias", nn.NewMultiheadAttention(8, 4, nn.MultiheadAttentionOptions{NoBias: true}, g), map[string]vram.Shape{
			"in_proj_weight": {24, 8}, "out_proj.weight": {8, 8}}},
		{"kdim vdim", nn.NewMultiheadAttention(6, 3, nn.MultiheadAttentionOptions{KDim: 4, VDim: 5}, g), map[string]vram.Shape{
			"q_proj_weight": {6, 6}, "k_proj_weight": {6, 4}, "v_proj_weight": {6, 5}, "in_proj_bias": {18},
			"out_proj.weight": {6, 6}, "out_proj.bias": {6}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sd := nn.StateDict(tc.m)
			if len(sd) != len(tc.want) {
				t.Fatalf("state dict has %d entries, want %d", len(sd), len(tc.want))
			}
			for name, shape := range tc.want {
				p, ok := sd[name]
				if !ok || !slices.Equal(p.Shape(), shape) {
					t.Fatalf("%s: got %v (present %v), want shape %v", name, p, ok, shape)
				}
			}
			// PyTorch's initialisation: biases zero, projections
			// Xavier-uniform, out_proj.weight as a Linear's.
			for name, p := range sd {
				var bound float64
				switch name {
				case "in_proj_bias", "out_proj.bias":
				case "out_proj.weight":
					bound = 1 / math.Sqrt(float64(p.Size(1)))
				default:
					bound = math.Sqrt(6 / float64(p.Size(0)+p.Size(1)))
				}
				lo, hi := math.Inf(1), math.Inf(-1)
				for _, x := range p.Float64s() {
					lo, hi = math.Min(lo, x), math.Max(hi, x)
				}
				if lo < -bound || hi > bound || bound > 0 && hi-lo < bound {
					t.Errorf("%s: values in [%v, %v], want spread over ±%v", name, lo, hi, bound)
				}
			}
		})
	}
}

func TestMultiheadAttentionForward(t *testing.T) {
	const n, l, s = 2, 3, 4
	never := func(b, h, i, j int) bool { return false }
	zero := func(b, h, i, j int) float64 { return 0 }
	kpm := []bool{false, false, true, false, true, true, true, true} // [N, S], true = padding; batch 1 all padding
	am := []bool{false, true, false, false, false, false, true, true, false, false, false, true}
	amf := make([]float64, n*2*l*s) // [N·H, L, S]
	for i := range amf {
		amf[i] = float64(i%5) - 2
	}
	tests := []struct {
		name    string
		e, h    int
		mo      nn.MultiheadAttentionOptions
		fo      func() nn.MultiheadForwardOptions
		blocked func(b, h, i, j int) bool
		add     func(b, h, i, j int) float64
	}{
		{"plain", 6, 2, nn.MultiheadAttentionOptions{}, func() nn.MultiheadForwardOptions { return nn.MultiheadForwardOptions{} }, never, zero},
		{"batch first", 6, 3, nn.MultiheadAttentionOptions{BatchFirst: true}, func() nn.MultiheadForwardOptions { return nn.MultiheadForwardOptions{} }, never, zero},
		{"no bias, kdim, vdim", 4, 2, nn.MultiheadAttentionOptions{NoBias: true, KDim: 3, VDim: 5},
			func() nn.MultiheadForwardOptions { return nn.MultiheadForwardOptions{} }, never, zero},
		{"key padding", 4, 2, nn.MultiheadAttentionOptions{},
			func() nn.MultiheadForwardOptions {
				return nn.MultiheadForwardOptions{KeyPaddingMask: vram.FromSlice(kpm, vram.Shape{n, s})}
			},
			func(b, h, i, j int) bool { return kpm[b*s+j] }, zero},
		{"bool attn mask and causal", 4, 2, nn.MultiheadAttentionOptions{},
			func() nn.MultiheadForwardOptions {
				return nn.MultiheadForwardOptions{AttnMask: vram.FromSlice(am, vram.Shape{l, s}), Causal: true}
			},
			func(b, h, i, j int) bool { return am[i*s+j] || j > i }, zero},
		{"float 3-D attn mask and bool padding", 4, 2, nn.MultiheadAttentionOptions{},
			func() nn.MultiheadForwardOptions {
				return nn.MultiheadForwardOptions{AttnMask: vram.FromSlice(amf, vram.Shape{n * 2, l, s}),
					KeyPaddingMask: vram.FromSlice(kpm[:4], vram.Shape{1, s}).Expand(n, s)}
			},
			func(b, h, i, j int) bool { return kpm[j] },
			func(b, h, i, j int) float64 { return amf[((b*2+h)*l+i)*s+j] }},
		{"per-head weights", 4, 2, nn.MultiheadAttentionOptions{},
			func() nn.MultiheadForwardOptions { return nn.MultiheadForwardOptions{PerHeadWeights: true} }, never, zero},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := vram.NewGenerator(3)
			m := nn.NewMultiheadAttention(tc.e, tc.h, tc.mo, vram.Float64, vram.WithGenerator(g))
			if m.InProjBias != nil {
				// Non-zero biases, so that the test sees them.
				vram.NoGrad(func() {
					m.InProjBias.CopyFrom(vram.Randn(m.InProjBias.Shape(), vram.Float64, vram.WithGenerator(g)))
					m.OutProj.Bias.CopyFrom(vram.Randn(m.OutProj.Bias.Shape(), vram.Float64, vram.WithGenerator(g)))
				})
			}
			rnd := func(rows, cols int) *vram.Tensor {
				return vram.Randn(vram.Shape{n, rows, cols}, vram.Float64, vram.WithGenerator(g))
			}
			q, k, v := rnd(l, tc.e), rnd(s, m.KDim), rnd(s, m.VDim) // batch first
			want, wantW := refMHA(m, q.Float64s(), k.Float64s(), v.Float64s(), n, l, s, tc.blocked, tc.add)
			in := func(x *vram.Tensor) *vram.Tensor {
				if tc.mo.BatchFirst {
					return x
				}
				return x.Transpose(0, 1)
			}
			fo := tc.fo()
			out, w := m.ForwardQKV(in(q), in(k), in(v), fo)
			if !tc.mo.BatchFirst {
				out = out.Transpose(0, 1)
			}
			if !slices.Equal(out.Shape(), vram.Shape{n, l, tc.e}) {
				t.Fatalf("output shape %v", out.Shape())
			}
			checkValues(t, "output", out.Contiguous().Float64s(), want, 1e-10)
			if fo.PerHeadWeights {
				checkValues(t, "weights", w.Float64s(), wantW, 1e-10)
			} else {
				mean := make([]float64, n*l*s)
				for b := 0; b < n; b++ {
					for h := 0; h < tc.h; h++ {
						for i := 0; i < l*s; i++ {
							mean[b*l*s+i] += wantW[(b*tc.h+h)*l*s+i] / float64(tc.h)
						}
					}
				}
				checkValues(t, "mean weights", w.Float64s(), mean, 1e-10)
			}
			// The same batch, one item at a time, unbatched.
			if fo.AttnMask == nil || fo.AttnMask.Dim() == 2 {
				one := fo
				if fo.KeyPaddingMask != nil {
					one.KeyPaddingMask = fo.KeyPaddingMask.Select(0, 1)
				}
				o1, _ := m.ForwardQKV(q.Select(0, 1), k.Select(0, 1), v.Select(0, 1), one)
				checkValues(t, "unbatched output", o1.Float64s(), want[l*tc.e:], 1e-10)
			}
		})
	}
}

func TestMultiheadAttentionGradients(t *testing.T) {
	g := vram.NewGenerator(5)
	m := nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{BatchFirst: true}, vram.Float64, vram.WithGenerator(g))
	x := vram.Randn(vram.Shape{2, 3, 4}, vram.Float64, vram.WithGenerator(g))
	r := vram.Randn(vram.Shape{2, 3, 4}, vram.Float64, vram.WithGenerator(g))
	fo := nn.MultiheadForwardOptions{Causal: true, KeyPaddingMask: vram.FromSlice([]bool{false, true, false, false, false, false}, vram.Shape{2, 3})}
	loss := func() float64 {
		var v float64
		vram.NoGrad(func() {
			out, _ := m.ForwardQKV(x, x, x, fo)
			v = out.Mul(r).Sum().Item()
		})
		return v
	}
	out, _ := m.ForwardQKV(x, x, x, fo)
	out.Mul(r).Sum().Backward()
	const eps = 1e-6
	for _, p := range m.NamedParameters() {
		grad := p.Tensor.Grad()
		if grad == nil {
			t.Fatalf("%s: no gradient", p.Name)
		}
		gv, vals := grad.Float64s(), p.Tensor.Float64s()
		for i := range vals {
			orig := vals[i]
			put := func(x float64) {
				vals[i] = x
				vram.NoGrad(func() { p.Tensor.CopyFrom(vram.FromSlice(vals, p.Tensor.Shape())) })
			}
			put(orig + eps)
			up := loss()
			put(orig - eps)
			down := loss()
			put(orig)
			if fd := (up - down) / (2 * eps); math.IsNaN(gv[i]) || math.Abs(gv[i]-fd) > 1e-6+1e-4*math.Abs(fd) {
				t.Fatalf("%s[%d]: gradient %v, finite difference %v", p.Name, i, gv[i], fd)
			}
		}
	}
}

func TestMultiheadAttentionFullyMasked(t *testing.T) {
	m := nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{BatchFirst: true}, vram.WithGenerator(vram.NewGenerator(2)))
	vram.NoGrad(func() { m.OutProj.Bias.CopyFrom(vram.FromSlice([]float32{1, 2, 3, 4}, vram.Shape{4})) })
	x := vram.Randn(vram.Shape{1, 2, 4}, vram.WithGenerator(vram.NewGenerator(3)))
	out, w := m.ForwardQKV(x, x, x, nn.MultiheadForwardOptions{KeyPaddingMask: vram.Ones(vram.Shape{1, 2}, vram.Bool)})
	checkValues(t, "output", out.Float64s(), []float64{1, 2, 3, 4, 1, 2, 3, 4}, 1e-6)
	checkValues(t, "weights", w.Float64s(), []float64{0, 0, 0, 0}, 0)
	out.Sum().Backward()
	for _, p := range m.NamedParameters() {
		for _, v := range p.Tensor.Grad().Float64s() {
			if math.IsNaN(v) {
				t.Fatalf("%s: NaN gradient", p.Name)
			}
		}
	}
}

func TestMultiheadAttentionDropout(t *testing.T) {
	m := nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{Dropout: 0.5, BatchFirst: true},
		vram.Float64, vram.WithGenerator(vram.NewGenerator(4)))
	x := vram.Randn(vram.Shape{2, 8, 4}, vram.Float64, vram.WithGenerator(vram.NewGenerator(5)))
	zeros := func(w *vram.Tensor) int {
		c := 0
		for _, v := range w.Float64s() {
			if v == 0 {
				c++
			}
		}
		return c
	}
	fo := nn.MultiheadForwardOptions{PerHeadWeights: true}
	_, w := m.ForwardQKV(x, x, x, fo)
	if z := zeros(w); z < w.NumElements()/4 {
		t.Errorf("training: %d of %d weights dropped with p = 0.5", z, w.NumElements())
	}
	m.Eval()
	out1, w := m.ForwardQKV(x, x, x, fo)
	if z := zeros(w); z != 0 {
		t.Errorf("evaluation: %d weights dropped", z)
	}
	out2 := m.Forward(x)
	checkValues(t, "Forward", out2.Float64s(), out1.Float64s(), 0)
}

func TestMultiheadAttentionErrors(t *testing.T) {
	tests := []struct {
		name string
		f    func()
		kind error
	}{
		{"heads", func() { nn.NewMultiheadAttention(6, 4, nn.MultiheadAttentionOptions{}) }, vram.ErrArgument},
		{"zero size", func() { nn.NewMultiheadAttention(0, 1, nn.MultiheadAttentionOptions{}) }, vram.ErrArgument},
		{"dropout", func() { nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{Dropout: 2}) }, vram.ErrArgument},
	}
	m := nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{})
	x := vram.Randn(vram.Shape{3, 2, 4}) // [L, N, E]
	fwd := func(q, k, v *vram.Tensor, o nn.MultiheadForwardOptions) func() {
		return func() { m.ForwardQKV(q, k, v, o) }
	}
	tests = append(tests, []struct {
		name string
		f    func()
		kind error
	}{
		{"rank", fwd(vram.Randn(vram.Shape{4}), x, x, nn.MultiheadForwardOptions{}), vram.ErrShape},
		{"mixed ranks", fwd(x, vram.Randn(vram.Shape{3, 4}), x, nn.MultiheadForwardOptions{}), vram.ErrShape},
		{"features", fwd(vram.Randn(vram.Shape{3, 2, 5}), x, x, nn.MultiheadForwardOptions{}), vram.ErrShape},
		{"batch", fwd(x, vram.Randn(vram.Shape{3, 1, 4}), vram.Randn(vram.Shape{3, 1, 4}), nn.MultiheadForwardOptions{}), vram.ErrShape},
		{"key value length", fwd(x, x, vram.Randn(vram.Shape{5, 2, 4}), nn.MultiheadForwardOptions{}), vram.ErrShape},
		{"attn mask shape", fwd(x, x, x, nn.MultiheadForwardOptions{AttnMask: vram.Ones(vram.Shape{3, 4}, vram.Bool)}), vram.ErrShape},
		{"attn mask 3-D", fwd(x, x, x, nn.MultiheadForwardOptions{AttnMask: vram.Ones(vram.Shape{2, 3, 3}, vram.Bool)}), vram.ErrShape},
		{"padding mask shape", fwd(x, x, x, nn.MultiheadForwardOptions{KeyPaddingMask: vram.Ones(vram.Shape{3, 2}, vram.Bool)}), vram.ErrShape},
		{"mask dtype", fwd(x, x, x, nn.MultiheadForwardOptions{AttnMask: vram.Ones(vram.Shape{3, 3}, vram.Int64)}), vram.ErrDType},
		{"nil", fwd(x, nil, x, nn.MultiheadForwardOptions{}), vram.ErrArgument},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.f)
			var ve *vram.Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &ve) || ve.Op != "multihead_attention" {
				t.Fatalf("got %v, want a multihead_attention error of kind %v", err, tc.kind)
			}
		})
	}
}

func TestMultiheadAttentionSaveLoad(t *testing.T) {
	a := nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{}, vram.WithGenerator(vram.NewGenerator(1)))
	b := nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{}, vram.WithGenerator(vram.NewGenerator(2)))
	path := filepath.Join(t.TempDir(), "mha.safetensors")
	if err := nn.Save(a, path); err != nil {
		t.Fatal(err)
	}
	if err := nn.Load(b, path); err != nil {
		t.Fatal(err)
	}
	x := vram.Randn(vram.Shape{3, 2, 4}, vram.WithGenerator(vram.NewGenerator(3)))
	checkValues(t, "loaded", b.Forward(x).Float64s(), a.Forward(x).Float64s(), 0)
}

func TestMultiheadAttentionReleasesEverything(t *testing.T) {
	dev := vram.Sim(1)
	m := nn.NewMultiheadAttention(8, 2, nn.MultiheadAttentionOptions{Dropout: 0.1}, dev, vram.WithGenerator(vram.NewGenerator(1)))
	defer nn.Release(m)
	x := vram.Randn(vram.Shape{5, 2, 8}, dev)
	defer x.Release()
	pad := vram.FromSlice([]bool{false, false, true, false, false, false, false, false, true, true}, vram.Shape{2, 5}, dev)
	defer pad.Release()
	fo := nn.MultiheadForwardOptions{KeyPaddingMask: pad, AttnMask: vram.Zeros(vram.Shape{5, 5}, dev), Causal: true}
	defer fo.AttnMask.Release()
	for _, grad := range []bool{false, true} {
		memtest.Settle(dev)
		base := vram.MemoryAllocated(dev)
		run := func() {
			out, w := m.ForwardQKV(x, x, x, fo)
			if grad {
				s := out.Sum()
				s.Backward()
				s.Release()
			}
			out.Release()
			w.Release()
		}
		if grad {
			run()
		} else {
			vram.NoGrad(run)
		}
		for _, p := range m.Parameters() {
			p.ZeroGrad()
		}
		if got := vram.MemoryAllocated(dev); got != base {
			t.Errorf("grad=%v: %d bytes allocated after the step, want %d", grad, got, base)
		}
	}
}

func TestMultiheadAttentionConcurrentForward(t *testing.T) {
	m := nn.NewMultiheadAttention(8, 2, nn.MultiheadAttentionOptions{BatchFirst: true, Dropout: 0.2},
		vram.WithGenerator(vram.NewGenerator(1)))
	x := vram.Randn(vram.Shape{2, 4, 8}, vram.WithGenerator(vram.NewGenerator(2)))
	m.Eval()
	want := m.Forward(x).Float64s()
	m.Train() // dropout draws from the shared generator concurrently
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = vram.Catch(func() {
				out := m.Forward(x)
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
	m.Eval()
	checkValues(t, "evaluation output", m.Forward(x).Float64s(), want, 0)
}

func TestMultiheadAttentionReplicate(t *testing.T) {
	if !vram.Sim(0).Available() {
		t.Skip("sim:0 not available")
	}
	m := nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{BatchFirst: true}, vram.WithGenerator(vram.NewGenerator(1)))
	r, err := nn.Replicate(m, vram.Sim(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nn.Release(r)
	rm := r.(*nn.MultiheadAttention)
	if rm.OutProj.Weight.Device() != vram.Sim(0) || rm.InProjWeight.Device() != vram.Sim(0) {
		t.Fatalf("replica's weights on %v and %v", rm.OutProj.Weight.Device(), rm.InProjWeight.Device())
	}
	x := vram.Randn(vram.Shape{2, 3, 4}, vram.WithGenerator(vram.NewGenerator(2)))
	want := m.Forward(x).Float64s()
	got := r.Forward(x.To(vram.Sim(0))).To(vram.CPU).Float64s()
	checkValues(t, "replica output", got, want, 1e-6)
}

// TestMultiheadAttentionCheckpoint recomputes a layer with dropout in the
// backward pass: the recomputation must draw the same dropout masks.
func TestMultiheadAttentionCheckpoint(t *testing.T) {
	grads := func(ckpt bool) []float64 {
		m := nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{Dropout: 0.3}, vram.Float64, vram.WithGenerator(vram.NewGenerator(1)))
		var mod nn.Module = m
		if ckpt {
			mod = nn.Checkpoint(m)
		}
		x := vram.Randn(vram.Shape{3, 2, 4}, vram.Float64, vram.WithGenerator(vram.NewGenerator(2)))
		mod.Forward(x).Sum().Backward()
		return m.InProjWeight.Grad().Float64s()
	}
	checkValues(t, "in_proj_weight gradient", grads(true), grads(false), 0)
}
