package nn_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// TestRecurrentDropoutOneLayerWarns checks that a dropout probability
// with a single layer, which has no layer after it to drop for, gives a
// warning as PyTorch does, and that the settings that use it do not.
func TestRecurrentDropoutOneLayerWarns(t *testing.T) {
	tests := []struct {
		name string
		make func()
		warn bool
	}{
		{"rnn one layer", func() { nn.NewRNN(3, 4, nn.RecurrentOptions{Dropout: 0.5}) }, true},
		{"lstm one layer", func() { nn.NewLSTM(3, 4, nn.RecurrentOptions{Dropout: 0.2, NumLayers: 1}) }, true},
		{"gru bidirectional one layer", func() { nn.NewGRU(3, 4, nn.RecurrentOptions{Dropout: 1, Bidirectional: true}) }, true},
		{"two layers", func() { nn.NewLSTM(3, 4, nn.RecurrentOptions{Dropout: 0.5, NumLayers: 2}) }, false},
		{"no dropout", func() { nn.NewGRU(3, 4, nn.RecurrentOptions{}) }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []vram.Warning
			defer vram.SetWarningHandler(vram.SetWarningHandler(func(w vram.Warning) { got = append(got, w) }))
			tc.make()
			if !tc.warn {
				if len(got) != 0 {
					t.Fatalf("warnings %v, want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0].Message, "num_layers") || !strings.Contains(got[0].Message, "dropout") {
				t.Fatalf("warnings %v, want one about dropout and num_layers", got)
			}
		})
	}
}

// TestRecurrentHugeSizes checks that sizes whose parameters have more
// elements than an int counts are refused by the layer, not wrapped
// into a negative size, and that a layer that runs out of memory while
// making its parameters leaves none of them allocated.
func TestRecurrentHugeSizes(t *testing.T) {
	sizes := []struct {
		name string
		fn   func(opts ...vram.Option)
		op   string
	}{
		{"rnn", func(opts ...vram.Option) { nn.NewRNN(1<<40, 1<<40, nn.RecurrentOptions{}, opts...) }, "rnn"},
		{"lstm layers", func(opts ...vram.Option) { nn.NewLSTM(4, 1<<30, nn.RecurrentOptions{NumLayers: 1 << 40}, opts...) }, "lstm"},
		{"gru cell", func(opts ...vram.Option) { nn.NewGRUCell(1<<62, 1<<62, nn.CellOptions{}, opts...) }, "gru_cell"},
		{"lstm cell", func(opts ...vram.Option) { nn.NewLSTMCell(1, 1<<62, nn.CellOptions{}, opts...) }, "lstm_cell"},
	}
	for _, tc := range sizes {
		t.Run("overflow/"+tc.name, func(t *testing.T) {
			err := vram.Catch(func() { tc.fn() })
			var ve *vram.Error
			if !errors.As(err, &ve) || !errors.Is(err, vram.ErrArgument) || ve.Op != tc.op || !strings.Contains(ve.Detail, "more parameters than") {
				t.Fatalf("got %v, want an ErrArgument from %q saying the parameters are too many", err, tc.op)
			}
		})
	}
	dev := vram.Sim(1)
	// The input weights, [G·H, 1], fit; the hidden ones, [G·H, H], do not.
	// The error names the layer the caller made.
	const h = 1 << 20
	oom := []struct {
		name string
		fn   func()
		op   string
	}{
		{"rnn", func() { nn.NewRNN(1, h, nn.RecurrentOptions{}, dev) }, "rnn"},
		{"lstm", func() { nn.NewLSTM(1, h, nn.RecurrentOptions{}, dev) }, "lstm"},
		{"gru", func() { nn.NewGRU(1, h, nn.RecurrentOptions{NoBias: true}, dev) }, "gru"},
		{"rnn cell", func() { nn.NewRNNCell(1, h, nn.CellOptions{}, dev) }, "rnn_cell"},
		{"lstm cell", func() { nn.NewLSTMCell(1, h, nn.CellOptions{}, dev) }, "lstm_cell"},
		{"gru cell", func() { nn.NewGRUCell(1, h, nn.CellOptions{}, dev) }, "gru_cell"},
	}
	for _, tc := range oom {
		t.Run("out of memory/"+tc.name, func(t *testing.T) {
			memtest.Settle(dev)
			base := vram.MemoryAllocated(dev)
			err := vram.Catch(tc.fn)
			var ve *vram.Error
			if !errors.Is(err, vram.ErrOutOfMemory) || !errors.As(err, &ve) || ve.Op != tc.op {
				t.Fatalf("got %v, want an out-of-memory error from %q", err, tc.op)
			}
			if got := vram.MemoryAllocated(dev); got != base {
				t.Fatalf("%d bytes allocated after the failure, want %d", got, base)
			}
		})
	}
}

// TestRecurrentChangedSettings checks that Forward refuses settings and
// parameters changed after construction into ones that do not agree,
// naming what it expected, rather than reporting a mismatch inside a
// product or computing without a part.
func TestRecurrentChangedSettings(t *testing.T) {
	x3 := vram.Zeros(vram.Shape{2, 1, 3})
	x2 := vram.Zeros(vram.Shape{1, 3})
	tests := []struct {
		name   string
		fn     func()
		kind   error
		op     string
		detail string
	}{
		{"hidden size", func() {
			m := nn.NewGRU(3, 4, nn.RecurrentOptions{})
			m.HiddenSize = 5
			m.Forward(x3)
		}, vram.ErrShape, "gru", "hidden_size 5"},
		{"replaced weight", func() {
			m := nn.NewLSTM(3, 4, nn.RecurrentOptions{NumLayers: 2})
			m.Weights[1].WeightIH = vram.Zeros(vram.Shape{16, 3})
			m.Forward(x3)
		}, vram.ErrShape, "lstm", "weight_ih_l1 must be [16, 4]"},
		{"replaced reverse bias", func() {
			m := nn.NewRNN(3, 4, nn.RecurrentOptions{Bidirectional: true})
			m.Weights[1].BiasHH = vram.Zeros(vram.Shape{5})
			m.Forward(x3)
		}, vram.ErrShape, "rnn", "bias_hh_l0_reverse"},
		{"one bias removed", func() {
			m := nn.NewGRU(3, 4, nn.RecurrentOptions{})
			m.Weights[0].BiasIH = nil
			m.Forward(x3)
		}, vram.ErrArgument, "gru", "bias_ih_l0"},
		{"weight removed", func() {
			m := nn.NewGRU(3, 4, nn.RecurrentOptions{})
			m.Weights[0].WeightHH = nil
			m.Forward(x3)
		}, vram.ErrArgument, "gru", "weight_hh_l0"},
		{"negative dropout", func() {
			m := nn.NewGRU(3, 4, nn.RecurrentOptions{NumLayers: 2})
			m.Dropout = -1
			m.Forward(x3)
		}, vram.ErrArgument, "gru", "dropout"},
		{"dropout above 1 in evaluation", func() {
			m := nn.NewLSTM(3, 4, nn.RecurrentOptions{NumLayers: 2})
			m.Eval()
			m.Dropout = 2
			m.Forward(x3)
		}, vram.ErrArgument, "lstm", "dropout"},
		{"cell hidden size", func() {
			m := nn.NewLSTMCell(3, 4, nn.CellOptions{})
			m.HiddenSize = 5
			m.Forward(x2)
		}, vram.ErrShape, "lstm_cell", "hidden_size 5"},
		{"cell input size", func() {
			m := nn.NewRNNCell(3, 4, nn.CellOptions{})
			m.InputSize = 2
			m.Forward(vram.Zeros(vram.Shape{1, 2}))
		}, vram.ErrShape, "rnn_cell", "weight_ih must be [4, 2]"},
		{"cell one bias removed", func() {
			m := nn.NewGRUCell(3, 4, nn.CellOptions{})
			m.BiasHH = nil
			m.Forward(x2)
		}, vram.ErrArgument, "gru_cell", "bias_hh"},
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

// TestRecurrentAutocastStates checks that inside an autocast region the
// layers and cells take their input and states in any dtype the region
// casts (float32, float16, bfloat16), as PyTorch casts every argument of
// its recurrent ops: a final state of one region's run, in the region's
// dtype, is the initial state of the next chunk of a float32 sequence.
// The results are in the region's dtype and close to float32's.
func TestRecurrentAutocastStates(t *testing.T) {
	g := vram.NewGenerator(7)
	lstm := nn.NewLSTM(3, 4, nn.RecurrentOptions{NumLayers: 2}, vram.WithGenerator(g))
	cell := nn.NewGRUCell(3, 4, nn.CellOptions{}, vram.WithGenerator(g))
	x := vram.Randn(vram.Shape{5, 2, 3}, vram.WithGenerator(g))
	h0 := vram.Randn(vram.Shape{2, 2, 4}, vram.WithGenerator(g))
	c0 := vram.Randn(vram.Shape{2, 2, 4}, vram.WithGenerator(g))
	want, wantH, wantC := lstm.ForwardState(x, h0, c0)
	wantCell := cell.ForwardState(x.Select(0, 0), h0.Select(0, 0))
	tests := []struct {
		region, xdt, hdt vram.DType
	}{
		{vram.BFloat16, vram.Float32, vram.BFloat16},
		{vram.Float16, vram.Float32, vram.Float16},
		{vram.Float16, vram.Float16, vram.Float32},
		{vram.BFloat16, vram.Float16, vram.BFloat16},
		{vram.BFloat16, vram.BFloat16, vram.Float16},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s region, %s input, %s states", tc.region, tc.xdt, tc.hdt), func(t *testing.T) {
			vram.Tidy(func() {
				xs, hs, cs := x.Cast(tc.xdt), h0.Cast(tc.hdt), c0.Cast(tc.hdt)
				vram.Autocast(tc.region, func() {
					var out, hn, cn, hc *vram.Tensor
					if err := vram.Catch(func() {
						out, hn, cn = lstm.ForwardState(xs, hs, cs)
						hc = cell.ForwardState(xs.Select(0, 0), hs.Select(0, 0))
					}); err != nil {
						t.Fatal(err)
					}
					for _, r := range []*vram.Tensor{out, hn, cn, hc} {
						if r.DType() != tc.region {
							t.Fatalf("result of dtype %s, want %s", r.DType(), tc.region)
						}
					}
					checkValues(t, "output", out.Float64s(), want.Float64s(), 0.05)
					checkValues(t, "h_n", hn.Float64s(), wantH.Float64s(), 0.05)
					checkValues(t, "c_n", cn.Float64s(), wantC.Float64s(), 0.05)
					checkValues(t, "cell", hc.Float64s(), wantCell.Float64s(), 0.05)
				})
			})
		})
	}
	// float64 is not cast, so float64 states beside a float32 input are
	// still refused, naming both dtypes.
	vram.Autocast(vram.BFloat16, func() {
		err := vram.Catch(func() { lstm.ForwardState(x, h0.Cast(vram.Float64), c0.Cast(vram.Float64)) })
		if !errors.Is(err, vram.ErrDType) || !strings.Contains(err.Error(), "float64") {
			t.Fatalf("float64 states in a region: %v, want an ErrDType naming float64", err)
		}
	})
}

// TestRecurrentDevices checks that states on another device than the
// input are refused naming the state and both devices, as PyTorch's
// "Input and hidden tensors are not at the same device", and that an
// input on another device than the parameters is refused with the
// parameters' device as the one expected.
func TestRecurrentDevices(t *testing.T) {
	if !vram.Sim(0).Available() {
		t.Skip("no sim device")
	}
	cpu3, cpu2 := vram.Zeros(vram.Shape{5, 2, 3}), vram.Zeros(vram.Shape{2, 3})
	lstm := nn.NewLSTM(3, 4, nn.RecurrentOptions{})
	gru := nn.NewGRU(3, 4, nn.RecurrentOptions{})
	lc := nn.NewLSTMCell(3, 4, nn.CellOptions{})
	gc := nn.NewGRUCell(3, 4, nn.CellOptions{})
	on := func(shape ...int) *vram.Tensor { return vram.Zeros(vram.Shape(shape), vram.Sim(0)) }
	states := []struct {
		name, op, state string
		fn              func()
	}{
		{"gru h0", "gru", "h0", func() { gru.ForwardState(cpu3, on(1, 2, 4)) }},
		{"lstm h0", "lstm", "h0", func() { lstm.ForwardState(cpu3, on(1, 2, 4), vram.Zeros(vram.Shape{1, 2, 4})) }},
		{"lstm c0", "lstm", "c0", func() { lstm.ForwardState(cpu3, vram.Zeros(vram.Shape{1, 2, 4}), on(1, 2, 4)) }},
		{"gru cell h", "gru_cell", "hx", func() { gc.ForwardState(cpu2, on(2, 4)) }},
		{"lstm cell c", "lstm_cell", "cx", func() { lc.ForwardState(cpu2, vram.Zeros(vram.Shape{2, 4}), on(2, 4)) }},
	}
	for _, tc := range states {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			var ve *vram.Error
			if !errors.As(err, &ve) || !errors.Is(err, vram.ErrDevice) || ve.Op != tc.op ||
				!strings.Contains(ve.Detail, tc.state+" is on sim:0") || !strings.Contains(ve.Detail, "cpu") {
				t.Fatalf("got %v, want an ErrDevice from %q saying %s is on sim:0 and the input on cpu", err, tc.op, tc.state)
			}
		})
	}
	inputs := []struct {
		name, op string
		fn       func()
	}{
		{"lstm input", "lstm", func() { lstm.Forward(on(5, 2, 3)) }},
		{"gru cell input", "gru_cell", func() { gc.Forward(on(2, 3)) }},
	}
	for _, tc := range inputs {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			var de *vram.DeviceMismatchError
			if !errors.As(err, &de) || de.Op != tc.op || de.Expected != vram.CPU || de.Got != vram.Sim(0) {
				t.Fatalf("got %v, want a device mismatch from %q expecting the parameters' cpu", err, tc.op)
			}
		})
	}
}

