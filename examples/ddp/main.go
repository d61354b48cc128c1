// Ddp trains a small MLP with distributed data parallelism: every rank
// holds a replica of the model, runs forward and backward on its share of
// each batch, and DistributedDataParallel averages the gradients over the
// ranks during backward, so that the replicas stay equal and train as one
// model on the whole batch would. Started on its own it is a job of one
// rank; under "vram run" each rank is a process:
//
//	go run ./examples/ddp
//	vram run --nproc-per-node 2 go run ./examples/ddp
//	vram run --nproc-per-node 2 go run ./examples/ddp --accumulate 2 --metrics-port 9500
//
// Each rank uses cuda:LOCAL_RANK with NCCL when the machine has GPUs, else
// a simulated GPU (sim:LOCAL_RANK, modulo their number) with the TCP
// collectives, so it runs on any machine. With --accumulate k every rank
// splits its share in k micro-batches and reduces once per step (NoSync).
// With --metrics-port P rank r serves its allocator's statistics,
// labelled with its rank and local rank, at http://127.0.0.1:P+LOCAL_RANK/metrics.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/monitor"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
	"github.com/vramgo/vram/parallel"
)

func main() {
	var o options
	fs := newFlags(&o, os.Stderr, flag.ExitOnError)
	fs.Parse(os.Args[1:]) // exits on -h (0) and on a bad flag (2)
	if err := o.check(fs.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "ddp:", err)
		fs.Usage()
		os.Exit(2)
	}
	l, err := parallel.LaunchEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ddp:", err)
		os.Exit(2)
	}
	if err := run(os.Stdout, l, o); err != nil {
		fmt.Fprintf(os.Stderr, "ddp: rank %d: %v\n", l.Rank, err)
		os.Exit(1)
	}
}

// about says what the example does, for -h.
const about = `Ddp trains a small MLP with distributed data parallelism, a job of one rank
on its own, or one rank per process under vram run:

  vram run --nproc-per-node 2 go run ./examples/ddp --accumulate 2`

// newFlags returns the example's flags, set into o, whose usage message
// (written to w) says what the example does and lists them.
func newFlags(o *options, w io.Writer, h flag.ErrorHandling) *flag.FlagSet {
	fs := flag.NewFlagSet("ddp", h)
	fs.SetOutput(w)
	fs.IntVar(&o.steps, "steps", 30, "training steps")
	fs.IntVar(&o.accumulate, "accumulate", 1, "micro-batches per step, all but the last under NoSync")
	fs.IntVar(&o.metricsPort, "metrics-port", 0, "serve each rank's allocator metrics at this port plus LOCAL_RANK (0: none)")
	fs.StringVar(&o.backend, "backend", "auto", "collectives: auto, nccl or tcp")
	fs.Usage = func() {
		fmt.Fprintf(w, "usage: ddp [flags]\n\n%s\n\nFlags:\n", about)
		fs.PrintDefaults()
	}
	return fs
}

type options struct {
	steps       int
	accumulate  int
	metricsPort int
	backend     string
}

// check returns an error for options that cannot train, or for
// arguments left after the flags (the example takes none).
func (o options) check(args []string) error {
	switch {
	case len(args) > 0:
		return fmt.Errorf("unexpected argument %q: the example takes only flags", args[0])
	case o.steps < 1:
		return fmt.Errorf("--steps %d: train at least 1 step", o.steps)
	case o.accumulate < 1:
		return fmt.Errorf("--accumulate %d: a step has at least 1 micro-batch", o.accumulate)
	case o.metricsPort < 0 || o.metricsPort > 65535:
		return fmt.Errorf("--metrics-port %d: want a TCP port, 1 to 65535, or 0 for none", o.metricsPort)
	case o.backend != "auto" && o.backend != "nccl" && o.backend != "tcp":
		return fmt.Errorf("--backend %q: want auto, nccl or tcp", o.backend)
	}
	return nil
}

const (
	samples    = 256 // the data set
	batch      = 32  // rows of one step, over all ranks
	features   = 16
	hidden     = 64
	lr         = 0.05
	printEvery = 10
)

// device picks the rank's device: its GPU, else a simulated one.
func device(l parallel.LaunchInfo, backend string) vram.Device {
	switch {
	case backend != "tcp" && vram.CUDAAvailable():
		return vram.CUDA(l.LocalRank % vram.DeviceCount())
	case vram.SimDeviceCount() > 0:
		return vram.Sim(l.LocalRank % vram.SimDeviceCount())
	}
	return vram.CPU
}

