package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/vramgo/vram/internal/editdist"
	"github.com/vramgo/vram/memory"
)

// nameArgErrors wraps the argument check of c and of every command below
// it, so that a wrong number of arguments is a usage error (exit status 2)
// that names the command (its path below the root: "completion bash") and
// its usage line, where cobra's own says only what is wrong with the count.
func nameArgErrors(c *cobra.Command) {
	for _, sub := range c.Commands() {
		nameArgErrors(sub)
	}
	check := c.Args
	if check == nil {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
			return usagef("%s: %v (usage: %s; see '%s --help')", name, err, cmd.UseLine(), cmd.CommandPath())
		}
		return nil
	}
}

// strictCompletion adds cobra's (hidden) completion command now rather than
// at Execute, and makes it reject an unknown shell with a usage error: as a
// command without a Run of its own, it would print its help and exit with
// status 0. Its help and its shells' are vram's own, in plain text: cobra's
// hold Markdown headings ("#### Linux:").
func strictCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Short = "Print a script that completes " + root.Name() + "'s commands and flags in a shell"
		c.Long = fmt.Sprintf(`Completion prints a script that makes a shell complete %[1]s's commands, their flags
and the values of some flags as they are typed. Name the shell: %[1]s completion SHELL,
where SHELL is bash, fish, powershell or zsh; the help of each says how to load its
script: %[1]s completion SHELL --help.`, root.Name())
		var shells []string
		for _, s := range c.Commands() {
			shells = append(shells, s.Name())
			s.Short = "Print the completion script for " + s.Name()
			s.Long = completionHelp(root.Name(), s.Name())
			s.DisableFlagsInUseLine = false
			if f := s.Flags().Lookup("no-descriptions"); f != nil {
				f.Usage = "complete names alone, without the descriptions of commands and flags"
			}
		}
		c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown shell %q (want %s)", args[0], strings.Join(shells, ", "))
			}
			return nil
		}
	}
}

// completionHelp returns the help of "completion SHELL" for the program
// prog: how to load the script in the current shell and in every new one.
func completionHelp(prog, shell string) string {
	switch shell {
	case "bash":
		return fmt.Sprintf(`Bash prints the script that completes %[1]s's commands and flags in bash. It needs
the bash-completion package, from the system's package manager (or Homebrew).

  source <(%[1]s completion bash)   # in this shell
  # in every new shell, after one of these:
  %[1]s completion bash > ~/.local/share/bash-completion/completions/%[1]s
  %[1]s completion bash | sudo tee /etc/bash_completion.d/%[1]s > /dev/null   # for every user
  %[1]s completion bash > "$(brew --prefix)/etc/bash_completion.d/%[1]s"      # macOS, Homebrew`, prog)
	case "zsh":
		return fmt.Sprintf(`Zsh prints the script that completes %[1]s's commands and flags in zsh. Where
completion is not enabled yet, enable it once:

  echo "autoload -U compinit; compinit" >> ~/.zshrc

  source <(%[1]s completion zsh)   # in this shell
  # in every new shell, after one of these:
  %[1]s completion zsh > "${fpath[1]}/_%[1]s"
  %[1]s completion zsh > "$(brew --prefix)/share/zsh/site-functions/_%[1]s"   # macOS, Homebrew`, prog)
	case "fish":
		return fmt.Sprintf(`Fish prints the script that completes %[1]s's commands and flags in fish.

  %[1]s completion fish | source   # in this shell
  %[1]s completion fish > ~/.config/fish/completions/%[1]s.fish   # in every new shell`, prog)
	case "powershell":
		return fmt.Sprintf(`Powershell prints the script that completes %[1]s's commands and flags in PowerShell.

  %[1]s completion powershell | Out-String | Invoke-Expression   # in this session

Add that line to the profile ($PROFILE) to load it in every new session.`, prog)
	}
	return fmt.Sprintf("%s prints the script that completes %s's commands and flags in %s.", strings.ToUpper(shell[:1])+shell[1:], prog, shell)
}

