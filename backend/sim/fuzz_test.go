package sim

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/vramgo/vram/internal/fuzztest"
	"github.com/vramgo/vram/memory"
)

// maxFuzzSize bounds the strings the size fuzz targets parse: real values
// are a few bytes.
const maxFuzzSize = 256

// maxSize is the largest size ParseBytes returns; ParseDevices refuses
// devices above memory.MaxSimCapacity.
const maxSize = math.MaxInt64

// sizeUnits are the unit suffixes whose value the exactness check knows,
// longest first.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"PiB", 1 << 50}, {"EiB", 1 << 60},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"PB", 1e15}, {"EB", 1e18},
	{"B", 1},
}

// exactSize returns the exact value of a size written as a decimal (or
// hexadecimal) number and an optional unit, and whether s has that form.
func exactSize(s string) (*big.Rat, bool) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	if s == "" || strings.ContainsAny(s, "/_") {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, false
	}
	return r.Mul(r, new(big.Rat).SetInt64(mult)), true
}

// checkSize fails t unless n, which a parser returned for s, is a size a
// device can have and is s's value: exactly when that is a whole number of
// bytes, else rounded to a neighbouring one.
func checkSize(t *testing.T, s string, n int64) {
	t.Helper()
	if n < 1 || n > maxSize {
		t.Fatalf("%q parsed as %d bytes: a size is at least 1 byte", s, n)
	}
	exact, ok := exactSize(s)
	if !ok {
		if l := strings.ToLower(s); strings.Contains(l, "nan") || strings.Contains(l, "inf") {
			t.Fatalf("%q parsed as %d bytes: not a finite number", s, n)
		}
		return
	}
	got := new(big.Rat).SetInt64(n)
	if exact.IsInt() {
		if got.Cmp(exact) != 0 {
			t.Fatalf("%q parsed as %d bytes, want exactly %s", s, n, exact.RatString())
		}
		return
	}
	if diff := new(big.Rat).Sub(got, exact); diff.Abs(diff).Cmp(big.NewRat(1, 1)) >= 0 {
		t.Fatalf("%q parsed as %d bytes, want %s rounded to a whole byte", s, n, exact.FloatString(3))
	}
}

// checkOneLine fails t if err's message is empty or more than one line.
func checkOneLine(t *testing.T, s string, err error) {
	t.Helper()
	if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\n\r") {
		t.Fatalf("%q: error %q is not one line", s, msg)
	}
}

// FuzzParseBytes checks the size parser of --capacity and VRAM_SIM_DEVICES:
// whatever it accepts is a size a device can have (positive, at most 2^62,
// never NaN or infinite) and is the value written, exactly when that is a
// whole number of bytes; whatever it refuses gets a one-line error. Seeds
// are in testdata/fuzz/FuzzParseBytes.
func FuzzParseBytes(f *testing.F) {
	f.Add("24GiB")
	f.Add(" 1.5 TiB ")
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxFuzzSize {
			return
		}
		n, err := ParseBytes(s)
		if err != nil {
			checkOneLine(t, s, err)
			return
		}
		checkSize(t, s, n)
	})
}

// FuzzParseDevices checks the VRAM_SIM_DEVICES parser: every device it
// returns has a valid size, the count stays within 64 per listed entry, and
// a single size gives the one device ParseBytes describes. Seeds are in
// testdata/fuzz/FuzzParseDevices.
func FuzzParseDevices(f *testing.F) {
	f.Add("2x24GiB,80GB")
	f.Add("0")
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxFuzzSize {
			return
		}
		devs, err := ParseDevices(s)
		if err != nil {
			checkOneLine(t, s, err)
			return
		}
		if strings.TrimSpace(s) == "" && len(devs) != DefaultCount {
			t.Fatalf("%q gives %d devices, want the default %d", s, len(devs), DefaultCount)
		}
		if entries := strings.Count(s, ",") + 1; len(devs) > 64*entries {
			t.Fatalf("%q gives %d devices from %d entries", s, len(devs), entries)
		}
		for i, n := range devs {
			if n < 1 || n > memory.MaxSimCapacity {
				t.Fatalf("%q: device %d has %d bytes", s, i, n)
			}
		}
		if !strings.ContainsAny(s, ",x") && strings.TrimSpace(s) != "" && strings.TrimSpace(s) != "0" {
			n, err := ParseBytes(s)
			if err == nil && n > memory.MaxSimCapacity {
				t.Fatalf("%q: a device of %d bytes accepted", s, n)
			}
			if err != nil || len(devs) != 1 || devs[0] != n {
				t.Fatalf("%q gives devices %v, but ParseBytes says %d, %v", s, devs, n, err)
			}
			checkSize(t, s, n)
		}
	})
}

// TestFuzzSeeds checks the committed seed corpora (run with
// -update-fuzz-seeds to rewrite them).
func TestFuzzSeeds(t *testing.T) {
	sizes := []string{"24GiB", "80GB", "512MiB", "1024", "1.5GiB", "0.25 TiB", "141GB", "1e9", "4096B",
		"2KiB", "4611686018427387904", "4194304TiB", "-1GiB", "0", "1,5GB", "GiB", "12 gb"}
	devices := []string{"", "0", "2x24GiB", "80GiB,16GiB", "1x512MiB, 1GB", "64x1GiB", "65x1GiB", "0x1GiB",
		"2x", "4096", "8x80GiB,8x141GB", "1.5GiB", "lots"}
	var bs, ds []fuzztest.Seed
	for i, s := range sizes {
		bs = append(bs, fuzztest.Seed{Name: fmt.Sprintf("%02d", i), Args: []any{s}})
	}
	for i, s := range devices {
		ds = append(ds, fuzztest.Seed{Name: fmt.Sprintf("%02d", i), Args: []any{s}})
	}
	fuzztest.Check(t, "FuzzParseBytes", bs, maxFuzzSize)
	fuzztest.Check(t, "FuzzParseDevices", ds, maxFuzzSize)
}
