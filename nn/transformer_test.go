package nn_test

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// encoderLayerNames and decoderLayerNames are PyTorch's state-dict keys of
// TransformerEncoderLayer and TransformerDecoderLayer, in its order.
var (
	encoderLayerNames = []string{
		"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
		"linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
		"norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias",
	}
	decoderLayerNames = []string{
		"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
		"multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias", "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias",
		"linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
		"norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "norm3.weight", "norm3.bias",
	}
)

func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

func withoutBias(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return strings.HasSuffix(n, "bias") })
}

func TestTransformerStateDictNames(t *testing.T) {
	var transformer []string
	transformer = append(transformer, prefixed("encoder.layers.0.", encoderLayerNames)...)
	transformer = append(transformer, prefixed("encoder.layers.1.", encoderLayerNames)...)
	transformer = append(transformer, "encoder.norm.weight", "encoder.norm.bias")
	transformer = append(transformer, prefixed("decoder.layers.0.", decoderLayerNames)...)
	transformer = append(transformer, "decoder.norm.weight", "decoder.norm.bias")
	o := nn.TransformerOptions{DimFeedforward: 6}
	tests := []struct {
		name string
		m    nn.Module
		want []string
	}{
		{"encoder layer", nn.NewTransformerEncoderLayer(4, 2, o), encoderLayerNames},
		{"decoder layer", nn.NewTransformerDecoderLayer(4, 2, o), decoderLayerNames},
		{"encoder layer without bias", nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6, NoBias: true}),
			withoutBias(encoderLayerNames)},
		{"encoder", nn.NewTransformerEncoder(nn.NewTransformerEncoderLayer(4, 2, o), 2, nil),
			append(prefixed("layers.0.", encoderLayerNames), prefixed("layers.1.", encoderLayerNames)...)},
		{"decoder with norm", nn.NewTransformerDecoder(nn.NewTransformerDecoderLayer(4, 2, o), 1, nn.NewLayerNorm([]int{4}, 1e-5)),
			append(prefixed("layers.0.", decoderLayerNames), "norm.weight", "norm.bias")},
		{"transformer", nn.NewTransformer(4, 2, 2, 1, o), transformer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := paramNames(tc.m); !slices.Equal(got, tc.want) {
				t.Errorf("names\n got %v\nwant %v", got, tc.want)
			}
			shapes := map[string]vram.Shape{"self_attn.in_proj_weight": {12, 4}, "linear1.weight": {6, 4}, "linear2.weight": {4, 6},
				"linear1.bias": {6}, "norm2.bias": {4}, "multihead_attn.out_proj.weight": {4, 4}}
			for _, p := range tc.m.NamedParameters() {
				for suffix, shape := range shapes {
					if (p.Name == suffix || strings.HasSuffix(p.Name, "."+suffix)) && !slices.Equal(p.Tensor.Shape(), shape) {
						t.Errorf("%s: shape %v, want %v", p.Name, p.Tensor.Shape(), shape)
					}
				}
			}
			nn.Release(tc.m)
		})
	}
}

// TestTransformerDefaults checks PyTorch's defaults: dim_feedforward 2048,
// dropout 0.1, relu, eps 1e-5, post-norm.
func TestTransformerDefaults(t *testing.T) {
	l := nn.NewTransformerEncoderLayer(8, 2, nn.TransformerOptions{})
	defer nn.Release(l)
	switch {
	case !slices.Equal(l.Linear1.Weight.Shape(), vram.Shape{2048, 8}):
		t.Errorf("linear1 %v, want [2048 8]", l.Linear1.Weight.Shape())
	case l.Dropout.P != 0.1 || l.Dropout1.P != 0.1 || l.Dropout2.P != 0.1 || l.SelfAttn.Dropout != 0.1:
		t.Errorf("dropout %v %v %v %v, want 0.1", l.Dropout.P, l.Dropout1.P, l.Dropout2.P, l.SelfAttn.Dropout)
	case l.Norm1.Eps != 1e-5 || l.Activation != "relu" || l.NormFirst || l.BatchFirst:
		t.Errorf("eps %v, activation %q, norm first %v, batch first %v", l.Norm1.Eps, l.Activation, l.NormFirst, l.BatchFirst)
	}
	n := nn.NewTransformerDecoderLayer(8, 2, nn.TransformerOptions{DimFeedforward: 4, NoDropout: true, LayerNormEps: 1e-6, Activation: "gelu"})
	defer nn.Release(n)
	if n.Dropout3.P != 0 || n.MultiheadAttn.Dropout != 0 || n.Norm3.Eps != 1e-6 || n.Activation != "gelu" {
		t.Errorf("dropout %v, attention dropout %v, eps %v, activation %q", n.Dropout3.P, n.MultiheadAttn.Dropout, n.Norm3.Eps, n.Activation)
	}
}

