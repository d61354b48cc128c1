package tensorfile

import (
	"bytes"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/safetensors"
)

func TestDecodeKeepsBytes(t *testing.T) {
	tests := []struct {
		name string
		st   safetensors.Tensor
		dt   vram.DType
		want []byte
	}{
		{"F32 signalling NaN", safetensors.Tensor{DType: "F32", Shape: []int{1}, Data: []byte{1, 0, 0x80, 0x7f}}, vram.Float32, []byte{1, 0, 0x80, 0x7f}},
		{"F16 signalling NaN", safetensors.Tensor{DType: "F16", Shape: []int{}, Data: []byte{1, 0x7c}}, vram.Float16, []byte{1, 0x7c}},
		{"BF16 signalling NaN", safetensors.Tensor{DType: "BF16", Shape: []int{1}, Data: []byte{0x81, 0x7f}}, vram.BFloat16, []byte{0x81, 0x7f}},
		{"I8 extremes", safetensors.Tensor{DType: "I8", Shape: []int{2}, Data: []byte{0x80, 0x7f}}, vram.Int8, []byte{0x80, 0x7f}},
		{"BOOL bytes other than 0 and 1", safetensors.Tensor{DType: "BOOL", Shape: []int{3}, Data: []byte{0, 2, 0xff}}, vram.Bool, []byte{0, 1, 1}},
		{"converted U8 to BOOL", safetensors.Tensor{DType: "U8", Shape: []int{2}, Data: []byte{0, 7}}, vram.Bool, []byte{0, 1}},
		{"empty", safetensors.Tensor{DType: "F32", Shape: []int{0, 2}, Data: []byte{}}, vram.Float32, []byte{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.st, tt.dt)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if b := got.RawBytes(); !bytes.Equal(b, tt.want) {
				t.Errorf("bytes % x, want % x", b, tt.want)
			}
			if len(got.Shape()) != len(tt.st.Shape) {
				t.Errorf("shape %v, want %v", got.Shape(), tt.st.Shape)
			}
			enc, err := Encode(got)
			if err != nil {
				t.Fatal(err)
			}
			if tt.st.DType == enc.DType && tt.dt != vram.Bool && !bytes.Equal(enc.Data, tt.st.Data) {
				t.Errorf("Encode gives % x, want % x", enc.Data, tt.st.Data)
			}
		})
	}
}
