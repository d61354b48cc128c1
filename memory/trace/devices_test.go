package trace

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestPyTorchDeviceRange checks that a PyTorch snapshot numbering a device
// at or past MaxDevices is refused, in a segment or in device_traces,
// pickled or saved as JSON: each device becomes a Snapshot (and a report
// of vram analyze), so a small file listing 200,000 devices of one event
// each took 45 s and 670 MB to analyze. Devices below the bound, and
// empty traces past it, are read.
func TestPyTorchDeviceRange(t *testing.T) {
	seg := func(dev int) string {
		return fmt.Sprintf(`{"device": %d, "address": 4096, "total_size": 512, "segment_type": "small", "blocks": [{"size": 512, "state": "inactive"}]}`, dev)
	}
	traces := func(n int, last string) string {
		return `{"device_traces": [` + strings.Repeat(`[], `, n) + `[` + last + `]]}`
	}
	const ev = `{"action": "alloc", "addr": 4096, "size": 512, "stream": 0}`
	tests := []struct {
		name, in string
		want     string // error; "" for none
		devices  int
	}{
		{"segment on the last device", `{"segments": [` + seg(MaxDevices-1) + `]}`, "", 1},
		{"segment past the last device", `{"segments": [` + seg(MaxDevices) + `]}`, fmt.Sprintf("segments[0]: device %d out of range: PyTorch numbers devices from 0 to %d", MaxDevices, MaxDevices-1), 0},
		{"trace on the last device", traces(MaxDevices-1, ev), "", 1},
		{"trace past the last device", traces(MaxDevices, ev), fmt.Sprintf("device_traces[%d]: device %d out of range", MaxDevices, MaxDevices), 0},
		{"empty trace past the last device", traces(MaxDevices, ""), "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Read(strings.NewReader(tc.in), "s.json")
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(f.Snapshots) != tc.devices {
					t.Fatalf("%d snapshots, want %d", len(f.Snapshots), tc.devices)
				}
				return
			}
			var pe *ParseError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a *ParseError with %q", err, tc.want)
			}
		})
	}
}
