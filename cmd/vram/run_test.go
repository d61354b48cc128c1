package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRunVariablesAndExitCodes(t *testing.T) {
	// An executable file the system cannot run: neither a binary of its
	// format nor a script.
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte{0x7f, 'E', 'L', 'F', 0, 1, 2, 3}, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout []string // lines the output contains
		stderr string   // a part of the last line of stderr
	}{
		{
			name: "variables",
			args: []string{"run", "--nproc-per-node", "2", "sh", "-c",
				`echo "$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR $VRAM_AGENT_STORE"`},
			stdout: []string{"[rank 0] 0 0 2 2 0 127.0.0.1 1\n", "[rank 1] 1 1 2 2 0 127.0.0.1 1\n"},
			stderr: "vram run: started 2 ranks, process ids",
		},
		{
			name:   "one rank",
			args:   []string{"run", "--nproc-per-node", "1", "true"},
			stderr: "vram run: started 1 rank, process id ",
		},
		{
			name:   "flags after the program are the program's",
			args:   []string{"run", "--nproc-per-node", "1", "sh", "-c", `echo "$@"`, "x", "--nnodes", "5"},
			stdout: []string{"[rank 0] --nnodes 5\n"},
		},
		{
			name: "a failed rank's status, the others stopped",
			args: []string{"run", "--nproc-per-node", "3", "--stop-timeout", "2s", "sh", "-c",
				`if [ "$RANK" = 2 ]; then exit 7; fi; sleep 30`},
			code:   7,
			stderr: "vram: run: rank 2 (local rank 2) exited with status 7; stopped the other ranks",
		},
		{
			name:   "a rank killed by a signal",
			args:   []string{"run", "--nproc-per-node", "1", "sh", "-c", `kill -9 $$`},
			code:   137,
			stderr: "vram: run: rank 0 (local rank 0) was killed by signal SIGKILL (status 137)",
		},
		{
			name:   "second node's ranks",
			args:   []string{"run", "--nproc-per-node", "2", "--nnodes", "3", "--node-rank", "2", "--master-port", "1", "sh", "-c", `echo "$RANK $WORLD_SIZE $GROUP_RANK $MASTER_PORT"`},
			stdout: []string{"[rank 4] 4 6 2 1\n", "[rank 5] 5 6 2 1\n"},
		},
		{"no program", []string{"run", "--nproc-per-node", "2"}, exitUsage, nil, "needs at least 1 argument, got 0"},
		{"no nproc", []string{"run", "true"}, exitUsage, nil, "run: --nproc-per-node N is required: the ranks to start on this node, 1 to 1024"},
		{"zero nproc", []string{"run", "--nproc-per-node", "0", "true"}, exitUsage, nil, "--nproc-per-node 0 out of range: want 1 to 1024"},
		{"bad node rank", []string{"run", "--nproc-per-node", "1", "--nnodes", "2", "--node-rank", "2", "true"}, exitUsage, nil, "--node-rank 2 out of range for --nnodes 2"},
		{"bad port", []string{"run", "--nproc-per-node", "1", "--master-port", "70000", "true"}, exitUsage, nil, "--master-port 70000"},
		{"huge nproc", []string{"run", "--nproc-per-node", "100000000", "true"}, exitUsage, nil, "--nproc-per-node 100000000 out of range"},
		{"master host and port", []string{"run", "--nproc-per-node", "1", "--master-addr", "10.0.0.1:29500", "true"}, exitUsage, nil, `--master-addr "10.0.0.1:29500": a host, without the port: give --master-addr 10.0.0.1 --master-port 29500`},
		{"master IPv6 and port", []string{"run", "--nproc-per-node", "1", "--master-addr", "[::1]:29500", "true"}, exitUsage, nil, "give --master-addr ::1 --master-port 29500"},
		{"master with a blank", []string{"run", "--nproc-per-node", "1", "--master-addr", "bad host", "true"}, exitUsage, nil, `--master-addr "bad host": not an IP address or host name: ' ' is not allowed in one`},
		{"master with a slash", []string{"run", "--nproc-per-node", "1", "--master-addr", "http://node0", "true"}, exitUsage, nil, `--master-addr "http://node0": not an IP address or host name`},
		{"master empty label", []string{"run", "--nproc-per-node", "1", "--master-addr", "node..lan", "true"}, exitUsage, nil, `--master-addr "node..lan": not an IP address or host name`},
		{"master host name", []string{"run", "--nproc-per-node", "1", "--master-addr", "node-0.cluster_a.lan.", "true"}, 0, nil, "vram run: started 1 rank"},
		{"master IPv6", []string{"run", "--nproc-per-node", "1", "--master-addr", "::1", "true"}, 0, nil, "vram run: started 1 rank"},
		{"empty program", []string{"run", "--nproc-per-node", "1", ""}, exitUsage, nil, `run: PROGRAM "" is empty`},
		{"missing program", []string{"run", "--nproc-per-node", "1", "vram-no-such-program"}, 127, nil, "vram-no-such-program: program not found"},
		{"missing path", []string{"run", "--nproc-per-node", "2", "/nonexistent/vram-prog"}, 127, nil, "/nonexistent/vram-prog: program not found"},
		{"not executable", []string{"run", "--nproc-per-node", "1", "./run_test.go"}, 126, nil, "./run_test.go: not executable"},
		{"directory", []string{"run", "--nproc-per-node", "1", "./testdata"}, 126, nil, "./testdata: not executable"},
		{"not a program", []string{"run", "--nproc-per-node", "1", garbage}, 126, nil, garbage + ": not executable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, stderr)
			}
			if el := time.Since(start); el > 15*time.Second {
				t.Errorf("took %v", el)
			}
		})
	}
}

