package main

import (
	"testing"

	"github.com/vramgo/vram"
)

// TestDemoDeviceExitCodes asks demo for devices this machine lacks. A GPU
// on a machine without CUDA is a failure of the machine (status 1), as it
// is for replay --device and for smi, watch and doctor without a driver:
// no other command line would give it. A sim device past those
// VRAM_SIM_DEVICES configures is a bad value (status 2).
func TestDemoDeviceExitCodes(t *testing.T) {
	if vram.CUDAAvailable() {
		t.Skip("CUDA is available: the GPU cases would train")
	}
	tests := []struct {
		device string
		code   int
		want   string
	}{
		{"cuda", exitFailure, "demo: --device cuda:0: device not available: "},
		{"cuda:1", exitFailure, "demo: --device cuda:1: device not available: "},
		{"sim:99", exitUsage, "demo: --device sim:99: device not available: there are 2 sim devices"},
		{"sim:2", exitUsage, "demo: --device sim:2: device not available: "},
	}
	for _, tc := range tests {
		t.Run(tc.device, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "demo", "--device", tc.device, "--steps", "1")
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout not empty:\n%s", stdout)
			}
			checkErrorLine(t, stderr, tc.want)
		})
	}
}
