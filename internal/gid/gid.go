// Package gid identifies the calling goroutine cheaply, for state that must
// be scoped to one goroutine (vram's NoGrad and Tidy).
//
// On amd64 and arm64, Current returns the address of the runtime's
// goroutine descriptor, read with two instructions of assembly; elsewhere it
// parses the goroutine id from runtime.Stack, which is much slower. The
// value identifies a goroutine while it runs; a descriptor may be reused by
// a later goroutine, so callers must drop their state before the goroutine
// that owns it returns (vram's scopes are function calls, so they do).
package gid

import "runtime"

// fromStack returns the goroutine id from the header of runtime.Stack
// ("goroutine 42 [running]:").
func fromStack() uintptr {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	b := buf[len("goroutine "):n]
	var id uintptr
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uintptr(c-'0')
	}
	return id
}
