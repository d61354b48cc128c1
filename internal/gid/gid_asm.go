//go:build amd64 || arm64

package gid

// getg returns the runtime's current g pointer.
func getg() uintptr

// Current returns an identifier of the calling goroutine.
func Current() uintptr { return getg() }
