package models

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/footprint"
	"github.com/vramgo/vram/nn"
)

// Config chooses the variants of a ResNet that torchvision's constructors
// take as arguments. The zero value is torchvision's default model.
type Config struct {
	// NumClasses is the number of outputs of the final fully connected
	// layer; 0 means 1000 (ImageNet).
	NumClasses int
	// ZeroInitResidual zeroes the weight of the last batch norm of every
	// residual block (bn2 of a BasicBlock, bn3 of a Bottleneck), so that
	// each block starts as the identity (torchvision's
	// zero_init_residual=True).
	ZeroInitResidual bool
}

// block is a residual block of a [ResNet]: a [BasicBlock] or a
// [Bottleneck].
type block interface {
	nn.Module
	// lastBN returns the block's last batch norm, the one that
	// Config.ZeroInitResidual zeroes.
	lastBN() *nn.BatchNorm2d
}

// BasicBlock is the residual block of ResNet-18 and ResNet-34: two 3×3
// convolutions, each followed by batch norm, the first by a ReLU too, then
// the shortcut is added and a ReLU applied. Its state-dict names are
// torchvision's: conv1, bn1, conv2, bn2 and, when the block changes the
// resolution or the width, downsample.0 (a 1×1 convolution) and
// downsample.1 (its batch norm).
type BasicBlock struct {
	nn.Base
	Conv1, Conv2 *nn.Conv2d
	BN1, BN2     *nn.BatchNorm2d
	// Downsample maps the block's input to the shape of its output for
	// the shortcut; nil when the input already has that shape.
	Downsample *nn.Sequential
}

// BasicExpansion is the ratio of a BasicBlock's output channels to its
// width.
const BasicExpansion = 1

// NewBasicBlock returns a BasicBlock from in channels to planes channels,
// whose first convolution has the given stride. opts (device, dtype,
// generator) go to the layers' constructors. It panics with an
// *vram.Error of kind vram.ErrArgument unless in, planes and stride are
// positive.
func NewBasicBlock(in, planes, stride int, opts ...vram.Option) *BasicBlock {
	checkBlock("basic_block", in, planes, stride)
	b := &BasicBlock{
		Conv1: conv(in, planes, 3, stride, opts),
		BN1:   nn.NewBatchNorm2d(planes, opts...),
		Conv2: conv(planes, planes, 3, 1, opts),
		BN2:   nn.NewBatchNorm2d(planes, opts...),
	}
	b.RegisterModule("conv1", b.Conv1)
	b.RegisterModule("bn1", b.BN1)
	b.RegisterModule("conv2", b.Conv2)
	b.RegisterModule("bn2", b.BN2)
	if stride != 1 || in != planes*BasicExpansion {
		b.Downsample = downsample(in, planes*BasicExpansion, stride, opts)
		b.RegisterModule("downsample", b.Downsample)
	}
	return b
}

// Forward returns relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)).
func (b *BasicBlock) Forward(x *vram.Tensor) *vram.Tensor {
	h := convBN(b.Conv1, b.BN1, x, true)
	defer h.Release()
	return convBNAddRelu(b.Conv2, b.BN2, h, shortcut(b.Downsample, x))
}

func (b *BasicBlock) lastBN() *nn.BatchNorm2d { return b.BN2 }

// Bottleneck is the residual block of ResNet-50, -101 and -152: a 1×1
// convolution down to the block's width, a 3×3 convolution (carrying the
// stride, as torchvision's "ResNet V1.5" does), and a 1×1 convolution up to
// four times the width, each followed by batch norm and all but the last by
// a ReLU; then the shortcut is added and a ReLU applied. Its state-dict
// names are torchvision's: conv1, bn1, conv2, bn2, conv3, bn3 and
// downsample.0 and downsample.1 when there is a projection.
type Bottleneck struct {
	nn.Base
	Conv1, Conv2, Conv3 *nn.Conv2d
	BN1, BN2, BN3       *nn.BatchNorm2d
	// Downsample maps the block's input to the shape of its output for
	// the shortcut; nil when the input already has that shape.
	Downsample *nn.Sequential
}

