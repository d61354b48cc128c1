package parallel

// The rendezvous store is a small key-value server over TCP, as torch's
// TCPStore: the ranks of a job meet through it to exchange the addresses
// of their TCP collectives or NCCL's unique id. One process serves it
// ([ListenStore]: "vram run" on node 0, or rank 0 when no launcher does)
// and every rank dials it ([DialStore]).
//
// The wire format is binary and little-endian. A client opens with the
// 8-byte magic storeMagic, which the server echoes. Then each request is
//
//	op u8 | wait_ms u32 | n u16 | n × (len u16, key) | Set: len u32, value | Add: delta i64
//
// and its reply is a status byte: statusOK followed by the op's result
// (Get: len u32, value; Add: i64; Check: u8), statusTimeout followed by
// the number of keys missing (u32) and up to maxListedMissing of them (u16
// count, then keys as above), or statusError followed by a message (len
// u16, text). Every length is checked against the limits below before
// anything is allocated, and a value is allocated as its bytes arrive, so
// that no peer, hostile or broken, can make the server allocate more than
// those limits, or more than it sent, or wait longer than it asked.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vramgo/vram"
)

// Limits of the store.
const (
	// MaxStoreKeyBytes is the longest key, in bytes.
	MaxStoreKeyBytes = 1024
	// MaxStoreValueBytes is the largest value, in bytes: the store carries
	// addresses and ids, not tensors.
	MaxStoreValueBytes = 1 << 20
	// MaxStoreWaitKeys is the most keys one Wait or Check names.
	MaxStoreWaitKeys = 4096
	// maxStoreBytes is the most bytes of keys and values a server holds.
	maxStoreBytes = 256 << 20
	// maxStoreConns is the most client connections a server keeps open;
	// more are closed at once.
	maxStoreConns = 1024
	// maxStoreWait is the longest a request may ask the server to wait.
	maxStoreWait = 24 * time.Hour
	// storeFrameTimeout is how long the rest of a request may take to
	// arrive once its first byte has.
	storeFrameTimeout = 30 * time.Second
	// storeReplySlack is how much longer a client waits for a reply than it
	// asked the server to wait, so that the server's timeout reply, which
	// names the missing keys, arrives first.
	storeReplySlack = 2 * time.Second
	// maxListedMissing is how many missing keys a timeout reply names.
	maxListedMissing = 16
	// DefaultStoreTimeout is the time a store operation waits for keys, or
	// for the server to answer, when StoreOptions.Timeout is zero (torch's
	// default for its TCPStore).
	DefaultStoreTimeout = 5 * time.Minute
)

const storeMagic = "VRAMKV01"

// storeFullMagic is what a server with maxStoreConns connections answers
// a client's magic with before it closes the connection.
const storeFullMagic = "VRAMFULL"

// maxTurnedAway is how many clients a full server tells so at once; it
// closes the connections of more without a word.
const maxTurnedAway = 64

var errStoreFull = errorf("the store server serves %d connections, its most, and has no room for one more "+
	"(a job of more ranks than that cannot meet through one store)", maxStoreConns)

// Store operations on the wire.
const (
	opSet byte = iota + 1
	opGet
	opAdd
	opWait
	opCheck
	opDelete
)

var storeOpNames = map[byte]string{opSet: "set", opGet: "get", opAdd: "add", opWait: "wait", opCheck: "check", opDelete: "delete"}

// Reply statuses.
const (
	statusOK byte = iota
	statusTimeout
	statusError
)

// StoreTimeoutError is the error of a store operation whose keys were not
// all set in time (or whose server did not answer in time). It matches
// [ErrTimeout] under errors.Is.
type StoreTimeoutError struct {
	Addr       string        // the server's address
	Op         string        // "get", "wait"
	Missing    []string      // keys not set, at most 16 of them
	NumMissing int           // how many keys were not set
	After      time.Duration // how long the operation waited
}

