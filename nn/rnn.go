package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/footprint"
)

// RecurrentOptions are the settings of [NewRNN], [NewLSTM] and [NewGRU]
// besides the sizes. The zero value is PyTorch's default: one layer,
// with biases, sequence-first inputs, no dropout, one direction, tanh.
type RecurrentOptions struct {
	// NumLayers is the number of stacked layers (num_layers); 0 means 1.
	NumLayers int
	// NoBias leaves out the biases (bias=False).
	NoBias bool
	// BatchFirst takes and returns [N, L, H] rather than [L, N, H]
	// (batch_first=True). The hidden states keep their [layers, N, H]
	// layout either way, as in PyTorch.
	BatchFirst bool
	// Dropout is the probability of dropping an element of each layer's
	// output but the last, in training mode, in [0, 1] (dropout).
	Dropout float64
	// Bidirectional runs each layer over the sequence in both directions
	// and joins the two outputs (bidirectional=True).
	Bidirectional bool
	// Nonlinearity is "tanh" (also "") or "relu", for [RNN] only
	// (nonlinearity); the others panic when it is set.
	Nonlinearity string
	// ProjSize, for [LSTM] only (proj_size), projects each hidden state
	// to this many features, fewer than the hidden size, with a weight
	// weight_hr_lK: h_t = (o·tanh(c_t)) W_hrᵀ. The hidden states and
	// the output then have ProjSize features, the cell states keep the
	// hidden size. 0 means no projection; the others panic when it is
	// set.
	ProjSize int
}

// CellOptions are the settings of [NewRNNCell], [NewLSTMCell] and
// [NewGRUCell]. The zero value is PyTorch's default: with biases, tanh.
type CellOptions struct {
	// NoBias leaves out bias_ih and bias_hh (bias=False).
	NoBias bool
	// Nonlinearity is "tanh" (also "") or "relu", for [RNNCell] only.
	Nonlinearity string
}

// RecurrentWeights are the parameters of one layer of a recurrent
// network in one direction, with PyTorch's shapes for G gates of hidden
// size H (G is 1 for [RNN], 4 for [LSTM] in the order input, forget,
// cell, output, 3 for [GRU] in the order reset, update, new), and R the
// size of the hidden state: H, or P for an [LSTM] with projections of
// size P.
type RecurrentWeights struct {
	// WeightIH is [G·H, input size of the layer] (weight_ih_lK).
	WeightIH *vram.Tensor
	// WeightHH is [G·H, R] (weight_hh_lK).
	WeightHH *vram.Tensor
	// BiasIH and BiasHH are [G·H] (bias_ih_lK, bias_hh_lK), or nil
	// without biases.
	BiasIH, BiasHH *vram.Tensor
	// WeightHR is [P, H] (weight_hr_lK) for an LSTM with projections
	// of size P, and nil otherwise.
	WeightHR *vram.Tensor
}

// cellKind is the recurrence a layer or cell computes.
type cellKind int

const (
	kindTanh cellKind = iota // h' = tanh(W_ih x + b_ih + W_hh h + b_hh)
	kindReLU                 // h' = relu(W_ih x + b_ih + W_hh h + b_hh)
	kindLSTM
	kindGRU
)

// gates returns the number of gates G stacked in the weights.
func (k cellKind) gates() int {
	switch k {
	case kindLSTM:
		return 4
	case kindGRU:
		return 3
	}
	return 1
}

// rnnKind returns the kind of an RNN for the nonlinearity s, panicking
// with an ErrArgument for an unknown one.
func rnnKind(op, s string) cellKind {
	switch s {
	case "", "tanh":
		return kindTanh
	case "relu":
		return kindReLU
	}
	panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("unknown nonlinearity %q; use \"tanh\" or \"relu\"", s)})
}

// recurrent is what RNN, LSTM and GRU share: the settings, the
// parameters and the forward pass.
type recurrent struct {
	kind cellKind
	RecurrentLayer
}

