package main

import (
	"io"

	"github.com/vramgo/vram/internal/units"
	"github.com/vramgo/vram/memory/trace"
)

// sizeFlag parses the value of a size flag such as --max-input, which
// must be positive; the usage error names the flag, says what is wrong
// with the value and gives example.
func sizeFlag(flag, value, example string) (int64, error) {
	n, err := units.ParseBytes(value)
	if err != nil {
		return 0, usagef("%s %q: %s; want a positive size such as %s", flag, value, sizeReason(err), example)
	}
	return n, nil
}

// inputLimits parses --max-input of replay and analyze: the most bytes of
// a snapshot, after decompression, that they read whole.
func inputLimits(maxInput string) (trace.Limits, error) {
	n, err := sizeFlag("--max-input", maxInput, "1GiB")
	if err != nil {
		return trace.Limits{}, err
	}
	return trace.Limits{MaxBytes: n}, nil
}

// stdinArg is the input argument of analyze and replay that stands for
// standard input, as it does for cat.
const stdinArg = "-"

// terminalInput returns the usage error of cmd reading standard input, as
// what ("-", "--source -") asks, while it is a terminal, else nil: nobody
// types a snapshot or readings, and the command would wait in silence for
// them. example is a command line that gives the input.
func terminalInput(cmd, what, example string, stdin io.Reader) error {
	if !isTerminalReader(stdin) {
		return nil
	}
	return usagef("%s: %s reads standard input, which is a terminal; pipe or redirect the input into it, as in: %s", cmd, what, example)
}

// openInput opens an input of analyze or replay: the file at path as
// lim.OpenStream opens it (a text trace in a regular file is streamed), or,
// for "-", standard input, read whole within lim and named "stdin" in
// errors and reports.
func openInput(lim trace.Limits, path string, stdin io.Reader) (*trace.File, error) {
	if path == stdinArg {
		return lim.Read(stdin, "stdin")
	}
	return lim.OpenStream(path)
}

// countArg returns how many of args are arg.
func countArg(args []string, arg string) int {
	n := 0
	for _, a := range args {
		if a == arg {
			n++
		}
	}
	return n
}
