package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vramgo/vram"
)

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// TestRun runs the example as "go run ./examples/resnet" does: with a GPU
// it must train ResNet-18 to at least 95% accuracy and reload the same
// predictions from safetensors; without one, the shape-only step must fit.
func TestRun(t *testing.T) {
	gpu := vram.CUDAAvailable()
	var b strings.Builder
	if err := run(&b, gpu); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	if !gpu {
		if !strings.Contains(out, "one step fits, peak ") {
			t.Errorf("no fit report:\n%s", out)
		}
		return
	}
	m := regexp.MustCompile(`test accuracy: ([0-9.]+)%`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no accuracy in the output:\n%s", out)
	}
	if acc, _ := strconv.ParseFloat(m[1], 64); acc < 95 {
		t.Errorf("test accuracy %v%%, want at least 95%%", acc)
	}
	if want := "reloaded from safetensors: 1024 of 1024 predictions the same"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

// TestTrainSmallCPU runs the GPU path's code (training under autocast,
// evaluation, save and reload) on the CPU at a tiny size, which is too
// small to learn much but goes through every step.
func TestTrainSmallCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	var b strings.Builder
	c := settings{size: 8, trainN: 16, testN: 16, batch: 16, epochs: 1}
	if err := vram.Catch(func() { train(&b, vram.CPU, c) }); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"epoch 1: mean loss", "test accuracy:", "reloaded from safetensors: 16 of 16 predictions the same"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
