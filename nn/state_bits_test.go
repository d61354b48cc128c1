package nn_test

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// stateBag is a module that only holds buffers.
type stateBag struct{ nn.Base }

func (b *stateBag) Forward(x *vram.Tensor) *vram.Tensor { return x }

// awkwardBytes returns the raw bytes of eight elements of dt that a
// conversion through another type would change: signalling and quiet NaNs
// with payloads and both signs, -0, the smallest subnormal, infinities and
// integer extremes.
func awkwardBytes(dt vram.DType) []byte {
	var b []byte
	switch dt {
	case vram.Float32:
		for _, u := range []uint32{0x7f800001, 0xff800001, 0x7fc00123, 0x80000000, 0x00000001, 0x7f800000, 0x3f800000, 0xffffffff} {
			b = binary.LittleEndian.AppendUint32(b, u)
		}
	case vram.Float64:
		for _, u := range []uint64{0x7ff0000000000001, 0xfff0000000000001, 0x7ff8000000000123, 1 << 63, 1, 0x7ff0000000000000, 0x3ff0000000000000, 1<<64 - 1} {
			b = binary.LittleEndian.AppendUint64(b, u)
		}
	case vram.Float16, vram.BFloat16:
		for _, u := range []uint16{0x7c01, 0xfc01, 0x7e23, 0x8000, 0x0001, 0x7f81, 0x3c00, 0xffff} {
			b = binary.LittleEndian.AppendUint16(b, u)
		}
	case vram.Int64:
		for _, u := range []uint64{1 << 63, 1<<63 - 1, 1<<53 + 1, 0, 1, 1<<64 - 1, 12345, 99} {
			b = binary.LittleEndian.AppendUint64(b, u)
		}
	case vram.Int32:
		for _, u := range []uint32{1 << 31, 1<<31 - 1, 1<<24 + 1, 0, 1, 1<<32 - 1, 6, 7} {
			b = binary.LittleEndian.AppendUint32(b, u)
		}
	case vram.Int8:
		b = []byte{0x80, 0x7f, 0, 1, 0xff, 2, 3, 4}
	case vram.Bool:
		b = []byte{0, 1, 1, 0, 1, 0, 0, 1}
	}
	return b
}

// TestSaveLoadBitExact saves buffers of every dtype, on the CPU and on a
// simulated GPU, contiguous and channels-last, as a matrix, a scalar and
// an empty tensor, and checks that Load gives back the very same bytes.
func TestSaveLoadBitExact(t *testing.T) {
	dtypes := []vram.DType{vram.Float32, vram.Float64, vram.Float16, vram.BFloat16, vram.Int64, vram.Int32, vram.Int8, vram.Bool}
	formats := []vram.MemoryFormat{vram.ContiguousFormat, vram.ChannelsLast}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, f := range formats {
			for _, dt := range dtypes {
				t.Run(dev.String()+"/"+f.String()+"/"+dt.String(), func(t *testing.T) {
					raw := awkwardBytes(dt)
					build := func(fill bool) *stateBag {
						m := &stateBag{}
						x := vram.Zeros(vram.Shape{2, 2, 1, 2}, dt, dev)
						s := vram.Zeros(vram.Shape{}, dt, dev)
						if fill {
							x.SetRawBytes(raw)
							s.SetRawBytes(raw[:dt.Size()])
						}
						m.RegisterBuffer("x", x.Contiguous(f))
						m.RegisterBuffer("s", s)
						m.RegisterBuffer("empty", vram.Zeros(vram.Shape{0, 3}, dt, dev))
						return m
					}
					path := filepath.Join(t.TempDir(), "m.safetensors")
					if err := nn.Save(build(true), path); err != nil {
						t.Fatal(err)
					}
					dst := build(false)
					if err := nn.Load(dst, path); err != nil {
						t.Fatal(err)
					}
					sd := nn.StateDict(dst)
					if got := sd["x"].RawBytes(); !bytes.Equal(got, raw) {
						t.Errorf("x = % x, want % x", got, raw)
					}
					if got := sd["s"].RawBytes(); !bytes.Equal(got, raw[:dt.Size()]) {
						t.Errorf("s = % x, want % x", got, raw[:dt.Size()])
					}
					if !sd["x"].IsContiguous(f) || sd["x"].Device() != dev {
						t.Errorf("x lost its layout or device")
					}
				})
			}
		}
	}
}
