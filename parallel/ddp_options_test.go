package parallel

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram/nn"
)

// TestDDPOptionsDiffer: ranks whose DDPOptions differ in what the
// collectives depend on (the buckets, the search for unused parameters,
// the broadcast of buffers) fail at construction with ErrMismatch naming
// the rank, rather than pair up the wrong collectives in a later step (on
// NCCL, which compares nothing, a hang or another rank's bytes); options
// that lead to the same collectives agree.
func TestDDPOptionsDiffer(t *testing.T) {
	tests := []struct {
		name   string
		rank1  DDPOptions // rank 0 has the zero options
		differ bool
	}{
		{"bucket size", DDPOptions{BucketCapBytes: 8}, true}, // a bucket per parameter
		{"a bucket size that lays out the same buckets", DDPOptions{BucketCapBytes: 1 << 10}, false},
		{"unused parameters", DDPOptions{FindUnusedParameters: true}, true},
		{"local buffers", DDPOptions{KeepLocalBuffers: true}, true},
		{"the default bucket size spelled out", DDPOptions{BucketCapBytes: DefaultBucketCapBytes}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			comms := tcpGroup(t, 2, 5*time.Second)
			errs := onRanks(comms, func(r int, c Communicator) error {
				opts := DDPOptions{}
				if r == 1 {
					opts = tc.rank1
				}
				m := nn.NewLinear(2, 2)
				defer nn.Release(m)
				d, err := NewDistributedDataParallel(m, c, opts)
				if err == nil {
					d.Close()
				}
				return err
			})
			for r, err := range errs {
				switch {
				case !tc.differ && err != nil:
					t.Errorf("rank %d: %v", r, err)
				case tc.differ && (!errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "rank 1's DDPOptions differ")):
					t.Errorf("rank %d: %v, want ErrMismatch saying that rank 1's DDPOptions differ", r, err)
				}
			}
		})
	}
}
