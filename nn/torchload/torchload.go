package torchload

import (
	"archive/zip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/safetensors"
	"github.com/vramgo/vram/internal/tensorfile"
	"github.com/vramgo/vram/nn"
)

// Options select the state dict inside a checkpoint and bound what is
// read. The zero value suits a state dict saved with torch.save, alone or
// in a dict such as {"model": ..., "optimizer": ..., "epoch": 3}, and any
// file of a trusted source's size.
type Options struct {
	// Key is the path of the state dict inside a nested checkpoint: dict
	// keys joined by dots ("model", "state_dict", "model.ema", where a key
	// holding the dots itself matches first); a part that is an integer
	// also matches an int key, or indexes a list or tuple. Empty: the whole file
	// when it is a dict of tensors, else the first of the keys of
	// [DefaultKeys] whose value is one.
	Key string
	// StripPrefix is removed from the start of every key that has it, as
	// torch.nn.modules.utils.consume_prefix_in_state_dict_if_present does.
	// Empty: "module." when every key starts with it (a model saved
	// inside DistributedDataParallel or DataParallel) and "_orig_mod."
	// when every key starts with it (a model compiled with
	// torch.compile), both if need be, else nothing.
	StripPrefix string
	// MaxBytes bounds the bytes of storage read and of tensors built, in
	// total. Zero: four times the file's size plus 64 MiB, which any file
	// torch.save wrote stays below (views of a storage take no more than
	// it, but for tensors saved more than once under several keys).
	MaxBytes int64
	// MaxPickleBytes bounds the size of the archive's data.pkl, which is
	// decoded in memory. Zero: [DefaultMaxPickleBytes].
	MaxPickleBytes int64
}

// DefaultMaxPickleBytes is the default bound on the size of data.pkl:
// 256 MiB. The pickle of a state dict holds names and shapes, not the
// tensors' values: a model of a thousand tensors has one of a few hundred
// KiB.
const DefaultMaxPickleBytes = 256 << 20

// DefaultKeys returns the keys under which common training scripts keep
// the state dict in a checkpoint, tried in this order when [Options.Key]
// is empty and the file is not a state dict itself: "state_dict",
// "model_state_dict", "model", "module", "net", "network".
func DefaultKeys() []string { return slices.Clone(defaultKeys) }

var defaultKeys = []string{"state_dict", "model_state_dict", "model", "module", "net", "network"}

// maxRatio is the largest ratio of the uncompressed to the compressed size
// of a deflated entry: deflate cannot compress further than about 1032 to
// one, so a larger claim is a lie.
const maxRatio = 1032

// defaultSlackBytes is the part of the default MaxBytes that does not
// scale with the file: 64 MiB.
const defaultSlackBytes = 64 << 20

// Entry is one tensor of a state dict.
type Entry struct {
	Key string // the state-dict key, after [Options.StripPrefix]
	// Tensor is a new contiguous CPU tensor with the saved values; it
	// belongs to the caller, who releases it. Tensors of int16, uint8
	// and uint16, which vram has not, are widened to int32, and those of
	// uint32 and uint64 to int64. Nil when Err is set.
	Tensor *vram.Tensor
	DType  string // the dtype in the file, as torch names it ("float32", "uint8")
	// Err says why the tensor was not read: a dtype vram has not
	// (float8_e4m3fn, complex64, qint8, ...; it matches vram.ErrDType) or
	// a uint64 value beyond int64. The other tensors of the file are read
	// all the same, as PyTorch would load them beside it.
	Err error
}

// StateDict is a state dict read from a file, in the file's order.
type StateDict []Entry

// Map returns the tensors of s by their keys, as [nn.LoadStateDict]
// takes them, leaving out the entries that were not read ([Entry.Err]).
// The tensors are s's own.
func (s StateDict) Map() map[string]*vram.Tensor {
	m := make(map[string]*vram.Tensor, len(s))
	for _, e := range s {
		if e.Tensor != nil {
			m[e.Key] = e.Tensor
		}
	}
	return m
}

// Keys returns the keys of s in the file's order, those of the entries
// that were not read included.
func (s StateDict) Keys() []string {
	keys := make([]string, len(s))
	for i, e := range s {
		keys[i] = e.Key
	}
	return keys
}

