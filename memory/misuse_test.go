package memory

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// panicMessage returns what f panics with, or "" when it returns.
func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// TestMisusePanicsSayWhat checks that Free and RecordStream of a block
// they cannot take panic with a message naming the mistake: a nil block, a
// block of another allocator, or one no longer allocated.
func TestMisusePanicsSayWhat(t *testing.T) {
	for _, conf := range []string{"policy:pytorch", "policy:vram"} {
		a, _ := newTestAllocator(t, conf, 1<<30)
		other, _ := newTestAllocator(t, conf, 1<<30)
		freed := mustAlloc(t, a, 4096, 0)
		a.Free(freed)
		foreign := mustAlloc(t, other, 4096, 0)
		tests := []struct {
			name string
			call func()
			want string
		}{
			{"Free of nil", func() { a.Free(nil) }, "Free of a nil block"},
			{"Free twice", func() { a.Free(freed) }, "Free of a block that is not allocated (freed twice?)"},
			{"Free of another allocator's block", func() { a.Free(foreign) }, "Free of a block of another allocator"},
			{"RecordStream of nil", func() { a.RecordStream(nil, 1) }, "RecordStream on a nil block"},
			{"RecordStream after Free", func() { a.RecordStream(freed, 1) }, "RecordStream on a block that is not allocated (freed?)"},
			{"RecordStream of another allocator's block", func() { a.RecordStream(foreign, 1) }, "RecordStream on a block of another allocator"},
		}
		for _, tc := range tests {
			t.Run(conf+"/"+tc.name, func(t *testing.T) {
				if got := panicMessage(tc.call); !strings.Contains(got, tc.want) {
					t.Fatalf("panic %q, want one saying %q", got, tc.want)
				}
			})
		}
		other.Free(foreign)
	}
}

// TestRecordStreamOfPrivatePool checks that recording a private pool's key
// as a stream does nothing: no work is queued on a pool, and an event
// source handed the key would record an event on a stream handle that does
// not exist.
func TestRecordStreamOfPrivatePool(t *testing.T) {
	const pool = privateBit | 1 // the first pool's key
	tests := []struct {
		name   string
		stream Stream
		own    Stream // the block's stream
	}{
		{"block of a stream, a pool's key", pool, 0},
		{"block of another pool, a pool's key", pool, privateBit | 2},
		{"block of a stream, a key no pool has", privateBit | 77, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newFakeEvents()
			a, sim := newTestAllocator(t, "", 1<<30, WithEvents(ev))
			a.NewPrivatePool()
			a.NewPrivatePool()
			b := mustAlloc(t, a, 4096, tc.own)
			a.RecordStream(b, tc.stream)
			a.Free(b)
			for e, s := range ev.recorded {
				if IsPrivatePool(s) {
					t.Fatalf("event %d recorded on %s", e, StreamName(s))
				}
			}
			if b.state != stateFree {
				t.Fatalf("block waits for events after Free: state %v", b.state)
			}
			check(t, a, sim)
		})
	}
}

// TestSetOtherProcessesBounds checks that SimArena.SetOtherProcesses
// refuses totals that do not fit beside the memory in use, however near
// math.MaxInt64 they are (the sum with the use must not overflow into an
// accepted negative).
func TestSetOtherProcessesBounds(t *testing.T) {
	const capacity = 1 << 30
	tests := []struct {
		name  string
		procs []ProcessMemory
		ok    bool
	}{
		{"none", nil, true},
		{"what is free", []ProcessMemory{{PID: 1, Bytes: capacity - 2*mib}}, true},
		{"one byte more", []ProcessMemory{{PID: 1, Bytes: capacity - 2*mib + 1}}, false},
		{"MaxInt64", []ProcessMemory{{PID: 1, Bytes: math.MaxInt64}}, false},
		{"MaxInt64 less the use", []ProcessMemory{{PID: 1, Bytes: math.MaxInt64 - 2*mib + 1}}, false},
		{"two summing near MaxInt64", []ProcessMemory{{PID: 1, Bytes: math.MaxInt64 / 2}, {PID: 2, Bytes: math.MaxInt64 / 2}}, false},
		{"negative", []ProcessMemory{{PID: 1, Bytes: -1}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sim := NewSimArena(capacity)
			if _, err := sim.Alloc(2 * mib); err != nil {
				t.Fatal(err)
			}
			err := sim.SetOtherProcesses(tc.procs)
			if (err == nil) != tc.ok {
				t.Fatalf("SetOtherProcesses: %v, want accepted %v", err, tc.ok)
			}
			info, _ := sim.MemoryInfo()
			if info.Free < 0 {
				t.Fatalf("%d bytes free", info.Free)
			}
		})
	}
}

// TestCheckSimCapacityNegative checks that a negative capacity, which
// NewSimArena would panic on, is an error naming its source.
func TestCheckSimCapacityNegative(t *testing.T) {
	for _, tc := range []struct{ capacity, limit int64 }{
		{-1, 0}, {math.MinInt64, 0}, {-1, 1 << 30}, {-(1 << 40), math.MaxInt64},
	} {
		err := CheckSimCapacity(tc.capacity, tc.limit, "--capacity")
		if err == nil || !strings.Contains(err.Error(), "--capacity") || !strings.Contains(err.Error(), "negative") {
			t.Errorf("CheckSimCapacity(%d, %d) = %v, want an error naming --capacity and saying it is negative", tc.capacity, tc.limit, err)
		}
	}
}

// TestDivisionsListMissingParts checks that a roundup_power2_divisions
// entry without its size or its divisions is an error saying which is
// missing, rather than one quoting a bracket or colon as the value.
func TestDivisionsListMissingParts(t *testing.T) {
	tests := []struct{ conf, want string }{
		{"roundup_power2_divisions:[:4]", "missing the size before ':'"},
		{"roundup_power2_divisions:[1:]", "missing the divisions after 1:"},
		{"roundup_power2_divisions:[1:,>:4]", "missing the divisions after 1:"},
		{"roundup_power2_divisions:[1:4,>:]", "missing the divisions after >:"},
		{"roundup_power2_divisions:[1:4,:8]", "missing the size before ':'"},
	}
	for _, tc := range tests {
		_, err := ParseConfig(tc.conf)
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%q) = %v, want a *ConfigError saying %q", tc.conf, err, tc.want)
		}
	}
}
