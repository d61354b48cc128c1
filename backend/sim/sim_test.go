package sim

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
	"github.com/vramgo/vram/backend/selftest"
	"github.com/vramgo/vram/memory"
)

func TestConformance(t *testing.T) {
	b, err := New(Options{Devices: []int64{1 << 30}})
	if err != nil {
		t.Fatal(err)
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
		{"4TiB", []int64{4 << 40}},
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
		{"4194304TiB", "larger than any real device", false},
		{"2x5TiB", "larger than any real device", false},
		{"1GiB,7EiB", "larger than any real device", false},
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
	if err := d.Fill(d.DefaultStream(), v, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyToHost(d.DefaultStream(), make([]byte, 4), v); err == nil {
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

func TestFreeRefusesWhatItCannotFree(t *testing.T) {
	cpu, _ := backend.Lookup("cpu")
	host, _ := cpu.Device(0)
	d, err := newDevice(host, 0, 4<<20, memory.Config{}, false)
	if err != nil {
		t.Fatal(err)
	}
	freed, err := d.Alloc(1<<20, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	d.Free(freed, nil)
	// The block of the freed buffer goes to the next allocation: a second
	// free of the stale buffer must not free it.
	other, err := d.Alloc(1<<20, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	hostBuf, _ := host.Alloc(8, nil, "")
	tests := []struct {
		name string
		buf  backend.Buffer
		want string
	}{
		{"twice", freed, "freed twice"},
		{"nil", nil, "not a buffer of sim:0"},
		{"foreign", hostBuf, "not a buffer of sim:0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tc.want) {
					t.Fatalf("panic %v, want one saying %q", r, tc.want)
				}
			}()
			d.Free(tc.buf, nil)
		})
	}
	if got := d.Allocator().Stats().AllocatedBytes[0].Current; got != 1<<20 {
		t.Fatalf("allocated %d, want the other buffer's %d", got, 1<<20)
	}
	d.Free(other, nil)
	if got := d.Allocator().Stats().AllocatedBytes[0].Current; got != 0 {
		t.Fatalf("allocated %d after the last free", got)
	}
}

// TestConcurrentAllocFree allocates, writes and frees from several
// goroutines at once; under -race it checks the device's and the
// allocator's locking, and at the end that the counts balance.
func TestConcurrentAllocFree(t *testing.T) {
	cpu, _ := backend.Lookup("cpu")
	host, _ := cpu.Device(0)
	d, err := newDevice(host, 0, 64<<20, memory.Config{}, false)
	if err != nil {
		t.Fatal(err)
	}
	rounds := 400
	if testing.Short() {
		rounds = 100
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held []backend.Buffer
			for i := range rounds {
				n := int64(512 * (1 + (g*rounds+i)%37))
				b, err := d.Alloc(n, nil, "")
				if err != nil {
					t.Error(err)
					return
				}
				b.(backend.HostBuffer).Host()[0] = byte(g)
				held = append(held, b)
				if len(held) > 4 {
					d.Free(held[0], nil)
					held = held[1:]
				}
				_ = d.Allocator().Stats()
			}
			for _, b := range held {
				d.Free(b, nil)
			}
		}()
	}
	wg.Wait()
	st := d.Allocator().Stats()
	if got := st.AllocatedBytes[0].Current; got != 0 {
		t.Fatalf("allocated %d after every buffer was freed", got)
	}
	if st.Allocation[0].Allocated != st.Allocation[0].Freed || st.Allocation[0].Allocated != int64(8*rounds) {
		t.Fatalf("allocations %d, frees %d, want %d of each", st.Allocation[0].Allocated, st.Allocation[0].Freed, 8*rounds)
	}
	if n := d.live.Load(); n != 0 {
		t.Fatalf("%d buffers live after every buffer was freed", n)
	}
}

// TestOutOfMemoryNamesRoomyPeer checks that an out-of-memory error on one
// simulated device names another that has room for the work, and not one
// that has none.
func TestOutOfMemoryNamesRoomyPeer(t *testing.T) {
	cpu, _ := backend.Lookup("cpu")
	host, _ := cpu.Device(0)
	var devs []*Device
	for i, size := range []int64{64 << 20, 32 << 20, 512 << 20} {
		d, err := newDevice(host, i, size, memory.Config{}, true)
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, d)
	}
	setPeers(devs)
	b, err := devs[0].Alloc(40<<20, nil, "weights")
	if err != nil {
		t.Fatal(err)
	}
	defer devs[0].Free(b, nil)
	_, err = devs[0].Alloc(40<<20, nil, "activations")
	var oom *memory.OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatalf("got %v, want a memory.OutOfMemoryError", err)
	}
	if len(oom.Peers) != 2 || oom.Peers[0].Device != "sim:1" || oom.Peers[1].Device != "sim:2" || oom.Peers[1].Free != 512<<20 {
		t.Fatalf("peers %+v, want sim:1 and sim:2 with their memory", oom.Peers)
	}
	msg := err.Error()
	if !strings.Contains(msg, "other devices with room: sim:2 (512.00 MiB free of 512.00 MiB)") || !strings.Contains(msg, "or use sim:2") {
		t.Errorf("the message does not name sim:2, which has room:\n%s", msg)
	}
	if strings.Contains(msg, "sim:1") {
		t.Errorf("the message names sim:1, which has no room for 80 MiB:\n%s", msg)
	}
}

