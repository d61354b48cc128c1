package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vramgo/vram/backend/cpu"
	"github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/backend/selftest"
	"github.com/vramgo/vram/backend/sim"
	"github.com/vramgo/vram/internal/printable"
	"github.com/vramgo/vram/memory"
)

// doctorReport is what "vram doctor" finds; --json prints it as is.
type doctorReport struct {
	// Environment holds one check per setting of the devices vram
	// allocates on (VRAM_ALLOC_CONF, VRAM_SIM_DEVICES, VRAM_SIM_SHAPE_ONLY,
	// VRAM_CUDNN, VRAM_CPU_MEMORY_LIMIT), then a skipped one for each of
	// PyTorch's PYTORCH_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF that is set,
	// which vram does not read.
	Environment []selftest.Check `json:"environment"`
	// CPU and Sim are the self-tests of the CPU and the simulated devices
	// (cpu.SelfTest, sim.SelfTest).
	CPU []selftest.Check `json:"cpu"`
	Sim []selftest.Check `json:"sim"`
	// CUDA is the driver, the libraries and every GPU with its self-test
	// (cuda.SelfTest).
	CUDA *cuda.SelfTestReport `json:"cuda"`
	// Failed counts the failed checks, invalid settings, missing
	// libraries and a driver that is missing, cannot be used or sees no
	// GPU: the exit status is 0 exactly when it is 0.
	Failed int `json:"failed"`
}

// The self-tests doctor runs; tests replace them to see every outcome on
// any machine.
var (
	cpuSelfTest  = cpu.SelfTest
	simSelfTest  = sim.SelfTest
	cudaSelfTest = cuda.SelfTest
)

func newDoctorCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the NVIDIA driver, the CUDA libraries and every GPU, and run vram's self-test",
		Long: `Doctor checks that vram works on this machine. It runs vram's own self-test on the
CPU, on a simulated GPU and on every NVIDIA GPU, through the paths that tensors use:
allocation, copies between host and device (from ordinary and from page-locked host
memory), the kernel compiler (NVRTC, for the GPU's own architecture) and its disk
cache, the elementwise and reduction kernels, a cuBLASLt matrix product checked
against the CPU, and the caching allocator (a block freed into the cache comes back
at the same address without a driver call; EmptyCache gives the memory back); on the
simulated GPU also an out-of-memory error and its fix, and a shape-only device. With
several GPUs it copies between neighbours. It says where the driver and each library
were found, or what to install, and lists every GPU (name, UUID, memory, compute
capability, multiprocessors) and the peer-access matrix. It also checks the settings
of the devices vram allocates on (VRAM_ALLOC_CONF, VRAM_SIM_DEVICES,
VRAM_SIM_SHAPE_ONLY, VRAM_CUDNN, VRAM_CPU_MEMORY_LIMIT) and reports an invalid one as a failed check.
PYTORCH_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF, which vram does not read, are noted
when set, with the VRAM_ALLOC_CONF that gives vram's devices the same settings.
cuDNN is optional: without it, convolutions, pooling and batch norm use vram's
own composed kernels, and doctor says so.

Libraries are searched in the directories of VRAM_CUDA_LIBS first, then by the
system's loader, then in /usr/local/cuda and in Python environments' nvidia
packages. On a machine without a GPU the CPU and simulated checks still run and the
CUDA checks say why they were skipped. The exit status is 0 only when the driver sees
at least one GPU, every library vram needs was found and every check passed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep := runDoctor()
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			} else if err := printDoctor(cmd.OutOrStdout(), rep); err != nil {
				return err
			}
			if p := rep.CUDA.Problem(); p != "" {
				return fmt.Errorf("doctor: %s", p)
			}
			if rep.Failed > 0 {
				return fmt.Errorf("doctor: %d %s failed", rep.Failed, plural(rep.Failed, "check", "checks"))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// runDoctor runs every check and counts the failures.
func runDoctor() *doctorReport {
	rep := &doctorReport{Environment: environmentChecks(), CPU: cpuSelfTest(), Sim: simSelfTest(), CUDA: cudaSelfTest()}
	rep.Failed = selftest.Failed(rep.Environment) + selftest.Failed(rep.CPU) + selftest.Failed(rep.Sim) + rep.CUDA.Failed()
	return rep
}

// environmentChecks reports each device setting as a check.
func environmentChecks() []selftest.Check {
	var checks []selftest.Check
	for _, s := range readEnvironment() {
		c := selftest.Check{Name: s.Name, Status: selftest.Pass, Detail: s.Detail}
		if !s.Set {
			c.Detail = "unset: " + c.Detail
		}
		if s.Err != nil {
			c.Status, c.Detail = selftest.Fail, s.Err.Error()
		}
		checks = append(checks, c)
	}
	return append(checks, pytorchAllocConfChecks()...)
}

// pytorchAllocConfVariables are PyTorch's allocator settings variables, in
// the order PyTorch's common settings read them: vram reads neither.
var pytorchAllocConfVariables = []string{"PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"}

// pytorchAllocConfChecks notes each of pytorchAllocConfVariables that is
// set, as a skipped check, not a failure: vram does not read it, and the
// note gives the VRAM_ALLOC_CONF that applies it under PyTorch's policy, or
// why that would be refused.
func pytorchAllocConfChecks() []selftest.Check {
	var checks []selftest.Check
	for _, name := range pytorchAllocConfVariables {
		v, ok := lookupEnv(name)
		if !ok {
			continue
		}
		c, err := memory.Config{Policy: memory.PolicyPyTorch}.With(v)
		detail := "read by PyTorch, not by vram; as VRAM_ALLOC_CONF it would be refused: "
		if err != nil {
			detail += err.Error()
		} else {
			detail = "read by PyTorch, not by vram: VRAM_ALLOC_CONF=" + c.String() + " gives vram's devices PyTorch's allocator with these settings"
			if nm := c.NotModelled(); len(nm) > 0 {
				detail += " (not modelled by vram, no effect: " + strings.Join(nm, ", ") + ")"
			}
		}
		checks = append(checks, selftest.Skipped(name, detail))
	}
	return checks
}

// printDoctor writes the report as text.
func printDoctor(w io.Writer, rep *doctorReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range rep.Environment {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, checkStatus(c), printable.String(c.Detail))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, part := range []struct {
		title  string
		checks []selftest.Check
	}{{"cpu", rep.CPU}, {"sim (a device of the self-test's own)", rep.Sim}} {
		fmt.Fprintf(w, "\n%s\n", part.title)
		if err := printChecks(w, part.checks); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	if err := printCUDA(w, rep.CUDA); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if p := rep.CUDA.Problem(); p != "" {
		fmt.Fprintf(w, "CUDA not checked: %s\n", printable.String(p))
	}
	if rep.Failed == 0 {
		_, err := fmt.Fprintln(w, "all checks passed")
		return err
	}
	_, err := fmt.Fprintf(w, "%d %s failed\n", rep.Failed, plural(rep.Failed, "check", "checks"))
	return err
}

// printChecks writes one indented line per check.
func printChecks(w io.Writer, checks []selftest.Check) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range checks {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", printable.String(c.Name), checkStatus(c), checkTime(c), printable.String(c.Detail))
	}
	return tw.Flush()
}

// printCUDA writes the driver, the libraries, the GPUs with their checks,
// the peer-access matrix and the peer copies.
func printCUDA(w io.Writer, r *cuda.SelfTestReport) error {
	d := r.Driver
	if !d.Usable {
		fmt.Fprintf(w, "driver  not usable: %s\n", printable.String(d.Error))
		for _, a := range d.Tried {
			fmt.Fprintf(w, "  tried %s (%s): %s\n", printable.String(a.Path), a.Where, printable.String(a.Err))
		}
		fmt.Fprintln(w, "GPU checks skipped: no usable NVIDIA driver")
		return printSkips(w, r.PeerCopies)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "driver\t%s\tsupports CUDA %s\t%s\n", orDash(d.Version), orDash(d.CUDAVersion), printable.String(d.Path))
	fmt.Fprintln(tw, "\t\t\t")
	for _, l := range r.Libraries {
		if l.Found {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s (%s)\n", l.Name, orDash(l.Version), l.Soname, printable.String(l.Path), l.Where)
			if l.Warning != "" {
				fmt.Fprintf(tw, "\t\twarning: %s\t\n", l.Warning)
			}
			continue
		}
		what := "missing"
		if l.Optional {
			what = "missing (optional)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", l.Name, what, printable.String(l.Error))
		fmt.Fprintf(tw, "\t\tneeded for %s\t\n", l.Needed)
		if l.Install != "" {
			fmt.Fprintf(tw, "\t\t%s\t\n", l.Install)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(r.GPUs) == 0 {
		fmt.Fprintf(w, "no GPU: %s\n", printable.String(r.NoGPU))
	}
	for _, g := range r.GPUs {
		const gib = 1 << 30
		free := "free unknown"
		if g.Memory.Free >= 0 {
			free = fmt.Sprintf("%.1f GiB free", float64(g.Memory.Free)/gib)
		}
		fmt.Fprintf(w, "GPU %d  %s  %s  %.1f GiB (%s)  compute capability %s  %d multiprocessors\n",
			g.Index, printable.String(g.Name), g.UUID, float64(g.Memory.Total)/gib, free, orDash(g.ComputeCapability), g.Multiprocessors)
		if err := printChecks(w, g.Checks); err != nil {
			return err
		}
	}
	if n := len(r.PeerAccess); n > 1 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "peer access (row can access column)")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprint(tw, "\t")
		for j := 0; j < n; j++ {
			fmt.Fprintf(tw, "%d\t", j)
		}
		fmt.Fprintln(tw)
		for i, row := range r.PeerAccess {
			fmt.Fprintf(tw, "%d\t", i)
			for j, ok := range row {
				switch {
				case i == j:
					fmt.Fprint(tw, "-\t")
				case ok:
					fmt.Fprint(tw, "yes\t")
				default:
					fmt.Fprint(tw, "no\t")
				}
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		return printChecks(w, r.PeerCopies)
	}
	return printSkips(w, r.PeerCopies)
}

// printSkips writes the skipped checks among checks, with their reasons.
func printSkips(w io.Writer, checks []selftest.Check) error {
	for _, c := range checks {
		if c.Status == selftest.Skip {
			if _, err := fmt.Fprintf(w, "%s skipped: %s\n", printable.String(c.Name), printable.String(c.Detail)); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkStatus(c selftest.Check) string {
	switch c.Status {
	case selftest.Skip:
		return "skipped"
	case selftest.Pass:
		return "ok"
	}
	return "FAILED"
}

func checkTime(c selftest.Check) string {
	if c.Status == selftest.Skip || c.Duration == 0 {
		return ""
	}
	return fmt.Sprintf("%.1f ms", float64(c.Duration)/float64(time.Millisecond))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
