#!/usr/bin/env python3
"""Writes the PyTorch-format snapshot pickles the trace package tests read.

No torch is needed: the dicts below have the layout of
torch.cuda.memory._snapshot() (torch/csrc/cuda/Module.cpp, PyTorch 2.1 to
2.11), built by hand, with frame lists shared between entries as PyTorch
shares them. For each snapshot the script also writes the vram JSON snapshots
the Go reader must produce (the documented mapping, done independently in
Python), so the test compares two implementations.

Run from this directory: python3 make_pickles.py
"""
import collections
import gzip
import json
import pickle
import zipfile

MiB = 1 << 20
A = 139638008184832  # small segment, device 0
B = 139640000000000  # expandable large segment, device 0
C = 139650000000000  # large segment allocated and freed in the history
D = 139700000000000  # small segment, device 1, older than its history
E = 139710000000000  # freed in device 1's history, never allocated there
STREAM = 94_000_000_000_000  # a cudaStream_t value

f_forward = {"filename": "train.py", "line": 42, "name": "forward"}
f_cpp = {"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"}
f_step = {"filename": "train.py", "line": 7, "name": "<module>"}
frames1 = [f_forward, f_step]          # shared by a block and its alloc
frames2 = [f_cpp, f_forward, f_step]
empty = []                             # PyTorch shares one empty list


def block(addr, size, req, state, frames=empty):
    return {"address": addr, "size": size, "requested_size": req, "state": state, "frames": frames}


def segment(dev, addr, size, stream, kind, expandable, blocks):
    alloc = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    req = sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated")
    return {
        "device": dev, "address": addr, "total_size": size,
        "allocated_size": alloc, "active_size": active, "requested_size": req,
        "stream": stream, "segment_type": kind, "segment_pool_id": (0, 0),
        "is_expandable": expandable, "frames": empty, "blocks": blocks,
    }


T0 = 1_700_000_000_000_000


def ev(action, addr, size, stream=0, t=0, frames=None, meta=""):
    e = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": T0 + t,
         "compile_context": "N/A", "user_metadata": meta}
    if action == "oom":
        e["device_free"] = e.pop("addr")
    if frames is not None:
        e["frames"] = frames
    return e


seg_a = segment(0, A, 2 * MiB, 0, "small", False, [
    block(A, 37888, 37632, "active_allocated", frames1),
    block(A + 37888, 512, 256, "active_allocated", frames2),
    block(A + 38400, 512, 8, "active_pending_free", frames2),
    block(A + 38912, 2 * MiB - 38912, 0, "inactive"),
])
seg_b = segment(0, B, 20 * MiB, STREAM, "large", True, [
    block(B, 10 * MiB, 10 * MiB, "active_allocated", frames2),
    block(B + 10 * MiB, 10 * MiB, 0, "inactive"),
])
seg_d = segment(1, D, 2 * MiB, 0, "small", False, [
    block(D, 512, 100, "active_allocated"),
    block(D + 512, 2 * MiB - 512, 0, "inactive"),
])

trace0 = [
    ev("segment_alloc", A, 2 * MiB, 0, 1, frames2),
    ev("alloc", A, 37632, 0, 2, frames1, "conv1"),
    ev("alloc", A + 37888, 256, 0, 3, frames2),
    ev("alloc", A + 38400, 1000, 0, 4, frames2),
    ev("free_requested", A + 38400, 1000, 0, 5, frames2),
    ev("free_completed", A + 38400, 1000, 0, 6, frames2),
    ev("segment_alloc", C, 20 * MiB, STREAM, 7, frames2),
    ev("alloc", C, 15_000_000, STREAM, 8, frames1),
    ev("free_requested", C, 15_000_000, STREAM, 9, frames1),
    ev("free_completed", C, 15_000_000, STREAM, 10, frames1),
    ev("segment_free", C, 20 * MiB, STREAM, 11, frames1),
    ev("alloc", A + 38400, 8, 0, 12, frames2, "optimizer"),
    ev("free_requested", A + 38400, 8, 0, 13, frames2),
    ev("segment_map", B, 20 * MiB, STREAM, 14, frames2),
    ev("alloc", B, 10 * MiB, STREAM, 15, frames2),
    ev("oom", 1234, 10**12, 0, 16, frames2),
    ev("snapshot", 0, 0, 0, 17),
]
trace1 = [
    ev("free_requested", E, 64, 0, 1),
    ev("free_completed", E, 64, 0, 2),
    ev("alloc", D, 100, 0, 3),
]