// TestRunInput checks that the input of vram run is local rank 0's, as a
// program run alone reads it, and that the other ranks read none: it was
// no rank's.
func TestRunInput(t *testing.T) {
	script := `echo "$LOCAL_RANK read [$(cat)]"`
	for _, tc := range []struct {
		name   string
		nproc  string
		stdin  string
		stdout []string
	}{
		{"one rank", "1", "data\n", []string{"[rank 0] 0 read [data]\n"}},
		{"two ranks", "2", "a\nb\n", []string{"[rank 0] 0 read [a\n[rank 0] b]\n", "[rank 1] 1 read []\n"}},
		{"no input", "2", "", []string{"[rank 0] 0 read []\n", "[rank 1] 1 read []\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLIInput(t, strings.NewReader(tc.stdin), "run", "--nproc-per-node", tc.nproc, "sh", "-c", script)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}

// TestRunMasterPortInUse starts vram run on a --master-port another
// program listens on: the error names the flag and what to do, in the
// command line's terms rather than the library's (MASTER_PORT, a group
// not closed, an invalid argument).
func TestRunMasterPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"one node", []string{"--nproc-per-node", "2", "--master-port", port},
			"run: --master-port " + port + " is in use on this node, by another job or program: choose another, or leave --master-port out for a free one"},
		{"one node, localhost", []string{"--nproc-per-node", "1", "--master-addr", "localhost", "--master-port", port},
			"run: --master-port " + port + " is in use on this node"},
		{"node 0 of two", []string{"--nproc-per-node", "1", "--nnodes", "2", "--master-port", port},
			"run: --master-port " + port + " is in use on this node, by another job or program: choose another, the same on every node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"run"}, tc.args...), "true")
			code, stdout, stderr := runCLI(t, args...)
			if code != exitFailure {
				t.Errorf("exit %d, want %d", code, exitFailure)
			}
			if stdout != "" {
				t.Errorf("stdout not empty:\n%s", stdout)
			}
			checkErrorLine(t, stderr, tc.want)
			for _, bad := range []string{"MASTER_PORT", "invalid argument", "not closed", "parallel:"} {
				if strings.Contains(stderr, bad) {
					t.Errorf("stderr %q holds %q", stderr, bad)
				}
			}
		})
	}
}
