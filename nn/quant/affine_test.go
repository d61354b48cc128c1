package quant_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn/quant"
)

// refQuantize is torch.quantize_per_tensor(x, scale, zp, torch.qint8) for
// one float32 value, as ATen's quantize_val computes it: x times the
// float32 reciprocal of the float32 scale, in float32, rounded half to
// even, plus the zero point, clamped to the int8 range.
func refQuantize(x float64, scale float64, zp int) float64 {
	inv := 1 / float32(scale)
	v := float64(float32(x) * inv)
	return min(max(math.RoundToEven(v)+float64(zp), quant.QMin), quant.QMax)
}

// refDequantize is torch.dequantize of one int8 value q of a per-tensor
// quantized tensor: (q - zp) times the float32 scale, in float32.
func refDequantize(q float64, scale float64, zp int) float64 {
	return float64(float32(q-float64(zp)) * float32(scale))
}

var devices = []vram.Device{vram.CPU, vram.Sim(0)}

func TestPerTensor(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name  string
		x     []float64
		dt    vram.DType
		scale float64
		zp    int
		want  []float64 // nil: refQuantize of each x
	}{
		{"ties to even", []float64{0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49, 0.51}, vram.Float32, 1, 0, []float64{0, 2, 2, 0, -2, -2, 0, 1}},
		{"ties with a scale", []float64{0.05, 0.15, 0.25, -0.35}, vram.Float32, 0.1, 0, nil},
		{"clamp", []float64{1e30, -1e30, inf, -inf, 127.6, -128.6, 300}, vram.Float32, 1, 0, []float64{127, -128, 127, -128, 127, -128, 127}},
		{"zero point shifts then clamps", []float64{0, 1, 120, -140, 116.9}, vram.Float32, 1, 10, []float64{10, 11, 127, -128, 127}},
		{"negative zero point", []float64{0, -1, 200, -20}, vram.Float32, 2, -120, []float64{-120, -120, -20, -128}},
		{"small scale", []float64{1e-37, 3e-37, 1}, vram.Float32, 1e-37, 0, []float64{1, 3, 127}},
		// x·(1/scale) is 127.5 in float32 where x/scale is 127.49999:
		// PyTorch multiplies by the reciprocal (fbgemm's QuantUtils.h
		// gives these numbers), so 118 and not 117.
		{"reciprocal, not division", []float64{0.273939937}, vram.Float32, 0.00214854861, -10, []float64{118}},
		{"reciprocal, not division, rounding down", []float64{0.273939937}, vram.Float32, 0.001271183, -100, []float64{115}},
		// (q-zp)·scale is -2.500031 in float32 and -2.5000308 when
		// computed in float64 and rounded once.
		{"dequantized in float32", []float64{-2.500031}, vram.Float32, 0.0100001234567, 122, []float64{-128}},
		{"float16", []float64{0.1, -0.2, 0.3, 65504}, vram.Float16, 0.01, 3, nil},
		{"bfloat16", []float64{0.1, -0.2, 0.3, 1e30}, vram.BFloat16, 0.01, -3, nil},
		{"float64 computes in float64", []float64{0.3}, vram.Float64, 0.1, 0, []float64{3}},
		{"constant", []float64{3, 3, 3}, vram.Float32, 3.0 / 127.5, 0, nil},
		{"empty", []float64{}, vram.Float32, 1, 0, []float64{}},
	}
	for _, tt := range tests {
		for _, d := range devices {
			t.Run(tt.name+"/"+d.String(), func(t *testing.T) {
				x := vram.FromSlice(tt.x, vram.Shape{len(tt.x)}, d, tt.dt)
				defer x.Release()
				want := tt.want
				if want == nil {
					for _, v := range x.Float64s() {
						want = append(want, refQuantize(v, tt.scale, tt.zp))
					}
				}
				q, err := quant.PerTensor(x, tt.scale, tt.zp)
				if err != nil {
					t.Fatal(err)
				}
				defer q.Release()
				if q.DType() != vram.Int8 || q.Device() != d || !slices.Equal(q.Shape(), x.Shape()) {
					t.Fatalf("got %v %s on %s, want %v int8 on %s", q.Shape(), q.DType(), q.Device(), x.Shape(), d)
				}
				if got := q.Float64s(); !slices.Equal(got, want) {
					t.Fatalf("quantized %v to %v, want %v", tt.x, got, want)
				}
				back, err := quant.DequantizePerTensor(q, tt.scale, tt.zp)
				if err != nil {
					t.Fatal(err)
				}
				defer back.Release()
				for i, v := range back.Float64s() {
					if w := refDequantize(want[i], tt.scale, tt.zp); v != w || back.DType() != vram.Float32 {
						t.Fatalf("dequantized element %d to %v %s, want %v float32", i, v, back.DType(), w)
					}
				}
			})
		}
	}
}

