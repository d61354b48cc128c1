package vram

import (
	"sync"
	"unsafe"
)

// Device copies of the composed ops' constant tables.
//
// The composed convolution and pooling paths gather through index tables
// built on the host and cached there (indexCache). Uploading a table at
// every call costs a host-to-device copy per op, and makes the op
// impossible to record in a graph (CaptureGraph refuses copies from the
// host). So each device keeps the tables it was given, keyed by the cached
// host slice itself (its address and length, and a tag for tables derived
// from it): the entry holds the slice, so its address cannot be reused for
// another while the entry lives. A device keeps at most constLimit bytes;
// an insertion past it empties the device's cache first, as indexCache
// does, and EmptyCache drops a device's tables (they count as live
// tensors, in MemoryAllocated and Storage, while cached). The CPU keeps
// none: its tables need no upload. Callers get a view of the cached tensor
// and release it as any tensor; the cache's own reference keeps the
// memory.

// constLimit bounds the bytes of device tables cached per device: 64 MiB.
const constLimit = 64 << 20

// constKey keys a table: the host slice it comes from, the dtype and a
// tag for tables computed from the slice.
type constKey struct {
	ptr unsafe.Pointer
	n   int
	dt  DType
	tag string
}

type constEntry struct {
	t    *Tensor
	host any // the host slice, kept alive with the entry
}

// constCache is one device's tables.
type constCache struct {
	mu    sync.Mutex
	m     map[constKey]constEntry
	bytes int64
}

var deviceConsts sync.Map // *devState -> *constCache

// deviceTable returns a view, of shape shape, of a tensor on ds holding
// what build makes from host, the cached slice whose address keys it
// (with dt and tag). build runs once per key while the entry is cached; it
// must return a tensor on ds of dtype dt, not tracked by any scope.
func deviceTable[T any](ds *devState, host []T, dt DType, tag string, shape Shape, build func() *Tensor) *Tensor {
	if len(host) == 0 || ds.dev == CPU {
		t := build()
		defer t.Release()
		return t.Reshape(shape...)
	}
	k := constKey{ptr: unsafe.Pointer(unsafe.SliceData(host)), n: len(host), dt: dt, tag: tag}
	v, _ := deviceConsts.LoadOrStore(ds, &constCache{})
	c := v.(*constCache)
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if !ok {
		var t *Tensor
		NoGrad(func() { t = Keep(build()) })
		size := int64(t.NumElements()) * int64(t.DType().Size())
		c.mu.Lock()
		if old, ok := c.m[k]; ok {
			c.mu.Unlock()
			t.Release()
			e = old
		} else {
			if c.m == nil || c.bytes+size > constLimit {
				for _, old := range c.m {
					old.t.Release()
				}
				c.m, c.bytes = map[constKey]constEntry{}, 0
			}
			e = constEntry{t: t, host: host}
			if size <= constLimit {
				c.m[k] = e
				c.bytes += size
			}
			c.mu.Unlock()
			if size > constLimit {
				defer t.Release()
			}
		}
	}
	var out *Tensor
	NoGrad(func() { out = e.t.Reshape(shape...) })
	return out
}

// int64Table is deviceTable of an int64 slice uploaded as it is.
func int64Table(ds *devState, idx []int64, shape Shape) *Tensor {
	return deviceTable(ds, idx, Int64, "", shape, func() *Tensor {
		return FromSlice(idx, Shape{len(idx)}, ds.dev)
	})
}

// dropTables releases the tables cached for d; views still in use keep
// their memory until released.
func dropTables(d Device) {
	ds, ok := devices.Load(d)
	if !ok {
		return
	}
	v, ok := deviceConsts.Load(ds.(*devState))
	if !ok {
		return
	}
	c := v.(*constCache)
	c.mu.Lock()
	old := c.m
	c.m, c.bytes = nil, 0
	c.mu.Unlock()
	for _, e := range old {
		e.t.Release()
	}
}
