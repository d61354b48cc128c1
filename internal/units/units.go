// Package units formats byte counts in binary units for people to read and
// parses sizes and counts exactly, with errors that say what is accepted.
package units

import (
	"fmt"
	"math/bits"
)

// unitLetters are the prefixes after "B": KiB, MiB, ... EiB.
const unitLetters = "KMGTPE"

// scale returns |n| in the largest binary unit it reaches, that unit's
// letter index, and the sign.
func scale(n int64) (v float64, u int, neg string) {
	m := uint64(n)
	if n < 0 {
		neg, m = "-", -m // the magnitude, math.MinInt64's included
	}
	v = float64(m) / 1024
	for v >= 1024 && u < len(unitLetters)-1 {
		v /= 1024
		u++
	}
	return v, u, neg
}

// Bytes formats n with two decimals: "512 B", "1.50 KiB", "80.00 GiB",
// "-3.00 MiB".
func Bytes(n int64) string {
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, u, neg := scale(n)
	return fmt.Sprintf("%s%.2f %ciB", neg, v, unitLetters[u])
}

// BytesDown formats n as [Bytes] does, but rounds toward zero rather than
// to the nearest hundredth, for a bound that must not read as more than it
// is: 2 MiB less than 8 GiB is "7.99 GiB", which an 8 GiB request visibly
// exceeds, where Bytes gives "8.00 GiB".
func BytesDown(n int64) string { return bytesRounded(n, false) }

// BytesUp formats n as [Bytes] does, but rounds away from zero, for a
// least amount that must not read as less than it is.
func BytesUp(n int64) string { return bytesRounded(n, true) }

// bytesRounded formats n in hundredths of its unit, the remainder
// dropped or, when up is set, counted as one more hundredth. It divides
// integers, so that exact values stay exact.
func bytesRounded(n int64, up bool) string {
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d B", n)
	}
	_, u, neg := scale(n)
	m := uint64(n)
	if n < 0 {
		m = -m // the magnitude, math.MinInt64's included
	}
	hi, lo := bits.Mul64(m, 100)
	h, rem := bits.Div64(hi, lo, 1<<(10*(u+1))) // hi < 2^7: no overflow
	if up && rem != 0 {
		h++
	}
	return fmt.Sprintf("%s%d.%02d %ciB", neg, h/100, h%100, unitLetters[u])
}

// Compact formats n with three significant digits at most: "512 B",
// "1.50 KiB", "15.3 MiB", "140 GiB".
func Compact(n int64) string {
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, u, neg := scale(n)
	switch {
	case v >= 100:
		return fmt.Sprintf("%s%.0f %ciB", neg, v, unitLetters[u])
	case v >= 10:
		return fmt.Sprintf("%s%.1f %ciB", neg, v, unitLetters[u])
	}
	return fmt.Sprintf("%s%.2f %ciB", neg, v, unitLetters[u])
}
