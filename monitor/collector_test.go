package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/vramgo/vram/memory"
)

func writeJSONForTest(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// gatherFrom registers c alone and gathers its metric families by name.
func gatherFrom(t testing.TB, cs ...prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		m[mf.GetName()] = mf
	}
	return m
}

// value returns the value of the metric of family name whose labels
// include every pair of want, and whether there is one.
func value(mfs map[string]*dto.MetricFamily, name string, want ...string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(want); i += 2 {
			if have[want[i]] != want[i+1] {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		}
	}
	return 0, false
}

func TestCollector(t *testing.T) {
	src := recorded(t, "h200x2.json")
	for i := 0; i < 3; i++ { // the fourth reading: GPU 0 at 61000 MiB, 97%
		src.Read()
	}
	mfs := gatherFrom(t, NewCollector(src))
	tests := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"vram_monitor_up", nil, 1},
		{"vram_driver_info", []string{"driver_version", "580.95.05", "cuda_version", "13.0"}, 1},
		{"vram_gpu_info", []string{"gpu", "0", "name", "NVIDIA H200", "pci_bus_id", "00000000:19:00.0"}, 1},
		{"vram_gpu_memory_total_bytes", []string{"gpu", "0"}, 150754820096},
		{"vram_gpu_memory_used_bytes", []string{"gpu", "0"}, 61000 << 20},
		{"vram_gpu_memory_reserved_bytes", []string{"gpu", "1"}, 598736896},
		{"vram_gpu_utilization_ratio", []string{"gpu", "0"}, 0.97},
		{"vram_gpu_memory_bandwidth_utilization_ratio", []string{"gpu", "0"}, 0.55},
		{"vram_gpu_temperature_celsius", []string{"gpu", "1"}, 51},
		{"vram_gpu_power_limit_watts", []string{"gpu", "0"}, 700},
		{"vram_gpu_clock_hertz", []string{"gpu", "0", "clock", "sm"}, 1980e6},
		{"vram_gpu_processes_visible", []string{"gpu", "0"}, 1},
		{"vram_gpu_processes_visible", []string{"gpu", "1"}, 0},
		{"vram_gpu_process_memory_bytes", []string{"gpu", "0", "pid", "41234", "process", "python3"}, 61000<<20 - 2<<20},
	}
	for _, tc := range tests {
		got, ok := value(mfs, tc.name, tc.labels...)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if _, ok := value(mfs, "vram_gpu_process_memory_bytes", "gpu", "1"); ok {
		t.Error("GPU 1 lists no process but a process metric was exported")
	}

	// Unknown values are left out, not exported as -1.
	mfs = gatherFrom(t, NewCollector(recorded(t, "mig_unknown.json")))
	for _, name := range []string{"vram_gpu_power_watts", "vram_gpu_utilization_ratio", "vram_gpu_temperature_celsius", "vram_gpu_memory_reserved_bytes"} {
		if v, ok := value(mfs, name); ok {
			t.Errorf("%s exported as %v for an unknown value", name, v)
		}
	}

	// A failed read still scrapes, with up 0.
	closed := recorded(t, "h200x2.json")
	closed.Close()
	mfs = gatherFrom(t, NewCollector(closed))
	if v, ok := value(mfs, "vram_monitor_up"); !ok || v != 0 {
		t.Errorf("vram_monitor_up after a failed read: %v %v", v, ok)
	}
}

