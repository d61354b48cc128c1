package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/vramgo/vram/internal/printable"
	"github.com/vramgo/vram/memory"
)

// Exit statuses.
const (
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // bad command line: unknown command or flag, bad value
	// exitInterrupted ends a command that Ctrl-C stopped before it was
	// done: 128 + SIGINT, as a shell reports a program the signal ended.
	exitInterrupted = 130
)

// errInterrupted is the cause of the context of a command when Ctrl-C
// (SIGINT) cancels it. A command that stops early on it returns an error
// wrapping it, and vram exits with exitInterrupted; one for which Ctrl-C
// is the way to end it (watch, exporter) returns nil.
var errInterrupted = errors.New("interrupted")

func main() {
	ctx, stop := interruptContext()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// interruptContext returns a context that the first Ctrl-C cancels with
// the cause errInterrupted; until stop is called, later ones are ignored
// rather than ending the process. Unlike signal.NotifyContext's, the cause
// is one a command can tell from any other.
func interruptContext() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	go func() {
		select {
		case <-sigs:
			cancel(errInterrupted)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel(context.Canceled)
	}
}

// stopContext returns a context that SIGTERM (what systemd, Docker and
// Kubernetes send to stop a service) and SIGHUP (a closed terminal) cancel,
// for the commands that run until they are stopped (watch, exporter):
// they end on these as on Ctrl-C, with status 0, rather than being killed
// by them. SIGHUP is left alone when the process was started ignoring it
// (nohup), which catching it would undo. Call stop when done.
func stopContext(ctx context.Context) (context.Context, context.CancelFunc) {
	sigs := []os.Signal{syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return signal.NotifyContext(ctx, sigs...)
}

// run configures vram from the environment, executes the command line args
// and returns the exit status. Commands read the input "-" from stdin (nil
// for the process's own). Errors are printed to stderr as one line,
// out-of-memory diagnoses as the paragraph they are.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	configure(stderr)
	root := newRootCmd()
	if len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) {
		plainFlagUsages(root)
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	helpErr := checkHelpWrites(root)
	var cmd *cobra.Command
	var err error
	if len(args) > 0 && (args[0] == "" || args[0] == "-") {
		// cobra reads these as no command at all and prints the help:
		// "vram "$CMD"" of an unset variable would exit 0.
		err = usagef("unknown command %q (see '%s --help')", args[0], root.CommandPath())
	} else {
		cmd, err = root.ExecuteContextC(ctx)
	}
	if err == nil && *helpErr != nil {
		err = *helpErr // help that could not be written
	}
	if err != nil {
		msg := withCommand(root, cmd, oneLine(err))
		fmt.Fprintf(stderr, "vram: %s\n", printable.Text(msg)) // messages can quote names from files
		var ue *usageError
		if errors.As(err, &ue) || isCobraUsageError(err) {
			return exitUsage
		}
		if errors.Is(err, errInterrupted) {
			return exitInterrupted
		}
		var ce *exitCodeError
		if errors.As(err, &ce) && ce.code > 0 && ce.code < 256 {
			return ce.code
		}
		return exitFailure
	}
	return 0
}

// plainFlagUsages removes from the usage of every flag of c and of the
// commands below it the backquotes that name its value in --help ("from
// `FILE`"): a shell's completion script shows the usage as it is, beside
// the flag, and help is not printed in the same run.
func plainFlagUsages(c *cobra.Command) {
	unquote := func(f *pflag.Flag) { f.Usage = strings.ReplaceAll(f.Usage, "`", "") }
	c.Flags().VisitAll(unquote)
	c.PersistentFlags().VisitAll(unquote)
	for _, sub := range c.Commands() {
		plainFlagUsages(sub)
	}
}

// checkHelpWrites makes the help of root and of every command below it
// (--help, "vram help", vram alone) keep the first error writing it, in the
// error returned: cobra ignores it, so help sent to a full disk or a closed
// pipe exited with status 0.
func checkHelpWrites(root *cobra.Command) *error {
	var helpErr error
	help := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		out := c.OutOrStdout()
		ew := &errWriter{w: out}
		c.SetOut(ew)
		help(c, args)
		c.SetOut(out)
		if ew.err != nil && helpErr == nil {
			helpErr = fmt.Errorf("help: %w", ew.err)
		}
	})
	return &helpErr
}

