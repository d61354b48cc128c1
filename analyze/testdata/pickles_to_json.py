#!/usr/bin/env python3
"""Writes NAME.json.gz beside NAME.pickle.gz for a few of the recorded
snapshots: the dict each pickle holds, saved with json.dump as PyTorch users
save torch.cuda.memory._snapshot() when they want JSON. The tests check that
vram reads each JSON file as it reads the pickle of the same dict.

json.dump writes tuples as lists and shares nothing, so the JSON files are
tens of times the size of the pickles before compression.

Run from this directory: python3 pickles_to_json.py
"""
import gzip
import json
import pickle

NAMES = [
    "pytorch_oom_fragmented",  # an OOM under a memory fraction, Python and C++ stacks
    "pytorch_v_oom_fragmented_python",  # _record_memory_history(stacks="python")
    "pytorch_v_oom_train_expandable",  # expandable_segments:True, an OOM in training
    "pytorch_v_train_ring_wrapped",  # stacks="all", max_entries=400
]

for name in NAMES:
    with gzip.open(name + ".pickle.gz", "rb") as f:
        snapshot = pickle.load(f)
    # mtime=0 keeps the output the same from run to run.
    with gzip.GzipFile(name + ".json.gz", "wb", mtime=0) as f:
        f.write(json.dumps(snapshot).encode())
