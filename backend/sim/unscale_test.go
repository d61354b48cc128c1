package sim

import (
	"testing"

	"github.com/vramgo/vram/backend/backendtest"
)

func TestUnscaleCheck(t *testing.T) {
	b, err := New(Options{Devices: []int64{64 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := b.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	backendtest.RunUnscale(t, dev)
}
