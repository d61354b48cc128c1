package cuda

import (
	"errors"
	"testing"
)

// TestCuDNNFallbacksByOp checks that fallbacks are counted by operation
// with the latest reason, and that the returned map is a copy.
func TestCuDNNFallbacksByOp(t *testing.T) {
	const op = "test op of TestCuDNNFallbacksByOp"
	before := CuDNNFallbacks()[op].Count
	recordFallback(op, errors.New("first reason"))
	recordFallback(op, errors.New("second reason"))
	got := CuDNNFallbacks()
	if f := got[op]; f.Count != before+2 || f.Last != "second reason" {
		t.Fatalf("fallbacks of %q: %+v, want count %d and the second reason", op, f, before+2)
	}
	got[op] = Fallback{}
	if CuDNNFallbacks()[op].Count != before+2 {
		t.Fatal("changing the returned map changed the counts")
	}
}
