package monitor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vramgo/vram/memory"
)

// AllocatorCollector is a prometheus.Collector of one caching allocator's
// statistics ([memory.Stats]), labelled with the device and the rank of
// the process. Create it with [NewAllocatorCollector] or register it with
// [RegisterAllocator].
//
// Each family of PyTorch's torch.cuda.memory_stats() becomes four metrics,
// with a pool label ("all", "small_pool", "large_pool"): the current value
// as a gauge vram_allocator_FAMILY (allocated_bytes, reserved_bytes,
// active_bytes, inactive_split_bytes, requested_bytes, allocation, segment,
// active, inactive_split), its peak as a gauge vram_allocator_FAMILY_peak,
// and the sums of its increases and decreases as counters
// vram_allocator_FAMILY_allocated_total and vram_allocator_FAMILY_freed_total.
// oversize_allocations and oversize_segments, which have no pools, become
// the same four metrics without the pool label. The other counters
// (num_alloc_retries, num_ooms, num_sync_all_streams, num_device_alloc,
// num_device_free, num_maps, num_unmaps) become vram_allocator_NAME_total,
// the time spent in the driver vram_allocator_driver_seconds_total, and
// max_split_size the gauge vram_allocator_max_split_size_bytes (-1:
// unlimited).
type AllocatorCollector struct {
	stats  func() memory.Stats
	labels prometheus.Labels
	descs  map[string]*prometheus.Desc // by memory.Stats.Map key
}

var _ prometheus.Collector = (*AllocatorCollector)(nil)

// A LabelOption adds a label to the metrics of a collector of a process's
// own memory ([NewAllocatorCollector], [NewDeviceMemoryCollector]).
type LabelOption interface {
	apply(prometheus.Labels)
}

// LocalRank labels the metrics with local_rank, the process's rank on its
// node in a distributed job (parallel.LaunchInfo.LocalRank, from the
// launcher's LOCAL_RANK), beside rank: with both, one scrape
// configuration covers every process of a job, and each series says which
// process, and which of its node's GPUs, it belongs to.
func LocalRank(n int) LabelOption { return localRank(n) }

// localRank is the [LabelOption] of [LocalRank].
type localRank int

func (n localRank) apply(l prometheus.Labels) { l["local_rank"] = strconv.Itoa(int(n)) }

// checkRanks returns an error wrapping [ErrInvalidOptions], naming fn,
// when rank or the local rank among opts is negative: no process of a job
// has one.
func checkRanks(fn string, rank int, opts []LabelOption) error {
	if rank < 0 {
		return fmt.Errorf("%w: %s: rank %d is negative", ErrInvalidOptions, fn, rank)
	}
	for _, o := range opts {
		if n, ok := o.(localRank); ok && n < 0 {
			return fmt.Errorf("%w: %s: local rank %d is negative", ErrInvalidOptions, fn, n)
		}
	}
	return nil
}

// processLabels returns the constant labels of a collector of a
// process's memory.
func processLabels(device string, rank int, opts []LabelOption) prometheus.Labels {
	l := prometheus.Labels{"device": device, "rank": strconv.Itoa(rank)}
	for _, o := range opts {
		if o != nil {
			o.apply(l)
		}
	}
	return l
}

// NewAllocatorCollector returns a collector that calls stats on every
// scrape and exports the result under the labels device (a device name
// such as "cuda:0") and rank (the process's rank in a distributed job; 0
// for a single process), and those of opts ([LocalRank]). stats must be
// safe to call from any goroutine (vram.MemoryStats is); with a nil stats
// every scrape of the collector fails with an error saying so.
func NewAllocatorCollector(device string, rank int, stats func() memory.Stats, opts ...LabelOption) *AllocatorCollector {
	c := &AllocatorCollector{
		stats:  stats,
		labels: processLabels(device, rank, opts),
		descs:  map[string]*prometheus.Desc{},
	}
	for key := range (memory.Stats{}).Map() {
		name, help, pool, _ := allocatorMetric(key)
		var vars []string
		if pool != "" {
			vars = []string{"pool"}
		}
		// Descriptors are shared by the keys of one metric (one per pool).
		if _, ok := c.descs[name]; !ok {
			c.descs[name] = prometheus.NewDesc(name, help, vars, c.labels)
		}
	}
	return c
}

