package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time (-ldflags "-X main.version=v0.1.0"); when
// empty, the module version recorded in the binary is used.
var version = ""

// versionInfo is what "vram version --json" prints.
type versionInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Go       string `json:"go"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

func currentVersion() versionInfo {
	v := versionInfo{Version: version, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v.Revision = s.Value
			}
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	return v
}

// line is the version as "vram version" and "vram --version" print it.
func (v versionInfo) line() string {
	rev := ""
	if v.Revision != "" {
		rev = " " + v.Revision
	}
	return fmt.Sprintf("vram %s%s (%s, %s/%s)", v.Version, rev, v.Go, v.OS, v.Arch)
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of vram and of the Go toolchain that built it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := currentVersion()
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), v.line())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
