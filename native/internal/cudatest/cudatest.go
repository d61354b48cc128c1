// Package cudatest holds the helpers that the native packages' GPU tests
// share: finding the driver and a device, or skipping.
//
// A GPU test calls [Require] first. Without a usable driver and device the
// test is skipped, unless the environment sets VRAM_REQUIRE_CUDA=1 (as the
// GPU machine's script does), in which case it fails.
package cudatest

import (
	"os"
	"testing"

	"github.com/vramgo/vram/native/cuda"
)

// EnvRequire names the variable that turns skips into failures.
const EnvRequire = "VRAM_REQUIRE_CUDA"

// Required reports whether VRAM_REQUIRE_CUDA=1 is set.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// SkipOrFail skips the test, or fails it when CUDA is required.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// Require loads and initialises the driver and returns every device,
// skipping (or failing) the test when there is no driver or no device.
func Require(t testing.TB) []cuda.Device {
	t.Helper()
	if _, err := cuda.Load(); err != nil {
		SkipOrFail(t, "no CUDA driver: %v", err)
	}
	if err := cuda.Init(0); err != nil {
		SkipOrFail(t, "cuInit: %v", err)
	}
	n, err := cuda.DeviceGetCount()
	if err != nil || n == 0 {
		SkipOrFail(t, "no CUDA device (count %d, %v)", n, err)
	}
	devs := make([]cuda.Device, n)
	for i := range devs {
		if devs[i], err = cuda.DeviceGet(i); err != nil {
			t.Fatalf("cuDeviceGet(%d): %v", i, err)
		}
	}
	return devs
}

// Context retains dev's primary context for the test and releases it when
// the test ends.
func Context(t testing.TB, dev cuda.Device) cuda.Context {
	t.Helper()
	ctx, err := cuda.DevicePrimaryCtxRetain(dev)
	if err != nil {
		t.Fatalf("cuDevicePrimaryCtxRetain: %v", err)
	}
	t.Cleanup(func() {
		if err := cuda.DevicePrimaryCtxRelease(dev); err != nil {
			t.Errorf("cuDevicePrimaryCtxRelease_v2: %v", err)
		}
	})
	return ctx
}
