package torchload

import (
	"encoding/binary"
	"io"

	"github.com/vramgo/vram"
)

// The legacy format, written by torch.save before PyTorch 1.6 and by
// torch.save(..., _use_new_zipfile_serialization=False) since, is a row of
// pickles in one stream: torch's magic number, the format version (1001),
// a dict describing the writer's machine, the saved object (persistent
// ids with a sixth element, view metadata), the sorted list of storage
// keys; then, for each key in that order, the storage's number of
// elements as a little-endian int64 and its raw bytes.

// legacyMagic is the protocol 2 pickle of the magic number
// 0x1950a86a20f9469cfc6c that opens a legacy file.
const legacyMagic = "\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."

// legacyVersion is the only version of the legacy format written since
// PyTorch 0.4.
const legacyVersion = 1001

// span is where a storage's bytes lie in a legacy file.
type span struct{ off, n int64 }

// readLegacy reads the pickles of the legacy file r of size bytes and
// locates its storages. It returns the archive and the saved object.
func readLegacy(r io.ReaderAt, size int64, opts Options) (*archive, any, error) {
	a := newArchive(size, opts)
	a.r = r
	a.spans = map[string]span{}
	buf := make([]byte, min(size, a.maxPickle))
	if _, err := r.ReadAt(buf, 0); err != nil && err != io.EOF {
		return nil, nil, &formatError{msg: "reading the file", kind: vram.ErrArgument, err: err}
	}
	if len(buf) < len(legacyMagic) || string(buf[:len(legacyMagic)]) != legacyMagic {
		return nil, nil, formatErr("not a torch.save file: a pickle without torch's magic number " +
			"(the legacy format is read when written with pickle protocol 2, torch.save's default)")
	}
	storages := map[string]*storage{}
	pos := len(legacyMagic)
	next := func(legacy bool) (any, error) {
		v, p, err := unpickleAt(buf, pos, storages, legacy)
		pos = p
		return v, err
	}
	version, err := next(false)
	if err != nil {
		return nil, nil, err
	}
	if version != int64(legacyVersion) {
		return nil, nil, formatErr("legacy format version %s (want %d)", repr(version), legacyVersion)
	}
	info, err := next(false)
	if err != nil {
		return nil, nil, err
	}
	if d, ok := info.(*dict); ok {
		if le, ok := d.get("little_endian"); ok && le == false {
			a.bigEndian = true
		}
	}
	root, err := next(true)
	if err != nil {
		return nil, nil, err
	}
	keysV, err := next(false)
	if err != nil {
		return nil, nil, err
	}
	keys, ok := keysV.(*list)
	if !ok {
		return nil, nil, formatErr("legacy storage keys: a %s, not a list", typeName(keysV))
	}
	off := int64(pos)
	for _, kv := range keys.items {
		key, ok := kv.(string)
		if !ok {
			return nil, nil, formatErr("legacy storage key of type %s", typeName(kv))
		}
		st, ok := storages[key]
		if !ok {
			return nil, nil, formatErr("legacy storage %q is not used by the pickle", printable(key))
		}
		if _, dup := a.spans[key]; dup {
			return nil, nil, formatErr("legacy storage %q listed twice", printable(key))
		}
		var nb [8]byte
		if off > size-8 {
			return nil, nil, formatErr("legacy storage %q: the file ends early (truncated file?)", printable(key))
		}
		if _, err := r.ReadAt(nb[:], off); err != nil {
			return nil, nil, &formatError{msg: "reading legacy storage " + printable(key), kind: vram.ErrArgument, err: err}
		}
		n := int64(binary.LittleEndian.Uint64(nb[:]))
		if a.bigEndian {
			n = int64(binary.BigEndian.Uint64(nb[:]))
		}
		if n != st.numel {
			return nil, nil, formatErr("legacy storage %q holds %d elements, the pickle says %d", printable(key), n, st.numel)
		}
		bytes := st.numel * st.dtype.size
		if off+8 > size-bytes {
			return nil, nil, formatErr("legacy storage %q: %d bytes beyond the end of the file (truncated file?)", printable(key), bytes)
		}
		a.spans[key] = span{off + 8, bytes}
		off += 8 + bytes
	}
	return a, root, nil
}

// legacyBytes returns the bytes of st in a legacy file.
func (a *archive) legacyBytes(st *storage) ([]byte, error) {
	sp, ok := a.spans[st.key]
	if !ok {
		return nil, formatErr("legacy storage %q is not in the file's list of storages", printable(st.key))
	}
	if err := a.spendStorage(st, sp.n); err != nil {
		return nil, err
	}
	b := make([]byte, sp.n)
	if _, err := a.r.ReadAt(b, sp.off); err != nil {
		return nil, &formatError{msg: "reading legacy storage " + printable(st.key) + " (truncated file?)", kind: vram.ErrArgument, err: err}
	}
	a.cache[st] = b
	return b, nil
}