settings = {
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "max_split_size": -1,
    "garbage_collection_threshold": 0.0,
    "float_samples": [1234567.0, 0.1, 1e16, 1.5e-05, -2.5],
    "expandable_segments": True,
    "release_lock_on_cudamalloc": False,
    "roundup_power2_divisions": {"1": 0, "2": 0, "4": 1},
}

snapshot = {
    "segments": [seg_b, seg_d, seg_a],  # PyTorch sorts; the reader must not rely on it
    "device_traces": [trace0, trace1],
    "allocator_settings": settings,
    "external_annotations": [{"stage": "forward", "device": 0, "time_us": T0}],
}


# Expected vram JSON, by the mapping documented in doc.go.

def pyrepr(v):
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, (int, str)):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(pyrepr(x) for x in v) + ")"
    if isinstance(v, list):
        return "[" + ", ".join(pyrepr(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(pyrepr(k) + ": " + pyrepr(x) for k, x in v.items()) + "}"
    raise TypeError(v)


def frames_json(frames):
    return [{"function": f["name"], "file": f["filename"], "line": f["line"]} for f in frames]


def expected(dev, segments, trace, truncated):
    meta = {"source": "pytorch"}
    for k, v in settings.items():
        if k != "PYTORCH_CUDA_ALLOC_CONF":
            meta["allocator_settings." + k] = pyrepr(v)
    out = {
        "format": "vram-memory-snapshot", "version": 1, "device": dev,
        "capacity_bytes": 0, "config": settings["PYTORCH_CUDA_ALLOC_CONF"],
        "meta": meta, "history_truncated": truncated,
        "segments": [], "history": [],
    }
    for s in sorted(segments, key=lambda s: s["address"]):
        out["segments"].append({
            "address": s["address"], "size": s["total_size"], "stream": s["stream"],
            "pool": s["segment_type"], "expandable": s["is_expandable"],
            "blocks": [{"address": b["address"], "size": b["size"],
                        "requested_size": b["requested_size"], "state": b["state"],
                        "frames": frames_json(b["frames"])} for b in s["blocks"]],
        })
    for e in trace:
        out["history"].append({
            "action": e["action"], "address": e.get("addr", e.get("device_free")),
            "size": e["size"], "stream": e["stream"], "time_us": e["time_us"],
            "region": e["user_metadata"], "frames": frames_json(e.get("frames", [])),
        })
    return out


def write(name, data):
    with open(name, "wb") as f:
        f.write(data)


def main():
    for proto in (2, 4, 5):
        write(f"snapshot_p{proto}.pickle", pickle.dumps(snapshot, protocol=proto))
    p4 = pickle.dumps(snapshot, protocol=4)
    write("snapshot_p4.pickle.gz", gzip.compress(p4, mtime=0))
    write("truncated.pickle", p4[: len(p4) // 2])
    # An unknown opcode right after PROTO (2 bytes) and FRAME (9 bytes).
    write("corrupt.pickle", p4[:11] + b"\xff" + p4[11:])
    write("object.pickle", pickle.dumps({"segments": [], "x": collections.OrderedDict(a=1)}, protocol=4))

    # torch.cuda.memory_snapshot() of PyTorch before 2.1: a bare list of
    # segments whose blocks have no "address" (nor frames), only a history.
    old = []
    for s in (seg_a, seg_b):
        s = dict(s)
        del s["is_expandable"], s["frames"]
        s["blocks"] = [{"size": b["size"], "requested_size": b["requested_size"], "state": b["state"],
                        "history": [{"addr": b["address"], "real_size": b["requested_size"]}]}
                       for b in s["blocks"]]
        old.append(s)
    write("segments_only_p2.pickle", pickle.dumps(old, protocol=2))

    # torch.cuda.memory._snapshot() of PyTorch 2.0 (and 1.13): blocks with
    # no "address" nor "frames", but a "history" of the allocations they
    # held, newest first, with their stacks; trace entries without
    # time_us, compile_context or user_metadata; no allocator_settings.
    # The second block's older entry is of a block merged into it; the
    # third block (PyTorch 1.13) has no requested_size; the free block
    # keeps the history of what it held.
    f_old = [{"filename": "old.py", "line": 3, "name": "before"}]
    v20_blocks = [
        {"size": 37888, "requested_size": 37632, "state": "active_allocated",
         "history": [{"addr": A, "real_size": 37632, "frames": frames1}]},
        {"size": 1024, "requested_size": 1000, "state": "active_allocated",
         "history": [{"addr": A + 37888, "real_size": 1000, "frames": frames2},
                     {"addr": A + 38400, "real_size": 8, "frames": f_old}]},
        {"size": 512, "state": "active_allocated",
         "history": [{"addr": A + 38912, "real_size": 300, "frames": frames1}]},
        {"size": 2 * MiB - 39424, "requested_size": 0, "state": "inactive",
         "history": [{"addr": A + 39424, "real_size": 64, "frames": f_old}]},
    ]
    v20_seg = {"device": 0, "address": A, "total_size": 2 * MiB, "allocated_size": 39424,
               "active_size": 39424, "requested_size": 38932, "stream": 0, "segment_type": "small",
               "blocks": v20_blocks}
    v20_trace = [{"action": "segment_alloc", "addr": A, "size": 2 * MiB, "stream": 0, "frames": frames2},
                 {"action": "alloc", "addr": A, "size": 37632, "stream": 0, "frames": frames1}]
    write("snapshot_v20_p4.pickle", pickle.dumps({"segments": [v20_seg], "device_traces": [v20_trace]}, protocol=4))

    # torch.save(snapshot, "snapshot_torchsave.pt"): a zip archive, records
    # stored, the snapshot pickled with protocol 2 in NAME/data.pkl.
    with zipfile.ZipFile("snapshot_torchsave.pt", "w", compression=zipfile.ZIP_STORED) as z:
        for name, data in (("data.pkl", pickle.dumps(snapshot, protocol=2)), ("byteorder", b"little"),
                           (".data/version", b"3\n"), ("version", b"3\n")):
            z.writestr(zipfile.ZipInfo("snapshot_torchsave/" + name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    # pickle.dump(torch.cuda.memory_stats(), f): counters, not a snapshot.
    stats = collections.OrderedDict([("active.all.current", 3), ("allocated_bytes.all.current", 1024), ("num_ooms", 0)])
    write("memory_stats.pickle", pickle.dumps(stats, protocol=4))

    # record_function ranges recorded with the history (PyTorch 2.4 and
    # later): "user_defined" entries around device 0's first alloc and
    # free, and device 1's trace of nothing else.
    def annotation(name, edge, t):
        return {"action": "user_defined", "addr": 0, "size": 0, "stream": 0, "time_us": T0 + t,
                "frames": [{"filename": edge, "line": 0, "name": name}]}
    annotated0 = [trace0[0], annotation("forward", "START", 1), trace0[1], annotation("forward", "END", 2)] + trace0[2:]
    annotated1 = [annotation("eval", "START", 1), annotation("eval", "END", 2)]
    write("annotated_p4.pickle", pickle.dumps({"segments": [seg_a, seg_b], "device_traces": [annotated0, annotated1],
                                               "allocator_settings": snapshot["allocator_settings"]}, protocol=4))

    for dev, segs, trace, truncated in ((0, [seg_a, seg_b], trace0, False), (1, [seg_d], trace1, True)):
        with open(f"snapshot_expected_device{dev}.json", "w") as f:
            json.dump(expected(dev, segs, trace, truncated), f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
