package analyze

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

// TestJSONListsNeverNull checks that every list of the --json report is a
// list, empty when there is nothing to list, and never null: a text
// trace's by_region, by_stack and largest, and the timeline's points of an
// empty one, were null while ooms was [], so that a script's
// `for g in dev["by_region"]` failed on some files only.
func TestJSONListsNeverNull(t *testing.T) {
	files := map[string]string{
		"empty text trace":            "# action addr size stream [time_us]\n",
		"text trace":                  "alloc 4096 512 0 1\nfree_completed 4096 512 0 2\n",
		"snapshot, nothing allocated": `{"format": "vram-memory-snapshot", "version": 1, "device": 0, "segments": [{"address": 4096, "size": 2097152, "pool": "large", "blocks": [{"address": 4096, "size": 2097152, "state": "inactive"}]}]}`,
	}
	for name, in := range files {
		t.Run(name, func(t *testing.T) {
			f, err := trace.Read(strings.NewReader(in), "in")
			if err != nil {
				t.Fatal(err)
			}
			r, err := Analyze(f, Options{})
			if err != nil {
				t.Fatal(err)
			}
			js, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(js, &v); err != nil {
				t.Fatal(err)
			}
			if p := nullPath(v, "$"); p != "" {
				t.Errorf("%s is null in %s", p, js)
			}
		})
	}
	r := analyzeFile(t, "sim_train.json")
	js, _ := json.Marshal(r)
	var v any
	_ = json.Unmarshal(js, &v)
	if p := nullPath(v, "$"); p != "" {
		t.Errorf("%s: %s is null", filepath.Join("testdata", "sim_train.json"), p)
	}
}

// nullPath returns the path of the first null in v, or "".
func nullPath(v any, path string) string {
	switch v := v.(type) {
	case nil:
		return path
	case map[string]any:
		for k, x := range v {
			if p := nullPath(x, path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for _, x := range v {
			if p := nullPath(x, path+"[]"); p != "" {
				return p
			}
		}
	}
	return ""
}
