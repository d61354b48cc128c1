# Probes how the CUDA driver's virtual-memory calls scale, through ctypes
# and nothing else (run on a GPU machine: python3 scripts/vmm_probe.py):
# whether one cuMemUnmap may cover several adjacent mappings, and the cost of
# cuMemCreate, cuMemMap, cuMemSetAccess over one mapping and over a run of 8,
# cuMemUnmap one by one and over the run, cuMemRelease, and mapping a kept
# physical handle again elsewhere, for chunks of 2, 20 and 64 MiB (medians
# of 20 rounds). BENCHMARKS.md ("Measured again on 2026-12-06") has its
# output on an H100; memory/sim.go's cost model follows it.
import ctypes as C, time, statistics as S
cu = C.CDLL("libcuda.so.1")
def ck(r, what):
    if r != 0:
        raise RuntimeError(f"{what}: CUresult {r}")
class Loc(C.Structure): _fields_ = [("type", C.c_int), ("id", C.c_int)]
class Flags(C.Structure): _fields_ = [("comp", C.c_ubyte), ("rdma", C.c_ubyte), ("usage", C.c_ushort), ("res", C.c_ubyte * 4)]
class Prop(C.Structure): _fields_ = [("type", C.c_int), ("htypes", C.c_int), ("loc", Loc), ("win32", C.c_void_p), ("flags", Flags)]
class Acc(C.Structure): _fields_ = [("loc", Loc), ("flags", C.c_int)]
assert C.sizeof(Prop) == 32 and C.sizeof(Acc) == 12
ck(cu.cuInit(0), "cuInit")
dev = C.c_int(); ck(cu.cuDeviceGet(C.byref(dev), 0), "cuDeviceGet")
ctx = C.c_void_p(); ck(cu.cuDevicePrimaryCtxRetain(C.byref(ctx), dev), "retain"); ck(cu.cuCtxSetCurrent(ctx), "setcurrent")
prop = Prop(1, 0, Loc(1, 0), None, Flags())
acc = Acc(Loc(1, 0), 3)
G = 2 << 20
base = C.c_uint64()
VA = 64 << 30
ck(cu.cuMemAddressReserve(C.byref(base), C.c_size_t(VA), C.c_size_t(0), C.c_uint64(0), C.c_uint64(0)), "reserve")
b = base.value
def create(sz):
    h = C.c_uint64(); ck(cu.cuMemCreate(C.byref(h), C.c_size_t(sz), C.byref(prop), C.c_uint64(0)), "create"); return h.value
def mp(a, sz, h): ck(cu.cuMemMap(C.c_uint64(a), C.c_size_t(sz), C.c_size_t(0), C.c_uint64(h), C.c_uint64(0)), "map")
def acc_(a, sz): ck(cu.cuMemSetAccess(C.c_uint64(a), C.c_size_t(sz), C.byref(acc), C.c_size_t(1)), "setaccess")
def unmap(a, sz): return cu.cuMemUnmap(C.c_uint64(a), C.c_size_t(sz))
def rel(h): ck(cu.cuMemRelease(C.c_uint64(h)), "release")
def t(f):
    s = time.perf_counter(); r = f(); return (time.perf_counter() - s) * 1e6, r
# 1. Can one cuMemUnmap cover two adjacent mappings?
h1, h2 = create(G), create(G)
mp(b, G, h1); mp(b + G, G, h2); acc_(b, 2 * G)
r = unmap(b, 2 * G)
print("unmap spanning two mappings: CUresult", r)
if r != 0:
    ck(unmap(b, G), "unmap1"); ck(unmap(b + G, G), "unmap2")
rel(h1); rel(h2)
# 2. Timings, per chunk size, 20 rounds of 8 chunks each.
for sz in (2 << 20, 20 << 20, 64 << 20):
    res = {k: [] for k in ("create", "map", "setaccess1", "setaccess_run8", "unmap", "release", "unmap_run8", "remap_kept", "release_after_map", "unmap_released")}
    for rnd in range(20):
        a0 = b + (rnd % 4) * 8 * sz + (8 << 30)
        hs = []
        for i in range(8):
            dt, h = t(lambda: create(sz)); res["create"].append(dt); hs.append(h)
            dt, _ = t(lambda: mp(a0 + i * sz, sz, h)); res["map"].append(dt)
        if rnd % 2 == 0:
            dt, _ = t(lambda: acc_(a0, 8 * sz)); res["setaccess_run8"].append(dt)
        else:
            for i in range(8):
                dt, _ = t(lambda: acc_(a0 + i * sz, sz)); res["setaccess1"].append(dt)
        # Unmap as one call when the driver allows it, else one by one.
        if r == 0 and rnd % 2 == 0:
            dt, rr = t(lambda: unmap(a0, 8 * sz)); ck(rr, "unmap run"); res["unmap_run8"].append(dt)
        else:
            for i in range(8):
                dt, rr = t(lambda: unmap(a0 + i * sz, sz)); ck(rr, "unmap"); res["unmap"].append(dt)
        # Move the kept handles elsewhere: map + access, no create.
        a1 = a0 + (4 << 30)
        for i in range(8):
            dt, _ = t(lambda: (mp(a1 + i * sz, sz, hs[i]), acc_(a1 + i * sz, sz))); res["remap_kept"].append(dt)
        for i in range(8):
            ck(unmap(a1 + i * sz, sz), "unmap")
        for h in hs:
            dt, _ = t(lambda: rel(h)); res["release"].append(dt)
        # Release right after mapping: the memory goes when it is unmapped.
        h = create(sz); mp(a0, sz, h); acc_(a0, sz)
        dt, _ = t(lambda: rel(h)); res["release_after_map"].append(dt)
        dt, rr = t(lambda: unmap(a0, sz)); ck(rr, "unmap released"); res["unmap_released"].append(dt)
    print(f"chunk {sz >> 20} MiB: " + ", ".join(f"{k} {S.median(v):.1f}" for k, v in res.items() if v) + " (µs, medians)")
free, total = C.c_size_t(), C.c_size_t(); cu.cuMemGetInfo_v2(C.byref(free), C.byref(total))
print("free after:", free.value >> 20, "MiB of", total.value >> 20)
