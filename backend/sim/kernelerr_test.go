package sim

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
)

// TestKernelErrorsNameTheSimDevice: an error that a CPU kernel finds while
// running for a sim device names that device, not the cpu backend, on the
// default stream and on a side stream whose work fails at Synchronize.
func TestKernelErrorsNameTheSimDevice(t *testing.T) {
	const index = 3
	d := streamDevice(t, index)
	i64 := func(vals ...float64) backend.View {
		return backendtest.NewView(t, d, backend.Int64, []int{len(vals)}, vals)
	}
	tests := []struct {
		name string
		run  func() error
	}{
		{"gather", func() error {
			return d.Gather(d.DefaultStream(), f32(t, d, 0), f32(t, d, 1, 2), i64(-1), 0)
		}},
		{"scatter_add", func() error {
			return d.ScatterAdd(d.DefaultStream(), f32(t, d, 0, 0), i64(2), f32(t, d, 1), 0)
		}},
		{"integer division", func() error {
			return d.Binary(d.DefaultStream(), backend.Div, i64(0), i64(1), i64(0))
		}},
		{"fmod", func() error {
			return d.Fmod(d.DefaultStream(), i64(0), i64(1), i64(0))
		}},
		{"gather on a side stream", func() error {
			s := mustStream(t, d)
			if err := d.Gather(s, f32(t, d, 0), f32(t, d, 1, 2), i64(5), 0); err != nil {
				return fmt.Errorf("queued at once: %w", err)
			}
			return s.Synchronize()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if want := fmt.Sprintf("sim:%d: ", index); !strings.HasPrefix(msg, want) {
				t.Errorf("%q does not begin with %q", msg, want)
			}
			if strings.Contains(msg, "cpu") {
				t.Errorf("%q names the cpu backend", msg)
			}
		})
	}
}

// TestKernelErrorUnwraps: the sim device's form of a CPU kernel's error
// still matches what that error wraps.
func TestKernelErrorUnwraps(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"wrapped sentinel", fmt.Errorf("cpu: gather: %w", backend.ErrNotImplemented), "sim:1: gather: " + backend.ErrNotImplemented.Error()},
		{"no cpu prefix", backend.ErrNotImplemented, "sim:1: " + backend.ErrNotImplemented.Error()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := kernelError(1, tc.err)
			if got := err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
			if !errors.Is(err, backend.ErrNotImplemented) {
				t.Errorf("%v does not match backend.ErrNotImplemented", err)
			}
		})
	}
	if kernelError(1, nil) != nil {
		t.Error("kernelError(1, nil) is not nil")
	}
}
