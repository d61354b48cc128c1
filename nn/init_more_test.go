package nn_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// initDevices are the devices every initialiser is checked on.
var initDevices = []vram.Device{vram.CPU, vram.Sim(0)}

func TestCalculateGain(t *testing.T) {
	tests := []struct {
		name  string
		param []float64
		want  float64
	}{
		{"linear", nil, 1},
		{"conv1d", nil, 1},
		{"conv2d", nil, 1},
		{"conv3d", nil, 1},
		{"conv_transpose1d", nil, 1},
		{"conv_transpose2d", nil, 1},
		{"conv_transpose3d", nil, 1},
		{"sigmoid", nil, 1},
		{"tanh", nil, 5.0 / 3},
		{"relu", nil, math.Sqrt2},
		{"selu", nil, 0.75},
		{"leaky_relu", nil, math.Sqrt(2 / (1 + 0.01*0.01))},
		{"leaky_relu", []float64{0.2}, math.Sqrt(2 / 1.04)},
		{"leaky_relu", []float64{0}, math.Sqrt2},
		{"tanh", []float64{7}, 5.0 / 3}, // ignored, as in PyTorch
	}
	for _, tt := range tests {
		if got := nn.CalculateGain(tt.name, tt.param...); math.Abs(got-tt.want) > 1e-15 {
			t.Errorf("%s %v: %v, want %v", tt.name, tt.param, got, tt.want)
		}
	}
	for _, bad := range []func(){
		func() { nn.CalculateGain("swish") },
		func() { nn.CalculateGain("") },
		func() { nn.CalculateGain("identity") }, // not one of PyTorch's names
		func() { nn.CalculateGain("leaky_relu", math.NaN()) },
		func() { nn.CalculateGain("leaky_relu", 0.1, 0.2) },
	} {
		if err := vram.Catch(bad); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("%v, want ErrArgument", err)
		}
	}
}

// checkStats fails t unless vals have the given mean and standard deviation
// within tol·std (and within tol for a zero std).
func checkStats(t *testing.T, vals []float64, mean, std, tol float64) {
	t.Helper()
	m, s, _, _ := stats(vals)
	scale := max(std, 1e-3)
	if math.Abs(m-mean) > tol*scale || math.Abs(s-std) > tol*scale {
		t.Fatalf("mean %v, std %v; want %v, %v", m, s, mean, std)
	}
}

func TestKaimingWith(t *testing.T) {
	// A convolution weight [out=16, in=8, 5, 5]: fan_in = 200, fan_out = 400.
	shape := vram.Shape{16, 8, 5, 5}
	tests := []struct {
		name    string
		opts    nn.KaimingOptions
		std     float64
		uniform bool
	}{
		{"default", nn.KaimingOptions{}, math.Sqrt(2.0 / 200), false},
		{"fan out relu", nn.KaimingOptions{Mode: nn.FanOut, Nonlinearity: "relu"}, math.Sqrt(2.0 / 400), false},
		{"fan out leaky", nn.KaimingOptions{A: 0.2, Mode: nn.FanOut}, math.Sqrt(2/1.04) / 20, true},
		{"linear", nn.KaimingOptions{Nonlinearity: "linear"}, 1 / math.Sqrt(200), true},
		{"tanh fan out", nn.KaimingOptions{Mode: nn.FanOut, Nonlinearity: "tanh"}, 5.0 / 3 / 20, false},
		{"a ignored by selu", nn.KaimingOptions{A: 5, Nonlinearity: "selu"}, 0.75 / math.Sqrt(200), true},
	}
	for _, dev := range initDevices {
		for _, tt := range tests {
			t.Run(dev.String()+"/"+tt.name, func(t *testing.T) {
				p := vram.Zeros(shape, vram.Float64, dev, vram.WithGrad())
				if tt.uniform {
					nn.KaimingUniformWith(p, tt.opts, vram.NewGenerator(3))
				} else {
					nn.KaimingNormalWith(p, tt.opts, vram.NewGenerator(3))
				}
				vals := p.Float64s()
				checkStats(t, vals, 0, tt.std, 0.06)
				if bound := math.Sqrt(3) * tt.std; tt.uniform && (slices.Max(vals) > bound || slices.Min(vals) < -bound) {
					t.Fatalf("values outside ±%v", bound)
				}
			})
		}
	}
	// The zero options are KaimingUniform's and KaimingNormal's with a = 0.
	for _, pair := range [][2]func(*vram.Tensor, *vram.Generator){
		{func(p *vram.Tensor, g *vram.Generator) { nn.KaimingUniform(p, 0, g) },
			func(p *vram.Tensor, g *vram.Generator) { nn.KaimingUniformWith(p, nn.KaimingOptions{}, g) }},
		{func(p *vram.Tensor, g *vram.Generator) { nn.KaimingNormal(p, 0, g) },
			func(p *vram.Tensor, g *vram.Generator) { nn.KaimingNormalWith(p, nn.KaimingOptions{}, g) }},
	} {
		a, b := vram.Zeros(vram.Shape{4, 6}), vram.Zeros(vram.Shape{4, 6})
		pair[0](a, vram.NewGenerator(5))
		pair[1](b, vram.NewGenerator(5))
		if !slices.Equal(a.Float64s(), b.Float64s()) {
			t.Fatal("zero KaimingOptions differ from a = 0")
		}
	}
}

