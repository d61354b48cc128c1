package main

import (
	"strings"
	"testing"
)

// TestReplayConfJoined checks that --compare and --fit put their settings
// over a --conf that the parser accepts however it ends, a trailing comma
// or blanks, as PyTorch accepts PYTORCH_CUDA_ALLOC_CONF: joining the two
// strings made ",," or " ," of them, which no setting spells.
func TestReplayConfJoined(t *testing.T) {
	for _, conf := range []string{"max_split_size_mb:128,", "max_split_size_mb:128 , ", " ", "\t"} {
		for _, mode := range []string{"--compare", "--fit"} {
			t.Run(mode+" "+conf, func(t *testing.T) {
				code, stdout, stderr := runCLI(t, "replay", mode, "--json", "--conf", conf, resnetTrace)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				var r struct {
					Policies map[string]struct {
						Config string `json:"config"`
					} `json:"policies"`
				}
				decodeOne(t, stdout, &r)
				if mode == "--compare" && strings.Contains(conf, "128") {
					if got := r.Policies["pytorch"].Config; !strings.Contains(got, "max_split_size_mb:128") {
						t.Errorf("policy pytorch replayed under %q, want --conf's max_split_size_mb:128 kept", got)
					}
				}
			})
		}
	}
}