// fileValues are the placeholders (`FILE` in a flag's usage) of the flags
// whose value is a path, which the shell completes with file names.
var fileValues = map[string]bool{"FILE": true, "OUT": true}

// deviceValues are the completions of --device, by command.
var deviceValues = map[string][]cobra.Completion{
	"demo": {
		cobra.CompletionWithDesc("auto", "cuda:0 when CUDA is available, else cpu"),
		cobra.CompletionWithDesc("cpu", "the CPU"),
		cobra.CompletionWithDesc("cuda", "the first NVIDIA GPU"),
		cobra.CompletionWithDesc("cuda:0", "NVIDIA GPU 0"),
		cobra.CompletionWithDesc("sim:0", "simulated GPU 0 (VRAM_SIM_DEVICES)"),
	},
	"replay": {cobra.CompletionWithDesc("cuda:0", "NVIDIA GPU 0")},
}

// completeFlagValues tells the shells what the value of each flag of c and
// of the commands below it is: file names for a path, the devices for
// --device, and nothing it could list for the others (a number, a size,
// a duration, an address), for which a shell offered file names. Flags
// without a value, or whose value may be left out (--fit), are left to
// cobra.
func completeFlagValues(c *cobra.Command) {
	for _, sub := range c.Commands() {
		completeFlagValues(sub)
	}
	c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.NoOptDefVal != "" {
			return
		}
		if name, _ := pflag.UnquoteUsage(f); fileValues[name] {
			return
		}
		values := deviceValues[c.Name()]
		if f.Name != "device" {
			values = nil
		}
		// Only fails for a flag that has a completion already.
		_ = c.RegisterFlagCompletionFunc(f.Name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
	})
}

// newHelpCmd returns the help command. Unlike cobra's, it fails with a
// usage error on a topic that is not a command rather than printing the
// usage and exiting with status 0.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Help prints the help of any command: vram help COMMAND.",
		ValidArgsFunction: func(c *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var out []cobra.Completion
			if len(args) == 0 {
				for _, sub := range c.Root().Commands() {
					if sub.IsAvailableCommand() {
						out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
					}
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return usagef("help: unknown help topic %q (see '%s --help' for the commands)", strings.Join(args, " "), c.Root().CommandPath())
			}
			return cmd.Help()
		},
	}
}

// confFlagError is the usage error of a --conf flag whose value
// memory.ParseConfig rejected: it names the flag rather than
// VRAM_ALLOC_CONF, which the parser's message names.
func confFlagError(cmd, value string, err error) error {
	msg := err.Error()
	var ce *memory.ConfigError
	if errors.As(err, &ce) {
		msg = ce.Reason
		if ce.Key != "" {
			key := ce.Key
			if ce.Value != "" {
				key += ":" + ce.Value
			}
			msg = key + ": " + msg
		}
	}
	return usagef("%s: --conf %q: %s", cmd, value, msg)
}

// cmdError returns err prefixed with the command's name, as "analyze: ...",
// unless its message already starts with that prefix (an error from the
// package of the same name), so that no message reads "analyze: analyze:".
func cmdError(name string, err error) error {
	if err == nil || strings.HasPrefix(err.Error(), name+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}

// plural returns one when n is 1, else many.
func plural[N ~int | ~int64](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// count returns n followed by the noun for n: "1 input", "2 inputs".
func count[N ~int | ~int64](n N, one, many string) string {
	return fmt.Sprintf("%d %s", n, plural(n, one, many))
}

// exactArgs is cobra.ExactArgs with a message that counts in words:
// "takes 1 argument, got 2", where cobra's says "accepts 1 arg(s)".
func exactArgs(n int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("takes %s, got %d", count(n, "argument", "arguments"), len(args))
		}
		return nil
	}
}

// minimumArgs is cobra.MinimumNArgs with a message that counts in words:
// "needs at least 1 argument, got 0".
func minimumArgs(n int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return fmt.Errorf("needs at least %s, got %d", count(n, "argument", "arguments"), len(args))
		}
		return nil
	}
}