// RecurrentLayer holds what [RNN], [LSTM] and [GRU] share: their sizes,
// settings and parameters, as PyTorch's RNNBase does. Forward checks the
// settings again, so fields changed after construction are refused there
// rather than misread.
type RecurrentLayer struct {
	// InputSize, HiddenSize and NumLayers are the layer's sizes.
	InputSize, HiddenSize, NumLayers int
	// BatchFirst says whether inputs and outputs are [N, L, H].
	BatchFirst bool
	// Bidirectional says whether each layer runs in both directions.
	Bidirectional bool
	// Dropout is the probability of dropping an element between layers
	// in training mode.
	Dropout float64
	// ProjSize is the size of an [LSTM]'s projected hidden states, 0
	// without projections (and for [RNN] and [GRU]).
	ProjSize int
	// Weights holds the parameters of layer l in direction d at index
	// l·D+d, D being 2 for a bidirectional network and 1 otherwise.
	// Their fields are the parameters ([Base.RegisterParameterField]):
	// assigning one replaces the parameter, while a new slice, or one
	// grown past its capacity, is not seen.
	Weights  []RecurrentWeights
	dropOpts []vram.Option // for the dropout masks
}

// newRecurrent checks the settings and makes the parameters, in
// PyTorch's order and with its initialisation, uniform in
// [-1/sqrt(hidden), 1/sqrt(hidden)); the layer registers them once they
// are in it ([RecurrentLayer.register]).
func newRecurrent(op string, kind cellKind, in, hidden int, o RecurrentOptions, opts []vram.Option) recurrent {
	layers := o.NumLayers
	if layers == 0 {
		layers = 1
	}
	switch {
	case in < 1 || hidden < 1 || layers < 1:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("sizes must be positive, got input_size %d, hidden_size %d, num_layers %d", in, hidden, layers)})
	case !(o.Dropout >= 0 && o.Dropout <= 1):
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("dropout probability must be in [0, 1], got %v", o.Dropout)})
	case kind != kindTanh && kind != kindReLU && o.Nonlinearity != "":
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("nonlinearity %q applies to RNN only", o.Nonlinearity)})
	}
	checkProjSize(op, kind, o.ProjSize, hidden)
	if o.Dropout > 0 && layers == 1 {
		vram.WarnOnce(fmt.Sprintf("%s: dropout applies after every recurrent layer but the last, so a dropout of %v expects num_layers greater than 1, got num_layers 1",
			op, o.Dropout))
	}
	r := recurrent{kind, RecurrentLayer{InputSize: in, HiddenSize: hidden, NumLayers: layers,
		BatchFirst: o.BatchFirst, Bidirectional: o.Bidirectional, Dropout: o.Dropout, ProjSize: o.ProjSize,
		dropOpts: slices.Clone(opts)}}
	checkParamCount(op, kind, in, hidden, o.ProjSize, layers, r.dirs(), !o.NoBias)
	checkRecurrentMemory(op, kind, in, hidden, o.ProjSize, layers, r.dirs(), !o.NoBias, opts)
	// Parameters made before a failure, out of memory for one, are
	// released rather than left to the caller, who gets no layer, and
	// the error names the layer.
	defer asOp(op)
	made := false
	defer func() {
		if !made {
			for _, w := range r.Weights {
				w.release()
			}
		}
	}()
	bound := 1 / math.Sqrt(float64(hidden))
	g, stateSize := kind.gates()*hidden, r.realHidden()
	for l := range layers {
		for range r.dirs() {
			layerIn := in
			if l > 0 {
				layerIn = stateSize * r.dirs()
			}
			r.Weights = append(r.Weights, RecurrentWeights{})
			w := &r.Weights[len(r.Weights)-1]
			w.WeightIH = uniformParam(vram.Shape{g, layerIn}, bound, opts)
			w.WeightHH = uniformParam(vram.Shape{g, stateSize}, bound, opts)
			if !o.NoBias {
				w.BiasIH = uniformParam(vram.Shape{g}, bound, opts)
				w.BiasHH = uniformParam(vram.Shape{g}, bound, opts)
			}
			if o.ProjSize > 0 {
				w.WeightHR = uniformParam(vram.Shape{o.ProjSize, hidden}, bound, opts)
			}
		}
	}
	made = true
	return r
}

// checkProjSize panics with an ErrArgument naming op unless proj is a
// valid projection size for a layer of the given kind and hidden size,
// as PyTorch checks proj_size.
func checkProjSize(op string, kind cellKind, proj, hidden int) {
	switch {
	case proj < 0:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("proj_size must be positive, or 0 for no projections, got %d", proj)})
	case proj > 0 && kind != kindLSTM:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("proj_size applies to LSTM only, got %d", proj)})
	case proj >= hidden && proj > 0:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("proj_size must be smaller than hidden_size, got proj_size %d and hidden_size %d", proj, hidden)})
	}
}

