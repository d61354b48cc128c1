// Package parallel runs work on several devices: collectives between them
// ([Communicator]), data parallelism in one process with a goroutine per
// device, distributed data parallelism with one process per device on one
// or many hosts (started by "vram run"), and model and pipeline
// parallelism.
//
// # Collectives
//
// A [Communicator] is one rank's handle on a group of ranks; its
// collectives work in place on tensors, one tensor per rank. There are
// three kinds:
//
//   - NCCL, for CUDA devices: one process driving every local GPU, or one
//     rank per process on one or many hosts. This is the path for GPUs.
//   - In process ([NewLocalGroup] on CPU or sim devices): goroutines of one
//     process, through vram's own copies between devices.
//   - TCP, for CPU and sim tensors in several processes.
//
// The in-process and TCP collectives exist so that every feature of this
// package runs, and is tested, on machines without GPUs, and for CPU jobs;
// they are not fast. GPUs, and several hosts with GPUs, use NCCL.
package parallel