// newRootCmd builds the vram command and its subcommands. Each subcommand
// lives in its own file as newXxxCmd.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "vram",
		Short: "Tensors on CPUs and NVIDIA GPUs whose memory you can see and control",
		Long: "vram trains and runs tensor programs on CPUs and NVIDIA GPUs and shows where the memory goes.\n" +
			"Start with \"vram demo\".",
		SilenceUsage:  true,
		SilenceErrors: true,
		// The shell completion command stays available but unlisted.
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: true},
		// With subcommands and no Run, cobra rejects unknown commands itself.
		// --version prints what the version command prints.
		Version: currentVersion().line(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.InitDefaultVersionFlag()
	root.Flags().Lookup("version").Usage = "print the version, as vram version does"
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if e := optionalValueError(c, err); e != nil {
			return e
		}
		return &usageError{fmt.Errorf("%w%s (see '%s --help')", flagValueError(err), flagSuggestion(c, err), c.CommandPath())}
	})
	root.AddCommand(
		newAnalyzeCmd(),
		newDemoCmd(),
		newDoctorCmd(),
		newExporterCmd(),
		newReplayCmd(),
		newRunCmd(),
		newSmiCmd(),
		newVersionCmd(),
		newWatchCmd(),
	)
	root.SetHelpCommand(newHelpCmd())
	strictCompletion(root)
	completeFlagValues(root)
	nameArgErrors(root)
	return root
}

// usageError marks a bad command line: the exit status is exitUsage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// isCobraUsageError recognises the errors cobra returns for a command line
// it cannot dispatch, which do not pass through the flag error function.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command ")
}

// oneLine joins a possibly multi-line error message (cobra's suggestions)
// into one line and drops a leading "vram: " that the caller adds back. An
// out-of-memory error keeps its lines: it is a diagnosis meant to be read
// as a paragraph.
func oneLine(err error) string {
	msg := err.Error()
	if oom := (*memory.OutOfMemoryError)(nil); errors.As(err, &oom) {
		return strings.TrimPrefix(strings.TrimRight(msg, "\n"), "vram: ")
	}
	if before, after, ok := strings.Cut(msg, "\n\nDid you mean this?\n"); ok {
		msg = before + " (did you mean " + strings.Join(strings.Fields(after), " or ") + "?)"
	}
	if strings.HasPrefix(msg, "unknown command ") {
		path := "vram"
		if _, rest, ok := strings.Cut(msg, " for \""); ok {
			path, _, _ = strings.Cut(rest, "\"")
		}
		msg += " (see '" + path + " --help')"
	}
	msg = strings.Join(strings.Fields(msg), " ")
	return strings.TrimPrefix(msg, "vram: ")
}

// withCommand prefixes msg, the error of cmd, with the command's name (its
// path below root: "replay", "completion bash") unless it starts with it,
// so that every error of a subcommand names it, those of its flags and of
// the packages it calls included.
func withCommand(root, cmd *cobra.Command, msg string) string {
	if cmd == nil || cmd == root {
		return msg
	}
	name := strings.TrimPrefix(cmd.CommandPath(), root.Name()+" ")
	if strings.HasPrefix(msg, name+": ") {
		return msg
	}
	return name + ": " + msg
}

// writeJSON writes v as one indented JSON object followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// errWriter passes writes on to w until one fails, then drops the rest and
// keeps the first error, so that a command printing many lines checks once
// at the end that its output (a full disk, a closed pipe) was written.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// isTerminalReader reports whether r is a terminal.
func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// isTerminal reports whether w is a terminal, for progress output.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
