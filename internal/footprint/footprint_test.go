package footprint

import (
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend/cpu"
)

func TestMain(m *testing.M) {
	if err := vram.Configure(vram.Config{SimDevices: []int64{64 << 20}}); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// TestSaturatingArithmetic checks that Mul and Add give math.MaxInt64 for
// results no int64 holds rather than wrap around to small or negative
// counts.
func TestSaturatingArithmetic(t *testing.T) {
	tests := []struct {
		name string
		got  int64
		want int64
	}{
		{"small product", Mul(6, 7), 42},
		{"product with 0", Mul(0, math.MaxInt64), 0},
		{"largest product", Mul(math.MaxInt64, 1), math.MaxInt64},
		{"2^32 squared", Mul(1<<32, 1<<32), math.MaxInt64},
		{"just past", Mul(1<<62, 2), math.MaxInt64},
		{"small sum", Add(40, 2), 42},
		{"sum past", Add(math.MaxInt64-1, 2), math.MaxInt64},
		{"saturated sum", Add(math.MaxInt64, math.MaxInt64), math.MaxInt64},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}

// TestFootprintCounts checks the tensors and bytes that Of, Add, Times
// and Plus count, the device and dtype read from the options as the
// factories read them, and that shapes whose bytes overflow saturate.
func TestFootprintCounts(t *testing.T) {
	f, dt := Of(nil)
	if f.Device != vram.DefaultDevice() || dt != vram.Float32 {
		t.Errorf("Of(nil) = %v, %v; want the default device and float32", f.Device, dt)
	}
	f, dt = Of([]vram.Option{vram.Float16, vram.Sim(0), vram.CPU, vram.Float64})
	if f.Device != vram.CPU || dt != vram.Float64 {
		t.Errorf("Of gave %v, %v; want the last device and dtype, cpu and float64", f.Device, dt)
	}
	tests := []struct {
		name           string
		f              Footprint
		tensors, bytes int64
	}{
		{"three matrices", *(&Footprint{}).Add(3, vram.Float32, 4, 5), 3, 240},
		{"scalars", *(&Footprint{}).Add(2, vram.Int64), 2, 16},
		{"negative count and size", *(&Footprint{}).Add(-1, vram.Float32, 4).Add(1, vram.Float32, -4), 1, 0},
		{"times", (&Footprint{}).Add(2, vram.Float16, 8).Times(1 << 10), 2 << 10, 32 << 10},
		{"plus", (&Footprint{}).Add(1, vram.Float32, 2).Plus(*(&Footprint{}).Add(1, vram.Float64, 2)), 2, 24},
		{"bytes past an int64", *(&Footprint{}).Add(1, vram.Float32, 1<<31, 1<<31, 1<<2), 1, math.MaxInt64},
		{"times past an int64", (&Footprint{}).Add(1<<40, vram.Float32, 1).Times(1 << 40), math.MaxInt64, math.MaxInt64},
	}
	for _, tt := range tests {
		if tt.f.Tensors != tt.tensors || tt.f.Bytes != tt.bytes {
			t.Errorf("%s: %d tensors of %d bytes, want %d of %d", tt.name, tt.f.Tensors, tt.f.Bytes, tt.tensors, tt.bytes)
		}
	}
}

// TestCheck checks that Check passes what fits and refuses, with an
// ErrOutOfMemory error naming the operation, the arguments and the
// bytes, what overflows an int64, what is more than the host's limit
// and what is more than the whole memory of the device it goes to.
func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		f    Footprint
		want []string // nil when it fits
	}{
		{"fits on the CPU", Footprint{Device: vram.CPU, Tensors: 4, Bytes: 1 << 20}, nil},
		{"fits on a sim device", Footprint{Device: vram.Sim(0), Tensors: 4, Bytes: 32 << 20}, nil},
		{"bytes past an int64", Footprint{Device: vram.CPU, Tensors: 1, Bytes: math.MaxInt64}, []string{"int64"}},
		{"tensors past an int64", Footprint{Device: vram.CUDA(0), Tensors: math.MaxInt64 / 2}, []string{"int64"}},
		{"past the host's memory", Footprint{Device: vram.CPU, Tensors: 1, Bytes: 1 << 60},
			[]string{"host memory", "1152921504606847104 bytes", "the CPU device's limit"}},
		{"bookkeeping past the host's memory", Footprint{Device: vram.CUDA(0), Tensors: 1 << 40},
			[]string{"host memory", "in 1099511627776 tensors"}},
		{"past a sim device's memory", Footprint{Device: vram.Sim(0), Tensors: 1, Bytes: 65 << 20},
			[]string{"memory on sim:0", "68157440 bytes", "all of sim:0's memory", "64.00 MiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if slices.Contains(tt.want, "host memory") && cpu.MemoryLimit() == 0 {
				t.Skip("the host's memory is unknown here and no limit is configured")
			}
			err := vram.Catch(func() { tt.f.Check("stack", "num_layers 7") })
			if tt.want == nil {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			var e *vram.Error
			if !errors.As(err, &e) || e.Kind != vram.ErrOutOfMemory || e.Op != "stack" {
				t.Fatalf("got %v, want an ErrOutOfMemory *vram.Error of stack", err)
			}
			for _, part := range append(tt.want, "num_layers 7 need", "nothing was allocated") {
				if !strings.Contains(e.Detail, part) {
					t.Errorf("%q does not say %q", e.Detail, part)
				}
			}
		})
	}
}
