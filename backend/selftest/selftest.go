// Package selftest runs short checks that a device works end to end: it
// allocates, copies, runs kernels and multiplies matrices on the device and
// compares every result with one computed on the host, so that a pass
// means the device gave right answers, not only that it answered.
//
// Each backend has a SelfTest that runs these checks on its devices and
// adds its own (cpu.SelfTest, sim.SelfTest, cuda.SelfTest); `vram doctor`
// prints them. A backend composes the checks it needs:
//
//	checks := []selftest.Check{
//		selftest.Alloc(dev),
//		selftest.Copies(dev),
//		selftest.Kernels(dev),
//		selftest.MatMul(dev, 1e-4),
//		selftest.Allocator(alloc, stream),
//		selftest.Sync(dev),
//	}
//
// Checks allocate with the region label [Region] and free what they
// allocate. [Allocator] empties the allocator's cache; it expects no other
// goroutine to allocate on the device while it runs.
package selftest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/internal/units"
	"github.com/vramgo/vram/memory"
)

// Region is the region label of the self-test's allocations.
const Region = "selftest"

// Status is the outcome of a [Check].
type Status string

// The outcomes of a check.
const (
	Pass Status = "pass" // it ran and every result was right
	Fail Status = "fail" // it ran and something was wrong, or it could not run on a device that should run it
	Skip Status = "skip" // it did not run: Detail says why (no GPU, a single GPU for a peer copy)
)

// Check is the result of one self-test step.
type Check struct {
	// Name says what was checked ("copies", "caching allocator", "peer
	// copy 0->1").
	Name string `json:"name"`
	// Status is the outcome.
	Status Status `json:"status"`
	// Detail is what the check saw when it passed (sizes, timings,
	// versions), the error when it failed, the reason when it was
	// skipped.
	Detail string `json:"detail"`
	// Duration is how long the check ran; 0 when skipped.
	Duration time.Duration `json:"duration_ns"`
}

// Run runs fn as the check called name and times it: fn returns what it
// saw, or the error that fails the check. A panic in fn fails the check
// too, with the panic's value, so that a broken device cannot take its
// caller down.
func Run(name string, fn func() (detail string, err error)) (c Check) {
	c.Name = name
	start := time.Now()
	defer func() {
		c.Duration = time.Since(start)
		if r := recover(); r != nil {
			c.Status, c.Detail = Fail, fmt.Sprintf("panicked: %v", r)
		}
	}()
	detail, err := fn()
	if err != nil {
		c.Status, c.Detail = Fail, err.Error()
		return c
	}
	c.Status, c.Detail = Pass, detail
	return c
}

// Skipped returns the check called name, not run for the reason given.
func Skipped(name, reason string) Check {
	return Check{Name: name, Status: Skip, Detail: reason}
}

// Failed returns the number of checks that failed.
func Failed(checks []Check) int {
	n := 0
	for _, c := range checks {
		if c.Status == Fail {
			n++
		}
	}
	return n
}

// Device runs every check of this package that needs only the
// [backend.Device] contract: [Alloc], [Copies], [Kernels], [MatMul] with
// the tolerance of float32 on tensor cores (TF32), and [Sync].
func Device(dev backend.Device) []Check {
	return []Check{Alloc(dev), Copies(dev), Kernels(dev), MatMul(dev, 2e-3), Sync(dev)}
}

// view returns a contiguous view of b.
func view(b backend.Buffer, dt backend.DType, shape ...int) backend.View {
	return backend.View{Buf: b, DType: dt, Shape: shape, Strides: backend.ContiguousStrides(shape)}
}

// buffers allocates one buffer per size and returns them with a function
// that frees them all.
func buffers(dev backend.Device, sizes ...int64) ([]backend.Buffer, func(), error) {
	s := dev.DefaultStream()
	var bufs []backend.Buffer
	free := func() {
		for _, b := range bufs {
			dev.Free(b, s)
		}
	}
	for _, n := range sizes {
		b, err := dev.Alloc(n, s, Region)
		if err != nil {
			free()
			return nil, nil, fmt.Errorf("Alloc(%s): %w", units.Bytes(n), err)
		}
		bufs = append(bufs, b)
	}
	return bufs, free, nil
}