// refEncoderLayer computes the encoder layer from its sub-layers, in
// evaluation mode.
func refEncoderLayer(l *nn.TransformerEncoderLayer, x *vram.Tensor) *vram.Tensor {
	act := func(h *vram.Tensor) *vram.Tensor {
		if l.Activation == "gelu" {
			return h.Gelu()
		}
		return h.Relu()
	}
	ff := func(x *vram.Tensor) *vram.Tensor { return l.Linear2.Forward(act(l.Linear1.Forward(x))) }
	if l.NormFirst {
		x = x.Add(l.SelfAttn.Forward(l.Norm1.Forward(x)))
		return x.Add(ff(l.Norm2.Forward(x)))
	}
	x = l.Norm1.Forward(x.Add(l.SelfAttn.Forward(x)))
	return l.Norm2.Forward(x.Add(ff(x)))
}

func TestTransformerEncoderLayerForward(t *testing.T) {
	for _, o := range []nn.TransformerOptions{
		{DimFeedforward: 6},
		{DimFeedforward: 6, NormFirst: true, Activation: "gelu"},
		{DimFeedforward: 6, BatchFirst: true, NoBias: true},
	} {
		l := nn.NewTransformerEncoderLayer(4, 2, o, vram.Float64, vram.WithGenerator(vram.NewGenerator(1)))
		l.Eval()
		for _, shape := range []vram.Shape{{3, 2, 4}, {3, 4}} {
			x := vram.Randn(shape, vram.Float64, vram.WithGenerator(vram.NewGenerator(2)))
			got := l.Forward(x)
			if !slices.Equal(got.Shape(), shape) {
				t.Fatalf("%+v: shape %v, want %v", o, got.Shape(), shape)
			}
			checkValues(t, "encoder layer", got.Float64s(), refEncoderLayer(l, x).Float64s(), 1e-12)
		}
	}
}

func TestTransformerDecoderLayerForward(t *testing.T) {
	for _, normFirst := range []bool{false, true} {
		l := nn.NewTransformerDecoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6, NormFirst: normFirst}, vram.Float64,
			vram.WithGenerator(vram.NewGenerator(1)))
		l.Eval()
		tgt := vram.Randn(vram.Shape{3, 2, 4}, vram.Float64, vram.WithGenerator(vram.NewGenerator(2)))
		mem := vram.Randn(vram.Shape{5, 2, 4}, vram.Float64, vram.WithGenerator(vram.NewGenerator(3)))
		sa := func(x *vram.Tensor) *vram.Tensor {
			out, _ := l.SelfAttn.ForwardQKV(x, x, x, nn.MultiheadForwardOptions{Causal: true})
			return out
		}
		ca := func(x *vram.Tensor) *vram.Tensor {
			out, _ := l.MultiheadAttn.ForwardQKV(x, mem, mem, nn.MultiheadForwardOptions{})
			return out
		}
		ff := func(x *vram.Tensor) *vram.Tensor { return l.Linear2.Forward(l.Linear1.Forward(x).Relu()) }
		x := tgt
		if normFirst {
			x = x.Add(sa(l.Norm1.Forward(x)))
			x = x.Add(ca(l.Norm2.Forward(x)))
			x = x.Add(ff(l.Norm3.Forward(x)))
		} else {
			x = l.Norm1.Forward(x.Add(sa(x)))
			x = l.Norm2.Forward(x.Add(ca(x)))
			x = l.Norm3.Forward(x.Add(ff(x)))
		}
		got := l.ForwardMemory(tgt, mem, nn.DecoderMasks{TgtCausal: true})
		checkValues(t, "decoder layer", got.Float64s(), x.Float64s(), 1e-12)
	}
}

