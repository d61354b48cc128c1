// Package printable makes untrusted strings safe to print on a terminal.
//
// Names that come from outside the program (process and GPU names from the
// driver, regions, stack frames and file names from a snapshot or trace
// file) can hold control characters: an escape sequence would recolour,
// clear or retitle the user's terminal, a carriage return or a newline
// would forge output lines, and bidirectional overrides would reorder what
// is shown. [String] and [Text] replace each such character with a visible
// escape (\x1b, \r, \u202e) and leave everything printable unchanged.
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with every character that is not printable written as
// an escape: C0 and C1 control characters (escape, carriage return,
// newline and tab included), DEL, Unicode format characters (bidirectional
// overrides, zero-width characters), other non-printing runes and bytes
// that are not UTF-8. Printable text, spaces and non-ASCII letters and
// symbols pass unchanged, so the result is one line that shows what s
// holds.
func String(s string) string { return clean(s, false) }

// Text is [String] for text of several lines: newlines are kept, and
// everything else that String escapes is escaped.
func Text(s string) string { return clean(s, true) }

func clean(s string, keepNewlines bool) string {
	if safeASCII(s, keepNewlines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' && keepNewlines:
			b.WriteByte('\n')
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == ' ' || unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += size
	}
	return b.String()
}

// safeASCII reports whether s is printable ASCII (and newlines, when they
// are kept), which needs no escaping.
func safeASCII(s string, keepNewlines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && !(c == '\n' && keepNewlines) || c >= 0x7f {
			return false
		}
	}
	return true
}
