package parallel

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStoreConcurrentClients has many goroutines share one Store client,
// as the ranks' helpers of one process do, and others use clients of
// their own, for the race detector: every Add is counted once, every Set
// is read back whole, and a Close in the middle of it all makes the calls
// of the closed client fail rather than hang or race.
func TestStoreConcurrentClients(t *testing.T) {
	ctx := context.Background()
	srv, shared := newTestStore(t, 5*time.Second)
	const goroutines, rounds = 16, 20
	seen := make([][]int64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := shared
			if g%4 == 3 {
				own, err := DialStore(ctx, srv.Addr().String(), StoreOptions{Timeout: 5 * time.Second})
				if err != nil {
					t.Error(err)
					return
				}
				defer own.Close()
				s = own
			}
			for i := range rounds {
				n, err := s.Add(ctx, "counter", 1)
				if err != nil {
					t.Error(err)
					return
				}
				seen[g] = append(seen[g], n)
				key := fmt.Sprintf("k%d-%d", g, i)
				want := []byte(key + "=" + strconv.Itoa(i))
				if err := s.Set(ctx, key, want); err != nil {
					t.Error(err)
					return
				}
				// Read another goroutine's key, waiting for it.
				other := fmt.Sprintf("k%d-%d", (g+1)%goroutines, i)
				v, err := s.Get(ctx, other)
				if err != nil {
					t.Error(err)
					return
				}
				if string(v) != other+"="+strconv.Itoa(i) {
					t.Errorf("Get(%s) = %q", other, v)
				}
				if ok, err := s.Check(ctx, key, other); err != nil || !ok {
					t.Errorf("Check(%s, %s) = %v, %v", key, other, ok, err)
				}
			}
		}()
	}
	wg.Wait()
	count := map[int64]int{}
	for _, ns := range seen {
		for _, n := range ns {
			count[n]++
		}
	}
	for n := int64(1); n <= goroutines*rounds; n++ {
		if count[n] != 1 {
			t.Fatalf("Add returned %d %d times, want once (counts: %v)", n, count[n], count)
		}
	}

	// Close the shared client while goroutines use it: each call ends,
	// with its result or an error, well before the store's timeout.
	start := time.Now()
	var calls sync.WaitGroup
	for g := range goroutines {
		calls.Add(1)
		go func() {
			defer calls.Done()
			for i := range rounds {
				if _, err := shared.Add(ctx, "after", 1); err != nil {
					return
				}
				shared.Set(ctx, fmt.Sprintf("after%d-%d", g, i), nil)
			}
		}()
	}
	shared.Close()
	calls.Wait()
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("calls took %v after Close", took)
	}
	if err := shared.Set(ctx, "closed", nil); err == nil {
		t.Error("Set on a closed client succeeded")
	}
}

// TestStoreCloseEndsCallsInProgress closes a client while other
// goroutines wait in Get and Wait for keys that never come: they return
// at once with an error that says the client was closed, not at the
// store's timeout.
func TestStoreCloseEndsCallsInProgress(t *testing.T) {
	_, s := newTestStore(t, 10*time.Second)
	calls := map[string]func() error{
		"get": func() error {
			_, err := s.Get(context.Background(), "never")
			return err
		},
		"wait": func() error { return s.Wait(context.Background(), "never", "nor this") },
	}
	errs := make(chan error, len(calls))
	for _, call := range calls {
		go func() { errs <- call() }()
	}
	time.Sleep(100 * time.Millisecond) // let the calls reach the server
	start := time.Now()
	s.Close()
	for range calls {
		select {
		case err := <-errs:
			if err == nil || !strings.Contains(err.Error(), "closed") {
				t.Errorf("a call in progress at Close returned %v, want an error saying the client is closed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("a call in progress at Close still waits %v later", time.Since(start))
		}
	}
}