// TestTransformerMasks checks that a padded key changes no other
// position's output, that is_causal is the square subsequent mask (float
// or bool), and that a causal model's earlier outputs ignore later inputs.
func TestTransformerMasks(t *testing.T) {
	g := vram.NewGenerator(1)
	m := nn.NewTransformer(4, 2, 2, 2, nn.TransformerOptions{DimFeedforward: 8, BatchFirst: true}, vram.Float64, vram.WithGenerator(g))
	m.Eval()
	src := vram.Randn(vram.Shape{2, 4, 4}, vram.Float64, vram.WithGenerator(g))
	tgt := vram.Randn(vram.Shape{2, 3, 4}, vram.Float64, vram.WithGenerator(g))
	// Position 3 of src, batch 0, and position 2 of tgt, batch 1, are padding.
	srcPad := vram.FromSlice([]bool{false, false, false, true, false, false, false, false}, vram.Shape{2, 4})
	tgtPad := vram.FromSlice([]bool{false, false, false, false, false, true}, vram.Shape{2, 3})
	padded := func(x *vram.Tensor, b, pos int) *vram.Tensor {
		v := x.Float64s()
		d, l := x.Size(2), x.Size(1)
		for i := range d {
			v[(b*l+pos)*d+i] = 100 + float64(i)
		}
		return vram.FromSlice(v, x.Shape())
	}
	run := func(src, tgt *vram.Tensor, mk nn.TransformerMasks) []float64 {
		return m.ForwardSrcTgt(src, tgt, mk).Float64s()
	}
	pads := nn.TransformerMasks{SrcKeyPaddingMask: srcPad, MemoryKeyPaddingMask: srcPad, TgtKeyPaddingMask: tgtPad, TgtCausal: true}
	base := run(src, tgt, pads)
	changed := run(padded(src, 0, 3), padded(tgt, 1, 2), pads)
	for i := range base {
		b, pos := i/12, i/4%3
		if b == 1 && pos == 2 {
			continue // the padded target position's own output may change
		}
		if math.Abs(base[i]-changed[i]) > 1e-12 {
			t.Fatalf("element %d (batch %d, position %d) changed from %v to %v by a padded input", i, b, pos, base[i], changed[i])
		}
	}

	square := nn.GenerateSquareSubsequentMask(3, vram.Float64)
	if got, inf := square.Float64s(), math.Inf(-1); !slices.Equal(got, []float64{0, inf, inf, 0, 0, inf, 0, 0, 0}) {
		t.Fatalf("square subsequent mask %v", got)
	}
	boolMask := vram.Ones(vram.Shape{3, 3}, vram.Bool).Triu(1)
	causal := run(src, tgt, nn.TransformerMasks{TgtCausal: true})
	for name, mk := range map[string]nn.TransformerMasks{
		"float mask":           {TgtMask: square},
		"bool mask":            {TgtMask: boolMask},
		"float mask and hint":  {TgtMask: square, TgtCausal: true},
		"float32 mask on f64":  {TgtMask: nn.GenerateSquareSubsequentMask(3)},
		"mask and zero paddin": {TgtMask: square, TgtKeyPaddingMask: vram.Zeros(vram.Shape{2, 3})},
	} {
		checkValues(t, name, run(src, tgt, mk), causal, 1e-12)
	}
	// Causal: the outputs before the last target position ignore it.
	later := run(src, padded(tgt, 0, 2), nn.TransformerMasks{TgtCausal: true})
	for i := range causal {
		if i/4%3 < 2 && math.Abs(causal[i]-later[i]) > 1e-12 {
			t.Fatalf("element %d changed from %v to %v by a later target position", i, causal[i], later[i])
		}
	}
	enc := m.Encoder
	encCausal := enc.ForwardMasked(src, nn.EncoderMasks{Causal: true}).Float64s()
	encMask := enc.ForwardMasked(src, nn.EncoderMasks{Mask: nn.GenerateSquareSubsequentMask(4, vram.Float64)}).Float64s()
	checkValues(t, "encoder causal", encCausal, encMask, 1e-12)
}

// TestTransformerDropout checks that dropout acts in training mode only:
// in evaluation mode the output is that of the same model without
// dropout.
func TestTransformerDropout(t *testing.T) {
	mk := func(o nn.TransformerOptions) *nn.Transformer {
		return nn.NewTransformer(4, 2, 1, 1, o, vram.WithGenerator(vram.NewGenerator(1)))
	}
	m := mk(nn.TransformerOptions{DimFeedforward: 8, Dropout: 0.5})
	plain := mk(nn.TransformerOptions{DimFeedforward: 8, NoDropout: true})
	src := vram.Randn(vram.Shape{4, 2, 4}, vram.WithGenerator(vram.NewGenerator(2)))
	tgt := vram.Randn(vram.Shape{3, 2, 4}, vram.WithGenerator(vram.NewGenerator(3)))
	want := plain.ForwardSrcTgt(src, tgt, nn.TransformerMasks{}).Float64s()
	train1 := m.ForwardSrcTgt(src, tgt, nn.TransformerMasks{}).Float64s()
	train2 := m.ForwardSrcTgt(src, tgt, nn.TransformerMasks{}).Float64s()
	if slices.Equal(train1, train2) || slices.Equal(train1, want) {
		t.Error("training mode: dropout changed nothing")
	}
	m.Eval()
	for _, l := range nn.Modules(m) {
		if l.Training() {
			t.Fatalf("%T still in training mode after Eval", l)
		}
	}
	checkValues(t, "evaluation output", m.ForwardSrcTgt(src, tgt, nn.TransformerMasks{}).Float64s(), want, 1e-6)
}

// TestTransformerClonesShareNothing checks that the stacked layers are
// deep copies: equal at first, with parameters of their own.
func TestTransformerClonesShareNothing(t *testing.T) {
	layer := nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6})
	e := nn.NewTransformerEncoder(layer, 3, nil)
	defer nn.Release(e)
	if len(e.Layers) != 3 || e.Layers[0] != layer {
		t.Fatalf("%d layers, first %p, want 3 and the layer given, %p", len(e.Layers), e.Layers[0], layer)
	}
	seen := map[*vram.Tensor]string{}
	for _, p := range e.NamedParameters() {
		if other, ok := seen[p.Tensor]; ok {
			t.Fatalf("%s and %s share a tensor", p.Name, other)
		}
		seen[p.Tensor] = p.Name
	}
	if got := len(e.Parameters()); got != 3*len(encoderLayerNames) {
		t.Fatalf("%d parameters, want %d", got, 3*len(encoderLayerNames))
	}
	want := e.Layers[0].Linear1.Weight.Float64s()
	checkValues(t, "copy", e.Layers[2].Linear1.Weight.Float64s(), want, 0)
	vram.NoGrad(func() { e.Layers[1].Linear1.Weight.MulScalarInPlace(2) })
	checkValues(t, "other copy after a change", e.Layers[2].Linear1.Weight.Float64s(), want, 0)
	checkValues(t, "first layer after a change", e.Layers[0].Linear1.Weight.Float64s(), want, 0)
}

