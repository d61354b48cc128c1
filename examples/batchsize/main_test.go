package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

func TestRun(t *testing.T) {
	var b strings.Builder
	if err := run(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	m := regexp.MustCompile(`largest batch that fits: (\d+) .*with a 10% margin: (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no batch found in the output:\n%s", out)
	}
	largest, _ := strconv.Atoi(m[1])
	batch, _ := strconv.Atoi(m[2])
	if want := int(0.9 * float64(largest)); batch != want {
		t.Errorf("batch %d with the margin, want %d", batch, want)
	}
	for _, want := range []string{
		fmt.Sprintf(" %d fits,", largest),
		fmt.Sprintf(" %d OOM,", largest+1), // the exact largest
		"allocated after the search: 0 bytes",
		fmt.Sprintf("a step at batch %d ran", batch),
		fmt.Sprintf("an accumulated step of 4 × %d", batch),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