// Unread returns the entries of s that were not read, with their
// [Entry.Err], in the file's order.
func (s StateDict) Unread() StateDict {
	var out StateDict
	for _, e := range s {
		if e.Err != nil {
			out = append(out, e)
		}
	}
	return out
}

// Release releases every tensor of s.
func (s StateDict) Release() {
	for _, e := range s {
		if e.Tensor != nil {
			e.Tensor.Release()
		}
	}
}

// ReadStateDictFile is [ReadStateDict] of the file path. An error opening
// the file is the *fs.PathError.
func ReadStateDictFile(path string, opts Options) (StateDict, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	sd, err := ReadStateDict(f, fi.Size(), opts)
	if err != nil {
		return nil, prefixed(err, path)
	}
	return sd, nil
}

// ReadStateDict reads the state dict of the torch.save archive r of size
// bytes: the tensors of the dict that opts selects, as new CPU tensors in
// the file's order, each with the values of its view of a storage (offset
// and strides honoured, so a transposed weight saved as it is reads as
// its transpose). Dtypes float32, float64, float16, bfloat16, int64,
// int32, int16, int8, uint8, uint16, uint32, uint64 and bool are read. A
// tensor of another dtype that PyTorch writes (the 8-bit floats of
// torch.float8_e4m3fn and the like, complex, quantized) is an entry
// without a tensor whose [Entry.Err] says so; the others are read.
//
// Files of the legacy format (PyTorch before 1.6) are read too.
//
// The file is untrusted input: its pickle is decoded without running
// anything, and a Python global outside torchload's allowlist is a
// *[GlobalError]. Every other problem (not a torch.save file, the tar
// format of PyTorch before 0.4, a TorchScript archive, a truncated or
// corrupt file, a view beyond its storage, a size above the bounds of
// opts) is an error matching vram.ErrArgument. On error no tensor is left
// allocated.
func ReadStateDict(r io.ReaderAt, size int64, opts Options) (sd StateDict, err error) {
	f, err := openStateDict(r, size, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			sd.Release()
			sd = nil
		}
	}()
	for i, t := range f.refs {
		e := Entry{Key: f.keys[i], DType: t.dtype.name}
		dt, ok := vramDType(t.dtype)
		if !ok {
			f.skip(i)
			e.Err = &formatError{msg: "dtype " + t.dtype.name + " is not read: vram has no such dtype", kind: vram.ErrDType}
			sd = append(sd, e)
			continue
		}
		raw, err := f.raw(i)
		if err != nil {
			return sd, prefixed(err, strconv.Quote(printable(f.keys[i])))
		}
		if err := vram.Catch(func() { e.Tensor, e.Err = newTensor(raw, t.shape(), t.dtype, dt) }); err != nil {
			return sd, prefixed(&formatError{msg: "a tensor of size " + fmt.Sprint(t.size), kind: vram.ErrArgument, err: err},
				strconv.Quote(printable(f.keys[i])))
		}
		sd = append(sd, e)
	}
	return sd, nil
}

// LoadPyTorch loads the state dict of the torch.save file path (a .pt,
// .pth or pytorch_model.bin file, found in it as [Options]' zero value
// finds it) into m, as [nn.LoadStateDict] does: strictly (every key of m
// and no other) or not, converting dtypes, with PyTorch's missing and
// unexpected keys in the result. A tensor of a dtype vram has not (see
// [ReadStateDict]) is an error matching vram.ErrDType when m has its key,
// and unexpected, as other keys m lacks, when not; strict loading then
// names its dtype. Errors are those of [ReadStateDict] and
// [nn.LoadStateDict].
//
// Each tensor is read from the file when it is loaded, converted and
// copied into m in turn, and those m lacks are not read: loading takes
// host memory for about its largest tensor (and for a storage that
// several tensors view, until the last of them is loaded).
func LoadPyTorch(m nn.Module, path string, strict bool) (nn.LoadResult, error) {
	return LoadPyTorchOptions(m, path, strict, Options{})
}