// TestTransformerInit checks that nn.Transformer applies Xavier to every
// matrix, while the layers alone keep Linear's default.
func TestTransformerInit(t *testing.T) {
	const d, dff = 16, 64
	xavier := math.Sqrt(6.0 / (d + dff))     // 0.27
	linear := 1 / math.Sqrt(float64(d))      // 0.25
	xavierFF2 := math.Sqrt(6.0 / (d + dff))  // linear2 [d, dff]
	linearFF2 := 1 / math.Sqrt(float64(dff)) // 0.125
	maxAbs := func(x *vram.Tensor) float64 {
		m := 0.0
		for _, v := range x.Float64s() {
			m = max(m, math.Abs(v))
		}
		return m
	}
	o := nn.TransformerOptions{DimFeedforward: dff}
	m := nn.NewTransformer(d, 2, 1, 1, o, vram.WithGenerator(vram.NewGenerator(1)))
	defer nn.Release(m)
	for _, w := range []*vram.Tensor{m.Encoder.Layers[0].Linear2.Weight, m.Decoder.Layers[0].Linear2.Weight} {
		if got := maxAbs(w); got > xavierFF2 || got <= linearFF2 {
			t.Errorf("transformer linear2 weights up to %v, want Xavier's bound %v (above Linear's %v)", got, xavierFF2, linearFF2)
		}
	}
	if got := maxAbs(m.Encoder.Layers[0].Linear1.Weight); got > xavier || got <= linear {
		t.Errorf("transformer linear1 weights up to %v, want Xavier's bound %v", got, xavier)
	}
	for _, p := range m.NamedParameters() {
		switch {
		case strings.HasSuffix(p.Name, "in_proj_bias"), strings.HasSuffix(p.Name, "out_proj.bias"), strings.HasSuffix(p.Name, "norm.bias"):
			checkValues(t, p.Name, p.Tensor.Float64s(), make([]float64, p.Tensor.NumElements()), 0)
		case strings.HasSuffix(p.Name, "norm.weight"), strings.HasSuffix(p.Name, "norm1.weight"):
			if got := maxAbs(p.Tensor.AddScalar(-1)); got != 0 {
				t.Errorf("%s is not ones", p.Name)
			}
		}
	}
	l := nn.NewTransformerEncoderLayer(d, 2, o, vram.WithGenerator(vram.NewGenerator(1)))
	defer nn.Release(l)
	if got := maxAbs(l.Linear2.Weight); got > linearFF2 {
		t.Errorf("layer's linear2 weights up to %v, want Linear's bound %v", got, linearFF2)
	}
}

