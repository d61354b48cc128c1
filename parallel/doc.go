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
//   - NCCL, for CUDA devices: one process driving every local GPU
//     ([NewNCCLGroup]), or one rank per process on one or many hosts
//     ([NewNCCLRank], through [InitProcessGroup]). This is the path for
//     GPUs.
//   - In process ([NewLocalGroup] on CPU or sim devices): goroutines of one
//     process, through vram's own copies between devices; reductions give
//     the TCP collectives' bits.
//   - TCP ([NewTCPRank]), for CPU and sim tensors in several processes:
//     every pair of ranks connected once, each collective through rank 0.
//
// The in-process and TCP collectives exist so that every feature of this
// package runs, and is tested, on machines without GPUs, and for CPU jobs;
// they are not fast. GPUs, and several hosts with GPUs, use NCCL.
//
// # Data parallelism
//
// [NewDataParallel] (or [DataParallel] with CUDA device indices, the
// spelling of PyTorch's nn.DataParallel(model, device_ids=[0, 1, 2]))
// replicates a module once per device with nn.Replicate, the module itself
// being replica 0. Forward splits a batch along its batch dimension, runs
// every replica on its own goroutine and gathers the outputs on one
// device; ForwardLoss computes the loss on each device instead, so that no
// device holds the others' outputs:
//
//	net, err := parallel.NewDataParallel(myNet, []vram.Device{vram.Sim(0), vram.Sim(1)})
//	opt, err := net.Optimizer(func(ps []*vram.Tensor) (optim.Optimizer, error) {
//		return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1})
//	})
//	vram.Tidy(func() { // releases the step's tensors on every device
//		loss := net.ForwardLoss(x, y, nn.MSELoss) // or nn.MSELoss(net.Forward(x), y)
//		loss.Backward()
//		net.ClipGradNorm(1) // optional: clip_grad_norm_, over the summed gradients
//		opt.Step() // sums the replicas' gradients (once), then steps every replica
//		opt.ZeroGrad()
//	})
//
// The gradients are summed with a [Communicator] (NCCL for CUDA devices
// when it can be used, the in-process group otherwise), so the replicas
// take the same step and stay identical: no forward copies the parameters
// again. Until Step, each replica's gradients are its share of the
// batch's: code that works on the gradients in between takes every
// replica's parameters (opt.Parameters(), for instance
// scaler.Step(opt, opt.Parameters()) with an amp.GradScaler) or the
// module's own methods (net.ClipGradNorm). Report gives each device's
// memory and time per phase.
//
// Random draws in the replicas (dropout) come from each device's own
// default generator (see vram.DeviceGenerator), so after vram.ManualSeed a
// run repeats bit for bit although the replicas draw at once; replicas
// given one explicit generator (vram.WithGenerator) share it and draw in
// whatever order their goroutines run.
//
// # Model and pipeline parallelism
//
// A module whose sub-modules live on different devices needs nothing from
// this package: To, CUDA and CPU are differentiable, so Backward carries
// gradients back across devices. [Pipeline] makes such a split efficient:
// a batch is cut into micro-batches that flow through the stages, each on
// its own goroutine and device, under a [Schedule] (GPipe, or 1F1B, which
// holds the activations of at most S-s micro-batches in stage s of S);
// ForwardBackward runs a training step's passes and Report compares the
// bubble expected, (S-1)/(M+S-1), with the one measured.
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
//		vram.Tidy(func() { // releases the step's tensors
//			loss := lossFn(ddp.Forward(x), y)
//			if err = ddp.Backward(loss); err != nil {
//				return
//			}
//			opt.Step()
//			ddp.ZeroGrad()
//		})
//		if err != nil { ... }
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
//
// Joining fails at once, rather than at the timeout, where it can: ranks
// started with different world sizes fail with [ErrMismatch], two
// processes of one rank and a MASTER_ADDR or MASTER_PORT that cannot work
// with vram.ErrArgument, and so does a store address where something else
// answers. A group closed may be joined again through the same store.
package parallel
