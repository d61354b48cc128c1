package parallel

import "syscall"

// dieWithLauncher has the kernel send the rank SIGKILL when the launcher
// dies, also of SIGKILL, which it can neither catch nor forward: without
// it the ranks, in process groups of their own, would live on and hold
// their GPUs. SIGKILL, since a rank left without its launcher cannot be
// stopped in order any more, and one that catches SIGTERM would run on.
//
// Linux sends this signal when the thread that started the rank exits, not
// the process: Launch starts each rank from a goroutine locked to its OS
// thread until the rank has been waited for (see startLocked).
func dieWithLauncher(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
