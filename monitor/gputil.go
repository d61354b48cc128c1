package monitor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rivo/uniseg"

	"github.com/vramgo/vram/internal/printable"
)

var (
	defaultMu  sync.Mutex
	defaultSrc *NVML
)

// Default returns the process's shared NVML source, opening it on first
// use; after a failure the next call tries again. The functions in GPUtil's
// style ([GetGPUs], [GetAvailable], [GetFirstAvailable], [ShowUtilization])
// read through it. Do not Close it.
func Default() (Source, error) {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	if defaultSrc == nil {
		s, err := OpenNVML()
		if err != nil {
			return nil, err
		}
		defaultSrc = s
	}
	return defaultSrc, nil
}

// GetGPUs returns every GPU's name, UUID, memory, utilization and
// temperature, what GPUtil.getGPUs reads, through NVML rather than an
// nvidia-smi process ([FieldsGPUtil]: power, clocks and processes are not
// read; use [OpenNVML] and Read for them). Without a driver the error wraps
// [ErrNoDriver].
func GetGPUs() ([]GPU, error) {
	if _, err := Default(); err != nil {
		return nil, err
	}
	defaultMu.Lock()
	src := defaultSrc
	defaultMu.Unlock()
	r, err := src.ReadFields(FieldsGPUtil)
	return r.GPUs, err
}

// Order is how [Available] sorts the GPUs it returns.
type Order string

// The orders of GPUtil's getAvailable.
const (
	OrderFirst  Order = "first"  // lowest index first (the default)
	OrderLast   Order = "last"   // highest index first
	OrderRandom Order = "random" // shuffled
	OrderLoad   Order = "load"   // least busy (compute utilization) first
	OrderMemory Order = "memory" // lowest share of memory in use first
)

// Options select GPUs for [Available], [GetAvailable] and
// [GetFirstAvailable], as GPUtil's getAvailable arguments do. The zero
// value is GPUtil's defaults: lowest index first, one GPU, less than half
// busy and less than half of its memory in use.
type Options struct {
	// Order sorts the GPUs that qualify; "" means OrderFirst.
	Order Order
	// Limit is the most indices returned; 0 means 1 (GPUtil's default)
	// and a negative value means no limit.
	Limit int
	// MaxLoad: a GPU qualifies only if its compute utilization, as a
	// fraction 0 to 1, is below MaxLoad; 0 means 0.5, and NaN or a
	// negative value admits no GPU.
	MaxLoad float64
	// MaxMemory: a GPU qualifies only if the fraction of its memory in
	// use ([Memory.UsedFraction]) is below MaxMemory; 0 means 0.5, and
	// NaN or a negative value admits no GPU.
	MaxMemory float64
	// MinFreeBytes: a GPU qualifies only if at least this many bytes are
	// free (where the driver reports the memory in use but not the free
	// memory, what the use leaves of the total); 0 means no minimum.
	MinFreeBytes int64
	// IncludeUnknown lets GPUs whose load, memory in use or free memory
	// the driver does not report qualify (GPUtil's includeNan).
	IncludeUnknown bool
	// ExcludeIDs and ExcludeUUIDs never qualify.
	ExcludeIDs   []int
	ExcludeUUIDs []string
}

// ErrInvalidOptions is wrapped by the errors of [GetAvailable] and
// [GetFirstAvailable] for [Options] they cannot follow, and by those of
// [RegisterAllocator] and [RegisterDeviceMemory] for a negative rank or
// local rank; test with errors.Is.
var ErrInvalidOptions = errors.New("monitor: invalid options")

// Check returns an error wrapping [ErrInvalidOptions] when o.Order is not
// one of the Order constants (or ""): a misspelt order ("Memory",
// "mem") would otherwise sort by index without a word. Limits are not
// checked: a NaN or negative one is GPUtil's way of admitting no GPU.
func (o Options) Check() error {
	switch o.Order {
	case "", OrderFirst, OrderLast, OrderRandom, OrderLoad, OrderMemory:
		return nil
	}
	return fmt.Errorf("%w: order %q is none of %q, %q, %q, %q, %q", ErrInvalidOptions, o.Order,
		OrderFirst, OrderLast, OrderRandom, OrderLoad, OrderMemory)
}

// ErrNoneAvailable is returned by [GetFirstAvailable] when no GPU
// qualifies.
var ErrNoneAvailable = errors.New("monitor: no GPU is available under the given limits")

