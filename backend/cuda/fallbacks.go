package cuda

import (
	"maps"
	"sync"
)

// Fallback counts the calls of one cuDNN operation that cuDNN did not
// take, with the reason of the latest.
type Fallback struct {
	Count int64
	Last  string // the latest call's reason
}

// dnnFallbacks holds the fallbacks by operation ("conv2d", "conv2d
// backward data", "batch norm", ...).
var dnnFallbacks struct {
	mu   sync.Mutex
	byOp map[string]Fallback
}

// recordFallback counts a fallback of operation what for reason why.
func recordFallback(what string, why error) {
	dnnFallbacks.mu.Lock()
	defer dnnFallbacks.mu.Unlock()
	if dnnFallbacks.byOp == nil {
		dnnFallbacks.byOp = map[string]Fallback{}
	}
	f := dnnFallbacks.byOp[what]
	f.Count++
	if why != nil {
		f.Last = why.Error()
	}
	dnnFallbacks.byOp[what] = f
}

// CuDNNFallbacks returns, by operation, the calls that cuDNN did not take
// since the process started (what [CuDNNStats].Fallbacks sums), each with
// the reason of the latest: which layer of a network goes to the composed
// path, and why.
func CuDNNFallbacks() map[string]Fallback {
	dnnFallbacks.mu.Lock()
	defer dnnFallbacks.mu.Unlock()
	return maps.Clone(dnnFallbacks.byOp)
}
