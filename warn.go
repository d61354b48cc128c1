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

// WarnOnce sends a [Warning] with message to the handler set with
// [SetWarningHandler], located at the line of the first caller outside
// vram's library packages, unless the same message already came from that
// line: a warning in a training loop is given once, as Python's default
// warning filter does. Packages built on vram use it for likely mistakes
// that are not errors, such as a loss whose target broadcasts against its
// input.
func WarnOnce(message string) {
	loc := callerOutside()
	if _, dup := warnedOnce.LoadOrStore(loc+"\x00"+message, true); dup {
		return
	}
	warnf(&loc, "%s", message)
}

var warnedOnce sync.Map // location NUL message -> true

// callerOutside returns file:line of the first caller outside vram's
// library packages: the root package and its sub-packages but the
// examples and the command, tests excepted.
func callerOutside() string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		fn := f.Function
		if !inLibrary(fn, f.File) && !strings.HasPrefix(fn, "runtime.") {
			return fmt.Sprintf("%s:%d", f.File, f.Line)
		}
		if !more {
			return ""
		}
	}
}

// inLibrary reports whether the function fn, defined in file, is part of
// vram's library rather than of a program or test that uses it.
func inLibrary(fn, file string) bool {
	const root = "github.com/vramgo/vram"
	if strings.HasSuffix(file, "_test.go") {
		return false
	}
	if strings.HasPrefix(fn, root+".") {
		return true
	}
	sub, ok := strings.CutPrefix(fn, root+"/")
	return ok && !strings.HasPrefix(sub, "examples/") && !strings.HasPrefix(sub, "cmd/")
}
