//go:build unix

package trace

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestOpenStreamFIFO checks that a text trace in a FIFO, which gives its
// bytes once (vram analyze <(zcat run.trace.gz)), is read whole rather
// than streamed: every pass of its History sees every event, where a
// second reading of the FIFO would have found none.
func TestOpenStreamFIFO(t *testing.T) {
	const text = "alloc 4096 512 0\nfree_completed 4096 512 0\nalloc 8192 1024 0\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(text))
	zw.Close()
	tests := []struct {
		name string
		data []byte
	}{
		{"plain", []byte(text)},
		{"gzip", gz.Bytes()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "trace.fifo")
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Skipf("no FIFO: %v", err)
			}
			done := make(chan error, 1)
			go func() {
				w, err := os.OpenFile(path, os.O_WRONLY, 0)
				if err == nil {
					_, err = w.Write(tc.data)
					w.Close()
				}
				done <- err
			}()
			f, err := OpenStream(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			for pass := range 2 {
				n := 0
				read := make(chan error, 1)
				go func() { read <- f.History().Each(func(*Event) error { n++; return nil }) }()
				select {
				case err := <-read:
					if err != nil {
						t.Fatalf("pass %d: %v", pass, err)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("pass %d hangs, reopening the FIFO", pass)
				}
				if n != 3 {
					t.Errorf("pass %d: %d events, want 3", pass, n)
				}
			}
			if f.Gzipped != (tc.name == "gzip") {
				t.Errorf("Gzipped = %v", f.Gzipped)
			}
		})
	}
}