func TestAllocatorCollector(t *testing.T) {
	var allocs []*memory.Allocator
	for i := 0; i < 2; i++ {
		a := memory.New(memory.NewSimArena(256<<20), memory.Config{})
		for j := 0; j <= i; j++ {
			if _, err := a.Alloc(3<<20, 0, "test"); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := a.Alloc(1000, 0, "")
		a.Free(b)
		allocs = append(allocs, a)
	}
	reg := prometheus.NewPedanticRegistry()
	for i, a := range allocs {
		if err := RegisterAllocator(reg, "sim:"+string(rune('0'+i)), 3, a.Stats); err != nil {
			t.Fatal(err)
		}
	}
	if err := RegisterAllocator(reg, "sim:0", 3, allocs[0].Stats); err == nil {
		t.Error("registering the same device and rank twice succeeded")
	}
	if err := RegisterAllocator(reg, "sim:9", 0, nil); err == nil {
		t.Error("nil stats function accepted")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	for i, a := range allocs {
		dev := "sim:" + string(rune('0'+i))
		st := a.Stats()
		checks := []struct {
			name   string
			labels []string
			want   float64
		}{
			{"vram_allocator_allocated_bytes", []string{"device", dev, "rank", "3", "pool", "all"}, float64(st.AllocatedBytes[memory.StatAll].Current)},
			{"vram_allocator_reserved_bytes_peak", []string{"device", dev, "pool", "large_pool"}, float64(st.ReservedBytes[memory.StatLargePool].Peak)},
			{"vram_allocator_allocation_allocated_total", []string{"device", dev, "pool", "small_pool"}, float64(st.Allocation[memory.StatSmallPool].Allocated)},
			{"vram_allocator_num_ooms_total", []string{"device", dev}, 0},
			{"vram_allocator_num_sync_all_streams_total", []string{"device", dev}, float64(st.NumSyncAllStreams)},
			{"vram_allocator_oversize_segments", []string{"device", dev}, float64(st.OversizeSegments.Current)},
			{"vram_allocator_oversize_allocations_freed_total", []string{"device", dev}, float64(st.OversizeAllocations.Freed)},
			{"vram_allocator_max_split_size_bytes", []string{"device", dev}, float64(st.MaxSplitSize)},
		}
		for _, c := range checks {
			got, ok := value(byName, c.name, c.labels...)
			if !ok || got != c.want {
				t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
			}
		}
		if st.AllocatedBytes[memory.StatAll].Current != int64(i+1)*(3<<20) {
			t.Errorf("test setup: allocator %d holds %d bytes", i, st.AllocatedBytes[memory.StatAll].Current)
		}
	}
	if mf := byName["vram_allocator_driver_seconds_total"]; mf == nil || mf.GetType() != dto.MetricType_COUNTER {
		t.Errorf("driver time: %v", mf)
	}
}

func TestServe(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(recorded(t, "h200x2.json")))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, reg) }()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `vram_gpu_memory_total_bytes{gpu="1",uuid="GPU-a1b2c3d4-e5f6-4789-8abc-def012345678"} 1.50754820096e+11`) {
		t.Errorf("status %d, body:\n%s", resp.StatusCode, body)
	}
	resp, err = client.Get("http://" + ln.Addr().String() + "/nothing")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("/nothing: %d", resp.StatusCode)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

// TestCollectorLabelValues checks that names the driver reports as raw
// bytes become valid label values: a name that is not UTF-8 made the
// metric invalid and ended the scrape of every GPU and process after it.
func TestCollectorLabelValues(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{"plain", "python3", "python3"},
		{"quotes, backslash, newline", "a\"b\\c\nd", "a\"b\\c\nd"},
		{"empty", "", UnknownProcess},
		{"not UTF-8", "train\xff\xfe", "train\uFFFD"},
		{"cut in a rune", "gpu-\xe2\x82", "gpu-\uFFFD"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			procs := []memory.ProcessMemory{{PID: 7, Name: tc.raw, Bytes: 3 << 20}, {PID: 8, Name: "after", Bytes: 1 << 20}}
			gpu := func(i int) GPU {
				return GPU{Index: i, Name: tc.raw, UUID: "GPU-" + strconv.Itoa(i), ProcessesVisible: true, Processes: procs,
					Memory: Memory{TotalBytes: 8 << 20, UsedBytes: 4 << 20, FreeBytes: 4 << 20, ReservedBytes: Unknown}}
			}
			src := NewRecorded([]Reading{{GPUs: []GPU{gpu(0), gpu(1)}}})
			dm := NewDeviceMemoryCollector("cuda:0", 0, func() (memory.DeviceMemory, error) {
				return memory.DeviceMemory{Total: 8 << 20, Free: 4 << 20, Reserved: Unknown, Others: procs}, nil
			})
			mfs := gatherFrom(t, NewCollector(src), dm)
			for _, gpu := range []string{"0", "1"} {
				wantGPU := tc.want
				if tc.raw == "" {
					wantGPU = "" // a GPU without a name keeps its empty label
				}
				if _, ok := value(mfs, "vram_gpu_info", "gpu", gpu, "name", wantGPU); !ok {
					t.Errorf("GPU %s: no vram_gpu_info with name %q", gpu, wantGPU)
				}
				for pid, name := range map[string]string{"7": tc.want, "8": "after"} {
					if v, ok := value(mfs, "vram_gpu_process_memory_bytes", "gpu", gpu, "pid", pid, "process", name); !ok || v == 0 {
						t.Errorf("GPU %s: process %s %q: %v %v", gpu, pid, name, v, ok)
					}
				}
			}
			for pid, name := range map[string]string{"7": tc.want, "8": "after"} {
				if _, ok := value(mfs, "vram_device_memory_other_process_bytes", "pid", pid, "process", name); !ok {
					t.Errorf("device memory: no process %s %q", pid, name)
				}
			}
		})
	}
}