// normPDF and normCDF are the standard normal density and distribution.
func normPDF(x float64) float64 { return math.Exp(-x*x/2) / math.Sqrt(2*math.Pi) }
func normCDF(x float64) float64 { return (1 + math.Erf(x/math.Sqrt2)) / 2 }

// truncMoments returns the mean and standard deviation of the normal
// distribution (mu, sigma) truncated to [a, b].
func truncMoments(mu, sigma, a, b float64) (mean, std float64) {
	al, be := (a-mu)/sigma, (b-mu)/sigma
	z := normCDF(be) - normCDF(al)
	d := (normPDF(al) - normPDF(be)) / z
	v := 1 + (al*normPDF(al)-be*normPDF(be))/z - d*d
	return mu + sigma*d, sigma * math.Sqrt(v)
}

func TestRandomInits(t *testing.T) {
	m1, s1 := truncMoments(0, 1, -2, 2)
	m2, s2 := truncMoments(1, 2, 0, 3)
	m3, s3 := truncMoments(0, 0.02, -0.04, 0.04)
	tests := []struct {
		name      string
		init      func(*vram.Tensor, *vram.Generator)
		mean, std float64
		lo, hi    float64 // every value within [lo, hi]
	}{
		{"uniform", func(p *vram.Tensor, g *vram.Generator) { nn.Uniform(p, -3, 5, g) }, 1, 8 / math.Sqrt(12), -3, 5},
		{"uniform point", func(p *vram.Tensor, g *vram.Generator) { nn.Uniform(p, 2, 2, g) }, 2, 0, 2, 2},
		{"normal", func(p *vram.Tensor, g *vram.Generator) { nn.Normal(p, -1, 0.5, g) }, -1, 0.5, -10, 10},
		{"normal zero std", func(p *vram.Tensor, g *vram.Generator) { nn.Normal(p, 4, 0, g) }, 4, 0, 4, 4},
		{"trunc normal", func(p *vram.Tensor, g *vram.Generator) { nn.TruncNormal(p, 0, 1, -2, 2, g) }, m1, s1, -2, 2},
		{"trunc normal shifted", func(p *vram.Tensor, g *vram.Generator) { nn.TruncNormal(p, 1, 2, 0, 3, g) }, m2, s2, 0, 3},
		{"trunc normal vit", func(p *vram.Tensor, g *vram.Generator) { nn.TruncNormal(p, 0, 0.02, -0.04, 0.04, g) }, m3, s3, -0.04, 0.04},
		{"trunc normal far", func(p *vram.Tensor, g *vram.Generator) { nn.TruncNormal(p, 0, 1, 50, 51, g) }, 50, 0, 50, 51},
		{"trunc normal zero std", func(p *vram.Tensor, g *vram.Generator) { nn.TruncNormal(p, 5, 0, -1, 1, g) }, 1, 0, 1, 1},
	}
	for _, dev := range initDevices {
		for _, dt := range []vram.DType{vram.Float32, vram.Float64} {
			for _, tt := range tests {
				t.Run(dev.String()+"/"+dt.String()+"/"+tt.name, func(t *testing.T) {
					p := vram.Zeros(vram.Shape{200, 100}, dt, dev, vram.WithGrad())
					tt.init(p, vram.NewGenerator(9))
					if !p.RequiresGrad() || !p.IsLeaf() || p.Device() != dev || p.DType() != dt {
						t.Fatal("init changed the tensor's autograd status, device or dtype")
					}
					vals := p.Float64s()
					if lo, hi := slices.Min(vals), slices.Max(vals); lo < tt.lo-1e-6 || hi > tt.hi+1e-6 {
						t.Fatalf("values in [%v, %v], want within [%v, %v]", lo, hi, tt.lo, tt.hi)
					}
					if tt.name == "trunc normal far" {
						return // all near 50
					}
					checkStats(t, vals, tt.mean, tt.std, 0.03)
					q := vram.Zeros(vram.Shape{200, 100}, dt, dev)
					tt.init(q, vram.NewGenerator(9))
					if !slices.Equal(vals, q.Float64s()) {
						t.Fatal("same seed, different values")
					}
				})
			}
		}
	}
}

