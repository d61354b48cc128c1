package vram

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseDevice(t *testing.T) {
	tests := []struct {
		in      string
		want    Device
		wantErr bool
	}{
		{"cpu", CPU, false},
		{" cpu ", CPU, false},
		{"cpu:0", CPU, false},
		{"cuda", CUDA(0), false},
		{"cuda:0", CUDA(0), false},
		{"cuda:1", CUDA(1), false},
		{"sim:0", Sim(0), false},
		{"sim", Sim(0), false},
		{"sim:3", Sim(3), false},
		{"", Device{}, true},
		{"gpu", Device{}, true},
		{"cuda:", Device{}, true},
		{"cuda:-1", Device{}, true},
		{"cuda:+1", Device{}, true},
		{"cuda:x", Device{}, true},
		{"cpu:1", Device{}, true},
		{"CUDA:0", Device{}, true},
		{"cuda:0:1", Device{}, true},
		{"cuda:-0", Device{}, true},
		{"cuda: 1", Device{}, true},
		{"cuda:1 ", CUDA(1), false},
		{"cuda:1.0", Device{}, true},
		{"cuda:1e1", Device{}, true},
		{"cuda:0x1", Device{}, true},
		{"cuda:1_0", Device{}, true},
		{"sim:NaN", Device{}, true},
		{"sim:Inf", Device{}, true},
		{"sim:2147483647", Sim(2147483647), false},
		{"sim:2147483648", Device{}, true},
		{"cuda:99999999999999999999", Device{}, true},
		{"cuda:007", CUDA(7), false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDevice(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseDevice(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Fatalf("ParseDevice(%q) = %v, want %v", tc.in, got, tc.want)
			}
			if err == nil {
				back, err := ParseDevice(got.String())
				if err != nil || back != got {
					t.Fatalf("round trip of %v gave %v, %v", got, back, err)
				}
			}
		})
	}
}

// FuzzParseDevice checks that every device string either fails with a
// one-line error or names a valid device whose String form parses back to
// it, blanks around it changing nothing. Seeds are in
// testdata/fuzz/FuzzParseDevice.
func FuzzParseDevice(f *testing.F) {
	for _, s := range []string{"cpu", "cuda:1", "sim:0", "cuda:", "x:y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 256 {
			return // device strings are a few bytes
		}
		d, err := ParseDevice(s)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.ContainsFunc(msg, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Fatalf("ParseDevice(%q): error %q is not one clean line", s, msg)
			}
			return
		}
		switch {
		case d.Kind != "cpu" && d.Kind != "cuda" && d.Kind != "sim":
			t.Fatalf("ParseDevice(%q) = %+v: unknown kind", s, d)
		case d.Index < 0, d.Kind == "cpu" && d.Index != 0:
			t.Fatalf("ParseDevice(%q) = %+v: bad index", s, d)
		}
		back, err := ParseDevice(d.String())
		if err != nil || back != d {
			t.Fatalf("%q parsed as %v, which round-trips to %v, %v", s, d, back, err)
		}
		if padded, err := ParseDevice(" \t" + s + "\n "); err != nil || padded != d {
			t.Fatalf("blanks around %q changed %v into %v, %v", s, d, padded, err)
		}
	})
}

func TestCurrentAndDefaultDevice(t *testing.T) {
	if CurrentDevice() != 0 || CUDA() != CUDA(0) {
		t.Fatalf("current CUDA device should start at 0")
	}
	if DefaultDevice() != CPU {
		t.Fatalf("default device %v, want cpu", DefaultDevice())
	}
	if err := SetDefaultDevice(Device{Kind: "tpu"}); err == nil {
		t.Fatal("SetDefaultDevice of an unknown kind should fail")
	}
	if !Sim(0).Available() {
		t.Skip("no sim devices")
	}
	if err := SetDefaultDevice(Sim(0)); err != nil {
		t.Fatal(err)
	}
	defer SetDefaultDevice(CPU)
	if d := Zeros(Shape{2}).Device(); d != Sim(0) {
		t.Fatalf("factory used %v, want sim:0", d)
	}
}

func TestCUDATakesOneIndex(t *testing.T) {
	x := Ones(Shape{2})
	defer x.Release()
	tests := []struct {
		name string
		call func()
	}{
		{"vram.CUDA(0, 1)", func() { CUDA(0, 1) }},
		{"vram.CUDA(1, 2, 3)", func() { CUDA(1, 2, 3) }},
		{"t.CUDA(1, 0)", func() { x.CUDA(1, 0) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Catch(tc.call)
			var e *Error
			if !errors.As(err, &e) || e.Kind != ErrArgument || e.Op != "cuda" || !strings.Contains(err.Error(), "one device index at most") {
				t.Fatalf("got %v, want an ErrArgument error of op cuda that allows one device index at most", err)
			}
		})
	}
	if d := CUDA(3); d != (Device{Kind: "cuda", Index: 3}) {
		t.Errorf("CUDA(3) = %v, want cuda:3", d)
	}
}

