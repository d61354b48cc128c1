package cuda

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/nvml"
)

// TestWorkspaceRegion checks that the cuBLASLt workspace the first matrix
// product allocates shows under its own region in the allocator's
// snapshot, summary and out-of-memory errors.
func TestWorkspaceRegion(t *testing.T) {
	d := gpu(t, 0)
	a := backendtest.NewView(t, d, backend.Float32, []int{1, 8, 8}, make([]float64, 64))
	b := backendtest.NewView(t, d, backend.Float32, []int{1, 8, 8}, make([]float64, 64))
	c := backendtest.NewView(t, d, backend.Float32, []int{1, 8, 8}, make([]float64, 64))
	if err := d.MatMul(d.DefaultStream(), c, a, b); err != nil {
		t.Fatal(err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	var ws int64
	for _, seg := range d.Allocator().Snapshot().Segments {
		for _, blk := range seg.Blocks {
			if blk.Region == WorkspaceRegion && blk.State == "active_allocated" {
				ws += blk.Size
			}
		}
	}
	if ws < workspaceBytes {
		t.Errorf("the snapshot holds %d bytes under %q, want the %d-byte workspace", ws, WorkspaceRegion, workspaceBytes)
	}
	if s := d.Allocator().Summary(); !strings.Contains(s, WorkspaceRegion) {
		t.Errorf("the summary does not list %q:\n%s", WorkspaceRegion, s)
	}
	_, err := d.Alloc(4*d.total, d.DefaultStream(), "too big")
	var oom *memory.OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatalf("Alloc(4x the card): %v, want *memory.OutOfMemoryError", err)
	}
	if !strings.Contains(err.Error(), WorkspaceRegion+" 32.00 MiB in 1") {
		t.Errorf("the out-of-memory error does not show the workspace:\n%v", err)
	}
}

// TestNVMLMatchesCUDA checks that every CUDA device finds its NVML device,
// with the same UUID.
func TestNVMLMatchesCUDA(t *testing.T) {
	gpu(t, 0)
	if err := nvmlReady(); err != nil {
		t.Skipf("no NVML: %v", err)
	}
	n, _ := Probe()
	for i := range n {
		h, ok := nvmlDeviceOf(i)
		if !ok {
			t.Errorf("cuda:%d: no NVML device found", i)
			continue
		}
		cd, err := cuda.DeviceGet(i)
		if err != nil {
			t.Fatal(err)
		}
		u, err1 := cuda.DeviceGetUUID(cd)
		nu, err2 := nvml.DeviceGetUUID(h)
		if err1 == nil && err2 == nil && u.String() != nu && !strings.HasPrefix(nu, "MIG-") {
			t.Errorf("cuda:%d is %s, its NVML device %s", i, u, nu)
		}
	}
}

// holderEnv makes TestOutOfMemoryNamesProcesses's child hold this many
// MiB of cuda:0 until its stdin closes.
const holderEnv = "VRAM_CUDA_HOLD_MIB"

// TestOutOfMemoryNamesProcesses starts a child process that holds 1 GiB of
// cuda:0 and checks that an out-of-memory error names it by pid, reports
// this process's own memory outside the allocator apart from it, and lists
// the machine's other GPUs.
func TestOutOfMemoryNamesProcesses(t *testing.T) {
	if v := os.Getenv(holderEnv); v != "" {
		holdMemory(t, v)
		return
	}
	d := gpu(t, 0)
	if m, err := d.MemoryInfo(); err != nil || m.ThisProcess < 0 {
		t.Skipf("NVML does not list this process (no NVML, or another PID namespace): %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutOfMemoryNamesProcesses$")
	cmd.Env = append(os.Environ(), holderEnv+"=1024")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	ready := bufio.NewScanner(stdout)
	for ready.Scan() && ready.Text() != "holding" {
	}
	go io.Copy(io.Discard, stdout)
	_, err = d.Alloc(4*d.total, d.DefaultStream(), "too big")
	var oom *memory.OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatalf("Alloc(4x the card): %v, want *memory.OutOfMemoryError", err)
	}
	t.Logf("the OOM error:\n%v", err)
	found := false
	if oom.Memory.Device != "cuda:0" || oom.Memory.Reserved != oom.Reserved || oom.Memory.Total != d.total {
		t.Errorf("device memory %+v: want cuda:0's, with the allocator's reserve", oom.Memory)
	}
	for _, p := range oom.Memory.Others {
		if p.PID == os.Getpid() {
			t.Errorf("this process is listed among the others: %+v", p)
		}
		if p.PID == cmd.Process.Pid {
			found = true
			if p.Bytes < 1<<30 {
				t.Errorf("the child holds %d bytes, want at least 1 GiB", p.Bytes)
			}
		}
	}
	if !found {
		t.Errorf("the child (pid %d) is not among the other processes %+v", cmd.Process.Pid, oom.Memory.Others)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("pid %d (", cmd.Process.Pid)) {
		t.Errorf("the message does not name the child by pid")
	}
	if own := oom.Memory.ProcessOther(); own <= 0 || !strings.Contains(err.Error(), "this process outside the allocator") {
		t.Errorf("this process's context is not reported apart (ProcessOther %d)", own)
	}
	n, _ := Probe()
	if len(oom.Peers) != n-1 {
		t.Errorf("%d other GPUs reported, the machine has %d: %+v", len(oom.Peers), n-1, oom.Peers)
	}
	for _, p := range oom.Peers {
		if p.Device == "cuda:0" || !strings.HasPrefix(p.Device, "cuda:") || p.Total <= 0 || p.Free < 0 || p.Free > p.Total {
			t.Errorf("peer %+v", p)
		}
	}
}

// holdMemory is the child of TestOutOfMemoryNamesProcesses: it allocates
// mib MiB on cuda:0, says "holding", and waits for stdin to close.
func holdMemory(t *testing.T, mib string) {
	var n int64
	if _, err := fmt.Sscan(mib, &n); err != nil {
		t.Fatal(err)
	}
	d, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Alloc(n<<20, d.DefaultStream(), "held")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(b, d.DefaultStream())
	fmt.Println("holding")
	io.Copy(io.Discard, os.Stdin)
}
