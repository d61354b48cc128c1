package vram_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeImports maps the package names README.md's Go blocks use to their
// import paths.
var readmeImports = map[string]string{
	"errors": "errors",
	"fmt":    "fmt",
	"vram":   "github.com/vramgo/vram",
	"memory": "github.com/vramgo/vram/memory",
	"nn":     "github.com/vramgo/vram/nn",
	"optim":  "github.com/vramgo/vram/optim",
}

// TestREADMEGoBlocks builds every Go block of README.md into a program of
// its own, adding only the imports and a main function, and runs it,
// so that a renamed function or a changed signature breaks this
// test rather than the first program a reader copies the block into.
func TestREADMEGoBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)\n```go\n(.*?)\n```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) < 2 {
		t.Fatalf("found %d Go blocks in README.md, want the quick tour and the configuration", len(blocks))
	}
	used := regexp.MustCompile(`\b([a-z]+)\.[A-Z]`)
	for i, b := range blocks {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			code := b[1]
			var src strings.Builder
			src.WriteString("package main\n\nimport (\n")
			seen := map[string]bool{}
			for _, m := range used.FindAllStringSubmatch(code, -1) {
				if path, ok := readmeImports[m[1]]; ok && !seen[m[1]] {
					seen[m[1]] = true
					fmt.Fprintf(&src, "\t%q\n", path)
				}
			}
			src.WriteString(")\n\nfunc main() {\n" + code + "\n")
			if strings.Contains(code, "err :=") {
				src.WriteString("if err != nil {\nprintln(\"err:\", err.Error())\n}\n")
			}
			src.WriteString("}\n")
			// Inside the module, so that its packages resolve; the leading
			// "_" keeps the directory out of ./... should it be left behind.
			dir, err := os.MkdirTemp(".", "_readme")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(goTool, "run", "./"+filepath.Base(dir))
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("README.md's Go block %d: %v\n%s\n--- the program:\n%s", i, err, out, src.String())
			}
			// What the blocks' comments say they print.
			switch {
			case strings.Contains(code, "vram.Configure("):
				if strings.Contains(string(out), "err:") {
					t.Errorf("README.md's configuration block: Configure failed:\n%s", out)
				}
			case strings.Contains(code, "DeviceMismatchError"):
				for _, w := range []string{"step 0: loss ", "step 200: loss ", "[256, 1] ", "true vram: add: expected all tensors on the same device"} {
					if !strings.Contains(string(out), w) {
						t.Errorf("README.md's quick tour printed no %q:\n%s", w, out)
					}
				}
			}
		})
	}
}
