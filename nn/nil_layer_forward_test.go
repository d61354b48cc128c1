package nn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestNilLayerForward calls Forward, and the other forward methods, of a
// nil pointer of each layer type (a field of a model declared and never
// made): each panics with an *vram.Error of kind ErrArgument naming the
// type, as the transformer layers' do, never with a nil-pointer
// dereference.
func TestNilLayerForward(t *testing.T) {
	x := vram.Ones(vram.Shape{2, 3, 4, 4})
	defer x.Release()
	tests := []struct {
		typ  string
		call func()
	}{
		{"LeakyReLU", func() { (*nn.LeakyReLU)(nil).Forward(x) }},
		{"ELU", func() { (*nn.ELU)(nil).Forward(x) }},
		{"Softplus", func() { (*nn.Softplus)(nil).Forward(x) }},
		{"Hardtanh", func() { (*nn.Hardtanh)(nil).Forward(x) }},
		{"Softmax", func() { (*nn.Softmax)(nil).Forward(x) }},
		{"LogSoftmax", func() { (*nn.LogSoftmax)(nil).Forward(x) }},
		{"Hardshrink", func() { (*nn.Hardshrink)(nil).Forward(x) }},
		{"Softshrink", func() { (*nn.Softshrink)(nil).Forward(x) }},
		{"Threshold", func() { (*nn.Threshold)(nil).Forward(x) }},
		{"CELU", func() { (*nn.CELU)(nil).Forward(x) }},
		{"Softmin", func() { (*nn.Softmin)(nil).Forward(x) }},
		{"GLU", func() { (*nn.GLU)(nil).Forward(x) }},
		{"PReLU", func() { (*nn.PReLU)(nil).Forward(x) }},
		{"RReLU", func() { (*nn.RReLU)(nil).Forward(x) }},
		{"GELU", func() { (*nn.GELU)(nil).Forward(x) }},
		{"MultiheadAttention", func() { (*nn.MultiheadAttention)(nil).Forward(x) }},
		{"MultiheadAttention", func() { (*nn.MultiheadAttention)(nil).ForwardQKV(x, x, x, nn.MultiheadForwardOptions{}) }},
		{"Bilinear", func() { (*nn.Bilinear)(nil).Forward(x) }},
		{"Bilinear", func() { (*nn.Bilinear)(nil).ForwardPair(x, x) }},
		{"Conv2d", func() { (*nn.Conv2d)(nil).Forward(x) }},
		{"Conv2d", func() { (*nn.Conv2d)(nil).ForwardAct(x, vram.ActReLU) }},
		{"Conv1d", func() { (*nn.Conv1d)(nil).Forward(x) }},
		{"ConvTranspose2d", func() { (*nn.ConvTranspose2d)(nil).Forward(x) }},
		{"ConvTranspose2d", func() { (*nn.ConvTranspose2d)(nil).ForwardSize(x, 8, 8) }},
		{"MaxPool2d", func() { (*nn.MaxPool2d)(nil).Forward(x) }},
		{"MaxPool2d", func() { (*nn.MaxPool2d)(nil).ForwardWithIndices(x) }},
		{"AvgPool2d", func() { (*nn.AvgPool2d)(nil).Forward(x) }},
		{"AdaptiveAvgPool2d", func() { (*nn.AdaptiveAvgPool2d)(nil).Forward(x) }},
		{"AdaptiveMaxPool2d", func() { (*nn.AdaptiveMaxPool2d)(nil).Forward(x) }},
		{"AdaptiveMaxPool2d", func() { (*nn.AdaptiveMaxPool2d)(nil).ForwardWithIndices(x) }},
		{"MaxPool1d", func() { (*nn.MaxPool1d)(nil).Forward(x) }},
		{"MaxPool1d", func() { (*nn.MaxPool1d)(nil).ForwardWithIndices(x) }},
		{"AvgPool1d", func() { (*nn.AvgPool1d)(nil).Forward(x) }},
		{"AdaptiveAvgPool1d", func() { (*nn.AdaptiveAvgPool1d)(nil).Forward(x) }},
		{"AdaptiveMaxPool1d", func() { (*nn.AdaptiveMaxPool1d)(nil).Forward(x) }},
		{"AdaptiveMaxPool1d", func() { (*nn.AdaptiveMaxPool1d)(nil).ForwardWithIndices(x) }},
		{"Flatten", func() { (*nn.Flatten)(nil).Forward(x) }},
		{"Unflatten", func() { (*nn.Unflatten)(nil).Forward(x) }},
		{"Dropout", func() { (*nn.Dropout)(nil).Forward(x) }},
		{"Dropout2d", func() { (*nn.Dropout2d)(nil).Forward(x) }},
		{"Embedding", func() { (*nn.Embedding)(nil).Forward(x) }},
		{"EmbeddingBag", func() { (*nn.EmbeddingBag)(nil).Forward(x) }},
		{"EmbeddingBag", func() { (*nn.EmbeddingBag)(nil).ForwardBags(x, nil, nil) }},
		{"Linear", func() { (*nn.Linear)(nil).Forward(x) }},
		{"Linear", func() { (*nn.Linear)(nil).ForwardAct(x, vram.ActReLU) }},
		{"LayerNorm", func() { (*nn.LayerNorm)(nil).Forward(x) }},
		{"RMSNorm", func() { (*nn.RMSNorm)(nil).Forward(x) }},
		{"GroupNorm", func() { (*nn.GroupNorm)(nil).Forward(x) }},
		{"InstanceNorm", func() { (*nn.InstanceNorm)(nil).Forward(x) }},
		{"LocalResponseNorm", func() { (*nn.LocalResponseNorm)(nil).Forward(x) }},
		{"BatchNorm2d", func() { (*nn.BatchNorm2d)(nil).Forward(x) }},
		{"BatchNorm2d", func() { (*nn.BatchNorm2d)(nil).ForwardReLU(x, nil) }},
		{"BatchNorm1d", func() { (*nn.BatchNorm1d)(nil).Forward(x) }},
		{"BatchNorm1d", func() { (*nn.BatchNorm1d)(nil).ForwardReLU(x, nil) }},
		{"Pad", func() { (*nn.Pad)(nil).Forward(x) }},
		{"Upsample", func() { (*nn.Upsample)(nil).Forward(x) }},
		{"PixelShuffle", func() { (*nn.PixelShuffle)(nil).Forward(x) }},
		{"PixelUnshuffle", func() { (*nn.PixelUnshuffle)(nil).Forward(x) }},
		{"Unfold", func() { (*nn.Unfold)(nil).Forward(x) }},
		{"Fold", func() { (*nn.Fold)(nil).Forward(x) }},
		{"RNN", func() { (*nn.RNN)(nil).Forward(x) }},
		{"RNN", func() { (*nn.RNN)(nil).ForwardState(x, nil) }},
		{"LSTM", func() { (*nn.LSTM)(nil).Forward(x) }},
		{"LSTM", func() { (*nn.LSTM)(nil).ForwardState(x, nil, nil) }},
		{"GRU", func() { (*nn.GRU)(nil).Forward(x) }},
		{"GRU", func() { (*nn.GRU)(nil).ForwardState(x, nil) }},
		{"RNNCell", func() { (*nn.RNNCell)(nil).Forward(x) }},
		{"RNNCell", func() { (*nn.RNNCell)(nil).ForwardState(x, nil) }},
		{"LSTMCell", func() { (*nn.LSTMCell)(nil).Forward(x) }},
		{"LSTMCell", func() { (*nn.LSTMCell)(nil).ForwardState(x, nil, nil) }},
		{"GRUCell", func() { (*nn.GRUCell)(nil).Forward(x) }},
		{"GRUCell", func() { (*nn.GRUCell)(nil).ForwardState(x, nil) }},
	}
	for _, tc := range tests {
		t.Run(tc.typ, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked with %v (%T), want an *vram.Error", r, r)
					}
				}()
				err = vram.Catch(tc.call)
			}()
			if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), "nil *"+tc.typ) {
				t.Errorf("got %v, want an error of kind ErrArgument naming the nil *%s", err, tc.typ)
			}
		})
	}
}