// checkParamCount panics with an ErrArgument naming op when layers
// layers of the given kind in dirs directions, from in to hidden
// features projected to proj (0 for none), have more parameter elements
// than an int counts, so that their shapes would wrap around rather than
// fail to allocate.
func checkParamCount(op string, kind cellKind, in, hidden, proj, layers, dirs int, bias bool) {
	// float64 cannot overflow here; it is exact well past the sizes
	// that allocate.
	g, stateSize := float64(kind.gates())*float64(hidden), float64(hidden)
	if proj > 0 {
		stateSize = float64(proj)
	}
	perDir := g * (float64(in) + stateSize)
	if layers > 1 {
		perDir += float64(layers-1) * g * (float64(dirs)*stateSize + stateSize)
	}
	if bias {
		perDir += 2 * g * float64(layers)
	}
	if proj > 0 {
		perDir += float64(layers) * float64(proj) * float64(hidden)
	}
	if perDir*float64(dirs) >= math.MaxInt {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("input_size %d, hidden_size %d and num_layers %d give more parameters than an int can count", in, hidden, layers)})
	}
}

// checkRecurrentMemory panics with an *vram.Error of kind
// vram.ErrOutOfMemory naming op when the parameters of layers layers of
// the given kind in dirs directions, from in to hidden features projected
// to proj (0 for none), on the device and dtype of opts, cannot fit in
// memory ([footprint.Footprint.Check]), before any is made: a count of
// layers wrong by orders of magnitude would otherwise allocate layer
// after layer until the host ran out of memory. The sizes have passed
// [checkParamCount], so that each shape's elements fit in an int.
func checkRecurrentMemory(op string, kind cellKind, in, hidden, proj, layers, dirs int, bias bool, opts []vram.Option) {
	f, dt := footprint.Of(opts)
	g, stateSize := kind.gates()*hidden, hidden
	if proj > 0 {
		stateSize = proj
	}
	all := footprint.Mul(int64(layers), int64(dirs)) // one set of parameters each
	f.Add(int64(dirs), dt, g, in)                    // weight_ih of layer 0
	f.Add(all-int64(dirs), dt, g, stateSize*dirs)    // weight_ih of the layers above
	f.Add(all, dt, g, stateSize)                     // weight_hh
	if bias {
		f.Add(footprint.Mul(2, all), dt, g)
	}
	if proj > 0 {
		f.Add(all, dt, proj, hidden)
	}
	what := fmt.Sprintf("num_layers %d layers of input_size %d, hidden_size %d", layers, in, hidden)
	if proj > 0 {
		what += fmt.Sprintf(", proj_size %d", proj)
	}
	if dirs == 2 {
		what += ", in both directions,"
	}
	f.Check(op, what)
}

// release releases w's parameters that are not nil.
func (w RecurrentWeights) release() {
	for _, t := range []*vram.Tensor{w.WeightIH, w.WeightHH, w.BiasIH, w.BiasHH, w.WeightHR} {
		if t != nil {
			t.Release()
		}
	}
}

// check panics unless w holds the parameters of a layer of g·hidden
// gate rows from in features, with both biases or neither, and a
// projection to proj features or none for proj 0, naming them with
// suffix as [RecurrentWeights.register] does.
func (w RecurrentWeights) check(op, suffix string, g, in, hidden, proj int) {
	stateSize := hidden
	if proj > 0 {
		stateSize = proj
	}
	if proj == 0 && w.WeightHR != nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("weight_hr%s is set without a proj_size; set ProjSize to its rows or the weight to nil", suffix)})
	}
	for _, p := range []struct {
		name string
		t    *vram.Tensor
		want vram.Shape
	}{
		{"weight_ih", w.WeightIH, vram.Shape{g * hidden, in}},
		{"weight_hh", w.WeightHH, vram.Shape{g * hidden, stateSize}},
		{"bias_ih", w.BiasIH, vram.Shape{g * hidden}},
		{"bias_hh", w.BiasHH, vram.Shape{g * hidden}},
		{"weight_hr", w.WeightHR, vram.Shape{proj, hidden}},
	} {
		switch {
		case p.name == "weight_hr" && proj == 0:
		case p.t == nil && (p.name == "weight_ih" || p.name == "weight_hh" || p.name == "weight_hr"):
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("%s%s is nil", p.name, suffix)})
		case p.t == nil && (w.BiasIH != nil || w.BiasHH != nil):
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
				Detail: fmt.Sprintf("%s%s is nil while the other bias is not; set both biases or neither", p.name, suffix)})
		case p.t != nil && !slices.Equal(p.t.Shape(), p.want):
			sizes := fmt.Sprintf("input_size %d and hidden_size %d", in, hidden)
			if proj > 0 {
				sizes = fmt.Sprintf("input_size %d, hidden_size %d and proj_size %d", in, hidden, proj)
			}
			panic(&vram.Error{Op: op, Kind: vram.ErrShape,
				Detail: fmt.Sprintf("%s%s must be %v for %s, got %v", p.name, suffix, p.want, sizes, p.t.Shape())})
		}
	}
}