// Available returns the indices of the gpus that qualify under opts, in
// opts.Order, at most opts.Limit of them, each once (a GPU listed twice
// is judged as first listed). It is GPUtil's getAvailable on readings the
// caller already has. An Order that [Options.Check] refuses
// sorts as OrderFirst here; check opts first to tell.
func Available(gpus []GPU, opts Options) []int {
	maxLoad, maxMem := opts.MaxLoad, opts.MaxMemory
	if maxLoad == 0 {
		maxLoad = 0.5
	}
	if maxMem == 0 {
		maxMem = 0.5
	}
	var ok []GPU
	// An index a source lists twice (NewRecorded and a program's own
	// Source may) is judged once, as first listed: returned twice, it
	// would read as two GPUs.
	seen := map[int]bool{}
	for _, g := range gpus {
		if seen[g.Index] {
			continue
		}
		seen[g.Index] = true
		if slices.Contains(opts.ExcludeIDs, g.Index) || slices.Contains(opts.ExcludeUUIDs, g.UUID) {
			continue
		}
		if opts.MinFreeBytes > 0 {
			if free := freeBytes(g.Memory); free == Unknown {
				if !opts.IncludeUnknown {
					continue
				}
			} else if free < opts.MinFreeBytes {
				continue
			}
		}
		// GPUtil's tests are load < maxLoad and memoryUtil < maxMemory:
		// a NaN limit admits no GPU.
		if load := g.Utilization.ComputePercent; load == Unknown {
			if !opts.IncludeUnknown {
				continue
			}
		} else if !(float64(load)/100 < maxLoad) {
			continue
		}
		if g.Memory.Used() == Unknown {
			if !opts.IncludeUnknown {
				continue
			}
		} else if !(g.Memory.UsedFraction() < maxMem) {
			continue
		}
		ok = append(ok, g)
	}
	switch opts.Order {
	case OrderLast:
		slices.SortStableFunc(ok, func(a, b GPU) int { return b.Index - a.Index })
	case OrderRandom:
		rand.Shuffle(len(ok), func(i, j int) { ok[i], ok[j] = ok[j], ok[i] })
	case OrderLoad:
		load := func(g GPU) float64 {
			if g.Utilization.ComputePercent == Unknown {
				return 2 // after every known load
			}
			return float64(g.Utilization.ComputePercent) / 100
		}
		slices.SortStableFunc(ok, func(a, b GPU) int { return cmpFloat(load(a), load(b), a.Index, b.Index) })
	case OrderMemory:
		frac := func(g GPU) float64 {
			if g.Memory.Used() == Unknown {
				return 2 // after every known share
			}
			return g.Memory.UsedFraction()
		}
		slices.SortStableFunc(ok, func(a, b GPU) int { return cmpFloat(frac(a), frac(b), a.Index, b.Index) })
	default:
		slices.SortStableFunc(ok, func(a, b GPU) int { return a.Index - b.Index })
	}
	limit := opts.Limit
	if limit == 0 {
		limit = 1
	}
	if limit > 0 && len(ok) > limit {
		ok = ok[:limit]
	}
	ids := make([]int, len(ok))
	for i, g := range ok {
		ids[i] = g.Index
	}
	return ids
}

// freeBytes returns m's free memory: FreeBytes, or where the driver does
// not report it, what [Memory.Used] and the driver's reserve leave of the
// total; Unknown when that is unknown too.
func freeBytes(m Memory) int64 {
	if m.FreeBytes != Unknown {
		return m.FreeBytes
	}
	used := m.Used()
	if used == Unknown {
		return Unknown
	}
	free := m.TotalBytes - used
	if m.ReservedBytes != Unknown {
		free -= m.ReservedBytes
	}
	return max(free, 0)
}

func cmpFloat(a, b float64, ia, ib int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return ia - ib
}

// GetAvailable reads every GPU and returns the indices of those that
// qualify under opts (see [Available]), as GPUtil.getAvailable does. The
// result is empty, not an error, when none qualifies. Options that
// [Options.Check] refuses are an error, before any GPU is read.
func GetAvailable(opts Options) ([]int, error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	gpus, err := GetGPUs()
	if err != nil {
		return nil, err
	}
	return Available(gpus, opts), nil
}

// GetFirstAvailable returns the index of the first GPU that qualifies
// under opts (opts.Limit is ignored), or an error wrapping
// [ErrNoneAvailable]. It reads the GPUs once; [FirstAvailable] waits and
// retries as GPUtil's getFirstAvailable does with attempts and interval.
func GetFirstAvailable(opts Options) (int, error) {
	opts.Limit = 1
	ids, err := GetAvailable(opts)
	if err != nil {
		return -1, err
	}
	if len(ids) == 0 {
		return -1, ErrNoneAvailable
	}
	return ids[0], nil
}