// BottleneckExpansion is the ratio of a Bottleneck's output channels to its
// width.
const BottleneckExpansion = 4

// NewBottleneck returns a Bottleneck from in channels to 4·planes channels
// of width planes, whose 3×3 convolution has the given stride. opts go to
// the layers' constructors. It panics like [NewBasicBlock].
func NewBottleneck(in, planes, stride int, opts ...vram.Option) *Bottleneck {
	checkBlock("bottleneck", in, planes, stride)
	out := planes * BottleneckExpansion
	b := &Bottleneck{
		Conv1: conv(in, planes, 1, 1, opts),
		BN1:   nn.NewBatchNorm2d(planes, opts...),
		Conv2: conv(planes, planes, 3, stride, opts),
		BN2:   nn.NewBatchNorm2d(planes, opts...),
		Conv3: conv(planes, out, 1, 1, opts),
		BN3:   nn.NewBatchNorm2d(out, opts...),
	}
	b.RegisterModule("conv1", b.Conv1)
	b.RegisterModule("bn1", b.BN1)
	b.RegisterModule("conv2", b.Conv2)
	b.RegisterModule("bn2", b.BN2)
	b.RegisterModule("conv3", b.Conv3)
	b.RegisterModule("bn3", b.BN3)
	if stride != 1 || in != out {
		b.Downsample = downsample(in, out, stride, opts)
		b.RegisterModule("downsample", b.Downsample)
	}
	return b
}

// Forward returns relu(bn3(conv3(...)) + shortcut(x)).
func (b *Bottleneck) Forward(x *vram.Tensor) *vram.Tensor {
	h1 := convBN(b.Conv1, b.BN1, x, true)
	h2 := func() *vram.Tensor {
		defer h1.Release() // also when the convolution panics
		return convBN(b.Conv2, b.BN2, h1, true)
	}()
	defer h2.Release()
	return convBNAddRelu(b.Conv3, b.BN3, h2, shortcut(b.Downsample, x))
}

func (b *Bottleneck) lastBN() *nn.BatchNorm2d { return b.BN3 }

// ResNet is torchvision's ResNet: a 7×7 stride-2 convolution with batch
// norm and ReLU, a 3×3 stride-2 max pool, four stages of residual blocks
// (the last three halving the resolution), global average pooling and a
// fully connected layer. Its parameter and buffer names are torchvision's
// (conv1, bn1, layer1.0.conv1, ..., layer2.0.downsample.0, ..., fc), so
// [nn.Load] reads a file written from PyTorch with
// safetensors.torch.save_file(model.state_dict(), path), and [nn.Save]
// writes one that torchvision's model loads.
//
// Inputs are [N, 3, H, W] images, contiguous or channels-last: 224×224
// for ImageNet, but any size works, as the pooling at the end is adaptive.
// The output is [N, NumClasses] logits.
type ResNet struct {
	nn.Base
	Conv1   *nn.Conv2d
	BN1     *nn.BatchNorm2d
	MaxPool *nn.MaxPool2d
	// Layers are layer1 to layer4, each a Sequential of blocks named "0",
	// "1", ...
	Layers  [4]*nn.Sequential
	AvgPool *nn.AdaptiveAvgPool2d
	FC      *nn.Linear
}

// BlockKind says which residual block a [ResNet] is built of.
type BlockKind int

// The block kinds.
const (
	BasicKind      BlockKind = iota // BasicBlock, expansion 1 (ResNet-18, -34)
	BottleneckKind                  // Bottleneck, expansion 4 (ResNet-50, -101, -152)
)

