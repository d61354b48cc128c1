package torchload

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/vramgo/vram/internal/fuzztest" // defines -update-fuzz-seeds
)

// exampleFile is testdata/linear.pt, which the examples read: the
// checkpoint {"model": state_dict, "epoch": 3} of
// DistributedDataParallel(nn.Linear(3, 2)), whose weight was saved as
// the transpose of a [3, 2] tensor (stride (1, 2)), as torch.save keeps a
// non-contiguous tensor.
func exampleFile(t testing.TB) []byte {
	w := tens{key: "0", class: "FloatStorage", numel: 6, size: []int64{2, 3}, stride: []int64{1, 2}, param: true}
	b := tens{key: "1", class: "FloatStorage", numel: 2, size: []int64{2}, stride: []int64{1}, param: true}
	sd := odict{{"module.weight", w}, {"module.bias", b}}
	root := pdict{{"model", sd}, {"epoch", 3}}
	// Stored row-major as [3, 2]: the weight is its transpose,
	// [[1, 3, 5], [2, 4, 6]].
	return archiveOf(t, root, map[string][]byte{"0": le([]float32{1, 2, 3, 4, 5, 6}), "1": le([]float32{0.5, -1})})
}

// TestExampleFile checks testdata/linear.pt against exampleFile (run
// with -update-fuzz-seeds to rewrite it).
func TestExampleFile(t *testing.T) {
	path := filepath.Join("testdata", "linear.pt")
	want := exampleFile(t)
	if f := flag.Lookup("update-fuzz-seeds"); f != nil && f.Value.String() == "true" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s differs from exampleFile (%v): run the test with -update-fuzz-seeds", path, err)
	}
}
