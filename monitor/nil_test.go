package monitor

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vramgo/vram/memory"
)

// TestNilArgumentsAreErrors checks that every exported call given a nil
// source, writer, reader, listener, registerer or gatherer returns an
// error naming it instead of panicking, as the package doc promises.
func TestNilArgumentsAreErrors(t *testing.T) {
	var nilNVML *NVML
	var nilRecorded *Recorded
	for _, c := range []struct {
		name string
		call func() error
		want string
	}{
		{"FirstAvailable of a nil source", func() error {
			_, err := FirstAvailable(context.Background(), nil, Options{}, 1, 0)
			return err
		}, "nil source"},
		{"Read of a nil *NVML", func() error { _, err := nilNVML.Read(); return err }, "nil source"},
		{"ReadFields of a nil *NVML", func() error { _, err := nilNVML.ReadFields(FieldsGPUtil); return err }, "nil source"},
		{"Close of a nil *NVML", nilNVML.Close, "nil source"},
		{"Read of a nil *Recorded", func() error { _, err := nilRecorded.Read(); return err }, "nil source"},
		{"Close of a nil *Recorded", nilRecorded.Close, "nil source"},
		{"ReadRecording of a nil reader", func() error { _, err := ReadRecording(nil); return err }, "nil reader"},
		{"WriteRecording to a nil writer", func() error { return WriteRecording(nil, nil) }, "nil writer"},
		{"WriteUtilization to a nil writer", func() error { return WriteUtilization(nil, nil, true) }, "nil writer"},
		{"ShowUtilization to a nil writer", func() error { return ShowUtilization(nil) }, "nil writer"},
		{"FirstAvailable with a nil context", func() error {
			_, err := FirstAvailable(nilContext(), NewRecorded(nil), Options{}, 1, 0)
			return err
		}, "nil context"},
		{"Serve with a nil context", func() error {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			return Serve(nilContext(), ln, prometheus.NewRegistry())
		}, "nil context"},
		{"Serve on a nil listener", func() error { return Serve(context.Background(), nil, prometheus.NewRegistry()) }, "nil listener"},
		{"Serve of a nil gatherer", func() error {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Skip(err)
			}
			defer ln.Close()
			return Serve(context.Background(), ln, nil)
		}, "nil gatherer"},
		{"RegisterAllocator with a nil registerer", func() error {
			return RegisterAllocator(nil, "sim:0", 0, func() (s memory.Stats) { return s })
		}, "nil registerer"},
		{"RegisterDeviceMemory with a nil registerer", func() error {
			return RegisterDeviceMemory(nil, "sim:0", 0, func() (m memory.DeviceMemory, err error) { return m, nil })
		}, "nil registerer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				err = c.call()
			}()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

// TestNilCollectorFunctionsFailTheScrape checks that a collector made with
// a nil source or function fails its scrape with an error (or, for
// [Collector], reports vram_monitor_up 0) instead of panicking in the
// exporter's handler, and that [Handler] of a nil gatherer answers 500.
func TestNilCollectorFunctionsFailTheScrape(t *testing.T) {
	for _, c := range []struct {
		name    string
		col     prometheus.Collector
		wantErr bool
		want    string
	}{
		{"Collector of a nil source", NewCollector(nil), false, "vram_monitor_up 0"},
		{"AllocatorCollector of a nil stats function", NewAllocatorCollector("sim:0", 0, nil), true, ""},
		{"DeviceMemoryCollector of a nil read function", NewDeviceMemoryCollector("sim:0", 0, nil), true, ""},
		{"zero AllocatorCollector", &AllocatorCollector{}, false, ""},
		{"zero DeviceMemoryCollector", &DeviceMemoryCollector{}, false, ""},
		{"nil *Collector", (*Collector)(nil), false, "vram_monitor_up 0"},
		{"nil *AllocatorCollector", (*AllocatorCollector)(nil), false, ""},
		{"nil *DeviceMemoryCollector", (*DeviceMemoryCollector)(nil), false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			if err := reg.Register(c.col); err != nil {
				t.Fatal(err)
			}
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("the scrape panicked: %v", r)
					}
				}()
				_, err = reg.Gather()
			}()
			if (err != nil) != c.wantErr {
				t.Fatalf("Gather error %v, want an error: %v", err, c.wantErr)
			}
			if c.wantErr && !strings.Contains(err.Error(), "monitor: nil") {
				t.Fatalf("Gather error %v does not say what is nil", err)
			}
			if c.want != "" {
				rec := httptest.NewRecorder()
				Handler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				if !strings.Contains(rec.Body.String(), c.want) {
					t.Fatalf("scrape lacks %q:\n%s", c.want, rec.Body.String())
				}
			}
		})
	}
	t.Run("Handler of a nil gatherer", func(t *testing.T) {
		rec := httptest.NewRecorder()
		Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusInternalServerError || !bytes.Contains(rec.Body.Bytes(), []byte("nil gatherer")) {
			t.Fatalf("status %d, body %q", rec.Code, rec.Body.String())
		}
	})
}

// nilContext returns a nil context.Context, as a caller holding none
// passes it.
func nilContext() context.Context { return nil }
