package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend/selftest"
)

// TestDescribeAllocConf checks what doctor says of VRAM_ALLOC_CONF: the
// settings, and those of them vram accepts from PYTORCH_CUDA_ALLOC_CONF but
// does not model, named as having no effect.
func TestDescribeAllocConf(t *testing.T) {
	tests := []struct{ conf, want string }{
		{"", "the default allocator settings"},
		{"policy:pytorch,max_split_size_mb:128", "allocator settings policy:pytorch,max_split_size_mb:128"},
		{"release_lock_on_cudamalloc:True", "allocator settings release_lock_on_cudamalloc:True (not modelled by vram, no effect: release_lock_on_cudamalloc:True)"},
		{"expandable_segments:True,pinned_use_background_threads:True,graph_capture_record_stream_reuse:True",
			"allocator settings expandable_segments:True,pinned_use_background_threads:True,graph_capture_record_stream_reuse:True" +
				" (not modelled by vram, no effect: pinned_use_background_threads:True, graph_capture_record_stream_reuse:True)"},
	}
	for _, tt := range tests {
		t.Run(tt.conf, func(t *testing.T) {
			cfg, err := vram.ConfigFromLookup(func(name string) (string, bool) {
				return tt.conf, name == vram.EnvAllocConf
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := describeSetting(vram.EnvAllocConf, cfg); got != tt.want {
				t.Errorf("describeSetting = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDoctorPyTorchAllocConf checks that doctor notes a PyTorch allocator
// variable in the environment, which vram does not read, with the
// VRAM_ALLOC_CONF that would apply it, or why that would be refused,
// without counting it as a failure.
func TestDoctorPyTorchAllocConf(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string // Detail of each PyTorch variable's check, in order
	}{
		{"none", map[string]string{}, nil},
		{"valid", map[string]string{"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:128"},
			[]string{"read by PyTorch, not by vram: VRAM_ALLOC_CONF=policy:pytorch,expandable_segments:True,max_split_size_mb:128 gives vram's devices PyTorch's allocator with these settings"}},
		{"not modelled", map[string]string{"PYTORCH_ALLOC_CONF": "release_lock_on_cudamalloc:True"},
			[]string{"read by PyTorch, not by vram: VRAM_ALLOC_CONF=policy:pytorch,release_lock_on_cudamalloc:True gives vram's devices PyTorch's allocator with these settings (not modelled by vram, no effect: release_lock_on_cudamalloc:True)"}},
		{"both, one refused", map[string]string{"PYTORCH_ALLOC_CONF": "backend:cudaMallocAsync", "PYTORCH_CUDA_ALLOC_CONF": ""},
			[]string{"read by PyTorch, not by vram; as VRAM_ALLOC_CONF it would be refused: memory: VRAM_ALLOC_CONF: backend:cudaMallocAsync: only the native backend exists in vram (PyTorch's cudaMallocAsync backend has no counterpart)",
				"read by PyTorch, not by vram: VRAM_ALLOC_CONF=policy:pytorch gives vram's devices PyTorch's allocator with these settings"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			useEnv(t, tt.env)
			var got []string
			for _, c := range environmentChecks() {
				if strings.HasPrefix(c.Name, "PYTORCH_") {
					if c.Status != selftest.Skip {
						t.Errorf("%s: status %s, want skip", c.Name, c.Status)
					}
					got = append(got, c.Detail)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("details:\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