// TestOptionsValidate gives New and Configure invalid options: each error
// names the field, and a backend keeps the options it had.
func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"negative capacity", Options{Devices: []int64{1 << 30, -1}}, "sim: Options.Devices[1]: capacity -1 bytes: a sim device holds from 1 byte to 4.00 TiB"},
		{"zero capacity", Options{Devices: []int64{0}}, "sim: Options.Devices[0]: capacity 0 bytes"},
		{"capacity too large", Options{Devices: []int64{memory.MaxSimCapacity + 1}}, "Options.Devices[0]: capacity 4398046511105 bytes"},
		{"too many devices", Options{Devices: slices.Repeat([]int64{1 << 20}, MaxDevices+1)}, "Options.Devices lists 65 devices, more than 64 (sim.MaxDevices)"},
		{"bad allocator", Options{Alloc: memory.Config{MaxSplitSizeMB: 3}}, "sim: Options.Alloc: memory: Config.MaxSplitSizeMB = 3"},
		{"bad device allocator", Options{DeviceAlloc: map[int]memory.Config{1: {GarbageCollectionThreshold: 2}}}, "sim: Options.DeviceAlloc[1]: memory: Config.GarbageCollectionThreshold = 2"},
		{"no such device", Options{Devices: []int64{1 << 20}, DeviceAlloc: map[int]memory.Config{1: {}}}, "Options.DeviceAlloc[1]: there is no sim:1 (there is 1 device, sim:0)"},
		{"negative device", Options{DeviceAlloc: map[int]memory.Config{-1: {}}}, "Options.DeviceAlloc[-1]: there is no sim:-1"},
		{"device of none", Options{Devices: []int64{}, DeviceAlloc: map[int]memory.Config{0: {}}}, "Options.DeviceAlloc[0]: there is no sim:0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if b, err := New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, %v; want an error containing %q", b, err, tc.want)
			}
			b, err := New(Options{Devices: []int64{2 << 20}})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.setOptions(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("setOptions: %v, want an error containing %q", err, tc.want)
			}
			if got := b.Options().Devices; !slices.Equal(got, []int64{2 << 20}) {
				t.Errorf("after the refused options the devices are %v, want the old [2 MiB]", got)
			}
		})
	}
	var ce *memory.ConfigError
	if _, err := New(Options{Alloc: memory.Config{Policy: 9}}); !errors.As(err, &ce) || ce.Field != "Policy" {
		t.Errorf("a bad allocator setting: %v, want a *memory.ConfigError for Policy", err)
	}
}

