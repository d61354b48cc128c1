package trace

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Meta keys set by ReadPickle; see the package documentation, "# Meta keys".
const (
	// MetaSource names the program or format a snapshot came from.
	MetaSource = "source"
	// MetaAllocatorSettingsPrefix prefixes PyTorch's allocator_settings
	// entries, other than the configuration string, in Snapshot.Meta.
	MetaAllocatorSettingsPrefix = "allocator_settings."
)

// MaxDevices bounds the device indices of a PyTorch snapshot, pickled or
// saved as JSON: a segment's "device", and the index in "device_traces" of
// a trace with entries, must be below it, far above the GPUs of any
// machine (PyTorch keeps a device index in a small integer,
// c10::DeviceIndex). Each device is a [Snapshot], analyzed and replayed
// apart, so that a small file listing millions of devices would otherwise
// take time and memory out of all proportion to its size.
const MaxDevices = 1024

// ReadPickle reads a PyTorch memory snapshot pickle, as written by
// torch.cuda.memory._dump_snapshot or by pickle.dump of the value
// torch.cuda.memory._snapshot() returns (or of torch.cuda.memory_snapshot(),
// a bare list of segments), or either saved with torch.save (a zip
// archive, held whole). The input may be gzip-compressed. It is read
// once, in a single pass.
//
// It returns one validated Snapshot per device that has segments or a
// trace with events other than record_function annotations, in device
// order; a snapshot with neither gives an empty slice. See the package documentation, "# PyTorch pickles", for how each
// field is mapped and how Truncated is decided. Errors are [*ParseError]s: a
// pickle that is not protocol 2 to 5, is corrupt or truncated, holds Python
// objects other than plain data, or does not have the snapshot's layout;
// and, wrapping a [*LimitError], a pickle larger than [DefaultMaxBytes]
// decompressed or one whose values would take far more memory than a real
// snapshot of its size (see [Limits]). A snapshot that breaks the rules of
// [Snapshot.Validate] gives a *ParseError wrapping an
// [*InvalidSnapshotError] whose Segment is the index in the pickle's
// "segments" list.
func ReadPickle(r io.Reader) ([]*Snapshot, error) {
	if r == nil {
		return nil, errNilReader(KindPickle)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); bytes.Equal(magic, gzipMagic) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &ParseError{Kind: KindPickle, Offset: -1, Msg: "bad gzip header", Err: err}
		}
		br = bufio.NewReaderSize(zr, 64<<10)
	}
	return readPickle(bufio.NewReaderSize(limited(br, Limits{}), 64<<10), Limits{})
}

// readPickle is ReadPickle of decompressed input, limited by the caller
// to lim; a zip archive is read as torch.save writes it.
func readPickle(br *bufio.Reader, lim Limits) ([]*Snapshot, error) {
	if b, _ := br.Peek(len(zipMagic)); bytes.Equal(b, zipMagic) {
		return readTorchSave(br, lim)
	}
	return readPlainPickle(br)
}

// zipMagic starts a zip archive (its first local file header), as
// torch.save writes one.
var zipMagic = []byte("PK\x03\x04")

// readTorchSave reads a snapshot saved with torch.save(snapshot, path): a
// zip archive whose record NAME/data.pkl is the pickle of the snapshot
// (protocol 2; the snapshot holds no tensors, so no storages). The
// archive is held whole, within lim, and so is the record once
// decompressed.
func readTorchSave(br *bufio.Reader, lim Limits) ([]*Snapshot, error) {
	data, err := io.ReadAll(br)
	if err != nil {
		return nil, &ParseError{Kind: KindPickle, Offset: -1, Msg: "reading a zip archive (torch.save)", Err: err}
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, &ParseError{Kind: KindPickle, Offset: -1, Msg: "a zip archive that cannot be read (a torch.save file cut short?)", Err: err}
	}
	for _, f := range zr.File {
		dir, base := path.Split(f.Name)
		if base != "data.pkl" || strings.Count(dir, "/") > 1 {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, &ParseError{Kind: KindPickle, Offset: -1, Msg: "zip archive (torch.save): " + f.Name, Err: err}
		}
		defer rc.Close()
		snaps, err := readPlainPickle(bufio.NewReaderSize(limited(rc, lim), 64<<10))
		var pe *ParseError
		if errors.As(err, &pe) {
			c := *pe
			c.Msg = "in " + f.Name + " of the zip archive (torch.save): " + c.Msg
			if pe.Msg == "" {
				c.Msg = strings.TrimSuffix(c.Msg, ": ")
			}
			return nil, &c
		}
		return snaps, err
	}
	return nil, &ParseError{Kind: KindPickle, Offset: -1, Msg: "a zip archive without a data.pkl record: not a snapshot saved with torch.save (save it with torch.cuda.memory._dump_snapshot(path))"}
}