func TestDeterministicInits(t *testing.T) {
	tests := []struct {
		name  string
		shape vram.Shape
		dtype vram.DType
		init  func(*vram.Tensor)
		want  []float64
	}{
		{"constant", vram.Shape{2, 2}, vram.Float32, func(p *vram.Tensor) { nn.Constant(p, 0.5) }, []float64{0.5, 0.5, 0.5, 0.5}},
		{"constant int", vram.Shape{3}, vram.Int64, func(p *vram.Tensor) { nn.Constant(p, -7) }, []float64{-7, -7, -7}},
		{"ones", vram.Shape{3}, vram.Float64, nn.Ones, []float64{1, 1, 1}},
		{"zeros", vram.Shape{1, 3}, vram.BFloat16, nn.Zeros, []float64{0, 0, 0}},
		{"eye wide", vram.Shape{2, 3}, vram.Float32, nn.Eye, []float64{1, 0, 0, 0, 1, 0}},
		{"eye tall", vram.Shape{3, 2}, vram.Float64, nn.Eye, []float64{1, 0, 0, 1, 0, 0}},
		{"eye int", vram.Shape{2, 2}, vram.Int32, nn.Eye, []float64{1, 0, 0, 1}},
		// [out=3, in=2, k=3]: out channels 0 and 1 pass in channels 0
		// and 1 through at the centre tap; out channel 2 is zero.
		{"dirac 1-D", vram.Shape{3, 2, 3}, vram.Float32, func(p *vram.Tensor) { nn.Dirac(p, 1) },
			[]float64{0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}},
		// [out=4, in=1, k=2]: two groups of two, each passing in channel
		// 0 through at tap 1 (2/2).
		{"dirac groups", vram.Shape{4, 1, 2}, vram.Float32, func(p *vram.Tensor) { nn.Dirac(p, 2) },
			[]float64{0, 1, 0, 0, 0, 1, 0, 0}},
		// [out=2, in=2, 3, 2]: centre (1, 1).
		{"dirac 2-D", vram.Shape{2, 2, 3, 2}, vram.Float64, func(p *vram.Tensor) { nn.Dirac(p, 1) },
			[]float64{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0}},
		// Tensors without elements have nothing to fill.
		{"dirac empty kernel", vram.Shape{2, 3, 0}, vram.Float32, func(p *vram.Tensor) { nn.Dirac(p, 1) }, nil},
		{"dirac no in channels", vram.Shape{2, 0, 3}, vram.Float32, func(p *vram.Tensor) { nn.Dirac(p, 2) }, nil},
		{"dirac no out channels", vram.Shape{0, 2, 3, 3}, vram.Float32, func(p *vram.Tensor) { nn.Dirac(p, 1) }, nil},
	}
	for _, dev := range initDevices {
		for _, tt := range tests {
			t.Run(dev.String()+"/"+tt.name, func(t *testing.T) {
				opts := []vram.Option{tt.dtype, dev}
				if tt.dtype.IsFloat() {
					opts = append(opts, vram.WithGrad())
				}
				p := vram.Full(tt.shape, 3, opts...)
				tt.init(p)
				if got := p.Float64s(); !slices.Equal(got, tt.want) {
					t.Fatalf("%v, want %v", got, tt.want)
				}
				if p.DType() != tt.dtype || p.Device() != dev || p.RequiresGrad() != tt.dtype.IsFloat() {
					t.Fatal("init changed the tensor's dtype, device or autograd status")
				}
			})
		}
	}
	// A convolution with a Dirac weight passes its input through.
	conv := nn.NewConv2d(2, 2, 3, nn.ConvOptions{Padding: 1})
	nn.Dirac(conv.Weight, 1)
	nn.Zeros(conv.Bias)
	x := vram.Randn(vram.Shape{1, 2, 4, 4}, vram.WithGenerator(vram.NewGenerator(1)))
	if y := conv.Forward(x); !slices.Equal(y.Float64s(), x.Float64s()) {
		t.Fatal("a Dirac convolution changed its input")
	}
}

