package memory

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDeviceMemoryParts(t *testing.T) {
	procs := []ProcessMemory{{PID: 7, Name: "python3", Bytes: 30 * mib}, {PID: 8, Bytes: -1}, {PID: 9, Bytes: 10 * mib}}
	tests := []struct {
		name                                     string
		m                                        DeviceMemory
		used, outside, own, others, unattributed int64
		text                                     string
	}{
		{"everything known", DeviceMemory{Total: 1024 * mib, Free: 824 * mib, Reserved: 100 * mib, ThisProcess: 120 * mib, Others: procs},
			200 * mib, 100 * mib, 20 * mib, 40 * mib, 40 * mib,
			"device memory 1.00 GiB: 200.00 MiB used (allocator reserve 100.00 MiB, rest of this process 20.00 MiB, other processes 40.00 MiB, unattributed 40.00 MiB), 824.00 MiB free"},
		{"no process list", DeviceMemory{Device: "cuda:1", Total: 1024 * mib, Free: 824 * mib, Reserved: 100 * mib, ThisProcess: -1},
			200 * mib, 100 * mib, -1, -1, 100 * mib,
			"cuda:1 memory 1.00 GiB: 200.00 MiB used (allocator reserve 100.00 MiB, rest of this process unknown, other processes unknown, unattributed 100.00 MiB), 824.00 MiB free"},
		{"free unknown", DeviceMemory{Total: 1024 * mib, Free: -1, Reserved: 100 * mib, ThisProcess: -1},
			-1, -1, -1, -1, -1,
			"device memory 1.00 GiB: unknown used (allocator reserve 100.00 MiB, rest of this process unknown, other processes unknown, unattributed unknown), unknown free"},
		{"empty list", DeviceMemory{Total: 256 * mib, Free: 200 * mib, Reserved: 56 * mib, ThisProcess: 56 * mib, Others: []ProcessMemory{}},
			56 * mib, 0, 0, 0, 0, ""},
		// The driver's figures come from separate calls and may disagree:
		// no part goes negative.
		{"inconsistent", DeviceMemory{Total: 256 * mib, Free: 250 * mib, Reserved: 56 * mib, ThisProcess: 10 * mib, Others: []ProcessMemory{{PID: 1, Bytes: 100 * mib}}},
			6 * mib, 0, 0, 100 * mib, 0, ""},
		{"free above total", DeviceMemory{Total: 256 * mib, Free: 300 * mib, ThisProcess: -1}, 0, 0, -1, -1, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			got := []int64{m.Used(), m.OutsideAllocator(), m.ProcessOther(), m.OtherProcesses(), m.Unattributed()}
			want := []int64{tc.used, tc.outside, tc.own, tc.others, tc.unattributed}
			for i, name := range []string{"Used", "OutsideAllocator", "ProcessOther", "OtherProcesses", "Unattributed"} {
				if got[i] != want[i] {
					t.Errorf("%s = %d, want %d", name, got[i], want[i])
				}
			}
			if tc.text != "" && m.String() != tc.text {
				t.Errorf("String:\n got %s\nwant %s", m.String(), tc.text)
			}
		})
	}
}