// readPlainPickle is readPickle of a pickle.
func readPlainPickle(br *bufio.Reader) ([]*Snapshot, error) {
	if b, _ := br.Peek(2); len(b) < 2 || b[0] != opProto || b[1] < 2 || b[1] > 5 {
		return nil, &ParseError{Kind: KindPickle, Offset: 0, Msg: "not a pickle of protocol 2 to 5 (it must start with 0x80 and the protocol number)"}
	}
	root, size, used, err := unpickleCounted(br)
	if err != nil {
		return nil, err
	}
	c := &pickleConverter{budget: pickleBudget(size) - used, stacks: make(map[string][]Frame)}
	snaps, err := c.convert(root)
	if err != nil {
		return nil, err // what the pickle holds says more than what follows it
	}
	if err := pickleEnd(br, size); err != nil {
		return nil, err
	}
	return snaps, nil
}

// pickleEnd checks that the input ends at the pickle's STOP, which ends
// at offset size: reading on to the end lets a gzip stream check its
// checksum and length, so that a corrupt or cut file is not taken for a
// snapshot, and data after the pickle is refused, as after a JSON
// snapshot.
func pickleEnd(br *bufio.Reader, size int64) error {
	_, err := br.ReadByte()
	switch {
	case err == io.EOF:
		return nil
	case err == nil:
		return &ParseError{Kind: KindPickle, Offset: size, Msg: "unexpected data after the pickle (it ends at its STOP opcode)"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &ParseError{Kind: KindPickle, Offset: size, Msg: "the input ends early after the pickle (a truncated gzip file?)", Err: err}
	}
	var le *LimitError
	if errors.As(err, &le) {
		return &ParseError{Kind: KindPickle, Offset: size, Err: err}
	}
	return &ParseError{Kind: KindPickle, Offset: size, Msg: "after the pickle", Err: err}
}

// pickleConverter maps decoded Python values onto Snapshots.
type pickleConverter struct {
	// budget bounds the memory of the segments, blocks, events and frames
	// produced, in bytes, by what pickleBudget allows for the pickle's size
	// less what decoding took: a real snapshot spends tens of bytes of
	// pickle on each, while a corrupt one could otherwise reference one
	// list from many places and multiply the output without bound.
	budget int64
	// frames[i] is the frame dict with id i+1, converted.
	frames []Frame
	// stacks maps a sequence of frame ids (4 bytes each) to its converted
	// stack: PyTorch pickles a new list per trace entry, but a training
	// loop repeats the same few hundred stacks.
	stacks map[string][]Frame
	key    []byte // scratch for stacks keys
	// lookups and hits count uses of stacks; when few stacks repeat,
	// the map costs more than it saves and is dropped.
	lookups, hits int
}

// Deduplication of stacks stops when, after dedupLookups lookups, fewer
// than one in dedupMinHitRate was a hit.
const (
	dedupLookups    = 10000
	dedupMinHitRate = 4
)

// convErr is a conversion failure at a path like "segments[3].blocks[0]".
func convErr(path, format string, args ...any) error {
	msg := "not a PyTorch memory snapshot: "
	if path != "" {
		msg += path + ": "
	}
	return &ParseError{Kind: KindPickle, Offset: -1, Msg: msg + fmt.Sprintf(format, args...)}
}

// errDevice reports a device index outside [0, MaxDevices).
func errDevice(path string, dev int64) error {
	return convErr(path, "device %d out of range: PyTorch numbers devices from 0 to %d (trace.MaxDevices)", dev, MaxDevices-1)
}

// Bytes of memory one converted entry takes, for pickleConverter.spend.
const (
	sizeofSegment = int64(unsafe.Sizeof(Segment{}))
	sizeofBlock   = int64(unsafe.Sizeof(Block{}))
	sizeofEvent   = int64(unsafe.Sizeof(Event{}))
	sizeofFrame   = int64(unsafe.Sizeof(Frame{}))
)

// spend takes n entries of each bytes from the budget.
func (c *pickleConverter) spend(path string, n int, each int64) error {
	c.budget -= int64(n) * each
	if c.budget < 0 {
		return convErr(path, "more entries than a pickle of this size can hold (more than %d bytes of memory per byte of pickle; corrupt: objects referenced many times)", pickleExpansion)
	}
	return nil
}

// pickleBudget is the memory, in bytes, that decoding and converting a
// pickle of size bytes may take.
func pickleBudget(size int64) int64 { return pickleFloorBytes + pickleExpansion*size }

func (c *pickleConverter) convert(root any) ([]*Snapshot, error) {
	var segList, traceList, settings any
	switch v := root.(type) {
	case *pyDict:
		var okS, okT bool
		segList, okS = v.get("segments")
		traceList, okT = v.get("device_traces")
		settings, _ = v.get("allocator_settings")
		if !okS && !okT {
			if isMemoryStats(v) {
				return nil, convErr("", `the pickled dict has no "segments" or "device_traces" key: it holds the counters of torch.cuda.memory_stats(), not a snapshot (record with torch.cuda.memory._record_memory_history(), then save with torch.cuda.memory._dump_snapshot(path))`)
			}
			return nil, convErr("", `the pickled dict has no "segments" or "device_traces" key`)
		}
	case *pyList:
		segList = v // torch.cuda.memory_snapshot(): segments only
	case pyBigInt:
		return nil, convErr("", "the pickle holds a large int, as torch.save files of the format before PyTorch 1.6 (_use_new_zipfile_serialization=False) start; save the snapshot with torch.cuda.memory._dump_snapshot(path) or a plain torch.save(snapshot, path)")
	default:
		return nil, convErr("", "the pickle holds %s, want a dict with \"segments\" (or a list of segments)", aPyType(root))
	}

	byDevice := map[int]*Snapshot{}
	// segIndex[dev][k] is the index in "segments" of the device's k-th
	// segment, so that an error names the segment the file holds.
	segIndex := map[int][]int{}
	snap := func(dev int) *Snapshot {
		s := byDevice[dev]
		if s == nil {
			s = &Snapshot{Device: dev, Meta: map[string]string{MetaSource: "pytorch"}}
			byDevice[dev] = s
		}
		return s
	}

	if segList != nil {
		segs, ok := segList.(*pyList)
		if !ok {
			return nil, convErr("segments", "is %s, want a list", aPyType(segList))
		}
		if err := c.spend("segments", len(segs.items), sizeofSegment); err != nil {
			return nil, err
		}
		for i, sv := range segs.items {
			path := "segments[" + strconv.Itoa(i) + "]"
			dev, seg, err := c.segment(path, sv)
			if err != nil {
				return nil, err
			}
			s := snap(dev)
			s.Segments = append(s.Segments, seg)
			segIndex[dev] = append(segIndex[dev], i)
		}
	}
	if traceList != nil {
		traces, ok := traceList.(*pyList)
		if !ok {
			return nil, convErr("device_traces", "is %s, want a list", aPyType(traceList))
		}
		for dev, tv := range traces.items {
			path := "device_traces[" + strconv.Itoa(dev) + "]"
			tl, ok := tv.(*pyList)
			if !ok {
				return nil, convErr(path, "is %s, want a list", aPyType(tv))
			}
			if len(tl.items) == 0 {
				continue
			}
			if dev >= MaxDevices {
				return nil, errDevice(path, int64(dev))
			}
			if err := c.spend(path, len(tl.items), sizeofEvent); err != nil {
				return nil, err
			}
			history := make([]Event, 0, len(tl.items))
			for j, ev := range tl.items {
				history = append(history, Event{})
				keep, err := c.event(path+"["+strconv.Itoa(j)+"]", ev, &history[len(history)-1])
				if err != nil {
					return nil, err
				}
				if !keep {
					history = history[:len(history)-1]
				}
			}
			if len(history) > 0 {
				snap(dev).History = history
			}
		}
	}
	config, meta, err := allocatorSettings(settings)
	if err != nil {
		return nil, err
	}

	devices := make([]int, 0, len(byDevice))
	for d := range byDevice {
		devices = append(devices, d)
	}
	sort.Ints(devices)
	out := make([]*Snapshot, 0, len(devices))
	for _, d := range devices {
		s := byDevice[d]
		s.Config = config
		for k, v := range meta {
			s.Meta[k] = v
		}
		idx := segIndex[d]
		sort.Stable(segmentsByAddr{s.Segments, idx})
		labelBlocks(s)
		s.Truncated = !StartsEmpty(s.History, s.Segments)
		if err := s.Validate(); err != nil {
			var ie *InvalidSnapshotError
			if errors.As(err, &ie) && ie.Segment >= 0 && ie.Segment < len(idx) {
				c := *ie
				c.Segment = idx[ie.Segment]
				err = &c
			}
			return nil, &ParseError{Kind: KindPickle, Offset: -1, Msg: fmt.Sprintf("device %d", d), Err: err}
		}
		out = append(out, s)
	}
	return out, nil
}

// segmentsByAddr sorts a device's segments by address and their indices
// in the pickle's "segments" list with them.
type segmentsByAddr struct {
	segs []Segment
	idx  []int
}

func (x segmentsByAddr) Len() int           { return len(x.segs) }
func (x segmentsByAddr) Less(i, j int) bool { return x.segs[i].Addr < x.segs[j].Addr }
func (x segmentsByAddr) Swap(i, j int) {
	x.segs[i], x.segs[j] = x.segs[j], x.segs[i]
	x.idx[i], x.idx[j] = x.idx[j], x.idx[i]
}

// isMemoryStats reports whether d looks like torch.cuda.memory_stats():
// keys such as "allocated_bytes.all.current" and "num_ooms".
func isMemoryStats(d *pyDict) bool {
	for i := 0; i < len(d.kv); i += 2 {
		if k, ok := d.kv[i].(string); ok && (strings.HasPrefix(k, "allocated_bytes.") || strings.HasPrefix(k, "reserved_bytes.") || k == "num_ooms" || k == "num_alloc_retries") {
			return true
		}
	}
	return false
}

// labelBlocks gives each held block of s without a region the region of
// the alloc event that produced it, when the history holds that event:
// PyTorch records user_metadata on trace entries only, never on a
// snapshot's blocks. The event is the last alloc at the block's address
// that no free_completed follows.
func labelBlocks(s *Snapshot) {
	var regions map[uint64]string
	for i := range s.History {
		e := &s.History[i]
		switch {
		case e.Action == ActionAlloc && e.Region != "":
			if regions == nil {
				regions = make(map[uint64]string)
			}
			regions[e.Addr] = e.Region
		case e.Action == ActionAlloc || e.Action == ActionFreeCompleted:
			delete(regions, e.Addr)
		}
	}
	if len(regions) == 0 {
		return
	}
	for i := range s.Segments {
		for j := range s.Segments[i].Blocks {
			b := &s.Segments[i].Blocks[j]
			if b.Region == "" && b.State != StateInactive {
				b.Region = regions[b.Addr]
			}
		}
	}
}

// segment converts one segment dict; it returns the segment's device.
func (c *pickleConverter) segment(path string, v any) (int, Segment, error) {
	d, ok := v.(*pyDict)
	if !ok {
		return 0, Segment{}, convErr(path, "is %s, want a dict", aPyType(v))
	}
	var seg Segment
	dev, err := optInt(d, path, "device", 0)
	if err != nil {
		return 0, seg, err
	}
	if dev < 0 || dev >= MaxDevices {
		return 0, seg, errDevice(path, dev)
	}
	if seg.Addr, err = reqAddr(d, path, "address"); err != nil {
		return 0, seg, err
	}
	if seg.Size, err = reqSize(d, path, "total_size"); err != nil {
		return 0, seg, err
	}
	stream, err := optInt(d, path, "stream", 0)
	if err != nil {
		return 0, seg, err
	}
	seg.Stream = uint64(stream)
	if seg.Pool, err = reqString(d, path, "segment_type"); err != nil {
		return 0, seg, err
	}
	if ev, ok := d.get("is_expandable"); ok {
		b, ok := ev.(bool)
		if !ok {
			return 0, seg, convErr(path, `"is_expandable" is %s, want a bool`, aPyType(ev))
		}
		seg.Expandable = b
	}
	if seg.PrivatePool, err = poolID(d, path); err != nil {
		return 0, seg, err
	}
	bv, ok := d.get("blocks")
	if !ok {
		return 0, seg, convErr(path, `no "blocks" key`)
	}
	bl, ok := bv.(*pyList)
	if !ok {
		return 0, seg, convErr(path+".blocks", "is %s, want a list", aPyType(bv))
	}
	if err := c.spend(path+".blocks", len(bl.items), sizeofBlock); err != nil {
		return 0, seg, err
	}
	seg.Blocks = make([]Block, len(bl.items))
	next := seg.Addr // blocks of PyTorch before 2.1 carry no address
	for i, b := range bl.items {
		bpath := path + ".blocks[" + strconv.Itoa(i) + "]"
		if err := c.block(bpath, b, next, &seg.Blocks[i]); err != nil {
			return 0, seg, err
		}
		next = seg.Blocks[i].Addr + uint64(seg.Blocks[i].Size)
	}
	return int(dev), seg, nil
}

func (c *pickleConverter) block(path string, v any, addr uint64, b *Block) error {
	d, ok := v.(*pyDict)
	if !ok {
		return convErr(path, "is %s, want a dict", aPyType(v))
	}
	var err error
	b.Addr = addr
	if _, ok := d.get("address"); ok {
		if b.Addr, err = reqAddr(d, path, "address"); err != nil {
			return err
		}
	}
	if b.Size, err = reqSize(d, path, "size"); err != nil {
		return err
	}
	if b.State, err = reqString(d, path, "state"); err != nil {
		return err
	}
	if b.State == "active_awaiting_free" { // the spelling of PyTorch's typing stubs
		b.State = StateActivePendingFree
	}
	last, err := lastHistory(path, d, b)
	if err != nil {
		return err
	}
	if _, ok := d.get("requested_size"); ok {
		if b.Requested, err = optInt(d, path, "requested_size", 0); err != nil {
			return err
		}
	} else if b.State != StateInactive {
		// Unknown: the size of the latest allocation if the block's
		// history records it, else the block's size, as PyTorch's own
		// viewer assumes; never 0, which would read as all waste.
		b.Requested = b.Size
		if last != nil {
			if n, err := optInt(last, path+".history[0]", "real_size", b.Size); err != nil {
				return err
			} else if n >= 0 && n <= b.Size {
				b.Requested = n
			}
		}
	}
	if _, ok := d.get("frames"); !ok && last != nil {
		b.Frames, err = c.frameList(path+".history[0]", last)
		return err
	}
	b.Frames, err = c.frameList(path, d)
	return err
}

// lastHistory returns the entry of a block's "history" that records its
// current allocation, or nil. PyTorch before 2.1 gives blocks no "frames"
// and no "address" but a "history" list, newest first, of {"addr",
// "real_size", "frames"} dicts: the allocations the block held, merged
// blocks' included. Only a held block's newest entry at the block's own
// address is its allocation.
func lastHistory(path string, d *pyDict, b *Block) (*pyDict, error) {
	v, ok := d.get("history")
	if !ok || v == nil || b.State == StateInactive {
		return nil, nil
	}
	l, ok := v.(*pyList)
	if !ok {
		return nil, convErr(path+".history", "is %s, want a list", aPyType(v))
	}
	if len(l.items) == 0 {
		return nil, nil
	}
	h, ok := l.items[0].(*pyDict)
	if !ok {
		return nil, convErr(path+".history[0]", "is %s, want a dict", aPyType(l.items[0]))
	}
	if _, ok := h.get("addr"); ok {
		addr, err := reqAddr(h, path+".history[0]", "addr")
		if err != nil {
			return nil, err
		}
		if addr != b.Addr {
			return nil, nil
		}
	}
	return h, nil
}

// actionUserDefined is the action of the trace entries PyTorch (2.4 and
// later) records where a torch.profiler.record_function range starts and
// ends while the memory history is on: the range's name is the function
// of its one frame and "START" or "END" its file. They allocate and free
// nothing.
const actionUserDefined = "user_defined"

// event converts one trace entry into e. It reports false, leaving e to
// be discarded, for an entry that is not part of the allocator's history
// (actionUserDefined).
func (c *pickleConverter) event(path string, v any, e *Event) (bool, error) {
	d, ok := v.(*pyDict)
	if !ok {
		return false, convErr(path, "is %s, want a dict", aPyType(v))
	}
	name, err := reqString(d, path, "action")
	if err != nil {
		return false, err
	}
	if name == actionUserDefined {
		return false, nil
	}
	a, ok := lookupAction(name)
	if !ok {
		return false, convErr(path, "unknown action %q", name)
	}
	e.Action = a
	addrKey := "addr"
	if a == ActionOOM {
		addrKey = "device_free"
	}
	// PyTorch writes both keys on every entry. Without them an alloc or
	// free would act at address 0 and an oom would read as a request of
	// 0 bytes on a device with nothing free; only a snapshot marker
	// needs neither.
	av, hasAddr := d.get(addrKey)
	sv, hasSize := d.get("size")
	if a != ActionSnapshot && (!hasAddr || !hasSize) {
		missing := addrKey
		if hasAddr {
			missing = "size"
		}
		return false, convErr(path, "%s entry has no %q key", name, missing)
	}
	if a != ActionSnapshot && (av == nil || sv == nil) {
		none := addrKey
		if av != nil {
			none = "size"
		}
		return false, convErr(path, "%s entry's %q is None", name, none)
	}
	if hasAddr {
		if e.Addr, err = reqAddr(d, path, addrKey); err != nil {
			return false, err
		}
	}
	if e.Size, err = optInt(d, path, "size", 0); err != nil {
		return false, err
	}
	if e.Size < 0 {
		return false, convErr(path, "negative size %d", e.Size)
	}
	stream, err := optInt(d, path, "stream", 0)
	if err != nil {
		return false, err
	}
	e.Stream = uint64(stream)
	if e.TimeUS, err = optInt(d, path, "time_us", 0); err != nil {
		return false, err
	}
	if m, ok := d.get("user_metadata"); ok {
		if s, ok := m.(string); ok {
			e.Region = s
		}
	}
	e.Frames, err = c.frameList(path, d)
	return true, err
}

// frameList converts the optional "frames" list of d. Identical stacks
// (the same frame dicts in the same order) share one []Frame.
func (c *pickleConverter) frameList(path string, d *pyDict) ([]Frame, error) {
	v, ok := d.get("frames")
	if !ok || v == nil {
		return nil, nil
	}
	l, ok := v.(*pyList)
	if !ok {
		return nil, convErr(path+".frames", "is %s, want a list", aPyType(v))
	}
	if l.done {
		return l.frames, nil
	}
	if len(l.items) == 0 {
		l.done = true
		return nil, nil
	}
	dedup := c.stacks != nil
	key := c.key[:0]
	for i, fv := range l.items {
		fd, ok := fv.(*pyDict)
		if !ok {
			return nil, convErr(path+".frames["+strconv.Itoa(i)+"]", "is %s, want a dict", aPyType(fv))
		}
		if fd.id == 0 {
			if err := c.spend(path+".frames", 1, sizeofFrame); err != nil {
				return nil, err
			}
			c.frames = append(c.frames, convertFrame(fd))
			fd.id = uint32(len(c.frames))
		}
		if dedup {
			key = binary.LittleEndian.AppendUint32(key, fd.id)
		}
	}
	var frames []Frame
	if dedup {
		c.key = key
		frames, ok = c.stacks[string(key)]
		c.lookups++
		if ok {
			c.hits++
		}
		if c.lookups == dedupLookups && c.hits*dedupMinHitRate < c.lookups {
			c.stacks = nil
		}
	}
	if frames == nil {
		if err := c.spend(path+".frames", len(l.items), sizeofFrame); err != nil {
			return nil, err
		}
		frames = make([]Frame, len(l.items))
		for i, fv := range l.items {
			frames[i] = c.frames[fv.(*pyDict).id-1]
		}
		if c.stacks != nil {
			c.stacks[string(key)] = frames
		}
	}
	l.frames, l.done = frames, true
	return frames, nil
}

// convertFrame maps a frame dict; missing or mistyped keys stay empty.
func convertFrame(d *pyDict) Frame {
	var f Frame
	if s, ok := d.get("name"); ok {
		f.Function, _ = s.(string)
	}
	if s, ok := d.get("filename"); ok {
		f.File, _ = s.(string)
	}
	if n, ok := d.get("line"); ok {
		if n, ok := n.(int64); ok && n >= math.MinInt32 && n <= math.MaxInt32 {
			f.Line = int(n)
		}
	}
	return f
}

// allocatorSettings maps PyTorch's allocator_settings dict to Config and
// Meta entries.
func allocatorSettings(v any) (string, map[string]string, error) {
	if v == nil {
		return "", nil, nil
	}
	d, ok := v.(*pyDict)
	if !ok {
		return "", nil, convErr("allocator_settings", "is %s, want a dict", aPyType(v))
	}
	var config string
	meta := map[string]string{}
	for i := 0; i < len(d.kv); i += 2 {
		key, ok := d.kv[i].(string)
		if !ok {
			continue
		}
		val := d.kv[i+1]
		if key == "PYTORCH_CUDA_ALLOC_CONF" || key == "PYTORCH_ALLOC_CONF" {
			if s, ok := val.(string); ok {
				config = s
				continue
			}
		}
		meta[MetaAllocatorSettingsPrefix+key] = clipRepr(pyRepr(val, 4, maxReprBytes))
	}
	return config, meta, nil
}

// maxReprBytes bounds a Meta value made by pyRepr: a setting is a few
// bytes, while a pickle could reference one long string from a list many
// times over and make its repr far longer than the pickle.
const maxReprBytes = 4 << 10

// clipRepr cuts a repr to maxReprBytes, marking the cut with "...".
func clipRepr(s string) string {
	if len(s) <= maxReprBytes {
		return s
	}
	s = s[:maxReprBytes]
	for len(s) > 0 && !utf8.RuneStart(s[len(s)-1]) { // no half characters
		s = s[:len(s)-1]
	}
	if len(s) > 0 {
		s = s[:len(s)-1]
	}
	return s + "..."
}

// pyRepr formats a decoded value for Meta, nesting at most depth levels;
// it stops adding items once it has about budget bytes.
func pyRepr(v any, depth, budget int) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		if v {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case float64:
		return pyFloat(v)
	case string:
		return v
	}
	if depth == 0 {
		return "..."
	}
	var items []string
	used := 0
	add := func(s string) bool {
		if used > budget {
			items = append(items, "...")
			return false
		}
		items = append(items, s)
		used += len(s) + 2
		return true
	}
	switch v := v.(type) {
	case pyTuple:
		for _, x := range v {
			if !add(pyRepr(x, depth-1, budget-used)) {
				break
			}
		}
		return "(" + strings.Join(items, ", ") + ")"
	case *pyList:
		for _, x := range v.items {
			if !add(pyRepr(x, depth-1, budget-used)) {
				break
			}
		}
		return "[" + strings.Join(items, ", ") + "]"
	case *pyDict:
		for i := 0; i < len(v.kv); i += 2 {
			if !add(pyRepr(v.kv[i], depth-1, budget-used) + ": " + pyRepr(v.kv[i+1], depth-1, budget-used)) {
				break
			}
		}
		return "{" + strings.Join(items, ", ") + "}"
	}
	return "<" + pyTypeName(v) + ">"
}