// register registers the fields of r.Weights on b, the Base of the layer
// that holds r, as its parameters, in PyTorch's order and with its names
// (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, weight_ih_l0_reverse,
// ...).
func (r *RecurrentLayer) register(b *Base) {
	dirs := 1
	if r.Bidirectional {
		dirs = 2
	}
	for i := range r.Weights {
		suffix := fmt.Sprintf("_l%d", i/dirs)
		if i%dirs == 1 {
			suffix += "_reverse"
		}
		r.Weights[i].register(b, suffix)
	}
}

// register registers w's fields on b as parameters named with suffix.
func (w *RecurrentWeights) register(b *Base, suffix string) {
	b.RegisterParameterField("weight_ih"+suffix, &w.WeightIH)
	b.RegisterParameterField("weight_hh"+suffix, &w.WeightHH)
	if w.BiasIH != nil {
		b.RegisterParameterField("bias_ih"+suffix, &w.BiasIH)
		b.RegisterParameterField("bias_hh"+suffix, &w.BiasHH)
	}
	if w.WeightHR != nil {
		b.RegisterParameterField("weight_hr"+suffix, &w.WeightHR)
	}
}

// dirs returns the number of directions, 1 or 2.
func (r *recurrent) dirs() int {
	if r.Bidirectional {
		return 2
	}
	return 1
}

// realHidden returns the size of the hidden states: ProjSize, or
// HiddenSize without projections.
func (r *RecurrentLayer) realHidden() int {
	if r.ProjSize > 0 {
		return r.ProjSize
	}
	return r.HiddenSize
}

// check panics unless r's settings and parameters agree: the sizes and
// the dropout probability valid, and a set of weights of the shapes the
// sizes give for each layer and direction.
func (r *recurrent) check(op string) {
	switch {
	case r.InputSize < 1 || r.HiddenSize < 1 || r.NumLayers < 1:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("sizes must be positive, got input_size %d, hidden_size %d, num_layers %d", r.InputSize, r.HiddenSize, r.NumLayers)})
	case !(r.Dropout >= 0 && r.Dropout <= 1):
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("dropout probability must be in [0, 1], got %v", r.Dropout)})
	}
	checkProjSize(op, r.kind, r.ProjSize, r.HiddenSize)
	if len(r.Weights) != r.NumLayers*r.dirs() {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("%d sets of weights for %d layers in %d directions", len(r.Weights), r.NumLayers, r.dirs())})
	}
	for i, w := range r.Weights {
		l, in, suffix := i/r.dirs(), r.InputSize, fmt.Sprintf("_l%d", i/r.dirs())
		if l > 0 {
			in = r.realHidden() * r.dirs()
		}
		if i%r.dirs() == 1 {
			suffix += "_reverse"
		}
		w.check(op, suffix, r.kind.gates(), in, r.HiddenSize, r.ProjSize)
	}
}