// Error names the store, the operation and the keys that did not arrive
// in time.
func (e *StoreTimeoutError) Error() string {
	if e.NumMissing == 0 {
		return fmt.Sprintf("parallel: store %s: %s: no answer within %v", e.Addr, e.Op, e.After)
	}
	qs := make([]string, len(e.Missing))
	for i, k := range e.Missing {
		qs[i] = strconv.Quote(k)
	}
	list := strings.Join(qs, ", ")
	if e.NumMissing > len(e.Missing) {
		list += fmt.Sprintf(" and %d more", e.NumMissing-len(e.Missing))
	}
	keys := "keys"
	if e.NumMissing == 1 {
		keys = "key"
	}
	return fmt.Sprintf("parallel: store %s: %s: %d %s not set within %v: %s", e.Addr, e.Op, e.NumMissing, keys, e.After, list)
}

// Is reports whether target is [ErrTimeout].
func (e *StoreTimeoutError) Is(target error) bool { return target == ErrTimeout }

// checkKey returns an error for a key the store does not accept.
func checkKey(k string) error {
	switch {
	case k == "":
		return errors.New("empty key")
	case len(k) > MaxStoreKeyBytes:
		return errorf("key of %d bytes (at most %d)", len(k), MaxStoreKeyBytes)
	}
	return nil
}

// StoreServer serves a rendezvous store on a listener. Create it with
// [ListenStore] or [NewStoreServer]; it serves until Close. It is safe for
// concurrent use.
type StoreServer struct {
	ln   net.Listener
	done chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	data    map[string][]byte
	bytes   int64                 // keys and values held
	changed chan struct{}         // closed and replaced when a key is set
	conns   map[net.Conn]struct{} // open client connections
	// turnedAway holds the connections being told that the server is
	// full.
	turnedAway map[net.Conn]struct{}
	closed     bool
}

// ListenStore listens on the TCP address addr ("127.0.0.1:29500", ":0" for
// any free port) and serves a store there. A port already taken is an
// error wrapping vram.ErrArgument and syscall.EADDRINUSE.
func ListenStore(addr string) (*StoreServer, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, errorf("parallel: store: listen on %s: %w: the port is taken, by another job or program, "+
			"or by a group of this process that was not closed (close it before joining again); choose another MASTER_PORT: %w",
			addr, err, vram.ErrArgument)
	}
	if err != nil {
		return nil, errorf("parallel: store: listen on %s: %w", addr, err)
	}
	return NewStoreServer(ln), nil
}

// NewStoreServer serves a store on ln, which it takes over: Close closes
// it.
func NewStoreServer(ln net.Listener) *StoreServer {
	s := &StoreServer{
		ln:      ln,
		done:    make(chan struct{}),
		data:    map[string][]byte{},
		changed: make(chan struct{}),
		conns:   map[net.Conn]struct{}{},

		turnedAway: map[net.Conn]struct{}{},
	}
	s.wg.Add(1)
	go s.accept()
	return s
}

// Addr returns the address the server listens on.
func (s *StoreServer) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server: it closes the listener and every client
// connection, and returns once they are closed. Requests waiting for keys
// end; their clients see the connection close.
func (s *StoreServer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	for c := range s.turnedAway {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *StoreServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				time.Sleep(50 * time.Millisecond) // out of descriptors: wait for some to close
				continue
			}
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			continue
		}
		if len(s.conns) >= maxStoreConns {
			// Say why, unless too many are being told already.
			if len(s.turnedAway) < maxTurnedAway {
				s.turnedAway[c] = struct{}{}
				s.wg.Add(1)
				go s.turnAway(c)
			} else {
				c.Close()
			}
			s.mu.Unlock()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// turnAway tells a client that the server is full and closes its
// connection. It reads the client's magic first: closing a connection with
// data unread would reset it, and the client could lose the answer.
func (s *StoreServer) turnAway(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.turnedAway, c)
		s.mu.Unlock()
		c.Close()
	}()
	c.SetDeadline(time.Now().Add(time.Second))
	var magic [len(storeMagic)]byte
	if _, err := io.ReadFull(c, magic[:]); err == nil {
		io.WriteString(c, storeFullMagic)
	}
}