// pyFloat formats f as Python's repr does: shortest digits, positional
// with a ".0" for whole numbers when the exponent is in [-4, 16),
// scientific otherwise.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	if a := math.Abs(f); a == 0 || (a >= 1e-4 && a < 1e16) {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsRune(s, '.') {
			s += ".0"
		}
		return s
	}
	return strconv.FormatFloat(f, 'e', -1, 64)
}

func optInt(d *pyDict, path, key string, def int64) (int64, error) {
	v, ok := d.get(key)
	if !ok || v == nil {
		return def, nil
	}
	switch n := v.(type) {
	case int64:
		return n, nil
	case bool:
		if n {
			return 1, nil
		}
		return 0, nil
	case uint64, pyBigInt:
		return 0, convErr(path, "%q is too large", key)
	}
	return 0, convErr(path, "%q is %s, want an int", key, aPyType(v))
}

func reqSize(d *pyDict, path, key string) (int64, error) {
	v, ok := d.get(key)
	if !ok {
		return 0, convErr(path, "no %q key", key)
	}
	if v == nil {
		return 0, convErr(path, "%q is None", key)
	}
	n, err := optInt(d, path, key, 0)
	if err == nil && n < 0 {
		err = convErr(path, "%q is negative (%d)", key, n)
	}
	return n, err
}

