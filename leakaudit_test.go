package vram

import (
	"testing"
)

// The test of this file runs a representative call of each exported op,
// forward and, where gradients flow, backward, in a scope without Tidy
// where the caller releases only what it receives, and checks that the
// library released everything it made on the way: no storage stays live,
// none is left for the garbage collector, and the allocator's count of a
// simulated device returns to where it was.

// leakEnv makes the inputs of one case and remembers them, so that the
// test releases them afterwards.
type leakEnv struct {
	d    Device
	grad bool // floating-point inputs require grad
	made []*Tensor
}

func (e *leakEnv) keep(t *Tensor) *Tensor {
	e.made = append(e.made, t)
	return t
}

// randn makes a float32 input of the shape, requiring grad when e.grad.
func (e *leakEnv) randn(shape ...int) *Tensor {
	opts := []Option{e.d, Float32}
	if e.grad {
		opts = append(opts, WithGrad())
	}
	return e.keep(Randn(Shape(shape), opts...))
}

// pos makes a float32 input in [0.5, 1.5).
func (e *leakEnv) pos(shape ...int) *Tensor {
	opts := []Option{e.d, Float32}
	if e.grad {
		opts = append(opts, WithGrad())
	}
	return e.keep(Uniform(Shape(shape), 0.5, 1.5, opts...))
}

// ints makes an int64 input.
func (e *leakEnv) ints(data []int64, shape ...int) *Tensor {
	return e.keep(FromSlice(data, Shape(shape), e.d))
}

// bools makes a bool input.
func (e *leakEnv) bools(data []bool, shape ...int) *Tensor {
	return e.keep(FromSlice(data, Shape(shape), e.d))
}

// one wraps a single result.
func one(t *Tensor) []*Tensor { return []*Tensor{t} }

// two wraps a pair of results.
func two(a, b *Tensor) []*Tensor { return []*Tensor{a, b} }