// serve answers the requests of one client until it goes away or sends
// something the protocol does not allow.
func (s *StoreServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReader(c)
	w := bufio.NewWriter(c)
	c.SetDeadline(time.Now().Add(storeFrameTimeout))
	var magic [len(storeMagic)]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return
	}
	// The magic goes back even to a client that sent another, so that a
	// client of another version can say which version answered.
	if _, err := w.WriteString(storeMagic); err != nil || w.Flush() != nil || string(magic[:]) != storeMagic {
		return
	}
	for {
		c.SetDeadline(time.Time{}) // a client may stay idle for the whole job
		if _, err := r.Peek(1); err != nil {
			return
		}
		c.SetReadDeadline(time.Now().Add(storeFrameTimeout))
		req, err := readStoreRequest(r)
		if err != nil {
			return // malformed: drop the client
		}
		c.SetReadDeadline(time.Time{})
		s.handle(req, w)
		c.SetWriteDeadline(time.Now().Add(storeFrameTimeout))
		if w.Flush() != nil {
			return
		}
	}
}

// storeRequest is one decoded request.
type storeRequest struct {
	op    byte
	wait  time.Duration
	keys  []string
	value []byte
	delta int64
}

// readStoreRequest decodes a request, refusing anything over the limits.
func readStoreRequest(r *bufio.Reader) (storeRequest, error) {
	var hdr [7]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return storeRequest{}, err
	}
	req := storeRequest{op: hdr[0], wait: time.Duration(binary.LittleEndian.Uint32(hdr[1:5])) * time.Millisecond}
	n := int(binary.LittleEndian.Uint16(hdr[5:7]))
	if _, ok := storeOpNames[req.op]; !ok {
		return req, errorf("unknown op %d", req.op)
	}
	switch {
	case n == 0:
		return req, errors.New("no key")
	case n > 1 && req.op != opWait && req.op != opCheck:
		return req, errorf("%d keys for one %s", n, storeOpNames[req.op])
	case n > MaxStoreWaitKeys:
		return req, errorf("%d keys", n)
	}
	req.keys = make([]string, n)
	for i := range n {
		k, err := readString16(r, MaxStoreKeyBytes)
		if err != nil {
			return req, err
		}
		if err := checkKey(k); err != nil {
			return req, err
		}
		req.keys[i] = k
	}
	switch req.op {
	case opSet:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return req, err
		}
		vn := binary.LittleEndian.Uint32(b[:])
		if vn > MaxStoreValueBytes {
			return req, errorf("value of %d bytes", vn)
		}
		v, err := readBytes(r, int(vn))
		if err != nil {
			return req, err
		}
		req.value = v
	case opAdd:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return req, err
		}
		req.delta = int64(binary.LittleEndian.Uint64(b[:]))
	}
	return req, nil
}

// readBytes reads n bytes, allocating them as they arrive rather than all
// at once, so that a peer that announces a long value and sends little of
// it makes this side hold about what it sent.
func readBytes(r io.Reader, n int) ([]byte, error) {
	const chunk = 64 << 10
	b := make([]byte, 0, min(n, chunk))
	for len(b) < n {
		m := min(n-len(b), chunk)
		b = slices.Grow(b, m)
		if _, err := io.ReadFull(r, b[len(b):len(b)+m]); err != nil {
			return nil, err
		}
		b = b[:len(b)+m]
	}
	return b, nil
}

// readString16 reads a string of at most max bytes prefixed by its u16
// length.
func readString16(r io.Reader, max int) (string, error) {
	var b [2]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", err
	}
	n := int(binary.LittleEndian.Uint16(b[:]))
	if n > max {
		return "", errorf("string of %d bytes (at most %d)", n, max)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf), nil
}

