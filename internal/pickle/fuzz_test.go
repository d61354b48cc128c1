package pickle

import (
	"bufio"
	"bytes"
	"errors"
	"testing"

	"github.com/vramgo/vram/internal/fuzztest"
)

// Memory one decode of a fuzz input may allocate: the read buffer, the
// first arena and memo chunks, and fuzzBudget for the values, with room.
const (
	fuzzBudget   = 1 << 20
	allocFixed   = 8 << 20
	allocPerByte = 64
)

// FuzzDecode decodes arbitrary input with and without Objects: it never
// panics, fails with the decoder's *Error or a Builder's or Objects'
// error, consumes no more than the input, and allocates within a bound
// whatever the input.
func FuzzDecode(f *testing.F) {
	f.Add(p(OpProto, 2, OpMark, OpShortBinUni, 1, "a", OpNone, OpDict, OpStop), false)
	f.Add(p(OpProto, 4, OpEmptyList, OpBinPut, 0, OpMark, OpBinGet, 0, OpBinGet, 0, OpAppends, OpStop), false)
	f.Add(p(OpProto, 4, OpFrame, u64(3), OpNewTrue, OpMemoize, OpTuple1, OpStop), false)
	f.Add(p(OpProto, 2, OpLong1, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, OpStop), false)
	f.Add(p(OpProto, 4, OpBinUnicode8, u64(1<<62), "short"), false)
	f.Add(p(OpProto, 2, OpGlobal, "m\nf\n", OpEmptyTuple, OpReduce, OpEmptyDict, OpBuild, OpStop), true)
	f.Add(p(OpProto, 4, OpShortBinUni, 1, "m", OpShortBinUni, 1, "f", OpStackGlobal, OpNone, OpBinPersID, OpTuple2, OpStop), true)
	f.Fuzz(func(t *testing.T, data []byte, withObjects bool) {
		if len(data) > 64<<10 {
			return
		}
		cfg := Config{Budget: func(int64) int64 { return fuzzBudget }, Size: int64(len(data))}
		if withObjects {
			cfg.Objects = objects{}
		}
		before := fuzztest.HeapAllocated()
		d := NewDecoder(bufio.NewReader(bytes.NewReader(data)), builder{}, cfg)
		_, err := d.Decode()
		fuzztest.CheckAllocated(t, "Decode", len(data), before, allocFixed, allocPerByte)
		if d.Offset() > int64(len(data)) || d.OpOffset() > d.Offset() {
			t.Fatalf("Offset() = %d, OpOffset() = %d for %d bytes", d.Offset(), d.OpOffset(), len(data))
		}
		var pe *Error
		var te testError
		if err != nil && !errors.As(err, &pe) && !errors.As(err, &te) {
			t.Fatalf("err = %v (%T), want an *Error or the builder's", err, err)
		}
		if pe != nil && pe.Error() == "" {
			t.Fatal("an error without a message")
		}
	})
}
