package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenFixtures(t *testing.T) {
	tests := []struct {
		file      string
		kind      Kind
		gzipped   bool
		events    int
		snapshots int
	}{
		{"resnet50_train.trace.gz", KindText, true, 8504, 0},
		{"snapshot_p2.pickle", KindPickle, false, 0, 2},
		{"snapshot_p4.pickle", KindPickle, false, 0, 2},
		{"snapshot_p5.pickle", KindPickle, false, 0, 2},
		{"snapshot_p4.pickle.gz", KindPickle, true, 0, 2},
		{"segments_only_p2.pickle", KindPickle, false, 0, 1},
		{"snapshot_expected_device0.json", KindJSON, false, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if f.Name != path || f.Kind != tc.kind || f.Gzipped != tc.gzipped || len(f.Events) != tc.events || len(f.Snapshots) != tc.snapshots {
				t.Errorf("got name %q kind %v gzipped %v, %d events, %d snapshots", f.Name, f.Kind, f.Gzipped, len(f.Events), len(f.Snapshots))
			}
			if tc.kind == KindText && len(f.Header) == 0 {
				t.Error("no header")
			}
		})
	}
}

func TestReadDetects(t *testing.T) {
	var js bytes.Buffer
	if err := WriteJSON(&js, sampleSnapshot()); err != nil {
		t.Fatal(err)
	}
	var zjs bytes.Buffer
	zw := gzip.NewWriter(&zjs)
	zw.Write(js.Bytes())
	zw.Close()
	tests := []struct {
		name string
		in   []byte
		kind Kind
	}{
		{"json", js.Bytes(), KindJSON},
		{"json with blanks", append([]byte(" \n\t\r\n"), js.Bytes()...), KindJSON},
		{"gzip json", zjs.Bytes(), KindJSON},
		{"text", []byte("# größe\nalloc 1 2 3\n"), KindText},
		{"comments only", []byte("# nothing recorded\n"), KindText},
		// The 512th byte starts a two-byte character.
		{"text cut inside a character", []byte("# " + strings.Repeat("ä", 254) + "xä\nalloc 1 2 3\n"), KindText},
		{"text with a byte-order mark", []byte("\ufeffalloc 1 2 3\nfree_completed 1 2 3\n"), KindText},
		{"json with a byte-order mark", append([]byte("\ufeff"), js.Bytes()...), KindJSON},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Read(bytes.NewReader(tc.in), tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if f.Kind != tc.kind {
				t.Errorf("Kind = %v, want %v", f.Kind, tc.kind)
			}
		})
	}
}

