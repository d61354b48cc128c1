package cpu_test

import (
	"testing"

	"github.com/vramgo/vram/backend/backendtest"
)

func TestUnscaleCheck(t *testing.T) { backendtest.RunUnscale(t, device(t)) }