// TestCollectorGPUUp checks that a GPU whose queries fail is visible as
// such: vram_monitor_up stays 1 as long as the source can be read, and
// vram_gpu_up is 0 for that GPU alone.
func TestCollectorGPUUp(t *testing.T) {
	ok := GPU{Index: 0, UUID: "GPU-0", Memory: Memory{TotalBytes: 8 << 20, UsedBytes: 1 << 20, FreeBytes: 7 << 20, ReservedBytes: Unknown}}
	tests := []struct {
		name   string
		errors [][]string // per GPU
		want   []float64  // vram_gpu_up per GPU
	}{
		{"all well", [][]string{nil, nil}, []float64{1, 1}},
		{"second fails", [][]string{nil, {"temperature: NVML_ERROR_GPU_IS_LOST"}}, []float64{1, 0}},
		{"both fail", [][]string{{"memory: NVML_ERROR_UNKNOWN"}, {"power: NVML_ERROR_TIMEOUT", "clocks: NVML_ERROR_TIMEOUT"}}, []float64{0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var gpus []GPU
			for i, errs := range tc.errors {
				g := ok
				g.Index, g.UUID, g.Errors = i, "GPU-"+strconv.Itoa(i), errs
				gpus = append(gpus, g)
			}
			mfs := gatherFrom(t, NewCollector(NewRecorded([]Reading{{GPUs: gpus}})))
			if v, ok := value(mfs, "vram_monitor_up"); !ok || v != 1 {
				t.Errorf("vram_monitor_up = %v (found %v), want 1", v, ok)
			}
			for i, want := range tc.want {
				id := strconv.Itoa(i)
				if v, ok := value(mfs, "vram_gpu_up", "gpu", id, "uuid", "GPU-"+id); !ok || v != want {
					t.Errorf("vram_gpu_up{gpu=%s} = %v (found %v), want %v", id, v, ok, want)
				}
			}
		})
	}
}