// TestRoundTrip checks that values inside the range of Params come back
// within half a scale, on both schemes.
func TestRoundTrip(t *testing.T) {
	for _, sym := range []bool{false, true} {
		for _, d := range devices {
			x := vram.Randn(vram.Shape{4, 50}, vram.WithGenerator(vram.NewGenerator(3)), d)
			vals := x.Float64s()
			scale, zp, err := quant.Params(slices.Min(vals), slices.Max(vals), sym)
			if err != nil {
				t.Fatal(err)
			}
			q, err := quant.PerTensor(x, scale, zp)
			if err != nil {
				t.Fatal(err)
			}
			back, err := quant.DequantizePerTensor(q, scale, zp)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range back.Float64s() {
				if math.Abs(v-vals[i]) > scale/2*(1+1e-6) {
					t.Fatalf("symmetric %v on %s: %v came back as %v, scale %v", sym, d, vals[i], v, scale)
				}
			}
			x.Release()
			q.Release()
			back.Release()
		}
	}
}

// TestParams checks Params against MinMaxObserver's _calculate_qparams
// for torch.qint8, which computes in float32: the range's ends are the
// observed float32 values, and the scale, the quotient lo/scale and its
// rounding are float32 operations.
func TestParams(t *testing.T) {
	const eps = 0x1p-23
	f32 := func(v float32) float64 { return float64(v) }
	three, two, four := float32(3), float32(2), float32(4)
	tests := []struct {
		name      string
		lo, hi    float64
		symmetric bool
		scale     float64
		zp        int
		err       bool
	}{
		{"affine", -1, 2, false, f32(three / 255), -43, false},
		{"symmetric", -1, 2, true, f32(two / 127.5), 0, false},
		{"symmetric, negative side larger", -4, 2, true, f32(four / 127.5), 0, false},
		{"positive range holds 0", 1, 3, false, f32(three / 255), -128, false},
		{"negative range holds 0", -3, -1, false, f32(three / 255), 127, false},
		// -1/scale is -127.49999 in float32 (-127.5 in float64, which
		// rounds to even, -128, and gives zero point 0).
		{"quotient in float32", -1, 1, false, f32(two / 255), -1, false},
		{"quotient in float32, other side", -0.2, 1, false, f32((float32(1) - float32(-0.2)) / 255), -86, false},
		// 0.6f + 0.3f rounds in float32 before the division.
		{"range in float32", -0.3, 0.6, false, f32((float32(0.6) - float32(-0.3)) / 255), -43, false},
		{"zeros", 0, 0, false, eps, -128, false},
		{"zeros, symmetric", 0, 0, true, eps, 0, false},
		{"tiny", -1e-12, 1e-12, false, eps, -128, false},
		{"NaN", math.NaN(), 1, false, 0, 0, true},
		{"Inf", 0, math.Inf(1), false, 0, 0, true},
		{"reversed", 2, 1, false, 0, 0, true},
		{"beyond float32", -1e39, 1, false, 0, 0, true},
		{"range beyond float32", -3e38, 3e38, false, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scale, zp, err := quant.Params(tt.lo, tt.hi, tt.symmetric)
			if tt.err {
				if !errors.Is(err, vram.ErrArgument) {
					t.Fatalf("got %v, %d, %v; want an error matching vram.ErrArgument", scale, zp, err)
				}
				return
			}
			if err != nil || scale != tt.scale || zp != tt.zp {
				t.Fatalf("got %v, %d, %v; want %v, %d", scale, zp, err, tt.scale, tt.zp)
			}
		})
	}
}

