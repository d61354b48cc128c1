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
// [DefaultCapacity] bytes each.
// VRAM_SIM_SHAPE_ONLY=1 makes them shape-only (see [ParseShapeOnly] and
// [Device.SetShapeOnly]), and VRAM_ALLOC_CONF configures their allocators
// as it does CUDA's. An invalid value of any of the three leaves no sim
// devices: [Backend.DeviceCount] is 0, and [Backend.Config] and
// [Backend.Device] return the error, which names the variable.
//
// The kernels, the fused product and the fused optimizer steps are the CPU
// backend's, which compute what the CUDA backend's do (16-bit floats in
// float32, rounded where the GPU rounds).
//
// An out-of-memory error on one sim device names the other sim devices
// that have room for the work, as a CUDA device's names the machine's
// other GPUs.
//
// Sim devices are not CUDA devices: vram.DeviceCount does not count them.
package sim