func writeString16(w *bufio.Writer, s string) {
	if len(s) > 0xffff {
		s = s[:0xffff]
	}
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], uint16(len(s)))
	w.Write(b[:])
	w.WriteString(s)
}

// handle runs one request and writes its reply to w.
func (s *StoreServer) handle(req storeRequest, w *bufio.Writer) {
	replyErr := func(msg string) {
		w.WriteByte(statusError)
		writeString16(w, msg)
	}
	switch req.op {
	case opSet:
		if err := s.set(req.keys[0], req.value); err != nil {
			replyErr(err.Error())
			return
		}
		w.WriteByte(statusOK)
	case opAdd:
		v, err := s.add(req.keys[0], req.delta)
		if err != nil {
			replyErr(err.Error())
			return
		}
		w.WriteByte(statusOK)
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		w.Write(b[:])
	case opDelete:
		s.mu.Lock()
		if v, ok := s.data[req.keys[0]]; ok {
			s.bytes -= int64(len(req.keys[0]) + len(v))
			delete(s.data, req.keys[0])
		}
		s.mu.Unlock()
		w.WriteByte(statusOK)
	case opCheck:
		missing := s.missing(req.keys)
		w.WriteByte(statusOK)
		if len(missing) == 0 {
			w.WriteByte(1)
		} else {
			w.WriteByte(0)
		}
	case opGet, opWait:
		missing := s.await(req.keys, min(req.wait, maxStoreWait))
		if len(missing) > 0 {
			w.WriteByte(statusTimeout)
			var b [4]byte
			binary.LittleEndian.PutUint32(b[:], uint32(len(missing)))
			w.Write(b[:])
			listed := missing[:min(len(missing), maxListedMissing)]
			binary.LittleEndian.PutUint16(b[:2], uint16(len(listed)))
			w.Write(b[:2])
			for _, k := range listed {
				writeString16(w, k)
			}
			return
		}
		w.WriteByte(statusOK)
		if req.op == opGet {
			s.mu.Lock()
			v := s.data[req.keys[0]]
			s.mu.Unlock()
			var b [4]byte
			binary.LittleEndian.PutUint32(b[:], uint32(len(v)))
			w.Write(b[:])
			w.Write(v)
		}
	}
}

// set stores a value, within the server's memory bound.
func (s *StoreServer) set(k string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.data[k]
	grow := int64(len(k) + len(v))
	if had {
		grow -= int64(len(k) + len(old))
	}
	if s.bytes+grow > maxStoreBytes {
		return errorf("the store is full (%d MiB of keys and values)", maxStoreBytes>>20)
	}
	s.bytes += grow
	s.data[k] = v
	s.notifyLocked()
	return nil
}

// add adds delta to the counter k (0 when not set) and returns its value,
// within the server's memory bound; a sum that overflows int64 is refused
// and leaves the counter as it was.
func (s *StoreServer) add(k string, delta int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cur int64
	old, had := s.data[k]
	if had {
		n, err := strconv.ParseInt(string(old), 10, 64)
		if err != nil {
			return 0, errorf("key %q holds a value that is not a counter", k)
		}
		cur = n
	}
	sum := cur + delta
	if delta > 0 && sum < cur || delta < 0 && sum > cur {
		return 0, errorf("adding %d to the counter %q, %d, would overflow a 64-bit integer", delta, k, cur)
	}
	v := []byte(strconv.FormatInt(sum, 10))
	grow := int64(len(k) + len(v))
	if had {
		grow -= int64(len(k) + len(old))
	}
	if s.bytes+grow > maxStoreBytes {
		return 0, errorf("the store is full (%d MiB of keys and values)", maxStoreBytes>>20)
	}
	s.bytes += grow
	s.data[k] = v
	s.notifyLocked()
	return sum, nil
}