// leakCases are the calls the audit makes.
var leakCases = []struct {
	name string
	run  func(e *leakEnv) []*Tensor
}{
	// elementwise and scalar
	{"Add", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Add(e.randn(3))) }},
	{"Sub", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Sub(e.randn(2, 1))) }},
	{"Mul", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Mul(e.randn(3))) }},
	{"Div", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Div(e.pos(3))) }},
	{"Pow", func(e *leakEnv) []*Tensor { return one(e.pos(2, 3).Pow(e.randn(3))) }},
	{"Atan2", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Atan2(e.randn(3))) }},
	{"Maximum", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Maximum(e.randn(3))) }},
	{"Minimum", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Minimum(e.randn(3))) }},
	{"Remainder", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Remainder(e.pos(3))) }},
	{"Fmod", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Fmod(e.pos(3))) }},
	{"FloorDivide", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).FloorDivide(e.pos(3))) }},
	{"RemainderScalar", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).RemainderScalar(0.7)) }},
	{"FmodScalar", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).FmodScalar(0.7)) }},
	{"FloorDivideScalar", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).FloorDivideScalar(0.7)) }},
	{"PowScalar", func(e *leakEnv) []*Tensor { return one(e.pos(2, 3).PowScalar(2.5)) }},
	{"RDivScalar", func(e *leakEnv) []*Tensor { return one(e.pos(2, 3).RDivScalar(2)) }},
	{"RSubScalar", func(e *leakEnv) []*Tensor { return one(e.pos(2, 3).RSubScalar(2)) }},
	{"Clamp", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Clamp(-0.5, 0.5)) }},
	{"ClampTensor", func(e *leakEnv) []*Tensor {
		return one(e.randn(2, 3).ClampTensor(e.keep(Full(Shape{3}, -0.5, e.d)), e.keep(Full(Shape{3}, 0.5, e.d))))
	}},
	{"Addcmul", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Addcmul(e.randn(2, 3), e.randn(3), 0.5)) }},
	{"Addcdiv", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Addcdiv(e.randn(2, 3), e.pos(3), 0.5)) }},
	{"Where", func(e *leakEnv) []*Tensor {
		return one(Where(e.bools([]bool{true, false, true}, 3), e.randn(2, 3), e.randn(3)))
	}},
	{"Cross", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Cross(e.randn(2, 3), 1)) }},
	{"Dot", func(e *leakEnv) []*Tensor { return one(e.randn(3).Dot(e.randn(3))) }},
	{"comparisons", func(e *leakEnv) []*Tensor {
		a, b := e.randn(2, 3), e.randn(3)
		return []*Tensor{a.Eq(b), a.Ne(b), a.Lt(b), a.Le(b), a.Gt(b), a.Ge(b), a.EqScalar(0), a.LtScalar(0), a.LeScalar(0), a.GtScalar(0), a.GeScalar(0), a.IsNaN()}
	}},
	{"logical", func(e *leakEnv) []*Tensor {
		a, b := e.bools([]bool{true, false, true}, 3), e.bools([]bool{false, false, true}, 3)
		return []*Tensor{a.LogicalAnd(b), a.LogicalOr(b), a.LogicalNot()}
	}},
	{"unary", func(e *leakEnv) []*Tensor {
		x, p := e.randn(2, 3), e.pos(2, 3)
		return []*Tensor{x.Abs(), x.Neg(), x.Exp(), x.Expm1(), p.Log(), p.Log1p(), p.Log2(), p.Log10(), p.Sqrt(), p.Rsqrt(),
			p.Reciprocal(), x.Sin(), x.Cos(), x.Tan(), x.Sinh(), x.Cosh(), x.Tanh(), x.Atan(), e.keep(x.MulScalar(0.5)).Asin(),
			e.keep(x.DivScalar(4)).Acos(), x.Erf(), x.Sign(), x.Square(), x.Floor(), x.Ceil(), x.Round()}
	}},
	{"activations", func(e *leakEnv) []*Tensor {
		x := e.randn(2, 3)
		return []*Tensor{x.Relu(), x.Sigmoid(), x.Silu(), x.Gelu(), x.GeluTanh(), x.Elu(1), x.LeakyRelu(0.1), x.Mish(),
			x.Hardswish(), x.Hardtanh(-1, 1), x.Softplus(1, 20), x.Softmax(1), x.LogSoftmax(1)}
	}},
	{"BiasAct", func(e *leakEnv) []*Tensor { return one(BiasAct(e.randn(2, 3), e.randn(3), ActGELU)) }},
	{"logic", func(e *leakEnv) []*Tensor {
		x, y := e.randn(2, 3), e.randn(3)
		_, _ = x.Equal(y), x.AllClose(y, IsCloseRTol, IsCloseATol, true)
		return append([]*Tensor{x.Any(), x.All(1), x.AnyKeepDim(0), x.AllKeepDim(1), x.CountNonzero(1), x.IsClose(y, 0.1, 0.1, true),
			x.IsInf(), x.IsPosInf(), x.IsNegInf(), x.IsFinite(), x.Nonzero(), x.Argwhere(), x.LogicalXor(y)}, x.NonzeroTuple()...)
	}},
	{"small math", func(e *leakEnv) []*Tensor {
		x := e.randn(2, 3)
		return []*Tensor{x.Trunc(), x.Frac(), x.RoundDecimals(1), x.NanToNum(0, 1, -1), x.ClampMin(0), x.ClampMax(0.5),
			x.Lerp(e.randn(3), e.pos(2, 1)), x.LerpScalar(e.randn(2, 3), 0.7), e.randn(2).Outer(e.randn(3)),
			e.ints([]int64{2, 0, 1}, 3).OneHot(-1)}
	}},
	// reductions
	{"reductions", func(e *leakEnv) []*Tensor {
		x := e.randn(2, 3)
		return []*Tensor{x.Sum(), x.Sum(1), x.SumKeepDim(0), x.Mean(0), x.MeanKeepDim(1), x.Max(1), x.MaxKeepDim(0), x.Min(1),
			x.MinKeepDim(1), x.Prod(1), x.ProdKeepDim(0), x.Std([]int{1}, 1, false), x.Var([]int{0}, 1, true),
			x.Norm(2, []int{1}, false), x.Norm(1, nil, false), x.Logsumexp([]int{1}, false), x.Logsumexp([]int{0, 1}, true)}
	}},
	{"arg reductions", func(e *leakEnv) []*Tensor {
		x := e.randn(2, 3)
		return []*Tensor{x.ArgMax(1, false), x.ArgMin(0, true), x.ArgMaxAll(), x.ArgMinAll()}
	}},
	{"scans", func(e *leakEnv) []*Tensor {
		x := e.randn(2, 3)
		return []*Tensor{x.CumSum(1), x.CumProd(1)}
	}},
	{"Sort", func(e *leakEnv) []*Tensor { return two(e.randn(2, 3).Sort(1, true)) }},
	{"ArgSort", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).ArgSort(1, false)) }},
	{"TopK", func(e *leakEnv) []*Tensor { return two(e.randn(2, 3).TopK(2, 1, true)) }},
	// matmul and nn
	{"MatMul", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).MatMul(e.randn(3, 4))) }},
	{"MatMul vector", func(e *leakEnv) []*Tensor { return one(e.randn(3).MatMul(e.randn(2, 3, 4))) }},
	{"BMM", func(e *leakEnv) []*Tensor { return one(e.randn(2, 2, 3).BMM(e.randn(2, 3, 4))) }},
	{"Linear", func(e *leakEnv) []*Tensor { return one(Linear(e.randn(2, 3), e.randn(4, 3), e.randn(4))) }},
	{"LinearAct", func(e *leakEnv) []*Tensor { return one(LinearAct(e.randn(2, 3), e.randn(4, 3), e.randn(4), ActReLU)) }},
	{"Cdist", func(e *leakEnv) []*Tensor { return one(Cdist(e.randn(2, 3), e.randn(4, 3), 2)) }},
	{"Cdist p=1", func(e *leakEnv) []*Tensor { return one(Cdist(e.randn(2, 3), e.randn(4, 3), 1)) }},
	{"Conv1d", func(e *leakEnv) []*Tensor {
		return one(Conv1d(e.randn(1, 2, 6), e.randn(3, 2, 3), e.randn(3), Conv1dParams{Padding: 1}))
	}},
	{"Conv2d", func(e *leakEnv) []*Tensor {
		return one(Conv2d(e.randn(1, 2, 5, 5), e.randn(3, 2, 3, 3), e.randn(3), Conv2dParams{Padding: [2]int{1, 1}}))
	}},
	{"Conv2dAct", func(e *leakEnv) []*Tensor {
		return one(Conv2dAct(e.randn(1, 2, 5, 5), e.randn(3, 2, 3, 3), e.randn(3), Conv2dParams{}, ActReLU))
	}},
	{"ConvTranspose2d", func(e *leakEnv) []*Tensor {
		return one(ConvTranspose2d(e.randn(1, 2, 3, 3), e.randn(2, 3, 3, 3), e.randn(3), Conv2dParams{Stride: [2]int{2, 2}}))
	}},
	{"pools", func(e *leakEnv) []*Tensor {
		x := e.randn(1, 2, 4, 4)
		p := Pool2dParams{Kernel: [2]int{2, 2}}
		y, i := MaxPool2dWithIndices(x, p)
		ay, ai := AdaptiveMaxPool2dWithIndices(x, 3, 3)
		return []*Tensor{MaxPool2d(x, p), AvgPool2d(x, p), AdaptiveAvgPool2d(x, 3, 3), AdaptiveMaxPool2d(x, 2, 2), y, i, ay, ai}
	}},
	{"BatchNorm2d", func(e *leakEnv) []*Tensor {
		rm, rv := e.keep(Zeros(Shape{2}, e.d)), e.keep(Ones(Shape{2}, e.d))
		return one(BatchNorm2d(e.randn(2, 2, 3, 3), e.randn(2), e.randn(2), rm, rv, true, 0.1, 1e-5))
	}},
	{"BatchNorm2d eval", func(e *leakEnv) []*Tensor {
		rm, rv := e.keep(Zeros(Shape{2}, e.d)), e.keep(Ones(Shape{2}, e.d))
		return one(BatchNorm2d(e.randn(2, 2, 3, 3), e.randn(2), e.randn(2), rm, rv, false, 0.1, 1e-5))
	}},
	{"BatchNorm2dReLU", func(e *leakEnv) []*Tensor {
		rm, rv := e.keep(Zeros(Shape{2}, e.d)), e.keep(Ones(Shape{2}, e.d))
		return one(BatchNorm2dReLU(e.randn(2, 2, 3, 3), e.randn(2, 2, 3, 3), e.randn(2), e.randn(2), rm, rv, true, 0.1, 1e-5))
	}},
	{"LayerNorm", func(e *leakEnv) []*Tensor {
		return one(LayerNorm(e.randn(2, 3), []int{3}, e.randn(3), e.randn(3), 1e-5))
	}},
	{"RMSNorm", func(e *leakEnv) []*Tensor { return one(RMSNorm(e.randn(2, 3), []int{3}, e.randn(3), 1e-5)) }},
	{"Normalize", func(e *leakEnv) []*Tensor { return one(Normalize(e.randn(2, 3), 2, 1, 1e-12)) }},
	{"CrossEntropy", func(e *leakEnv) []*Tensor { return one(CrossEntropy(e.randn(2, 3), e.ints([]int64{0, 2}, 2))) }},
	{"NLLLoss", func(e *leakEnv) []*Tensor { return one(NLLLoss(e.randn(2, 3), e.ints([]int64{0, 2}, 2))) }},
	{"MSELoss", func(e *leakEnv) []*Tensor { return one(MSELoss(e.randn(2, 3), e.randn(2, 3))) }},
	{"Embedding", func(e *leakEnv) []*Tensor { return one(Embedding(e.ints([]int64{0, 2, 1}, 3), e.randn(4, 2))) }},
	{"attention", func(e *leakEnv) []*Tensor {
		return one(ScaledDotProductAttention(e.randn(1, 2, 3, 4), e.randn(1, 2, 5, 4), e.randn(1, 2, 5, 4), AttentionOptions{}))
	}},
	{"attention causal", func(e *leakEnv) []*Tensor {
		return one(ScaledDotProductAttention(e.randn(1, 3, 4), e.randn(1, 3, 4), e.randn(1, 3, 4), AttentionOptions{Causal: true}))
	}},
	{"attention masked with dropout", func(e *leakEnv) []*Tensor {
		m := e.bools([]bool{true, false, true, true, true, false}, 2, 3)
		return one(ScaledDotProductAttention(e.randn(2, 2, 4), e.randn(2, 3, 4), e.randn(2, 3, 4), AttentionOptions{Mask: m, DropoutP: 0.3}))
	}},
	{"attention weights", func(e *leakEnv) []*Tensor {
		return two(ScaledDotProductAttentionWeights(e.randn(2, 2, 4), e.randn(2, 3, 4), e.randn(2, 3, 4), AttentionOptions{}))
	}},
	// indexing
	{"Gather", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Gather(1, e.ints([]int64{0, 2, 1, 1}, 2, 2))) }},
	{"IndexSelect", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).IndexSelect(1, e.ints([]int64{2, 0}, 2))) }},
	{"IndexAdd", func(e *leakEnv) []*Tensor {
		return one(e.randn(2, 3).IndexAdd(1, e.ints([]int64{2, 0}, 2), e.randn(2, 2), 0.5))
	}},
	{"Take", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Take(e.ints([]int64{5, 0, 3}, 3))) }},
	{"MaskedSelect", func(e *leakEnv) []*Tensor {
		return one(e.randn(2, 3).MaskedSelect(e.bools([]bool{true, false, true}, 3)))
	}},
	{"MaskedFill", func(e *leakEnv) []*Tensor {
		return one(e.randn(2, 3).MaskedFill(e.bools([]bool{true, false, true}, 3), 7))
	}},
	{"Scatter", func(e *leakEnv) []*Tensor {
		return one(e.randn(2, 3).Scatter(1, e.ints([]int64{2, 0}, 2, 1), e.randn(2, 1)))
	}},
	{"ScatterAdd", func(e *leakEnv) []*Tensor {
		return one(e.randn(2, 3).ScatterAdd(1, e.ints([]int64{2, 2}, 2, 1), e.randn(2, 1)))
	}},
	{"ScatterValue", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).ScatterValue(1, e.ints([]int64{2, 0}, 2, 1), 3)) }},
	{"Diagonal", func(e *leakEnv) []*Tensor { return one(e.randn(3, 4).Diagonal(1, 0, 1)) }},
	// einsum, order statistics, searching and bins
	{"Einsum", func(e *leakEnv) []*Tensor { return one(Einsum("bij,bjk->bik", e.randn(2, 2, 3), e.randn(2, 3, 4))) }},
	{"Einsum diagonal and ellipsis", func(e *leakEnv) []*Tensor { return one(Einsum("...ii,...i->...", e.randn(2, 3, 3), e.randn(3))) }},
	{"Einsum int", func(e *leakEnv) []*Tensor {
		return one(Einsum("ij,jk", e.ints([]int64{1, 2, 3, 4}, 2, 2), e.ints([]int64{1, 2}, 2, 1)))
	}},
	{"Meshgrid", func(e *leakEnv) []*Tensor { return Meshgrid("xy", e.randn(2), e.randn(3)) }},
	{"Median", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Median()) }},
	{"MedianDim", func(e *leakEnv) []*Tensor { return two(e.randn(2, 3).MedianDim(1, false)) }},
	{"NanMedianDim", func(e *leakEnv) []*Tensor { return two(e.randn(2, 3).NanMedianDim(0, true)) }},
	{"Kthvalue", func(e *leakEnv) []*Tensor { return two(e.randn(2, 3).Kthvalue(2, 1, false)) }},
	{"Quantile", func(e *leakEnv) []*Tensor {
		return one(e.randn(2, 3).Quantile(e.keep(FromSlice([]float32{0.2, 0.9}, nil, e.d)), 1, true, QuantileMidpoint))
	}},
	{"NanQuantileAll", func(e *leakEnv) []*Tensor {
		return one(e.randn(2, 3).NanQuantileAll(e.keep(Scalar(0.3, Float32, e.d)), ""))
	}},
	{"Cummax", func(e *leakEnv) []*Tensor { return two(e.randn(2, 3).Cummax(1)) }},
	{"Cummin", func(e *leakEnv) []*Tensor { return two(e.randn(2, 3).Cummin(0)) }},
	{"Logcumsumexp", func(e *leakEnv) []*Tensor { return one(e.randn(2, 5).Logcumsumexp(1)) }},
	{"SearchSorted", func(e *leakEnv) []*Tensor {
		s := e.ints([]int64{3, 1, 2}, 3)
		return one(SearchSorted(s, e.ints([]int64{2, 0}, 2), SearchSortedOptions{Sorter: e.keep(s.ArgSort(0, false))}))
	}},
	{"Bucketize", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Bucketize(e.keep(Arange(-1, 2, 1, e.d)), true)) }},
	{"Bincount", func(e *leakEnv) []*Tensor { return one(e.ints([]int64{0, 2, 2}, 3).Bincount(e.randn(3), 4)) }},
	{"Histc", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Histc(4, 0, 0)) }},
	{"Unique", func(e *leakEnv) []*Tensor {
		v, i, c := e.ints([]int64{2, 1, 2}, 3).Unique(true, true, true)
		return []*Tensor{v, i, c}
	}},
	{"UniqueConsecutive", func(e *leakEnv) []*Tensor {
		v, i, c := e.ints([]int64{2, 2, 1}, 3).UniqueConsecutive(true, true)
		return []*Tensor{v, i, c}
	}},
	{"UniqueDim", func(e *leakEnv) []*Tensor {
		v, i, c := e.ints([]int64{2, 1, 0, 0, 2, 1}, 3, 2).UniqueDim(0, true, true)
		return []*Tensor{v, i, c}
	}},
	{"UniqueConsecutiveDim", func(e *leakEnv) []*Tensor {
		v, i, c := e.randn(2, 3).UniqueConsecutiveDim(1, true, true)
		return []*Tensor{v, i, c}
	}},
	{"BucketizeWith", func(e *leakEnv) []*Tensor {
		return one(e.randn(2, 3).BucketizeWith(e.keep(Arange(-1, 2, 1, e.d)), BucketizeOptions{OutInt32: true}))
	}},
	// rearranging
	{"Flip", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Flip(0, 1)) }},
	{"Roll", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Roll([]int{1, -1}, []int{0, 1})) }},
	{"Roll flat", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Roll([]int{2}, nil)) }},
	{"Pad constant", func(e *leakEnv) []*Tensor { return one(Pad(e.randn(2, 3), []int{1, -1, 0, 2}, PadConstant, 1)) }},
	{"Pad circular", func(e *leakEnv) []*Tensor { return one(Pad(e.randn(1, 2, 3), []int{1, 2}, PadCircular, 0)) }},
	{"Interpolate nearest", func(e *leakEnv) []*Tensor {
		return one(Interpolate(e.randn(1, 2, 3), InterpolateOptions{Size: []int{5}}))
	}},
	{"Interpolate bilinear", func(e *leakEnv) []*Tensor {
		return one(Interpolate(e.randn(1, 1, 2, 3), InterpolateOptions{ScaleFactor: []float64{2}, Mode: InterpBilinear}))
	}},
	{"PixelShuffle", func(e *leakEnv) []*Tensor { return one(PixelShuffle(e.randn(1, 4, 2, 2), 2)) }},
	{"Unfold", func(e *leakEnv) []*Tensor { return one(Unfold(e.randn(1, 2, 3, 3), [2]int{2, 2}, FoldParams{})) }},
	{"Fold", func(e *leakEnv) []*Tensor {
		return one(Fold(e.randn(1, 4, 4), [2]int{3, 3}, [2]int{2, 2}, FoldParams{}))
	}},
	{"Tensor.Unfold", func(e *leakEnv) []*Tensor { return one(e.randn(2, 5).Unfold(1, 2, 1)) }},
	{"Tril", func(e *leakEnv) []*Tensor { return one(e.randn(3, 3).Tril(0)) }},
	{"Triu", func(e *leakEnv) []*Tensor { return one(e.randn(3, 3).Triu(1)) }},
	{"Repeat", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Repeat(2, 1)) }},
	{"Tile", func(e *leakEnv) []*Tensor { return one(e.randn(2, 3).Tile(2)) }},
	{"Cat", func(e *leakEnv) []*Tensor { return one(Cat([]*Tensor{e.randn(2, 3), e.randn(1, 3)}, 0)) }},
	{"Stack", func(e *leakEnv) []*Tensor { return one(Stack([]*Tensor{e.randn(2, 3), e.randn(2, 3)}, 1)) }},
	{"Split", func(e *leakEnv) []*Tensor { return e.randn(4, 3).Split(3, 0) }},
	{"SplitSizes", func(e *leakEnv) []*Tensor { return e.randn(4, 3).SplitSizes([]int{1, 2}, 1) }},
	{"Chunk", func(e *leakEnv) []*Tensor { return e.randn(4, 3).Chunk(2, 0) }},
	{"Unbind", func(e *leakEnv) []*Tensor { return e.randn(2, 3).Unbind(1) }},
	{"views", func(e *leakEnv) []*Tensor {
		x := e.randn(2, 3)
		return []*Tensor{x.Reshape(3, 2), x.View(6), x.Transpose(0, 1), x.T(), x.MT(), x.Permute(1, 0), x.Unsqueeze(0),
			e.keep(x.Unsqueeze(2)).Squeeze(2), x.Flatten(0, 1), e.keep(x.Reshape(6)).Unflatten(0, 2, 3), x.Narrow(1, 1, 2), x.Select(0, 1),
			x.Slice(1, 0, 3, 2), x.Movedim(0, 1), e.keep(x.Unsqueeze(0)).Expand(2, 2, 3), x.Detach(), x.Contiguous(),
			e.keep(x.Transpose(0, 1)).Contiguous(), e.keep(x.Transpose(1, 0)).Reshape(6)}
	}},
	{"casts", func(e *leakEnv) []*Tensor {
		x := e.randn(2, 3)
		return []*Tensor{x.Half(), x.BFloat16(), x.Float(), x.Cast(Float64), x.Long(), x.Clone(), x.To(CPU)}
	}},
	{"likes", func(e *leakEnv) []*Tensor {
		x := e.randn(2, 3)
		return []*Tensor{ZerosLike(x), OnesLike(x), FullLike(x, 2), RandLike(x), RandnLike(x), EmptyLike(x),
			x.NewZeros(Shape{2}), x.NewOnes(Shape{2}), x.NewFull(Shape{2}, 3), x.NewEmpty(Shape{2}), x.NewRandn(Shape{2}),
			x.NewTensor(2.0, nil)}
	}},
	{"in place", func(e *leakEnv) []*Tensor {
		NoGrad(func() {
			x := e.randn(2, 3)
			b := e.randn(3)
			x.AddInPlace(b).SubInPlace(b).MulInPlace(b).DivInPlace(e.pos(3)).AddScalarInPlace(1).MulScalarInPlace(2).
				AddScaledInPlace(b, 0.5).FillInPlace(1).CopyFrom(b)
		})
		return nil
	}},
	{"Checkpoint", func(e *leakEnv) []*Tensor {
		w := e.randn(3, 3)
		return one(Checkpoint(func(x *Tensor) *Tensor {
			h := x.MatMul(w)
			defer h.Release()
			return h.Tanh()
		}, e.randn(2, 3), w))
	}},
	{"CheckpointMulti", func(e *leakEnv) []*Tensor {
		w := e.randn(3)
		return CheckpointMulti(func(xs []*Tensor) []*Tensor {
			return []*Tensor{xs[0].Mul(w), xs[1].Sin()}
		}, []*Tensor{e.randn(2, 3), e.randn(3)}, w)
	}},
	{"Grad", func(e *leakEnv) []*Tensor {
		x := e.randn(2, 3)
		if !x.RequiresGrad() {
			return nil
		}
		y := x.Tanh()
		defer y.Release()
		s := y.Sum()
		defer s.Release()
		return Grad([]*Tensor{s}, []*Tensor{x})
	}},
	{"Autocast", func(e *leakEnv) []*Tensor {
		var outs []*Tensor
		Autocast(BFloat16, func() {
			x, w := e.randn(2, 3), e.randn(4, 3)
			outs = []*Tensor{Linear(x, w, nil), x.MatMul(e.keep(w.T())), x.Softmax(1), x.Atan2(e.keep(w.Narrow(0, 0, 2))), x.Exp(), x.Softplus(1, 20)}
		})
		return outs
	}},
	{"Item and slices", func(e *leakEnv) []*Tensor {
		x := e.randn(2, 3)
		_ = e.keep(x.Narrow(0, 0, 1)).Float32s()
		_ = e.keep(x.Transpose(0, 1)).Float64s()
		_ = e.keep(x.Sum()).Item()
		_ = x.String()
		return nil
	}},
}

