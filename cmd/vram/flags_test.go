package main

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestNumericFlags checks that numbers on the command line are parsed
// exactly and strictly: each bad value is a usage error (exit 2) on one
// line that names the flag and the value, and nothing runs.
func TestNumericFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // in the one-line message
	}{
		{"capacity NaN", []string{"replay", "--capacity", "NaN", resnetTrace}, []string{"--capacity", `"NaN"`, "1.5GiB"}},
		{"capacity Inf", []string{"replay", "--capacity", "Inf", resnetTrace}, []string{"--capacity", `"Inf"`}},
		{"capacity half a byte", []string{"replay", "--capacity", "0.5", resnetTrace}, []string{"--capacity", `"0.5"`, "less than 1 byte"}},
		{"capacity zero", []string{"replay", "--capacity", "0", resnetTrace}, []string{"--capacity", "at least 1 byte"}},
		{"capacity -0", []string{"replay", "--capacity", "-0", resnetTrace}, []string{"--capacity", "negative"}},
		{"capacity negative", []string{"replay", "--capacity", "-1GiB", resnetTrace}, []string{"--capacity", "negative"}},
		{"capacity fractional bytes", []string{"replay", "--capacity", "1.3B", resnetTrace}, []string{"--capacity", "not a whole number"}},
		{"capacity exponent", []string{"replay", "--capacity", "1e30", resnetTrace}, []string{"--capacity", "unknown unit"}},
		{"capacity overflow", []string{"replay", "--capacity", "9223372036854775808", resnetTrace}, []string{"--capacity", "largest size"}},
		{"capacity 16 EiB", []string{"replay", "--capacity", "16EiB", resnetTrace}, []string{"--capacity", "largest size"}},
		{"capacity garbage", []string{"replay", "--capacity", "80GiB!", resnetTrace}, []string{"--capacity", "unknown unit"}},
		{"capacity empty", []string{"replay", "--capacity", "", resnetTrace}, []string{"--capacity", "empty size"}},
		{"capacity blank", []string{"replay", "--capacity=  ", resnetTrace}, []string{"--capacity", "empty size"}},
		{"batch zero", []string{"demo", "--batch", "0"}, []string{"--batch must be positive"}},
		{"batch not a number", []string{"demo", "--batch", "1e3"}, []string{`"1e3"`, "--batch"}},
		{"steps overflow", []string{"demo", "--steps", "99999999999999999999"}, []string{"--steps"}},
		{"seed negative", []string{"demo", "--seed", "-1"}, []string{"--seed"}},
		{"interval zero", []string{"watch", "--interval", "0s"}, []string{"--interval must be at least 10ms"}},
		{"interval negative", []string{"watch", "--interval", "-1s"}, []string{"--interval must be at least 10ms"}},
		{"interval NaN", []string{"watch", "--interval", "NaN"}, []string{"--interval"}},
		{"interval no unit", []string{"watch", "--interval", "100"}, []string{"--interval"}},
		{"interval overflow", []string{"watch", "--interval", "9999999999h"}, []string{"--interval"}},
		{"count negative", []string{"watch", "--count", "-1"}, []string{"--count must not be negative"}},
		{"smi json and list", []string{"smi", "--json", "-L", "--source", readingsFile}, []string{"--json", "--list"}},
		{"smi json and list, no GPU", []string{"smi", "--list", "--json"}, []string{"--json", "--list"}},
		{"top zero", []string{"analyze", "--top", "0", resnetTrace}, []string{"--top must be at least 1"}},
		{"html without a name", []string{"analyze", "--html", "", resnetTrace}, []string{"--html needs a file name"}},
		{"top fraction", []string{"analyze", "--top", "1.5", resnetTrace}, []string{"--top"}},
		// An explicitly empty value (an unset shell variable, as in
		// --device "$GPU") is a mistake, never the default.
		{"device empty", []string{"replay", "--device", "", resnetTrace}, []string{"--device", `""`, "cuda:N"}},
		{"device blank", []string{"replay", "--device= ", resnetTrace}, []string{"--device", "cuda:N"}},
		{"fit empty", []string{"replay", "--fit=", resnetTrace}, []string{"--fit", "empty size"}},
		{"max-input unit", []string{"replay", "--max-input", "1QB", resnetTrace}, []string{"--max-input", `"1QB"`, `unknown unit "QB"`, "1GiB"}},
		{"max-capacity zero", []string{"replay", "--max-capacity", "0", resnetTrace}, []string{"--max-capacity", "at least 1 byte", "4TiB"}},
		{"max-input two points", []string{"analyze", "--max-input", "1.2.3GiB", resnetTrace}, []string{"--max-input", "not a decimal number"}},
		{"limit unit", []string{"analyze", "--limit", "40Gi", resnetTrace}, []string{"--limit", `unknown unit "Gi"`, "40GiB"}},
		{"steps not a number", []string{"demo", "--steps", "abc"}, []string{`--steps "abc": want a whole number (see`}},
		{"steps out of range", []string{"demo", "--steps", "99999999999999999999"}, []string{"want a whole number in range"}},
		{"seed negative, said", []string{"demo", "--seed", "-1"}, []string{`--seed "-1": want a whole number, 0 or more`}},
		{"interval without a unit, said", []string{"watch", "--interval", "100"}, []string{`--interval "100": want a duration with its unit`}},
		// A value with its unit but past what a duration holds is out of
		// range, not missing its unit.
		{"interval overflow, said", []string{"watch", "--interval", "9999999999h"}, []string{`--interval "9999999999h": want a duration in range, at most 2562047h`}},
		{"interval overflow in parts, said", []string{"watch", "--interval", "2562047h60m"}, []string{`--interval "2562047h60m": want a duration in range`}},
		{"stop-timeout overflow, said", []string{"run", "--nproc-per-node", "1", "--stop-timeout", "1e9h", "true"}, []string{`--stop-timeout "1e9h": want a duration with its unit`}},
		{"stop-timeout overflow in ns, said", []string{"run", "--nproc-per-node", "1", "--stop-timeout", "99999999999999999999ns", "true"}, []string{`--stop-timeout "99999999999999999999ns": want a duration in range`}},
		{"json not a bool", []string{"demo", "--json=maybe"}, []string{`--json "maybe": want true or false`}},
		{"limit empty", []string{"analyze", "--limit", "", resnetTrace}, []string{"--limit", `""`, "40GiB"}},
		{"limit blank", []string{"analyze", "--limit= ", resnetTrace}, []string{"--limit", "40GiB"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if stdout != "" {
				t.Errorf("stdout not empty:\n%s", stdout)
			}
			if !strings.HasPrefix(stderr, "vram: ") || strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr %q, want one line starting with \"vram: \"", stderr)
			}
			if strings.Contains(stderr, "strconv.") || strings.Contains(stderr, "invalid syntax") {
				t.Errorf("stderr %q quotes Go's number parser", stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not contain %q", stderr, w)
				}
			}
		})
	}
}