// notifyLocked wakes the requests waiting for keys. s.mu is held.
func (s *StoreServer) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// missing returns the keys not set.
func (s *StoreServer) missing(keys []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, k := range keys {
		if _, ok := s.data[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// await waits up to d for every key to be set and returns those that
// were not.
func (s *StoreServer) await(keys []string, d time.Duration) []string {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		s.mu.Lock()
		var missing []string
		for _, k := range keys {
			if _, ok := s.data[k]; !ok {
				missing = append(missing, k)
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return missing
		case <-s.done:
			return missing
		}
	}
}

// StoreOptions configures a store client. The zero value works.
type StoreOptions struct {
	// Timeout bounds every operation: the wait for keys in Get and Wait,
	// and for the server to answer, and in DialStore the time spent
	// retrying until a server listens. 0 means DefaultStoreTimeout.
	Timeout time.Duration
}

// Store is a client of a rendezvous store. It is safe for concurrent use:
// each operation in progress uses a connection of its own.
type Store struct {
	addr    string
	timeout time.Duration
	localIP net.IP

	mu     sync.Mutex
	idle   []net.Conn
	busy   map[net.Conn]struct{} // connections of the calls in progress, which Close ends
	closed bool
}

// errStoreClosed is the error of a call on a closed Store, or in progress
// when it was closed.
var errStoreClosed = errors.New("the store client is closed")

// DialStore connects to the store server at addr ("host:port"), retrying
// while nothing listens there yet (the ranks of a job start in any order)
// until the options' timeout or ctx ends. A server that answers as no
// store of this version does (another service, another version of vram)
// fails it at once with vram.ErrArgument.
func DialStore(ctx context.Context, addr string, opts StoreOptions) (*Store, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultStoreTimeout
	}
	s := &Store{addr: addr, timeout: timeout}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		c, err := s.dial(ctx)
		if err == nil {
			s.localIP = c.LocalAddr().(*net.TCPAddr).IP
			s.put(c)
			return s, nil
		}
		if errors.Is(err, vram.ErrArgument) {
			// Something else answers there: retrying will not change it.
			return nil, errorf("parallel: store %s: %w", addr, err)
		}
		last = err
		select {
		case <-ctx.Done():
			if errors.Is(last, errStoreFull) {
				return nil, errorf("parallel: store %s: no room within %v: %w", addr, timeout, last)
			}
			return nil, errorf("parallel: store %s: no store server answered within %v "+
				"(is rank 0, or vram run, started with the same MASTER_ADDR and MASTER_PORT?): %w", addr, timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dial opens a connection and exchanges the magic.
func (s *Store) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return nil, err
	}
	dl := time.Now().Add(storeFrameTimeout)
	if t, ok := ctx.Deadline(); ok && t.Before(dl) {
		dl = t
	}
	c.SetDeadline(dl)
	var magic [len(storeMagic)]byte
	if _, err = io.WriteString(c, storeMagic); err == nil {
		_, err = io.ReadFull(c, magic[:])
	}
	if err == nil && string(magic[:]) == storeFullMagic {
		err = errStoreFull
	}
	if err == nil && string(magic[:]) != storeMagic {
		err = errorf("%s is not a vram store server of this version: it answered %q, not %q "+
			"(MASTER_ADDR and MASTER_PORT name another service, or a program built with another version of vram): %w",
			s.addr, magic[:], storeMagic, vram.ErrArgument)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// Addr returns the server's address.
func (s *Store) Addr() string { return s.addr }

// LocalIP returns the IP address this host uses to reach the server: the
// address other ranks can reach this one at.
func (s *Store) LocalIP() net.IP { return s.localIP }

// Close closes the client's connections, those of calls in progress too:
// a Get or Wait waiting for a key, on another goroutine, returns at once
// with an error. Calls after Close fail.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, c := range s.idle {
		c.Close()
	}
	s.idle = nil
	for c := range s.busy {
		c.Close()
	}
	s.busy = nil
	return nil
}

// get returns a connection for a call, idle or new, and counts it busy
// until put or drop.
func (s *Store) get(ctx context.Context) (net.Conn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errStoreClosed
	}
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.markBusyLocked(c)
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	c, err := s.dial(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed { // closed while dialing
		c.Close()
		return nil, errStoreClosed
	}
	s.markBusyLocked(c)
	return c, nil
}

// markBusyLocked counts c as the connection of a call in progress.
func (s *Store) markBusyLocked(c net.Conn) {
	if s.busy == nil {
		s.busy = map[net.Conn]struct{}{}
	}
	s.busy[c] = struct{}{}
}

// drop closes c, a connection that failed, and reports whether the
// client was closed meanwhile (which may be why it failed).
func (s *Store) drop(c net.Conn) (closed bool) {
	c.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.busy, c)
	return s.closed
}

// put returns c, whose call is done, to the idle connections.
func (s *Store) put(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.busy, c)
	if s.closed || len(s.idle) >= 8 {
		c.Close()
		return
	}
	s.idle = append(s.idle, c)
}

// Set stores value under key, replacing any value, and wakes the Get and
// Wait calls waiting for it. Keys are 1 to MaxStoreKeyBytes bytes, values
// at most MaxStoreValueBytes.
func (s *Store) Set(ctx context.Context, key string, value []byte) error {
	if len(value) > MaxStoreValueBytes {
		return errorf("parallel: store %s: set %q: value of %d bytes (at most %d)", s.addr, key, len(value), MaxStoreValueBytes)
	}
	_, err := s.do(ctx, opSet, []string{key}, value, 0)
	return err
}

// Get returns the value of key, waiting until some rank sets it, up to
// the store's timeout (a [*StoreTimeoutError] then) or the end of ctx.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	r, err := s.do(ctx, opGet, []string{key}, nil, 0)
	return r.value, err
}