func TestOrthogonal(t *testing.T) {
	tests := []struct {
		shape vram.Shape
		gain  float64
	}{
		{vram.Shape{5, 5}, 1},
		{vram.Shape{3, 7}, 2},              // orthonormal rows
		{vram.Shape{7, 3}, 1},              // orthonormal columns
		{vram.Shape{4, 2, 3, 3}, 1.5},      // a [4, 18] matrix
		{vram.Shape{20, 2, 2}, math.Sqrt2}, // a [20, 4] matrix
		{vram.Shape{1, 6}, 1},
	}
	for _, dev := range initDevices {
		for _, tt := range tests {
			t.Run(dev.String()+"/"+tt.shape.String(), func(t *testing.T) {
				p := vram.Zeros(tt.shape, vram.Float64, dev, vram.WithGrad())
				nn.Orthogonal(p, tt.gain, vram.NewGenerator(4))
				rows := tt.shape[0]
				cols := p.NumElements() / rows
				a := p.Float64s()
				// The Gram matrix of the shorter side is gain² I.
				n, m := rows, cols
				el := func(i, k int) float64 { return a[i*cols+k] }
				if rows > cols {
					n, m = cols, rows
					el = func(j, k int) float64 { return a[k*cols+j] }
				}
				for i := range n {
					for j := range n {
						var dot float64
						for k := range m {
							dot += el(i, k) * el(j, k)
						}
						want := 0.0
						if i == j {
							want = tt.gain * tt.gain
						}
						if math.Abs(dot-want) > 1e-12 {
							t.Fatalf("gram[%d][%d] = %v, want %v", i, j, dot, want)
						}
					}
				}
				q := vram.Zeros(tt.shape, vram.Float64, dev)
				nn.Orthogonal(q, tt.gain, vram.NewGenerator(4))
				if !slices.Equal(a, q.Float64s()) {
					t.Fatal("same seed, different values")
				}
			})
		}
	}
	// float32 on the simulated device: orthogonal to float32 precision.
	p := vram.Zeros(vram.Shape{8, 8}, vram.Sim(0))
	nn.Orthogonal(p, 1, nil)
	a := p.Float64s()
	for i := range 8 {
		var dot float64
		for k := range 8 {
			dot += a[i*8+k] * a[i*8+k]
		}
		if math.Abs(dot-1) > 1e-5 {
			t.Fatalf("row %d has norm² %v", i, dot)
		}
	}
}