// String returns "BasicBlock" or "Bottleneck".
func (k BlockKind) String() string {
	switch k {
	case BasicKind:
		return "BasicBlock"
	case BottleneckKind:
		return "Bottleneck"
	}
	return "BlockKind(" + strconv.Itoa(int(k)) + ")"
}

// ResNet18 returns torchvision's resnet18 (BasicBlock, [2, 2, 2, 2]):
// 11,689,512 parameters with 1000 classes.
func ResNet18(cfg Config, opts ...vram.Option) *ResNet {
	return NewResNet(BasicKind, [4]int{2, 2, 2, 2}, cfg, opts...)
}

// ResNet34 returns torchvision's resnet34 (BasicBlock, [3, 4, 6, 3]).
func ResNet34(cfg Config, opts ...vram.Option) *ResNet {
	return NewResNet(BasicKind, [4]int{3, 4, 6, 3}, cfg, opts...)
}

// ResNet50 returns torchvision's resnet50 (Bottleneck, [3, 4, 6, 3]):
// 25,557,032 parameters with 1000 classes.
func ResNet50(cfg Config, opts ...vram.Option) *ResNet {
	return NewResNet(BottleneckKind, [4]int{3, 4, 6, 3}, cfg, opts...)
}

// ResNet101 returns torchvision's resnet101 (Bottleneck, [3, 4, 23, 3]).
func ResNet101(cfg Config, opts ...vram.Option) *ResNet {
	return NewResNet(BottleneckKind, [4]int{3, 4, 23, 3}, cfg, opts...)
}

// NewResNet returns a ResNet of the given block kind with layers[i] blocks
// in stage i+1, initialised as torchvision initialises it: convolution
// weights normal with standard deviation sqrt(2/fan_out) (Kaiming, fan_out
// mode), batch norms with weight 1 and bias 0, the fully connected layer
// with PyTorch's default. opts (device, dtype, generator) go to the layers'
// constructors, so a seeded [vram.WithGenerator] makes identical models. It
// panics with an *vram.Error of kind vram.ErrArgument for an unknown block
// kind, a stage with fewer than one block or a negative NumClasses, and of
// kind vram.ErrOutOfMemory, before it makes any layer, when the blocks and
// the fully connected layer need more host memory than the CPU device's
// limit or more memory than their device has.
func NewResNet(kind BlockKind, layers [4]int, cfg Config, opts ...vram.Option) *ResNet {
	const op = "resnet"
	if kind != BasicKind && kind != BottleneckKind {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("unknown block kind %v; use models.BasicKind or models.BottleneckKind", kind)})
	}
	for i, n := range layers {
		if n < 1 {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("stage %d has %d blocks; every stage needs at least 1", i+1, n)})
		}
	}
	classes := cfg.NumClasses
	switch {
	case classes == 0:
		classes = 1000
	case classes < 0:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("NumClasses is %d; it must be positive (0 means 1000)", classes)})
	}
	expansion := BasicExpansion
	if kind == BottleneckKind {
		expansion = BottleneckExpansion
	}
	checkResNetMemory(op, kind, layers, classes, expansion, opts)
	r := &ResNet{
		Conv1:   nn.NewConv2d(3, 64, 7, nn.ConvOptions{Stride: 2, Padding: 3, NoBias: true}, opts...),
		BN1:     nn.NewBatchNorm2d(64, opts...),
		MaxPool: nn.NewMaxPool2d(3, 2, 1),
		AvgPool: nn.NewAdaptiveAvgPool2d(1, 1),
	}
	kaimingFanOut(r.Conv1.Weight, opts)
	r.RegisterModule("conv1", r.Conv1)
	r.RegisterModule("bn1", r.BN1)
	r.RegisterModule("maxpool", r.MaxPool)
	in := 64
	for i, n := range layers {
		planes := 64 << i
		stride := 2
		if i == 0 {
			stride = 1
		}
		stage := nn.NewSequential()
		for j := range n {
			s := 1
			if j == 0 {
				s = stride
			}
			var b block
			if kind == BasicKind {
				b = NewBasicBlock(in, planes, s, opts...)
			} else {
				b = NewBottleneck(in, planes, s, opts...)
			}
			if cfg.ZeroInitResidual {
				zero(b.lastBN().Weight)
			}
			stage.Append(b)
			in = planes * expansion
		}
		r.Layers[i] = stage
		r.RegisterModule("layer"+strconv.Itoa(i+1), stage)
	}
	r.RegisterModule("avgpool", r.AvgPool)
	r.FC = nn.NewLinear(512*expansion, classes, opts...)
	r.RegisterModule("fc", r.FC)
	return r
}

