package torchload

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vramgo/vram"
)

// GlobalError is the error of a pickle that names a Python class or
// function outside the allowlist of torchload (such as os.system, or a
// model class saved with torch.save(model)): nothing is called, and the
// file is refused. It matches vram.ErrArgument under errors.Is.
type GlobalError struct {
	Module, Name string // the global, as the pickle names it (control characters replaced)
	Offset       int64  // the offset of its opcode in data.pkl
	File         string // the file's path, if read from one
}

// Error names the global and says what torchload reads instead.
func (e *GlobalError) Error() string {
	file := ""
	if e.File != "" {
		file = e.File + ": "
	}
	hint := "save model.state_dict() rather than the model"
	if e.Module == "torch" || strings.HasPrefix(e.Module, "torch.") {
		hint = "a kind of tensor or object that torchload does not read (quantized, sparse, nested tensors, a module, ...)"
	}
	return fmt.Sprintf("torchload: %sdata.pkl offset %d: the pickle names %s.%s, which is not allowed: "+
		"only state dicts (tensors in dicts, lists and tuples of plain values) are read; %s",
		file, e.Offset, e.Module, e.Name, hint)
}

// Is reports whether target is vram.ErrArgument.
func (e *GlobalError) Is(target error) bool { return target == vram.ErrArgument }

// formatError is an error of a file that torchload cannot read: a message
// that matches kind (vram.ErrArgument unless said otherwise) under
// errors.Is, and wraps err if any.
type formatError struct {
	msg  string
	kind error
	err  error
}

func (e *formatError) Error() string {
	if e.err != nil {
		return "torchload: " + e.msg + ": " + e.err.Error()
	}
	return "torchload: " + e.msg
}

func (e *formatError) Unwrap() []error {
	if e.err != nil {
		return []error{e.kind, e.err}
	}
	return []error{e.kind}
}

// formatErr returns a *formatError matching vram.ErrArgument.
func formatErr(format string, args ...any) error {
	return &formatError{msg: fmt.Sprintf(format, args...), kind: vram.ErrArgument}
}

// fmtAny formats a number or a bool as Python would print it, about.
func fmtAny(v any) string {
	switch v := v.(type) {
	case bool:
		if v {
			return "True"
		}
		return "False"
	}
	return fmt.Sprint(v)
}

// prefixed returns err with its message prefixed by p (a path, a key):
// "torchload: p: ...".
func prefixed(err error, p string) error {
	var fe *formatError
	var ge *GlobalError
	switch {
	case errors.As(err, &fe) && fe == err:
		c := *fe
		c.msg = p + ": " + c.msg
		return &c
	case errors.As(err, &ge) && ge == err:
		c := *ge
		c.File = p
		return &c
	}
	return fmt.Errorf("torchload: %s: %w", p, err)
}
