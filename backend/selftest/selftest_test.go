package selftest_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/cpu"
	"github.com/vramgo/vram/backend/selftest"
	"github.com/vramgo/vram/memory"
)

func cpuDevice(t *testing.T) backend.Device {
	t.Helper()
	d, err := (&cpu.Backend{}).Device(0)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDeviceOnCPU(t *testing.T) {
	checks := selftest.Device(cpuDevice(t))
	want := []string{"alloc", "copies", "kernels", "matmul", "sync"}
	if len(checks) != len(want) {
		t.Fatalf("%d checks, want %v", len(checks), want)
	}
	for i, c := range checks {
		t.Logf("%s: %s: %s (%v)", c.Name, c.Status, c.Detail, c.Duration)
		if c.Name != want[i] || c.Status != selftest.Pass || c.Detail == "" {
			t.Errorf("check %d: %+v, want %q passing with a detail", i, c, want[i])
		}
	}
	if n := selftest.Failed(checks); n != 0 {
		t.Errorf("Failed = %d", n)
	}
}

// broken wraps the CPU device with one fault.
type broken struct {
	backend.Device
	fault string
}

// wrongBuffer is a buffer smaller than asked.
type wrongBuffer struct{ backend.Buffer }

func (wrongBuffer) Bytes() int64 { return 0 }

func (b broken) Alloc(n int64, s backend.Stream, region string) (backend.Buffer, error) {
	switch {
	case b.fault == "negative alloc" && n < 0:
		return b.Device.Alloc(0, s, region)
	case b.fault == "short alloc" && n > 100:
		buf, err := b.Device.Alloc(n, s, region)
		return wrongBuffer{buf}, err
	case b.fault == "alloc fails" && n > 100:
		return nil, errors.New("out of memory")
	}
	return b.Device.Alloc(n, s, region)
}

func (b broken) Free(buf backend.Buffer, s backend.Stream) {
	if w, ok := buf.(wrongBuffer); ok {
		buf = w.Buffer
	}
	b.Device.Free(buf, s)
}

func (b broken) CopyToHost(s backend.Stream, dst []byte, src backend.View) error {
	err := b.Device.CopyToHost(s, dst, src)
	if b.fault == "flip byte" && len(dst) > 1000 {
		dst[777] ^= 1
	}
	return err
}

func (b broken) Binary(s backend.Stream, op backend.BinaryOp, dst, x, y backend.View) error {
	switch b.fault {
	case "wrong add":
		if op == backend.Add {
			op = backend.Sub
		}
	case "panic":
		panic("kernel exploded")
	}
	return b.Device.Binary(s, op, dst, x, y)
}

func (b broken) Reduce(s backend.Stream, op backend.ReduceOp, dst, src backend.View, axes []int) error {
	if b.fault == "no reduce" {
		return nil // leaves the NaN the check wrote first
	}
	return b.Device.Reduce(s, op, dst, src, axes)
}

func (b broken) MatMul(s backend.Stream, dst, x, y backend.View) error {
	switch b.fault {
	case "no matmul":
		return nil
	case "wrong matmul":
		if err := b.Device.MatMul(s, dst, x, y); err != nil {
			return err
		}
		return b.Device.Scalar(s, backend.Mul, dst, dst, 1.01, false)
	}
	return b.Device.MatMul(s, dst, x, y)
}

// failingStream is the default stream, failing its Synchronize.
type failingStream struct{ backend.Stream }

func (failingStream) Synchronize() error { return errors.New("illegal address (asynchronous)") }

func (b broken) DefaultStream() backend.Stream {
	if b.fault == "sync" {
		return failingStream{b.Device.DefaultStream()}
	}
	return b.Device.DefaultStream()
}

// TestDeviceFindsFaults runs the device checks on devices with one fault
// each: the check that covers it must fail and say what it saw, and the
// others must not crash.
func TestDeviceFindsFaults(t *testing.T) {
	tests := []struct {
		fault, check, detail string
	}{
		{"negative alloc", "alloc", "Alloc(-1) succeeded"},
		{"short alloc", "alloc", "returned a buffer of 0 bytes"},
		{"alloc fails", "alloc", "out of memory"},
		{"flip byte", "copies", "byte 777 came back"},
		{"wrong add", "kernels", "(1.5 + b) * 1.5 at element"},
		{"panic", "kernels", "panicked: kernel exploded"},
		{"no reduce", "kernels", "sum of row 0 is NaN"},
		{"no matmul", "matmul", "NaN"},
		{"wrong matmul", "matmul", "of the sum of |products|"},
		{"sync", "sync", "illegal address"},
	}
	for _, tc := range tests {
		t.Run(tc.fault, func(t *testing.T) {
			checks := selftest.Device(broken{cpuDevice(t), tc.fault})
			found := false
			for _, c := range checks {
				if c.Name != tc.check {
					continue
				}
				found = true
				if c.Status != selftest.Fail || !strings.Contains(c.Detail, tc.detail) {
					t.Errorf("%s: %s %q, want a failure saying %q", c.Name, c.Status, c.Detail, tc.detail)
				}
			}
			if !found {
				t.Fatalf("no check %q", tc.check)
			}
			if selftest.Failed(checks) == 0 {
				t.Error("Failed counts no failure")
			}
		})
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		fn     func() (string, error)
		status selftest.Status
		detail string
	}{
		{"pass", func() (string, error) { return "fine", nil }, selftest.Pass, "fine"},
		{"error", func() (string, error) { return "ignored", errors.New("broken") }, selftest.Fail, "broken"},
		{"panic", func() (string, error) { panic("boom") }, selftest.Fail, "panicked: boom"},
		{"nil map panic", func() (string, error) {
			var m map[string]int
			m["x"] = 1
			return "", nil
		}, selftest.Fail, "panicked: assignment to entry in nil map"},
		{"slow", func() (string, error) { time.Sleep(2 * time.Millisecond); return "slept", nil }, selftest.Pass, "slept"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := selftest.Run(tc.name, tc.fn)
			if c.Name != tc.name || c.Status != tc.status || c.Detail != tc.detail || c.Duration <= 0 {
				t.Errorf("%+v, want %s %q", c, tc.status, tc.detail)
			}
		})
	}
	s := selftest.Skipped("peer copy", "one GPU")
	if s.Status != selftest.Skip || s.Detail != "one GPU" || s.Duration != 0 {
		t.Errorf("Skipped: %+v", s)
	}
	if n := selftest.Failed([]selftest.Check{s, {Status: selftest.Pass}, {Status: selftest.Fail}}); n != 1 {
		t.Errorf("Failed = %d, want 1 (skips are not failures)", n)
	}
}