// durationSyntax matches what time.ParseDuration reads, numbers of any
// size included: a value it matches that the parser rejected is out of
// range.
var durationSyntax = regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// flagValueError rewrites pflag's error for a value its flag's type cannot
// parse, which quotes Go's parser ("strconv.ParseInt: parsing \"abc\":
// invalid syntax"), as the flag, the value and what the flag takes:
// `--steps "abc": want a whole number`. Other errors are returned as they
// are.
func flagValueError(err error) error {
	var ve *pflag.InvalidValueError
	if !errors.As(err, &ve) {
		return err
	}
	want := "a value of type " + ve.GetFlag().Value.Type()
	switch ve.GetFlag().Value.Type() {
	case "int", "int64":
		want = "a whole number"
		if errors.Is(err, strconv.ErrRange) {
			want += " in range"
		}
	case "uint", "uint64":
		want = "a whole number, 0 or more"
		if errors.Is(err, strconv.ErrRange) {
			want += ", in range"
		}
	case "duration":
		want = "a duration with its unit, such as 500ms, 2s or 1m30s"
		if durationSyntax.MatchString(ve.GetValue()) {
			// Written as a duration, so too long for one.
			want = "a duration in range, at most 2562047h"
		}
	case "bool":
		want = "true or false"
	}
	return fmt.Errorf("--%s %q: want %s", ve.GetFlag().Name, ve.GetValue(), want)
}

// flagSuggestion returns " (did you mean --steps?)" when err is pflag's
// error for an unknown flag of c near the name of one or more of c's
// flags, else "". Names are compared without regard to case and with '_'
// read as '-' (torchrun's --nproc_per_node); a name of 3 or more
// characters is near a flag it starts (1 edit away, as it were) or one at
// most 2 edits from it, and only the nearest are suggested. A group of
// shorthands of 3 or more letters ("-steps", as Go's flag package writes
// flags) is taken for a long name.
func flagSuggestion(c *cobra.Command, err error) string {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) {
		return ""
	}
	typed := ne.GetSpecifiedName()
	if short := ne.GetSpecifiedShortnames(); short != "" {
		typed = short
	}
	typed = strings.ReplaceAll(strings.ToLower(typed), "_", "-")
	if len(typed) < 3 {
		return "" // too short to tell what was meant
	}
	var near []string
	best := 2 // the most edits a suggestion may be away
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editdist.Distance(typed, f.Name)
		if strings.HasPrefix(f.Name, typed) {
			d = min(d, 1)
		}
		switch {
		case d < best:
			best, near = d, []string{f.Name}
		case d == best:
			near = append(near, f.Name)
		}
	})
	if len(near) == 0 {
		return ""
	}
	return " (did you mean --" + strings.Join(near, " or --") + "?)"
}

// optionalValueChecks holds, for each flag whose value may be left out
// (pflag's NoOptDefVal), what its RunE checks of a value given to it.
var optionalValueChecks = map[string]func(string) error{
	"fit": func(v string) error {
		_, _, _, err := fitFlag(v, true, nil)
		return err
	},
}

// optionalValueError returns the error about the value of a flag whose
// value is optional when err is pflag's refusal of that value as shorthand
// flags: given as a separate word, a value that starts with '-' ("--fit
// -1GB") is read as flags rather than as the value, so the error would name
// a flag no one meant. The value is a number when it starts with a digit
// or a point after the '-'. It returns nil when err is anything else.
func optionalValueError(c *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) {
		return nil
	}
	short := ne.GetSpecifiedShortnames()
	if short == "" || !(short[0] >= '0' && short[0] <= '9' || short[0] == '.') {
		return nil
	}
	value := "-" + short
	var found error
	c.Flags().VisitAll(func(f *pflag.Flag) {
		check := optionalValueChecks[f.Name]
		if found != nil || check == nil || !f.Changed || f.NoOptDefVal == "" || f.Value.String() != f.NoOptDefVal {
			return
		}
		if found = check(value); found == nil {
			found = usagef("--%s %s: a value that starts with '-' is read as flags; join it with '=': --%s=%s", f.Name, value, f.Name, value)
		}
	})
	return found
}
