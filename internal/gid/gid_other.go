//go:build !amd64 && !arm64

package gid

// Current returns an identifier of the calling goroutine.
func Current() uintptr { return fromStack() }