// TestAllocatorPolicies runs the allocator check under every placement
// policy and a few settings that change rounding and splitting: it must
// pass under each, on a device with memory in use around it.
func TestAllocatorPolicies(t *testing.T) {
	for _, conf := range []string{
		"", "policy:pytorch", "policy:pytorch,expandable_segments:True", "max_split_size_mb:32",
		"policy:pytorch,roundup_power2_divisions:4", "garbage_collection_threshold:0.5", "per_process_memory_fraction:0.9",
	} {
		t.Run(conf, func(t *testing.T) {
			cfg, err := memory.ParseConfig(conf)
			if err != nil {
				t.Fatal(err)
			}
			a := memory.New(memory.NewSimArena(512<<20), cfg)
			live, err := a.Alloc(30<<20, 0, "live") // a block the check must leave alone
			if err != nil {
				t.Fatal(err)
			}
			small, err := a.Alloc(1000, 0, "live")
			if err != nil {
				t.Fatal(err)
			}
			c := selftest.Allocator(a, 0)
			if c.Status != selftest.Pass {
				t.Fatalf("%+v", c)
			}
			t.Log(c.Detail)
			if s := a.Stats(); s.AllocatedBytes[memory.StatAll].Current != live.Size()+small.Size() {
				t.Errorf("the check changed the live blocks: %d bytes allocated", s.AllocatedBytes[memory.StatAll].Current)
			}
			a.Free(live)
			a.Free(small)
		})
	}
}

// TestAllocatorFindsFaults runs the allocator check on an allocator that
// cannot serve it.
func TestAllocatorFindsFaults(t *testing.T) {
	full := memory.New(memory.NewSimArena(32<<20), memory.Config{})
	if c := selftest.Allocator(full, 0); c.Status != selftest.Fail || !strings.Contains(c.Detail, "Alloc(64.00 MiB)") {
		t.Errorf("on a 32 MiB device: %+v", c)
	}
}

func TestCompareMatMul(t *testing.T) {
	a := []float32{1, 2, 3, 4} // [1, 2, 2]
	b := []float32{5, 6, 7, 8}
	good := []float32{19, 22, 43, 50}
	if worst, err := selftest.CompareMatMul(good, a, b, 1, 2, 2, 2, 1e-6); err != nil || worst != 0 {
		t.Errorf("exact product: %v, %v", worst, err)
	}
	for _, bad := range [][]float32{{19, 22, 43, 51}, {19, 22, float32(math.NaN()), 50}, {19, 22, 43, float32(math.Inf(1))}} {
		if _, err := selftest.CompareMatMul(bad, a, b, 1, 2, 2, 2, 1e-3); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	zero := []float32{0, 0, 0, 0}
	if _, err := selftest.CompareMatMul(zero, zero, zero, 1, 2, 2, 2, 1e-6); err != nil {
		t.Errorf("zero inputs: %v", err)
	}
}