func reqAddr(d *pyDict, path, key string) (uint64, error) {
	v, ok := d.get(key)
	if !ok {
		return 0, convErr(path, "no %q key", key)
	}
	switch n := v.(type) {
	case int64:
		if n < 0 {
			return 0, convErr(path, "%q is negative (%d)", key, n)
		}
		return uint64(n), nil
	case uint64:
		return n, nil
	case pyBigInt:
		return 0, convErr(path, "%q is too large: above 2^64-1, beyond any address", key)
	}
	return 0, convErr(path, "%q is %s, want an int", key, aPyType(v))
}

// poolID reads a segment's "segment_pool_id", a tuple (or list) of two
// ints; a missing one or None is zero.
func poolID(d *pyDict, path string) ([2]uint64, error) {
	const key = "segment_pool_id"
	var id [2]uint64
	v, ok := d.get(key)
	if !ok || v == nil {
		return id, nil
	}
	var items []any
	switch t := v.(type) {
	case pyTuple:
		items = t
	case *pyList:
		items = t.items
	default:
		return id, convErr(path, "%q is %s, want a tuple of two ints", key, aPyType(v))
	}
	if len(items) != 2 {
		return id, convErr(path, "%q has %d items, want 2", key, len(items))
	}
	for i, it := range items {
		switch n := it.(type) {
		case int64:
			if n < 0 {
				return id, convErr(path, "%q[%d] is negative (%d)", key, i, n)
			}
			id[i] = uint64(n)
		case uint64:
			id[i] = n
		case pyBigInt:
			return id, convErr(path, "%q[%d] is too large: above 2^64-1", key, i)
		default:
			return id, convErr(path, "%q[%d] is %s, want an int", key, i, aPyType(it))
		}
	}
	return id, nil
}

func reqString(d *pyDict, path, key string) (string, error) {
	v, ok := d.get(key)
	if !ok {
		return "", convErr(path, "no %q key", key)
	}
	s, ok := v.(string)
	if !ok {
		return "", convErr(path, "%q is %s, want a str", key, aPyType(v))
	}
	return s, nil
}
