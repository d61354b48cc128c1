#!/usr/bin/env bash
# gpu-bench-monitor.sh measures and checks the monitoring side of vram on a
# GPU machine, after scripts/gpu-test.sh built .gpu/bins.tar.xz here:
#
#   scripts/gpu-bench-monitor.sh        (there, from the repository root)
#
# It runs the NVML and monitor GPU tests, then times one full query of every
# GPU through vram (Go benchmarks), through pynvml when Python has it, and
# GPUtil's way (start nvidia-smi, parse its CSV); times Prometheus scrapes of
# "vram exporter"; prints "vram smi" and a few "vram watch" frames; and, when
# PyTorch is there, replays the seeds' GPUtil walkthrough with "vram smi"
# watching: used memory must rise when tensors are allocated, stay after
# they are deleted and fall after torch.cuda.empty_cache(). Everything is
# logged to $OUT (or .gpu/logs).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-.gpu/logs}
# The binaries travel packed (scripts/gpu-test.sh build): unpack them.
work=$(mktemp -d "${TMPDIR:-/tmp}/vram-bench-monitor.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xJf .gpu/bins.tar.xz || { echo "no .gpu/bins.tar.xz: run scripts/gpu-test.sh build where Go is" >&2; exit 1; }
BIN=$work/bin
mkdir -p "$OUT"
export VRAM_REQUIRE_CUDA=1
V=$BIN/vram

step() { echo; echo "== $* =="; }

step gpus
nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv,noheader 2>&1

step "native/nvml and monitor GPU tests"
(cd native/nvml && timeout 60 "$BIN/native_nvml.test" -test.v -test.count=1 -test.run . 2>&1) | tee "$OUT/nvml-test.log" | grep -E '^(---|ok|FAIL|PASS)|gpu_test.go' | head -40
(cd monitor && timeout 60 "$BIN/monitor.test" -test.v -test.count=1 -test.run 'NVML|Walkthrough|Concurrent|Collector|Allocator' 2>&1) | tee "$OUT/monitor-test.log" | grep -E '^(---|ok|FAIL|PASS)|gpu_test.go' | head -40

step "benchmarks: vram"
(cd native/nvml && timeout 60 "$BIN/native_nvml.test" -test.run '^$' -test.bench QueryAll -test.benchtime 5000x -test.count 3 2>&1) | tee "$OUT/bench-nvml.log" | grep Benchmark
(cd monitor && timeout 90 "$BIN/monitor.test" -test.run '^$' -test.bench 'NVMLRead|Scrape' -test.benchtime 2000x -test.count 3 2>&1) | tee "$OUT/bench-monitor.log" | grep Benchmark
(cd monitor && timeout 60 "$BIN/monitor.test" -test.run '^$' -test.bench 'NvidiaSMI' -test.benchtime 20x -test.count 2 2>&1) | tee -a "$OUT/bench-monitor.log" | grep Benchmark

step "benchmarks: pynvml and nvidia-smi from Python"
timeout 60 python3 - <<'PY' 2>&1 | tee "$OUT/bench-python.log"
import statistics, subprocess, time
try:
    import pynvml
except Exception as e:
    pynvml = None
    print("pynvml: not importable:", e)
if pynvml:
    pynvml.nvmlInit()
    hs = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    def query():
        for h in hs:
            pynvml.nvmlDeviceGetMemoryInfo(h)
            pynvml.nvmlDeviceGetUtilizationRates(h)
            pynvml.nvmlDeviceGetTemperature(h, 0)
            pynvml.nvmlDeviceGetName(h)
            pynvml.nvmlDeviceGetUUID(h)
    for _ in range(200):
        query()
    ts = []
    for _ in range(5000):
        t = time.perf_counter(); query(); ts.append(time.perf_counter() - t)
    print("pynvml query of %d GPU(s): median %.4f ms, mean %.4f ms (5000 runs; memory, utilization, temperature, name, UUID)"
          % (len(hs), statistics.median(ts) * 1e3, statistics.mean(ts) * 1e3))
cmd = ["nvidia-smi", "--query-gpu=index,uuid,utilization.gpu,memory.total,memory.used,memory.free,driver_version,name,gpu_serial,display_active,display_mode,temperature.gpu", "--format=csv,noheader,nounits"]
ts = []
for _ in range(20):
    t = time.perf_counter()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True).stdout.decode()
    [l.split(", ") for l in out.strip().split("\n")]
    ts.append(time.perf_counter() - t)