// forward runs the network over x with initial states h0 and, for an
// LSTM, c0 (each nil for zeros), and returns the output and the final
// states (cn nil but for an LSTM). training enables dropout.
func (r *recurrent) forward(op string, training bool, x, h0, c0 *vram.Tensor) (out, hn, cn *vram.Tensor) {
	defer asOp(op) // the products' errors name the layer
	notNil(op, x)
	var ts temps
	defer ts.release()
	tmp := ts.add
	bad := func(format string, args ...any) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf(format, args...)})
	}
	r.check(op)
	sameDevice(op, x, r.Weights[0].WeightIH)
	checkInputDType(op, x, r.Weights[0].WeightIH)
	batched := x.Dim() == 3
	if x.Dim() != 2 && !batched {
		bad("input must be 3-D (batched) or 2-D (unbatched), got shape %v", x.Shape())
	}
	if x.Size(-1) != r.InputSize {
		bad("input must have %d features (input_size), got shape %v", r.InputSize, x.Shape())
	}
	// xs is [L, N, input] from here on.
	xs := x
	switch {
	case !batched:
		xs = tmp(x.Unsqueeze(1))
	case r.BatchFirst:
		xs = tmp(x.Transpose(0, 1))
	}
	seq, n, hs, ld := xs.Size(0), xs.Size(1), r.HiddenSize, r.NumLayers*r.dirs()
	if seq == 0 {
		bad("input has a sequence length of 0, got shape %v", x.Shape())
	}
	stateDType := recurrentDType(x)
	// states checks h0 or c0 and returns it as [layers·dirs, N, size],
	// or zeros of x's dtype and device when it is nil; sizeName names
	// size as PyTorch does.
	states := func(name string, s *vram.Tensor, size int, sizeName string) *vram.Tensor {
		if s == nil {
			return tmp(vram.Zeros(vram.Shape{ld, n, size}, x.Device(), stateDType))
		}
		want := vram.Shape{ld, n, size}
		if !batched {
			want = vram.Shape{ld, size}
		}
		if !slices.Equal(s.Shape(), want) {
			bad("%s must be %v for input %v (num_layers·directions, batch, %s), got %v", name, want, x.Shape(), sizeName, s.Shape())
		}
		if c, made := stateIn(op, name, x, s, stateDType); made {
			s = tmp(c)
		}
		if !batched {
			return tmp(s.Unsqueeze(1))
		}
		return s
	}
	var hAll *vram.Tensor
	if r.ProjSize > 0 {
		hAll = states("h0", h0, r.ProjSize, "proj_size")
	} else {
		hAll = states("h0", h0, hs, "hidden_size")
	}
	var cAll *vram.Tensor
	if r.kind == kindLSTM {
		cAll = states("c0", c0, hs, "hidden_size")
	}
	finalH := make([]*vram.Tensor, 0, ld)
	finalC := make([]*vram.Tensor, 0, ld)
	layerIn := xs
	for l := range r.NumLayers {
		if l > 0 && training && r.Dropout > 0 {
			drop := &Dropout{P: r.Dropout, opts: r.dropOpts}
			layerIn = tmp(drop.Forward(layerIn))
		}
		outs := make([]*vram.Tensor, 0, 2)
		for d := range r.dirs() {
			w := r.Weights[l*r.dirs()+d]
			gi := tmp(vram.Linear(layerIn, w.WeightIH, w.BiasIH)) // [L, N, G·H]
			h := tmp(hAll.Select(0, l*r.dirs()+d))
			var c *vram.Tensor
			if cAll != nil {
				c = tmp(cAll.Select(0, l*r.dirs()+d))
			}
			// A step's intermediate results are released after it, and
			// a cell state after the next step, so that without autograd
			// the memory a layer holds does not grow with the number of
			// steps beyond its output.
			var stepTemps []*vram.Tensor
			stmp := func(t *vram.Tensor) *vram.Tensor {
				stepTemps = append(stepTemps, t)
				return t
			}
			hsAt := make([]*vram.Tensor, seq)
			for s := range seq {
				t := s
				if d == 1 {
					t = seq - 1 - s
				}
				h, c = cellStep(r.kind, stmp(gi.Select(0, t)), h, c, w, hs, stmp)
				for _, st := range stepTemps {
					st.Release()
				}
				stepTemps = stepTemps[:0]
				tmp(h)
				if c != nil {
					stmp(c)
				}
				hsAt[t] = h
			}
			ts = append(ts, stepTemps...)
			finalH = append(finalH, h)
			if c != nil {
				finalC = append(finalC, c)
			}
			outs = append(outs, tmp(vram.Stack(hsAt, 0)))
		}
		if len(outs) == 1 {
			layerIn = outs[0]
		} else {
			layerIn = tmp(vram.Cat(outs, 2))
		}
	}
	out = layerIn.Contiguous()
	hn = vram.Stack(finalH, 0)
	if r.kind == kindLSTM {
		cn = vram.Stack(finalC, 0)
	}
	switch {
	case !batched:
		tmp(out)
		out = out.Squeeze(1)
		tmp(hn)
		hn = hn.Squeeze(1)
		if cn != nil {
			tmp(cn)
			cn = cn.Squeeze(1)
		}
	case r.BatchFirst:
		tmp(out)
		out = out.Transpose(0, 1)
	}
	return out, hn, cn
}

// recurrentDType returns the dtype a recurrence over x runs in: x's, or
// inside an [vram.Autocast] region, where the products come out in the
// region's dtype, that dtype when the region casts x's (float32, float16
// or bfloat16), so that the whole recurrence, states included, runs in
// it as in PyTorch.
func recurrentDType(x *vram.Tensor) vram.DType {
	if dt, ok := vram.AutocastDType(); ok && autocastable(x.DType()) {
		return dt
	}
	return x.DType()
}