func TestReadErrorsNameFile(t *testing.T) {
	var zbin bytes.Buffer
	zw := gzip.NewWriter(&zbin)
	zw.Write([]byte{0, 1, 2, 3})
	zw.Close()
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "trace: empty: empty input"},
		{"binary", []byte{0x7f, 'E', 'L', 'F', 0, 0}, "trace: binary: offset 0: unrecognised format (not gzip, a PyTorch pickle, a vram JSON snapshot or a text trace; starts with 7f 45 4c 46 00 00)"},
		{"bad utf8", []byte("alloc \xff\xfe 1 2\n"), "trace: bad utf8: offset 0: unrecognised format"},
		{"gzip binary", zbin.Bytes(), "trace: gzip binary: offset 0: valid gzip, but what it holds is not a PyTorch pickle, a vram JSON snapshot or a text trace (decompressed, it starts with 00 01 02 03)"},
		{"gzip empty", gz(nil), "trace: gzip empty: empty input inside the gzip stream"},
		{"gzip garbage", gz([]byte("\x7fELF\x02\x01\x01\x00")), "trace: gzip garbage: offset 0: valid gzip, but what it holds is not"},
		// A JSON array is a PyTorch list of segments.
		{"json array", []byte(" [1, 2]"), `trace: json array: a JSON array, read as the list of segments of torch.cuda.memory_snapshot(): not a PyTorch memory snapshot: segments[0]: is an int, want a dict`},
		{"gzip json array", gz([]byte(`[{"action": "alloc"}]`)), `trace: gzip json array: a JSON array, read as the list of segments of torch.cuda.memory_snapshot(): not a PyTorch memory snapshot: segments[0]: no "address" key`},
		{"bad gzip", []byte{0x1f, 0x8b, 1}, "trace: bad gzip: bad gzip header"},
		{"text", []byte("alloc 1 2 3\n\nfree 1 2 3\n"), `trace: text: line 3: unknown action "free"`},
		{"json", []byte(`{"format": "x"}`), `trace: json: offset 14: not a vram memory snapshot: format "x", want "vram-memory-snapshot"`},
		{"pickle", []byte{0x80, 4, 0xff}, "trace: pickle: offset 2: pickle: unknown opcode 0xff (not a pickle, or a corrupt one)"},
		{"pickle protocol 1", []byte("}q\x00."), "trace: pickle protocol 1: offset 0: a Python pickle of protocol 1 (pickle.dump with protocol=1); vram reads protocols 2 to 5"},
		{"pickle protocol 1 of a dict", []byte("}q\x00X\x08\x00\x00\x00segmentsq\x01]q\x02s."), "trace: pickle protocol 1 of a dict: offset 0: a Python pickle of protocol 1"},
		{"pickle protocol 1 of a list", []byte("]q\x00}q\x01X\x01\x00\x00\x00a"), "trace: pickle protocol 1 of a list: offset 0: a Python pickle of protocol 1"},
		{"pickle protocol 0 of a dict", []byte("(dp0\nVsegments\np1\n(lp2\nsS'x'\n."), "trace: pickle protocol 0 of a dict: offset 0: a Python pickle of protocol 0 (pickle.dump with protocol=0); vram reads protocols 2 to 5"},
		{"pickle protocol 0 of a list", []byte("(lp0\n(dp1\nVa\np2\n."), "trace: pickle protocol 0 of a list: offset 0: a Python pickle of protocol 0"},
		{"gzip pickle protocol 0", gz([]byte("(dp0\n.")), "trace: gzip pickle protocol 0: offset 0: a Python pickle of protocol 0"},
		// Short inputs whose every byte is invalid UTF-8 are not text.
		{"pickle protocol 6", []byte("\x80\x06}."), "trace: pickle protocol 6: offset 1: a Python pickle of protocol 6; vram reads protocols 2 to 5"},
		{"pickle protocol 1 header", []byte{0x80, 1, '}', '.'}, "trace: pickle protocol 1 header: offset 1: a Python pickle of protocol 1; vram reads protocols 2 to 5"},
		{"pickle protocol only", []byte{0x80}, "trace: pickle protocol only: offset 0: unrecognised format"},
		{"invalid bytes", []byte{0xff, 0xfe, 0xfd}, "trace: invalid bytes: offset 0: unrecognised format"},
		{"continuation bytes", []byte{0x80, 0x80, 0x80, 0x80}, "trace: continuation bytes: offset 0: unrecognised format"},
		{"text, then an invalid byte", []byte("alloc 1 2 3\n\xff"), "trace: text, then an invalid byte: offset 0: unrecognised format"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tc.in), tc.name)
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != tc.name {
				t.Fatalf("err = %v, want a *ParseError naming %q", err, tc.name)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

// gz returns b gzip-compressed.
func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func TestOpenErrors(t *testing.T) {
	_, err := Open("testdata/no-such-file")
	if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "trace: testdata/no-such-file: ") {
		t.Errorf("err = %v", err)
	}
	_, err = Open("testdata/corrupt.pickle")
	if want := "trace: testdata/corrupt.pickle: offset 11: pickle: unknown opcode 0xff"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %v, want %s...", err, want)
	}
	_, err = Open("testdata/truncated.pickle")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.File != "testdata/truncated.pickle" || pe.Kind != KindPickle {
		t.Errorf("err = %v", err)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindUnknown: "unknown", KindText: "text", KindJSON: "json", KindPickle: "pickle", KindPyTorchJSON: "pytorch-json", 99: "unknown"} {
		if k.String() != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, k.String(), want)
		}
	}
}

func TestConcurrentReads(t *testing.T) {
	files := []string{"resnet50_train.trace.gz", "snapshot_p4.pickle", "snapshot_expected_device0.json"}
	errs := make(chan error, 4*len(files))
	for range 4 {
		for _, name := range files {
			go func() {
				f, err := Open(filepath.Join("testdata", name))
				if err == nil && len(f.Snapshots) > 0 {
					_, err = StateAt(f.Snapshots[0], 0)
				}
				errs <- err
			}()
		}
	}
	for range 4 * len(files) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
