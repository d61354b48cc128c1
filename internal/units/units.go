// Package units formats byte counts in binary units for people to read and
// parses sizes and counts exactly, with errors that say what is accepted.
package units

import "fmt"

// unitLetters are the prefixes after "B": KiB, MiB, ... EiB.
const unitLetters = "KMGTPE"

// scale returns |n| in the largest binary unit it reaches, that unit's
// letter index, and the sign.
func scale(n int64) (v float64, u int, neg string) {
	if n < 0 {
		neg, n = "-", -n
	}
	v = float64(n) / 1024
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