// runLeakCase runs one case on e, then, when e.grad, backward from the
// sum of its outputs that require grad, and releases what it received;
// with tidy it does all this inside a Tidy and releases nothing itself.
func runLeakCase(e *leakEnv, tidy bool, run func(e *leakEnv) []*Tensor) {
	if tidy {
		Tidy(func() { runLeakSteps(e, false, run) })
		return
	}
	runLeakSteps(e, true, run)
}

// runLeakSteps is runLeakCase's body; release says whether it releases
// what it received.
func runLeakSteps(e *leakEnv, release bool, run func(e *leakEnv) []*Tensor) {
	outs := run(e)
	if e.grad {
		var loss *Tensor
		for _, o := range outs {
			if !o.RequiresGrad() {
				continue
			}
			s := o.Sum()
			if loss == nil {
				loss = s
				continue
			}
			sum := loss.Add(s)
			loss.Release()
			s.Release()
			loss = sum
		}
		if loss != nil {
			loss.Backward()
			if release {
				loss.Release()
			}
		}
	}
	if !release {
		return
	}
	for _, o := range outs {
		o.Release()
	}
	for _, in := range e.made {
		in.Release()
	}
}

func TestOpsReleaseWhatTheyMake(t *testing.T) {
	for _, d := range []Device{CPU, quiet} {
		settle(d)
		for _, mode := range []struct {
			name       string
			grad, tidy bool
		}{{"forward", false, false}, {"backward", true, false}, {"forward in Tidy", false, true}, {"backward in Tidy", true, true}} {
			for _, tc := range leakCases {
				t.Run(d.String()+"/"+mode.name+"/"+tc.name, func(t *testing.T) {
					base := countsOf(d)
					runLeakCase(&leakEnv{d: d, grad: mode.grad}, mode.tidy, tc.run)
					checkBalanced(t, d, base, false)
				})
			}
		}
	}
}
