package monitor

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vramgo/vram/memory"
)

// TestRegisterRefusesNegativeRanks: a negative rank or local rank is no
// process of a job; RegisterAllocator and RegisterDeviceMemory refuse it
// with an error wrapping ErrInvalidOptions and register nothing.
func TestRegisterRefusesNegativeRanks(t *testing.T) {
	stats := func() memory.Stats { return memory.Stats{} }
	read := func() (memory.DeviceMemory, error) { return memory.DeviceMemory{Total: 1 << 30}, nil }
	for _, tc := range []struct {
		name  string
		rank  int
		local []LabelOption
	}{
		{"negative rank", -1, nil},
		{"negative local rank", 0, []LabelOption{LocalRank(-2)}},
	} {
		for _, reg := range []struct {
			name string
			call func(r prometheus.Registerer) error
		}{
			{"RegisterAllocator", func(r prometheus.Registerer) error {
				return RegisterAllocator(r, "cuda:0", tc.rank, stats, tc.local...)
			}},
			{"RegisterDeviceMemory", func(r prometheus.Registerer) error {
				return RegisterDeviceMemory(r, "cuda:0", tc.rank, read, tc.local...)
			}},
		} {
			t.Run(tc.name+"/"+reg.name, func(t *testing.T) {
				r := prometheus.NewPedanticRegistry()
				if err := reg.call(r); !errors.Is(err, ErrInvalidOptions) {
					t.Fatalf("got %v, want an error wrapping ErrInvalidOptions", err)
				}
				if mfs, err := r.Gather(); err != nil || len(mfs) != 0 {
					t.Errorf("registered %d metric families (%v)", len(mfs), err)
				}
			})
		}
	}
}
