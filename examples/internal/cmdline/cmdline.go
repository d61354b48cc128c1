// Package cmdline reads the command line of the example programs that take
// no flags and no arguments, so that a mistyped flag or a stray argument
// stops the program with a usage message (exit status 2) rather than being
// ignored while the program runs as if it had not been given, and -h or
// --help says what the program does instead of running it.
package cmdline

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// NoArgs checks that the program was given no flags and no arguments.
// about says what the program does, in a sentence or two. With -h or
// --help, NoArgs prints the usage and about to standard error and exits
// with status 0; with any other flag or argument it prints what was wrong
// and the usage, and exits with status 2. Otherwise it returns.
func NoArgs(about string) {
	if code, done := check(filepath.Base(os.Args[0]), about, os.Args[1:], os.Stderr); done {
		os.Exit(code)
	}
}

// check is NoArgs' work on the program name and arguments args, writing to
// w: done reports whether the program must exit, with status code.
func check(name, about string, args []string, w io.Writer) (code int, done bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "usage: %s\n\n%s\nIt takes no flags and no arguments.\n", name, about)
	}
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		return 0, true
	case err != nil: // the flag package has printed the error and the usage
		return 2, true
	case fs.NArg() > 0:
		fmt.Fprintf(w, "%s: unexpected argument %q\n", name, fs.Arg(0))
		fs.Usage()
		return 2, true
	}
	return 0, false
}
