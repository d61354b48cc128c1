// Package sim implements simulated GPUs: devices named "sim:N" that compute
// with the CPU backend's kernels but keep their own identity and memory
// capacity, so that multi-device code (moving tensors, device-mismatch
// errors, gradients across devices) and out-of-memory behaviour run on any
// machine.
//
// The number and sizes of the devices come from VRAM_SIM_DEVICES, read once
// at start-up: "2x24GiB" (two devices of 24 GiB each), "80GiB,16GiB" (two
// devices of different sizes), or "0" (none), at most [MaxDevices] in all.
// Sizes are decimal numbers with the units B, KiB, MiB, GiB, TiB, PiB, EiB
// (and KB, MB, GB, TB, PB, EB as powers of 1000), exact to the byte: "1.5GiB"
// is 1610612736 bytes, while "0.5", "1.3B", "NaN" or "-1GiB" are errors
// ([ParseBytes]). When it is unset there are [DefaultCount] devices of
// [DefaultCapacity] bytes each. An invalid value is reported by [Config] and
// leaves no sim devices.
//
// Sim devices are not CUDA devices: vram.DeviceCount does not count them.
package sim