// LoadPyTorchOptions is [LoadPyTorch] with options that select the state
// dict and bound the reading.
func LoadPyTorchOptions(m nn.Module, path string, strict bool, opts Options) (nn.LoadResult, error) {
	file, err := os.Open(path)
	if err != nil {
		return nn.LoadResult{}, err
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nn.LoadResult{}, err
	}
	f, err := openStateDict(file, fi.Size(), opts)
	if err != nil {
		return nn.LoadResult{}, prefixed(err, path)
	}
	// The tensors' bytes are read as they are loaded, one at a time:
	// those the model lacks are never read.
	tensors := make(map[string]safetensors.Tensor, len(f.refs))
	index := make(map[string]int, len(f.refs))
	unread := map[string]string{} // the keys of dtypes vram has not, and their dtypes
	for i, t := range f.refs {
		st := safetensors.Tensor{DType: t.dtype.st, Shape: make([]int, len(t.size))}
		for j, n := range t.size {
			st.Shape[j] = int(n)
		}
		if st.DType == "" {
			// Named as torch names it, which package nn refuses with
			// vram.ErrDType when m has the key.
			st.DType = t.dtype.name
			unread[f.keys[i]] = t.dtype.name
			f.skip(i)
		}
		tensors[f.keys[i]] = st
		index[f.keys[i]] = i
	}
	fetch := func(key string) ([]byte, error) {
		i, ok := index[key]
		if !ok || f.refs[i].dtype.st == "" {
			return nil, formatErr("%q is not a tensor that can be read", printable(key))
		}
		b, err := f.raw(i)
		if err != nil {
			return nil, prefixed(err, strconv.Quote(printable(key)))
		}
		return b, nil
	}
	verify := func(keys []string) error {
		idx := make([]int, 0, len(keys))
		for _, k := range keys {
			if i, ok := index[k]; ok {
				idx = append(idx, i)
			}
		}
		return f.verify(idx)
	}
	missing, unexpected, err := tensorfile.LoadInto(m, "state dict", tensors, strict, fetch, verify)
	res := nn.LoadResult{Missing: missing, Unexpected: unexpected}
	if err != nil {
		if strict {
			var notes []string
			if p := extraPrefix(unexpected, missing); p != "" {
				notes = append(notes, fmt.Sprintf("every key of the file starts with %q, which the model's keys lack: Options.StripPrefix %q removes it",
					printable(p), printable(p)))
			}
			for _, k := range unexpected {
				if dt, ok := unread[k]; ok {
					notes = append(notes, fmt.Sprintf("%q is of dtype %s, which vram does not read", printable(k), dt))
					if len(notes) == 3 {
						break
					}
				}
			}
			if len(notes) > 0 {
				return res, fmt.Errorf("torchload: %s: %w (%s)", path, err, strings.Join(notes, "; "))
			}
		}
		return res, fmt.Errorf("torchload: %s: %w", path, err)
	}
	return res, nil
}

// extraPrefix returns the first part, up to its dot, that every key of
// unexpected starts with, when the keys without it include one of
// missing (the file of a model kept inside another, such as the "model."
// of a PyTorch Lightning module); "" otherwise.
func extraPrefix(unexpected, missing []string) string {
	if len(unexpected) == 0 || len(missing) == 0 {
		return ""
	}
	first, _, ok := strings.Cut(unexpected[0], ".")
	if !ok {
		return ""
	}
	p := first + "."
	rest := make(map[string]bool, len(unexpected))
	for _, k := range unexpected {
		r, ok := strings.CutPrefix(k, p)
		if !ok {
			return ""
		}
		rest[r] = true
	}
	for _, k := range missing {
		if rest[k] {
			return p
		}
	}
	return ""
}

// fileDict is the state dict of a file, decoded, its tensors not yet read.
type fileDict struct {
	a    *archive
	keys []string     // the keys, prefixes stripped
	refs []*tensorRef // the tensors of keys
	done []bool       // whether each tensor was read or skipped
}

// raw returns the elements of tensor i as [archive.raw] does.
func (f *fileDict) raw(i int) ([]byte, error) {
	first := !f.done[i]
	f.done[i] = true
	return f.a.raw(f.refs[i], first)
}