// Alloc checks that the device allocates buffers of sizes from 0 bytes to
// 64 MiB, each at least as large as asked, frees them, and refuses a
// negative size.
func Alloc(dev backend.Device) Check {
	return Run("alloc", func() (string, error) {
		sizes := []int64{0, 1, 512, 1<<20 + 3, 64 << 20}
		bufs, free, err := buffers(dev, sizes...)
		if err != nil {
			return "", err
		}
		defer free()
		for i, b := range bufs {
			if b.Bytes() < sizes[i] {
				return "", fmt.Errorf("Alloc(%d) returned a buffer of %d bytes", sizes[i], b.Bytes())
			}
		}
		if b, err := dev.Alloc(-1, dev.DefaultStream(), Region); err == nil {
			dev.Free(b, dev.DefaultStream())
			return "", errors.New("Alloc(-1) succeeded")
		}
		return fmt.Sprintf("%d buffers of 0 B to %s allocated and freed; a negative size refused", len(sizes), units.Bytes(sizes[len(sizes)-1])), nil
	})
}

// copyBytes is the size of the large copy of [Copies].
const copyBytes = 16 << 20

// RandomBytes returns n bytes drawn from seed: the test data of the copy
// checks, also for the device-specific checks of a backend.
func RandomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	var w [8]byte
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(b[i:], w[:])
	}
	return b
}

// FirstDiff returns the first index where a and b differ, -1 if none.
func FirstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// Copies checks that bytes come back unchanged from host to device, within
// the device (the copy kernel) and from device to host: 16 MiB of random
// bytes (the large-copy path) and 12 bytes (the small one).
func Copies(dev backend.Device) Check {
	return Run("copies", func() (string, error) {
		var took time.Duration
		for _, n := range []int{copyBytes, 12} {
			el, err := roundTrip(dev, n)
			if err != nil {
				return "", err
			}
			if n == copyBytes {
				took = el
			}
		}
		return fmt.Sprintf("%s and 12 B host->device->device->host identical (%.1f ms for the large one)",
			units.Bytes(copyBytes), float64(took.Microseconds())/1000), nil
	})
}

// roundTrip copies n random bytes host -> device -> device -> host and
// compares; it returns how long the copies took.
func roundTrip(dev backend.Device, n int) (time.Duration, error) {
	bufs, free, err := buffers(dev, int64(n), int64(n))
	if err != nil {
		return 0, err
	}
	defer free()
	size := units.Bytes(int64(n))
	src := RandomBytes(n, uint64(n))
	a, b := view(bufs[0], backend.Int32, n/4), view(bufs[1], backend.Int32, n/4)
	start := time.Now()
	if err := dev.CopyFromHost(dev.DefaultStream(), a, src); err != nil {
		return 0, fmt.Errorf("host to device, %s: %w", size, err)
	}
	if err := dev.Copy(dev.DefaultStream(), b, a); err != nil {
		return 0, fmt.Errorf("device to device, %s: %w", size, err)
	}
	dst := make([]byte, n)
	if err := dev.CopyToHost(dev.DefaultStream(), dst, b); err != nil {
		return 0, fmt.Errorf("device to host, %s: %w", size, err)
	}
	took := time.Since(start)
	if i := FirstDiff(dst, src); i >= 0 {
		return 0, fmt.Errorf("copying %s host->device->device->host: byte %d came back as %#x, sent %#x", size, i, dst[i], src[i])
	}
	return took, nil
}

