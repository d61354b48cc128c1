package torchload

import (
	"strconv"
	"testing"

	"github.com/vramgo/vram/nn"
)

// BenchmarkUnpickle decodes the pickle of a state dict of 20,000 tensors.
func BenchmarkUnpickle(b *testing.B) {
	var sd odict
	for i := range 20000 {
		sd = append(sd, kv{"layer" + strconv.Itoa(i) + ".weight", f32(strconv.Itoa(i), 4, 4)})
	}
	pkl := pickle(sd)
	b.SetBytes(int64(len(pkl)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := unpickle(pkl); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadPyTorch loads a checkpoint of 64 MB, sixteen float32
// Linear(1024, 1024) layers, into the model it was saved from.
func BenchmarkLoadPyTorch(b *testing.B) {
	mods := make([]nn.Module, 16)
	for i := range mods {
		mods[i] = nn.NewLinear(1024, 1024)
	}
	m := nn.NewSequential(mods...)
	defer nn.Release(m)
	path := saveTorch(b, m, "", nil)
	var size int64
	for _, x := range nn.StateDict(m) {
		size += x.Bytes()
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadPyTorch(m, path, true); err != nil {
			b.Fatal(err)
		}
	}
}
