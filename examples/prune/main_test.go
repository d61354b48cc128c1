package main

import (
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
	acc := func(stage string) float64 {
		m := regexp.MustCompile(stage + `: +accuracy ([0-9.]+)%`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %s accuracy in the output:\n%s", stage, out)
		}
		f, _ := strconv.ParseFloat(m[1], 64)
		return f
	}
	trained, tuned, permanent := acc("trained"), acc("fine-tuned"), acc("permanent")
	if trained < 85 || tuned < trained-5 || permanent != tuned {
		t.Errorf("accuracies trained %v, fine-tuned %v, permanent %v:\n%s", trained, tuned, permanent, out)
	}
	m := regexp.MustCompile(`(\d+) bytes with masks, (\d+) after removing 3 masks`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no mask memory in the output:\n%s", out)
	}
	with, without := atoi(m[1]), atoi(m[2])
	if with < 2*without-4096 {
		t.Errorf("masks took %d bytes beside %d of parameters; want about as much as the weights", with-without, without)
	}
	if !strings.Contains(out, "total") {
		t.Errorf("no sparsity total:\n%s", out)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