func TestUnavailableDevice(t *testing.T) {
	err := Catch(func() { Zeros(Shape{2}, CUDA(7)) })
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
}

func TestDeviceMismatch(t *testing.T) {
	if !Sim(1).Available() {
		t.Skip("no sim devices")
	}
	a := Ones(Shape{2, 2})
	b := Ones(Shape{2, 2}, Sim(1))
	ops := map[string]func(){
		"add":    func() { a.Add(b) },
		"matmul": func() { a.MatMul(b) },
		"where":  func() { Where(a.GtScalar(0), a, b) },
		"cat":    func() { Cat([]*Tensor{a, b}, 0) },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			err := Catch(op)
			var dm *DeviceMismatchError
			if !errors.As(err, &dm) || !errors.Is(err, ErrDevice) {
				t.Fatalf("got %v, want a DeviceMismatchError", err)
			}
			if dm.Expected != CPU || dm.Got != Sim(1) {
				t.Fatalf("devices %v and %v, want cpu and sim:1", dm.Expected, dm.Got)
			}
			msg := err.Error()
			for _, want := range []string{"cpu", "sim:1", "To("} {
				if !contains(msg, want) {
					t.Errorf("message %q does not mention %q", msg, want)
				}
			}
		})
	}
	// The fix works: move first.
	if got := a.Add(b.To(CPU)).Float64s(); got[0] != 2 {
		t.Fatalf("after To: %v", got)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}

// TestParseDeviceErrors checks the errors a new user meets first: each is
// of kind ErrArgument, quotes the string given, says what is wrong with it
// in PyTorch's words where PyTorch has some, and MustParseDevice panics
// with the same error rather than one wrapped in a second "vram:".
func TestParseDeviceErrors(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"cuda:x", []string{`"cuda:x"`, `index "x" is not a whole number`}},
		{"gpu", []string{`"gpu"`, `unknown device kind "gpu"`, `GPUs are "cuda" or "cuda:N"`}},
		{"GPU:0", []string{`"GPU:0"`, `GPUs are "cuda" or "cuda:N"`}},
		{"CUDA:0", []string{`"CUDA:0"`, `device kinds are lower case`}},
		{"gpu0", []string{`"gpu0"`, `GPUs are "cuda" or "cuda:N"`}},
		{"cuda0", []string{`"cuda0"`, `write "cuda:0"`}},
		{"sim12", []string{`"sim12"`, `write "sim:12"`}},
		{"cuda:-1", []string{`"cuda:-1"`, "device index must not be negative"}},
		{"sim:-3", []string{`"sim:-3"`, "device index must not be negative"}},
		{"cpu:1", []string{`"cpu:1"`, "the CPU has only index 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseDevice(tc.in)
			if !errors.Is(err, ErrArgument) {
				t.Fatalf("ParseDevice(%q) = %v, want an error of kind ErrArgument", tc.in, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ParseDevice(%q) = %q, want it to contain %q", tc.in, err, w)
				}
			}
			perr := Catch(func() { MustParseDevice(tc.in) })
			if perr == nil || perr.Error() != err.Error() {
				t.Errorf("MustParseDevice(%q) panicked with %v, want %v", tc.in, perr, err)
			}
		})
	}
}

// TestMissingDeviceErrors checks that using a device index the process
// has no device for says which indices exist, and that a negative index
// says it is negative rather than counting the devices.
func TestMissingDeviceErrors(t *testing.T) {
	n := SimDeviceCount()
	if n == 0 {
		t.Skip("no sim devices")
	}
	last := fmt.Sprintf("sim:%d", n-1)
	tests := []struct {
		dev  Device
		want []string
	}{
		{Sim(-1), []string{"sim:-1", "device index must not be negative", "sim:0 to " + last}},
		{Sim(n), []string{fmt.Sprintf("sim:%d", n), "sim:0 to " + last, "Config.SimDevices"}},
	}
	for _, tc := range tests {
		t.Run(tc.dev.String(), func(t *testing.T) {
			err := Catch(func() { Ones(Shape{2}, tc.dev) })
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Ones on %v: %v, want an error of kind ErrUnavailable", tc.dev, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Ones on %v: %q, want it to contain %q", tc.dev, err, w)
				}
			}
		})
	}
}
