package memory

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// DriverCall is one kind of CUDA driver call an arena makes, as the cost
// model of [ModelledCost] prices it and as [CallTimes] measures it.
type DriverCall uint8

// The driver calls of an arena: [Arena.Alloc] and Free are one cuMemAlloc
// and one cuMemFree; [VirtualArena.Map] is a cuMemCreate, a cuMemMap and a
// cuMemSetAccess; Unmap a cuMemUnmap and a cuMemRelease; Reserve and
// Unreserve a cuMemAddressReserve and a cuMemAddressFree.
const (
	CallAlloc DriverCall = iota
	CallFree
	CallCreate
	CallMap
	CallSetAccess
	CallUnmap
	CallRelease
	CallReserve
	CallUnreserve
	numDriverCalls
)

var driverCallNames = [numDriverCalls]string{
	"cuMemAlloc", "cuMemFree", "cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease",
	"cuMemAddressReserve", "cuMemAddressFree",
}

// DriverCalls returns every kind of [DriverCall], in the order of their
// values: the rows a table of measured calls has, called or not.
func DriverCalls() []DriverCall {
	calls := make([]DriverCall, numDriverCalls)
	for i := range calls {
		calls[i] = DriverCall(i)
	}
	return calls
}

// String returns the driver function's name, such as "cuMemMap".
func (c DriverCall) String() string {
	if c < numDriverCalls {
		return driverCallNames[c]
	}
	return fmt.Sprintf("DriverCall(%d)", uint8(c))
}

// Modelled reports whether the cost model has a figure for c (it has none
// for reserving and freeing address space, which [SimArena] counts as free).
func (c DriverCall) Modelled() bool { return c < CallReserve }

// ModelledCost returns the cost model's time for one call c of size bytes
// (figures measured on an H100, in sim.go): what [SimArena] charges.
// cuMemAlloc, cuMemFree and cuMemRelease cost more with size; the other
// virtual-memory calls cost the same at every size, a cuMemSetAccess that
// covers several mappings once for each ([CallTimes.AddRange]); address
// reservations cost nothing.
func ModelledCost(c DriverCall, size int64) time.Duration {
	switch c {
	case CallAlloc:
		return allocCost(size)
	case CallFree:
		return freeCost(size)
	case CallCreate:
		return costCreate
	case CallMap:
		return costMap
	case CallSetAccess:
		return costSetAccess
	case CallUnmap:
		return costUnmap
	case CallRelease:
		return releaseCost(size)
	}
	return 0
}

// sizeClasses are the upper bounds of the size classes of [CallTimes], in
// bytes: the cost model's tiers for cuMemFree (20 MiB, 1 GiB) and
// cuMemAlloc (128 MiB, 1 GiB) and a few more, so that a fit can see where
// the cost starts to grow.
var sizeClasses = []int64{2 << 20, 20 << 20, 128 << 20, 1 << 30, 8 << 30}

// SizeClass returns the label of the size class of size bytes: "<=2MiB",
// "<=20MiB", "<=128MiB", "<=1GiB", "<=8GiB" or ">8GiB".
func SizeClass(size int64) string {
	labels := []string{"<=2MiB", "<=20MiB", "<=128MiB", "<=1GiB", "<=8GiB"}
	for i, c := range sizeClasses {
		if size <= c {
			return labels[i]
		}
	}
	return ">8GiB"
}

func sizeClassIndex(size int64) int {
	for i, c := range sizeClasses {
		if size <= c {
			return i
		}
	}
	return len(sizeClasses)
}

// CallTimes collects the measured wall time of driver calls, by call and
// size class, beside what the cost model says the same calls cost. An
// arena that measures itself (backend/cuda's replay arena) adds to one. It
// is safe for concurrent use.
type CallTimes struct {
	mu      sync.Mutex
	samples map[callKey][]time.Duration
	model   map[callKey]time.Duration
}

type callKey struct {
	call  DriverCall
	class int
}

