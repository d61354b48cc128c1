package units

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"1", 1},
		{"4096", 4096},
		{"0004096", 4096},
		{"1B", 1},
		{"512MiB", 512 << 20},
		{"24GiB", 24 << 30},
		{"1.5GiB", 3 << 29},
		{"0.5KiB", 512},
		{"0.0009765625KiB", 1},
		{"1.25 MiB", 5 << 18},
		{" 4GiB", 4 << 30},
		{"4GiB ", 4 << 30},
		{"4 GiB", 4 << 30},
		{"4\tGiB", 4 << 30},
		{"2.000B", 2},
		{"80GB", 80e9},
		{"1kB", 1000},
		{"1KB", 1000},
		{"1.5KB", 1500},
		{"2TiB", 2 << 40},
		{"1PiB", 1 << 50},
		{"4194304TiB", 1 << 62},
		{"7EiB", 7 << 60},
		{"9EB", 9e18},
		{"9223372036854775807", math.MaxInt64},
		{"9223372036854775807B", math.MaxInt64},
		{"8388607.9990234375TiB", math.MaxInt64 &^ (1<<30 - 1)},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseBytes(tc.in)
			if err != nil {
				t.Fatalf("ParseBytes(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Fatalf("ParseBytes(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseBytesErrors(t *testing.T) {
	tests := []struct {
		in      string
		mention string // a word of the reason
	}{
		{"", "empty"},
		{"   ", "empty"},
		{"0", "at least 1 byte"},
		{"0GiB", "at least 1 byte"},
		{"0.0", "at least 1 byte"},
		{"-0", "negative"},
		{"-1GiB", "negative"},
		{"+1GiB", "sign"},
		{"0.5", "less than 1 byte"},
		{"0.5B", "less than 1 byte"},
		{"0.0001KiB", "less than 1 byte"},
		{"1.5", "not a whole number"},
		{"1.3B", "not a whole number"},
		{"1.1KiB", "not a whole number"},
		{"1.0000000001GiB", "not a whole number"},
		{"NaN", "number"},
		{"nan", "number"},
		{"Inf", "number"},
		{"+Inf", "sign"},
		{"-Inf", "negative"},
		{"infinity", "number"},
		{"1e30", "unknown unit"},
		{"1e3", "unknown unit"},
		{"1E3GiB", "unknown unit"},
		{"0x10", "unknown unit"},
		{"1_000", "unknown unit"},
		{"9223372036854775808", "largest size"},
		{"8EiB", "largest size"},
		{"10EB", "largest size"},
		{"1000000000000000000000000000000", "largest size"},
		{"4194304TiB1", "unknown unit"},
		{"4GiBs", "unknown unit"},
		{"4 GiB extra", "unknown unit"},
		{"4gib", `unknown unit "gib" (did you mean GiB or GB?)`},
		{"4 G", `unknown unit "G" (did you mean GiB or GB?)`},
		{"24g", `unknown unit "g" (did you mean GiB or GB?)`},
		{"24gb", `unknown unit "gb" (did you mean GiB or GB?)`},
		{"512m", `unknown unit "m" (did you mean MiB or MB?)`},
		{"8Ki", `unknown unit "Ki" (did you mean KiB or KB or kB?)`},
		{"2t", `unknown unit "t" (did you mean TiB or TB?)`},
		{"2x", `unknown unit "x"`},
		{"2gbit", `unknown unit "gbit"`},
		{"GiB", "does not start with a number"},
		{".5GiB", "not a decimal number"},
		{"1.GiB", "not a decimal number"},
		{"1..5GiB", "not a decimal number"},
		{"1.5.5GiB", "not a decimal number"},
		{"1,5GiB", "unknown unit"},
		{strings.Repeat("1", 101), "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseBytes(tc.in)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("ParseBytes(%q) = %d, %v; want a *ParseError", tc.in, got, err)
			}
			if pe.Input != tc.in || pe.What != "size" || pe.Want != SizeForm {
				t.Errorf("error fields %+v do not name the input and the accepted form", pe)
			}
			if !strings.Contains(pe.Reason, tc.mention) {
				t.Errorf("reason %q does not mention %q", pe.Reason, tc.mention)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "1.5GiB") {
				t.Errorf("message %q is not one line giving the accepted form", msg)
			}
		})
	}
}

func TestParseCount(t *testing.T) {
	tests := []struct {
		in      string
		lo, hi  int64
		want    int64
		mention string // "" when the input is valid
	}{
		{"1", 1, 64, 1, ""},
		{"64", 1, 64, 64, ""},
		{"007", 1, 64, 7, ""},
		{"0", 0, 3, 0, ""},
		{"9223372036854775807", 0, math.MaxInt64, math.MaxInt64, ""},
		{"0", 1, 64, 0, "less than 1"},
		{"65", 1, 64, 0, "more than 64"},
		{"7", 1, 5, 0, "more than 5"},
		{"", 1, 64, 0, "empty"},
		{"+2", 1, 64, 0, "not a digit"},
		{"-2", 1, 64, 0, "not a digit"},
		{"-0", 0, 64, 0, "not a digit"},
		{" 2", 1, 64, 0, "not a digit"},
		{"2 ", 1, 64, 0, "not a digit"},
		{"2.0", 1, 64, 0, "not a digit"},
		{"1e1", 1, 64, 0, "not a digit"},
		{"0x10", 1, 64, 0, "not a digit"},
		{"NaN", 1, 64, 0, "not a digit"},
		{"99999999999999999999999", 1, 64, 0, "more than 64"},
		{"9223372036854775808", 0, math.MaxInt64, 0, "more than"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseCount("count", tc.in, tc.lo, tc.hi)
			if tc.mention == "" {
				if err != nil || got != tc.want {
					t.Fatalf("ParseCount(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
				}
				return
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("ParseCount(%q) = %d, %v; want a *ParseError", tc.in, got, err)
			}
			if !strings.Contains(pe.Reason, tc.mention) || pe.Input != tc.in {
				t.Errorf("error %v does not name the input and mention %q", err, tc.mention)
			}
		})
	}
}

func TestParseDecimal(t *testing.T) {
	valid := map[string]float64{
		"0": 0, "0.6": 0.6, "1": 1, "5e-1": 0.5, "5E-1": 0.5, ".25": 0.25, "1.": 1, "0.5e+0": 0.5,
		"1e-400": 0, "1e308": 1e308, "007.5": 7.5,
	}
	for in, want := range valid {
		if got, err := ParseDecimal("fraction", in); err != nil || got != want {
			t.Errorf("ParseDecimal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", " 0.5", "0.5 ", "+0.5", "-0.5", "-0", "NaN", "nan", "Inf", "+Inf", "infinity", "0x1p-1",
		"0.5_0", "1_0", "1e", "1e+", "e5", ".", ".e1", "1e400", "0.5.5", "0,5", "1/2", "5%",
	} {
		var pe *ParseError
		if got, err := ParseDecimal("fraction", in); !errors.As(err, &pe) || pe.Input != in || pe.What != "fraction" {
			t.Errorf("ParseDecimal(%q) = %v, %v; want a *ParseError naming it", in, got, err)
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"1", "1.5GiB", " 4 GiB ", "0.5", "NaN", "8EiB", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("ParseBytes(%q): error %v is not a *ParseError", s, err)
			}
			return
		}
		if n < 1 {
			t.Fatalf("ParseBytes(%q) = %d, below one byte", s, n)
		}
		// A whole byte count parses back to itself.
		if back, err := ParseBytes(strconv.FormatInt(n, 10)); err != nil || back != n {
			t.Fatalf("ParseBytes(%d) = %d, %v", n, back, err)
		}
	})
}