func TestTransformerGradients(t *testing.T) {
	g := vram.NewGenerator(5)
	m := nn.NewTransformer(4, 2, 1, 1, nn.TransformerOptions{DimFeedforward: 3, NoDropout: true, Activation: "gelu", NormFirst: true},
		vram.Float64, vram.WithGenerator(g))
	src := vram.Randn(vram.Shape{3, 2, 4}, vram.Float64, vram.WithGenerator(g), vram.WithGrad())
	tgt := vram.Randn(vram.Shape{2, 2, 4}, vram.Float64, vram.WithGenerator(g))
	r := vram.Randn(vram.Shape{2, 2, 4}, vram.Float64, vram.WithGenerator(g))
	mk := nn.TransformerMasks{TgtCausal: true, SrcKeyPaddingMask: vram.FromSlice([]bool{false, false, true, false, false, false}, vram.Shape{2, 3})}
	loss := func() float64 {
		var v float64
		vram.NoGrad(func() { v = m.ForwardSrcTgt(src, tgt, mk).Mul(r).Sum().Item() })
		return v
	}
	m.ForwardSrcTgt(src, tgt, mk).Mul(r).Sum().Backward()
	const eps = 1e-6
	params := append(m.NamedParameters(), nn.NamedParameter{Name: "src", Tensor: src})
	for _, p := range params {
		grad := p.Tensor.Grad()
		if grad == nil {
			t.Fatalf("%s: no gradient", p.Name)
		}
		gv, vals := grad.Float64s(), p.Tensor.Float64s()
		// The first and the last element of each parameter keep the test
		// fast; every weight matrix and bias is reached.
		for _, i := range []int{0, len(vals) - 1} {
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

// TestTransformerTrains runs a tiny copy task: the loss must fall.
func TestTransformerTrains(t *testing.T) {
	g := vram.NewGenerator(3)
	m := nn.NewTransformer(8, 2, 1, 1, nn.TransformerOptions{DimFeedforward: 16, BatchFirst: true, Dropout: 0.05}, vram.WithGenerator(g))
	defer nn.Release(m)
	opt, err := optim.NewAdam(m.Parameters(), optim.AdamConfig{LR: 1e-2})
	if err != nil {
		t.Fatal(err)
	}
	src := vram.Randn(vram.Shape{4, 5, 8}, vram.WithGenerator(g))
	tgt := vram.Randn(vram.Shape{4, 5, 8}, vram.WithGenerator(g))
	mask := nn.GenerateSquareSubsequentMask(5)
	var first, last float64
	for step := range 40 {
		opt.ZeroGrad()
		out := m.ForwardSrcTgt(src, tgt, nn.TransformerMasks{TgtMask: mask, TgtCausal: true})
		loss := nn.MSELoss(out, src)
		loss.Backward()
		opt.Step()
		if step == 0 {
			first = loss.Item()
		}
		last = loss.Item()
		out.Release()
		loss.Release()
	}
	if !(last < 0.5*first) {
		t.Fatalf("loss went from %v to %v, want it at least halved", first, last)
	}
}

func TestTransformerSaveLoad(t *testing.T) {
	o := nn.TransformerOptions{DimFeedforward: 6}
	a := nn.NewTransformer(4, 2, 2, 1, o, vram.WithGenerator(vram.NewGenerator(1)))
	b := nn.NewTransformer(4, 2, 2, 1, o, vram.WithGenerator(vram.NewGenerator(2)))
	a.Eval()
	b.Eval()
	path := filepath.Join(t.TempDir(), "transformer.safetensors")
	if err := nn.Save(a, path); err != nil {
		t.Fatal(err)
	}
	if err := nn.Load(b, path); err != nil {
		t.Fatal(err)
	}
	src := vram.Randn(vram.Shape{3, 2, 4}, vram.WithGenerator(vram.NewGenerator(3)))
	tgt := vram.Randn(vram.Shape{2, 2, 4}, vram.WithGenerator(vram.NewGenerator(4)))
	checkValues(t, "loaded", b.ForwardSrcTgt(src, tgt, nn.TransformerMasks{}).Float64s(),
		a.ForwardSrcTgt(src, tgt, nn.TransformerMasks{}).Float64s(), 0)
}

func TestTransformerErrors(t *testing.T) {
	l := nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6})
	m := nn.NewTransformer(4, 2, 1, 1, nn.TransformerOptions{DimFeedforward: 6})
	x := vram.Randn(vram.Shape{3, 2, 4})
	tests := []struct {
		name string
		fn   func()
		kind error
	}{
		{"nhead does not divide", func() { nn.NewTransformerEncoderLayer(5, 2, nn.TransformerOptions{}) }, vram.ErrArgument},
		{"zero d_model", func() { nn.NewTransformerDecoderLayer(0, 1, nn.TransformerOptions{}) }, vram.ErrArgument},
		{"negative feed-forward", func() { nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: -1}) }, vram.ErrArgument},
		{"dropout above one", func() { nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{Dropout: 1.5}) }, vram.ErrArgument},
		{"NaN dropout", func() { nn.NewTransformer(4, 2, 1, 1, nn.TransformerOptions{Dropout: math.NaN()}) }, vram.ErrArgument},
		{"unknown activation", func() { nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{Activation: "tanh"}) }, vram.ErrArgument},
		{"negative eps", func() { nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{LayerNormEps: -1}) }, vram.ErrArgument},
		{"no layers", func() { nn.NewTransformer(4, 2, 0, 1, nn.TransformerOptions{}) }, vram.ErrArgument},
		{"nil layer", func() { nn.NewTransformerEncoder(nil, 2, nil) }, vram.ErrArgument},
		{"decoder Forward", func() { m.Decoder.Forward(x) }, vram.ErrArgument},
		{"transformer Forward", func() { m.Forward(x) }, vram.ErrArgument},
		{"nil input", func() { l.Forward(nil) }, vram.ErrArgument},
		{"wrong features", func() { l.Forward(vram.Randn(vram.Shape{3, 2, 5})) }, vram.ErrShape},
		{"4-D input", func() { l.Forward(vram.Randn(vram.Shape{1, 3, 2, 4})) }, vram.ErrShape},
		{"wrong mask shape", func() { l.ForwardMasked(x, nn.EncoderMasks{Mask: vram.Zeros(vram.Shape{2, 3})}) }, vram.ErrShape},
		{"wrong padding shape", func() { l.ForwardMasked(x, nn.EncoderMasks{KeyPaddingMask: vram.Zeros(vram.Shape{3, 2}, vram.Bool)}) }, vram.ErrShape},
		{"integer mask", func() { l.ForwardMasked(x, nn.EncoderMasks{Mask: vram.Zeros(vram.Shape{3, 3}, vram.Int64)}) }, vram.ErrDType},
		{"float64 input", func() { l.Forward(x.Cast(vram.Float64)) }, vram.ErrDType},
		{"batch mismatch", func() { m.ForwardSrcTgt(x, vram.Randn(vram.Shape{3, 1, 4}), nn.TransformerMasks{}) }, vram.ErrShape},
		{"rank mismatch", func() { m.ForwardSrcTgt(x, vram.Randn(vram.Shape{3, 4}), nn.TransformerMasks{}) }, vram.ErrShape},
		{"tgt features", func() { m.ForwardSrcTgt(x, vram.Randn(vram.Shape{3, 2, 3}), nn.TransformerMasks{}) }, vram.ErrShape},
		{"memory mask shape", func() {
			m.ForwardSrcTgt(x, x, nn.TransformerMasks{MemoryMask: vram.Zeros(vram.Shape{3, 4})})
		}, vram.ErrShape},
		{"negative mask size", func() { nn.GenerateSquareSubsequentMask(-1) }, vram.ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			var ve *vram.Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &ve) {
				t.Fatalf("error %v, want one of kind %v", err, tc.kind)
			}
		})
	}
}

