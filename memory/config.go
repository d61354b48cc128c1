package memory

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vramgo/vram/internal/editdist"
	"github.com/vramgo/vram/internal/printable"
	"github.com/vramgo/vram/internal/units"
)

// Policy selects how an [Allocator] places blocks and when it asks the
// device for memory. The zero Policy is [PolicyVRAM], the default.
type Policy uint8

const (
	// PolicyVRAM is vram's own policy (see the package documentation,
	// "# Policies"): best fit in growing virtual address ranges whose free
	// physical pages are moved, lazily, to where a request needs them. It
	// needs a [VirtualArena]; on a plain [Arena] it behaves as
	// PolicyPyTorch.
	PolicyVRAM Policy = iota
	// PolicyPyTorch is PyTorch's CUDA caching allocator policy, with
	// expandable segments when [Config.ExpandableSegments] is set.
	PolicyPyTorch
)

// String returns "vram" or "pytorch", the values of the policy key.
func (p Policy) String() string {
	switch p {
	case PolicyVRAM:
		return "vram"
	case PolicyPyTorch:
		return "pytorch"
	}
	return "Policy(" + strconv.Itoa(int(p)) + ")"
}

// kRoundUpPowerOfTwoIntervals is the number of size intervals that
// roundup_power2_divisions can set separately: sizes below 2 MiB, then one
// interval per power of two from 2 MiB up, the last one open-ended (16, from
// PyTorch's CUDAAllocatorConfig.h).
const kRoundUpPowerOfTwoIntervals = 16

// maxSplitSizeMBLimit is the largest max_split_size_mb accepted: 2^40 MiB,
// far beyond any device, and small enough that the byte count fits an int64.
const maxSplitSizeMBLimit = 1 << 40

// Config holds the allocator settings of a VRAM_ALLOC_CONF string. The zero
// Config is vram's default: [PolicyVRAM] with every PyTorch option off.
// [ParseConfig] reads one from the string; [Config.String] writes it back.
type Config struct {
	// Policy is the placement policy (key "policy", "vram" or "pytorch").
	Policy Policy

	// ExpandableSegments, under PolicyPyTorch, grows one segment per
	// stream and pool over a reserved address range instead of allocating
	// fixed segments (key "expandable_segments", True or False). It needs
	// a [VirtualArena]. PolicyVRAM always uses virtual memory when the
	// arena offers it and ignores this setting.
	ExpandableSegments bool

	// MaxSplitSizeMB, when not 0, stops the allocator from splitting
	// blocks of this many MiB or more; such a block only serves requests
	// within 20 MiB (MaxNonSplitRoundingMB) of its size, and never a
	// smaller request (key "max_split_size_mb", at least 20, as in
	// PyTorch's c10/core/AllocatorConfig.cpp; its parser before that file
	// wanted more than 20). 0 means no limit. As in PyTorch, blocks of virtual segments are split
	// all the same; only the rules on which requests they serve apply.
	MaxSplitSizeMB int64

	// MaxNonSplitRoundingMB, when not 0, sets how much larger than a
	// request of MaxSplitSizeMB or more a cached block that is not split
	// may be and still serve it (key "max_non_split_rounding_mb", at
	// least 20, PyTorch 2.4 and later). 0 means PyTorch's default, 20 MiB.
	// It matters only when MaxSplitSizeMB is set.
	MaxNonSplitRoundingMB int64

	// RoundupPower2Divisions rounds requested sizes up to one of this
	// many steps between consecutive powers of two (key
	// "roundup_power2_divisions"). Entry 0 applies to sizes below 2 MiB,
	// entry i (1 <= i < 15) to sizes in [2^i, 2^(i+1)) MiB, entry 15 to
	// everything from 32 GiB up. 0 or 1 means the plain 512-byte
	// rounding. Every non-zero entry is a power of two.
	RoundupPower2Divisions [kRoundUpPowerOfTwoIntervals]int

	// GarbageCollectionThreshold, when in (0, 1), makes the allocator
	// release least recently used cached memory whenever its reserve
	// would pass this fraction of the memory limit (key
	// "garbage_collection_threshold"). 0 disables it. Unlike PyTorch,
	// vram applies it without a per-process memory fraction too, taking
	// the device's capacity as the limit.
	GarbageCollectionThreshold float64

	// PerProcessMemoryFraction, when in (0, 1], limits the memory this
	// allocator reserves to that fraction of the device's capacity (key
	// "per_process_memory_fraction", which recent releases of PyTorch
	// read too, besides the function torch.cuda.set_per_process_memory_fraction
	// that [Allocator.SetMemoryFraction] mirrors). 0 means no limit beyond the
	// device; PyTorch's own 0, which lets it allocate nothing, is refused.
	PerProcessMemoryFraction float64

	// ReleaseLockOnCUDAMalloc is accepted for compatibility with
	// PYTORCH_CUDA_ALLOC_CONF and ignored (key
	// "release_lock_on_cudamalloc", or PyTorch's ROCm spelling
	// "release_lock_on_hipmalloc"): vram's allocator holds its lock
	// across arena calls.
	ReleaseLockOnCUDAMalloc bool

	// PinnedUseCUDAHostRegister is accepted for compatibility and ignored
	// (key "pinned_use_cuda_host_register", or PyTorch's ROCm spelling
	// "pinned_use_hip_host_register"): it concerns PyTorch's pinned host
	// memory allocator, which this package does not implement.
	PinnedUseCUDAHostRegister bool

	// PinnedNumRegisterThreads is accepted for compatibility and ignored
	// (key "pinned_num_register_threads", a power of two up to 128; 0
	// when not given, PyTorch's default of 1): it concerns PyTorch's
	// pinned host memory allocator.
	PinnedNumRegisterThreads int

	// PinnedReserveSegmentSizeMB is accepted for compatibility and
	// ignored (key "pinned_reserve_segment_size_mb", above 0; 0 when not
	// given): it concerns PyTorch's pinned host memory allocator.
	PinnedReserveSegmentSizeMB int64

	// PinnedUseBackgroundThreads is accepted for compatibility and
	// ignored (key "pinned_use_background_threads"): it concerns
	// PyTorch's pinned host memory allocator.
	PinnedUseBackgroundThreads bool

	// GraphCaptureRecordStreamReuse is accepted for compatibility and
	// ignored (key "graph_capture_record_stream_reuse"): it concerns
	// block reuse during PyTorch's CUDA graph capture, which replays and
	// sim devices do not do.
	GraphCaptureRecordStreamReuse bool
}

