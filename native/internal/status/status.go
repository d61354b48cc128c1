// Package status holds what the native bindings packages share about the
// status codes their C libraries return (CUresult, nvmlReturn_t,
// cublasStatus_t, nvrtcResult): naming a code and writing the message of a
// failed call. Each package keeps its own Error type and sentinels, so
// that errors.As and errors.Is work per library; their methods call these
// helpers.
package status

import (
	"strconv"
	"strings"
)

// Name returns the name of code c in names, the checked-in table of a C
// header's codes, or prefix followed by the number for a code the table
// lacks (Name(names, "CUDA_ERROR_", 12345) is "CUDA_ERROR_12345").
func Name[C ~int32](names map[C]string, prefix string, c C) string {
	if n, ok := names[c]; ok {
		return n
	}
	return prefix + strconv.Itoa(int(c))
}

// Message returns the one-line message of a failed call,
// "pkg: fn: name (code): desc", leaving out "fn: " when fn is empty (a
// sentinel) and ": desc" when desc is empty, e.g.
// "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory".
func Message(pkg, fn, name string, code int32, desc string) string {
	var b strings.Builder
	b.WriteString(pkg)
	b.WriteString(": ")
	if fn != "" {
		b.WriteString(fn)
		b.WriteString(": ")
	}
	b.WriteString(name)
	b.WriteString(" (")
	b.WriteString(strconv.Itoa(int(code)))
	b.WriteString(")")
	if desc != "" {
		b.WriteString(": ")
		b.WriteString(desc)
	}
	return b.String()
}