// TestTransformerDevices runs the same model on the CPU and on a simulated
// device.
func TestTransformerDevices(t *testing.T) {
	dev := vram.Sim(0)
	if !dev.Available() {
		t.Skip("sim:0 not available")
	}
	m := nn.NewTransformer(4, 2, 1, 2, nn.TransformerOptions{DimFeedforward: 6, BatchFirst: true}, vram.WithGenerator(vram.NewGenerator(1)))
	m.Eval()
	src := vram.Randn(vram.Shape{2, 3, 4}, vram.WithGenerator(vram.NewGenerator(2)))
	tgt := vram.Randn(vram.Shape{2, 2, 4}, vram.WithGenerator(vram.NewGenerator(3)))
	mk := nn.TransformerMasks{TgtCausal: true}
	want := m.ForwardSrcTgt(src, tgt, mk).Float64s()
	m.To(dev)
	defer nn.Release(m)
	s, tg := src.To(dev), tgt.To(dev)
	defer s.Release()
	defer tg.Release()
	mk.TgtMask = nn.GenerateSquareSubsequentMask(2, dev)
	defer mk.TgtMask.Release()
	out := m.ForwardSrcTgt(s, tg, mk)
	defer out.Release()
	if out.Device() != dev {
		t.Fatalf("output on %v, want %v", out.Device(), dev)
	}
	checkValues(t, "sim output", out.To(vram.CPU).Float64s(), want, 1e-6)
}

func TestTransformerAutocast(t *testing.T) {
	m := nn.NewTransformer(8, 2, 1, 1, nn.TransformerOptions{DimFeedforward: 16, NormFirst: true}, vram.WithGenerator(vram.NewGenerator(1)))
	m.Eval()
	src := vram.Randn(vram.Shape{3, 2, 8}, vram.WithGenerator(vram.NewGenerator(2)))
	tgt := vram.Randn(vram.Shape{2, 2, 8}, vram.WithGenerator(vram.NewGenerator(3)))
	mk := nn.TransformerMasks{TgtCausal: true, SrcKeyPaddingMask: vram.FromSlice([]bool{false, false, true, false, false, false}, vram.Shape{2, 3})}
	want := m.ForwardSrcTgt(src, tgt, mk).Float64s()
	vram.Autocast(vram.BFloat16, func() {
		out := m.ForwardSrcTgt(src, tgt, mk)
		checkValues(t, "bf16 output", out.Float64s(), want, 0.1)
		out.Float().Sum().Backward()
	})
	for _, p := range m.NamedParameters() {
		if g := p.Tensor.Grad(); g == nil || g.DType() != vram.Float32 {
			t.Fatalf("%s: gradient %v, want float32", p.Name, g)
		}
	}
}

// TestTransformerCheckpoint recomputes encoder layers with dropout in the
// backward pass, in float64 and under bf16 autocast: the gradients must be
// those of the plain forward.
func TestTransformerCheckpoint(t *testing.T) {
	for _, autocast := range []bool{false, true} {
		grads := func(ckpt bool) []float64 {
			dt := vram.Float64
			if autocast {
				dt = vram.Float32
			}
			e := nn.NewTransformerEncoder(nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6, Dropout: 0.3}, dt,
				vram.WithGenerator(vram.NewGenerator(1))), 2, nil)
			var mod nn.Module = e
			if ckpt {
				mod = nn.Checkpoint(e)
			}
			x := vram.Randn(vram.Shape{3, 2, 4}, dt, vram.WithGenerator(vram.NewGenerator(2)))
			run := func() { mod.Forward(x).Float().Sum().Backward() }
			if autocast {
				vram.Autocast(vram.BFloat16, run)
			} else {
				run()
			}
			return slices.Concat(e.Layers[0].SelfAttn.InProjWeight.Grad().Float64s(), e.Layers[1].Linear1.Weight.Grad().Float64s())
		}
		checkValues(t, "gradients", grads(true), grads(false), 1e-12)
	}
}