// allocatorMetric maps a memory.Stats.Map key to its metric name, help,
// pool label ("" for none) and value type.
func allocatorMetric(key string) (name, help, pool string, typ prometheus.ValueType) {
	parts := strings.Split(key, ".")
	if len(parts) == 2 { // a statistic without pools
		parts = []string{parts[0], "", parts[1]}
	}
	if len(parts) == 3 {
		family, pool, kind := parts[0], parts[1], parts[2]
		switch kind {
		case "current":
			return "vram_allocator_" + family, "Current value of the allocator's " + family + " statistic (torch.cuda.memory_stats).", pool, prometheus.GaugeValue
		case "peak":
			return "vram_allocator_" + family + "_peak", "Peak of the allocator's " + family + " statistic since start or the last peak reset.", pool, prometheus.GaugeValue
		default: // allocated, freed
			return "vram_allocator_" + family + "_" + kind + "_total", "Sum of the " + kind + " amounts of the allocator's " + family + " statistic.", pool, prometheus.CounterValue
		}
	}
	switch key {
	case "driver_time_us":
		return "vram_allocator_driver_seconds_total", "Time the allocator spent in device memory calls.", "", prometheus.CounterValue
	case "max_split_size":
		return "vram_allocator_max_split_size_bytes", "The max_split_size_mb setting in bytes; -1 when unlimited.", "", prometheus.GaugeValue
	}
	return "vram_allocator_" + key + "_total", "The allocator's " + key + " counter.", "", prometheus.CounterValue
}

// Describe sends the descriptors of every metric; a nil or zero
// *AllocatorCollector, not made by [NewAllocatorCollector], has none.
func (c *AllocatorCollector) Describe(ch chan<- *prometheus.Desc) {
	if c == nil {
		return
	}
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect calls the stats function and sends the metrics; a nil or zero
// *AllocatorCollector sends none.
func (c *AllocatorCollector) Collect(ch chan<- prometheus.Metric) {
	if c == nil {
		return
	}
	if c.stats == nil {
		for _, d := range c.descs {
			ch <- prometheus.NewInvalidMetric(d, errNil("stats function"))
			break // one error fails the scrape's gathering once
		}
		return
	}
	m := c.stats().Map()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name, _, pool, typ := allocatorMetric(k)
		d, ok := c.descs[name]
		if !ok {
			continue // a key memory added after this collector was made
		}
		v := float64(m[k])
		if k == "driver_time_us" {
			v /= 1e6
		}
		var labels []string
		if pool != "" {
			labels = []string{pool}
		}
		ch <- prometheus.MustNewConstMetric(d, typ, v, labels...)
	}
}

// RegisterAllocator registers with reg a collector of the allocator
// statistics that stats returns, labelled with device and rank, and with
// local_rank when [LocalRank] is given (see [AllocatorCollector] for the
// metrics). Register one per device; two with the same labels are an
// error (prometheus.AlreadyRegisteredError), and a negative rank or
// local rank is one wrapping [ErrInvalidOptions]. In a job started by
// "vram run", take the ranks from parallel.LaunchEnv:
//
//	l, err := parallel.LaunchEnv()
//	...
//	reg := prometheus.NewRegistry()
//	dev := vram.CUDA(l.LocalRank)
//	err = monitor.RegisterAllocator(reg, dev.String(), l.Rank,
//		func() memory.Stats { return vram.MemoryStats(dev) }, monitor.LocalRank(l.LocalRank))
func RegisterAllocator(reg prometheus.Registerer, device string, rank int, stats func() memory.Stats, opts ...LabelOption) error {
	if stats == nil {
		return errors.New("monitor: RegisterAllocator: nil stats function")
	}
	if reg == nil {
		return errors.New("monitor: RegisterAllocator: nil registerer")
	}
	if err := checkRanks("RegisterAllocator", rank, opts); err != nil {
		return err
	}
	return reg.Register(NewAllocatorCollector(device, rank, stats, opts...))
}

// Handler returns an http.Handler that serves g's metrics in the
// Prometheus text format, as promhttp.HandlerFor does. A collector that
// fails (a [DeviceMemoryCollector] whose read fails, say) does not fail
// the scrape: the other metrics are served. So that the failure is still
// seen, when g is also a prometheus.Registerer (a *prometheus.Registry
// is) the handler registers with it the counter
// promhttp_metric_handler_errors_total{cause}, which counts scrapes that
// met an error ("gathering") from the next scrape on, the convention of
// Prometheus's own handler. Several handlers of one registry share it.
// With a nil g every request is answered 500 Internal Server Error with a
// message saying so.
func Handler(g prometheus.Gatherer) http.Handler { return handler(g, 0) }

