package units

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// ParseError is the error of the parsers in this package. It names what
// was parsed, the input as given, what is wrong with it and the form that
// is accepted, so that its message alone tells the user how to fix it.
type ParseError struct {
	What   string // what the input is, as in "size" or "count"
	Input  string // the input, as given
	Reason string // what is wrong
	Want   string // the accepted form
}

// Error returns `bad WHAT "INPUT": REASON; want WANT`, on one line.
func (e *ParseError) Error() string {
	return fmt.Sprintf("bad %s %q: %s; want %s", e.What, e.Input, e.Reason, e.Want)
}

// SizeForm describes the syntax [ParseBytes] accepts, for messages.
const SizeForm = "a whole number of bytes, at least 1, as in 4096, 512MiB, 1.5GiB or 80GB (units B, KiB to EiB, KB to EB)"

// maxSizeInput bounds the length of a size string: the longest exact size
// (a fraction of an EiB down to the byte) has under 70 digits, and the cap
// keeps hostile inputs from costing big-number arithmetic.
const maxSizeInput = 100

// sizeUnits maps the accepted unit suffixes to their multipliers: binary
// (IEC) and decimal (SI) prefixes, and "B" alone.
var sizeUnits = map[string]int64{
	"B":   1,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50, "EiB": 1 << 60,
	"KB": 1e3, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15, "EB": 1e18,
}

// unitHint returns the units a misspelled unit likely meant, as "did you
// mean GiB or GB?", for the forms people write by habit (g, G, gb, Gi,
// gib, M, mb...): the prefix letter, any case, then optionally i, then
// optionally b; "" for anything else.
func unitHint(unit string) string {
	u := strings.ToUpper(unit)
	if len(u) == 0 || len(u) > 3 || !strings.ContainsRune("KMGTPE", rune(u[0])) {
		return ""
	}
	rest := strings.TrimSuffix(u[1:], "B")
	if rest != "" && rest != "I" {
		return ""
	}
	p := u[:1]
	si := p + "B"
	if p == "K" {
		si = "KB or kB"
	}
	return "did you mean " + p + "iB or " + si + "?"
}

// ParseBytes parses a size in bytes: a decimal number (digits, optionally
// followed by a point and more digits) and an optional unit of
// [SizeForm], with optional blanks around the number and between number and
// unit: "4096", "512MiB", "1.5 GiB", " 80GB ". The value must come out as a
// whole number of bytes from 1 to math.MaxInt64, computed exactly: "1.5GiB"
// is 1610612736, "0.5KiB" is 512, while "0.5", "1.3B" and "1.1KiB" are not
// whole bytes. Signs, exponents, hexadecimal, NaN, Inf, "0", empty input
// and trailing garbage are errors. The error is a [*ParseError].
func ParseBytes(s string) (int64, error) {
	bad := func(format string, args ...any) (int64, error) {
		return 0, &ParseError{What: "size", Input: s, Reason: fmt.Sprintf(format, args...), Want: SizeForm}
	}
	t := strings.TrimSpace(s) // as the lists that hold sizes trim their parts
	switch {
	case t == "":
		return bad("empty size")
	case len(t) > maxSizeInput:
		return bad("longer than %d characters", maxSizeInput)
	}
	// The number is the leading run of digits and points; the unit, what
	// follows the blanks after it.
	end := 0
	for end < len(t) && (isDigit(t[end]) || t[end] == '.') {
		end++
	}
	num, unit := t[:end], strings.TrimLeft(t[end:], " \t")
	if num == "" {
		switch t[0] {
		case '-':
			return bad("a size cannot be negative")
		case '+':
			return bad("no sign is accepted")
		}
		return bad("it does not start with a number")
	}
	mult := int64(1)
	if unit != "" {
		m, ok := sizeUnits[unit]
		if !ok {
			if hint := unitHint(unit); hint != "" {
				return bad("unknown unit %q (%s)", unit, hint)
			}
			return bad("unknown unit %q", unit)
		}
		mult = m
	}
	whole, frac, hasPoint := strings.Cut(num, ".")
	if whole == "" || hasPoint && frac == "" || strings.Contains(frac, ".") {
		return bad("%q is not a decimal number (digits, optionally a point and more digits)", num)
	}
	// value = digits(whole+frac) * mult / 10^len(frac), exactly.
	v, _ := new(big.Int).SetString(whole+frac, 10)
	v.Mul(v, big.NewInt(mult))
	q, r := new(big.Int).QuoRem(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil), new(big.Int))
	switch {
	case v.Sign() == 0:
		return bad("a size must be at least 1 byte")
	case q.Sign() == 0:
		return bad("%s is less than 1 byte", t)
	case r.Sign() != 0:
		return bad("%s is not a whole number of bytes", t)
	case !q.IsInt64():
		return bad("more than the largest size, %d bytes (8 EiB)", int64(math.MaxInt64))
	}
	return q.Int64(), nil
}

// ParseCount parses a count: decimal digits only (no sign, blanks or
// exponent), from lo to hi inclusive (0 <= lo <= hi). what names the count
// in the error, a [*ParseError].
func ParseCount(what, s string, lo, hi int64) (int64, error) {
	want := fmt.Sprintf("a whole number from %d to %d, in decimal digits", lo, hi)
	bad := func(reason string) (int64, error) {
		return 0, &ParseError{What: what, Input: s, Reason: reason, Want: want}
	}
	if s == "" {
		return bad("empty " + what)
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return bad(fmt.Sprintf("%q is not a digit", s[i:i+1]))
		}
		d := int64(s[i] - '0')
		if n > (math.MaxInt64-d)/10 {
			return bad(fmt.Sprintf("more than %d", hi))
		}
		n = n*10 + d
	}
	switch {
	case n < lo:
		return bad(fmt.Sprintf("less than %d", lo))
	case n > hi:
		return bad(fmt.Sprintf("more than %d", hi))
	}
	return n, nil
}

// ParseDecimal parses a finite, non-negative decimal number: digits with an
// optional point and fraction, then an optional exponent ("0.6", "5e-1",
// ".25", "1."), with no sign, blanks, underscores, hexadecimal, NaN or Inf.
// A value too large for a float64 is an error, a [*ParseError]; what names
// the number in it. Callers check the range they need.
func ParseDecimal(what, s string) (float64, error) {
	bad := func(reason string) (float64, error) {
		return 0, &ParseError{What: what, Input: s, Reason: reason,
			Want: "a decimal number such as 0.6 or 5e-1 (digits, an optional point and fraction, an optional exponent)"}
	}
	i, digits := 0, 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && isDigit(s[i]); i++ {
			digits++
		}
	}
	if digits == 0 {
		return bad("it does not start with a number")
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for ; i < len(s) && isDigit(s[i]); i++ {
		}
		if i == start {
			return bad("the exponent has no digits")
		}
	}
	if i < len(s) {
		return bad(fmt.Sprintf("unexpected %q after the number", s[i:]))
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return bad("too large")
	}
	return v, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