// ConfigError reports an invalid VRAM_ALLOC_CONF string, an invalid
// [Config] value or a setting the arena cannot honour. It names the key
// (and, for a Config value, the field) and says what is allowed.
type ConfigError struct {
	Key    string // the offending key, "" when the string is malformed
	Value  string // its value as written
	Reason string // what is wrong and what is allowed
	// Field is the Config field, as in "MaxSplitSizeMB", when the error
	// is about a Config value that [Config.Validate] refused rather than
	// about a string; "" otherwise.
	Field string
}

// Error returns "memory: VRAM_ALLOC_CONF: " followed by the key and reason,
// or, for a Config value, "memory: Config.Field = value (key): reason",
// on one line: control characters of the key and value, which come from
// the environment or a file, are written as escapes.
func (e *ConfigError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("memory: Config.%s = %s (key %s): %s", e.Field, printable.String(cutConfig(e.Value)), e.Key, printable.String(e.Reason))
	}
	s := "memory: VRAM_ALLOC_CONF: "
	if e.Key != "" {
		s += printable.String(cutConfig(e.Key))
		if e.Value != "" {
			s += ":" + printable.String(cutConfig(e.Value))
		}
		s += ": "
	}
	return s + printable.String(e.Reason)
}

// maxConfigShown is the most bytes of a key or value, as written, that a
// [ConfigError] message shows: the string comes from the environment or a
// file and may be megabytes long.
const maxConfigShown = 100

// cutConfig returns s, or its first maxConfigShown bytes or so, whole
// characters, and how many bytes it has.
func cutConfig(s string) string {
	if len(s) <= maxConfigShown {
		return s
	}
	n := maxConfigShown
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "... (" + strconv.Itoa(len(s)) + " bytes)"
}

// maxRegisterThreads is the most threads PyTorch's pinned host memory
// allocator accepts for pinned_num_register_threads.
const maxRegisterThreads = 128

// maxPinnedReserveMB is the largest pinned_reserve_segment_size_mb
// accepted: the most MiB whose byte count fits an int64 (PyTorch takes
// any size_t above 0).
const maxPinnedReserveMB = math.MaxInt64 >> 20

// configKeyList lists the accepted keys, PyTorch's ROCm spellings last.
var configKeyList = []string{
	"policy", "expandable_segments", "max_split_size_mb", "max_non_split_rounding_mb", "roundup_power2_divisions",
	"garbage_collection_threshold", "per_process_memory_fraction", "release_lock_on_cudamalloc",
	"pinned_use_cuda_host_register", "pinned_num_register_threads", "pinned_reserve_segment_size_mb",
	"pinned_use_background_threads", "graph_capture_record_stream_reuse", "backend",
	"release_lock_on_hipmalloc", "pinned_use_hip_host_register",
}

