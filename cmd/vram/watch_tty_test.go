//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/vramgo/vram/monitor"
)

// openPTY opens a pseudo-terminal of cols columns and rows rows and returns
// its two ends.
func openPTY(t *testing.T, cols, rows int) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	ioctl := func(req uintptr, arg unsafe.Pointer) {
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), req, uintptr(arg)); e != 0 {
			t.Skipf("pseudo-terminal ioctl %#x: %v", req, e)
		}
	}
	var unlock int32
	ioctl(syscall.TIOCSPTLCK, unsafe.Pointer(&unlock))
	var n uint32
	ioctl(syscall.TIOCGPTN, unsafe.Pointer(&n))
	ws := struct{ rows, cols, x, y uint16 }{uint16(rows), uint16(cols), 0, 0}
	ioctl(syscall.TIOCSWINSZ, unsafe.Pointer(&ws))
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening the terminal end: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return master, tty
}

// ptyOutput collects what is written to a terminal.
type ptyOutput struct {
	mu   sync.Mutex
	b    bytes.Buffer
	done chan struct{}
}

func readPTY(master io.Reader) *ptyOutput {
	o := &ptyOutput{done: make(chan struct{})}
	go func() {
		defer close(o.done)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			o.mu.Lock()
			o.b.Write(buf[:n])
			o.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return o
}

func (o *ptyOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// TestWatchTerminalSize draws on terminals of several sizes: every frame
// must fit the screen, or the terminal wraps and scrolls it.
func TestWatchTerminalSize(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cols, rows int
	}{
		{"narrow", 30, 40},
		{"tiny", 12, 3},
		{"short", 100, 6},
		{"wide", 400, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			master, tty := openPTY(t, tc.cols, tc.rows)
			out := readPTY(master)
			src, err := monitor.OpenRecorded(readingsFile)
			if err != nil {
				t.Fatal(err)
			}
			if err := runWatch(context.Background(), tty, src, 10*time.Millisecond, 3, nil); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for !strings.HasSuffix(out.String(), ansiLeave) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			s := out.String()
			if !strings.HasSuffix(s, ansiLeave) {
				t.Fatalf("the view did not leave the alternate screen:\n%q", s)
			}
			frames := strings.Split(s, ansiHome)[1:]
			if len(frames) != 3 {
				t.Fatalf("%d frames, want 3", len(frames))
			}
			for i, f := range frames {
				f, _, _ = strings.Cut(f, ansiEOS)
				lines := strings.Split(f, "\r\n")
				if len(lines) > tc.rows {
					t.Errorf("frame %d: %d lines on %d rows", i, len(lines), tc.rows)
				}
				for _, l := range lines {
					l = strings.NewReplacer(ansiBold, "", ansiReset, "", ansiEOL, "", "\r", "").Replace(l) // the terminal adds a \r to each \n
					if n := utf8.RuneCountInString(l); n > tc.cols {
						t.Errorf("frame %d: a line of %d columns on %d: %q", i, n, tc.cols, l)
					}
				}
			}
		})
	}
}

// TestWatchTerminalSignal: SIGTERM and SIGHUP end the view as q does,
// leaving the alternate screen, rather than ending the process on it.
func TestWatchTerminalSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			if sig == syscall.SIGHUP && hupIgnoredByChildren() {
				t.Skip("SIGHUP is ignored (nohup), which watch leaves so")
			}
			master, tty := openPTY(t, 100, 40)
			out := readPTY(master)
			src, err := monitor.OpenRecorded(readingsFile)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- runWatch(context.Background(), tty, src, 10*time.Millisecond, 0, nil) }()
			deadline := time.Now().Add(5 * time.Second)
			for strings.Count(out.String(), ansiHome) < 2 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			syscall.Kill(os.Getpid(), sig)
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the view still runs 5 s after the signal")
			}
			deadline = time.Now().Add(5 * time.Second)
			for !strings.HasSuffix(out.String(), ansiLeave) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if !strings.HasSuffix(out.String(), ansiLeave) {
				t.Errorf("the view did not leave the alternate screen")
			}
		})
	}
}