// TestZeroOptions checks that the zero Options and the zero Backend give
// the defaults.
func TestZeroOptions(t *testing.T) {
	for name, b := range map[string]*Backend{"zero Backend": {}, "New(Options{})": must(New(Options{}))} {
		if n := b.DeviceCount(); n != DefaultCount {
			t.Fatalf("%s: %d devices, want %d", name, n, DefaultCount)
		}
		for i := range DefaultCount {
			d := must(b.Device(i)).(*Device)
			if d.Capacity() != DefaultCapacity || d.ShapeOnly() || d.Allocator().Config() != (memory.Config{}) {
				t.Errorf("%s: sim:%d has %d bytes, shape-only %v, allocator %+v; want the defaults", name, i, d.Capacity(), d.ShapeOnly(), d.Allocator().Config())
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestOptionsApplied makes a backend with every option set: the devices
// have the capacities, the mode and, per device, the allocator settings.
func TestOptionsApplied(t *testing.T) {
	pytorch := memory.Config{Policy: memory.PolicyPyTorch, MaxSplitSizeMB: 64}
	gc := memory.Config{GarbageCollectionThreshold: 0.5}
	b, err := New(Options{Devices: []int64{1 << 30, 2 << 30, 3 << 30}, ShapeOnly: true, Alloc: gc,
		DeviceAlloc: map[int]memory.Config{1: pytorch}})
	if err != nil {
		t.Fatal(err)
	}
	if n := b.DeviceCount(); n != 3 {
		t.Fatalf("%d devices, want 3", n)
	}
	for i, want := range []memory.Config{gc, pytorch, gc} {
		d := must(b.Device(i)).(*Device)
		if d.Capacity() != int64(i+1)<<30 || !d.ShapeOnly() {
			t.Errorf("sim:%d: %d bytes, shape-only %v", i, d.Capacity(), d.ShapeOnly())
		}
		if got := d.Allocator().Config(); got != want {
			t.Errorf("sim:%d: allocator %+v, want %+v", i, got, want)
		}
	}
}

func TestNoDevicesConfigured(t *testing.T) {
	b := must(New(Options{Devices: []int64{}}))
	if n := b.DeviceCount(); n != 0 {
		t.Fatalf("DeviceCount = %d, want 0", n)
	}
	if _, err := b.Device(0); err == nil || !strings.Contains(err.Error(), "configured with none") {
		t.Errorf("Device(0): %v, want an error saying the backend has none", err)
	}
}

// TestOptionsFixedAtFirstUse checks that options can change until the
// first use and not after it, except to the same options.
func TestOptionsFixedAtFirstUse(t *testing.T) {
	b := &Backend{}
	if err := b.setOptions(Options{Devices: []int64{1 << 20}}); err != nil {
		t.Fatal(err)
	}
	if err := b.setOptions(Options{Devices: []int64{4 << 20}}); err != nil {
		t.Fatal(err)
	}
	if n := b.DeviceCount(); n != 1 || must(b.Device(0)).(*Device).Capacity() != 4<<20 {
		t.Fatalf("the last options before the first use must apply")
	}
	if err := b.setOptions(Options{Devices: []int64{4 << 20}}); err != nil {
		t.Errorf("the same options again: %v", err)
	}
	err := b.setOptions(Options{Devices: []int64{8 << 20}})
	if err == nil || !strings.Contains(err.Error(), "options are fixed at their first use") {
		t.Errorf("other options after the first use: %v", err)
	}
	if got := b.Options().Devices; !slices.Equal(got, []int64{4 << 20}) {
		t.Errorf("options %v after the refusal", got)
	}
}

// TestOptionsRace sets options from several goroutines while others use
// the backend: the devices are those of one of the options, and every
// setOptions after the first use fails (run with -race).
func TestOptionsRace(t *testing.T) {
	for range 20 {
		b := &Backend{}
		var wg sync.WaitGroup
		accepted := make([]bool, 8)
		for i := range accepted {
			wg.Add(2)
			go func() {
				defer wg.Done()
				accepted[i] = b.setOptions(Options{Devices: []int64{int64(i+1) << 20}}) == nil
			}()
			go func() {
				defer wg.Done()
				b.DeviceCount()
			}()
		}
		wg.Wait()
		c := must(b.Device(0)).(*Device).Capacity()
		i := int(c>>20) - 1
		if c%(1<<20) != 0 || (c != DefaultCapacity && (i < 0 || i >= len(accepted) || !accepted[i])) {
			t.Fatalf("sim:0 has %d bytes: not the capacity of accepted options (%v)", c, accepted)
		}
	}
}

// TestSelfTest runs the sim self-test: its devices are its own, whatever
// the backend's options.
func TestSelfTest(t *testing.T) {
	checks := SelfTest()
	want := []string{"alloc", "copies", "kernels", "matmul", "sync", "caching allocator", "out-of-memory error", "shape-only device"}
	if len(checks) != len(want) {
		t.Fatalf("%d checks %+v, want %v", len(checks), checks, want)
	}
	for i, c := range checks {
		t.Logf("%s: %s: %s", c.Name, c.Status, c.Detail)
		if c.Name != want[i] || c.Status != selftest.Pass {
			t.Errorf("check %d: %+v, want %q to pass", i, c, want[i])
		}
	}
}