func TestSparse(t *testing.T) {
	for _, dev := range initDevices {
		t.Run(dev.String(), func(t *testing.T) {
			const rows, cols = 100, 300
			p := vram.Zeros(vram.Shape{rows, cols}, vram.Float64, dev, vram.WithGrad())
			nn.Sparse(p, 0.25, 0.01, vram.NewGenerator(8))
			a := p.Float64s()
			var nonzero []float64
			for j := range cols {
				zeros := 0
				for i := range rows {
					if v := a[i*cols+j]; v == 0 {
						zeros++
					} else {
						nonzero = append(nonzero, v)
					}
				}
				if zeros != 25 {
					t.Fatalf("column %d has %d zeros, want 25", j, zeros)
				}
			}
			checkStats(t, nonzero, 0, 0.01, 0.05)
			// The zeros of different columns fall on different rows.
			var same int
			for i := range rows {
				if (a[i*cols] == 0) == (a[i*cols+1] == 0) {
					same++
				}
			}
			if same == rows {
				t.Fatal("columns 0 and 1 have the same zero rows")
			}
			// ceil(sparsity·rows) zeros per column: 0.01·10 → 1.
			q := vram.Zeros(vram.Shape{10, 4}, dev)
			nn.Sparse(q, 0.01, 1, nil)
			zeros := 0
			for _, v := range q.Float64s() {
				if v == 0 {
					zeros++
				}
			}
			if zeros != 4 {
				t.Fatalf("%d zeros, want one a column", zeros)
			}
		})
	}
}

