package cpu

import "github.com/vramgo/vram/backend/selftest"

// SelfTest runs the device checks of package selftest on the CPU device:
// allocation, copies, kernels and a matrix product, each compared with a
// reference computed separately.
func SelfTest() []selftest.Check { return selftest.Device(theDevice) }
