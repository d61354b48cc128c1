//go:build !linux

package parallel

// threadID returns 0: NCCL runs on Linux only, so no NCCL group is ever
// open elsewhere.
func threadID() int { return 0 }
