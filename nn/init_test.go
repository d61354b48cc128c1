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

func stats(vals []float64) (mean, std, lo, hi float64) {
	var sum, sq float64
	for _, v := range vals {
		sum += v
		sq += v * v
	}
	n := float64(len(vals))
	mean = sum / n
	return mean, math.Sqrt(sq/n - mean*mean), slices.Min(vals), slices.Max(vals)
}

func TestInit(t *testing.T) {
	tests := []struct {
		name    string
		shape   vram.Shape
		init    func(*vram.Tensor, *vram.Generator)
		bound   float64 // uniform: values within ±bound, std bound/sqrt(3)
		std     float64 // normal: standard deviation
		uniform bool
	}{
		// fan_in = 200, fan_out = 100.
		{"kaiming uniform relu", vram.Shape{100, 200}, func(t *vram.Tensor, g *vram.Generator) { nn.KaimingUniform(t, 0, g) },
			math.Sqrt(2) * math.Sqrt(3.0/200), 0, true},
		{"kaiming uniform sqrt5", vram.Shape{100, 200}, func(t *vram.Tensor, g *vram.Generator) { nn.KaimingUniform(t, math.Sqrt(5), g) },
			1 / math.Sqrt(200), 0, true},
		{"kaiming normal", vram.Shape{100, 200}, func(t *vram.Tensor, g *vram.Generator) { nn.KaimingNormal(t, 0, g) },
			0, math.Sqrt(2.0 / 200), false},
		{"xavier uniform", vram.Shape{100, 200}, func(t *vram.Tensor, g *vram.Generator) { nn.XavierUniform(t, 1, g) },
			math.Sqrt(6.0 / 300), 0, true},
		{"xavier normal gain 2", vram.Shape{100, 200}, func(t *vram.Tensor, g *vram.Generator) { nn.XavierNormal(t, 2, g) },
			0, 2 * math.Sqrt(2.0/300), false},
		// A convolution-shaped weight [out=16, in=8, 5, 5]: fan_in = 200,
		// fan_out = 400.
		{"xavier uniform 4-D", vram.Shape{16, 8, 5, 5}, func(t *vram.Tensor, g *vram.Generator) { nn.XavierUniform(t, 1, g) },
			math.Sqrt(6.0 / 600), 0, true},
		{"kaiming normal 4-D", vram.Shape{16, 8, 5, 5}, func(t *vram.Tensor, g *vram.Generator) { nn.KaimingNormal(t, 0, g) },
			0, math.Sqrt(2.0 / 200), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := vram.Zeros(tt.shape, vram.Float64, vram.WithGrad())
			tt.init(p, vram.NewGenerator(11))
			if !p.RequiresGrad() || !p.IsLeaf() {
				t.Fatal("init changed the tensor's autograd status")
			}
			mean, std, lo, hi := stats(p.Float64s())
			want := tt.std
			if tt.uniform {
				want = tt.bound / math.Sqrt(3)
				if lo < -tt.bound || hi > tt.bound || hi < 0.95*tt.bound || lo > -0.95*tt.bound {
					t.Fatalf("values in [%v, %v], want to fill ±%v", lo, hi, tt.bound)
				}
			}
			if math.Abs(mean) > want/10 || math.Abs(std-want) > want/20 {
				t.Fatalf("mean %v, std %v; want 0, %v", mean, std, want)
			}
			// The same seed gives the same values; another seed does not.
			q := vram.Zeros(tt.shape, vram.Float64)
			tt.init(q, vram.NewGenerator(11))
			if !slices.Equal(p.Float64s(), q.Float64s()) {
				t.Fatal("same seed, different values")
			}
			tt.init(q, vram.NewGenerator(12))
			if slices.Equal(p.Float64s(), q.Float64s()) {
				t.Fatal("different seeds, same values")
			}
		})
	}
}

func TestInitInPlace(t *testing.T) {
	memtest.Settle()
	dev := vram.Sim(1)
	l := nn.NewLinear(4, 3, dev, vram.Float32)
	w := l.Weight
	before := vram.MemoryAllocated(dev)
	leaked := vram.Storage(dev).Leaked
	nn.KaimingUniform(l.Weight, 0, nil) // the default generator
	nn.XavierNormal(l.Weight, 1, nil)
	if l.Weight != w || w.Device() != dev || w.DType() != vram.Float32 {
		t.Fatalf("weight replaced or moved: %v", w)
	}
	if after := vram.MemoryAllocated(dev); after != before {
		t.Fatalf("%d bytes live after init, %d before", after, before)
	}
	nn.Release(l)
	memtest.Settle()
	if n := vram.Storage(dev).Leaked - leaked; n != 0 {
		t.Fatalf("%d tensors left to the garbage collector", n)
	}
}

func TestInitErrors(t *testing.T) {
	for _, fn := range []func(*vram.Tensor){
		func(t *vram.Tensor) { nn.KaimingUniform(t, 0, nil) },
		func(t *vram.Tensor) { nn.KaimingNormal(t, 0, nil) },
		func(t *vram.Tensor) { nn.XavierUniform(t, 1, nil) },
		func(t *vram.Tensor) { nn.XavierNormal(t, 1, nil) },
	} {
		if err := vram.Catch(func() { fn(vram.Zeros(vram.Shape{5})) }); !errors.Is(err, vram.ErrShape) {
			t.Errorf("1-D tensor: %v, want ErrShape", err)
		}
		if err := vram.Catch(func() { fn(vram.Zeros(vram.Shape{2, 2}, vram.Int64)) }); !errors.Is(err, vram.ErrDType) {
			t.Errorf("int64 tensor: %v, want ErrDType", err)
		}
		// Zero-element tensors are left alone.
		if err := vram.Catch(func() { fn(vram.Zeros(vram.Shape{0, 3})) }); err != nil {
			t.Errorf("empty tensor: %v", err)
		}
	}
}

// TestNilTensorNamesTheLayer checks that a nil tensor given to an
// initialiser or a layer is a typed error naming it.
func TestNilTensorNamesTheLayer(t *testing.T) {
	tests := []struct {
		op string
		fn func()
	}{
		{"kaiming_uniform", func() { nn.KaimingUniform(nil, 0, nil) }},
		{"kaiming_normal", func() { nn.KaimingNormal(nil, 0, nil) }},
		{"xavier_uniform", func() { nn.XavierUniform(nil, 1, nil) }},
		{"xavier_normal", func() { nn.XavierNormal(nil, 1, nil) }},
		{"dropout", func() { nn.NewDropout(0.5).Forward(nil) }},
		{"linear", func() { nn.NewLinear(2, 3).Forward(nil) }},
		{"relu", func() { nn.NewReLU().Forward(nil) }},
		{"cross_entropy", func() { nn.CrossEntropyLoss(nil, nil) }},
	}
	for _, tc := range tests {
		err := vram.Catch(tc.fn)
		var e *vram.Error
		if !errors.As(err, &e) || e.Op != tc.op || !errors.Is(err, vram.ErrArgument) {
			t.Errorf("%s: %v, want a vram.ErrArgument error of op %q", tc.op, err, tc.op)
		}
	}
}
