package sim

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
	"github.com/vramgo/vram/memory"
)

func TestConformance(t *testing.T) {
	b := &Backend{}
	if b.DeviceCount() == 0 {
		t.Skip("VRAM_SIM_DEVICES=0")
	}
	dev, err := b.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	backendtest.Run(t, dev)
}

func TestParseDevices(t *testing.T) {
	tests := []struct {
		in   string
		want []int64
	}{
		{"", []int64{DefaultCapacity, DefaultCapacity}},
		{"   ", []int64{DefaultCapacity, DefaultCapacity}},
		{"0", nil},
		{" 0 ", nil},
		{"2x24GiB", []int64{24 << 30, 24 << 30}},
		{"2 x 24 GiB", []int64{24 << 30, 24 << 30}},
		{"80GiB,16GiB", []int64{80 << 30, 16 << 30}},
		{"1x512MiB, 1GB", []int64{512 << 20, 1e9}},
		{"4096", []int64{4096}},
		{"1", []int64{1}},
		{"1.5GiB", []int64{3 << 29}},
		{"0.5KiB", []int64{512}},
		{"64x1MiB", slices.Repeat([]int64{1 << 20}, 64)},
		{"32x1MiB,32x2MiB", append(slices.Repeat([]int64{1 << 20}, 32), slices.Repeat([]int64{2 << 20}, 32)...)},
		{"9223372036854775807", []int64{math.MaxInt64}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDevices(tc.in)
			if err != nil {
				t.Fatalf("ParseDevices(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseDevicesErrors(t *testing.T) {
	tests := []struct {
		in      string
		mention string // a word of the message
		size    bool   // the error wraps a *ParseError for a size
	}{
		{"2x", "empty size", true},
		{"0x1GiB", "less than 1", false},
		{"65x1GiB", "more than 64", false},
		{"+2x1GiB", "not a digit", false},
		{"-1x1GiB", "not a digit", false},
		{"1.5x1GiB", "not a digit", false},
		{"33x1GiB,32x1GiB", "more than 64 devices", false},
		{"-1GiB", "negative", true},
		{"lots", "does not start with a number", true},
		{"NaN", "does not start with a number", true},
		{"Inf", "does not start with a number", true},
		{"2xNaN", "does not start with a number", true},
		{"0.5", "less than 1 byte", true},
		{"2x0.5", "less than 1 byte", true},
		{"1.5", "not a whole number", true},
		{"0.5GiB,1.3", "not a whole number", true},
		{"00", "at least 1 byte", true},
		{"0,1GiB", "at least 1 byte", true},
		{"1e30", "unknown unit", true},
		{"1GiB,", "empty size", true},
		{",1GiB", "empty size", true},
		{"1GiB;2GiB", "unknown unit", true},
		{"9223372036854775808", "largest size", true},
		{"16EiB", "largest size", true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDevices(tc.in)
			if err == nil {
				t.Fatalf("ParseDevices(%q) = %v, want an error", tc.in, got)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.mention) || !strings.Contains(msg, strconv.Quote(strings.TrimSpace(tc.in))) || strings.Contains(msg, "\n") {
				t.Errorf("error %q is not one line naming %q and mentioning %q", msg, tc.in, tc.mention)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v wraps no *ParseError", err)
			}
			if (pe.What == "size") != tc.size {
				t.Errorf("error %v: a %s error, want size=%v", err, pe.What, tc.size)
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"24GiB": 24 << 30, "80GB": 80e9, "1024": 1024, " 1.5 GiB ": 3 << 29} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"NaN", "0.5", "0", "-1", "1e30", "Inf", "", "4GiB!"} {
		var pe *ParseError
		if got, err := ParseBytes(in); !errors.As(err, &pe) {
			t.Errorf("ParseBytes(%q) = %d, %v; want a *ParseError", in, got, err)
		}
	}
}

func TestCapacityIsEnforced(t *testing.T) {
	cpu, _ := backend.Lookup("cpu")
	host, _ := cpu.Device(0)
	d, err := newDevice(host, 0, 4<<20, memory.Config{}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Alloc(3<<20, nil, "weights")
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Alloc(3<<20, nil, "activations")
	var oom *memory.OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatalf("got %v, want a memory.OutOfMemoryError", err)
	}
	d.Free(b, nil)
	if got := d.Allocator().Stats().AllocatedBytes[0].Current; got != 0 {
		t.Fatalf("allocated %d after free", got)
	}
	if _, err := d.Alloc(3<<20, nil, ""); err != nil {
		t.Fatalf("the device must keep working after an OOM: %v", err)
	}
}

func TestShapeOnly(t *testing.T) {
	cpu, _ := backend.Lookup("cpu")
	host, _ := cpu.Device(0)
	d, err := newDevice(host, 0, 1<<40, memory.Config{}, true) // 1 TiB, no data
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Alloc(100<<30, nil, "") // 100 GiB on a laptop
	if err != nil {
		t.Fatal(err)
	}
	v := backend.View{Buf: b, DType: backend.Float32, Shape: []int{25 << 30}, Strides: []int{1}}
	if err := d.Fill(v, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyToHost(make([]byte, 4), v); err == nil {
		t.Fatal("reading a shape-only device should fail")
	}
	if err := d.SetShapeOnly(false); err == nil {
		t.Fatal("switching modes with live buffers should fail")
	}
	d.Free(b, nil)
	if err := d.SetShapeOnly(false); err != nil {
		t.Fatal(err)
	}
}