// allocConfVariables are the environment variables whose value is an
// allocator settings string: a string that starts with one of them and '='
// was copied with the variable's name.
var allocConfVariables = []string{"VRAM_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"}

// configKeys lists the accepted keys, for error messages.
var configKeys = strings.Join(configKeyList[:len(configKeyList)-2], ", ") +
	" (and PyTorch's ROCm spellings " + strings.Join(configKeyList[len(configKeyList)-2:], ", ") + ")"

// didYouMean returns ` (did you mean "w"?)` for the word of choices that
// got is most likely a misspelling of: the same but for case, within an
// edit distance of a quarter of its length (at least 1, at most 3), or
// else the only one that starts with got or that got starts with, for a
// got of 6 bytes or more. It returns "" when none is close.
func didYouMean(got string, choices []string) string {
	best, bestDist := "", 0
	prefixed, nprefixed := "", 0
	lower := strings.ToLower(got)
	for _, w := range choices {
		if len(lower) >= 6 && (strings.HasPrefix(w, lower) || strings.HasPrefix(lower, w)) {
			prefixed, nprefixed = w, nprefixed+1
		}
		limit := min(max(len(w)/4, 1), 3)
		if len(lower) > len(w)+limit || len(lower) < len(w)-limit {
			continue // too far apart, and got may be megabytes long
		}
		if d := editdist.Distance(lower, w); d <= limit && (best == "" || d < bestDist) {
			best, bestDist = w, d
		}
	}
	if best == "" && nprefixed == 1 {
		best = prefixed
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// ParseConfig parses a VRAM_ALLOC_CONF string: comma-separated key:value
// pairs with PyTorch's PYTORCH_CUDA_ALLOC_CONF keys plus policy:pytorch|vram
// and per_process_memory_fraction, for example
// "policy:pytorch,expandable_segments:True,max_split_size_mb:512" or
// "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]". Blanks (ASCII white
// space: space, tab, newline, vertical tab, form feed, carriage return)
// around tokens are ignored, while one inside a key or value is an error
// (PyTorch's parser drops it, turning "51 2" into 512); "" is the zero
// Config. A key given twice takes its last value. Numbers are decimal:
// whole numbers (max_split_size_mb, divisions) are digits only, fractions
// are digits with an optional point and exponent ("0.6", "5e-1"); signs, hexadecimal, underscores, NaN and Inf are not
// numbers here. An unknown key, a malformed value or a number out of range
// is a [*ConfigError]; for a key, policy or backend close to an accepted
// one (another case, a letter or a suffix missing, as in
// "expandable_segment" or "max_split_size"), its message asks whether that
// one was meant, and a string copied with its variable's name
// ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"), a key joined to its
// value by '=', or a blank where a ',' belongs is refused with a message
// that says so. The key "backend" is accepted with the value "native"
// only. Keys of PyTorch's pinned host memory allocator, of CUDA graph
// capture and of its locking around cudaMalloc, which vram does not have,
// are checked as PyTorch checks them and kept in their fields, so that a
// PYTORCH_CUDA_ALLOC_CONF string that PyTorch accepts is accepted here
// too, and [Config.NotModelled] lists those set: release_lock_on_cudamalloc
// and pinned_use_cuda_host_register (True or False),
// pinned_num_register_threads (a power of two up to 128),
// pinned_reserve_segment_size_mb (a whole number above 0),
// pinned_use_background_threads and graph_capture_record_stream_reuse
// (True or False). Where PyTorch takes True or False, vram also takes
// them in any case, and 1 and 0. PyTorch's ROCm spellings release_lock_on_hipmalloc and
// pinned_use_hip_host_register set the same fields as their CUDA names.
//
// In the per-size form of roundup_power2_divisions each key is a power of
// two in MiB that sets the divisions for sizes in [key, 2*key) MiB, the first
// key also sets every smaller size, and ">", the last entry if any, sets
// every size above the last key's interval; sizes between two keys' intervals
// keep the divisions given before, by an earlier roundup_power2_divisions
// (as PyTorch reads "roundup_power2_divisions:4,roundup_power2_divisions:[256:1,1024:2]"),
// else 0. Sizes from 32768 MiB up share
// the last interval, so at most one key may be there, and then no ">".
// (PyTorch's parser lets later entries of one list overwrite earlier ones,
// and before c10/core/AllocatorConfig.cpp ">" overwrote the last key's own
// interval as well; vram refuses entries that would set nothing or be
// overwritten, and ">" starts after the last key's interval, as PyTorch's
// current parser does.)
func ParseConfig(s string) (Config, error) { return Config{}.With(s) }

// With returns c with the settings of the VRAM_ALLOC_CONF string s put
// over it: each key that s gives sets its field as in [ParseConfig], and
// the fields of the keys s leaves out keep c's values. It is how a tool
// adds settings of its own to a user's string without joining the two
// strings, which a trailing comma or a blank string of the user's would
// make invalid. An invalid s is a [*ConfigError], and the Config returned
// with it is c unchanged.
func (c Config) With(s string) (Config, error) {
	base := c
	toks, starts := tokenizeConfig(s)
	p := configParser{s: s, toks: toks, starts: starts}
	for !p.done() {
		keyTok := p.i
		key := p.next()
		if !isConfigWord(key) {
			if whole := p.entryText(keyTok); whole != "" && whole != key {
				return base, &ConfigError{Value: whole, Reason: fmt.Sprintf("expected a key, got %q in %q; the format is key:value,key:value", key, cutConfig(whole))}
			}
			return base, &ConfigError{Value: key, Reason: fmt.Sprintf("expected a key, got %q; the format is key:value,key:value", key)}
		}
		if name, _, ok := strings.Cut(key, "="); ok && slices.Contains(allocConfVariables, name) {
			return base, &ConfigError{Key: key, Reason: fmt.Sprintf("give the variable's value alone, without %s=", name)}
		}
		if p.next() != ":" {
			reason := "expected ':' and a value after the key"
			if k, v, ok := strings.Cut(key, "="); ok && v != "" && slices.Contains(configKeyList, k) {
				reason = fmt.Sprintf("a key and its value are joined by ':', not '=', as in %s:%s", k, cutConfig(v))
			}
			return base, p.quoteWhole(&ConfigError{Key: key, Reason: reason}, keyTok, -1)
		}
		valTok := p.i
		if err := c.set(key, &p); err != nil {
			if !slices.Contains(configKeyList, key) {
				return base, err // the key is what is wrong
			}
			return base, p.quoteWhole(err, keyTok, valTok)
		}
		if !p.done() {
			val := p.toks[p.i-1]
			switch p.next() {
			case ",":
			case ":":
				reason := "a value cannot hold ':'; expected ',' before the next key"
				if key == "roundup_power2_divisions" && val != "]" {
					reason = "sizes and their divisions go in brackets, as in roundup_power2_divisions:[256:1,512:2,>:4]; expected ',' before the next key"
				}
				if val == "]" {
					val = ""
				}
				return base, p.quoteWhole(&ConfigError{Key: key, Value: val, Reason: reason}, keyTok, valTok)
			default:
				reason := "expected ',' before the next key"
				if next := p.toks[p.i-1]; isConfigWord(val) && isConfigWord(next) {
					// PyTorch's parser drops blanks inside a value, so
					// that "51 2" reads 512; a blank here is more likely
					// a mistake than a setting.
					reason += fmt.Sprintf(", not a blank (PyTorch's parser drops blanks and reads %q as %q)",
						cutConfig(val)+" "+cutConfig(next), cutConfig(val)+cutConfig(next))
				}
				return base, p.quoteWhole(&ConfigError{Key: key, Reason: reason}, keyTok, valTok)
			}
		}
	}
	return c, nil
}

// set parses the value of key from p into c.
func (c *Config) set(key string, p *configParser) error {
	if key == "roundup_power2_divisions" {
		return c.parseDivisions(p)
	}
	val := p.next()
	bad := func(format string, args ...any) error {
		return &ConfigError{Key: key, Value: val, Reason: fmt.Sprintf(format, args...)}
	}
	if !isConfigWord(val) { // val is the ',' or ':' that follows, not a value
		return &ConfigError{Key: key, Reason: "missing value"}
	}
	switch key {
	case "policy":
		switch val {
		case "vram":
			c.Policy = PolicyVRAM
		case "pytorch":
			c.Policy = PolicyPyTorch
		default:
			return bad("unknown policy%s; allowed: pytorch, vram", didYouMean(val, []string{"pytorch", "vram"}))
		}
	case "expandable_segments", "release_lock_on_cudamalloc", "release_lock_on_hipmalloc",
		"pinned_use_cuda_host_register", "pinned_use_hip_host_register",
		"pinned_use_background_threads", "graph_capture_record_stream_reuse":
		v, ok := parseConfigBool(val)
		if !ok {
			return bad("expected True or False (any case) or 1 or 0")
		}
		switch key {
		case "expandable_segments":
			c.ExpandableSegments = v
		case "release_lock_on_cudamalloc", "release_lock_on_hipmalloc":
			c.ReleaseLockOnCUDAMalloc = v
		case "pinned_use_cuda_host_register", "pinned_use_hip_host_register":
			c.PinnedUseCUDAHostRegister = v
		case "pinned_use_background_threads":
			c.PinnedUseBackgroundThreads = v
		case "graph_capture_record_stream_reuse":
			c.GraphCaptureRecordStreamReuse = v
		}
	case "max_split_size_mb":
		v, err := units.ParseCount(key, val, 0, maxSplitSizeMBLimit)
		if err != nil || v < kLargeBuffer>>20 {
			return bad("expected a whole number of MiB of at least %d (the large segment size) and at most %d", kLargeBuffer>>20, int64(maxSplitSizeMBLimit))
		}
		c.MaxSplitSizeMB = v
	case "max_non_split_rounding_mb":
		v, err := units.ParseCount(key, val, kLargeBuffer>>20, maxSplitSizeMBLimit)
		if err != nil {
			return bad("expected a whole number of MiB of at least %d (the large segment size) and at most %d", kLargeBuffer>>20, int64(maxSplitSizeMBLimit))
		}
		c.MaxNonSplitRoundingMB = v
	case "garbage_collection_threshold":
		v, err := units.ParseDecimal(key, val)
		if err != nil || !(v > 0 && v < 1) {
			return bad("expected a decimal number greater than 0 and less than 1, such as 0.6")
		}
		c.GarbageCollectionThreshold = v
	case "per_process_memory_fraction":
		v, err := units.ParseDecimal(key, val)
		if err != nil || !(v > 0 && v <= 1) {
			return bad("expected a decimal number greater than 0 and at most 1, such as 0.5")
		}
		c.PerProcessMemoryFraction = v
	case "pinned_num_register_threads":
		v, err := units.ParseCount(key, val, 1, maxRegisterThreads)
		if err != nil || v&(v-1) != 0 {
			return bad("expected a power of two up to %d", maxRegisterThreads)
		}
		c.PinnedNumRegisterThreads = int(v)
	case "pinned_reserve_segment_size_mb":
		v, err := units.ParseCount(key, val, 1, maxPinnedReserveMB)
		if err != nil {
			return bad("expected a whole number of MiB above 0 and at most %d", int64(maxPinnedReserveMB))
		}
		c.PinnedReserveSegmentSizeMB = v
	case "backend":
		if val != "native" {
			if m := didYouMean(val, []string{"native"}); m != "" {
				return bad("unknown backend%s; allowed: native", m)
			}
			return bad("only the native backend exists in vram (PyTorch's cudaMallocAsync backend has no counterpart)")
		}
	default:
		return &ConfigError{Key: key, Reason: "unknown key" + didYouMean(key, configKeyList) + "; allowed: " + configKeys}
	}
	return nil
}

// parseDivisions parses the value of roundup_power2_divisions: one power of
// two (or 0) for every size, or the bracketed per-size form.
func (c *Config) parseDivisions(p *configParser) error {
	const key = "roundup_power2_divisions"
	divisions := func(tok string) (int, error) {
		v, err := units.ParseCount(key, tok, 0, 1<<20)
		if err != nil || (v != 0 && v&(v-1) != 0) {
			return 0, &ConfigError{Key: key, Value: tok, Reason: "divisions must be 0 or a power of two up to 1048576"}
		}
		return int(v), nil
	}
	tok := p.next()
	if tok != "[" {
		v, err := divisions(tok)
		if err != nil {
			return err
		}
		for i := range c.RoundupPower2Divisions {
			c.RoundupPower2Divisions[i] = v
		}
		return nil
	}
	// As in PyTorch, the list sets the intervals its entries cover; the
	// others keep the divisions set before, by an earlier
	// roundup_power2_divisions or the Config that With was given.
	d := c.RoundupPower2Divisions
	first, last := true, -1
	for {
		k := p.next()
		switch {
		case k == "]" && first:
			return &ConfigError{Key: key, Reason: "empty list; expected [size_mb:divisions,...]"}
		case k == "]":
			return &ConfigError{Key: key, Reason: "',' before ']': remove it, or add a size_mb:divisions entry after it"}
		case k == ":":
			return &ConfigError{Key: key, Reason: "missing the size before ':' in an entry; expected [size_mb:divisions,...,>:divisions]"}
		}
		if p.next() != ":" {
			return &ConfigError{Key: key, Value: k, Reason: "expected [size_mb:divisions,...,>:divisions]"}
		}
		dv := p.next()
		if dv == "]" || dv == "," || dv == "" {
			return &ConfigError{Key: key, Reason: fmt.Sprintf("missing the divisions after %s: in an entry; expected [size_mb:divisions,...,>:divisions]", cutConfig(k))}
		}
		v, err := divisions(dv)
		if err != nil {
			return err
		}
		if k == ">" {
			if last < 0 {
				return &ConfigError{Key: key, Value: k, Reason: "'>' must follow at least one size"}
			}
			if last == len(d)-1 {
				return &ConfigError{Key: key, Value: k, Reason: fmt.Sprintf("'>' would set nothing: the previous size is in the last interval, every size from %d MiB up", 1<<(len(d)-1))}
			}
			for i := last + 1; i < len(d); i++ {
				d[i] = v
			}
		} else {
			mb, err := strconv.ParseUint(k, 10, 64)
			if err != nil || mb == 0 || mb&(mb-1) != 0 {
				return &ConfigError{Key: key, Value: k, Reason: "each size must be a power of two in MiB (1, 2, 4, ...) or '>'"}
			}
			idx := min(bits.Len64(mb)-1, len(d)-1)
			if idx <= last && idx == len(d)-1 {
				return &ConfigError{Key: key, Value: k, Reason: fmt.Sprintf("every size from %d MiB up is in the last interval, which the previous size already set", 1<<(len(d)-1))}
			}
			if idx <= last {
				return &ConfigError{Key: key, Value: k, Reason: "sizes must increase"}
			}
			if first {
				for i := 0; i < idx; i++ {
					d[i] = v
				}
			}
			d[idx] = v
			last = idx
		}
		first = false
		switch p.next() {
		case ",":
			if k == ">" {
				return &ConfigError{Key: key, Value: k, Reason: "'>' sets every larger size, so it must be the last entry"}
			}
		case "]":
			c.RoundupPower2Divisions = d
			return nil
		default:
			return &ConfigError{Key: key, Reason: "expected ',' or ']' in the list of sizes"}
		}
	}
}

// String returns c in VRAM_ALLOC_CONF syntax, listing only settings that
// differ from the zero Config, in a fixed order; "" for the zero Config.
// [ParseConfig] of the result returns c.
func (c Config) String() string {
	var parts []string
	if c.Policy != PolicyVRAM {
		parts = append(parts, "policy:"+c.Policy.String())
	}
	if c.ExpandableSegments {
		parts = append(parts, "expandable_segments:True")
	}
	if c.MaxSplitSizeMB != 0 {
		parts = append(parts, "max_split_size_mb:"+strconv.FormatInt(c.MaxSplitSizeMB, 10))
	}
	if c.MaxNonSplitRoundingMB != 0 {
		parts = append(parts, "max_non_split_rounding_mb:"+strconv.FormatInt(c.MaxNonSplitRoundingMB, 10))
	}
	if d := c.divisionsString(); d != "" {
		parts = append(parts, "roundup_power2_divisions:"+d)
	}
	if c.GarbageCollectionThreshold != 0 {
		parts = append(parts, "garbage_collection_threshold:"+strconv.FormatFloat(c.GarbageCollectionThreshold, 'g', -1, 64))
	}
	if c.PerProcessMemoryFraction != 0 {
		parts = append(parts, "per_process_memory_fraction:"+strconv.FormatFloat(c.PerProcessMemoryFraction, 'g', -1, 64))
	}
	return strings.Join(append(parts, c.NotModelled()...), ",")
}

// NotModelled returns the settings of c that this package accepts, so that
// a PYTORCH_CUDA_ALLOC_CONF string PyTorch takes is taken here too, but
// does not act on, each as key:value in [Config.String]'s form and order:
// release_lock_on_cudamalloc, pinned_use_cuda_host_register,
// pinned_num_register_threads, pinned_reserve_segment_size_mb,
// pinned_use_background_threads and graph_capture_record_stream_reuse when
// set. It is nil when c has none; a tool that replays or reports under c
// says these had no effect.
func (c Config) NotModelled() []string {
	var parts []string
	if c.ReleaseLockOnCUDAMalloc {
		parts = append(parts, "release_lock_on_cudamalloc:True")
	}
	if c.PinnedUseCUDAHostRegister {
		parts = append(parts, "pinned_use_cuda_host_register:True")
	}
	if c.PinnedNumRegisterThreads != 0 {
		parts = append(parts, "pinned_num_register_threads:"+strconv.Itoa(c.PinnedNumRegisterThreads))
	}
	if c.PinnedReserveSegmentSizeMB != 0 {
		parts = append(parts, "pinned_reserve_segment_size_mb:"+strconv.FormatInt(c.PinnedReserveSegmentSizeMB, 10))
	}
	if c.PinnedUseBackgroundThreads {
		parts = append(parts, "pinned_use_background_threads:True")
	}
	if c.GraphCaptureRecordStreamReuse {
		parts = append(parts, "graph_capture_record_stream_reuse:True")
	}
	return parts
}

// divisionsString writes RoundupPower2Divisions in the shortest form that
// ParseConfig reads back exactly, "" when all are 0.
func (c Config) divisionsString() string {
	d := c.RoundupPower2Divisions
	same := true
	for _, v := range d {
		same = same && v == d[0]
	}
	if same {
		if d[0] == 0 {
			return ""
		}
		return strconv.Itoa(d[0])
	}
	// The first key covers the leading run of equal values, '>' the
	// trailing run; the entries between get a key each.
	lead := 0
	for lead+1 < len(d) && d[lead+1] == d[0] {
		lead++
	}
	trail := len(d) - 1
	for trail-1 > lead && d[trail-1] == d[len(d)-1] {
		trail--
	}
	var b strings.Builder
	b.WriteString("[")
	fmt.Fprintf(&b, "%d:%d", uint64(1)<<lead, d[lead])
	for i := lead + 1; i < trail; i++ {
		fmt.Fprintf(&b, ",%d:%d", uint64(1)<<i, d[i])
	}
	if trail > lead {
		fmt.Fprintf(&b, ",>:%d", d[trail])
	}
	b.WriteString("]")
	return b.String()
}

// parseConfigBool accepts True/False in any case, and 1/0.
func parseConfigBool(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "true", "1":
		return true, true
	case "false", "0":
		return false, true
	}
	return false, false
}

// isConfigWord reports whether tok is a key or value rather than
// punctuation or the end of input.
func isConfigWord(tok string) bool {
	return tok != "" && tok != ":" && tok != "," && tok != "[" && tok != "]"
}

// tokenizeConfig splits s into words and the punctuation : , [ ], dropping
// blanks (the ASCII white space of C's isspace). A word keeps inner
// characters as written; a blank inside one ends it.
// It also returns the byte offset in s where each token starts.
func tokenizeConfig(s string) ([]string, []int) {
	var toks []string
	var starts []int
	word := -1
	flush := func(i int) {
		if word >= 0 {
			toks = append(toks, s[word:i])
			starts = append(starts, word)
			word = -1
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ':', ',', '[', ']':
			flush(i)
			toks = append(toks, string(c))
			starts = append(starts, i)
		case ' ', '\t', '\n', '\v', '\f', '\r': // C's isspace, as PyTorch's tokenizer
			flush(i)
		default:
			if word < 0 {
				word = i
			}
		}
	}
	flush(len(s))
	return toks, starts
}

// configParser walks the tokens of a config string.
type configParser struct {
	s      string
	toks   []string
	starts []int // byte offset in s of each token
	i      int
}

// entryText returns the text of s from the start of token i to the end of
// its entry, the first ',' outside brackets, without the blanks around
// it: what an error about that entry quotes, so that a value the tokenizer
// split (at '[', say) is shown whole. It returns "" when i is past the end.
func (p *configParser) entryText(i int) string {
	if i >= len(p.toks) {
		return ""
	}
	from := p.starts[i]
	depth, end := 0, len(p.s)
	for j := from; j < len(p.s); j++ {
		switch p.s[j] {
		case '[':
			depth++
		case ']':
			depth = max(depth-1, 0)
		case ',':
			if depth == 0 {
				end = j
			}
		}
		if end != len(p.s) {
			break
		}
	}
	return strings.Trim(p.s[from:end], " \t\n\v\f\r")
}

// quoteWhole rewrites err, a [*ConfigError] about the entry whose key is
// token keyTok, to quote the entry's value (token valTok on) as written,
// up to the next ',' outside brackets, rather than the token the parser
// stopped at. Where the error named one part of a bracketed list, the
// reason keeps it.
func (p *configParser) quoteWhole(err error, keyTok, valTok int) error {
	ce, ok := err.(*ConfigError)
	if !ok || ce.Field != "" {
		return err
	}
	out := *ce
	if valTok < 0 { // no ':' after the key: the reason quotes the entry
		if whole := p.entryText(keyTok); whole != "" && whole != ce.Key {
			out.Reason += " (in " + cutConfig(whole) + ")"
		}
		return &out
	}
	whole := p.entryText(valTok)
	if whole == "" || whole == ce.Value {
		return err
	}
	if ce.Value != "" && ce.Value != ">" && strings.HasPrefix(whole, "[") {
		out.Reason += " (at " + cutConfig(ce.Value) + ")"
	}
	out.Value = whole
	return &out
}

func (p *configParser) done() bool { return p.i >= len(p.toks) }

// next returns the next token, "" at the end.
func (p *configParser) next() string {
	if p.done() {
		return ""
	}
	t := p.toks[p.i]
	p.i++
	return t
}

// maxSplitSize returns the split limit in bytes, MaxInt64 when unlimited.
func (c *Config) maxSplitSize() int64 {
	if c.MaxSplitSizeMB == 0 {
		return math.MaxInt64
	}
	return c.MaxSplitSizeMB << 20
}

// maxNonSplitRounding returns, in bytes, how much larger than a request of
// maxSplitSize or more an unsplit cached block may be and still serve it.
func (c *Config) maxNonSplitRounding() int64 {
	if c.MaxNonSplitRoundingMB == 0 {
		return kLargeBuffer
	}
	return c.MaxNonSplitRoundingMB << 20
}

// Validate reports whether every field of c is in the range that
// [ParseConfig] accepts for its key: a Config built in code can hold
// values that no VRAM_ALLOC_CONF string gives, such as a negative
// MaxSplitSizeMB or a threshold of 2. The error is a [*ConfigError] that
// names the field, its key and what is allowed; Validate of any Config
// that ParseConfig returns is nil.
func (c Config) Validate() error {
	bad := func(field, key, value, reason string) error {
		return &ConfigError{Field: field, Key: key, Value: value, Reason: reason}
	}
	fmtFloat := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	if c.Policy != PolicyVRAM && c.Policy != PolicyPyTorch {
		return bad("Policy", "policy", c.Policy.String(), "unknown policy; allowed: memory.PolicyVRAM, memory.PolicyPyTorch")
	}
	if v := c.MaxSplitSizeMB; v != 0 && (v < kLargeBuffer>>20 || v > maxSplitSizeMBLimit) {
		return bad("MaxSplitSizeMB", "max_split_size_mb", strconv.FormatInt(v, 10),
			fmt.Sprintf("expected 0 (no limit) or a whole number of MiB of at least %d (the large segment size) and at most %d", kLargeBuffer>>20, int64(maxSplitSizeMBLimit)))
	}
	if v := c.MaxNonSplitRoundingMB; v != 0 && (v < kLargeBuffer>>20 || v > maxSplitSizeMBLimit) {
		return bad("MaxNonSplitRoundingMB", "max_non_split_rounding_mb", strconv.FormatInt(v, 10),
			fmt.Sprintf("expected 0 (PyTorch's default of %d) or a whole number of MiB of at least %d and at most %d", kLargeBuffer>>20, kLargeBuffer>>20, int64(maxSplitSizeMBLimit)))
	}
	for i, v := range c.RoundupPower2Divisions {
		if v < 0 || v > 1<<20 || v&(v-1) != 0 {
			return bad(fmt.Sprintf("RoundupPower2Divisions[%d]", i), "roundup_power2_divisions", strconv.Itoa(v),
				"divisions must be 0 or a power of two up to 1048576")
		}
	}
	if v := c.GarbageCollectionThreshold; v != 0 && !(v > 0 && v < 1) {
		return bad("GarbageCollectionThreshold", "garbage_collection_threshold", fmtFloat(v),
			"expected 0 (off) or a number greater than 0 and less than 1, such as 0.6")
	}
	if v := c.PerProcessMemoryFraction; v != 0 && !(v > 0 && v <= 1) {
		return bad("PerProcessMemoryFraction", "per_process_memory_fraction", fmtFloat(v),
			"expected 0 (no limit) or a number greater than 0 and at most 1, such as 0.5")
	}
	if v := c.PinnedNumRegisterThreads; v != 0 && (v < 0 || v > maxRegisterThreads || v&(v-1) != 0) {
		return bad("PinnedNumRegisterThreads", "pinned_num_register_threads", strconv.Itoa(v),
			fmt.Sprintf("expected 0 (not given) or a power of two up to %d", maxRegisterThreads))
	}
	if v := c.PinnedReserveSegmentSizeMB; v < 0 || v > maxPinnedReserveMB {
		return bad("PinnedReserveSegmentSizeMB", "pinned_reserve_segment_size_mb", strconv.FormatInt(v, 10),
			fmt.Sprintf("expected 0 (not given) or a whole number of MiB above 0 and at most %d", int64(maxPinnedReserveMB)))
	}
	return nil
}

// Check reports whether c can be used with arena: its fields must be
// valid ([Config.Validate]), and expandable_segments:True under
// policy:pytorch needs a [VirtualArena]. The error is a [*ConfigError].
func (c Config) Check(arena Arena) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Policy == PolicyPyTorch && c.ExpandableSegments {
		if _, ok := arena.(VirtualArena); !ok {
			return &ConfigError{Key: "expandable_segments", Value: "True",
				Reason: "the device's arena has no virtual memory support (it is not a memory.VirtualArena); remove the setting or use a device with CUDA virtual memory"}
		}
	}
	return nil
}
