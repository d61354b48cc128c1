package torchload

import (
	"strconv"
	"testing"
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