// TestServeConcurrentScrapes scrapes one server from several goroutines at
// once, as several Prometheus servers do; it runs under -race in CI. Every
// scrape must be whole: each GPU's up metric and no scrape error.
func TestServeConcurrentScrapes(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(recorded(t, "h200x2.json")))
	if err := RegisterDeviceMemory(reg, "sim:0", 0, func() (memory.DeviceMemory, error) {
		return memory.DeviceMemory{Total: 8 << 20, Free: 4 << 20, Reserved: 1 << 20, Others: []memory.ProcessMemory{{PID: 3, Bytes: 1 << 20}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	ln := serveOn(t, reg)
	client := &http.Client{Timeout: 5 * time.Second}
	errs := make(chan error, 8*10)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				resp, err := client.Get("http://" + ln.Addr().String() + "/metrics")
				if err != nil {
					errs <- err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case err != nil:
					errs <- err
				case resp.StatusCode != http.StatusOK:
					errs <- errors.New(resp.Status)
				case !strings.Contains(string(body), `vram_gpu_up{gpu="0"`) || !strings.Contains(string(body), `vram_gpu_up{gpu="1"`) ||
					!strings.Contains(string(body), `process="unknown"`):
					errs <- errors.New("incomplete scrape:\n" + string(body))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestMetricsLint checks every metric the package exports against
// Prometheus's naming and help conventions (promlint: units as base-unit
// suffixes, _total only on counters, help texts present, ...).
func TestMetricsLint(t *testing.T) {
	a := memory.New(memory.NewSimArena(256<<20), memory.Config{})
	dm := NewDeviceMemoryCollector("sim:0", 0, func() (memory.DeviceMemory, error) {
		return memory.DeviceMemory{Total: 8 << 20, Free: 4 << 20, Reserved: 1 << 20, Others: []memory.ProcessMemory{{PID: 3, Bytes: 1 << 20}}}, nil
	}, LocalRank(0))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(recorded(t, "h200x2.json")), NewAllocatorCollector("sim:0", 0, a.Stats, LocalRank(0)), dm)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) < 40 {
		t.Fatalf("only %d metric families gathered", len(mfs))
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// TestServeClosesIdleConnections checks that Serve closes connections that
// send nothing or stay idle after a scrape: without limits a client could
// hold any number of them, each a file descriptor of the exporter.
func TestServeClosesIdleConnections(t *testing.T) {
	old := []time.Duration{serveReadHeaderTimeout, serveReadTimeout, serveWriteTimeout, serveIdleTimeout}
	serveReadHeaderTimeout, serveReadTimeout, serveWriteTimeout, serveIdleTimeout = 200*time.Millisecond, 200*time.Millisecond, time.Second, 200*time.Millisecond
	t.Cleanup(func() {
		serveReadHeaderTimeout, serveReadTimeout, serveWriteTimeout, serveIdleTimeout = old[0], old[1], old[2], old[3]
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(recorded(t, "h200x2.json")))
	ln := serveOn(t, reg)
	tests := []struct {
		name    string
		request string // sent on connecting
	}{
		{"silent", ""},
		{"half a request line", "GET /metr"},
		{"idle after a scrape", "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"body never sent", "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.request); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			_, err = io.Copy(io.Discard, c) // until the server closes it
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Error("the connection is still open 3 s later")
			}
		})
	}
}

// scrape gets h's /metrics and returns the body.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestHandlerCountsCollectorErrors checks that a collector failing on a
// scrape, whose other metrics are still served, is visible in the
// scrapes: without the error counter nothing told the failure from a
// metric that does not exist.
func TestHandlerCountsCollectorErrors(t *testing.T) {
	fail := errors.New("device lost")
	var failing bool
	var mu sync.Mutex
	read := func() (memory.DeviceMemory, error) {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return memory.DeviceMemory{}, fail
		}
		return memory.DeviceMemory{Total: 8 << 20, Free: 4 << 20, Reserved: Unknown}, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(recorded(t, "h200x2.json")))
	if err := RegisterDeviceMemory(reg, "cuda:0", 0, read); err != nil {
		t.Fatal(err)
	}
	h := Handler(reg)
	Handler(reg) // a second handler of the registry shares the counter
	const counter = `promhttp_metric_handler_errors_total{cause="gathering"}`
	steps := []struct {
		name    string
		failing bool
		want    string // in the scrape
	}{
		{"well", false, counter + " 0"},
		{"read fails", true, counter + " 0"}, // counted after this scrape
		{"after the failure", true, counter + " 1"},
		{"well again", false, counter + " 2"},
		{"stays", false, counter + " 2"},
	}
	for _, st := range steps {
		mu.Lock()
		failing = st.failing
		mu.Unlock()
		body := scrape(t, h)
		if !strings.Contains(body, st.want) || !strings.Contains(body, "vram_monitor_up 1") {
			t.Errorf("%s: scrape lacks %q or the GPU metrics:\n%s", st.name, st.want, body)
		}
	}

	// A gatherer that cannot register, and a registry whose metric of
	// that name is another collector, are served without the counter.
	other := prometheus.NewRegistry()
	other.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "promhttp_metric_handler_errors_total", Help: "x"}))
	for name, g := range map[string]prometheus.Gatherer{
		"gatherers":     prometheus.Gatherers{reg},
		"name taken":    other,
		"gatherer func": prometheus.GathererFunc(reg.Gather),
	} {
		t.Run(name, func(t *testing.T) { scrape(t, Handler(g)) })
	}
}

// blockingSource is a source whose Read waits until release is closed.
type blockingSource struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *blockingSource) Read() (Reading, error) {
	s.once.Do(func() { close(s.started) })
	<-s.release
	return Reading{GPUs: []GPU{}}, nil
}

func (s *blockingSource) Close() error { return nil }

