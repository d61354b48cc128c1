package main

import (
	"strings"
	"testing"
)

func TestWalkthrough(t *testing.T) {
	var b strings.Builder
	if err := run(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines:\n%s", len(lines), b.String())
	}
	reserved := func(line string) string { return strings.TrimSpace(line[strings.Index(line, "reserved")+8:]) }
	if reserved(lines[1]) == reserved(lines[0]) {
		t.Errorf("reserved memory did not rise:\n%s", b.String())
	}
	if reserved(lines[2]) != reserved(lines[1]) {
		t.Errorf("reserved memory should stay after Release:\n%s", b.String())
	}
	if reserved(lines[3]) != reserved(lines[0]) {
		t.Errorf("EmptyCache should give the memory back:\n%s", b.String())
	}
	if !strings.Contains(lines[2], "allocated       0.0 MiB") {
		t.Errorf("nothing should stay allocated after Release:\n%s", b.String())
	}
}
