package vram

import (
	"errors"
	"strings"
	"testing"

	"github.com/vramgo/vram/memory"
)

// TestEnvErrorsAreArgumentErrors checks that an invalid value of every
// variable ConfigFromLookup reads is an *EnvError of kind ErrArgument, as
// Configure's errors for the same settings are, and that VRAM_ALLOC_CONF's
// still reaches the *memory.ConfigError naming the key, with its message.
func TestEnvErrorsAreArgumentErrors(t *testing.T) {
	tests := []struct {
		name, value string
		prefix      string // the message's start
	}{
		{EnvAllocConf, "expandable_segment:True", `memory: VRAM_ALLOC_CONF: expandable_segment: unknown key (did you mean "expandable_segments"?)`},
		{EnvAllocConf, "max_split_size_mb:99999999999999999999999", "memory: VRAM_ALLOC_CONF: max_split_size_mb:99999999999999999999999: "},
		{EnvAllocConf, "garbage_collection_threshold:NaN", "memory: VRAM_ALLOC_CONF: garbage_collection_threshold:NaN: "},
		{EnvSimDevices, "lots", `VRAM_SIM_DEVICES="lots": `},
		{EnvSimShapeOnly, "maybe", `VRAM_SIM_SHAPE_ONLY="maybe": `},
		{EnvDebugLeaks, "2", `VRAM_DEBUG_LEAKS="2": `},
		{EnvCuDNN, "quick", `VRAM_CUDNN="quick": `},
		{EnvCPUMemory, "lots", `VRAM_CPU_MEMORY_LIMIT="lots": `},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			_, err := ConfigFromLookup(lookupMap(map[string]string{tt.name: tt.value}))
			if !errors.Is(err, ErrArgument) {
				t.Errorf("error %v does not match ErrArgument", err)
			}
			var ee *EnvError
			if !errors.As(err, &ee) || ee.Var != tt.name || ee.Value != tt.value {
				t.Errorf("error %v (%T) is not an *EnvError of %s=%q", err, err, tt.name, tt.value)
			}
			var ce *memory.ConfigError
			if (tt.name == EnvAllocConf) != errors.As(err, &ce) {
				t.Errorf("error %v: wraps a *memory.ConfigError %v, want %v", err, ce != nil, tt.name == EnvAllocConf)
			}
			if err != nil && !strings.HasPrefix(err.Error(), tt.prefix) {
				t.Errorf("error %q, want it to start with %q", err, tt.prefix)
			}
		})
	}
}
