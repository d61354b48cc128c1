//go:build unix && !linux

package parallel

import "syscall"

// dieWithLauncher does nothing: only Linux can kill a child when its
// parent dies.
func dieWithLauncher(*syscall.SysProcAttr) {}