// checkResNetMemory panics with an *vram.Error of kind vram.ErrOutOfMemory
// naming op when a ResNet of the given block kind, blocks per stage and
// classes, on the device and dtype of opts, cannot fit in memory
// ([footprint.Footprint.Check]), before any layer is made: a block count
// wrong by orders of magnitude would otherwise allocate block after block
// until the memory ran out, and a number of classes too large would fail
// only at the last layer. It counts the convolutions' weights, the batch
// norms' parameters and buffers (all in the options' dtype, a lower
// bound) and the fully connected layer.
func checkResNetMemory(op string, kind BlockKind, layers [4]int, classes, expansion int, opts []vram.Option) {
	f, dt := footprint.Of(opts)
	f.Add(1, dt, 64, 3, 7, 7)
	addBatchNorms(&f, 1, dt, 64)
	in := 64
	for i, n := range layers {
		planes, stride := 64<<i, 2
		if i == 0 {
			stride = 1
		}
		addBlocks(&f, kind, 1, in, planes, stride, dt)
		in = planes * expansion
		addBlocks(&f, kind, int64(n-1), in, planes, 1, dt)
	}
	f.Add(1, dt, classes, 512*expansion)
	f.Add(1, dt, classes)
	f.Check(op, fmt.Sprintf("layers %v of %v blocks and %d classes", layers, kind, classes))
}

// addBlocks counts in f the tensors of n blocks of the given kind from in
// channels at width planes with the given stride, of dtype dt.
func addBlocks(f *footprint.Footprint, kind BlockKind, n int64, in, planes, stride int, dt vram.DType) {
	out := planes * BasicExpansion
	if kind == BottleneckKind {
		out = planes * BottleneckExpansion
		f.Add(n, dt, planes, in, 1, 1)
		f.Add(n, dt, planes, planes, 3, 3)
		f.Add(n, dt, out, planes, 1, 1)
		addBatchNorms(f, footprint.Mul(2, n), dt, planes)
	} else {
		f.Add(n, dt, planes, in, 3, 3)
		f.Add(n, dt, planes, planes, 3, 3)
		addBatchNorms(f, n, dt, planes)
	}
	addBatchNorms(f, n, dt, out)
	if stride != 1 || in != out {
		f.Add(n, dt, out, in, 1, 1)
		addBatchNorms(f, n, dt, out)
	}
}

// addBatchNorms counts in f the tensors of n batch norms over c channels:
// weight, bias, running mean and variance, and the count of batches.
func addBatchNorms(f *footprint.Footprint, n int64, dt vram.DType, c int) {
	f.Add(footprint.Mul(4, n), dt, c)
	f.Add(n, dt)
}

// Forward returns the logits [N, NumClasses] of images x [N, 3, H, W].
func (r *ResNet) Forward(x *vram.Tensor) *vram.Tensor {
	feat := r.Features(x)
	pooled := func() *vram.Tensor {
		defer feat.Release() // also when pooling panics
		return r.AvgPool.Forward(feat)
	}()
	flat := func() *vram.Tensor {
		defer pooled.Release()
		return pooled.Flatten(1, -1)
	}()
	defer flat.Release()
	return r.FC.Forward(flat)
}

