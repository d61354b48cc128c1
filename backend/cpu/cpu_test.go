package cpu_test

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
	"github.com/vramgo/vram/backend/cpu"
	"github.com/vramgo/vram/backend/selftest"
)

func device(t testing.TB) backend.Device {
	t.Helper()
	b, ok := backend.Lookup("cpu")
	if !ok {
		t.Fatal(`backend "cpu" is not registered`)
	}
	dev, err := b.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, device(t))
}

func TestBackend(t *testing.T) {
	b := &cpu.Backend{}
	if b.Name() != "cpu" || b.DeviceCount() != 1 {
		t.Errorf("Name, DeviceCount = %q, %d", b.Name(), b.DeviceCount())
	}
	for _, i := range []int{-1, 1} {
		if _, err := b.Device(i); err == nil {
			t.Errorf("Device(%d): no error", i)
		}
	}
	dev := device(t)
	if _, err := dev.Alloc(-1, dev.DefaultStream(), ""); err == nil {
		t.Error("Alloc(-1): no error")
	}
	buf, err := dev.Alloc(13, dev.DefaultStream(), "")
	if err != nil {
		t.Fatal(err)
	}
	hb := buf.(backend.HostBuffer)
	if len(hb.Host()) != 13 || buf.Bytes() != 13 {
		t.Errorf("Alloc(13): %d bytes, Host() %d", buf.Bytes(), len(hb.Host()))
	}
	v := backend.View{Buf: buf, DType: backend.Float64, Shape: []int{1}, Strides: []int{1}}
	if err := dev.Fill(dev.DefaultStream(), v, 1); err != nil {
		t.Fatal(err)
	}
	dev.Free(buf, dev.DefaultStream())
	if err := dev.Fill(dev.DefaultStream(), v, 1); err == nil {
		t.Error("Fill of a freed buffer: no error")
	}
	if err := dev.DefaultStream().Synchronize(); err != nil {
		t.Error(err)
	}
}

func TestErrors(t *testing.T) {
	dev := device(t)
	f32 := backendtest.NewView(t, dev, backend.Float32, []int{2}, []float64{1, 2})
	i32 := backendtest.NewView(t, dev, backend.Int32, []int{2}, []float64{1, 2})
	for _, op := range []backend.UnaryOp{backend.Exp, backend.Log, backend.Tanh, backend.Gelu, backend.Sqrt} {
		err := dev.Unary(dev.DefaultStream(), op, i32, i32, 0)
		if !errors.Is(err, backend.ErrNotImplemented) {
			t.Errorf("%v on int32: %v, want ErrNotImplemented", op, err)
		}
	}
	if err := dev.MatMul(dev.DefaultStream(), i32, i32, i32); err == nil {
		t.Error("MatMul of 1-d views: no error")
	}

	// A view reaching past its buffer is an error, not a crash.
	bad := f32
	bad.Shape = []int{3}
	if err := dev.Fill(dev.DefaultStream(), bad, 0); err == nil || !strings.HasPrefix(err.Error(), "cpu: ") {
		t.Errorf("Fill past the end of the buffer: %v", err)
	}

	// Out-of-range indices name the index and the bound.
	src := backendtest.NewView(t, dev, backend.Float32, []int{3}, []float64{1, 2, 3})
	idx := backendtest.NewView(t, dev, backend.Int64, []int{2}, []float64{1, 5})
	err := dev.Gather(dev.DefaultStream(), f32, src, idx, 0)
	if err == nil || !strings.Contains(err.Error(), "5") || !strings.Contains(err.Error(), "3") {
		t.Errorf("Gather with index 5 of 3: %v", err)
	}
	err = dev.ScatterAdd(dev.DefaultStream(), src, idx, f32, 0)
	if err == nil || !strings.Contains(err.Error(), "5") || !strings.Contains(err.Error(), "3") {
		t.Errorf("ScatterAdd with index 5 of 3: %v", err)
	}
	if got := backendtest.ReadView(t, dev, src); got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Errorf("ScatterAdd with a bad index changed dst to %v", got)
	}
}

// TestScalarFraction checks that a fractional scalar with integer elements
// is applied in float64.
func TestScalarFraction(t *testing.T) {
	dev := device(t)
	a := backendtest.NewView(t, dev, backend.Int32, []int{4}, []float64{1, 2, 3, 4})
	d := backendtest.NewView(t, dev, backend.Bool, []int{4}, []float64{0, 0, 0, 0})
	if err := dev.Scalar(dev.DefaultStream(), backend.Lt, d, a, 2.5, false); err != nil {
		t.Fatal(err)
	}
	if got := backendtest.ReadView(t, dev, d); got[1] != 1 || got[2] != 0 {
		t.Errorf("int32 < 2.5 = %v", got)
	}
}

// TestRoundToOddCopy checks that float64 to float16 rounds once: the
// float64 value just above the midpoint between two float16 values would
// round down through float32 first.
func TestRoundToOddCopy(t *testing.T) {
	dev := device(t)
	x := 1 + 1.0/2048 + 1.0/(1<<30) // above the midpoint of 1 and 1+1/1024
	src := backendtest.NewView(t, dev, backend.Float64, []int{1}, []float64{x})
	dst := backendtest.NewView(t, dev, backend.Float16, []int{1}, []float64{0})
	if err := dev.Copy(dev.DefaultStream(), dst, src); err != nil {
		t.Fatal(err)
	}
	if got := backendtest.ReadView(t, dev, dst)[0]; got != 1+1.0/1024 {
		t.Errorf("float64 %v to float16 = %v, want %v", x, got, 1+1.0/1024)
	}
}

