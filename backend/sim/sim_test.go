package sim

import (
	"errors"
	"reflect"
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

func TestParseShapeOnly(t *testing.T) {
	tests := []struct {
		in   string
		want bool
		bad  bool
	}{
		{"", false, false}, {"0", false, false}, {"false", false, false}, {"No", false, false}, {"off", false, false},
		{"1", true, false}, {"true", true, false}, {"TRUE", true, false}, {"yes", true, false}, {" on ", true, false},
		{"2", false, true}, {"maybe", false, true}, {"y", false, true}, {"\x1b[31m", false, true},
	}
	for _, tc := range tests {
		got, err := ParseShapeOnly(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseShapeOnly(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.bad)
		}
		if err != nil && !strings.Contains(err.Error(), "want 1, true, yes or on") {
			t.Errorf("ParseShapeOnly(%q): %q does not list the accepted values", tc.in, err)
		}
	}
}

// TestBadEnvironment sets each variable the backend reads to a bad value:
// there must be no devices, and every way of asking for one must return the
// error, naming the variable.
func TestBadEnvironment(t *testing.T) {
	tests := []struct {
		env, value string
		want       string // in the error
		as         any    // the error type errors.As must find
	}{
		{EnvShapeOnly, "maybe", `VRAM_SIM_SHAPE_ONLY="maybe": not a boolean (want 1, true, yes or on`, new(*EnvError)},
		{EnvDevices, "lots", `VRAM_SIM_DEVICES="lots": `, new(*EnvError)},
		{EnvDevices, "2x", `VRAM_SIM_DEVICES="2x": `, new(*EnvError)},
		{"VRAM_ALLOC_CONF", "bogus", "VRAM_ALLOC_CONF: bogus", new(*memory.ConfigError)},
	}
	for _, tc := range tests {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			b := &Backend{}
			if n := b.DeviceCount(); n != 0 {
				t.Errorf("DeviceCount = %d, want 0 with an invalid environment", n)
			}
			_, cerr := b.Config()
			_, derr := b.Device(0)
			for name, err := range map[string]error{"Config": cerr, "Device": derr} {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
					continue
				}
				if !errors.As(err, tc.as) {
					t.Errorf("%s: %v (%T) is not a %T", name, err, err, tc.as)
				}
				if strings.Count(err.Error(), tc.env) != 1 {
					t.Errorf("%s: %q names %s more than once", name, err, tc.env)
				}
			}
		})
	}
}

func TestShapeOnlyFromEnvironment(t *testing.T) {
	t.Setenv(EnvDevices, "1x1GiB")
	t.Setenv(EnvShapeOnly, "yes")
	b := &Backend{}
	if n := b.DeviceCount(); n != 1 {
		t.Fatalf("DeviceCount = %d, want 1", n)
	}
	d, err := b.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	if !d.(*Device).ShapeOnly() {
		t.Error("VRAM_SIM_SHAPE_ONLY=yes did not make the device shape-only")
	}
}

func TestNoDevicesConfigured(t *testing.T) {
	t.Setenv(EnvDevices, "0")
	b := &Backend{}
	if n := b.DeviceCount(); n != 0 {
		t.Fatalf("DeviceCount = %d, want 0", n)
	}
	if _, err := b.Device(0); err == nil || !strings.Contains(err.Error(), `VRAM_SIM_DEVICES="0" configures none`) {
		t.Errorf("Device(0): %v, want an error saying VRAM_SIM_DEVICES=\"0\" configures none", err)
	}
}