// autocastable reports whether an autocast region casts tensors of dtype
// dt to its own.
func autocastable(dt vram.DType) bool {
	return dt == vram.Float32 || dt == vram.Float16 || dt == vram.BFloat16
}

// checkInputDType panics with an ErrDType naming op unless the input x
// can run through parameters like p: of p's dtype, or inside an autocast
// region, of a dtype that the region casts as it casts p's.
func checkInputDType(op string, x, p *vram.Tensor) {
	if _, ok := vram.AutocastDType(); ok && autocastable(x.DType()) && autocastable(p.DType()) {
		return
	}
	if x.DType() != p.DType() {
		panic(&vram.Error{Op: op, Kind: vram.ErrDType,
			Detail: fmt.Sprintf("the input is %s but the parameters are %s; Cast the input to %s, or the parameters with ConvertDType",
				x.DType(), p.DType(), p.DType())})
	}
}

// stateIn checks the device and dtype of the state s (named name) given
// with the input x for a recurrence that runs in dt, and returns s in dt
// and whether that is a copy, which the caller releases. s must be on
// x's device. Outside an autocast region s must be of x's dtype; inside
// one that casts x, of any dtype the region casts, as PyTorch casts every
// argument of its recurrent ops.
func stateIn(op, name string, x, s *vram.Tensor, dt vram.DType) (*vram.Tensor, bool) {
	if s.Device() != x.Device() {
		panic(&vram.Error{Op: op, Kind: vram.ErrDevice,
			Detail: fmt.Sprintf("%s is on %s but the input is on %s; move it to the input's device", name, s.Device(), x.Device())})
	}
	if s.DType() == dt {
		return s, false
	}
	if _, in := vram.AutocastDType(); !in || !autocastable(x.DType()) || !autocastable(s.DType()) {
		panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("%s is %s but the input is %s; Cast one of them", name, s.DType(), x.DType())})
	}
	return s.Cast(dt), true
}

// cellStep computes one time step of a cell of the given kind with the
// weights w from gi = x W_ihᵀ + b_ih, [N, G·H], the hidden state h, [N,
// H] or [N, P] for an LSTM with projections, and, for an LSTM, the cell
// state c, [N, H]. It returns the new states, which the caller owns;
// intermediate results go to tmp.
func cellStep(kind cellKind, gi, h, c *vram.Tensor, w RecurrentWeights, hs int, tmp func(*vram.Tensor) *vram.Tensor) (hn, cn *vram.Tensor) {
	gh := tmp(vram.Linear(h, w.WeightHH, w.BiasHH))
	switch kind {
	case kindTanh:
		return tmp(gi.Add(gh)).Tanh(), nil
	case kindReLU:
		return tmp(gi.Add(gh)).Relu(), nil
	case kindLSTM:
		gates := tmp(gi.Add(gh))
		part := func(k int) *vram.Tensor { return tmp(gates.Narrow(1, k*hs, hs)) }
		i := tmp(part(0).Sigmoid())
		f := tmp(part(1).Sigmoid())
		g := tmp(part(2).Tanh())
		o := tmp(part(3).Sigmoid())
		cn = tmp(f.Mul(c)).Add(tmp(i.Mul(g)))
		hn = o.Mul(tmp(cn.Tanh()))
		if w.WeightHR != nil {
			hn = vram.Linear(tmp(hn), w.WeightHR, nil)
		}
		return hn, cn
	}
	// GRU: r and z from both inputs, n = tanh(W_in x + b_in + r·(W_hn h +
	// b_hn)), h' = (1-z)·n + z·h = n + z·(h-n).
	ix := func(k int) *vram.Tensor { return tmp(gi.Narrow(1, k*hs, hs)) }
	hx := func(k int) *vram.Tensor { return tmp(gh.Narrow(1, k*hs, hs)) }
	r := tmp(tmp(ix(0).Add(hx(0))).Sigmoid())
	z := tmp(tmp(ix(1).Add(hx(1))).Sigmoid())
	n := tmp(tmp(ix(2).Add(tmp(r.Mul(hx(2))))).Tanh())
	return n.Add(tmp(z.Mul(tmp(h.Sub(n))))), nil
}

