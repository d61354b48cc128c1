// Vram is the command-line side of the vram tensor library: it trains a demo
// model on CPUs and NVIDIA GPUs and shows where the memory went.
//
// Usage:
//
//	vram <command> [flags]
//
// The commands are:
//
//	analyze  explain a memory snapshot or trace: fragmentation, largest allocations, OOMs; --html draws it
//	demo     train a small classifier on generated spirals and report accuracy, time and memory per phase
//	doctor   find the NVIDIA driver and CUDA libraries, list the GPUs and self-test each one
//	exporter serve every GPU's memory, utilization and processes as Prometheus metrics
//	replay   replay allocation traces and snapshots through the caching allocator on a simulated device
//	smi      show every GPU's memory, utilization, temperature, power and processes, like nvidia-smi
//	version  print the version of vram and of the Go toolchain that built it
//	watch    live view of every GPU's memory and utilization with history, and per-process memory
//
// Run "vram <command> --help" for a command's flags. Commands that report
// results take --json and then print one JSON object on standard output (one
// per input for replay); progress and diagnostics go to standard error. Bad flags print a
// one-line message and exit with status 2, other failures with status 1.
//
// Examples:
//
//	vram demo                         # on cuda:0 when CUDA is available, else the CPU
//	vram demo --device cpu --json     # machine-readable result
//	vram demo --steps 300 --batch 32 --seed 7
//	vram doctor                       # what CUDA setup this machine has
//	vram replay --compare run.trace.gz snapshot.pickle
package main
