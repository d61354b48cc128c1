package printable

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"python3", "python3"},
		{"NVIDIA H200", "NVIDIA H200"},
		{"", ""},
		{"train.py --lr 0.1", "train.py --lr 0.1"},
		{"\x1b[2J\x1b[Hpwned", `\x1b[2J\x1b[Hpwned`},
		{"\x1b]0;title\x07", `\x1b]0;title\x07`},
		{"a\rb", `a\rb`},
		{"line1\nline2", `line1\nline2`},
		{"tab\there", `tab\there`},
		{"del\x7f", `del\x7f`},
		{"c1\u009b31m", `c1\u009b31m`},
		{"evil\u202egnp.exe", `evil\u202egnp.exe`},
		{"zero\u200bwidth", `zero\u200bwidth`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"Gerät °C 深度学习", "Gerät °C 深度学习"},
		{`back\slash`, `back\slash`},
	}
	for _, tc := range tests {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestText(t *testing.T) {
	in := "first line\nsecond \x1b[31mred\x1b[0m\r\n"
	want := "first line\nsecond \\x1b[31mred\\x1b[0m\\r\n"
	if got := Text(in); got != want {
		t.Errorf("Text(%q) = %q, want %q", in, got, want)
	}
}

// FuzzString checks that no output holds a control or format character
// (and newlines only from Text), and that printable input is unchanged.
func FuzzString(f *testing.F) {
	for _, s := range []string{"python3", "\x1b[31m", "a\nb", "\u202e", "\xff", "ok °C"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, keep := range []bool{false, true} {
			out := clean(s, keep)
			if !utf8.ValidString(out) {
				t.Fatalf("clean(%q, %v) = %q is not UTF-8", s, keep, out)
			}
			for _, r := range out {
				if r == '\n' && keep {
					continue
				}
				if r != ' ' && !unicode.IsPrint(r) {
					t.Fatalf("clean(%q, %v) = %q holds %U", s, keep, out, r)
				}
			}
			printable := utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }) < 0
			if printable && out != s {
				t.Fatalf("clean(%q, %v) = %q changed printable text", s, keep, out)
			}
		}
	})
}