// TestServeShutdownWithHangingScrape checks that a scrape whose source
// never answers cannot hold Serve, or the scraper's connection, open once
// the context ended.
func TestServeShutdownWithHangingScrape(t *testing.T) {
	old := serveShutdownTimeout
	serveShutdownTimeout = 50 * time.Millisecond
	t.Cleanup(func() { serveShutdownTimeout = old })
	tests := []struct {
		name string
		hang bool
	}{
		{"idle", false},
		{"scrape hangs", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &blockingSource{started: make(chan struct{}), release: make(chan struct{})}
			defer close(src.release)
			reg := prometheus.NewRegistry()
			reg.MustRegister(NewCollector(src))
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- Serve(ctx, ln, reg) }()
			scraped := make(chan error, 1)
			if tc.hang {
				go func() {
					resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + ln.Addr().String() + "/metrics")
					if err == nil {
						resp.Body.Close()
					}
					scraped <- err
				}()
				<-src.started
			}
			cancel()
			select {
			case err := <-done:
				if tc.hang == (err == nil) {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Serve did not return")
			}
			if tc.hang {
				select {
				case err := <-scraped:
					if err == nil {
						t.Error("the hanging scrape got an answer")
					}
				case <-time.After(2 * time.Second):
					t.Error("the hanging scrape's connection was left open")
				}
			}
		})
	}
}

// TestCollectorNoDuplicateSeries gives the collector readings that a
// Source other than NVML or a checked recording could return, with a GPU
// or a process listed twice: every scrape still gathers without error,
// each series once, holding the first listing's values.
func TestCollectorNoDuplicateSeries(t *testing.T) {
	gpu := func(index int, uuid string, used int64, pids ...int) GPU {
		g := GPU{Index: index, UUID: uuid, Name: "NVIDIA H200",
			Memory:           Memory{TotalBytes: 1 << 30, UsedBytes: used, FreeBytes: 1<<30 - used, ReservedBytes: Unknown},
			Utilization:      Utilization{ComputePercent: 50, MemoryBandwidthPercent: 10},
			TemperatureC:     40,
			Power:            Power{DrawW: 100, LimitW: 700},
			Clocks:           Clocks{GraphicsMHz: 1000, SMMHz: 1000, MemoryMHz: 2000, MaxSMMHz: 2000},
			ProcessesVisible: true}
		for _, p := range pids {
			g.Processes = append(g.Processes, memory.ProcessMemory{PID: p, Name: "python3", Bytes: used})
		}
		return g
	}
	tests := []struct {
		name string
		gpus []GPU
		used map[string]float64 // by gpu label: the used memory exported
	}{
		{"one GPU twice", []GPU{gpu(0, "GPU-a", 1<<20, 7), gpu(0, "GPU-a", 2<<20, 7)}, map[string]float64{"0": 1 << 20}},
		{"one GPU twice without a UUID", []GPU{gpu(0, "", 1<<20), gpu(0, "", 2<<20)}, map[string]float64{"0": 1 << 20}},
		{"a process twice", []GPU{gpu(0, "GPU-a", 1<<20, 7, 7)}, map[string]float64{"0": 1 << 20}},
		{"two GPUs", []GPU{gpu(0, "GPU-a", 1<<20, 7), gpu(1, "GPU-b", 2<<20, 7)}, map[string]float64{"0": 1 << 20, "1": 2 << 20}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mfs := gatherFrom(t, NewCollector(NewRecorded([]Reading{{Time: time.Unix(0, 0), GPUs: tc.gpus}})))
			if n := len(mfs["vram_gpu_memory_used_bytes"].GetMetric()); n != len(tc.used) {
				t.Errorf("%d series of vram_gpu_memory_used_bytes, want %d", n, len(tc.used))
			}
			for gpu, want := range tc.used {
				if got, ok := value(mfs, "vram_gpu_memory_used_bytes", "gpu", gpu); !ok || got != want {
					t.Errorf("GPU %s: used %v (found %v), want %v", gpu, got, ok, want)
				}
			}
		})
	}
}

// TestCollectorRatiosExact checks that every utilization percent is
// exported as the ratio nearest to it, as PromQL compares it with a
// threshold (vram_gpu_utilization_ratio > 0.35) and dashboards print it:
// 35% is 0.35, not the 0.35000000000000003 of 35 × 0.01.
func TestCollectorRatiosExact(t *testing.T) {
	for pct := 0; pct <= 100; pct++ {
		g := GPU{Index: 0, UUID: "GPU-0", Utilization: Utilization{ComputePercent: pct, MemoryBandwidthPercent: 100 - pct},
			Memory: Memory{TotalBytes: 8 << 20, UsedBytes: 1 << 20, FreeBytes: 7 << 20, ReservedBytes: Unknown}}
		mfs := gatherFrom(t, NewCollector(NewRecorded([]Reading{{GPUs: []GPU{g}}})))
		for name, want := range map[string]float64{
			"vram_gpu_utilization_ratio":                  float64(pct) / 100,
			"vram_gpu_memory_bandwidth_utilization_ratio": float64(100-pct) / 100,
		} {
			if got, ok := value(mfs, name, "gpu", "0"); !ok || got != want {
				t.Errorf("%s at %d%%: %v (found %v), want %v", name, pct, strconv.FormatFloat(got, 'g', -1, 64), ok, want)
			}
		}
	}
}

