package vram

import (
	"fmt"
	"log"
	"runtime"
	"strings"
	"sync"
)

// Warning is a problem vram noticed that is not an error, such as a graph
// that grows every iteration.
type Warning struct {
	Message  string
	Location string // file:line of the user code that caused it, if known
}

// String formats the warning as "vram: warning: LOCATION: MESSAGE", without
// the location when it has none.
func (w Warning) String() string {
	if w.Location == "" {
		return "vram: warning: " + w.Message
	}
	return "vram: warning: " + w.Location + ": " + w.Message
}

var (
	warnMu      sync.Mutex
	warnHandler = func(w Warning) { log.Print(w.String()) }
)

// SetWarningHandler sets the function that receives vram's warnings and
// returns the previous one. The default writes them with the standard log
// package (to stderr). A nil handler discards warnings.
func SetWarningHandler(h func(Warning)) func(Warning) {
	warnMu.Lock()
	defer warnMu.Unlock()
	old := warnHandler
	if h == nil {
		h = func(Warning) {}
	}
	warnHandler = h
	return old
}

func warnf(loc *string, format string, args ...any) {
	w := Warning{Message: fmt.Sprintf(format, args...)}
	if loc != nil {
		w.Location = *loc
	}
	warnMu.Lock()
	h := warnHandler
	warnMu.Unlock()
	h(w)
}

// callerOutside returns file:line of the first caller outside package vram
// (its tests excepted).
func callerOutside() string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		fn := f.Function
		inVram := strings.HasPrefix(fn, "github.com/vramgo/vram.") && !strings.HasSuffix(f.File, "_test.go")
		if !inVram && !strings.HasPrefix(fn, "runtime.") {
			return fmt.Sprintf("%s:%d", f.File, f.Line)
		}
		if !more {
			return ""
		}
	}
}