print("GPUtil's way (nvidia-smi subprocess + CSV) from Python: median %.1f ms, min %.1f ms (20 runs)" % (statistics.median(ts) * 1e3, min(ts) * 1e3))
PY

step "vram smi"
$V smi 2>&1 | tee "$OUT/smi.txt"
$V smi -L 2>&1
$V smi --json >"$OUT/reading.json" 2>&1
for i in 1 2 3 4 5; do $V smi --json >"$OUT/reading-$i.json"; sleep 0.2; done

step "vram watch (3 frames, not a terminal)"
timeout 20 $V watch --count 3 --interval 300ms 2>&1 | tee "$OUT/watch.txt" | tail -12

step "vram exporter scrape latency"
$V exporter --listen 127.0.0.1:19400 2>"$OUT/exporter.stderr" &
EXP=$!
sleep 1
timeout 60 python3 - <<'PY' 2>&1 | tee "$OUT/scrape.log"
import statistics, time, urllib.request
url = "http://127.0.0.1:19400/metrics"
body = urllib.request.urlopen(url, timeout=5).read().decode()
open("%s/metrics.txt" % __import__("os").environ.get("OUT", ".gpu/logs"), "w").write(body)
ts = []
for _ in range(300):
    t = time.perf_counter(); urllib.request.urlopen(url, timeout=5).read(); ts.append(time.perf_counter() - t)
print("exporter scrape (HTTP GET /metrics from Python, %d lines): median %.3f ms, p90 %.3f ms (300 scrapes)"
      % (body.count("\n"), statistics.median(ts) * 1e3, sorted(ts)[270] * 1e3))
PY
kill "$EXP" 2>/dev/null
wait "$EXP" 2>/dev/null
grep -E '^vram_gpu_(memory_used|utilization|process_memory|processes_visible)' "$OUT/metrics.txt" | head

step "the seeds' walkthrough: PyTorch allocates, vram smi watches"
if timeout 30 python3 -c 'import torch' 2>/dev/null; then
	VRAM=$V timeout 90 python3 - <<'PY' 2>&1 | tee "$OUT/walkthrough.txt"
import json, os, subprocess, torch
def smi(label):
    r = json.loads(subprocess.run([os.environ["VRAM"], "smi", "--json"], stdout=subprocess.PIPE, check=True).stdout)
    g = r["gpus"][0]
    me = [p for p in g["processes"] if p["pid"] == os.getpid()]
    used = g["memory"]["used_bytes"]
    print("%-34s used %6.2f GiB; this process %s; processes visible %s"
          % (label, used / 2**30, "%.2f GiB" % (me[0]["used_bytes"] / 2**30) if me else "not listed", g["processes_visible"]))
    return used
a = smi("before CUDA:")
torch.zeros(1, device="cuda")
b = smi("CUDA context only:")
ts = [torch.randn(10000000, 10, device="cuda") for _ in range(10)]
c = smi("after allocating 10 tensors:")
del ts
d = smi("after del:")
torch.cuda.empty_cache()
e = smi("after torch.cuda.empty_cache():")
ok = c > b + 3 * 2**30 and abs(d - c) < 64 * 2**20 and e < c - 3 * 2**30
print("walkthrough:", "OK" if ok else "FAILED", "(rises by %.2f GiB, stays, falls by %.2f GiB)" % ((c - b) / 2**30, (d - e) / 2**30))
PY
else
	echo "import torch failed (or took over 30 s): skipped"
fi
echo
echo "== done =="
