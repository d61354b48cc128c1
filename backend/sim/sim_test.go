package sim

import (
	"errors"
	"reflect"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
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
		bad  bool
	}{
		{"", []int64{DefaultCapacity, DefaultCapacity}, false},
		{"0", nil, false},
		{"2x24GiB", []int64{24 << 30, 24 << 30}, false},
		{"80GiB,16GiB", []int64{80 << 30, 16 << 30}, false},
		{"1x512MiB, 1GB", []int64{512 << 20, 1e9}, false},
		{"4096", []int64{4096}, false},
		{"2x", nil, true},
		{"0x1GiB", nil, true},
		{"-1GiB", nil, true},
		{"lots", nil, true},
		{"1.5GiB", []int64{3 << 29}, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDevices(tc.in)
			if (err != nil) != tc.bad {
				t.Fatalf("error %v, want error %v", err, tc.bad)
			}
			if !tc.bad && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCapacityIsEnforced(t *testing.T) {
	d := &Device{capacity: 1024}
	cpu, _ := backend.Lookup("cpu")
	d.Device, _ = cpu.Device(0)
	b, err := d.Alloc(1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Alloc(100, nil)
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) || oom.Requested != 100 || oom.Used != 1000 {
		t.Fatalf("got %v, want an OutOfMemoryError", err)
	}
	d.Free(b, nil)
	if d.Used() != 0 {
		t.Fatalf("used %d after free", d.Used())
	}
}