// TestDeviceMemoryJSON pins the field names that vram smi --json and the
// recorded readings of package monitor use.
func TestDeviceMemoryJSON(t *testing.T) {
	b, err := json.Marshal(DeviceMemory{Device: "cuda:0", Total: 3, Free: 2, Reserved: 1, ThisProcess: -1,
		Others: []ProcessMemory{{PID: 4, Name: "p", Bytes: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"device":"cuda:0","total_bytes":3,"free_bytes":2,"reserved_bytes":1,"this_process_bytes":-1,"others":[{"pid":4,"name":"p","used_bytes":5}]}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

// TestOutOfMemoryDeviceMemory checks what an OutOfMemoryError says about
// the device with each kind of DeviceInfo: none, one whose process list is
// hidden, and a simulated device that lists every process.
func TestOutOfMemoryDeviceMemory(t *testing.T) {
	tests := []struct {
		name  string
		info  func(*SimArena) Option
		check func(t *testing.T, e *OutOfMemoryError)
	}{
		{"no device info", func(s *SimArena) Option { return WithDeviceInfo(nil) }, func(t *testing.T, e *OutOfMemoryError) {
			m := e.Memory
			if m.Total != 64*mib || m.Free != -1 || m.ThisProcess != -1 || m.Others != nil || m.Reserved != e.Reserved {
				t.Errorf("memory %+v", m)
			}
			if !strings.Contains(e.Error(), "\n  device: 64.00 MiB total\n") || strings.Contains(e.Error(), "outside this allocator") {
				t.Errorf("message claims to know the device:\n%s", e.Error())
			}
		}},
		{"hidden process list", func(s *SimArena) Option { return WithDeviceInfo(hiddenInfo{s}) }, func(t *testing.T, e *OutOfMemoryError) {
			m := e.Memory
			if m.ThisProcess != -1 || m.Others != nil || m.OutsideAllocator() != 16*mib || m.Reserved != e.Reserved {
				t.Errorf("memory %+v", m)
			}
			if !strings.Contains(e.Error(), "held outside this allocator (other processes, contexts): 16.00 MiB") {
				t.Errorf("message:\n%s", e.Error())
			}
		}},
		{"process of unknown size", func(s *SimArena) Option { return WithDeviceInfo(unsizedInfo{s}) }, func(t *testing.T, e *OutOfMemoryError) {
			if m := e.Memory; m.OtherProcesses() != 0 || m.Unattributed() != 16*mib {
				t.Errorf("memory %+v", m)
			}
			if msg := e.Error(); !strings.Contains(msg, "other processes: pid 5 (?) unknown size\n") ||
				!strings.Contains(msg, "held outside this allocator, not attributed: 16.00 MiB") {
				t.Errorf("message:\n%s", msg)
			}
		}},
		{"simulated device", func(s *SimArena) Option { return func(*Allocator) {} }, func(t *testing.T, e *OutOfMemoryError) {
			m := e.Memory
			if m.ThisProcess != e.Reserved || m.ProcessOther() != 0 || len(m.Others) != 2 || m.Others[0].Bytes != 12*mib || m.Unattributed() != 0 {
				t.Errorf("memory %+v", m)
			}
			if !strings.Contains(e.Error(), "other processes: pid 2 (python3) 12.00 MiB, pid 3 (?) 4.00 MiB\n") {
				t.Errorf("message:\n%s", e.Error())
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSimArena(64 * mib)
			if err := s.SetOtherProcesses([]ProcessMemory{{PID: 3, Bytes: 4 * mib}, {PID: 2, Name: "python3", Bytes: 12 * mib}}); err != nil {
				t.Fatal(err)
			}
			a := New(s, Config{}, tc.info(s))
			_, err := a.Alloc(60*mib, 0, "")
			e, ok := err.(*OutOfMemoryError)
			if !ok {
				t.Fatalf("got %v, want an OutOfMemoryError", err)
			}
			tc.check(t, e)
		})
	}
}

// hiddenInfo is a device whose process list is not visible.
type hiddenInfo struct{ *SimArena }

func (h hiddenInfo) MemoryInfo() (DeviceMemory, error) {
	m, err := h.SimArena.MemoryInfo()
	m.ThisProcess, m.Others = -1, nil
	return m, err
}

// unsizedInfo lists one other process whose memory the driver does not
// account.
type unsizedInfo struct{ *SimArena }

func (u unsizedInfo) MemoryInfo() (DeviceMemory, error) {
	m, err := u.SimArena.MemoryInfo()
	m.Others = []ProcessMemory{{PID: 5, Bytes: -1}}
	return m, err
}
