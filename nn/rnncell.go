package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// cellParams makes a cell's parameters, weight_ih [G·H,
// in], weight_hh [G·H, H] and, unless noBias, bias_ih and bias_hh [G·H],
// uniform in [-1/sqrt(H), 1/sqrt(H)) as in PyTorch; the caller registers
// them once they are in the cell ([RecurrentWeights.register]).
func cellParams(op string, kind cellKind, in, hidden int, noBias bool, opts []vram.Option) RecurrentWeights {
	if in < 1 || hidden < 1 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("sizes must be positive, got input_size %d, hidden_size %d", in, hidden)})
	}
	checkParamCount(op, kind, in, hidden, 0, 1, 1, !noBias)
	bound := 1 / math.Sqrt(float64(hidden))
	g := kind.gates() * hidden
	var w RecurrentWeights
	// Parameters made before a failure are released, as the layers',
	// and the error names the cell.
	defer asOp(op)
	made := false
	defer func() {
		if !made {
			w.release()
		}
	}()
	w.WeightIH = uniformParam(vram.Shape{g, in}, bound, opts)
	w.WeightHH = uniformParam(vram.Shape{g, hidden}, bound, opts)
	if !noBias {
		w.BiasIH = uniformParam(vram.Shape{g}, bound, opts)
		w.BiasHH = uniformParam(vram.Shape{g}, bound, opts)
	}
	made = true
	return w
}

// cellForward runs one step of a cell on x [N, in] or [in] from h and,
// for an LSTM, c ([N, H] or [H]; nil for zeros), and returns the new
// states, which the caller owns.
func cellForward(op string, kind cellKind, w RecurrentWeights, in, hidden int, x, h, c *vram.Tensor) (hn, cn *vram.Tensor) {
	defer asOp(op) // the products' errors name the cell
	notNil(op, x)
	var ts temps
	defer ts.release()
	tmp := ts.add
	bad := func(format string, args ...any) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf(format, args...)})
	}
	if in < 1 || hidden < 1 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("sizes must be positive, got input_size %d, hidden_size %d", in, hidden)})
	}
	w.check(op, "", kind.gates(), in, hidden, 0)
	sameDevice(op, x, w.WeightIH)
	checkInputDType(op, x, w.WeightIH)
	batched := x.Dim() == 2
	if x.Dim() != 1 && !batched || x.Size(-1) != in {
		bad("input must be [N, %d] or [%d] (input_size %d), got %v", in, in, in, x.Shape())
	}
	xs := x
	if !batched {
		xs = tmp(x.Unsqueeze(0))
	}
	n := xs.Size(0)
	// Inside an autocast region the states are taken in its dtype, as in
	// the layers.
	stateDType := recurrentDType(x)
	state := func(name string, s *vram.Tensor) *vram.Tensor {
		if s == nil {
			return tmp(vram.Zeros(vram.Shape{n, hidden}, x.Device(), stateDType))
		}
		want := vram.Shape{n, hidden}
		if !batched {
			want = vram.Shape{hidden}
		}
		if !slices.Equal(s.Shape(), want) {
			bad("%s must be %v for input %v, got %v", name, want, x.Shape(), s.Shape())
		}
		if c, made := stateIn(op, name, x, s, stateDType); made {
			s = tmp(c)
		}
		if !batched {
			return tmp(s.Unsqueeze(0))
		}
		return s
	}
	h = state("hx", h)
	if kind == kindLSTM {
		c = state("cx", c)
	}
	gi := tmp(vram.Linear(xs, w.WeightIH, w.BiasIH))
	hn, cn = cellStep(kind, gi, h, c, w, hidden, tmp)
	if !batched {
		tmp(hn)
		hn = hn.Squeeze(0)
		if cn != nil {
			tmp(cn)
			cn = cn.Squeeze(0)
		}
	}
	return hn, cn
}

// RNNCell is torch.nn.RNNCell: one step of an Elman network, h' =
// tanh(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh) (or relu), with PyTorch's
// parameter names and shapes (weight_ih [H, input], weight_hh [H, H],
// bias_ih, bias_hh [H]).
type RNNCell struct {
	Base
	// InputSize and HiddenSize are the cell's sizes.
	InputSize, HiddenSize int
	// Nonlinearity is "tanh" or "relu".
	Nonlinearity string
	// RecurrentWeights holds the parameters WeightIH, WeightHH, BiasIH
	// and BiasHH (the biases nil with NoBias).
	RecurrentWeights
}

// NewRNNCell returns an RNNCell from inputSize to hiddenSize features,
// initialised as PyTorch does: uniform in [-1/sqrt(hiddenSize),
// 1/sqrt(hiddenSize)). opts (device, dtype, generator) go to vram's
// factory functions. It panics with an *vram.Error of kind
// vram.ErrArgument for sizes that are not positive or give more
// parameters than an int counts, or an unknown nonlinearity, releasing
// any parameter it made.
func NewRNNCell(inputSize, hiddenSize int, o CellOptions, opts ...vram.Option) *RNNCell {
	const op = "rnn_cell"
	kind := rnnKind(op, o.Nonlinearity)
	m := &RNNCell{InputSize: inputSize, HiddenSize: hiddenSize, Nonlinearity: "tanh"}
	if kind == kindReLU {
		m.Nonlinearity = "relu"
	}
	m.RecurrentWeights = cellParams(op, kind, inputSize, hiddenSize, o.NoBias, opts)
	m.RecurrentWeights.register(&m.Base, "")
	return m
}

