package backend

import (
	"sort"
	"sync"
)

var (
	registryMu sync.RWMutex
	registry   = map[string]Backend{}
)

// The registry maps a device kind ("cpu", "sim", "cuda") to the backend
// that its devices belong to. It holds instances, not constructors: a
// backend that takes options has a constructor of its own in its package,
// which takes them as a value (sim.New(sim.Options{...}) makes a separate
// sim backend, for a test or a tool), and a Configure function that sets
// the options of the registered instance before its first use (sim.Configure,
// cuda.Configure; vram.Configure calls both). No backend reads the
// environment.

// Register makes a backend available under b.Name(). It panics if b is nil,
// the name is empty or contains a colon, or the name is already taken:
// registration happens in init, where such mistakes are cheapest.
func Register(b Backend) {
	if b == nil {
		panic("backend: Register of a nil backend")
	}
	name := b.Name()
	if name == "" {
		panic("backend: Register of a backend with an empty name")
	}
	for _, r := range name {
		if r == ':' {
			panic("backend: backend name " + name + " contains a colon")
		}
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("backend: Register called twice for backend " + name)
	}
	registry[name] = b
}

// Lookup returns the backend registered under name.
func Lookup(name string) (Backend, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	b, ok := registry[name]
	return b, ok
}

// Names returns the names of the registered backends, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