// run trains on this rank's share of every batch and reports.
func run(w io.Writer, l parallel.LaunchInfo, o options) error {
	size := l.Size()
	if batch%size != 0 || batch/size%max(o.accumulate, 1) != 0 {
		return fmt.Errorf("a batch of %d rows does not split into %d ranks of %d micro-batches", batch, size, o.accumulate)
	}
	dev := device(l, o.backend)
	comm, err := parallel.InitProcessGroup(parallel.ProcessGroupOptions{Backend: o.backend, Device: dev, Launch: l})
	if err != nil {
		return err
	}
	defer comm.Close()
	if o.metricsPort > 0 {
		stop, err := serveMetrics(w, l, dev, o.metricsPort+l.LocalRank)
		if err != nil {
			return err
		}
		defer stop()
	}
	var trainErr error
	if err := vram.Catch(func() { trainErr = train(w, comm, dev, o) }); err != nil {
		return err
	}
	return trainErr
}

func train(w io.Writer, comm parallel.Communicator, dev vram.Device, o options) error {
	rank, size := comm.Rank(), comm.Size()
	// The same data on every rank, made on the CPU so that every device
	// sees the same numbers: y = x·w + noise.
	g := vram.NewGenerator(1)
	x := vram.Randn(vram.Shape{samples, features}, vram.WithGenerator(g))
	truth := vram.Randn(vram.Shape{features, 1}, vram.WithGenerator(g))
	y := x.MatMul(truth).Add(vram.Randn(vram.Shape{samples, 1}, vram.WithGenerator(g)).MulScalar(0.1))
	xd, yd := x.To(dev), y.To(dev)
	x.Release()
	y.Release()
	truth.Release()
	defer xd.Release()
	defer yd.Release()

	// Every rank makes its own model (with its own seed, to show that the
	// DDP starts all of them from rank 0's values).
	mg := vram.NewGenerator(uint64(100 + rank))
	model := nn.NewSequential(
		nn.NewLinear(features, hidden, dev, vram.WithGenerator(mg)), nn.NewReLU(),
		nn.NewLinear(hidden, 1, dev, vram.WithGenerator(mg)),
	)
	defer nn.Release(model)
	ddp, err := parallel.NewDistributedDataParallel(model, comm, parallel.DDPOptions{})
	if err != nil {
		return err
	}
	defer ddp.Close()
	opt, err := optim.NewSGD(ddp.Parameters(), optim.SGDConfig{LR: lr})
	if err != nil {
		return err
	}
	if rank == 0 {
		fmt.Fprintf(w, "%s, %s backend, %s; each rank trains on %d rows of every batch of %d\n",
			plural(size, "rank"), backendName(dev), plural(len(ddp.Buckets()), "gradient bucket"), batch/size, batch)
	}

	micro := max(o.accumulate, 1)
	share := batch / size
	part := share / micro
	var last float64
	for step := 1; step <= o.steps; step++ {
		start := (step - 1) * batch % samples
		var stepErr error
		lossSum := vram.Zeros(vram.Shape{1}, dev)
		vram.Tidy(func() {
			backward := func(i int) error {
				lo := start + rank*share + i*part
				loss := nn.MSELoss(ddp.Forward(xd.Narrow(0, lo, part)), yd.Narrow(0, lo, part)).MulScalar(1 / float64(micro))
				vram.NoGrad(func() { lossSum.AddInPlace(loss.Detach().Reshape(1)) })
				return ddp.Backward(loss)
			}
			ddp.NoSync(func() {
				for i := 0; i < micro-1 && stepErr == nil; i++ {
					stepErr = backward(i)
				}
			})
			if stepErr == nil {
				stepErr = backward(micro - 1)
			}
			if stepErr == nil {
				opt.Step()
				ddp.ZeroGrad()
				// The loss of the whole batch: the mean of the ranks'.
				stepErr = comm.AllReduce(lossSum, parallel.Avg)
			}
		})
		if stepErr == nil {
			last = lossSum.Item()
		}
		lossSum.Release()
		if stepErr != nil {
			return stepErr
		}
		if rank == 0 && (step%printEvery == 0 || step == 1) {
			fmt.Fprintf(w, "step %3d  loss %.6f\n", step, last)
		}
	}
	var sum float64
	vram.NoGrad(func() {
		for _, p := range model.Parameters() {
			vram.Tidy(func() { sum += p.Sum().Item() })
		}
	})
	fmt.Fprintf(w, "rank %d of %d on %s: final loss %.6f, parameter checksum %.9f, peak allocated %d bytes\n",
		rank, size, dev, last, sum, vram.MaxMemoryAllocated(dev))
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func backendName(dev vram.Device) string {
	if dev.IsCUDA() {
		return "nccl"
	}
	return "tcp"
}

// serveMetrics serves the allocator statistics of dev, labelled with the
// rank and local rank, until stop is called.
func serveMetrics(w io.Writer, l parallel.LaunchInfo, dev vram.Device, port int) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	if err := monitor.RegisterAllocator(reg, dev.String(), l.Rank,
		func() memory.Stats { return vram.MemoryStats(dev) }, monitor.LocalRank(l.LocalRank)); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	fmt.Fprintf(w, "rank %d serves its memory metrics at http://%s/metrics\n", l.Rank, ln.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- monitor.Serve(ctx, ln, reg) }()
	return func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(w, "metrics:", err)
		}
	}, nil
}