// Forward returns the next hidden state for x from a zero hidden state.
func (m *RNNCell) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(m == nil, "rnn_cell", "RNNCell")
	return m.ForwardState(x, nil)
}

// ForwardState returns the next hidden state, [N, H] for x [N, input] or
// [H] for x [input], from h of that shape (nil for zeros). The caller
// owns the result. It panics with an *vram.Error of kind vram.ErrShape for
// an x or h of the wrong shape, of kind vram.ErrDevice for an h on
// another device than x, with a *vram.DeviceMismatchError for an x on
// another device than the parameters, and of kind vram.ErrDType for an h of
// another dtype than x and for an x that is not floating-point or, outside
// [vram.Autocast], not of the parameters' dtype; inside an autocast
// region x and h may each be float32, float16 or bfloat16, as in the
// layers ([RNN.ForwardState]). Sizes or parameters
// changed after construction so that they no longer agree are refused as
// [RNN.ForwardState] refuses them.
func (m *RNNCell) ForwardState(x, h *vram.Tensor) *vram.Tensor {
	nilLayer(m == nil, "rnn_cell", "RNNCell")
	hn, _ := cellForward("rnn_cell", rnnKind("rnn_cell", m.Nonlinearity),
		m.RecurrentWeights, m.InputSize, m.HiddenSize, x, h, nil)
	return hn
}

// LSTMCell is torch.nn.LSTMCell: one step of an [LSTM], with PyTorch's
// parameter names, shapes and gate order (input, forget, cell, output in
// weight_ih [4H, input], weight_hh [4H, H], bias_ih, bias_hh [4H]).
type LSTMCell struct {
	Base
	// InputSize and HiddenSize are the cell's sizes.
	InputSize, HiddenSize int
	// RecurrentWeights holds the parameters WeightIH, WeightHH, BiasIH
	// and BiasHH (the biases nil with NoBias).
	RecurrentWeights
}

// NewLSTMCell returns an LSTMCell as [NewRNNCell] returns an RNNCell; it
// also panics when o.Nonlinearity is set.
func NewLSTMCell(inputSize, hiddenSize int, o CellOptions, opts ...vram.Option) *LSTMCell {
	const op = "lstm_cell"
	if o.Nonlinearity != "" {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("nonlinearity %q applies to RNNCell only", o.Nonlinearity)})
	}
	m := &LSTMCell{InputSize: inputSize, HiddenSize: hiddenSize}
	m.RecurrentWeights = cellParams(op, kindLSTM, inputSize, hiddenSize, o.NoBias, opts)
	m.RecurrentWeights.register(&m.Base, "")
	return m
}

// Forward returns the next hidden state for x from zero states, leaving
// out the cell state; [LSTMCell.ForwardState] returns both.
func (m *LSTMCell) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(m == nil, "lstm_cell", "LSTMCell")
	h, c := m.ForwardState(x, nil, nil)
	c.Release()
	return h
}

// ForwardState returns the next hidden and cell states, [N, H] for x [N,
// input] or [H] for x [input], from h and c of that shape; both nil
// means zeros. The caller owns both results. It panics with an
// *vram.Error of kind vram.ErrArgument when only one of h and c is nil,
// and of kind vram.ErrShape for an x, h or c of the wrong shape.
func (m *LSTMCell) ForwardState(x, h, c *vram.Tensor) (hn, cn *vram.Tensor) {
	nilLayer(m == nil, "lstm_cell", "LSTMCell")
	const op = "lstm_cell"
	if (h == nil) != (c == nil) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "give both h and c, or neither for zeros"})
	}
	return cellForward(op, kindLSTM, m.RecurrentWeights, m.InputSize, m.HiddenSize, x, h, c)
}

// GRUCell is torch.nn.GRUCell: one step of a [GRU], with PyTorch's
// parameter names, shapes and gate order (reset, update, new in
// weight_ih [3H, input], weight_hh [3H, H], bias_ih, bias_hh [3H]).
type GRUCell struct {
	Base
	// InputSize and HiddenSize are the cell's sizes.
	InputSize, HiddenSize int
	// RecurrentWeights holds the parameters WeightIH, WeightHH, BiasIH
	// and BiasHH (the biases nil with NoBias).
	RecurrentWeights
}

// NewGRUCell returns a GRUCell as [NewRNNCell] returns an RNNCell; it
// also panics when o.Nonlinearity is set.
func NewGRUCell(inputSize, hiddenSize int, o CellOptions, opts ...vram.Option) *GRUCell {
	const op = "gru_cell"
	if o.Nonlinearity != "" {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("nonlinearity %q applies to RNNCell only", o.Nonlinearity)})
	}
	m := &GRUCell{InputSize: inputSize, HiddenSize: hiddenSize}
	m.RecurrentWeights = cellParams(op, kindGRU, inputSize, hiddenSize, o.NoBias, opts)
	m.RecurrentWeights.register(&m.Base, "")
	return m
}

// Forward returns the next hidden state for x from a zero hidden state.
func (m *GRUCell) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(m == nil, "gru_cell", "GRUCell")
	return m.ForwardState(x, nil)
}

// ForwardState returns the next hidden state as [RNNCell.ForwardState]
// does, with the same panics.
func (m *GRUCell) ForwardState(x, h *vram.Tensor) *vram.Tensor {
	nilLayer(m == nil, "gru_cell", "GRUCell")
	hn, _ := cellForward("gru_cell", kindGRU, m.RecurrentWeights, m.InputSize, m.HiddenSize, x, h, nil)
	return hn
}
