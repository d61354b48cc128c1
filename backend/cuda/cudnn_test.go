package cuda

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cudnn"
)

// These tests need no GPU: they check the pieces of the cuDNN path that
// run on the host.

func view4(shape [4]int, strides [4]int) backend.View {
	return backend.View{Buf: &Buffer{}, DType: backend.Float32, Shape: shape[:], Strides: strides[:]}
}

func TestLayoutOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		shape   [4]int
		strides [4]int
		want    layout
	}{
		{"nchw", [4]int{2, 3, 4, 5}, [4]int{60, 20, 5, 1}, nchw},
		{"nhwc", [4]int{2, 3, 4, 5}, [4]int{60, 1, 15, 3}, nhwc},
		{"one channel: both", [4]int{2, 1, 4, 5}, [4]int{20, 20, 5, 1}, nchw | nhwc},
		{"1x1 filter: both", [4]int{8, 4, 1, 1}, [4]int{4, 1, 1, 1}, nchw | nhwc},
		{"size-1 batch, odd stride", [4]int{1, 3, 4, 5}, [4]int{999, 20, 5, 1}, nchw},
		{"transposed spatial", [4]int{2, 3, 4, 5}, [4]int{60, 20, 1, 4}, 0},
		{"padded rows", [4]int{2, 3, 4, 5}, [4]int{96, 32, 8, 1}, 0},
		{"broadcast", [4]int{2, 3, 4, 5}, [4]int{0, 20, 5, 1}, 0},
	} {
		if got := layoutOf(view4(tc.shape, tc.strides)); got != tc.want {
			t.Errorf("%s: layout %d, want %d", tc.name, got, tc.want)
		}
	}
	if layoutOf(backend.View{Shape: []int{2, 3}, Strides: []int{3, 1}}) != 0 {
		t.Error("a 2-D view has a 4-D layout")
	}
	for _, l := range []layout{nchw, nhwc} {
		ns, cs, hs, ws := l.strides(3, 4, 5)
		if got := layoutOf(view4([4]int{2, 3, 4, 5}, [4]int{ns, cs, hs, ws})); got != l {
			t.Errorf("%v strides read back as layout %d", l, got)
		}
	}
}

