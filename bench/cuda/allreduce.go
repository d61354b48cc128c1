package main

import (
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/parallel"
)

// benchAllReduce times NCCL all-reduces through parallel's Communicator,
// one rank on cuda:0 (torch_bench.py: torch.distributed with the nccl
// backend, world size 1), in place on float32 tensors. Each repetition
// queues one all-reduce and waits for the stream, so the time is the
// latency from the call to the result. With one rank NCCL moves no data
// for a sum in place (the row is the host's cost); an average runs a
// kernel that reads and writes the whole buffer. Bandwidth is the size
// over the time (NCCL's algorithm bandwidth; its bus bandwidth,
// algbw·2(n-1)/n, is 0 for one rank).
func benchAllReduce(reps int) {
	dev := vram.CUDA(0)
	comms, err := parallel.NewNCCLGroup([]vram.Device{dev})
	must(err)
	c := comms[0]
	stream := vram.CurrentStream(dev)
	run := func(x *vram.Tensor, op parallel.ReduceOp, warm, n int) float64 {
		for range warm {
			must(c.AllReduce(x, op))
		}
		must(stream.Synchronize())
		ts := make([]float64, 0, n)
		for range n {
			t0 := time.Now()
			must(c.AllReduce(x, op))
			must(stream.Synchronize())
			ts = append(ts, time.Since(t0).Seconds())
		}
		return median(ts)
	}
	small := vram.Ones([]int{1}, dev) // 4 bytes
	emit("allreduce_4B", run(small, parallel.Sum, 200, 2000)*1e6, "us",
		"parallel.Communicator AllReduce (sum, in place, 1 rank) + stream sync, median of 2000")
	small.Release()
	const size = 1 << 30
	big := vram.Ones([]int{size / 4}, dev)
	emit("allreduce_1GiB", size/run(big, parallel.Sum, 3, max(5, reps))/1e9, "GB/s",
		"sum in place, 1 rank: size / (call + sync); NCCL copies nothing; bus bandwidth is 0 for 1 rank")
	emit("allreduce_avg_1GiB", size/run(big, parallel.Avg, 3, max(5, reps))/1e9, "GB/s",
		"avg in place, 1 rank: one kernel reads and writes 1 GiB; size / (call + sync)")
	big.Release()
	must(c.Close())
}