// Add adds delta to the counter under key (0 when not set) and returns the
// new value, atomically: n ranks calling Add(key, 1) see 1 to n, each
// once. A counter reads with Get as its decimal text. Adding to a key set
// to something else is an error.
func (s *Store) Add(ctx context.Context, key string, delta int64) (int64, error) {
	r, err := s.do(ctx, opAdd, []string{key}, nil, delta)
	return r.counter, err
}

// Wait returns once every key is set, or a [*StoreTimeoutError] naming
// those that are not after the store's timeout.
func (s *Store) Wait(ctx context.Context, keys ...string) error {
	_, err := s.do(ctx, opWait, keys, nil, 0)
	return err
}

// Check reports, without waiting, whether every key is set.
func (s *Store) Check(ctx context.Context, keys ...string) (bool, error) {
	r, err := s.do(ctx, opCheck, keys, nil, 0)
	return r.ok, err
}

// Delete removes key; deleting a key not set does nothing.
func (s *Store) Delete(ctx context.Context, key string) error {
	_, err := s.do(ctx, opDelete, []string{key}, nil, 0)
	return err
}

// storeReply is one decoded reply.
type storeReply struct {
	value   []byte
	counter int64
	ok      bool
}

// do sends one request and reads its reply.
func (s *Store) do(ctx context.Context, op byte, keys []string, value []byte, delta int64) (storeReply, error) {
	name := storeOpNames[op]
	what := name
	if len(keys) == 1 {
		what = fmt.Sprintf("%s %q", name, keys[0])
	}
	fail := func(err error) (storeReply, error) {
		return storeReply{}, errorf("parallel: store %s: %s: %w", s.addr, what, err)
	}
	switch {
	case len(keys) == 0:
		return fail(errors.New("no key given"))
	case len(keys) > MaxStoreWaitKeys:
		return fail(errorf("%d keys (at most %d)", len(keys), MaxStoreWaitKeys))
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return fail(err)
		}
	}
	start := time.Now()
	deadline := start.Add(s.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	wait := time.Until(deadline)
	if wait < 0 {
		wait = 0
	}
	c, err := s.get(ctx)
	if err != nil {
		return fail(err)
	}
	// A cancelled ctx ends the request at once. When its deadline passes,
	// the server, asked to wait until then, answers with the keys still
	// missing: the connection's own deadline leaves time for that answer.
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			c.SetDeadline(time.Now())
		}
	})
	defer stop()
	c.SetDeadline(deadline.Add(storeReplySlack))

	w := bufio.NewWriter(c)
	var hdr [7]byte
	hdr[0] = op
	binary.LittleEndian.PutUint32(hdr[1:5], uint32(min(wait, maxStoreWait)/time.Millisecond))
	binary.LittleEndian.PutUint16(hdr[5:7], uint16(len(keys)))
	w.Write(hdr[:])
	for _, k := range keys {
		writeString16(w, k)
	}
	switch op {
	case opSet:
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(len(value)))
		w.Write(b[:])
		w.Write(value)
	case opAdd:
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(delta))
		w.Write(b[:])
	}
	var (
		reply   storeReply
		refused error // the server's answer when it refused or timed out
	)
	err = w.Flush()
	if err == nil {
		reply, refused, err = s.readReply(bufio.NewReader(c), op, what, start)
	}
	if err != nil {
		closed := s.drop(c)
		var ne net.Error
		switch {
		case closed:
			return fail(errStoreClosed)
		case errors.Is(ctx.Err(), context.Canceled):
			return fail(ctx.Err())
		case errors.As(err, &ne) && ne.Timeout():
			return storeReply{}, &StoreTimeoutError{Addr: s.addr, Op: what, After: time.Since(start).Round(time.Millisecond)}
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
			return fail(errorf("the server closed the connection (did the process serving the store, rank 0 or vram run, exit?): %w", err))
		}
		return fail(err)
	}
	c.SetDeadline(time.Time{})
	s.put(c)
	if refused != nil {
		if _, ok := refused.(*StoreTimeoutError); ok {
			return storeReply{}, refused
		}
		return fail(refused)
	}
	return reply, nil
}

