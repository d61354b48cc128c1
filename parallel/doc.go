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
//   - TCP ([NewTCPRank]), for CPU and sim tensors in several processes:
//     every pair of ranks connected once, each collective through rank 0.
//
// The in-process and TCP collectives exist so that every feature of this
// package runs, and is tested, on machines without GPUs, and for CPU jobs;
// they are not fast. GPUs, and several hosts with GPUs, use NCCL.
//
// # Distributed jobs
//
// "vram run --nproc-per-node N PROGRAM" (see [Launch]) starts the ranks of
// a job on a node with torchrun's variables, and [LaunchEnv] reads them:
// it is the one place where this package reads the environment. A
// program then joins the job with [InitProcessGroup] and trains with
// [DistributedDataParallel]:
//
//	l, err := parallel.LaunchEnv() // a job of one rank without a launcher
//	...
//	comm, err := parallel.InitProcessGroup(parallel.ProcessGroupOptions{Launch: l})
//	...
//	defer comm.Close()
//	ddp, err := parallel.NewDistributedDataParallel(model, comm, parallel.DDPOptions{})
//	...
//	for ... {
//		loss := lossFn(ddp.Forward(x), y)
//		if err := ddp.Backward(loss); err != nil { ... }
//		opt.Step()
//		ddp.ZeroGrad()
//	}
//
// The ranks meet through a rendezvous [Store] (torch's TCPStore) at
// MASTER_ADDR:MASTER_PORT. The launcher of node 0 serves it, as
// torchrun's agent does, so that it does not depend on any one rank and
// its port is taken before a rank starts; a job started some other way
// (the variables set by hand, or by another launcher) has rank 0 serve
// it instead.
//
// # Failures
//
// No collective waits for ever. A rank that dies (its connections close)
// makes the others' calls fail at once with a [*RankError] that names it;
// one that does not arrive within the timeout (TCPOptions.Timeout,
// ProcessGroupOptions.Timeout; DefaultTimeout is five minutes) is named
// when the timeout passes. Ranks that call different collectives, or
// with other dtypes or sizes, fail with [ErrMismatch]. The first failure
// aborts the communicator on every rank that can be told, and every later
// call returns it.
package parallel