// TestDeterminism checks that reductions and products give the same bits
// whatever the number of CPUs.
func TestDeterminism(t *testing.T) {
	dev := device(t)
	const n = 1<<20 + 12345
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = math.Sin(float64(i)) * 1e3 * float64(i%13+1)
	}
	run := func() [][]float64 {
		var out [][]float64
		for _, dt := range []backend.DType{backend.Float32, backend.Float16} {
			src := backendtest.NewView(t, dev, dt, []int{n}, vals)
			for _, op := range []backend.ReduceOp{backend.Sum, backend.Max, backend.ArgMin} {
				ddt := dt
				if op == backend.ArgMin {
					ddt = backend.Int64
				}
				dst := backendtest.NewView(t, dev, ddt, []int{1}, []float64{0})
				if err := dev.Reduce(dev.DefaultStream(), op, dst, src, []int{0}); err != nil {
					t.Fatal(err)
				}
				out = append(out, backendtest.ReadView(t, dev, dst))
			}
			// Column sums of a tall matrix: long strided reductions.
			m := src
			m.Shape, m.Strides = []int{n / 5, 5}, []int{5, 1}
			dst := backendtest.NewView(t, dev, dt, []int{1, 5}, make([]float64, 5))
			if err := dev.Reduce(dev.DefaultStream(), backend.Sum, dst, m, []int{0}); err != nil {
				t.Fatal(err)
			}
			out = append(out, backendtest.ReadView(t, dev, dst))
		}
		a := backendtest.NewView(t, dev, backend.Float32, []int{1, 200, 300}, vals[:60000])
		b := backendtest.NewView(t, dev, backend.Float32, []int{1, 300, 150}, vals[60000:105000])
		d := backendtest.NewView(t, dev, backend.Float32, []int{1, 200, 150}, make([]float64, 30000))
		if err := dev.MatMul(dev.DefaultStream(), d, a, b); err != nil {
			t.Fatal(err)
		}
		out = append(out, backendtest.ReadView(t, dev, d))
		return out
	}
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	one := run()
	for _, procs := range []int{2, 3, 8} {
		runtime.GOMAXPROCS(procs)
		other := run()
		for i := range one {
			for j := range one[i] {
				if math.Float64bits(one[i][j]) != math.Float64bits(other[i][j]) {
					t.Fatalf("result %d[%d] with GOMAXPROCS %d: %v, with 1: %v", i, j, procs, other[i][j], one[i][j])
				}
			}
		}
	}
}

var benchDev backend.Device

func benchDevice(b *testing.B) backend.Device {
	if benchDev == nil {
		benchDev = device(b)
	}
	return benchDev
}

func BenchmarkAddFloat32(b *testing.B) {
	dev := benchDevice(b)
	n := 1 << 20
	x := backendtest.NewView(b, dev, backend.Float32, []int{n}, make([]float64, n))
	y := backendtest.NewView(b, dev, backend.Float32, []int{n}, make([]float64, n))
	d := backendtest.NewView(b, dev, backend.Float32, []int{n}, make([]float64, n))
	b.SetBytes(int64(12 * n))
	for b.Loop() {
		if err := dev.Binary(dev.DefaultStream(), backend.Add, d, x, y); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSumFloat32(b *testing.B) {
	dev := benchDevice(b)
	n := 1 << 20
	x := backendtest.NewView(b, dev, backend.Float32, []int{n}, make([]float64, n))
	d := backendtest.NewView(b, dev, backend.Float32, []int{1}, []float64{0})
	b.SetBytes(int64(4 * n))
	for b.Loop() {
		if err := dev.Reduce(dev.DefaultStream(), backend.Sum, d, x, []int{0}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMatMulFloat32(b *testing.B) {
	dev := benchDevice(b)
	const n = 256
	vals := make([]float64, n*n)
	for i := range vals {
		vals[i] = float64(i%7) - 3
	}
	x := backendtest.NewView(b, dev, backend.Float32, []int{1, n, n}, vals)
	y := backendtest.NewView(b, dev, backend.Float32, []int{1, n, n}, vals)
	d := backendtest.NewView(b, dev, backend.Float32, []int{1, n, n}, vals)
	for b.Loop() {
		if err := dev.MatMul(dev.DefaultStream(), d, x, y); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSumAxis0Float32(b *testing.B) {
	dev := benchDevice(b)
	const n = 1024
	x := backendtest.NewView(b, dev, backend.Float32, []int{n, n}, make([]float64, n*n))
	d := backendtest.NewView(b, dev, backend.Float32, []int{1, n}, make([]float64, n))
	b.SetBytes(int64(4 * n * n))
	for b.Loop() {
		if err := dev.Reduce(dev.DefaultStream(), backend.Sum, d, x, []int{0}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSelfTest(t *testing.T) {
	checks := cpu.SelfTest()
	if len(checks) == 0 {
		t.Fatal("no checks")
	}
	for _, c := range checks {
		t.Logf("%s: %s: %s", c.Name, c.Status, c.Detail)
		if c.Status != selftest.Pass {
			t.Errorf("%s: %s: %s", c.Name, c.Status, c.Detail)
		}
	}
}