// TestCapacityForms checks that the accepted forms of --capacity all reach
// the replay exactly.
func TestCapacityForms(t *testing.T) {
	for in, want := range map[string]string{
		"80GiB":   "capacity 80.00 GiB",
		" 80 GiB": "capacity 80.00 GiB",
		"1.5GiB":  "capacity 1.50 GiB",
		"100GB":   "capacity 93.13 GiB",
	} {
		t.Run(in, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "replay", "--capacity", in, resnetTrace)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, stdout)
			}
		})
	}
}

// TestFlagPlaceholders checks what --help shows after each flag that takes
// a value: the word in backquotes in its usage (SIZE, FILE, N, DURATION),
// in upper case, as every flag of vram names its value. A lower-case word
// in backquotes would become the placeholder by accident, and a flag
// without one shows pflag's type name ("int", "duration", "string") where
// the kind of value belongs. The placeholder is not repeated at the end of
// the description, as "--pids PID,PID,...  ... (PID,PID,...)" did.
func TestFlagPlaceholders(t *testing.T) {
	line := regexp.MustCompile(`^\s+(?:-\w, )?--([\w-]+)(?: (\S+?))?(?:\[=\S*\])?\s{2,}(.*)$`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, l := range strings.Split(c.LocalFlags().FlagUsages(), "\n") {
			m := line.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			name, usage := m[2], m[3]
			if name != "" && strings.ToLower(name) == name {
				t.Errorf("%s --%s shows %q as its value: name it in backquotes in upper case, as `SIZE`, `N` or `DURATION`", c.CommandPath(), m[1], name)
			}
			if name != "" && strings.Contains(usage, "("+name+")") {
				t.Errorf("%s --%s shows its value %s twice: %q", c.CommandPath(), m[1], name, strings.TrimSpace(l))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}

// TestFitFlagArgument checks how a bare --fit reads the argument after it:
// a size when no file of that name exists, an input file when one does,
// and a usage error that says what --fit takes when the argument names no
// file and was meant as a size (it looks like one, or inputs follow it),
// rather than a missing input while the others are replayed.
func TestFitFlagArgument(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		wantOn int64
		rest   []string
		errHas []string // empty: no error
	}{
		{"file only", []string{resnetTrace}, 0, []string{resnetTrace}, nil},
		{"size then file", []string{"24GB", resnetTrace}, 24e9, []string{resnetTrace}, nil},
		{"size alone", []string{"24GB"}, 0, nil, []string{"--fit 24GB", "no input file"}},
		{"a word then a file", []string{"lots", resnetTrace}, 0, nil, []string{`--fit "lots"`, "no such input file", "not a size", "--fit=24GB"}},
		{"unknown unit then a file", []string{"24QB", resnetTrace}, 0, nil, []string{`--fit "24QB"`, `unknown unit "QB"`}},
		{"unknown unit alone", []string{"24QB"}, 0, nil, []string{`--fit "24QB"`, "not a size"}},
		{"two points", []string{"2.5.GB", resnetTrace}, 0, nil, []string{`"2.5.GB"`, "not a size"}},
		{"zero", []string{"0", resnetTrace}, 0, nil, []string{`--fit "0"`, "at least 1 byte"}},
		{"missing file alone", []string{"nosuch.trace.gz"}, 0, []string{"nosuch.trace.gz"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fitting, on, rest, err := fitFlag(fitAuto, true, tc.args)
			if len(tc.errHas) > 0 {
				var ue *usageError
				if !errors.As(err, &ue) {
					t.Fatalf("fitFlag(%q) = %v, want a usage error", tc.args, err)
				}
				for _, w := range tc.errHas {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil || !fitting || on != tc.wantOn || !slices.Equal(rest, tc.rest) {
				t.Errorf("fitFlag(%q) = %v, %d, %q, %v; want true, %d, %q, nil", tc.args, fitting, on, rest, err, tc.wantOn, tc.rest)
			}
		})
	}
	// Through the command: nothing is replayed, the exit status is 2.
	code, stdout, stderr := runCLI(t, "replay", "--fit", "lots", resnetTrace)
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "not a size") {
		t.Errorf("replay --fit lots FILE: exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout", code, stdout, stderr, exitUsage)
	}
}

// TestHelpNamesOnlyItsFlags checks that every --flag a command's help text
// and examples name is a flag of that command (or of vram itself), so that
// a renamed or removed flag cannot stay in the help. A flag named after
// "vram OTHER" on its line is OTHER's, and one after the program that
// "vram run" starts is the program's.
func TestHelpNamesOnlyItsFlags(t *testing.T) {
	flagRE := regexp.MustCompile(`(?:^|[\s(\x60"'])--([a-z][a-z0-9-]*)`)
	otherRE := regexp.MustCompile(`vram ([a-z]+)`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "completion" {
			return // cobra's own
		}
		for _, l := range strings.Split(c.Long+"\n"+c.Example, "\n") {
			if fields := strings.Fields(l); len(fields) > 2 && fields[0] == "vram" && fields[1] == "run" {
				// vram run [its flags and their values] PROGRAM [the program's flags]
				end := 2
				for end < len(fields) && strings.HasPrefix(fields[end], "--") {
					if !strings.Contains(fields[end], "=") {
						end++
					}
					end++
				}
				l = strings.Join(fields[:min(end, len(fields))], " ")
			}
			for _, m := range flagRE.FindAllStringSubmatchIndex(l, -1) {
				name := l[m[2]:m[3]]
				if o := otherRE.FindAllStringSubmatch(l[:m[0]], -1); len(o) > 0 && o[len(o)-1][1] != c.Name() {
					continue
				}
				if c.Flags().Lookup(name) == nil && c.InheritedFlags().Lookup(name) == nil && c.Root().Flags().Lookup(name) == nil {
					t.Errorf("%s --help names --%s, which is not one of its flags", c.CommandPath(), name)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}

// TestUnknownFlagSuggestions mistypes flags as people do: a letter off,
// torchrun's and Python's underscores, the wrong case, Go's single dash.
// The usage error suggests the flag meant, as it does for a command, and
// suggests nothing when nothing is near.
func TestUnknownFlagSuggestions(t *testing.T) {
	tests := []struct {
		args []string
		want string // the whole message after "vram: "
	}{
		{[]string{"demo", "--step", "5"}, "demo: unknown flag: --step (did you mean --steps?) (see 'vram demo --help')"},
		{[]string{"demo", "--jsn"}, "demo: unknown flag: --jsn (did you mean --json?) (see 'vram demo --help')"},
		{[]string{"demo", "--devices", "cpu"}, "demo: unknown flag: --devices (did you mean --device?) (see 'vram demo --help')"},
		{[]string{"run", "--nproc_per_node", "2", "true"}, "run: unknown flag: --nproc_per_node (did you mean --nproc-per-node?) (see 'vram run --help')"},
		{[]string{"run", "--nproc_per_node=2", "true"}, "run: unknown flag: --nproc_per_node (did you mean --nproc-per-node?) (see 'vram run --help')"},
		{[]string{"run", "--master_port", "5", "true"}, "run: unknown flag: --master_port (did you mean --master-port?) (see 'vram run --help')"},
		{[]string{"run", "--nproc", "2", "true"}, "run: unknown flag: --nproc (did you mean --nproc-per-node?) (see 'vram run --help')"},
		{[]string{"smi", "--JSON"}, "smi: unknown flag: --JSON (did you mean --json?) (see 'vram smi --help')"},
		{[]string{"watch", "--interva", "1s"}, "watch: unknown flag: --interva (did you mean --interval?) (see 'vram watch --help')"},
		{[]string{"demo", "-steps", "5"}, "demo: unknown shorthand flag: 's' in -steps (did you mean --steps?) (see 'vram demo --help')"},
		{[]string{"--verison"}, "unknown flag: --verison (did you mean --version?) (see 'vram --help')"},
		// Several as near are all suggested; none, when none is near.
		{[]string{"run", "--master", "x", "true"}, "run: unknown flag: --master (did you mean --master-addr or --master-port?) (see 'vram run --help')"},
		{[]string{"exporter", "--port", "9400"}, "exporter: unknown flag: --port (see 'vram exporter --help')"},
		{[]string{"demo", "-j"}, "demo: unknown shorthand flag: 'j' in -j (see 'vram demo --help')"},
		{[]string{"demo", "--s"}, "demo: unknown flag: --s (see 'vram demo --help')"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if stdout != "" {
				t.Errorf("stdout not empty:\n%s", stdout)
			}
			if want := "vram: " + tc.want + "\n"; stderr != want {
				t.Errorf("stderr %q\nwant   %q", stderr, want)
			}
		})
	}
}

// TestHelpIsPlainText reads the help of every command, the hidden
// completion command and its shells included, as a user sees it: plain
// text, without Markdown headings ("#### Linux:"), backquotes that pflag
// left in place, template or format markup that was not expanded, or
// blanks at the ends of lines.
func TestHelpIsPlainText(t *testing.T) {
	markup := regexp.MustCompile("`|^#+ |\\{\\{|\\}\\}|%!|%\\[|%[sdvq]\\b|<no value>")
	var walk func(c *cobra.Command)
	tried := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if strings.HasPrefix(c.Name(), "__") {
			return // cobra's requests from the shell, not for people
		}
		tried++
		args := append(strings.Fields(c.CommandPath())[1:], "--help")
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 || stderr != "" {
			t.Errorf("vram %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
		for i, l := range strings.Split(stdout, "\n") {
			if m := markup.FindString(l); m != "" {
				t.Errorf("vram %s, line %d: %q in %q", strings.Join(args, " "), i+1, m, l)
			}
			if strings.TrimRight(l, " \t") != l {
				t.Errorf("vram %s, line %d: blanks at the end of %q", strings.Join(args, " "), i+1, l)
			}
		}
	}
	walk(newRootCmd())
	if tried < 15 {
		t.Errorf("only %d commands' help read", tried)
	}
}

// TestCompletionDescriptionsPlain asks for the completions of every
// command's flags, as the shells' scripts do (vram __complete CMD --): the
// descriptions the shell shows beside them are the flags' usage without
// the backquotes that name a value in --help ("read ... from `FILE`"),
// which pflag removes there but cobra passed on as they were.
func TestCompletionDescriptionsPlain(t *testing.T) {
	var walk func(c *cobra.Command)
	tried := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if strings.HasPrefix(c.Name(), "__") || !c.HasAvailableFlags() {
			return
		}
		path := strings.Fields(c.CommandPath())[1:]
		for _, req := range []string{cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd} {
			args := append(append([]string{req}, path...), "--")
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 {
				t.Errorf("vram %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
			}
			if !strings.Contains(stdout, "--help") {
				t.Errorf("vram %s offers no --help:\n%s", strings.Join(args, " "), stdout)
			}
			tried++
			for _, l := range strings.Split(stdout, "\n") {
				if strings.Contains(l, "`") {
					t.Errorf("vram %s: %q", strings.Join(args, " "), l)
				}
			}
		}
	}
	walk(newRootCmd())
	if tried < 20 {
		t.Errorf("only %d completions asked for", tried)
	}
}

// TestFlagValueCompletion asks for the completions of flag values as a
// shell does: a flag that takes a file (--source FILE, --html OUT) gets
// the shell's file names, --device the devices, and a flag that takes a
// number, a size, a duration or an address no file names, which the shell
// offered for every one of them.
func TestFlagValueCompletion(t *testing.T) {
	const files, noFiles = ":0", ":4" // cobra's directives, on the last line
	tests := []struct {
		args      []string // after "vram __complete", the value to complete ""
		directive string
		want      []string // among the completions
	}{
		{[]string{"smi", "--source"}, files, nil},
		{[]string{"watch", "--source"}, files, nil},
		{[]string{"exporter", "--source"}, files, nil},
		{[]string{"analyze", "--html"}, files, nil},
		{[]string{"analyze"}, files, nil},
		{[]string{"replay"}, files, nil},
		{[]string{"demo", "--device"}, noFiles, []string{"auto", "cpu", "cuda", "cuda:0", "sim:0"}},
		{[]string{"replay", "--device"}, noFiles, []string{"cuda:0"}},
		{[]string{"demo", "--steps"}, noFiles, nil},
		{[]string{"demo", "--seed"}, noFiles, nil},
		{[]string{"watch", "--interval"}, noFiles, nil},
		{[]string{"watch", "--pids"}, noFiles, nil},
		{[]string{"exporter", "--listen"}, noFiles, nil},
		{[]string{"analyze", "--limit"}, noFiles, nil},
		{[]string{"analyze", "--top"}, noFiles, nil},
		{[]string{"replay", "--capacity"}, noFiles, nil},
		{[]string{"replay", "--conf"}, noFiles, nil},
		{[]string{"run", "--nproc-per-node"}, noFiles, nil},
		{[]string{"run", "--master-addr"}, noFiles, nil},
		{[]string{"run", "--stop-timeout"}, noFiles, nil},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append(append([]string{cobra.ShellCompRequestCmd}, tc.args...), "")
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			if got := lines[len(lines)-1]; got != tc.directive {
				t.Errorf("directive %s, want %s:\n%s", got, tc.directive, stdout)
			}
			var values []string
			for _, l := range lines[:len(lines)-1] {
				v, _, _ := strings.Cut(l, "\t")
				values = append(values, v)
			}
			for _, w := range tc.want {
				if !slices.Contains(values, w) {
					t.Errorf("completions %q lack %q", values, w)
				}
			}
		})
	}
}
