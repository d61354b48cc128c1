package main

import (
	"encoding/binary"
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

// settingsPickle returns a PyTorch snapshot pickle (protocol 2) whose
// device 0 trace allocates 4 MiB and whose allocator_settings hold conf as
// PYTORCH_CUDA_ALLOC_CONF and the entries PyTorch 2.11 records beside it:
// expandable, and a max_split_size of splitMB MiB (0: no limit, -1).
func settingsPickle(conf string, expandable bool, splitMB int64) []byte {
	b := []byte{0x80, 2, '}'} // PROTO 2, EMPTY_DICT
	str := func(s string) {
		b = append(b, 'X')
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	str("allocator_settings")
	b = append(b, '}')
	str("PYTORCH_CUDA_ALLOC_CONF")
	str(conf)
	b = append(b, 's')
	str("max_split_size")
	split := int64(-1)
	if splitMB > 0 {
		split = splitMB << 20
	}
	b = append(b, 0x8a, 8) // LONG1 of 8 bytes
	b = binary.LittleEndian.AppendUint64(b, uint64(split))
	b = append(b, 's')
	str("expandable_segments")
	if expandable {
		b = append(b, 0x88, 's') // NEWTRUE
	} else {
		b = append(b, 0x89, 's') // NEWFALSE
	}
	b = append(b, 's') // the settings into the snapshot
	return append(b, allocPickle(4 << 20)[3:]...)
}

// TestReplayAsRecordedFromSettings checks that the setting replay names to
// replay a PyTorch snapshot as it ran follows the allocator_settings
// entries, not only the PYTORCH_CUDA_ALLOC_CONF string beside them: PyTorch
// records the last string it was given, which leaves out settings made in
// code (torch.cuda.memory._set_allocator_settings) or by an earlier string.
func TestReplayAsRecordedFromSettings(t *testing.T) {
	tests := []struct {
		name       string
		conf       string
		expandable bool
		splitMB    int64
		want       string
	}{
		{"defaults", "", false, 0, "policy:pytorch"},
		{"string and entries agree", "max_split_size_mb:64", false, 64, "policy:pytorch,max_split_size_mb:64"},
		{"expandable set in code", "", true, 0, "policy:pytorch,expandable_segments:True"},
		{"expandable kept from an earlier string", "max_split_size_mb:64", true, 64, "policy:pytorch,expandable_segments:True,max_split_size_mb:64"},
		{"split limit reset by a later string", "max_split_size_mb:64", false, 0, "policy:pytorch"},
		{"split limit at the large segment", "max_split_size_mb:20", false, 20, "policy:pytorch,max_split_size_mb:20"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "settings.pickle", settingsPickle(tt.conf, tt.expandable, tt.splitMB))
			code, stdout, stderr := runCLI(t, "replay", "--json", path)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var r struct {
				AsRecorded string `json:"as_recorded_conf"`
			}
			decodeOne(t, stdout, &r)
			if r.AsRecorded != tt.want {
				t.Errorf("as_recorded_conf = %q, want %q", r.AsRecorded, tt.want)
			}
		})
	}
}

// TestReplayNotModelled checks that settings of --conf that vram accepts
// from PYTORCH_CUDA_ALLOC_CONF but does not model are reported as having no
// effect on the replay, in the table, in --fit's answer and in --json,
// rather than dropped unseen.
func TestReplayNotModelled(t *testing.T) {
	const conf = "release_lock_on_cudamalloc:True,pinned_num_register_threads:8,max_split_size_mb:128"
	want := []string{"release_lock_on_cudamalloc:True", "pinned_num_register_threads:8"}
	for _, mode := range [][]string{nil, {"--compare"}, {"--fit"}} {
		name := strings.Join(mode, " ")
		t.Run(name+" json", func(t *testing.T) {
			args := append(append([]string{"replay", "--json", "--conf", conf}, mode...), resnetTrace)
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var r struct {
				NotModelled []string `json:"not_modelled"`
			}
			decodeOne(t, stdout, &r)
			if strings.Join(r.NotModelled, ",") != strings.Join(want, ",") {
				t.Errorf("not_modelled = %q, want %q", r.NotModelled, want)
			}
		})
		t.Run(name+" text", func(t *testing.T) {
			args := append(append([]string{"replay", "--conf", conf}, mode...), resnetTrace)
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stdout, "not modelled by vram, no effect on this replay: release_lock_on_cudamalloc:True, pinned_num_register_threads:8") {
				t.Errorf("no line on the settings not modelled:\n%s", stdout)
			}
		})
	}
	code, stdout, _ := runCLI(t, "replay", "--conf", "max_split_size_mb:128", resnetTrace)
	if code != 0 || strings.Contains(stdout, "not modelled") {
		t.Errorf("exit %d; a line on settings not modelled where there are none:\n%s", code, stdout)
	}
}