func TestPerChannel(t *testing.T) {
	// x [2, 3]: channel scales and zero points along each axis.
	xv := []float64{0.5, -1, 2.5, 100, -3, 0.25}
	tests := []struct {
		name   string
		axis   int
		scales []float64
		zps    []float64
	}{
		{"axis 0", 0, []float64{0.5, 2}, []float64{0, -3}},
		{"axis 1", 1, []float64{1, 0.25, 0.5}, []float64{5, 0, -128}},
		{"axis -1", -1, []float64{1, 0.25, 0.5}, []float64{5, 0, 127}},
	}
	for _, tt := range tests {
		for _, d := range devices {
			t.Run(tt.name+"/"+d.String(), func(t *testing.T) {
				x := vram.FromSlice(xv, vram.Shape{2, 3}, d, vram.Float32)
				s := vram.FromSlice(tt.scales, vram.Shape{len(tt.scales)}, d, vram.Float32)
				z := vram.FromSlice(tt.zps, vram.Shape{len(tt.zps)}, d, vram.Int64)
				defer x.Release()
				defer s.Release()
				defer z.Release()
				axis := tt.axis
				if axis < 0 {
					axis += 2
				}
				var want, wantBack []float64
				for i, v := range xv {
					c := i / 3
					if axis == 1 {
						c = i % 3
					}
					q := refQuantize(v, tt.scales[c], int(tt.zps[c]))
					want = append(want, q)
					wantBack = append(wantBack, float64(float32((q-tt.zps[c])*tt.scales[c])))
				}
				q, err := quant.PerChannel(x, s, z, tt.axis)
				if err != nil {
					t.Fatal(err)
				}
				defer q.Release()
				if got := q.Float64s(); !slices.Equal(got, want) {
					t.Fatalf("quantized to %v, want %v", got, want)
				}
				back, err := quant.DequantizePerChannel(q, s, z, tt.axis)
				if err != nil {
					t.Fatal(err)
				}
				defer back.Release()
				if got := back.Float64s(); !slices.Equal(got, wantBack) {
					t.Fatalf("dequantized to %v, want %v", got, wantBack)
				}
			})
		}
	}
}