func TestCheckConv(t *testing.T) {
	p := backend.Conv2DParams{Stride: [2]int{1, 1}, Padding: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: 1}
	c := func(s [4]int) backend.View {
		return view4(s, [4]int{s[1] * s[2] * s[3], s[2] * s[3], s[3], 1})
	}
	names := [3]string{"x", "w", "y"}
	x, w, y := c([4]int{2, 4, 8, 8}), c([4]int{6, 4, 3, 3}), c([4]int{2, 6, 8, 8})
	if err := checkConv(x, w, y, p, names); err != nil {
		t.Fatalf("valid: %v", err)
	}
	with := func(f func(*backend.Conv2DParams)) backend.Conv2DParams {
		q := p
		f(&q)
		return q
	}
	f16 := w
	f16.DType = backend.Float16
	for _, tc := range []struct {
		name    string
		x, w, y backend.View
		p       backend.Conv2DParams
		want    string
	}{
		{"3-D x", backend.View{Shape: []int{4, 8, 8}, Strides: []int{64, 8, 1}}, w, y, p, "x has shape [4 8 8]"},
		{"dtypes", x, f16, y, p, "want one dtype"},
		{"zero stride", x, w, y, with(func(q *backend.Conv2DParams) { q.Stride[1] = 0 }), "strides and dilations of at least 1"},
		{"negative padding", x, w, y, with(func(q *backend.Conv2DParams) { q.Padding[0] = -1 }), "padding of at least 0"},
		{"zero dilation", x, w, y, with(func(q *backend.Conv2DParams) { q.Dilation[0] = 0 }), "strides and dilations"},
		{"zero groups", x, w, y, with(func(q *backend.Conv2DParams) { q.Groups = 0 }), "0 groups"},
		{"groups not dividing", x, c([4]int{6, 2, 3, 3}), y, with(func(q *backend.Conv2DParams) { q.Groups = 3 }), "3 groups"},
		{"filter channels", x, c([4]int{6, 2, 3, 3}), y, p, "[O, C/groups, KH, KW]"},
		{"filter too big", c([4]int{2, 4, 2, 2}), c([4]int{6, 4, 5, 5}), y, with(func(q *backend.Conv2DParams) { q.Padding = [2]int{0, 0} }), "does not fit"},
		{"output size", x, w, c([4]int{2, 6, 7, 8}), p, "y has shape [2 6 7 8]: want [2 6 8 8]"},
		{"output channels", x, w, c([4]int{2, 5, 8, 8}), p, "want [2 6 8 8]"},
	} {
		err := checkConv(tc.x, tc.w, tc.y, tc.p, names)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// Strided, grouped and dilated shapes that are right.
	q := backend.Conv2DParams{Stride: [2]int{2, 1}, Padding: [2]int{1, 0}, Dilation: [2]int{1, 2}, Groups: 2}
	if err := checkConv(c([4]int{1, 4, 11, 8}), c([4]int{6, 2, 3, 2}), c([4]int{1, 6, 6, 6}), q, names); err != nil {
		t.Errorf("grouped, strided, dilated: %v", err)
	}
}

func TestConvTakes(t *testing.T) {
	p := backend.Conv2DParams{Stride: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: 1}
	nhwcView := func(s [4]int) backend.View {
		ns, cs, hs, ws := nhwc.strides(s[1], s[2], s[3])
		return view4(s, [4]int{ns, cs, hs, ws})
	}
	x, w, y := nhwcView([4]int{2, 4, 5, 5}), nhwcView([4]int{8, 4, 1, 1}), nhwcView([4]int{2, 8, 5, 5})
	defer SetCuDNN(CuDNN())
	SetCuDNN(CuDNNSettings{})
	key, why := convTakes(x, w, y, p)
	if why != "" || key.lx != nhwc || key.lw != nhwc || key.ly != nhwc || !key.tf32 {
		t.Errorf("channels-last with a 1x1 filter: %+v, %q; want every view NHWC, TF32 on", key, why)
	}
	SetCuDNN(CuDNNSettings{NoTF32: true})
	if key, _ := convTakes(x, w, y, p); key.tf32 {
		t.Error("TF32 kept with NoTF32 set")
	}
	// A 1x1 image is packed both ways: with a channels-last 3x3 filter,
	// every view must be described as NHWC (the filter's layout), not
	// the input as NCHW beside an NHWC filter.
	one := nhwcView([4]int{2, 4, 1, 1})
	if key, why := convTakes(one, nhwcView([4]int{8, 4, 3, 3}), nhwcView([4]int{2, 8, 1, 1}), backend.Conv2DParams{Stride: [2]int{1, 1}, Padding: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: 1}); why != "" || key.lx != nhwc || key.lw != nhwc || key.ly != nhwc {
		t.Errorf("1x1 image, channels-last 3x3 filter: %+v, %q; want every view NHWC", key, why)
	}
	empty := nhwcView([4]int{0, 4, 5, 5})
	f64 := x
	f64.DType = backend.Float64
	strided := x
	strided.Strides = []int{200, 1, 40, 8}
	for name, xv := range map[string]backend.View{"empty": empty, "float64": f64, "padded channels": strided} {
		if _, why := convTakes(xv, w, y, p); why == "" {
			t.Errorf("%s: taken", name)
		}
	}
	if !vectorTakes(backend.View{Buf: &Buffer{}, DType: backend.Float32, Shape: []int{8}, Strides: []int{1}}, 8, backend.Float32) ||
		vectorTakes(backend.View{Buf: &Buffer{}, DType: backend.Float32, Shape: []int{8}, Strides: []int{2}}, 8, backend.Float32) ||
		vectorTakes(backend.View{Buf: &Buffer{}, DType: backend.Float16, Shape: []int{8}, Strides: []int{1}}, 8, backend.Float32) {
		t.Error("vectorTakes")
	}
}

func TestPickLayouts(t *testing.T) {
	both := nchw | nhwc
	for _, tc := range []struct {
		in, want [3]layout
	}{
		{[3]layout{nchw, nchw, nchw}, [3]layout{nchw, nchw, nchw}},
		{[3]layout{nhwc, nhwc, nhwc}, [3]layout{nhwc, nhwc, nhwc}},
		{[3]layout{nhwc, both, nhwc}, [3]layout{nhwc, nhwc, nhwc}}, // 1x1 filter
		{[3]layout{both, nhwc, both}, [3]layout{nhwc, nhwc, nhwc}}, // 1x1 image, 3x3 filter
		{[3]layout{both, both, nhwc}, [3]layout{nhwc, nhwc, nhwc}}, // only the output decides
		{[3]layout{both, nchw, both}, [3]layout{nchw, nchw, nchw}}, // contiguous filter
		{[3]layout{both, both, both}, [3]layout{nchw, nchw, nchw}}, // all ambiguous: NCHW
		{[3]layout{nhwc, nchw, nhwc}, [3]layout{nhwc, nchw, nhwc}}, // a real mix stays
		{[3]layout{both, nchw, nhwc}, [3]layout{nchw, nchw, nhwc}}, // no common layout
		{[3]layout{nchw, both, nhwc}, [3]layout{nchw, nchw, nhwc}}, // no common layout
		{[3]layout{nhwc, both, nchw | nhwc}, [3]layout{nhwc, nhwc, nhwc}},
	} {
		x, w, y := pickLayouts(tc.in[0], tc.in[1], tc.in[2])
		if got := [3]layout{x, w, y}; got != tc.want {
			t.Errorf("pickLayouts(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestMathAllowed(t *testing.T) {
	for _, tc := range []struct {
		dt   backend.DType
		tf32 bool
		m    cudnn.MathType
		want bool
	}{
		{backend.Float32, false, cudnn.FMAMath, true},
		{backend.Float32, false, cudnn.DefaultMath, false},
		{backend.Float32, false, cudnn.TensorOpMath, false},
		{backend.Float32, true, cudnn.DefaultMath, true},
		{backend.Float32, true, cudnn.TensorOpMath, true},
		{backend.Float32, true, cudnn.TensorOpMathAllowConversion, false},
		{backend.Float16, false, cudnn.TensorOpMathAllowConversion, true},
		{backend.BFloat16, false, cudnn.TensorOpMath, true},
		{backend.BFloat16, false, cudnn.TensorOpMathAllowConversion, false},
	} {
		if got := mathAllowed(convKey{dt: tc.dt, tf32: tc.tf32}, tc.m); got != tc.want {
			t.Errorf("%s tf32=%v math %d: %v, want %v", tc.dt, tc.tf32, tc.m, got, tc.want)
		}
	}
}

func TestCheckPool(t *testing.T) {
	x := view4([4]int{2, 3, 9, 8}, [4]int{216, 72, 8, 1})
	p := backend.Pool2DParams{Mode: backend.MaxPool, Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}
	if err := checkPool(x, view4([4]int{2, 3, 5, 4}, [4]int{60, 20, 4, 1}), p); err != nil {
		t.Fatalf("valid: %v", err)
	}
	for _, tc := range []struct {
		name string
		y    backend.View
		p    backend.Pool2DParams
		want string
	}{
		{"output", view4([4]int{2, 3, 4, 4}, [4]int{48, 16, 4, 1}), p, "want [2 3 5 4]"},
		{"mode", view4([4]int{2, 3, 5, 4}, [4]int{60, 20, 4, 1}), backend.Pool2DParams{Mode: 7, Kernel: p.Kernel, Stride: p.Stride}, "pooling mode 7"},
		{"zero kernel", view4([4]int{2, 3, 5, 4}, [4]int{60, 20, 4, 1}), backend.Pool2DParams{Kernel: [2]int{0, 3}, Stride: [2]int{1, 1}}, "does not fit"},
		{"zero stride", view4([4]int{2, 3, 5, 4}, [4]int{60, 20, 4, 1}), backend.Pool2DParams{Kernel: [2]int{3, 3}}, "does not fit"},
	} {
		if err := checkPool(x, tc.y, tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestHostConv checks the self-test's host reference against a direct
// sum on one output, and its output shape.
func TestHostConv(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	xs, ws := [4]int{1, 4, 7, 6}, [4]int{4, 2, 3, 2}
	p := backend.Conv2DParams{Stride: [2]int{2, 1}, Padding: [2]int{1, 1}, Dilation: [2]int{2, 1}, Groups: 2}
	x, w, b := make([]float64, 4*42), make([]float64, 4*2*6), []float64{0.5, -1, 2, 0}
	for i := range x {
		x[i] = r.NormFloat64()
	}
	for i := range w {
		w[i] = r.NormFloat64()
	}
	y, scale, ys := hostConv(x, w, b, xs, ws, p, false)
	if ys != [4]int{1, 4, 3, 7} || len(y) != 84 {
		t.Fatalf("shape %v (%d values)", ys, len(y))
	}
	// Output channel 3 (group 1), row 1, column 2: input rows 1-2+2k,
	// columns 1-1+k.
	want, abs := b[3], 0.0
	for ci := range 2 {
		for ky := range 3 {
			for kx := range 2 {
				iy, ix := 1*2-1+ky*2, 2-1+kx
				if iy < 0 || iy >= 7 || ix < 0 || ix >= 6 {
					continue
				}
				v := x[((2+ci)*7+iy)*6+ix] * w[((3*2+ci)*3+ky)*2+kx]
				want += v
				abs += math.Abs(v)
			}
		}
	}
	i := (3*3+1)*7 + 2
	if math.Abs(y[i]-want) > 1e-12 || math.Abs(scale[i]-abs) > 1e-12 {
		t.Errorf("y = %v (scale %v), want %v (%v)", y[i], scale[i], want, abs)
	}
	yr, _, _ := hostConv(x, w, b, xs, ws, p, true)
	for i := range yr {
		if yr[i] != max(y[i], 0) {
			t.Fatalf("ReLU: %v from %v", yr[i], y[i])
		}
	}
}

// TestCuDNNSettingsOptions checks that Configure applies Options.CuDNN,
// also after the other options are fixed, and that the switches read back.
func TestCuDNNSettingsOptions(t *testing.T) {
	defer SetCuDNN(CuDNN())
	for _, s := range []CuDNNSettings{{}, {Disabled: true}, {Benchmark: true, Deterministic: true}, {NoTF32: true},
		{Benchmark: true, BenchmarkLimit: 32}, {Benchmark: true, BenchmarkLimit: -1}} {
		SetCuDNN(s)
		if got := CuDNN(); got != s {
			t.Errorf("set %+v, read %+v", s, got)
		}
	}
	cur := Configured()
	cur.CuDNN = CuDNNSettings{Benchmark: true}
	if err := Configure(cur); err != nil {
		t.Fatalf("Configure with new cuDNN switches: %v", err)
	}
	if got := CuDNN(); got != cur.CuDNN {
		t.Errorf("after Configure: %+v, want %+v", got, cur.CuDNN)
	}
}

func TestCheckBN(t *testing.T) {
	x := view4([4]int{2, 3, 4, 4}, [4]int{48, 16, 4, 1})
	ch := backend.View{Buf: &Buffer{}, DType: backend.Float32, Shape: []int{3}, Strides: []int{1}}
	if err := checkBN(x, []named{{"y", x, false}}, []named{{"scale", ch, false}, {"runMean", backend.View{}, true}}); err != nil {
		t.Fatalf("valid: %v", err)
	}
	y16 := x
	y16.DType = backend.Float16
	for _, tc := range []struct {
		name    string
		x       backend.View
		same    []named
		channel []named
		want    string
	}{
		{"2-D x", backend.View{Shape: []int{2, 3}, Strides: []int{3, 1}}, nil, nil, "want 4 dimensions"},
		{"y dtype", x, []named{{"y", y16, false}}, nil, "y is float16 [2 3 4 4]: want float32 [2 3 4 4]"},
		{"y shape", x, []named{{"dy", view4([4]int{2, 3, 4, 5}, [4]int{60, 20, 5, 1}), false}}, nil, "dy is float32 [2 3 4 5]"},
		{"missing scale", x, nil, []named{{"scale", backend.View{}, false}}, "scale has shape []: want [3]"},
		{"channels", x, nil, []named{{"bias", backend.View{Buf: &Buffer{}, Shape: []int{4}, Strides: []int{1}}, false}}, "bias has shape [4]: want [3]"},
	} {
		if err := checkBN(tc.x, tc.same, tc.channel); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestConvChoiceString(t *testing.T) {
	c := ConvChoice{Direction: "forward", DType: backend.Float32, X: [4]int{2, 4, 6, 6}, W: [4]int{8, 4, 3, 3}, Y: [4]int{2, 8, 6, 6},
		LX: "NHWC", LW: "NHWC", LY: "NHWC", Params: backend.Conv2DParams{Stride: [2]int{1, 1}, Padding: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: 1},
		TF32: true, Benchmark: true, Algo: 1, Math: mathName(cudnn.DefaultMath), Workspace: 4096}
	s := c.String()
	for _, want := range []string{"forward float32", "x [2 4 6 6] NHWC", "w [8 4 3 3] NHWC", "tf32=true", "benchmark", "algo 1", "TF32", "4096 bytes"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
	c.Algo = -1
	if s := c.String(); !strings.Contains(s, "fallback") {
		t.Errorf("no algorithm: %q", s)
	}
	if got := (&Device{}).CuDNNConvChoices(); len(got) != 0 {
		t.Errorf("a device without cuDNN lists %v", got)
	}
}
