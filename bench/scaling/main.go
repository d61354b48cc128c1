// Command scaling is one rank of the multi-GPU scaling runs: the MLP
// training step under DistributedDataParallel with a fixed batch per rank
// (weak scaling, as PyTorch DDP is usually measured), and the in-place
// all-reduce of a large tensor with NCCL's bus bandwidth. It runs under
// "vram run", one process per GPU, and rank 0 prints one JSON object a
// line ({"name", "value", "unit", "note", "ranks"}) for bench/scaling.sh,
// which runs it next to bench/torch_scaling.py under torchrun:
//
//	vram run --nproc-per-node 2 ./scaling -mode ddp
//	vram run --nproc-per-node 8 ./scaling -mode allreduce -size-mib 1024
//
// Each rank uses cuda:LOCAL_RANK with NCCL; on a machine without GPUs it
// takes a simulated GPU (sim:LOCAL_RANK) or the CPU with the TCP
// collectives, so that the program can be tried anywhere, with small
// sizes.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
	"github.com/vramgo/vram/parallel"
)

// options are the command's flags.
type options struct {
	mode    string
	width   int
	batch   int
	steps   int
	sizeMiB int
	reps    int
	backend string
}

func main() {
	var o options
	flag.StringVar(&o.mode, "mode", "ddp", "ddp (the MLP step) or allreduce")
	flag.IntVar(&o.width, "width", 4096, "the MLP's width (4 Linear layers of width×width, ReLU between)")
	flag.IntVar(&o.batch, "batch", 1024, "rows a rank takes each step")
	flag.IntVar(&o.steps, "steps", 20, "timed steps (after 5 warm-up steps)")
	flag.IntVar(&o.sizeMiB, "size-mib", 1024, "the all-reduced tensor's size in MiB (float32)")
	flag.IntVar(&o.reps, "reps", 20, "timed all-reduces (after 3 warm-up ones)")
	flag.StringVar(&o.backend, "backend", "auto", "collectives: auto, nccl or tcp")
	flag.Parse()
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "scaling:", err)
		os.Exit(2)
	}
	l, err := parallel.LaunchEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaling:", err)
		os.Exit(2)
	}
	if err := run(l, o); err != nil {
		fmt.Fprintf(os.Stderr, "scaling: rank %d: %v\n", l.Rank, err)
		os.Exit(1)
	}
}

// check refuses flags that cannot describe a run.
func (o options) check() error {
	switch {
	case o.mode != "ddp" && o.mode != "allreduce":
		return fmt.Errorf("-mode %q: want ddp or allreduce", o.mode)
	case o.width < 1 || o.width > 1<<16:
		return fmt.Errorf("-width %d: want 1 to 65536", o.width)
	case o.batch < 1 || o.batch > 1<<20:
		return fmt.Errorf("-batch %d: want 1 to 1048576", o.batch)
	case o.steps < 1 || o.steps > 10000:
		return fmt.Errorf("-steps %d: want 1 to 10000", o.steps)
	case o.sizeMiB < 1 || o.sizeMiB > 64<<10:
		return fmt.Errorf("-size-mib %d: want 1 to 65536", o.sizeMiB)
	case o.reps < 1 || o.reps > 10000:
		return fmt.Errorf("-reps %d: want 1 to 10000", o.reps)
	}
	return nil
}

// device picks the rank's device: its GPU, else a simulated one, else the
// CPU.
func device(l parallel.LaunchInfo, backend string) vram.Device {
	switch {
	case backend != "tcp" && vram.CUDAAvailable():
		return vram.CUDA(l.LocalRank % vram.DeviceCount())
	case vram.SimDeviceCount() > 0:
		return vram.Sim(l.LocalRank % vram.SimDeviceCount())
	}
	return vram.CPU
}

// result is one line of output.
type result struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Note  string  `json:"note,omitempty"`
	Ranks int     `json:"ranks"`
}