// Features returns the output of the last stage, [N, 512·expansion, H/32,
// W/32] (rounded up), before pooling: what a detection or segmentation
// head takes. Its intermediate results are released as soon as the next
// layer has consumed them, and when a layer panics (out of memory, say), as
// [nn.Sequential] releases them.
func (r *ResNet) Features(x *vram.Tensor) (out *vram.Tensor) {
	h := convBN(r.Conv1, r.BN1, x, true)
	cur := h
	defer func() {
		if out == nil {
			cur.Release() // a layer panicked
		}
	}()
	cur = r.MaxPool.Forward(h)
	h.Release()
	for _, stage := range r.Layers {
		next := stage.Forward(cur)
		cur.Release()
		cur = next
	}
	return cur
}

// checkBlock panics with an *vram.Error of kind vram.ErrArgument unless a
// block's channels and stride are positive.
func checkBlock(op string, in, planes, stride int) {
	if in < 1 || planes < 1 || stride < 1 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("in=%d, planes=%d, stride=%d; all must be positive", in, planes, stride)})
	}
}

// conv returns a bias-free k×k convolution with padding k/2, initialised
// like torchvision's.
func conv(in, out, k, stride int, opts []vram.Option) *nn.Conv2d {
	c := nn.NewConv2d(in, out, k, nn.ConvOptions{Stride: stride, Padding: k / 2, NoBias: true}, opts...)
	kaimingFanOut(c.Weight, opts)
	return c
}

// downsample returns the projection shortcut: a 1×1 convolution of the
// given stride and its batch norm, named "0" and "1".
func downsample(in, out, stride int, opts []vram.Option) *nn.Sequential {
	return nn.NewSequential(conv(in, out, 1, stride, opts), nn.NewBatchNorm2d(out, opts...))
}

// convBN returns bn(conv(x)), then its ReLU when relu is set, releasing
// what it no longer needs.
func convBN(c *nn.Conv2d, bn *nn.BatchNorm2d, x *vram.Tensor, relu bool) *vram.Tensor {
	y := c.Forward(x)
	defer y.Release()
	if relu {
		return bn.ForwardReLU(y, nil)
	}
	return bn.Forward(y)
}

// convBNAddRelu returns relu(bn(c(x)) + r) and releases r, whether it
// returns or panics: the end of a
// residual block, one fused pass after the convolution where the device
// has one.
func convBNAddRelu(c *nn.Conv2d, bn *nn.BatchNorm2d, x, r *vram.Tensor) *vram.Tensor {
	defer r.Release() // also when the convolution panics
	y := c.Forward(x)
	defer y.Release()
	return bn.ForwardReLU(y, r)
}

// shortcut returns the block's input mapped by the projection, or a new
// reference to it when there is none.
func shortcut(down *nn.Sequential, x *vram.Tensor) *vram.Tensor {
	if down == nil {
		return x.To(x.Device())
	}
	return down.Forward(x)
}

// kaimingFanOut fills the convolution weight w [out, in/groups, kh, kw]
// with normal values of standard deviation sqrt(2/fan_out), fan_out =
// out·kh·kw (torch.nn.init.kaiming_normal_ with mode "fan_out" and
// nonlinearity "relu"), drawing from the generator in opts.
func kaimingFanOut(w *vram.Tensor, opts []vram.Option) {
	s := w.Shape()
	fanOut := s[0] * s[2] * s[3]
	dt := vram.Float32
	if w.DType() == vram.Float64 {
		dt = vram.Float64
	}
	vram.NoGrad(func() {
		r := vram.Randn(s, append(slices.Clone(opts), w.Device(), dt)...)
		defer r.Release()
		r.MulScalarInPlace(math.Sqrt(2 / float64(fanOut)))
		w.CopyFrom(r)
	})
}

// zero sets t to zeros in place.
func zero(t *vram.Tensor) {
	vram.NoGrad(func() { t.FillInPlace(0) })
}