// RNN is torch.nn.RNN: a stack of NumLayers Elman layers, each computing
// h_t = tanh(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh) (or relu) over the
// sequence, in one or both directions. Its parameters carry PyTorch's
// names and shapes (weight_ih_l0 [H, input], weight_hh_l0 [H, H],
// bias_ih_l0, bias_hh_l0 [H], ..., with a "_reverse" suffix for the
// backward direction), so PyTorch's weights load with [Load].
//
// Inputs are [L, N, input] (sequence first, PyTorch's default), [N, L,
// input] with BatchFirst, or [L, input] unbatched. Packed sequences are
// not supported: pad the sequences instead.
type RNN struct {
	Base
	RecurrentLayer
	// Nonlinearity is "tanh" or "relu".
	Nonlinearity string
}

// NewRNN returns an RNN from inputSize to hiddenSize features with the
// settings o, its parameters uniform in [-1/sqrt(hiddenSize),
// 1/sqrt(hiddenSize)) as in PyTorch. opts (device, dtype, generator) go
// to vram's factory functions; a [vram.WithGenerator] generator also
// draws the dropout masks. It panics with an *vram.Error of kind
// vram.ErrArgument for sizes that are not positive or give more
// parameters than an int counts, a dropout probability outside [0, 1],
// an unknown nonlinearity or a ProjSize (which only an [LSTM] takes),
// releasing any parameter it made, and with one of kind
// vram.ErrOutOfMemory, before it allocates anything, when the parameters
// of all the layers need more host memory than the CPU device's limit or
// more memory than their device has (a NumLayers wrong by orders of
// magnitude), naming num_layers and the bytes. A dropout
// probability with one layer, where it has nothing to act on, gives a
// warning ([vram.WarnOnce]) as in PyTorch.
func NewRNN(inputSize, hiddenSize int, o RecurrentOptions, opts ...vram.Option) *RNN {
	const op = "rnn"
	m := &RNN{}
	r := newRecurrent(op, rnnKind(op, o.Nonlinearity), inputSize, hiddenSize, o, opts)
	m.RecurrentLayer = r.RecurrentLayer
	m.RecurrentLayer.register(&m.Base)
	m.Nonlinearity = "tanh"
	if r.kind == kindReLU {
		m.Nonlinearity = "relu"
	}
	return m
}

// Forward returns the output of the last layer for every time step, [L,
// N, D·H] ([N, L, D·H] with BatchFirst, [L, D·H] unbatched), starting
// from zero hidden states; see [RNN.ForwardState].
func (m *RNN) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(m == nil, "rnn", "RNN")
	out, hn := m.ForwardState(x, nil)
	hn.Release()
	return out
}

// ForwardState returns the output as Forward does and the final hidden
// state of every layer and direction, hn [NumLayers·D, N, H] ([NumLayers·D,
// H] unbatched), starting from h0 of hn's shape, or zeros when h0 is nil.
// The caller owns and releases both. Dropout applies in training mode
// only. Inside a [vram.Autocast] region the whole recurrence runs in the
// region's dtype, as in PyTorch: x and h0 may then each be float32,
// float16 or bfloat16, and the results are in the region's dtype.
//
// It panics with an *vram.Error of kind vram.ErrShape for an input that is
// not 2-D or 3-D, has other than InputSize features or no time steps, or
// an h0 of the wrong shape, of kind vram.ErrDevice for an h0 on another
// device than x, with a *vram.DeviceMismatchError for an x on another
// device than the parameters, and of kind vram.ErrDType for an h0 of
// another dtype than x (but as above) and for an x that is not floating-point or, outside
// [vram.Autocast], not of the parameters' dtype. Settings or parameters
// changed after construction so that they no longer agree (a HiddenSize
// that is not the weights', a weight of another shape or set to nil, one
// bias of the two set to nil, a Dropout outside [0, 1]) are refused with
// an error of kind vram.ErrShape or vram.ErrArgument naming the
// parameter or setting. Every error names the layer ("rnn", "lstm",
// "gru").
func (m *RNN) ForwardState(x, h0 *vram.Tensor) (out, hn *vram.Tensor) {
	nilLayer(m == nil, "rnn", "RNN")
	r := recurrent{rnnKind("rnn", m.Nonlinearity), m.RecurrentLayer}
	out, hn, _ = r.forward("rnn", m.Training(), x, h0, nil)
	return out, hn
}