func run(l parallel.LaunchInfo, o options) error {
	dev := device(l, o.backend)
	comm, err := parallel.InitProcessGroup(parallel.ProcessGroupOptions{Backend: o.backend, Device: dev, Launch: l})
	if err != nil {
		return err
	}
	defer comm.Close()
	var rs []result
	err = vram.Catch(func() {
		if o.mode == "ddp" {
			rs, err = ddpStep(comm, dev, o)
		} else {
			rs, err = allReduce(comm, dev, o)
		}
	})
	if err != nil {
		return err
	}
	if comm.Rank() == 0 {
		enc := json.NewEncoder(os.Stdout)
		for _, r := range rs {
			r.Ranks = comm.Size()
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// barrier waits until every rank's queued work is done: an all-reduce of
// one value, read back.
func barrier(comm parallel.Communicator, dev vram.Device) error {
	t := vram.Zeros(vram.Shape{1}, dev)
	defer t.Release()
	if err := comm.AllReduce(t, parallel.Sum); err != nil {
		return err
	}
	t.Item()
	return nil
}

// ddpStep times the MLP step (MSE loss, AdamW) under
// DistributedDataParallel: every rank takes o.batch rows, so the job's
// batch grows with the ranks. The time of a step is the slowest rank's,
// as the step ends with the gradients' all-reduce.
func ddpStep(comm parallel.Communicator, dev vram.Device, o options) ([]result, error) {
	g := vram.NewGenerator(uint64(1 + comm.Rank()))
	var mods []nn.Module
	for i := range 4 {
		mods = append(mods, nn.NewLinear(o.width, o.width, dev, vram.WithGenerator(g)))
		if i < 3 {
			mods = append(mods, nn.NewReLU())
		}
	}
	model := nn.NewSequential(mods...)
	defer nn.Release(model)
	ddp, err := parallel.NewDistributedDataParallel(model, comm, parallel.DDPOptions{})
	if err != nil {
		return nil, err
	}
	defer ddp.Close()
	opt, err := optim.NewAdamW(ddp.Parameters(), optim.AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
	if err != nil {
		return nil, err
	}
	defer opt.Release()
	x := vram.Randn(vram.Shape{o.batch, o.width}, dev, vram.WithGenerator(g))
	y := vram.Randn(vram.Shape{o.batch, o.width}, dev, vram.WithGenerator(g))
	defer x.Release()
	defer y.Release()
	step := func() error {
		var err error
		vram.Tidy(func() {
			if err = ddp.Backward(nn.MSELoss(ddp.Forward(x), y)); err == nil {
				opt.Step()
				ddp.ZeroGrad()
			}
		})
		return err
	}
	for range 5 {
		if err := step(); err != nil {
			return nil, err
		}
	}
	vram.ResetPeakMemoryStats(dev)
	if err := barrier(comm, dev); err != nil {
		return nil, err
	}
	t0 := time.Now()
	for range o.steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	if err := barrier(comm, dev); err != nil {
		return nil, err
	}
	ms := float64(time.Since(t0).Microseconds()) / 1000 / float64(o.steps)
	note := fmt.Sprintf("4 x Linear %d + ReLU, %d rows a rank, MSE, AdamW, DDP over %s, %s", o.width, o.batch, backendName(dev), dev)
	return []result{
		{Name: "ddp_mlp_step", Value: ms, Unit: "ms", Note: note},
		{Name: "ddp_mlp_throughput", Value: float64(o.batch*comm.Size()) / ms * 1000, Unit: "rows/s", Note: note},
		{Name: "ddp_mlp_peak_allocated_rank0", Value: float64(vram.MaxMemoryAllocated(dev)) / (1 << 30), Unit: "GiB", Note: "MaxMemoryAllocated on rank 0"},
	}, nil
}

// allReduce times the in-place sum of a float32 tensor of o.sizeMiB MiB
// over the ranks: the median of o.reps calls, each followed by a barrier.
// The bus bandwidth is NCCL's: the algorithm bandwidth (size / time)
// times 2(n-1)/n, the share of the data each link carries in a ring.
func allReduce(comm parallel.Communicator, dev vram.Device, o options) ([]result, error) {
	n := o.sizeMiB << 20 / 4
	t := vram.Ones(vram.Shape{n}, dev)
	defer t.Release()
	ts := make([]float64, 0, o.reps)
	for i := range 3 + o.reps {
		t.FillInPlace(1)
		if err := barrier(comm, dev); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := comm.AllReduce(t, parallel.Sum); err != nil {
			return nil, err
		}
		if err := barrier(comm, dev); err != nil {
			return nil, err
		}
		if i >= 3 {
			ts = append(ts, time.Since(t0).Seconds())
		}
	}
	// Every element of the ones is now the number of ranks: check the
	// first and the last.
	for _, at := range []int{0, n - 1} {
		if got := t.Narrow(0, at, 1).Item(); got != float64(comm.Size()) {
			return nil, fmt.Errorf("element %d of the all-reduced ones is %v, want %d", at, got, comm.Size())
		}
	}
	slices.Sort(ts)
	sec := ts[len(ts)/2]
	bytes := float64(n) * 4
	alg := bytes / sec / 1e9
	bus := alg * 2 * float64(comm.Size()-1) / float64(comm.Size())
	note := fmt.Sprintf("%d MiB float32, sum in place, %s, median of %d", o.sizeMiB, backendName(dev), o.reps)
	return []result{
		{Name: "allreduce_time", Value: sec * 1000, Unit: "ms", Note: note},
		{Name: "allreduce_algbw", Value: alg, Unit: "GB/s", Note: note},
		{Name: "allreduce_busbw", Value: bus, Unit: "GB/s", Note: note + "; bus bandwidth = algorithm bandwidth x 2(n-1)/n"},
	}, nil
}

func backendName(dev vram.Device) string {
	if dev.Kind == "cuda" {
		return "NCCL"
	}
	return "TCP"
}
