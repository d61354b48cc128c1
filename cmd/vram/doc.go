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
//	doctor   find the NVIDIA driver and CUDA libraries, list the GPUs, and run vram's self-test on each GPU, the CPU and a simulated GPU
//	exporter serve every GPU's memory, utilization and processes as Prometheus metrics
//	replay   replay allocation traces and snapshots through the caching allocator on a simulated device (--fit: the smallest that fits) or the real GPU (--device)
//	run      start the ranks of a distributed job with torchrun's variables, serving its rendezvous store
//	smi      show every GPU's memory, utilization, temperature, power and processes, like nvidia-smi
//	version  print the version of vram and of the Go toolchain that built it
//	watch    live view of every GPU's memory and utilization with history, and per-process memory; --pids for the GPUs of a job
//
// Run "vram <command> --help" for a command's flags; "vram --version" prints
// what "vram version" does. Commands that report
// results take --json and then print one JSON object on standard output (one
// per input for replay); progress and diagnostics go to standard error.
// analyze and replay read an input named "-" from standard input, as smi,
// watch and exporter read --source -, when it is a pipe or a file (from a
// terminal it is a usage error, not a silent wait), and "analyze --html -"
// writes the page to standard output; run gives its standard input to
// local rank 0.
// Errors go to standard error as one line, "vram: COMMAND: ..." (an
// out-of-memory diagnosis as the paragraph it is). A bad command line (an
// unknown command, flag or help topic, a bad flag value, a wrong number of
// arguments) exits with status 2, suggesting the command or flag meant
// when a mistyped one is near one ("--nproc_per_node": did you mean
// --nproc-per-node?); other failures exit with status 1, except
// that run exits with the status of the rank that failed. A command that
// Ctrl-C stops before it is done (demo, analyze, replay) exits with status 130, as a shell
// reports it; watch and exporter, which run until stopped, exit with 0 on
// Ctrl-C, SIGTERM and SIGHUP, the exporter after the scrapes in flight.
//
// The command configures vram from the environment once, at start, with
// vram.ConfigFromLookup (the variables of vram.ConfigFromEnv), applying the
// valid settings. Only demo, which allocates on devices, fails on an
// invalid device setting (VRAM_ALLOC_CONF, VRAM_SIM_DEVICES,
// VRAM_SIM_SHAPE_ONLY, VRAM_CUDNN, VRAM_CPU_MEMORY_LIMIT); doctor reports each as a check, explained by the
// same parse. An invalid VRAM_DEBUG_LEAKS, which configures no device, is a
// warning on standard error, as it is to the library. Names that come
// from drivers or files (GPU and process names, regions, stack frames) are
// printed with control characters escaped.
//
// Examples:
//
//	vram demo                         # on cuda:0 when CUDA is available, else the CPU
//	vram demo --device cpu --json     # machine-readable result
//	vram demo --steps 300 --batch 32 --seed 7
//	vram doctor                       # what CUDA setup this machine has
//	vram replay --compare run.trace.gz snapshot.pickle
//	vram replay --fit 24GB run.trace.gz   # would it fit on a 24 GB card, and what is the smallest that does?
//	vram replay --device cuda:0 --compare run.trace.gz   # real driver time against the cost model
//	vram run --nproc-per-node 2 go run ./examples/ddp
package main
