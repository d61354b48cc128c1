// Package sim implements simulated GPUs: devices named "sim:N" that compute
// with the CPU backend's kernels but keep their own identity and memory
// capacity, so that multi-device code (moving tensors, device-mismatch
// errors, gradients across devices) and out-of-memory behaviour run on any
// machine.
//
// A backend's devices are set by its [Options]: their capacities (at most
// [MaxDevices]), whether they are shape-only (see [Device.SetShapeOnly]),
// and the allocator settings of each, as for CUDA devices. The zero Options
// give [DefaultCount] devices of [DefaultCapacity] bytes each. [New] makes a
// backend with given options, for tests and tools; the registered one,
// behind vram.Sim(i), takes its options from [Configure], which vram's own
// Configure calls, before its first use. Invalid options are refused
// there, in an error that names the field. The package reads no
// environment variable: vram.ConfigFromEnv reads VRAM_SIM_DEVICES (in the
// syntax of [ParseDevices]: "2x24GiB", "80GiB,16GiB" or "0" for none, sizes
// as [ParseBytes] reads them), VRAM_SIM_SHAPE_ONLY and VRAM_ALLOC_CONF.
//
// The kernels, the fused product and the fused optimizer steps are the CPU
// backend's, which compute what the CUDA backend's do (16-bit floats in
// float32, rounded where the GPU rounds). An error one of them finds, such
// as an index out of range, names the sim device ("sim:0: gather: ...")
// rather than the cpu backend, and wraps the CPU's error.
//
// An out-of-memory error on one sim device names the other sim devices
// that have room for the work, as a CUDA device's names the machine's
// other GPUs.
//
// Streams model CUDA's without concurrency (stream.go): the default stream
// runs kernels when they are queued, other streams queue them and run them
// when something needs them done, so that ordering mistakes between
// streams show every time, and freeing a buffer that another stream's
// queued work still uses, without RecordStream, is reported as a
// [*HazardError]. Pinned host memory is simulated too, for the
// non-blocking copies of [backend.AsyncCopier].
//
// Sim devices are not CUDA devices: vram.DeviceCount does not count them.
package sim
