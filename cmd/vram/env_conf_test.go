package main

import (
	"testing"

	"github.com/vramgo/vram"
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
