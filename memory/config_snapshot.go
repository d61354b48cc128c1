package memory

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/vramgo/vram/internal/printable"
	"github.com/vramgo/vram/memory/trace"
)

// WithSnapshotSettings returns c with the allocator settings of the
// snapshot s put over it: first its configuration string s.Config, as
// [Config.With] reads it, then the settings that a PyTorch snapshot
// records beside that string in its allocator_settings (s.Meta, keys
// "allocator_settings.NAME"): max_split_size, garbage_collection_threshold,
// expandable_segments, roundup_power2_divisions, release_lock_on_cudamalloc
// and pinned_use_cuda_host_register (or their ROCm spellings),
// pinned_num_register_threads and graph_capture_record_stream_reuse.
//
// Where the two differ the entries win, as they are what PyTorch's
// allocator ran with: the string is the last one PyTorch was given, which
// torch.cuda.memory._set_allocator_settings replaces, and a later string
// that leaves out expandable_segments keeps an earlier True, while the
// entries follow both (and say False where the platform cannot expand
// segments). Values that mean the same (divisions of 0 and 1, one register
// thread given or not) keep the string's spelling. Keys that
// allocator_settings does not record, such as max_non_split_rounding_mb and
// per_process_memory_fraction, come from the string alone; entries this
// package does not know change nothing. A snapshot without such entries (a
// vram snapshot, or one of an older PyTorch) gives c.With(s.Config).
//
// An invalid string is the [*ConfigError] of With; an entry that no
// PyTorch run records (max_split_size not a whole number of MiB of at
// least 20, a threshold outside [0, 1), a bool other than True or False,
// divisions that are not powers of two) is an error that names it. With
// an error the Config returned is c unchanged.
func (c Config) WithSnapshotSettings(s *trace.Snapshot) (Config, error) {
	base := c
	c, err := c.With(s.Config)
	if err != nil {
		return base, err
	}
	entry := func(name string) (string, bool) {
		v, ok := s.Meta[trace.MetaAllocatorSettingsPrefix+name]
		return v, ok
	}
	bad := func(name, val, reason string) error {
		return fmt.Errorf("memory: the snapshot's allocator_settings record %s = %s: %s", name, printable.String(cutConfig(val)), reason)
	}
	if v, ok := entry("max_split_size"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			return base, bad("max_split_size", v, "expected a whole number of bytes")
		case n < 0 || n>>20 > maxSplitSizeMBLimit:
			// PyTorch's "no limit" (SIZE_MAX, written as an int64), or
			// a limit beyond any device.
			c.MaxSplitSizeMB = 0
		case n%(1<<20) != 0 || n < kLargeBuffer:
			return base, bad("max_split_size", v, fmt.Sprintf("expected -1 (no limit) or a whole number of MiB of at least %d, in bytes", kLargeBuffer>>20))
		default:
			c.MaxSplitSizeMB = n >> 20
		}
	}
	if v, ok := entry("garbage_collection_threshold"); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0 && f < 1) {
			return base, bad("garbage_collection_threshold", v, "expected 0 (off) or a number greater than 0 and less than 1")
		}
		c.GarbageCollectionThreshold = f
	}
	for _, b := range []struct {
		names []string
		field *bool
	}{
		{[]string{"expandable_segments"}, &c.ExpandableSegments},
		{[]string{"release_lock_on_cudamalloc", "release_lock_on_hipmalloc"}, &c.ReleaseLockOnCUDAMalloc},
		{[]string{"pinned_use_cuda_host_register", "pinned_use_hip_host_register"}, &c.PinnedUseCUDAHostRegister},
		{[]string{"graph_capture_record_stream_reuse"}, &c.GraphCaptureRecordStreamReuse},
	} {
		for _, name := range b.names {
			v, ok := entry(name)
			if !ok {
				continue
			}
			switch v {
			case "True":
				*b.field = true
			case "False":
				*b.field = false
			default:
				return base, bad(name, v, "expected True or False")
			}
		}
	}
	if v, ok := entry("pinned_num_register_threads"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxRegisterThreads || n&(n-1) != 0 {
			return base, bad("pinned_num_register_threads", v, fmt.Sprintf("expected a power of two up to %d", maxRegisterThreads))
		}
		if n > 1 || c.PinnedNumRegisterThreads > 1 {
			c.PinnedNumRegisterThreads = n // else both are PyTorch's default of 1
		}
	}
	if v, ok := entry("roundup_power2_divisions"); ok {
		d, err := recordedDivisions(c.RoundupPower2Divisions, v)
		if err != nil {
			return base, bad("roundup_power2_divisions", v, err.Error())
		}
		c.RoundupPower2Divisions = d
	}
	return c, nil
}

// recordedDivisions reads allocator_settings' roundup_power2_divisions, a
// dict from the first size of each interval in MiB (1, 2, 4, ... 32768) to
// its divisions, as the snapshot's Meta writes it ("{1: 0, 2: 4, ...}"),
// over d: intervals the dict leaves out keep d's divisions, and so do those
// where both say 0 or 1, which round alike.
func recordedDivisions(d [kRoundUpPowerOfTwoIntervals]int, v string) ([kRoundUpPowerOfTwoIntervals]int, error) {
	inner, open := strings.CutPrefix(v, "{")
	inner, closed := strings.CutSuffix(inner, "}")
	if !open || !closed {
		return d, fmt.Errorf("expected a dict of sizes in MiB to divisions, as {1: 0, 2: 0, ...}")
	}
	if strings.TrimSpace(inner) == "" {
		return d, nil
	}
	for _, item := range strings.Split(inner, ",") {
		k, val, ok := strings.Cut(item, ":")
		if !ok {
			return d, fmt.Errorf("expected size: divisions, got %q", cutConfig(strings.TrimSpace(item)))
		}
		mb, err := strconv.ParseUint(strings.TrimSpace(k), 10, 64)
		if err != nil || mb == 0 || mb&(mb-1) != 0 {
			return d, fmt.Errorf("each size must be a power of two in MiB, got %q", cutConfig(strings.TrimSpace(k)))
		}
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < 0 || n > 1<<20 || n&(n-1) != 0 {
			return d, fmt.Errorf("divisions must be 0 or a power of two up to 1048576, got %q", cutConfig(strings.TrimSpace(val)))
		}
		i := min(bits.Len64(mb)-1, len(d)-1)
		if n <= 1 && d[i] <= 1 {
			continue // 0 and 1 both round to 512 bytes: keep d's spelling
		}
		d[i] = n
	}
	return d, nil
}