func TestTransformerConcurrentForward(t *testing.T) {
	m := nn.NewTransformer(8, 2, 1, 1, nn.TransformerOptions{DimFeedforward: 16, BatchFirst: true}, vram.WithGenerator(vram.NewGenerator(1)))
	m.Eval()
	src := vram.Randn(vram.Shape{2, 4, 8}, vram.WithGenerator(vram.NewGenerator(2)))
	tgt := vram.Randn(vram.Shape{2, 3, 8}, vram.WithGenerator(vram.NewGenerator(3)))
	mk := nn.TransformerMasks{TgtCausal: true}
	want := m.ForwardSrcTgt(src, tgt, mk).Float64s()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	outs := make([][]float64, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = vram.Catch(func() {
				out := m.ForwardSrcTgt(src, tgt, mk)
				outs[i] = out.Float64s()
				out.Release()
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		checkValues(t, "concurrent output", outs[i], want, 0)
	}
	m.Train() // dropout draws from the shared generator concurrently
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = vram.Catch(func() {
				out := m.ForwardSrcTgt(src, tgt, mk)
				s := out.Sum()
				s.Backward()
				s.Release()
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
}

// TestTransformerErrorsReleaseEverything checks that a forward that fails
// part-way (a bad mask of the decoder's second block, a final norm that
// panics after the layers ran) leaves nothing allocated.
func TestTransformerErrorsReleaseEverything(t *testing.T) {
	dev := vram.Sim(1)
	failing := nn.Func(func(*vram.Tensor) *vram.Tensor {
		panic(&vram.Error{Op: "norm", Kind: vram.ErrArgument, Detail: "failed on purpose"})
	})
	enc := nn.NewTransformerEncoder(nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6}, dev), 2, failing)
	defer nn.Release(enc)
	m := nn.NewTransformer(4, 2, 2, 2, nn.TransformerOptions{DimFeedforward: 6}, dev)
	defer nn.Release(m)
	x := vram.Randn(vram.Shape{3, 2, 4}, dev)
	defer x.Release()
	badMemoryMask := vram.Zeros(vram.Shape{3, 4}, dev)
	defer badMemoryMask.Release()
	badPadding := vram.Zeros(vram.Shape{2, 4}, vram.Bool, dev)
	defer badPadding.Release()
	tests := []struct {
		name    string
		fn      func()
		message string
	}{
		{"final norm", func() { enc.Forward(x) }, "failed on purpose"},
		{"memory mask", func() { m.ForwardSrcTgt(x, x, nn.TransformerMasks{MemoryMask: badMemoryMask}) }, "attention to the memory (memory masks)"},
		{"tgt padding", func() { m.ForwardSrcTgt(x, x, nn.TransformerMasks{TgtKeyPaddingMask: badPadding}) }, "self-attention (tgt masks)"},
	}
	for _, grad := range []bool{false, true} {
		for _, tc := range tests {
			memtest.Settle(dev)
			base := vram.MemoryAllocated(dev)
			var err error
			run := func() { err = vram.Catch(tc.fn) }
			if grad {
				x.SetRequiresGrad(true)
				run()
				x.SetRequiresGrad(false)
			} else {
				vram.NoGrad(run)
			}
			if err == nil || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.message)
			}
			if got := vram.MemoryAllocated(dev); got != base {
				t.Errorf("%s (grad %v): %d bytes allocated after the error, want %d", tc.name, grad, got, base)
			}
		}
	}
}

// TestTransformerInferenceMemory checks that a deeper encoder needs no
// more memory beyond its parameters than a shallow one when nothing is
// recorded: each layer's output is released once the next has read it.
func TestTransformerInferenceMemory(t *testing.T) {
	dev := vram.Sim(1)
	peak := func(layers int) int64 {
		e := nn.NewTransformerEncoder(nn.NewTransformerEncoderLayer(16, 2, nn.TransformerOptions{DimFeedforward: 64}, dev), layers, nil)
		defer nn.Release(e)
		x := vram.Randn(vram.Shape{32, 4, 16}, dev)
		defer x.Release()
		memtest.Settle(dev)
		base := vram.MemoryAllocated(dev)
		vram.ResetPeakMemoryStats(dev)
		vram.NoGrad(func() { e.ForwardMasked(x, nn.EncoderMasks{Causal: true}).Release() })
		if got := vram.MemoryAllocated(dev); got != base {
			t.Errorf("%d layers: %d bytes allocated after the forward, want %d", layers, got, base)
		}
		return vram.MaxMemoryAllocated(dev) - base
	}
	// From the second layer on, one layer's input is a layer's output:
	// the peak must not grow with depth after that.
	if two, five := peak(2), peak(5); five > two {
		t.Errorf("peak above the parameters: %d bytes with 5 layers, %d with 2", five, two)
	}
}