// LSTM is torch.nn.LSTM: a stack of NumLayers long short-term memory
// layers, each computing over the sequence, in one or both directions,
//
//	i, f, g, o = σ, σ, tanh, σ of the four parts of x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh
//	c_t = f·c_{t-1} + i·g
//	h_t = o·tanh(c_t)                 (o·tanh(c_t) W_hrᵀ with ProjSize P)
//
// Its parameters carry PyTorch's names, shapes and gate order
// (weight_ih_l0 [4H, input], weight_hh_l0 [4H, H], bias_ih_l0,
// bias_hh_l0 [4H], ..., "_reverse" for the backward direction; with
// ProjSize P, weight_hh_l0 [4H, P], weight_hr_l0 [P, H] after the biases,
// and the later layers' weight_ih [4H, D·P]), so PyTorch's weights load
// with [Load]. Inputs are laid out as [RNN]'s; packed sequences are not
// supported.
type LSTM struct {
	Base
	RecurrentLayer
}

// NewLSTM returns an LSTM as [NewRNN] returns an RNN, with projections
// when o.ProjSize is positive (proj_size). It also panics when
// o.Nonlinearity is set or o.ProjSize is negative or not smaller than
// hiddenSize.
func NewLSTM(inputSize, hiddenSize int, o RecurrentOptions, opts ...vram.Option) *LSTM {
	m := &LSTM{}
	r := newRecurrent("lstm", kindLSTM, inputSize, hiddenSize, o, opts)
	m.RecurrentLayer = r.RecurrentLayer
	m.RecurrentLayer.register(&m.Base)
	return m
}

// Forward returns the output of the last layer for every time step as
// [RNN.Forward] does, starting from zero states.
func (m *LSTM) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(m == nil, "lstm", "LSTM")
	out, hn, cn := m.ForwardState(x, nil, nil)
	hn.Release()
	cn.Release()
	return out
}

// ForwardState returns the output, the final hidden states hn and the
// final cell states cn, both [NumLayers·D, N, H] ([NumLayers·D, H]
// unbatched), starting from h0 and c0 of that shape; a nil h0 or c0 means
// zeros. With ProjSize P the hidden states h0 and hn, and the output's
// last dimension (D·P), have P features in place of H. The caller owns and releases all three. Its panics are
// [RNN.ForwardState]'s, and one of kind vram.ErrArgument when only one of
// h0 and c0 is nil.
func (m *LSTM) ForwardState(x, h0, c0 *vram.Tensor) (out, hn, cn *vram.Tensor) {
	nilLayer(m == nil, "lstm", "LSTM")
	if (h0 == nil) != (c0 == nil) {
		panic(&vram.Error{Op: "lstm", Kind: vram.ErrArgument, Detail: "give both h0 and c0, or neither for zeros"})
	}
	r := recurrent{kindLSTM, m.RecurrentLayer}
	return r.forward("lstm", m.Training(), x, h0, c0)
}

// GRU is torch.nn.GRU: a stack of NumLayers gated recurrent units, each
// computing over the sequence, in one or both directions,
//
//	r = σ(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)
//	z = σ(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)
//	n = tanh(W_in x_t + b_in + r·(W_hn h_{t-1} + b_hn))
//	h_t = (1-z)·n + z·h_{t-1}
//
// Its parameters carry PyTorch's names, shapes and gate order (r, z, n in
// weight_ih_l0 [3H, input], weight_hh_l0 [3H, H], bias_ih_l0, bias_hh_l0
// [3H], ...), so PyTorch's weights load with [Load]. Inputs are laid out
// as [RNN]'s; packed sequences are not supported.
type GRU struct {
	Base
	RecurrentLayer
}

// NewGRU returns a GRU as [NewRNN] returns an RNN. It also panics when
// o.Nonlinearity or o.ProjSize is set.
func NewGRU(inputSize, hiddenSize int, o RecurrentOptions, opts ...vram.Option) *GRU {
	m := &GRU{}
	r := newRecurrent("gru", kindGRU, inputSize, hiddenSize, o, opts)
	m.RecurrentLayer = r.RecurrentLayer
	m.RecurrentLayer.register(&m.Base)
	return m
}

// Forward returns the output of the last layer for every time step as
// [RNN.Forward] does, starting from zero hidden states.
func (m *GRU) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(m == nil, "gru", "GRU")
	out, hn := m.ForwardState(x, nil)
	hn.Release()
	return out
}

// ForwardState returns the output and the final hidden states as
// [RNN.ForwardState] does, with the same panics.
func (m *GRU) ForwardState(x, h0 *vram.Tensor) (out, hn *vram.Tensor) {
	nilLayer(m == nil, "gru", "GRU")
	r := recurrent{kindGRU, m.RecurrentLayer}
	out, hn, _ = r.forward("gru", m.Training(), x, h0, nil)
	return out, hn
}