// verify checks that the tensors idx can be read, without keeping any:
// the records of their storages are whole, with the sizes the pickle
// declares and the right checksums, and reading them stays within
// Options.MaxBytes. Reading them after it fails only on an error of the
// machine (of the disk, of memory).
func (f *fileDict) verify(idx []int) error {
	a := f.a
	budget := a.budget
	take := func(n int64, what string) error {
		if n > budget {
			return formatErr("%s needs %d bytes, beyond what the file's size allows (Options.MaxBytes; %d left)", what, n, budget)
		}
		budget -= n
		return nil
	}
	seen := map[*storage]bool{}
	for _, i := range idx {
		if f.done[i] {
			continue
		}
		t := f.refs[i]
		numel := int64(1)
		for _, s := range t.size {
			numel *= s
		}
		if err := take(numel*t.dtype.size, "a tensor of size "+fmt.Sprint(t.size)); err != nil {
			return prefixed(err, strconv.Quote(printable(f.keys[i])))
		}
		st := t.st
		if numel == 0 || seen[st] || a.spent[st] {
			continue
		}
		seen[st] = true
		err := f.verifyStorage(st, take)
		if err != nil {
			return prefixed(err, strconv.Quote(printable(f.keys[i])))
		}
	}
	return nil
}

// verifyStorage checks the record of st as storageBytes would read it,
// taking its size from the budget with take.
func (f *fileDict) verifyStorage(st *storage, take func(int64, string) error) error {
	a := f.a
	if a.spans != nil {
		sp, ok := a.spans[st.key]
		if !ok {
			return formatErr("legacy storage %q is not in the file's list of storages", printable(st.key))
		}
		return take(sp.n, "storage "+strconv.Quote(st.key))
	}
	rec, ok := a.storages[st.key]
	if !ok {
		return formatErr("storage %q has no data/%s record (truncated file?)", printable(st.key), printable(st.key))
	}
	want := st.numel * st.dtype.size
	if rec.UncompressedSize64 != uint64(want) {
		return formatErr("storage %q declares %d %s elements (%d bytes) and its record has %d bytes",
			printable(st.key), st.numel, st.dtype.name, want, rec.UncompressedSize64)
	}
	if err := take(want, "storage "+strconv.Quote(st.key)); err != nil {
		return err
	}
	_, err := a.scanEntry(rec, want, "data/"+printable(st.key), false)
	return err
}

// skip counts tensor i as read without reading it.
func (f *fileDict) skip(i int) {
	if !f.done[i] {
		f.done[i] = true
		f.a.skip(f.refs[i])
	}
}

// openStateDict decodes the pickle of the torch.save file r of size bytes
// and selects the state dict in it as opts says.
func openStateDict(r io.ReaderAt, size int64, opts Options) (*fileDict, error) {
	if size < 0 {
		return nil, formatErr("negative file size %d", size)
	}
	legacy, err := sniff(r, size)
	if err != nil {
		return nil, err
	}
	var a *archive
	var root any
	if legacy {
		if a, root, err = readLegacy(r, size, opts); err != nil {
			return nil, err
		}
	} else {
		zr, err := zip.NewReader(r, size)
		if err != nil {
			return nil, &formatError{msg: "not a torch.save zip archive", kind: vram.ErrArgument, err: err}
		}
		if a, err = openArchive(zr, size, opts); err != nil {
			return nil, err
		}
		pkl, err := a.readEntry(a.pkl, a.maxPickle, "data.pkl")
		if err != nil {
			return nil, err
		}
		if root, err = unpickle(pkl); err != nil {
			return nil, err
		}
	}
	d, err := selectDict(root, opts.Key)
	if err != nil {
		return nil, err
	}
	f := &fileDict{a: a, keys: make([]string, len(d.keys)), refs: make([]*tensorRef, len(d.vals)), done: make([]bool, len(d.vals))}
	for i, k := range d.keys {
		s, ok := k.(string)
		if !ok {
			return nil, formatErr("the state dict has a key of type %s, not str", typeName(k))
		}
		f.keys[i] = s
	}
	if f.keys, err = stripPrefix(f.keys, opts.StripPrefix); err != nil {
		return nil, err
	}
	// A storage is dropped once the last tensor that views it is built,
	// so that memory holds the tensors and at most a few storages, not
	// every storage beside every tensor.
	for i, v := range d.vals {
		t, ok := v.(*tensorRef)
		if !ok {
			return nil, formatErr("%q is a %s, not a tensor", printable(f.keys[i]), typeName(v))
		}
		f.refs[i] = t
		a.users[t.st]++
	}
	return f, nil
}