// readReply decodes the reply to op, sent at start: the result, or the
// server's refusal (an error message or a timeout), or an error of the
// connection or of a reply over the limits.
func (s *Store) readReply(r *bufio.Reader, op byte, what string, start time.Time) (out storeReply, refused, err error) {
	st, err := r.ReadByte()
	if err != nil {
		return out, nil, err
	}
	switch st {
	case statusOK:
	case statusError:
		msg, err := readString16(r, 0xffff)
		if err != nil {
			return out, nil, err
		}
		return out, errors.New(msg), nil
	case statusTimeout:
		var b [6]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return out, nil, err
		}
		e := &StoreTimeoutError{Addr: s.addr, Op: what, NumMissing: int(binary.LittleEndian.Uint32(b[:4])), After: time.Since(start).Round(time.Millisecond)}
		n := int(binary.LittleEndian.Uint16(b[4:]))
		if n > maxListedMissing {
			return out, nil, errorf("malformed reply: %d keys listed", n)
		}
		for range n {
			k, err := readString16(r, MaxStoreKeyBytes)
			if err != nil {
				return out, nil, err
			}
			e.Missing = append(e.Missing, k)
		}
		return out, e, nil
	default:
		return out, nil, errorf("malformed reply (status %d)", st)
	}
	switch op {
	case opGet:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return out, nil, err
		}
		n := binary.LittleEndian.Uint32(b[:])
		if n > MaxStoreValueBytes {
			return out, nil, errorf("malformed reply: value of %d bytes", n)
		}
		out.value, err = readBytes(r, int(n))
	case opAdd:
		var b [8]byte
		_, err = io.ReadFull(r, b[:])
		out.counter = int64(binary.LittleEndian.Uint64(b[:]))
	case opCheck:
		var v byte
		v, err = r.ReadByte()
		out.ok = v == 1
	}
	return out, nil, err
}