// TestPerChannelReciprocal: each channel's values are multiplied by the
// float32 reciprocal of its scale, as ATen's quantize_val does, which
// rounds otherwise than a division where the product is a tie.
func TestPerChannelReciprocal(t *testing.T) {
	for _, d := range devices {
		t.Run(d.String(), func(t *testing.T) {
			x := vram.FromSlice([]float32{0.273939937, 0.273939937, 0.273939937, 0.273939937}, vram.Shape{2, 2}, d)
			s := vram.FromSlice([]float64{0.00214854861, 0.001271183}, vram.Shape{2}, d)
			z := vram.FromSlice([]int64{-10, -100}, vram.Shape{2}, d)
			defer x.Release()
			defer s.Release()
			defer z.Release()
			q, err := quant.PerChannel(x, s, z, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Release()
			// x/scale is 127.49999 and 215.5; x·(1/scale) 127.5 and 215.49998.
			if got, want := q.Float64s(), []float64{118, 118, 115, 115}; !slices.Equal(got, want) {
				t.Fatalf("quantized to %v, want %v", got, want)
			}
		})
	}
}

func TestAffineErrors(t *testing.T) {
	x := vram.FromSlice([]float64{1, 2, 3, 4}, vram.Shape{2, 2}, vram.Float32)
	defer x.Release()
	nan := vram.FromSlice([]float64{1, math.NaN()}, vram.Shape{2}, vram.Float32)
	defer nan.Release()
	ints := vram.Ones(vram.Shape{2}, vram.Int64)
	defer ints.Release()
	gone := vram.Ones(vram.Shape{2})
	gone.Release()
	vec := func(v ...float64) *vram.Tensor { return vram.FromSlice(v, vram.Shape{len(v)}, vram.Float32) }
	ok, zero := vec(1, 1), vec(0, 0)
	simOK := vram.Ones(vram.Shape{2}, vram.Sim(0))
	defer simOK.Release()
	perChannel := func(x, s, z *vram.Tensor, axis int) error {
		_, err := quant.PerChannel(x, s, z, axis)
		return err
	}
	perTensor := func(x *vram.Tensor, s float64, zp int) error {
		_, err := quant.PerTensor(x, s, zp)
		return err
	}
	dequant := func(q *vram.Tensor, s float64, zp int) error {
		_, err := quant.DequantizePerTensor(q, s, zp)
		return err
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"nil", perTensor(nil, 1, 0), vram.ErrArgument},
		{"released", perTensor(gone, 1, 0), vram.ErrReleased},
		{"integer input", perTensor(ints, 1, 0), vram.ErrDType},
		{"NaN", perTensor(nan, 1, 0), vram.ErrArgument},
		{"zero scale", perTensor(x, 0, 0), vram.ErrArgument},
		{"scale that is 0 in float32", perTensor(x, 1e-50, 0), vram.ErrArgument},
		{"scale whose reciprocal is Inf in float32", perTensor(x, 1e-39, 0), vram.ErrArgument},
		{"per channel, scale whose reciprocal is Inf in float32", perChannel(x, vec(1, 1e-39), zero, 0), vram.ErrArgument},
		{"dequantize scale that is 0 in float32", dequant(vram.Zeros(vram.Shape{2}, vram.Int8), 1e-50, 0), vram.ErrArgument},
		{"dequantize scale that is Inf in float32", dequant(vram.Zeros(vram.Shape{2}, vram.Int8), 1e300, 0), vram.ErrArgument},
		{"negative scale", perTensor(x, -1, 0), vram.ErrArgument},
		{"NaN scale", perTensor(x, math.NaN(), 0), vram.ErrArgument},
		{"infinite scale", perTensor(x, math.Inf(1), 0), vram.ErrArgument},
		{"scale that is Inf in float32", perTensor(x, 1e300, 0), vram.ErrArgument},
		{"zero point above", perTensor(x, 1, 128), vram.ErrArgument},
		{"zero point below", perTensor(x, 1, -129), vram.ErrArgument},
		{"per channel, zero scale", perChannel(x, zero, zero, 0), vram.ErrArgument},
		{"per channel, fractional zero point", perChannel(x, ok, vec(0, 0.5), 0), vram.ErrArgument},
		{"per channel, zero point out of range", perChannel(x, ok, vec(0, 200), 0), vram.ErrArgument},
		{"per channel, wrong length", perChannel(x, vec(1, 1, 1), vec(0, 0, 0), 0), vram.ErrShape},
		{"per channel, axis", perChannel(x, ok, zero, 2), vram.ErrIndex},
		{"per channel, negative axis", perChannel(x, ok, zero, -3), vram.ErrIndex},
		{"per channel, integer scales", perChannel(x, ints, zero, 0), vram.ErrDType},
		{"per channel, nil scales", perChannel(x, nil, zero, 0), vram.ErrArgument},
		{"per channel, other device", perChannel(x, simOK, zero, 0), vram.ErrDevice},
		{"dequantize float", dequant(x, 1, 0), vram.ErrDType},
		{"dequantize zero scale", dequant(vram.Zeros(vram.Shape{2}, vram.Int8), 0, 0), vram.ErrArgument},
		{"dequantize zero point", dequant(vram.Zeros(vram.Shape{2}, vram.Int8), 1, 300), vram.ErrArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) {
				t.Fatalf("got %v, want an error matching %v", tt.err, tt.want)
			}
		})
	}
}

// TestPerChannelAxisOutOfRangeNamesAxis: the error of an axis out of
// range names the axis as given, not as counted from the end.
func TestPerChannelAxisOutOfRangeNamesAxis(t *testing.T) {
	x := vram.FromSlice([]float32{1, 2, 3, 4}, vram.Shape{2, 2})
	scales := vram.FromSlice([]float32{0.1, 0.1}, vram.Shape{2})
	zeros := vram.Zeros(vram.Shape{2}, vram.Int64)
	for _, axis := range []int{2, 7, -3, -9} {
		_, err := quant.PerChannel(x, scales, zeros, axis)
		want := fmt.Sprintf("axis %d is out of range", axis)
		if !errors.Is(err, vram.ErrIndex) || !strings.Contains(err.Error(), want) {
			t.Errorf("axis %d: got %v, want an error matching vram.ErrIndex that says %q", axis, err, want)
		}
	}
}
