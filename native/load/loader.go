package load

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Loader is the loading state of one library of a bindings package: it
// opens the library and binds the package's table the first time [Loader.Load]
// succeeds, and tells the package's wrappers whether they may call through
// the bindings ([Loader.Ready]).
//
// A Loader is a package-level variable with Spec and Bindings set; its
// other state starts empty. It is safe for concurrent use.
type Loader struct {
	// Spec is how to search. It is read at each attempt, so a package that
	// exports its Spec lets callers change it before the first Load.
	Spec *Spec
	// Bindings is the package's table; Load binds the entries whose Lib is
	// Spec.Name and leaves the others (another library's) alone.
	Bindings []Binding

	mu    sync.Mutex
	lib   *Library
	ready atomic.Bool // set once every required binding of lib is resolved
}

// Load finds the library (see [Open]), resolves its bindings and returns
// it. Once it has succeeded, later calls return the same library at once;
// after a failure the next call searches again.
//
// The error is a *[NotFoundError] when no file could be opened, or the
// *[MissingSymbolError] of [Library.Bind], returned with the library, when
// the library is too old for the table.
func (l *Loader) Load() (*Library, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lib != nil {
		return l.lib, nil
	}
	lib, err := Open(*l.Spec)
	if err != nil {
		return nil, err
	}
	if err := lib.Bind(l.Bindings); err != nil {
		return lib, err
	}
	l.lib = lib
	l.ready.Store(true)
	return lib, nil
}

// Ready reports whether [Loader.Load] has succeeded, so that every
// required binding may be called. It is one atomic load, cheap enough for
// every call.
func (l *Loader) Ready() bool { return l.ready.Load() }

// Library returns the loaded library, or nil before [Loader.Load]
// succeeded.
func (l *Loader) Library() *Library {
	if !l.ready.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lib
}

// Resolved returns, for each C symbol of the library's bindings, the name
// found in the loaded library (a fallback name where it lacks the newer
// one, "" for an optional symbol it lacks), or nil before [Loader.Load]
// succeeded. For diagnostics.
func (l *Loader) Resolved() map[string]string {
	if !l.ready.Load() {
		return nil
	}
	m := make(map[string]string)
	for _, b := range l.Bindings {
		if b.Lib == l.Spec.Name {
			m[b.Names[0]] = b.Resolved
		}
	}
	return m
}

// NotLoaded returns the error that the wrappers of package pkg return
// before their library is loaded: "pkg: what is not loaded (call how
// first)", e.g. "cuda: libcuda.so.1 is not loaded (call cuda.Load first)".
// Packages keep it in an ErrNotLoaded variable for errors.Is.
func NotLoaded(pkg, what, how string) error {
	return errors.New(pkg + ": " + what + " is not loaded (call " + how + " first)")
}