// TestServeMethods checks that Serve answers the methods a scrape or a
// browser uses, GET and HEAD, and refuses the others with 405 Method Not
// Allowed and the Allow header, as HTTP asks of a read-only resource,
// instead of reading every GPU and answering 200 to a POST or DELETE.
func TestServeMethods(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(recorded(t, "h200x2.json")))
	ln := serveOn(t, reg)
	client := &http.Client{Timeout: 5 * time.Second}
	for _, path := range []string{"/metrics", "/"} {
		for _, tc := range []struct {
			method string
			want   int
		}{
			{http.MethodGet, http.StatusOK},
			{http.MethodHead, http.StatusOK},
			{http.MethodPost, http.StatusMethodNotAllowed},
			{http.MethodPut, http.StatusMethodNotAllowed},
			{http.MethodDelete, http.StatusMethodNotAllowed},
			{http.MethodPatch, http.StatusMethodNotAllowed},
			{http.MethodOptions, http.StatusMethodNotAllowed},
		} {
			t.Run(tc.method+" "+path, func(t *testing.T) {
				req, err := http.NewRequest(tc.method, "http://"+ln.Addr().String()+path, strings.NewReader(""))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
				}
				if tc.want == http.StatusMethodNotAllowed {
					if allow := resp.Header.Get("Allow"); allow != "GET, HEAD" {
						t.Errorf("Allow %q, want %q", allow, "GET, HEAD")
					}
					if strings.Contains(string(body), "vram_gpu") {
						t.Errorf("metrics served to %s:\n%s", tc.method, body)
					}
				}
			})
		}
	}
}

// countingSource blocks every Read until release is closed, counting the
// reads in progress and the most ever in progress at once.
type countingSource struct {
	release        chan struct{}
	mu             sync.Mutex
	inFlight, most int
}

func (s *countingSource) Read() (Reading, error) {
	s.mu.Lock()
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	<-s.release
	s.mu.Lock()
	s.inFlight--
	s.mu.Unlock()
	return Reading{GPUs: []GPU{}}, nil
}

func (s *countingSource) Close() error { return nil }

// TestServeBoundsScrapesInFlight checks that Serve reads the source for at
// most serveMaxScrapes scrapes at once and answers the others at once with
// 503 Service Unavailable: a client opening connection after connection,
// or scrapes repeated while a GPU's queries hang (a GPU fallen off the
// bus), piled up goroutines each blocked in a read, without end.
func TestServeBoundsScrapesInFlight(t *testing.T) {
	src := &countingSource{release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(src))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, reg) }()
	released := false
	release := func() {
		if !released {
			released = true
			close(src.release)
		}
	}
	defer func() {
		release()
		cancel()
		<-done
	}()
	client := &http.Client{Timeout: 10 * time.Second}
	n := 3 * serveMaxScrapes
	codes := make(chan int, n)
	for range n {
		go func() {
			resp, err := client.Get("http://" + ln.Addr().String() + "/metrics")
			if err != nil {
				codes <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	// The scrapes beyond the limit are answered while the others wait.
	refused := 0
	for refused < n-serveMaxScrapes {
		select {
		case code := <-codes:
			if code != http.StatusServiceUnavailable {
				t.Fatalf("a scrape beyond the limit got %d, want 503", code)
			}
			refused++
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d scrapes beyond the limit of %d answered; the rest wait for the source", refused, n-serveMaxScrapes, serveMaxScrapes)
		}
	}
	release()
	for range serveMaxScrapes {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a scrape within the limit got %d, want 200", code)
		}
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.most > serveMaxScrapes {
		t.Errorf("%d reads at once, want at most %d", src.most, serveMaxScrapes)
	}
}

// serveOn starts Serve with reg on a free local port and returns its
// listener; the server stops, and Serve has returned, when the test ends.
func serveOn(t *testing.T, reg *prometheus.Registry) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, reg) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ln
}