// TestInitRefuses checks that bad arguments are typed errors that leave
// the tensor as it was.
func TestInitRefuses(t *testing.T) {
	tests := []struct {
		name  string
		shape vram.Shape
		dtype vram.DType
		init  func(*vram.Tensor)
		kind  error
	}{
		{"uniform a > b", vram.Shape{3}, vram.Float32, func(p *vram.Tensor) { nn.Uniform(p, 1, 0, nil) }, vram.ErrArgument},
		{"uniform NaN", vram.Shape{3}, vram.Float32, func(p *vram.Tensor) { nn.Uniform(p, math.NaN(), 0, nil) }, vram.ErrArgument},
		{"uniform int", vram.Shape{3}, vram.Int64, func(p *vram.Tensor) { nn.Uniform(p, 0, 1, nil) }, vram.ErrDType},
		{"normal negative std", vram.Shape{3}, vram.Float32, func(p *vram.Tensor) { nn.Normal(p, 0, -1, nil) }, vram.ErrArgument},
		{"normal infinite mean", vram.Shape{3}, vram.Float32, func(p *vram.Tensor) { nn.Normal(p, math.Inf(1), 1, nil) }, vram.ErrArgument},
		{"normal int", vram.Shape{3}, vram.Int32, func(p *vram.Tensor) { nn.Normal(p, 0, 1, nil) }, vram.ErrDType},
		{"trunc normal a = b", vram.Shape{3}, vram.Float32, func(p *vram.Tensor) { nn.TruncNormal(p, 0, 1, 1, 1, nil) }, vram.ErrArgument},
		{"trunc normal negative std", vram.Shape{3}, vram.Float32, func(p *vram.Tensor) { nn.TruncNormal(p, 0, -1, -2, 2, nil) }, vram.ErrArgument},
		{"trunc normal infinite bound", vram.Shape{3}, vram.Float32, func(p *vram.Tensor) { nn.TruncNormal(p, 0, 1, -2, math.Inf(1), nil) }, vram.ErrArgument},
		{"constant overflow", vram.Shape{3}, vram.Float16, func(p *vram.Tensor) { nn.Constant(p, 1e6) }, vram.ErrArgument},
		{"eye 1-D", vram.Shape{3}, vram.Float32, nn.Eye, vram.ErrShape},
		{"eye 3-D", vram.Shape{1, 3, 1}, vram.Float32, nn.Eye, vram.ErrShape},
		{"dirac 2-D", vram.Shape{3, 1}, vram.Float32, func(p *vram.Tensor) { nn.Dirac(p, 1) }, vram.ErrShape},
		{"dirac 6-D", vram.Shape{1, 1, 1, 1, 1, 3}, vram.Float32, func(p *vram.Tensor) { nn.Dirac(p, 1) }, vram.ErrShape},
		{"dirac groups do not divide", vram.Shape{3, 1, 1}, vram.Float32, func(p *vram.Tensor) { nn.Dirac(p, 2) }, vram.ErrShape},
		{"dirac zero groups", vram.Shape{3, 1, 1}, vram.Float32, func(p *vram.Tensor) { nn.Dirac(p, 0) }, vram.ErrArgument},
		{"orthogonal 1-D", vram.Shape{3}, vram.Float32, func(p *vram.Tensor) { nn.Orthogonal(p, 1, nil) }, vram.ErrShape},
		{"orthogonal NaN gain", vram.Shape{3, 1}, vram.Float32, func(p *vram.Tensor) { nn.Orthogonal(p, math.NaN(), nil) }, vram.ErrArgument},
		{"orthogonal int", vram.Shape{3, 1}, vram.Int64, func(p *vram.Tensor) { nn.Orthogonal(p, 1, nil) }, vram.ErrDType},
		{"sparse 3-D", vram.Shape{3, 1, 1}, vram.Float32, func(p *vram.Tensor) { nn.Sparse(p, 0.1, 0.01, nil) }, vram.ErrShape},
		{"sparse above 1", vram.Shape{3, 1}, vram.Float32, func(p *vram.Tensor) { nn.Sparse(p, 1.5, 0.01, nil) }, vram.ErrArgument},
		{"sparse negative std", vram.Shape{3, 1}, vram.Float32, func(p *vram.Tensor) { nn.Sparse(p, 0.5, -1, nil) }, vram.ErrArgument},
		{"kaiming bad mode", vram.Shape{3, 1}, vram.Float32, func(p *vram.Tensor) { nn.KaimingNormalWith(p, nn.KaimingOptions{Mode: 7}, nil) }, vram.ErrArgument},
		{"kaiming bad nonlinearity", vram.Shape{3, 1}, vram.Float32,
			func(p *vram.Tensor) { nn.KaimingUniformWith(p, nn.KaimingOptions{Nonlinearity: "gelu"}, nil) }, vram.ErrArgument},
		// These used to fill the tensor with NaN or with values of the
		// wrong sign without a word.
		{"kaiming NaN a", vram.Shape{3, 2}, vram.Float32, func(p *vram.Tensor) { nn.KaimingUniform(p, math.NaN(), nil) }, vram.ErrArgument},
		{"kaiming normal infinite a", vram.Shape{3, 2}, vram.Float32, func(p *vram.Tensor) { nn.KaimingNormal(p, math.Inf(1), nil) }, vram.ErrArgument},
		{"xavier NaN gain", vram.Shape{3, 2}, vram.Float32, func(p *vram.Tensor) { nn.XavierUniform(p, math.NaN(), nil) }, vram.ErrArgument},
		{"xavier negative gain", vram.Shape{3, 2}, vram.Float32, func(p *vram.Tensor) { nn.XavierNormal(p, -1, nil) }, vram.ErrArgument},
		{"xavier infinite gain", vram.Shape{3, 2}, vram.Float64, func(p *vram.Tensor) { nn.XavierUniform(p, math.Inf(1), nil) }, vram.ErrArgument},
		{"kaiming 1-D", vram.Shape{3}, vram.Float32, func(p *vram.Tensor) { nn.KaimingUniformWith(p, nn.KaimingOptions{}, nil) }, vram.ErrShape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := vram.Full(tt.shape, 3, tt.dtype)
			if err := vram.Catch(func() { tt.init(p) }); !errors.Is(err, tt.kind) {
				t.Fatalf("%v, want %v", err, tt.kind)
			}
			for _, v := range p.Float64s() {
				if v != 3 {
					t.Fatalf("the tensor changed: %v", p.Float64s())
				}
			}
		})
	}
	// Nil tensors name the initialiser; empty tensors are left alone.
	for _, fn := range []func(*vram.Tensor){
		func(p *vram.Tensor) { nn.Uniform(p, 0, 1, nil) },
		func(p *vram.Tensor) { nn.Normal(p, 0, 1, nil) },
		func(p *vram.Tensor) { nn.TruncNormal(p, 0, 1, -2, 2, nil) },
		func(p *vram.Tensor) { nn.Constant(p, 1) },
		nn.Ones, nn.Zeros, nn.Eye,
		func(p *vram.Tensor) { nn.Orthogonal(p, 1, nil) },
		func(p *vram.Tensor) { nn.Sparse(p, 0.5, 1, nil) },
		func(p *vram.Tensor) { nn.KaimingNormalWith(p, nn.KaimingOptions{}, nil) },
	} {
		if err := vram.Catch(func() { fn(nil) }); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("nil tensor: %v, want ErrArgument", err)
		}
		if err := vram.Catch(func() { fn(vram.Zeros(vram.Shape{0, 3})) }); err != nil {
			t.Errorf("empty tensor: %v", err)
		}
	}
	if err := vram.Catch(func() { nn.Dirac(vram.Zeros(vram.Shape{0, 3, 3}), 1) }); err != nil {
		t.Errorf("empty Dirac: %v", err)
	}
}

