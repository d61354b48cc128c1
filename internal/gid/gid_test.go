package gid

import (
	"sync"
	"testing"
)

func TestCurrentDistinguishesGoroutines(t *testing.T) {
	me := Current()
	if me == 0 || Current() != me {
		t.Fatalf("Current is not stable: %x then %x", me, Current())
	}
	const n = 16
	ids := make(chan uintptr, n)
	var wg sync.WaitGroup
	var start sync.WaitGroup
	start.Add(1)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := Current()
			start.Wait() // all alive at once, so no descriptor is reused
			if Current() != id {
				t.Error("id changed within a goroutine")
			}
			ids <- id
		}()
	}
	start.Done()
	wg.Wait()
	close(ids)
	seen := map[uintptr]bool{me: true}
	for id := range ids {
		if seen[id] {
			t.Fatalf("two live goroutines share id %x", id)
		}
		seen[id] = true
	}
}

func TestFromStack(t *testing.T) {
	if fromStack() == 0 {
		t.Fatal("no id parsed from the stack header")
	}
}

func BenchmarkCurrent(b *testing.B) {
	for b.Loop() {
		Current()
	}
}

func BenchmarkFromStack(b *testing.B) {
	for b.Loop() {
		fromStack()
	}
}