// float32s encodes v as little-endian float32 bytes.
func float32s(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// readFloat32s copies the float32 view v to the host and decodes it.
func readFloat32s(dev backend.Device, v backend.View) ([]float32, error) {
	b := make([]byte, 4*v.NumElements())
	if err := dev.CopyToHost(dev.DefaultStream(), b, v); err != nil {
		return nil, err
	}
	out := make([]float32, v.NumElements())
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

// Kernels checks the elementwise and reduction kernels on 1M float32
// elements, where every result is exact: c = (1.5 + b) * 1.5 through Fill,
// Binary Add and an in-place Binary Mul, then the sum of each row of 1024.
// Outputs start as NaN, so that one a kernel does not write fails.
func Kernels(dev backend.Device) Check {
	return Run("kernels", func() (string, error) {
		const rows, cols = 1024, 1024
		const n = rows * cols
		bufs, free, err := buffers(dev, 4*n, 4*n, 4*n, 4*rows)
		if err != nil {
			return "", err
		}
		defer free()
		a, b, c := view(bufs[0], backend.Float32, n), view(bufs[1], backend.Float32, n), view(bufs[2], backend.Float32, n)
		sum := view(bufs[3], backend.Float32, rows, 1)
		host := make([]float32, n)
		for i := range host {
			host[i] = float32((i*7 + i/cols) % 13)
		}
		steps := []struct {
			what string
			run  func() error
		}{
			{"Fill", func() error { return dev.Fill(dev.DefaultStream(), a, 1.5) }},
			{"Fill NaN", func() error { return dev.Fill(dev.DefaultStream(), c, math.NaN()) }},
			{"Fill NaN", func() error { return dev.Fill(dev.DefaultStream(), sum, math.NaN()) }},
			{"CopyFromHost", func() error { return dev.CopyFromHost(dev.DefaultStream(), b, float32s(host)) }},
			{"Binary Add", func() error { return dev.Binary(dev.DefaultStream(), backend.Add, c, a, b) }},
			{"Binary Mul in place", func() error { return dev.Binary(dev.DefaultStream(), backend.Mul, c, c, a) }},
			{"Reduce Sum", func() error {
				return dev.Reduce(dev.DefaultStream(), backend.Sum, sum, view(bufs[2], backend.Float32, rows, cols), []int{1})
			}},
			{"Synchronize", func() error { return dev.DefaultStream().Synchronize() }},
		}
		for _, s := range steps {
			if err := s.run(); err != nil {
				return "", fmt.Errorf("%s: %w", s.what, err)
			}
		}
		got, err := readFloat32s(dev, c)
		if err != nil {
			return "", err
		}
		for i, g := range got {
			if want := (1.5 + host[i]) * 1.5; g != want {
				return "", fmt.Errorf("(1.5 + b) * 1.5 at element %d is %v, want %v", i, g, want)
			}
		}
		sums, err := readFloat32s(dev, sum)
		if err != nil {
			return "", err
		}
		for r, g := range sums {
			var want float32
			for _, v := range got[r*cols : (r+1)*cols] {
				want += v
			}
			if g != want {
				return "", fmt.Errorf("sum of row %d is %v, want %v", r, g, want)
			}
		}
		return fmt.Sprintf("fill, add, multiply in place and row sums of %d float32 elements exact", n), nil
	})
}

// MatMul checks a batched float32 matrix product, [2, 64, 96] x [2, 96, 80]
// with random inputs, against a float64 product on the host: each element
// must be within tol times the sum of the absolute values of its products
// (1e-4 is right for float32, 2e-3 allows TF32). The output starts as NaN.
func MatMul(dev backend.Device, tol float64) Check {
	return Run("matmul", func() (string, error) {
		const batch, m, k, n = 2, 64, 96, 80
		r := rand.New(rand.NewPCG(3, 4))
		a, b := make([]float32, batch*m*k), make([]float32, batch*k*n)
		for i := range a {
			a[i] = float32(r.NormFloat64())
		}
		for i := range b {
			b[i] = float32(r.NormFloat64())
		}
		bufs, free, err := buffers(dev, int64(4*len(a)), int64(4*len(b)), 4*batch*m*n)
		if err != nil {
			return "", err
		}
		defer free()
		va, vb, vc := view(bufs[0], backend.Float32, batch, m, k), view(bufs[1], backend.Float32, batch, k, n), view(bufs[2], backend.Float32, batch, m, n)
		if err := dev.CopyFromHost(dev.DefaultStream(), va, float32s(a)); err != nil {
			return "", err
		}
		if err := dev.CopyFromHost(dev.DefaultStream(), vb, float32s(b)); err != nil {
			return "", err
		}
		if err := dev.Fill(dev.DefaultStream(), vc, math.NaN()); err != nil {
			return "", err
		}
		if err := dev.MatMul(dev.DefaultStream(), vc, va, vb); err != nil {
			return "", err
		}
		c, err := readFloat32s(dev, vc)
		if err != nil {
			return "", err
		}
		worst, err := CompareMatMul(c, a, b, batch, m, k, n, tol)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%d×%d×%d×%d float32 matches the host (largest error %.1e of the sum of |products|)", batch, m, k, n, worst), nil
	})
}

// CompareMatMul compares c, the row-major [batch, m, n] product of a
// [batch, m, k] and b [batch, k, n], with a float64 product computed here.
// Each element must be within tol times the sum of the absolute values of
// its products; NaN never is. It returns the largest such relative error,
// or an error naming the first element out of bounds.
func CompareMatMul(c, a, b []float32, batch, m, k, n int, tol float64) (worst float64, err error) {
	for p := 0; p < batch; p++ {
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var sum, abs float64
				for q := 0; q < k; q++ {
					x := float64(a[p*m*k+i*k+q]) * float64(b[p*k*n+q*n+j])
					sum += x
					abs += math.Abs(x)
				}
				got := float64(c[p*m*n+i*n+j])
				e := math.Abs(got-sum) / max(abs, math.SmallestNonzeroFloat64)
				if !(e <= tol) { // NaN fails
					return worst, fmt.Errorf("C[%d,%d,%d] = %v, want %v (error %.2g of the sum of |products|, allowed %.0e)", p, i, j, got, sum, e, tol)
				}
				worst = max(worst, e)
			}
		}
	}
	return worst, nil
}

