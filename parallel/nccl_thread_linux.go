package parallel

import "syscall"

// threadID returns the id of the calling OS thread (gettid), which names
// a goroutine locked to it.
func threadID() int { return syscall.Gettid() }