// FirstAvailable reads src up to attempts times, interval apart, and
// returns the index of the first GPU that qualifies under opts
// (opts.Limit is ignored) in the first reading where one does: GPUtil's
// getFirstAvailable with its attempts and interval. attempts below 1 mean
// one. When no reading has such a GPU the error wraps [ErrNoneAvailable];
// when ctx ends first, it is ctx's error; a read that fails ends the wait
// with the source's error. Options that [Options.Check] refuses and a
// negative interval (zero reads back to back) are errors wrapping
// [ErrInvalidOptions], returned before src is read; so is a nil ctx or
// src, without that sentinel.
//
//	src, err := monitor.Default()
//	...
//	id, err := monitor.FirstAvailable(ctx, src, monitor.Options{MaxMemory: 0.1}, 10, time.Minute)
func FirstAvailable(ctx context.Context, src Source, opts Options, attempts int, interval time.Duration) (int, error) {
	if err := opts.Check(); err != nil {
		return -1, err
	}
	switch {
	case interval < 0:
		return -1, fmt.Errorf("%w: interval %s between attempts is negative", ErrInvalidOptions, interval)
	case ctx == nil:
		return -1, errNil("context")
	case src == nil:
		return -1, errNil("source")
	}
	opts.Limit = 1
	attempts = max(attempts, 1)
	var timer *time.Timer
	for i := 1; ; i++ {
		if err := ctx.Err(); err != nil {
			return -1, err
		}
		r, err := src.Read()
		if err != nil {
			return -1, err
		}
		if ids := Available(r.GPUs, opts); len(ids) > 0 {
			return ids[0], nil
		}
		if i >= attempts {
			if attempts == 1 {
				return -1, ErrNoneAvailable
			}
			return -1, fmt.Errorf("%w (%d attempts, %s apart)", ErrNoneAvailable, attempts, interval)
		}
		if timer == nil {
			timer = time.NewTimer(interval)
			defer timer.Stop()
		} else {
			timer.Reset(interval)
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-timer.C:
		}
	}
}

// ShowUtilization reads every GPU and writes GPUtil's table of compute
// and memory use to w (GPUtil.showUtilization):
//
//	| ID | GPU | MEM |
//	------------------
//	|  0 |  3% | 30% |
//
// GPU is the compute utilization and MEM the share of memory in use.
func ShowUtilization(w io.Writer) error {
	if w == nil {
		return errNil("writer")
	}
	gpus, err := GetGPUs()
	if err != nil {
		return err
	}
	return WriteUtilization(w, gpus, false)
}

// WriteUtilization writes the table of [ShowUtilization] for gpus; with
// all, GPUtil's long form: name, UUID, temperature, both utilizations and
// memory in MiB. MEM is [Memory.UsedFraction], "?" where [Memory.Used] is
// unknown. Control characters in names and UUIDs are written as escapes
// (\x1b), and columns are aligned as a terminal draws them (a CJK
// character takes two columns).
func WriteUtilization(w io.Writer, gpus []GPU, all bool) error {
	if w == nil {
		return errNil("writer")
	}
	type col struct {
		name  string
		cells []string
		left  bool
	}
	pct := func(v int) string {
		if v == Unknown {
			return "?"
		}
		return fmt.Sprintf("%d%%", v)
	}
	mib := func(v int64) string {
		if v == Unknown {
			return "?"
		}
		return fmt.Sprintf("%dMB", v>>20)
	}
	cols := []col{{name: "ID"}, {name: "GPU"}, {name: "MEM"}}
	if all {
		cols = []col{{name: "ID"}, {name: "Name", left: true}, {name: "UUID", left: true}, {name: "GPU temp."},
			{name: "GPU util."}, {name: "Memory util."}, {name: "Memory total"}, {name: "Memory used"}, {name: "Memory free"}}
	}
	for _, g := range gpus {
		memPct := Unknown
		if g.Memory.Used() != Unknown {
			memPct = int(g.Memory.UsedFraction()*100 + 0.5)
		}
		row := []string{fmt.Sprint(g.Index), pct(g.Utilization.ComputePercent), pct(memPct)}
		if all {
			temp := "?"
			if g.TemperatureC != Unknown {
				temp = fmt.Sprintf("%dC", g.TemperatureC)
			}
			row = []string{fmt.Sprint(g.Index), printable.String(g.Name), printable.String(g.UUID), temp, pct(g.Utilization.ComputePercent), pct(memPct),
				mib(g.Memory.TotalBytes), mib(g.Memory.Used()), mib(g.Memory.FreeBytes)}
		}
		for i := range cols {
			cols[i].cells = append(cols[i].cells, row[i])
		}
	}
	var header, sep strings.Builder
	lines := make([]strings.Builder, len(gpus))
	// fmt pads to a number of runes; a terminal draws some runes two
	// columns wide and others none, so pad by the columns drawn.
	pad := func(s string, width int) string { return strings.Repeat(" ", max(width-uniseg.StringWidth(s), 0)) }
	for _, c := range cols {
		width := uniseg.StringWidth(c.name)
		for _, s := range c.cells {
			width = max(width, uniseg.StringWidth(s))
		}
		fmt.Fprintf(&header, "| %s%s ", c.name, pad(c.name, width))
		for i, s := range c.cells {
			if c.left {
				fmt.Fprintf(&lines[i], "| %s%s ", s, pad(s, width))
			} else {
				fmt.Fprintf(&lines[i], "| %s%s ", pad(s, width), s)
			}
		}
	}
	header.WriteString("|")
	sep.WriteString(strings.Repeat("-", uniseg.StringWidth(header.String())))
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, header.String())
	fmt.Fprintln(bw, sep.String())
	for i := range lines {
		fmt.Fprintln(bw, lines[i].String()+"|")
	}
	return bw.Flush()
}
