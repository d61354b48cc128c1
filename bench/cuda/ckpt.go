package main

import (
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// ckptShape is the network of the checkpointing benchmark: layers blocks
// of Linear(width, width) + GELU, a batch of batch rows, MSE loss, SGD.
type ckptShape struct{ width, batch, layers int }

// ckptFull is the benchmark's size: 16 × (Linear 4096 + GELU), batch 8192
// (about 1.07 GB of float32 parameters, 134 MB a layer's activation).
var ckptFull = ckptShape{width: 4096, batch: 8192, layers: 16}

// ckptResult is one mode's measurement: the allocator's peak during a
// training step minus the parameters' bytes (the input and target, the
// activations, the gradients and every temporary), and the step's median
// wall time.
type ckptResult struct {
	peakAbove int64
	ms        float64
}

// ckptNet is the benchmark's network on a device: its blocks (each a
// Sequential of Linear and GELU), the input and the target.
type ckptNet struct {
	blocks []nn.Module
	x, y   *vram.Tensor
}

// newCkptNet builds the network of sh on dev, its weights drawn once for
// both modes.
func newCkptNet(dev vram.Device, sh ckptShape) *ckptNet {
	g := vram.NewGenerator(1)
	n := &ckptNet{blocks: make([]nn.Module, sh.layers)}
	for i := range n.blocks {
		n.blocks[i] = nn.NewSequential(nn.NewLinear(sh.width, sh.width, dev, vram.WithGenerator(g)), nn.NewGELU())
	}
	n.x = vram.Randn(vram.Shape{sh.batch, sh.width}, vram.WithGenerator(g), dev)
	n.y = vram.Randn(vram.Shape{sh.batch, sh.width}, vram.WithGenerator(g), dev)
	return n
}

// release frees the network's tensors.
func (n *ckptNet) release() {
	for _, b := range n.blocks {
		nn.Release(b)
	}
	n.x.Release()
	n.y.Release()
}

// run measures one training step (forward, loss, backward, SGD step,
// gradients released) of the network, every block wrapped in
// nn.Checkpoint when checkpointed: the peak from the memory held between
// steps (parameters, x and y), then reps timed steps; sync waits for dev.
func (n *ckptNet) run(dev vram.Device, checkpointed bool, reps int, sync func()) ckptResult {
	blocks := make([]nn.Module, len(n.blocks))
	for i, b := range n.blocks {
		blocks[i] = b
		if checkpointed {
			blocks[i] = nn.Checkpoint(b)
		}
	}
	model := nn.NewSequential(blocks...)
	params := model.Parameters()
	var paramBytes int64
	for _, p := range params {
		paramBytes += p.Bytes()
	}
	opt, err := optim.NewSGD(params, optim.SGDConfig{LR: 1e-4})
	must(err)
	step := func() {
		vram.Tidy(func() {
			nn.MSELoss(model.Forward(n.x), n.y).Backward()
			opt.Step()
			opt.ZeroGrad()
		})
	}
	step()
	step()
	sync()
	vram.ResetPeakMemoryStats(dev)
	step()
	sync()
	res := ckptResult{peakAbove: vram.MaxMemoryAllocated(dev) - paramBytes}
	var ts []float64
	for range reps {
		t0 := time.Now()
		step()
		sync()
		ts = append(ts, time.Since(t0).Seconds())
	}
	if reps > 0 {
		res.ms = median(ts) * 1000
	}
	return res
}

// benchCheckpoint measures the training step of ckptFull on cuda:0 plain
// and with every block checkpointed (torch.utils.checkpoint per block on
// PyTorch's side): peak memory above the parameters, step time and the
// time overhead.
func benchCheckpoint(reps int) {
	dev := vram.CUDA(0)
	sync := func() { must(vram.Synchronize(dev)) }
	net := newCkptNet(dev, ckptFull)
	n := max(3, reps/4)
	plain := net.run(dev, false, n, sync)
	ck := net.run(dev, true, n, sync)
	net.release()
	vram.EmptyCache(dev)
	const gb = 1e9
	emit("ckpt_plain_peak_above_params", float64(plain.peakAbove)/gb, "GB", "16 x (Linear 4096 + GELU), batch 8192, MSE, SGD: max allocated during a step - parameter bytes")
	emit("ckpt_checkpointed_peak_above_params", float64(ck.peakAbove)/gb, "GB", "every block in nn.Checkpoint")
	emit("ckpt_plain_step", plain.ms, "ms", "forward, loss, backward, SGD step, float32, TF32 off")
	emit("ckpt_checkpointed_step", ck.ms, "ms", "the same, every block recomputed in backward")
	emit("ckpt_time_overhead", ck.ms/plain.ms, "x", "checkpointed step / plain step")
}