// handler is [Handler] answering at most maxInFlight requests at once
// (0: no limit), others with 503 Service Unavailable.
func handler(g prometheus.Gatherer, maxInFlight int) http.Handler {
	if g == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, errNil("gatherer").Error(), http.StatusInternalServerError)
		})
	}
	opts := promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: maxInFlight}
	if reg, ok := g.(prometheus.Registerer); ok && canCountErrors(reg) {
		opts.Registry = reg
	}
	return promhttp.HandlerFor(g, opts)
}

// canCountErrors registers with reg the error counter that promhttp
// registers when given a registry, and reports whether promhttp can use
// it: promhttp panics when the registration fails or the metric of that
// name is some other collector.
func canCountErrors(reg prometheus.Registerer) bool {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "promhttp_metric_handler_errors_total",
		Help: "Total number of internal errors encountered by the promhttp metric handler.",
	}, []string{"cause"})
	c.WithLabelValues("gathering") // exported as 0 before the first error
	c.WithLabelValues("encoding")
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		_, ok := are.ExistingCollector.(*prometheus.CounterVec)
		return ok
	}
	return err == nil
}

// Limits of [Serve]'s server, so that clients that connect and then send
// or read nothing (or do so very slowly) cannot hold its connections, and
// file descriptors, for ever, and scrapes cannot pile up. A scrape takes
// milliseconds; scrape intervals are seconds to minutes, and a client
// keeping its connection open between scrapes redials once IdleTimeout
// closed it. One or two Prometheus servers scrape an exporter (a pair for
// high availability); ten scrapes at once are a flood, or scrapes
// repeated while the GPUs' queries hang, each blocked in a read.
var (
	serveReadHeaderTimeout = 10 * time.Second
	serveReadTimeout       = time.Minute
	serveWriteTimeout      = time.Minute
	serveIdleTimeout       = 2 * time.Minute
	// serveMaxScrapes is the most scrapes Serve answers at once; others
	// get 503 Service Unavailable.
	serveMaxScrapes = 10
	// serveShutdownTimeout is how long Serve waits, once its context
	// ended, for scrapes in progress before it closes their connections.
	serveShutdownTimeout = 5 * time.Second
)

// Serve serves g's metrics at /metrics (and a short page at /) on the
// listener ln until ctx is done, then shuts the server down and returns
// nil; it returns the server's error if it stops for another reason.
// It answers GET and HEAD; other methods get 405 Method Not Allowed. It
// serves at most 10 scrapes at once; more get 503 Service Unavailable.
// Scrapes in progress when ctx ends get 5 seconds to finish; then their
// connections are closed (a collector whose read hangs cannot hold the
// server open) and Serve returns an error saying so. A
// connection idle for 2 minutes, or a request not read or answered within
// a minute, is closed.
// A nil ctx, ln or g is an error, returned before anything is served.
// Programs call it in a goroutine:
//
//	ln, err := net.Listen("tcp", ":9400")
//	...
//	go monitor.Serve(ctx, ln, reg)
func Serve(ctx context.Context, ln net.Listener, g prometheus.Gatherer) error {
	switch {
	case ctx == nil:
		return errNil("context")
	case ln == nil:
		return errNil("listener")
	case g == nil:
		return errNil("gatherer")
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", handler(g, serveMaxScrapes))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>vram exporter</title><p><a href="/metrics">/metrics</a></p>`)
	})
	srv := &http.Server{Handler: readOnly(mux), ReadHeaderTimeout: serveReadHeaderTimeout, ReadTimeout: serveReadTimeout,
		WriteTimeout: serveWriteTimeout, IdleTimeout: serveIdleTimeout}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), serveShutdownTimeout)
		defer cancel()
		err := srv.Shutdown(sctx)
		<-done
		if err != nil {
			// Shutdown leaves the connections it waited for open.
			srv.Close()
			return fmt.Errorf("monitor: scrapes still running %s after the server was asked to stop; closed their connections: %w", serveShutdownTimeout, err)
		}
		return nil
	}
}

// readOnly passes GET and HEAD requests to h and answers any other method
// with 405 Method Not Allowed and the methods allowed, as HTTP asks of a
// resource that cannot be changed: a POST or DELETE of /metrics is a
// mistake (or a probe), not a scrape.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method "+r.Method+" not allowed: GET or HEAD", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}