// Add records one call c of size bytes that took d.
func (t *CallTimes) Add(c DriverCall, size int64, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.samples == nil {
		t.samples = map[callKey][]time.Duration{}
		t.model = map[callKey]time.Duration{}
	}
	k := callKey{c, sizeClassIndex(size)}
	t.samples[k] = append(t.samples[k], d)
	t.model[k] += ModelledCost(c, size)
}

// AddRange records one call c over size bytes that cover mappings
// mappings (a cuMemSetAccess granting access to a run of them) and took d;
// the model charges a cuMemSetAccess once per mapping.
func (t *CallTimes) AddRange(c DriverCall, size int64, mappings int, d time.Duration) {
	t.Add(c, size, d)
	if c != CallSetAccess || mappings <= 1 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.model[callKey{c, sizeClassIndex(size)}] += time.Duration(mappings-1) * ModelledCost(c, size)
}

// CallRow is the measurements of one call in one size class.
type CallRow struct {
	Call      string `json:"call"`
	SizeClass string `json:"size_class"`
	// Modelled is false for calls the cost model has no figure for.
	Modelled bool  `json:"modelled"`
	Count    int64 `json:"count"`
	// Times in nanoseconds: the sum, the median, the 90th percentile and
	// the extremes of the calls measured, and the model's sum for them.
	Total      time.Duration `json:"total_ns"`
	Median     time.Duration `json:"median_ns"`
	P90        time.Duration `json:"p90_ns"`
	Min        time.Duration `json:"min_ns"`
	Max        time.Duration `json:"max_ns"`
	ModelTotal time.Duration `json:"model_total_ns"`
}

// Mean returns the mean time of one call.
func (r CallRow) Mean() time.Duration {
	if r.Count == 0 {
		return 0
	}
	return r.Total / time.Duration(r.Count)
}

// Rows returns one row per call and size class seen, in the order of the
// calls and then of the classes.
func (t *CallTimes) Rows() []CallRow {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]callKey, 0, len(t.samples))
	for k := range t.samples {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b callKey) int {
		if a.call != b.call {
			return int(a.call) - int(b.call)
		}
		return a.class - b.class
	})
	rows := make([]CallRow, 0, len(keys))
	for _, k := range keys {
		s := slices.Clone(t.samples[k])
		slices.Sort(s)
		var total time.Duration
		for _, d := range s {
			total += d
		}
		label := ">8GiB"
		if k.class < len(sizeClasses) {
			label = SizeClass(sizeClasses[k.class])
		}
		rows = append(rows, CallRow{Call: k.call.String(), SizeClass: label, Modelled: k.call.Modelled(),
			Count: int64(len(s)), Total: total, Median: s[len(s)/2], P90: s[len(s)*9/10], Min: s[0], Max: s[len(s)-1],
			ModelTotal: t.model[k]})
	}
	return rows
}

// Total returns the measured time of every call recorded, and Modelled
// what the cost model says the modelled ones cost; ModelledMeasured is the
// measured time of those same modelled calls, the figure to compare
// Modelled with.
func (t *CallTimes) Total() (measured, modelled, modelledMeasured time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, s := range t.samples {
		var sum time.Duration
		for _, d := range s {
			sum += d
		}
		measured += sum
		if k.call.Modelled() {
			modelledMeasured += sum
			modelled += t.model[k]
		}
	}
	return measured, modelled, modelledMeasured
}

// Merge adds every call recorded in o to t; merging t into itself does
// nothing.
func (t *CallTimes) Merge(o *CallTimes) {
	if o == t {
		return
	}
	o.mu.Lock()
	samples := make(map[callKey][]time.Duration, len(o.samples))
	model := make(map[callKey]time.Duration, len(o.model))
	for k, s := range o.samples {
		samples[k] = slices.Clone(s)
		model[k] = o.model[k]
	}
	o.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.samples == nil {
		t.samples = map[callKey][]time.Duration{}
		t.model = map[callKey]time.Duration{}
	}
	for k, s := range samples {
		t.samples[k] = append(t.samples[k], s...)
		t.model[k] += model[k]
	}
}
