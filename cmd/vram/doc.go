// Vram is the command-line side of the vram tensor library: it trains a demo
// model on CPUs and NVIDIA GPUs and shows where the memory went.
//
// Usage:
//
//	vram <command> [flags]
//
// The commands are:
//
//	demo     train a small classifier on generated spirals and report accuracy, time and memory per phase
//	doctor   find the NVIDIA driver and CUDA libraries, list the GPUs and self-test each one
//	replay   replay allocation traces and snapshots through the caching allocator on a simulated device
//	version  print the version of vram and of the Go toolchain that built it
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