// Sync checks that the device's default stream synchronizes without an
// asynchronous error.
func Sync(dev backend.Device) Check {
	return Run("sync", func() (string, error) {
		if err := dev.DefaultStream().Synchronize(); err != nil {
			return "", err
		}
		return "no asynchronous error", nil
	})
}

// Allocator checks the caching allocator a on stream: for a small-pool
// (4 KiB) and a large-pool (64 MiB) block, Alloc counts it as allocated,
// Free keeps its memory reserved (cached), and the next Alloc of the size
// gets the same address back without a driver call; then EmptyCache
// returns the cached memory, leaving no more reserved than before the
// check. It empties the cache first; another goroutine allocating while
// it runs can fail it.
func Allocator(a *memory.Allocator, stream memory.Stream) Check {
	return Run("caching allocator", func() (string, error) {
		a.EmptyCache()
		base := a.Stats()
		allocated := func(s memory.Stats) int64 { return s.AllocatedBytes[memory.StatAll].Current }
		reserved := func(s memory.Stats) int64 { return s.ReservedBytes[memory.StatAll].Current }
		driverCalls := func(s memory.Stats) int64 { return s.NumDeviceAlloc + s.NumMaps }
		for _, size := range []int64{4 << 10, 64 << 20} {
			b1, err := a.Alloc(size, stream, Region)
			if err != nil {
				return "", fmt.Errorf("Alloc(%s): %w", units.Bytes(size), err)
			}
			s1 := a.Stats()
			addr := b1.Addr()
			if got := allocated(s1) - allocated(base); got < size {
				a.Free(b1)
				return "", fmt.Errorf("after Alloc(%s) allocated bytes grew by %d", units.Bytes(size), got)
			}
			a.Free(b1)
			s2 := a.Stats()
			if allocated(s2) != allocated(base) {
				return "", fmt.Errorf("after freeing %s allocated bytes are %d, were %d before", units.Bytes(size), allocated(s2), allocated(base))
			}
			if reserved(s2) != reserved(s1) {
				return "", fmt.Errorf("freeing %s changed the reserve from %d to %d bytes: the block was not cached", units.Bytes(size), reserved(s1), reserved(s2))
			}
			b2, err := a.Alloc(size, stream, Region)
			if err != nil {
				return "", fmt.Errorf("Alloc(%s) from the cache: %w", units.Bytes(size), err)
			}
			s3 := a.Stats()
			a.Free(b2)
			if b2.Addr() != addr {
				return "", fmt.Errorf("a cached %s block was not reused: got %#x, freed %#x", units.Bytes(size), b2.Addr(), addr)
			}
			if driverCalls(s3) != driverCalls(s2) {
				return "", fmt.Errorf("Alloc(%s) from the cache called the driver %d times", units.Bytes(size), driverCalls(s3)-driverCalls(s2))
			}
		}
		cached := reserved(a.Stats())
		a.EmptyCache()
		end := a.Stats()
		if allocated(end) != allocated(base) {
			return "", fmt.Errorf("after the check %d bytes are allocated, %d before", allocated(end), allocated(base))
		}
		if reserved(end) > reserved(base) {
			return "", fmt.Errorf("EmptyCache left %d bytes reserved, %d before the check", reserved(end), reserved(base))
		}
		return fmt.Sprintf("4 KiB and 64 MiB blocks cached on Free and reused at the same address without a driver call; EmptyCache returned %s",
			units.Bytes(cached-reserved(end))), nil
	})
}