// TestRecurrentInputDType checks that outside an autocast region an input
// of another dtype than the parameters is refused naming both, the
// parameters' as the one expected, as PyTorch's "input must have the
// type torch.float32, got type torch.float16" does.
func TestRecurrentInputDType(t *testing.T) {
	gru := nn.NewGRU(3, 4, nn.RecurrentOptions{})
	lstm64 := nn.NewLSTM(3, 4, nn.RecurrentOptions{}, vram.Float64)
	rc := nn.NewRNNCell(3, 4, nn.CellOptions{})
	tests := []struct {
		name, op, want string
		fn             func()
	}{
		{"float16 into float32 layer", "gru", "the input is float16 but the parameters are float32", func() {
			gru.Forward(vram.Zeros(vram.Shape{2, 1, 3}, vram.Float16))
		}},
		{"float32 into float64 layer", "lstm", "the input is float32 but the parameters are float64", func() {
			lstm64.Forward(vram.Zeros(vram.Shape{2, 1, 3}))
		}},
		{"integers into a layer", "gru", "the input is int64 but the parameters are float32", func() {
			gru.Forward(vram.Zeros(vram.Shape{2, 1, 3}, vram.Int64))
		}},
		{"bfloat16 into a cell", "rnn_cell", "the input is bfloat16 but the parameters are float32", func() {
			rc.Forward(vram.Zeros(vram.Shape{1, 3}, vram.BFloat16))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			var ve *vram.Error
			if !errors.As(err, &ve) || !errors.Is(err, vram.ErrDType) || ve.Op != tc.op || !strings.Contains(ve.Detail, tc.want) {
				t.Fatalf("got %v, want an ErrDType from %q saying %q", err, tc.op, tc.want)
			}
		})
	}
}
