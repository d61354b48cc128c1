package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestExporter(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"exporter", "--listen", "127.0.0.1:0", "--source", readingsFile}, nil, &out, &errOut)
	}()
	addr := regexp.MustCompile(`http://(\S+)/metrics`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := addr.FindStringSubmatch(errOut.String()); m != nil {
			url = "http://" + m[1] + "/metrics"
			break
		}
	}
	if url == "" {
		cancel()
		t.Fatalf("the exporter did not say where it serves: %q", errOut.String())
	}
	client := &http.Client{Timeout: 5 * time.Second}
	var body string
	for i := 0; i < 2; i++ { // two scrapes: the recording moves on
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
	}
	for _, want := range []string{
		"vram_monitor_up 1",
		`vram_gpu_info{gpu="0",name="NVIDIA H200",pci_bus_id="00000000:19:00.0",uuid="GPU-6f3c9a52-1d2e-4b7a-9c01-5e8f2a3b4c5d"} 1`,
		`vram_gpu_utilization_ratio{gpu="1",uuid="GPU-a1b2c3d4-e5f6-4789-8abc-def012345678"} 0.45`,
		`vram_gpu_process_memory_bytes{gpu="0",pid="41234",process="python3",uuid="GPU-6f3c9a52-1d2e-4b7a-9c01-5e8f2a3b4c5d"}`,
		`vram_gpu_processes_visible{gpu="1",uuid="GPU-a1b2c3d4-e5f6-4789-8abc-def012345678"} 0`,
		"# HELP vram_gpu_memory_bandwidth_utilization_ratio",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after cancel: %s", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the exporter did not stop when its context ended")
	}
}

func TestExporterBadListen(t *testing.T) {
	withMonitor(t, noNVML)
	for _, tc := range []struct{ listen, want string }{
		{"not an address", `vram: exporter: --listen "not an address": address not an address: missing port in address`},
		{"bad::addr", `vram: exporter: --listen "bad::addr": address bad::addr: too many colons in address`},
		{"", `vram: exporter: --listen "": missing port in address`},
		{"127.0.0.1:", `vram: exporter: --listen "127.0.0.1:": no port`},
		{":", `vram: exporter: --listen ":": no port`},
		{":99999", `vram: exporter: --listen ":99999": port "99999" is not a number from 0 to 65535`},
		{"[::1]:abc", `vram: exporter: --listen "[::1]:abc": port "abc" is not a number from 0 to 65535`},
		{"localhost:http", `vram: exporter: --listen "localhost:http": port "http" is not a number`},
		{"127.0.0.1:-1", `vram: exporter: --listen "127.0.0.1:-1": port "-1" is not a number`},
	} {
		// With recorded readings and without a driver, the address is
		// checked first: a usage error on any machine.
		for _, source := range []string{readingsFile, ""} {
			// An address that serves ends when ctx does, with status 0.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			var out, errOut bytes.Buffer
			code := run(ctx, []string{"exporter", "--listen", tc.listen, "--source", source}, nil, &out, &errOut)
			cancel()
			if stderr := errOut.String(); code != exitUsage || !strings.HasPrefix(stderr, tc.want) {
				t.Errorf("--listen %q --source %q: exit %d, %q; want %d, %q", tc.listen, source, code, stderr, exitUsage, tc.want)
			}
		}
	}
}

// TestExporterBusyPort starts the exporter on a port another server holds:
// it must fail at once, exit 1 (not a usage error: the command line is
// fine) and say the address is in use, rather than serve nothing.
func TestExporterBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"exporter", "--listen", ln.Addr().String(), "--source", readingsFile}, nil, &out, &errOut)
	if ctx.Err() != nil {
		t.Fatal("the exporter ran on a busy port")
	}
	want := "vram: exporter: --listen " + ln.Addr().String() + ": "
	if code != exitFailure || !strings.HasPrefix(errOut.String(), want) || !strings.Contains(errOut.String(), "address already in use") {
		t.Errorf("exit %d, %q; want %d, %q ... address already in use", code, errOut.String(), exitFailure, want)
	}
}

// TestExporterServesRecordingFromItsStart scrapes an exporter of recorded
// readings: the first scrape holds the recording's first reading and each
// later one the next. The exporter reads the source once before serving,
// to check it and count its GPUs; that read took the first reading, so
// that the scrapes began at the second.
func TestExporterServesRecordingFromItsStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"exporter", "--listen", "127.0.0.1:0", "--source", readingsFile}, nil, &out, &errOut)
	}()
	defer func() {
		cancel()
		<-done
	}()
	addr := regexp.MustCompile(`http://(\S+)/metrics`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := addr.FindStringSubmatch(errOut.String()); m != nil {
			url = "http://" + m[1] + "/metrics"
		}
	}
	if url == "" {
		t.Fatalf("the exporter did not say where it serves: %q", errOut.String())
	}
	client := &http.Client{Timeout: 5 * time.Second}
	// GPU 0's utilization in the recording's first three readings.
	for i, want := range []string{"0", "0.12", "0.85"} {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		line := `vram_gpu_utilization_ratio{gpu="0",uuid="GPU-6f3c9a52-1d2e-4b7a-9c01-5e8f2a3b4c5d"} ` + want + "\n"
		if !strings.Contains(string(b), line) {
			t.Errorf("scrape %d lacks %q:\n%s", i+1, line, b)
		}
	}
}