// sniff tells a zip archive (false) from a file of the legacy format
// (true), and recognises other files for a clear error.
func sniff(r io.ReaderAt, size int64) (bool, error) {
	head := make([]byte, min(size, 512))
	if _, err := r.ReadAt(head, 0); err != nil && err != io.EOF {
		return false, &formatError{msg: "reading the file", kind: vram.ErrArgument, err: err}
	}
	switch {
	case len(head) >= 4 && string(head[:4]) == "PK\x03\x04":
		return false, nil
	case len(head) >= 2 && head[0] == opProto:
		return true, nil
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return false, formatErr("the tar format of torch.save (PyTorch before 0.4) is not read: load it with torch.load and save it again with a current PyTorch")
	case len(head) >= 9 && head[8] == '{':
		return false, formatErr("not a torch.save archive (a safetensors file? read it with nn.Load)")
	}
	return false, formatErr("not a torch.save archive (no zip header)")
}

// archive is an opened torch.save archive.
type archive struct {
	pkl       *zip.File
	storages  map[string]*zip.File // data/<key> by key
	size      int64                // the file's size
	bigEndian bool
	maxPickle int64
	budget    int64               // bytes still allowed by MaxBytes
	cache     map[*storage][]byte // storages read and still needed
	users     map[*storage]int    // tensors still to build from each storage
	spent     map[*storage]bool   // storages counted in the budget, read once or more
	// The storages of a legacy file: where they lie in r.
	r     io.ReaderAt
	spans map[string]span
}

// newArchive returns an archive of a file of size bytes with the bounds
// of opts.
func newArchive(size int64, opts Options) *archive {
	a := &archive{size: size, cache: map[*storage][]byte{}, users: map[*storage]int{}, spent: map[*storage]bool{}}
	a.maxPickle = opts.MaxPickleBytes
	if a.maxPickle <= 0 {
		a.maxPickle = DefaultMaxPickleBytes
	}
	a.budget = opts.MaxBytes
	if a.budget <= 0 {
		a.budget = defaultSlackBytes
		if size < (math.MaxInt64-defaultSlackBytes)/4 {
			a.budget += 4 * size
		}
	}
	return a
}

// openArchive finds data.pkl, the storages and the byte order in zr.
func openArchive(zr *zip.Reader, size int64, opts Options) (*archive, error) {
	a := newArchive(size, opts)
	a.storages = map[string]*zip.File{}
	// The archive's records sit in one top-level folder, whose name
	// torch.save chose ("archive", or the file's stem in older versions).
	var prefix string
	for _, f := range zr.File {
		if dir, ok := strings.CutSuffix(f.Name, "/data.pkl"); ok && dir != "" && !strings.Contains(dir, "/") {
			if prefix != "" {
				return nil, formatErr("two data.pkl records (%s/ and %s/)", printable(prefix), printable(dir))
			}
			prefix = dir
			a.pkl = f
		}
	}
	if a.pkl == nil {
		return nil, formatErr("a zip archive without a data.pkl record: not written by torch.save")
	}
	var byteorder *zip.File
	for _, f := range zr.File {
		rest, ok := strings.CutPrefix(f.Name, prefix+"/")
		if !ok {
			continue
		}
		switch {
		case rest == "constants.pkl" || strings.HasPrefix(rest, "code/"):
			return nil, formatErr("a TorchScript archive (torch.jit.save) is not read: " +
				"load it with torch.jit.load and save its state_dict() with torch.save")
		case rest == "byteorder":
			byteorder = f
		case strings.HasPrefix(rest, "data/"):
			key := rest[len("data/"):]
			if _, dup := a.storages[key]; dup {
				return nil, formatErr("two records of storage %q", printable(key))
			}
			a.storages[key] = f
		}
	}
	if byteorder != nil {
		b, err := a.readEntry(byteorder, 16, "byteorder")
		if err != nil {
			return nil, err
		}
		switch string(b) {
		case "little":
		case "big":
			a.bigEndian = true
		default:
			return nil, formatErr("byteorder %q", printable(string(b)))
		}
	}
	return a, nil
}

// readEntry reads the whole of f, of at most max bytes, checking its
// declared sizes against the file before allocating.
func (a *archive) readEntry(f *zip.File, max int64, what string) ([]byte, error) {
	return a.scanEntry(f, max, what, true)
}