// TestOrthogonalIsQ checks PyTorch's convention: the result is the Q of
// the QR decomposition of the normal matrix drawn, with R's diagonal
// positive, so R = Qᵀ·A is upper triangular with a positive diagonal.
func TestOrthogonalIsQ(t *testing.T) {
	const m, n = 7, 3
	p := vram.Zeros(vram.Shape{m, n}, vram.Float64)
	nn.Orthogonal(p, 1, vram.NewGenerator(6))
	q := p.Float64s()
	a := vram.Randn(vram.Shape{m, n}, vram.Float64, vram.WithGenerator(vram.NewGenerator(6))).Float64s()
	for i := range n {
		for j := range n {
			var r float64
			for k := range m {
				r += q[k*n+i] * a[k*n+j]
			}
			if i > j && math.Abs(r) > 1e-12 || i == j && r <= 0 {
				t.Fatalf("R[%d][%d] = %v", i, j, r)
			}
		}
	}
}

// TestInitsLeaveNothing checks that every initialiser works in place under
// no-grad and leaves no temporaries on the device.
func TestInitsLeaveNothing(t *testing.T) {
	dev := vram.Sim(1)
	p := vram.Zeros(vram.Shape{6, 4, 3}, dev, vram.WithGrad())
	q := vram.Zeros(vram.Shape{6, 4}, dev, vram.WithGrad())
	memtest.Settle(dev)
	before := vram.MemoryAllocated(dev)
	nn.Uniform(p, -1, 1, nil)
	nn.Normal(p, 0, 1, nil)
	nn.TruncNormal(p, 0, 1, -2, 2, nil)
	nn.Constant(p, 2)
	nn.Ones(p)
	nn.Zeros(p)
	nn.Dirac(p, 2)
	nn.Orthogonal(p, 1, nil)
	nn.KaimingUniformWith(p, nn.KaimingOptions{Mode: nn.FanOut}, nil)
	nn.Eye(q)
	nn.Sparse(q, 0.5, 1, nil)
	if after := vram.MemoryAllocated(dev); after != before {
		t.Fatalf("%d bytes live after init, %d before", after, before)
	}
	if p.GradFn() != "" || q.GradFn() != "" || !p.RequiresGrad() {
		t.Fatal("an initialiser was recorded by autograd")
	}
}
