package sim

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/cpu"
	"github.com/vramgo/vram/backend/selftest"
	"github.com/vramgo/vram/internal/units"
	"github.com/vramgo/vram/memory"
)

// Sizes of the simulated devices of [SelfTest], private to it: small
// enough for any machine (the data device holds its data in host memory;
// the shape-only one holds none).
const (
	selfTestCapacity      = 256 << 20 // bytes of the device with data
	selfTestShapeCapacity = 16 << 30  // bytes of the shape-only device
)

// SelfTest checks the simulated devices on devices of its own, whatever
// the environment configures: the device checks of package selftest and
// the caching allocator on a 256 MiB device with the default allocator
// settings, an out-of-memory error with its diagnosis and a checked fix,
// and a shape-only device that takes 8 GiB without holding data.
func SelfTest() []selftest.Check {
	host, err := (&cpu.Backend{}).Device(0)
	if err != nil {
		return []selftest.Check{{Name: "sim device", Status: selftest.Fail, Detail: err.Error()}}
	}
	d, err := newDevice(host, 0, selfTestCapacity, memory.Config{}, false)
	if err != nil {
		return []selftest.Check{{Name: "sim device", Status: selftest.Fail, Detail: err.Error()}}
	}
	checks := selftest.Device(d)
	checks = append(checks, selftest.Allocator(d.alloc, 0), checkOOM(d), checkShapeOnly(host))
	return checks
}

// checkOOM fills most of d, asks for more than is left, and checks the
// OutOfMemoryError: its figures, its message and its fix, and that the
// failure left the allocator as it was.
func checkOOM(d *Device) selftest.Check {
	return selftest.Run("out-of-memory error", func() (string, error) {
		s := d.DefaultStream()
		held, err := d.Alloc(160<<20, s, selftest.Region)
		if err != nil {
			return "", fmt.Errorf("Alloc(160 MiB): %w", err)
		}
		defer d.Free(held, s)
		before := d.alloc.Stats()
		b, err := d.Alloc(128<<20, s, selftest.Region)
		if err == nil {
			d.Free(b, s)
			return "", errors.New("128 MiB beside 160 MiB fit on a 256 MiB device")
		}
		var oom *memory.OutOfMemoryError
		if !errors.As(err, &oom) {
			return "", fmt.Errorf("Alloc(128 MiB) beside 160 MiB: %v, want a *memory.OutOfMemoryError", err)
		}
		if oom.Requested != 128<<20 || oom.Memory.Total != selfTestCapacity || oom.Memory.Reserved != before.ReservedBytes[memory.StatAll].Current ||
			oom.Allocated != 160<<20 {
			return "", fmt.Errorf("the error's figures are wrong: asked %d, device %+v, allocated %d", oom.Requested, oom.Memory, oom.Allocated)
		}
		msg := err.Error()
		if !strings.Contains(msg, "tried to allocate 128.00 MiB") || !strings.Contains(msg, "fix") {
			return "", fmt.Errorf("the message lacks the request or the fix:\n%s", msg)
		}
		after := d.alloc.Stats()
		if after.AllocatedBytes != before.AllocatedBytes || after.Allocation != before.Allocation {
			return "", errors.New("the failed allocation changed the allocated bytes or blocks")
		}
		if oom.Fix == "" {
			return "", errors.New("the error suggests no fix")
		}
		return "128 MiB beside 160 MiB on 256 MiB fails with the diagnosis, nothing allocated; fix: " + oom.Fix, nil
	})
}

// checkShapeOnly allocates 8 GiB on a 16 GiB shape-only device, which
// holds no data, and checks that reading it is refused.
func checkShapeOnly(host backend.Device) selftest.Check {
	return selftest.Run("shape-only device", func() (string, error) {
		d, err := newDevice(host, 1, selfTestShapeCapacity, memory.Config{}, true)
		if err != nil {
			return "", err
		}
		const size = 8 << 30
		s := d.DefaultStream()
		b, err := d.Alloc(size, s, selftest.Region)
		if err != nil {
			return "", fmt.Errorf("Alloc(8 GiB): %w", err)
		}
		defer d.Free(b, s)
		if got := d.alloc.Stats().AllocatedBytes[memory.StatAll].Current; got < size {
			return "", fmt.Errorf("8 GiB allocated but the allocator counts %d bytes", got)
		}
		v := backend.View{Buf: b, DType: backend.Float32, Shape: []int{2}, Strides: []int{1}}
		if err := d.CopyToHost(d.DefaultStream(), make([]byte, 8), v); err == nil {
			return "", errors.New("reading a shape-only buffer succeeded")
		}
		return fmt.Sprintf("%s allocated on a %s shape-only device, no data held, reading refused",
			units.Bytes(size), units.Bytes(selfTestShapeCapacity)), nil
	})
}