// scanEntry reads the whole of f, of at most max bytes, as readEntry
// does, returning its bytes when keep is set and else only checking
// them (size and CRC) through a small buffer.
func (a *archive) scanEntry(f *zip.File, max int64, what string, keep bool) ([]byte, error) {
	n := f.UncompressedSize64
	switch {
	case n > uint64(max):
		return nil, formatErr("%s has %d bytes, above the limit of %d", what, n, max)
	case f.Method == zip.Store && n > uint64(a.size):
		return nil, formatErr("%s claims %d bytes in a file of %d (truncated file?)", what, n, a.size)
	case f.Method != zip.Store && (f.CompressedSize64 > uint64(a.size) || n/maxRatio > f.CompressedSize64):
		return nil, formatErr("%s claims %d bytes from %d compressed ones (a zip bomb?)", what, n, f.CompressedSize64)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, &formatError{msg: "reading " + what, kind: vram.ErrArgument, err: err}
	}
	defer rc.Close()
	var buf []byte
	if keep {
		buf = make([]byte, n)
		_, err = io.ReadFull(rc, buf)
	} else {
		_, err = io.CopyN(io.Discard, rc, int64(n))
	}
	if err != nil {
		return nil, &formatError{msg: "reading " + what + " (truncated file?)", kind: vram.ErrArgument, err: err}
	}
	// Reading on to the end checks the entry's CRC and that it has no
	// more bytes than it claims.
	if m, err := rc.Read(make([]byte, 1)); m != 0 || (err != nil && err != io.EOF) {
		if err == nil {
			err = errors.New("more data than its header says")
		}
		return nil, &formatError{msg: "reading " + what, kind: vram.ErrArgument, err: err}
	}
	return buf, nil
}

// spendStorage takes the n bytes of st from the budget of MaxBytes the
// first time st is read.
func (a *archive) spendStorage(st *storage, n int64) error {
	if a.spent[st] {
		return nil
	}
	if err := a.spend(n, "storage "+strconv.Quote(st.key)); err != nil {
		return err
	}
	a.spent[st] = true
	return nil
}

// spend takes n bytes from the budget of MaxBytes.
func (a *archive) spend(n int64, what string) error {
	if n > a.budget {
		return formatErr("%s needs %d bytes, beyond what the file's size allows (Options.MaxBytes; %d left)", what, n, a.budget)
	}
	a.budget -= n
	return nil
}

// storageBytes returns the bytes of st, read once, in the file's byte
// order.
func (a *archive) storageBytes(st *storage) ([]byte, error) {
	if b, ok := a.cache[st]; ok {
		return b, nil
	}
	if a.spans != nil {
		return a.legacyBytes(st)
	}
	f, ok := a.storages[st.key]
	if !ok {
		return nil, formatErr("storage %q has no data/%s record (truncated file?)", printable(st.key), printable(st.key))
	}
	want := st.numel * st.dtype.size
	if f.UncompressedSize64 != uint64(want) {
		return nil, formatErr("storage %q declares %d %s elements (%d bytes) and its record has %d bytes",
			printable(st.key), st.numel, st.dtype.name, want, f.UncompressedSize64)
	}
	if err := a.spendStorage(st, want); err != nil {
		return nil, err
	}
	b, err := a.readEntry(f, want, "data/"+printable(st.key))
	if err != nil {
		return nil, err
	}
	a.cache[st] = b
	return b, nil
}

// swapBytes reverses the bytes of each element of size bytes in b.
func swapBytes(b []byte, size int) {
	for i := 0; i+size <= len(b); i += size {
		slices.Reverse(b[i : i+size])
	}
}

// raw returns the elements of t, little-endian in row-major order, in a
// slice of their own: the storage's bytes themselves when t views the
// whole of a storage no other tensor still needs, else a copy. Once the
// last tensor of a storage is read, the storage is dropped.
//
// A tensor read again (first false) counts neither in the budget nor as
// a user of its storage a second time; its storage, read again if it was
// dropped, is dropped again.
func (a *archive) raw(t *tensorRef, first bool) ([]byte, error) {
	numel := int64(1)
	for _, s := range t.size {
		numel *= s // checkView bounded the product
	}
	if first {
		defer a.skip(t)
		if err := a.spend(numel*t.dtype.size, "a tensor of size "+fmt.Sprint(t.size)); err != nil {
			return nil, err
		}
	} else {
		defer func() {
			if a.users[t.st] <= 0 {
				delete(a.cache, t.st)
			}
		}()
	}
	if numel == 0 {
		return []byte{}, nil
	}
	src, err := a.storageBytes(t.st)
	if err != nil {
		return nil, err
	}
	var raw []byte
	// No other tensor still needs the storage: t's read counts its last
	// use, or t is read again after it.
	last := first && a.users[t.st] == 1 || !first && a.users[t.st] <= 0
	if last && t.offset == 0 && numel*t.dtype.size == int64(len(src)) && isContiguous(t) {
		raw = src // its last user: no copy
	} else {
		raw = gather(src, t, numel)
	}
	if a.bigEndian && t.dtype.size > 1 {
		// Per element of the tensor's dtype: an untyped storage
		// (_rebuild_tensor_v3) has no element size of its own.
		swapBytes(raw, int(t.dtype.size))
	}
	return raw, nil
}