// TestTransformerCheckpointWithMasks checkpoints a masked encoder with
// dropout through a closure, as the package documentation suggests: the
// gradients must be those of the plain forward.
func TestTransformerCheckpointWithMasks(t *testing.T) {
	mk := nn.EncoderMasks{KeyPaddingMask: vram.FromSlice([]bool{false, false, true, false, false, false}, vram.Shape{2, 3}), Causal: true}
	grads := func(ckpt bool) []float64 {
		e := nn.NewTransformerEncoder(nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6, Dropout: 0.2}, vram.Float64,
			vram.WithGenerator(vram.NewGenerator(1))), 2, nil)
		x := vram.Randn(vram.Shape{3, 2, 4}, vram.Float64, vram.WithGenerator(vram.NewGenerator(2)), vram.WithGrad())
		if ckpt {
			fn := func(x *vram.Tensor) *vram.Tensor { return e.ForwardMasked(x, mk) }
			vram.Checkpoint(fn, x, e.Parameters()...).Sum().Backward()
		} else {
			e.ForwardMasked(x, mk).Sum().Backward()
		}
		out := x.Grad().Float64s()
		for _, p := range e.Parameters() {
			out = append(out, p.Grad().Float64s()...)
		}
		return out
	}
	checkValues(t, "gradients", grads(true), grads(false), 1e-12)
}

// TestTransformerNilNorm checks that a nil *LayerNorm passed as the final
// norm means none, rather than a module that crashes in Forward.
func TestTransformerNilNorm(t *testing.T) {
	var norm *nn.LayerNorm
	e := nn.NewTransformerEncoder(nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6}), 1, norm)
	defer nn.Release(e)
	d := nn.NewTransformerDecoder(nn.NewTransformerDecoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6}), 1, norm)
	defer nn.Release(d)
	x := vram.Randn(vram.Shape{3, 2, 4})
	if err := vram.Catch(func() { d.ForwardMemory(x, e.Forward(x), nn.DecoderMasks{}) }); err != nil {
		t.Fatal(err)
	}
	for _, m := range []nn.Module{e, d} {
		if names := paramNames(m); slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "norm") }) {
			t.Errorf("%T has a norm: %v", m, names)
		}
	}
}

func TestTransformerReplicate(t *testing.T) {
	if !vram.Sim(0).Available() {
		t.Skip("sim:0 not available")
	}
	m := nn.NewTransformer(4, 2, 2, 1, nn.TransformerOptions{DimFeedforward: 6, BatchFirst: true}, vram.WithGenerator(vram.NewGenerator(1)))
	m.Eval()
	r, err := nn.Replicate(m, vram.Sim(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nn.Release(r)
	rm := r.(*nn.Transformer)
	if got := rm.Encoder.Layers[1].Linear1.Weight.Device(); got != vram.Sim(0) {
		t.Fatalf("replica's second encoder layer on %v", got)
	}
	if !slices.Equal(paramNames(r), paramNames(m)) {
		t.Fatalf("replica's names differ")
	}
	src := vram.Randn(vram.Shape{2, 3, 4}, vram.WithGenerator(vram.NewGenerator(2)))
	tgt := vram.Randn(vram.Shape{2, 2, 4}, vram.WithGenerator(vram.NewGenerator(3)))
	want := m.ForwardSrcTgt(src, tgt, nn.TransformerMasks{TgtCausal: true}).Float64s()
	got := rm.ForwardSrcTgt(src.To(vram.Sim(0)), tgt.To(vram.Sim(0)), nn.TransformerMasks{TgtCausal: true}).To(vram.CPU).Float64s()
	checkValues(t, "replica output", got, want, 1e-6)
}

// TestTransformerFieldsChanged checks that a layer follows its exported
// Activation field when it is changed after construction, and refuses a
// BatchFirst its attention does not follow rather than misread the input.
func TestTransformerFieldsChanged(t *testing.T) {
	o := nn.TransformerOptions{DimFeedforward: 6}
	relu := nn.NewTransformerEncoderLayer(4, 2, o, vram.WithGenerator(vram.NewGenerator(1)))
	o.Activation = "gelu"
	gelu := nn.NewTransformerEncoderLayer(4, 2, o, vram.WithGenerator(vram.NewGenerator(1)))
	relu.Eval()
	gelu.Eval()
	x := vram.Randn(vram.Shape{3, 2, 4}, vram.WithGenerator(vram.NewGenerator(2)))
	want := gelu.Forward(x).Float64s()
	relu.Activation = "gelu"
	checkValues(t, "output after Activation changed to gelu", relu.Forward(x).Float64s(), want, 0)

	dec := nn.NewTransformerDecoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6})
	tests := []struct {
		name   string
		change func()
		run    func()
	}{
		{"unknown activation", func() { relu.Activation = "tanh" }, func() { relu.Forward(x) }},
		{"encoder BatchFirst", func() { relu.Activation, relu.BatchFirst = "relu", true }, func() { relu.Forward(x) }},
		{"decoder BatchFirst", func() { dec.BatchFirst = true; dec.SelfAttn.BatchFirst = true },
			func() { dec.ForwardMemory(x, x, nn.DecoderMasks{}) }},
	}
	for _, tc := range tests {
		tc.change()
		if err := vram.Catch(tc.run); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("%s: error %v, want vram.ErrArgument", tc.name, err)
		}
	}
}
