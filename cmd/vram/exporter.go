package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/vramgo/vram/monitor"
)

// defaultExporterAddr is where "vram exporter" listens without --listen:
// the port NVIDIA's dcgm-exporter uses, so dashboards find it.
const defaultExporterAddr = ":9400"

func newExporterCmd() *cobra.Command {
	var listen, source string
	cmd := &cobra.Command{
		Use:   "exporter",
		Short: "Serve every GPU's state as Prometheus metrics",
		Long: `Exporter serves the GPUs' memory, utilization, temperature, power, clocks and
per-process memory at /metrics in Prometheus's text format, reading NVML on every
scrape. Metric names start with vram_gpu_ (vram_gpu_memory_used_bytes{gpu,uuid},
vram_gpu_utilization_ratio, vram_gpu_process_memory_bytes{gpu,uuid,pid,process}, ...).
vram_monitor_up is 0 when a read failed, vram_gpu_up{gpu,uuid} 0 when a query of that
GPU failed (vram smi shows which); a process whose name cannot be read is
process="unknown", as in vram smi. Programs using vram export their allocator's
statistics and device memory themselves with monitor.RegisterAllocator and
monitor.RegisterDeviceMemory. It answers GET and HEAD, and at most 10 scrapes at
once: more get 503 Service Unavailable.

Ctrl-C, SIGTERM (what systemd, Docker and Kubernetes send to stop it) and SIGHUP stop
the server gracefully: it takes no new scrape, lets those in flight finish (for up to
5 s) and exits with status 0.

  vram exporter --listen :9400
  vram exporter --listen 127.0.0.1:9400 --source readings.json   # recorded readings, no GPU needed`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := stopContext(cmd.Context())
			defer stop()
			// The command line is checked before the GPUs are read, so
			// that a mistyped address is a usage error on any machine.
			if err := checkListen(listen); err != nil {
				return err
			}
			src, err := openSource("exporter", source, cmd.Flags().Changed("source"), cmd.InOrStdin())
			if err != nil {
				return err
			}
			defer src.Close()
			r, err := src.Read()
			if err != nil {
				return cmdError("exporter", err)
			}
			if source != "" {
				// Serve a recording from its first reading, which
				// this read took.
				src = &firstAgain{Source: src, first: &r}
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(monitor.NewCollector(src))
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				// A malformed address is a bad command line (checkListen
				// lets none through); a port in use or not permitted is
				// a failure.
				var ae *net.AddrError
				if errors.As(err, &ae) {
					return usagef("exporter: --listen %s: %v", listen, err)
				}
				return fmt.Errorf("exporter: --listen %s: %w", listen, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "vram exporter: serving %s at http://%s/metrics (Ctrl-C or SIGTERM stops)\n", count(len(r.GPUs), "GPU", "GPUs"), ln.Addr())
			if err := monitor.Serve(ctx, ln, reg); err != nil {
				return cmdError("exporter", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", defaultExporterAddr, "serve on `ADDR` (host:port)")
	f.StringVar(&source, "source", "", "serve recorded readings from `FILE` instead of the GPUs (- reads them from standard input)")
	return cmd
}

// checkListen checks the syntax of the exporter's --listen address: host:port
// with a port number. It returns a usage error naming the flag.
func checkListen(listen string) error {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return usagef("exporter: --listen %q: %v (host:port, e.g. %s)", listen, err, defaultExporterAddr)
	}
	// net.Listen takes a missing port for a random one, which no scrape
	// configuration could name.
	if port == "" {
		return usagef("exporter: --listen %q: no port (host:port, e.g. %s)", listen, defaultExporterAddr)
	}
	// A service name ("http") would be looked up, and a mistyped one would
	// read as a failure of the network.
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return usagef("exporter: --listen %q: port %q is not a number from 0 to 65535", listen, port)
	}
	return nil
}

// firstAgain is a Source whose first Read returns first, a reading already
// taken from the Source it wraps; later Reads read that Source. The
// exporter reads a recording once to check it and count its GPUs, and
// serves it from that reading on, not from the next.
type firstAgain struct {
	monitor.Source
	mu    sync.Mutex
	first *monitor.Reading // nil once returned
}

func (f *firstAgain) Read() (monitor.Reading, error) {
	f.mu.Lock()
	first := f.first
	f.first = nil
	f.mu.Unlock()
	if first != nil {
		return *first, nil
	}
	return f.Source.Read()
}