// skip counts t as read, dropping its storage when no other tensor still
// needs it.
func (a *archive) skip(t *tensorRef) {
	if a.users[t.st]--; a.users[t.st] <= 0 {
		delete(a.cache, t.st)
		delete(a.users, t.st)
	}
}

// isContiguous reports whether the elements of t follow each other in
// its storage in row-major order.
func isContiguous(t *tensorRef) bool {
	run := int64(1)
	for i := len(t.size) - 1; i >= 0; i-- {
		if t.size[i] != 1 && t.stride[i] != run {
			return false
		}
		run *= t.size[i]
	}
	return true
}

// shape returns t's size as a vram shape.
func (t *tensorRef) shape() vram.Shape {
	shape := make(vram.Shape, len(t.size))
	for i, s := range t.size {
		shape[i] = int(s)
	}
	return shape
}

// gather copies the elements of the view t of src, row-major, into a new
// slice. checkView made sure every element lies in src.
func gather(src []byte, t *tensorRef, numel int64) []byte {
	es := t.dtype.size
	out := make([]byte, 0, numel*es)
	nd := len(t.size)
	// The innermost dimensions that are contiguous are copied at once.
	inner, run := nd, int64(1)
	for inner > 0 && (t.size[inner-1] == 1 || t.stride[inner-1] == run) {
		run *= t.size[inner-1]
		inner--
	}
	idx := make([]int64, inner)
	for {
		off := t.offset
		for i := range inner {
			off += idx[i] * t.stride[i]
		}
		out = append(out, src[off*es:(off+run)*es]...)
		i := inner - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < t.size[i] {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return out
		}
	}
}

// vramDType returns the vram dtype that holds values of et.
func vramDType(et elemType) (vram.DType, bool) {
	switch et {
	case tFloat32:
		return vram.Float32, true
	case tFloat64:
		return vram.Float64, true
	case tFloat16:
		return vram.Float16, true
	case tBFloat16:
		return vram.BFloat16, true
	case tInt64, tUint32, tUint64:
		return vram.Int64, true
	case tInt32, tInt16, tUint8, tUint16:
		return vram.Int32, true
	case tInt8:
		return vram.Int8, true
	case tBool:
		return vram.Bool, true
	}
	return 0, false
}

// newTensor makes a CPU tensor of dtype dt from raw little-endian
// elements of et. A uint64 value beyond int64 is an error.
func newTensor(raw []byte, shape vram.Shape, et elemType, dt vram.DType) (*vram.Tensor, error) {
	switch et {
	case tInt16, tUint8, tUint16:
		vals := make([]int32, len(raw)/int(et.size))
		for i := range vals {
			switch et {
			case tInt16:
				vals[i] = int32(int16(binary.LittleEndian.Uint16(raw[2*i:])))
			case tUint16:
				vals[i] = int32(binary.LittleEndian.Uint16(raw[2*i:]))
			default:
				vals[i] = int32(raw[i])
			}
		}
		return vram.FromSlice(vals, shape, vram.CPU, dt), nil
	case tUint32, tUint64:
		vals := make([]int64, len(raw)/int(et.size))
		for i := range vals {
			if et == tUint32 {
				vals[i] = int64(binary.LittleEndian.Uint32(raw[4*i:]))
				continue
			}
			v := binary.LittleEndian.Uint64(raw[8*i:])
			if v > math.MaxInt64 {
				return nil, &formatError{msg: fmt.Sprintf("uint64 value %d of element %d does not fit in int64", v, i), kind: vram.ErrArgument}
			}
			vals[i] = int64(v)
		}
		return vram.FromSlice(vals, shape, vram.CPU, dt), nil
	case tBool:
		for i, b := range raw {
			raw[i] = min(b, 1)
		}
	}
	t := vram.Empty(shape, vram.CPU, dt)
	if len(raw) > 0 {
		t.SetRawBytes(raw)
	}
	return t, nil
}

