package vram

import (
	"strings"
	"sync"
	"testing"
)

// TestWarnOnce checks that WarnOnce gives a message once per line of its
// caller, locates it at that line rather than inside the library, and
// gives it once when goroutines send it at the same time.
func TestWarnOnce(t *testing.T) {
	var mu sync.Mutex
	var got []Warning
	defer SetWarningHandler(SetWarningHandler(func(w Warning) {
		mu.Lock()
		got = append(got, w)
		mu.Unlock()
	}))
	warnedOnce.Clear()
	defer warnedOnce.Clear()
	cases := []struct {
		name string
		send func()
		want []string
	}{
		{"repeated at one line", func() {
			for range 3 {
				WarnOnce("a")
			}
		}, []string{"a"}},
		{"two messages at one line", func() {
			for _, m := range []string{"b", "c", "b"} {
				WarnOnce(m)
			}
		}, []string{"b", "c"}},
		{"one message at two lines", func() {
			WarnOnce("d")
			WarnOnce("d")
		}, []string{"d", "d"}},
		{"concurrent", func() {
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() { WarnOnce("e") })
			}
			wg.Wait()
		}, []string{"e"}},
	}
	for _, c := range cases {
		got = nil
		c.send()
		var msgs []string
		for _, w := range got {
			msgs = append(msgs, w.Message)
			if !strings.Contains(w.Location, "warn_once_test.go:") {
				t.Errorf("%s: warning located at %q, want this test's line", c.name, w.Location)
			}
		}
		if strings.Join(msgs, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: warnings %q, want %q", c.name, msgs, c.want)
		}
	}
}

// TestInLibrary checks which functions callerOutside skips as vram's own.
func TestInLibrary(t *testing.T) {
	cases := []struct {
		fn, file string
		want     bool
	}{
		{"github.com/vramgo/vram.MSELoss", "/src/vram/ops_nn.go", true},
		{"github.com/vramgo/vram/nn.L1LossWith", "/src/vram/nn/loss.go", true},
		{"github.com/vramgo/vram/optim.(*Adam).Step", "/src/vram/optim/adam.go", true},
		{"github.com/vramgo/vram.TestX", "/src/vram/x_test.go", false},
		{"github.com/vramgo/vram/nn.TestX.func1", "/src/vram/nn/x_test.go", false},
		{"github.com/vramgo/vram/examples/item.main", "/src/vram/examples/item/main.go", false},
		{"github.com/vramgo/vram/cmd/vram.runDemo", "/src/vram/cmd/vram/demo.go", false},
		{"github.com/vramgo/vramish.F", "/src/vramish/f.go", false},
		{"main.main", "/src/prog/main.go", false},
	}
	for _, c := range cases {
		if got := inLibrary(c.fn, c.file); got != c.want {
			t.Errorf("inLibrary(%q, %q) = %v, want %v", c.fn, c.file, got, c.want)
		}
	}
}