// selectDict finds the state dict in root, the decoded pickle.
func selectDict(root any, key string) (*dict, error) {
	if key != "" {
		v := root
		for rest := key; rest != ""; {
			if l, ok := v.(*list); ok {
				v = tuple(l.items)
			}
			if t, ok := v.(tuple); ok {
				// A list or tuple of checkpoints: an index.
				part, after, _ := strings.Cut(rest, ".")
				i, err := strconv.Atoi(part)
				if err != nil || i < 0 || i >= len(t) {
					return nil, formatErr("Options.Key %q: %q is not an index of a sequence of %d values", key, part, len(t))
				}
				v, rest = t[i], after
				continue
			}
			d, ok := v.(*dict)
			if !ok {
				return nil, formatErr("Options.Key %q: %q is looked up in a %s, not a dict", key, rest, typeName(v))
			}
			// A key that holds dots itself ("model.ema") matches first.
			next, ok := d.get(rest)
			part := rest
			rest = ""
			if !ok {
				part, rest, _ = strings.Cut(part, ".")
				next, ok = d.get(part)
			}
			if !ok {
				if n, err := strconv.ParseInt(part, 10, 64); err == nil {
					next, ok = d.get(n)
				}
			}
			if !ok {
				return nil, formatErr("Options.Key %q: no key %q among %s", key, part, keyList(d))
			}
			v = next
		}
		d, ok := v.(*dict)
		if !ok {
			return nil, formatErr("Options.Key %q selects a %s, not a dict", key, typeName(v))
		}
		return d, nil
	}
	d, ok := root.(*dict)
	if !ok {
		return nil, formatErr("the file holds a %s, not a dict of tensors", typeName(root))
	}
	if isStateDict(d) {
		return d, nil
	}
	for _, k := range defaultKeys {
		if v, ok := d.get(k); ok {
			if sd, ok := v.(*dict); ok && isStateDict(sd) {
				return sd, nil
			}
		}
	}
	return nil, formatErr("the file holds a dict with keys %s and no state dict under the usual keys %v: choose one with Options.Key", keyList(d), defaultKeys)
}

// isStateDict reports whether every value of d is a tensor (true for an
// empty dict, the state dict of a module without parameters).
func isStateDict(d *dict) bool {
	for _, v := range d.vals {
		if _, ok := v.(*tensorRef); !ok {
			return false
		}
	}
	return true
}

// keyList formats the first keys of d for a message.
func keyList(d *dict) string {
	parts := make([]string, 0, 11)
	for i, k := range d.keys {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("and %d more", len(d.keys)-10))
			break
		}
		parts = append(parts, repr(k))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// autoPrefixes are the prefixes removed when [Options.StripPrefix] is
// empty and every key has one: "module." of DistributedDataParallel and
// DataParallel, and "_orig_mod." of a model compiled with torch.compile.
var autoPrefixes = []string{"module.", "_orig_mod."}

// stripPrefix removes prefix from the keys that have it or, when prefix is
// empty, each of autoPrefixes that every key has, as often as every key
// has one ("module._orig_mod."). Two keys that become one are an error.
func stripPrefix(keys []string, prefix string) ([]string, error) {
	if prefix != "" {
		out := make([]string, len(keys))
		for i, k := range keys {
			out[i] = strings.TrimPrefix(k, prefix)
		}
		return out, checkUnique(out, prefix)
	}
	if len(keys) == 0 {
		return keys, nil
	}
	out := slices.Clone(keys)
	for {
		found := ""
		for _, p := range autoPrefixes {
			all := true
			for _, k := range out {
				if !strings.HasPrefix(k, p) {
					all = false
					break
				}
			}
			if all {
				found = p
				break
			}
		}
		if found == "" {
			return out, nil
		}
		for i := range out {
			out[i] = out[i][len(found):]
		}
	}
}

// checkUnique returns an error if two of keys are equal once prefix is
// removed.
func checkUnique(keys []string, prefix string) error {
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			return formatErr("two keys become %q once %q is removed", k, prefix)
		}
		seen[k] = true
	}
	return nil
}
