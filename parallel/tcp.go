package parallel

// The TCP collectives connect every pair of ranks once (a full mesh, set up
// through the store) and run each collective through rank 0, the hub:
// every other rank sends it a header and its part, rank 0 checks that the
// headers agree, reduces in rank order and sends each rank its result.
// Send and Recv go straight between the two ranks. This is simple and
// gives the same bits on every rank; it is not fast, and is meant for
// tests and CPU jobs (GPUs use NCCL).
//
// Failure is the design's main concern. Each connection has a reader
// goroutine that sees a peer die (its connection closes without a
// goodbye) or say it failed (an abort frame) while this rank waits for
// some other rank, so that every rank learns at once which rank failed.
// A rank that does not arrive is reported by whoever waits for it: rank 0
// for the others, the others for rank 0 a little later (timeoutGrace).
// The first failure aborts the communicator for good: it is sent to every
// peer as an abort frame that names the failed rank, and every later call
// returns it.
//
// Ranks meet with a hello (magic, the group's token from the store, world
// size, rank) answered by an ack (magic, rank). A hello refused is
// answered too, the rank replaced by the reason (another world size,
// token or version, a rank not waited for or claimed already), so that
// the refused rank can say why.
//
// Frames have a fixed 32-byte header:
//
//	kind u8 | op u8 | dtype u8 | reduce u8 | root i32 | seq u64 | elems u64 | bytes u64
//
// followed by bytes of payload (tensor elements; the text of an abort).
// A receiver reads a payload only after checking that its length is the
// one its own call expects, so a peer cannot make it allocate more.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vramgo/vram"
)

// DefaultTimeout is how long a collective waits for the other ranks when
// the options give no timeout: five minutes, which is far more than any
// healthy collective takes and short enough that a stuck job fails the
// same hour.
const DefaultTimeout = 5 * time.Minute

// TCPOptions configures a TCP communicator. The zero value works.
type TCPOptions struct {
	// Timeout is how long a collective, Send or Recv waits for the other
	// ranks before it fails with an error naming the one that did not
	// arrive. 0 means DefaultTimeout.
	Timeout time.Duration
	// InitTimeout is how long NewTCPRank waits for every rank to join.
	// 0 means Timeout.
	InitTimeout time.Duration
	// Prefix is the prefix of the store keys this group uses, so that
	// several groups can meet through one store; every rank of a group
	// gives the same. "" means "tcp".
	Prefix string
}

// Frame kinds.
const (
	frameData byte = iota + 1
	frameAbort
	frameBye
)

// Collectives on the wire.
const (
	collAllReduce byte = iota + 1
	collBroadcast
	collReduce
	collAllGather
	collReduceScatter
	collBarrier
	collSend
)

var collNames = [...]string{
	collAllReduce: "all_reduce", collBroadcast: "broadcast", collReduce: "reduce",
	collAllGather: "all_gather", collReduceScatter: "reduce_scatter", collBarrier: "barrier", collSend: "send",
}

func collName(op byte) string {
	if int(op) < len(collNames) && collNames[op] != "" {
		return collNames[op]
	}
	return fmt.Sprintf("op %d", op)
}

// Causes of an abort frame.
const (
	causeAborted byte = iota + 1
	causeTimeout
	causeMismatch
)

const (
	tcpMagic       = "VRAMTCP1"
	frameHeaderLen = 32
	helloLen       = 8 + 16 + 4 + 4 // magic, token, size, rank
	ackLen         = 8 + 4          // magic, rank
	// A refused hello is answered with ackRefused, a reason and a value
	// in place of the rank: the world size (refuseSize) or rank
	// (refuseRank) of the rank that refused it.
	ackRefused      = 1 << 31
	refuseSize      = 1 << 24
	refuseGroup     = 2 << 24
	refuseRank      = 3 << 24
	refuseDuplicate = 4 << 24
	refuseValue     = 1<<24 - 1
	maxAbortText    = 4096
	// helloTimeout bounds the hello of one connection, so that a stray
	// client cannot hold up the rendezvous.
	helloTimeout = 5 * time.Second
	// linger is how long a failed or closing rank keeps reading a
	// connection after saying goodbye, so that its last frame reaches the
	// peer before the connection closes (closing with unread data resets
	// it, and the peer could lose that frame).
	linger = 2 * time.Second
	// abortTextWait is how long the text of an abort frame may take to
	// follow its header.
	abortTextWait = 250 * time.Millisecond
)

// maxTimeoutGrace bounds the part of timeoutGrace that grows with the
// timeout. The default timeout's is 75 s, below it; a rank that starts a
// collective (or a join) more than five minutes after the others is stuck
// rather than slow, and a timeout meant as "never" would otherwise keep
// rank 0 of a failed join asleep for years.
const maxTimeoutGrace = 5 * time.Minute

// timeoutGrace is how much longer a rank waits for rank 0's answer than
// rank 0 waits for the other ranks, so that rank 0 can name the rank that
// did not arrive before the others give up on rank 0 itself.
func timeoutGrace(d time.Duration) time.Duration {
	return min(d/4, maxTimeoutGrace) + 250*time.Millisecond
}

// graced returns d plus its grace, or the longest Duration when the sum
// overflows (the longest timeout, a caller's "never").
func graced(d time.Duration) time.Duration {
	g := timeoutGrace(d)
	if d > math.MaxInt64-g {
		return math.MaxInt64
	}
	return d + g
}

// header is a frame header.
type header struct {
	kind   byte
	op     byte
	dtype  vram.DType
	reduce ReduceOp
	root   int32
	seq    uint64
	elems  uint64
	bytes  uint64
}

func (h header) encode() []byte {
	b := make([]byte, frameHeaderLen)
	b[0], b[1], b[2], b[3] = h.kind, h.op, byte(h.dtype), byte(h.reduce)
	binary.LittleEndian.PutUint32(b[4:], uint32(h.root))
	binary.LittleEndian.PutUint64(b[8:], h.seq)
	binary.LittleEndian.PutUint64(b[16:], h.elems)
	binary.LittleEndian.PutUint64(b[24:], h.bytes)
	return b
}

func decodeHeader(b []byte) header {
	return header{
		kind: b[0], op: b[1], dtype: vram.DType(b[2]), reduce: ReduceOp(b[3]),
		root:  int32(binary.LittleEndian.Uint32(b[4:])),
		seq:   binary.LittleEndian.Uint64(b[8:]),
		elems: binary.LittleEndian.Uint64(b[16:]),
		bytes: binary.LittleEndian.Uint64(b[24:]),
	}
}

// describe says what a data header asks for, for mismatch messages.
func (h header) describe() string {
	s := fmt.Sprintf("%s #%d", collName(h.op), h.seq)
	if h.op == collBarrier {
		return s
	}
	if int(h.dtype) < 32 {
		s += fmt.Sprintf(" of %d %s elements", h.elems, h.dtype)
	} else {
		s += fmt.Sprintf(" of %d elements of dtype %d", h.elems, h.dtype)
	}
	switch h.op {
	case collAllReduce, collReduce, collReduceScatter:
		s += fmt.Sprintf(" (%v)", h.reduce)
	}
	switch h.op {
	case collReduce, collBroadcast:
		s += fmt.Sprintf(" with root %d", h.root)
	}
	return s
}

// failure is the cause inside a [RankError] of the TCP collectives: a
// message and the sentinels it matches.
type failure struct {
	msg   string
	kinds []error
}

func (f *failure) Error() string   { return f.msg }
func (f *failure) Unwrap() []error { return f.kinds }

func failed(msg string, kinds ...error) *failure {
	return &failure{msg: msg, kinds: append([]error{ErrAborted}, kinds...)}
}

// peer is this rank's connection to another.
type peer struct {
	rank int
	conn net.Conn
	r    *bufio.Reader // read by the reader goroutine, and by the caller while it holds a header

	frames   chan header   // data headers from the reader goroutine
	consumed chan struct{} // the caller is done with the payload of the last header
	bye      chan struct{} // closed when the peer said goodbye
	done     chan struct{} // closed when the reader goroutine ends

	lost atomic.Bool // the connection ended without a goodbye

	wmu   sync.Mutex // guards writes to conn and dirty
	dirty bool       // a frame ended the stream (abort, bye), or a write broke off inside one
}

// tcpComm is a [Communicator] over TCP.
type tcpComm struct {
	rank, size int
	dev        vram.Device
	timeout    time.Duration
	peers      []*peer // by rank; nil for this rank

	seq     uint64   // collectives so far
	sendSeq []uint64 // sends to each peer so far
	recvSeq []uint64 // receives from each peer so far

	failOnce sync.Once
	failCh   chan struct{} // closed at the first failure
	err      *RankError    // the first failure; set before failCh closes
	closing  chan struct{} // closed by Close
	closed   bool

	busy atomic.Bool // a call is in progress, from begin to end
}

var _ Communicator = (*tcpComm)(nil)

// NewTCPRank joins rank of a group of size ranks whose tensors are on the
// CPU or sim devices, meeting the other ranks through store: each rank
// listens on a port of its own, publishes its address in the store, and
// connects to every other rank. It returns once all have joined, or a
// [*RankError] naming a rank that did not join within the options'
// InitTimeout. A group of one needs no store (store may be nil).
//
// The communicator is used by one goroutine at a time: a call while
// another goroutine has one in progress is refused with an error of kind
// vram.ErrArgument, the call in progress going on.
//
// These collectives move tensors through the host and rank 0, and are for
// tests and CPU jobs; CUDA tensors work too, through host copies, but GPUs
// should use NCCL ([InitProcessGroup] picks it).
func NewTCPRank(ctx context.Context, store *Store, rank, size int, dev vram.Device, opts TCPOptions) (Communicator, error) {
	switch {
	case size < 1:
		return nil, errorf("parallel: tcp: %d ranks: a group has at least one: %w", size, vram.ErrArgument)
	case rank < 0 || rank >= size:
		return nil, errorf("parallel: tcp: rank %d out of range for %d ranks: %w", rank, size, vram.ErrArgument)
	case size > 1 && store == nil:
		return nil, errorf("parallel: tcp: a group of %d ranks needs a store: %w", size, vram.ErrArgument)
	}
	if err := dev.Check(); err != nil {
		return nil, errorf("parallel: tcp: rank %d: %w", rank, err)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	initTimeout := opts.InitTimeout
	if initTimeout <= 0 {
		initTimeout = timeout
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = "tcp"
	}
	c := &tcpComm{
		rank: rank, size: size, dev: dev, timeout: timeout,
		peers:   make([]*peer, size),
		sendSeq: make([]uint64, size),
		recvSeq: make([]uint64, size),
		failCh:  make(chan struct{}),
		closing: make(chan struct{}),
	}
	if size == 1 {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(ctx, initTimeout)
	defer cancel()
	if err := c.connect(ctx, store, prefix, initTimeout); err != nil {
		for _, p := range c.peers {
			if p != nil {
				p.conn.Close()
			}
		}
		return nil, err
	}
	for _, p := range c.peers {
		if p != nil {
			go c.read(p)
		}
	}
	return c, nil
}

// connect sets up the mesh: rank r accepts the connections of the ranks
// above it and dials those below.
func (c *tcpComm) connect(ctx context.Context, store *Store, prefix string, initTimeout time.Duration) error {
	initErr := func(rank int, f *failure) error { return &RankError{Op: "init", Rank: rank, Err: f} }
	host := ""
	if ip := store.LocalIP(); ip != nil {
		host = ip.String()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return errorf("parallel: tcp: rank %d: listen: %w", c.rank, err)
	}
	defer ln.Close()

	var token [16]byte
	tokenKey := prefix + "/token"
	if c.rank == 0 {
		rand.Read(token[:])
		if err := store.Set(ctx, tokenKey, token[:]); err != nil {
			return errorf("parallel: tcp: rank 0: %w", err)
		}
	}
	addrKey := func(r int) string { return prefix + "/addr/" + strconv.Itoa(r) }
	if err := store.Set(ctx, addrKey(c.rank), []byte(ln.Addr().String())); err != nil {
		return errorf("parallel: tcp: rank %d: %w", c.rank, err)
	}
	keys := make([]string, c.size)
	for r := range keys {
		keys[r] = addrKey(r)
	}
	if err := waitKeys(ctx, store, keys); err != nil {
		var te *StoreTimeoutError
		if errors.As(err, &te) && len(te.Missing) > 0 {
			var missing []string
			first := -1
			for _, k := range te.Missing {
				if r, err := strconv.Atoi(strings.TrimPrefix(k, prefix+"/addr/")); err == nil {
					missing = append(missing, strconv.Itoa(r))
					if first < 0 {
						first = r
					}
				}
			}
			return initErr(first, failed(fmt.Sprintf("%s of %d did not join within %v (ranks missing: %s)",
				plural(te.NumMissing, "rank"), c.size, initTimeout, strings.Join(missing, ", ")), ErrTimeout))
		}
		return errorf("parallel: tcp: rank %d: waiting for the other ranks: %w", c.rank, err)
	}
	if c.rank != 0 {
		b, err := store.Get(ctx, tokenKey)
		if err != nil {
			return errorf("parallel: tcp: rank %d: %w", c.rank, err)
		}
		if len(b) != len(token) {
			return errorf("parallel: tcp: rank %d: the store's %q holds %d bytes, not a token of 16", c.rank, tokenKey, len(b))
		}
		copy(token[:], b)
	}
	addrs := make([]string, c.size)
	for r := range c.rank {
		b, err := store.Get(ctx, addrKey(r))
		if err != nil {
			return errorf("parallel: tcp: rank %d: %w", c.rank, err)
		}
		addrs[r] = string(b)
	}

	// Accept the ranks above this one while dialing those below.
	type accepted struct {
		rank int
		conn net.Conn
	}
	acc := make(chan accepted)
	stop := make(chan struct{})
	defer close(stop)
	// Connections still saying hello when connect returns are closed then,
	// so that a stranger's goroutine does not outlive the rendezvous.
	// A rank's first hello claims it; a second is refused as a duplicate.
	var (
		helloMu sync.Mutex
		inHello = map[net.Conn]struct{}{}
		ended   bool
		claimed = map[int]bool{}
	)
	claim := func(r int) bool {
		helloMu.Lock()
		defer helloMu.Unlock()
		if claimed[r] {
			return false
		}
		claimed[r] = true
		return true
	}
	defer func() {
		helloMu.Lock()
		defer helloMu.Unlock()
		ended = true
		for conn := range inHello {
			conn.Close()
		}
	}()
	if c.rank < c.size-1 {
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				helloMu.Lock()
				if ended {
					helloMu.Unlock()
					conn.Close()
					continue
				}
				inHello[conn] = struct{}{}
				helloMu.Unlock()
				go func() {
					r, err := c.acceptHello(conn, token, claim)
					helloMu.Lock()
					delete(inHello, conn)
					helloMu.Unlock()
					if err != nil {
						conn.Close()
						return
					}
					select {
					case acc <- accepted{r, conn}:
					case <-stop:
						conn.Close()
					}
				}()
			}
		}()
	}
	for r := range c.rank {
		conn, err := c.dialHello(ctx, addrs[r], r, token)
		var refused *failure
		if errors.As(err, &refused) {
			return initErr(r, refused)
		}
		if err != nil {
			if ctx.Err() != nil {
				return initErr(r, failed(fmt.Sprintf("did not answer at %s within %v", addrs[r], initTimeout), ErrTimeout))
			}
			return initErr(r, failed(fmt.Sprintf("cannot connect to it at %s: %v", addrs[r], err)))
		}
		c.peers[r] = newPeer(r, conn)
	}
	for n := c.size - 1 - c.rank; n > 0; n-- {
		select {
		case a := <-acc:
			c.peers[a.rank] = newPeer(a.rank, a.conn)
		case <-ctx.Done():
			for r := c.rank + 1; r < c.size; r++ {
				if c.peers[r] == nil {
					return initErr(r, failed(fmt.Sprintf("did not connect to rank %d within %v", c.rank, initTimeout), ErrTimeout))
				}
			}
		}
	}
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func newPeer(rank int, conn net.Conn) *peer {
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	return &peer{
		rank: rank, conn: conn, r: bufio.NewReaderSize(conn, 64<<10),
		frames:   make(chan header),
		consumed: make(chan struct{}),
		bye:      make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// acceptHello reads the hello of a rank above this one and answers it,
// refusing a rank that claim says has said hello already.
func (c *tcpComm) acceptHello(conn net.Conn, token [16]byte, claim func(rank int) bool) (int, error) {
	conn.SetDeadline(time.Now().Add(helloTimeout))
	var b [helloLen]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return 0, err
	}
	size := int(binary.LittleEndian.Uint32(b[24:]))
	r := int(binary.LittleEndian.Uint32(b[28:]))
	// A hello refused is answered too, so that the other side can say why.
	var refuse uint32
	switch {
	case string(b[:8]) != tcpMagic:
		refuse = ackRefused // another version: the magic tells it which
	case [16]byte(b[8:24]) != token:
		refuse = ackRefused | refuseGroup
	case size != c.size:
		refuse = ackRefused | refuseSize | uint32(min(c.size, refuseValue))
	case r <= c.rank || r >= c.size:
		refuse = ackRefused | refuseRank | uint32(min(c.rank, refuseValue))
	case !claim(r):
		refuse = ackRefused | refuseDuplicate | uint32(min(c.rank, refuseValue))
	}
	ack := make([]byte, ackLen)
	copy(ack, tcpMagic)
	binary.LittleEndian.PutUint32(ack[8:], uint32(c.rank))
	if refuse != 0 {
		binary.LittleEndian.PutUint32(ack[8:], refuse)
		conn.Write(ack)
		return 0, errors.New("not a rank of this group")
	}
	if _, err := conn.Write(ack); err != nil {
		return 0, err
	}
	conn.SetDeadline(time.Time{})
	return r, nil
}

// dialHello connects to rank r at addr and says hello.
func (c *tcpComm) dialHello(ctx context.Context, addr string, r int, token [16]byte) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	dl := time.Now().Add(helloTimeout)
	if t, ok := ctx.Deadline(); ok && t.Before(dl) {
		dl = t
	}
	conn.SetDeadline(dl)
	hello := make([]byte, helloLen)
	copy(hello, tcpMagic)
	copy(hello[8:], token[:])
	binary.LittleEndian.PutUint32(hello[24:], uint32(c.size))
	binary.LittleEndian.PutUint32(hello[28:], uint32(c.rank))
	var ack [ackLen]byte
	if _, err = conn.Write(hello); err == nil {
		_, err = io.ReadFull(conn, ack[:])
	}
	if err == nil {
		v := binary.LittleEndian.Uint32(ack[8:])
		switch {
		case string(ack[:8]) != tcpMagic:
			err = failed(fmt.Sprintf("%s answered as no vram TCP peer of this version does (%q, not %q)", addr, ack[:8], tcpMagic))
		case v&ackRefused == 0 && int(v) != r:
			err = errorf("%s is not rank %d of this group", addr, r)
		case v&ackRefused == 0:
		case v&^(ackRefused|refuseValue) == refuseSize:
			err = failed(fmt.Sprintf("was started with a world size of %d, rank %d with %d: every rank of a group needs the same",
				v&refuseValue, c.rank, c.size), ErrMismatch)
		case v&^(ackRefused|refuseValue) == refuseGroup:
			err = failed(fmt.Sprintf("at %s belongs to another group than the store's token says (another job or an earlier group using the same store keys)", addr))
		case v&^(ackRefused|refuseValue) == refuseDuplicate:
			err = failed(fmt.Sprintf("at %s has a rank %d already: two processes were started with RANK=%d", addr, c.rank, c.rank), vram.ErrArgument)
		case v&^(ackRefused|refuseValue) == refuseRank:
			err = failed(fmt.Sprintf("at %s is rank %d, which waits for the ranks above it and not for rank %d (two processes with one rank?)",
				addr, v&refuseValue, c.rank))
		default:
			err = failed(fmt.Sprintf("at %s refused rank %d as another version of vram would", addr, c.rank))
		}
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// read is a peer's reader goroutine: it hands data headers to the caller,
// waiting while the caller reads their payloads, and turns a peer's abort
// frame or lost connection into the communicator's failure.
func (c *tcpComm) read(p *peer) {
	defer close(p.done)
	defer p.conn.Close()
	hb := make([]byte, frameHeaderLen)
	for {
		if _, err := io.ReadFull(p.r, hb); err != nil {
			c.lost(p, err)
			return
		}
		h := decodeHeader(hb)
		switch h.kind {
		case frameData:
			select {
			case p.frames <- h:
				<-p.consumed // the caller always answers once it has the header
				select {
				case <-c.failCh:
				default:
					continue
				}
			case <-c.failCh:
			case <-c.closing:
			}
		case frameBye:
			close(p.bye)
		case frameAbort:
			c.remoteAbort(p, h)
		default:
			c.fail(&RankError{Rank: p.rank, Err: failed(fmt.Sprintf("sent a frame of unknown kind %d (not a vram TCP peer, or another version)", h.kind))})
		}
		c.drain(p)
		return
	}
}

// lost records that p's connection ended, unless this rank is already
// closing or failed.
func (c *tcpComm) lost(p *peer, err error) {
	select {
	case <-c.failCh:
		return
	case <-c.closing:
		return
	case <-p.bye:
		return
	default:
	}
	p.lost.Store(true)
	msg := "its connection closed without a goodbye: the process exited, crashed or was killed"
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		msg = fmt.Sprintf("its connection failed (%v): the process or its host may have died", err)
	}
	c.fail(&RankError{Rank: p.rank, Err: failed(msg)})
}

// remoteAbort turns a peer's abort frame into this rank's failure.
func (c *tcpComm) remoteAbort(p *peer, h header) {
	// The text leaves with its header, in one write: what has not come
	// soon is not coming (a peer may announce more than it sends), and the
	// header alone says who failed and why.
	text := make([]byte, min(h.bytes, maxAbortText))
	p.conn.SetReadDeadline(time.Now().Add(abortTextWait))
	n, _ := io.ReadFull(p.r, text)
	msg := string(text[:n])
	culprit := int(h.root)
	if culprit < 0 || culprit >= c.size {
		culprit = -1
	}
	var kinds []error
	switch h.op {
	case causeTimeout:
		kinds = []error{ErrTimeout}
	case causeMismatch:
		kinds = []error{ErrMismatch}
	}
	if culprit != p.rank {
		msg += fmt.Sprintf(" (reported by rank %d)", p.rank)
	}
	c.fail(&RankError{Rank: culprit, Err: failed(msg, kinds...)})
}

// drain reads and drops what p still sends, for a while, once this rank
// has failed or is closing or p said goodbye, so that p gets this rank's
// last frame and the connection closes cleanly.
func (c *tcpComm) drain(p *peer) {
	p.conn.SetReadDeadline(time.Now().Add(linger))
	io.Copy(io.Discard, p.r)
}

// fail records the first failure, tells every peer whose connection
// still works (an abort frame naming the failed rank, written before fail
// returns, so that it leaves even when this process exits next) and ends
// this rank's part of every connection. Later calls do nothing.
func (c *tcpComm) fail(e *RankError) {
	c.failOnce.Do(func() {
		c.err = e
		close(c.failCh)
		cause := causeAborted
		switch {
		case errors.Is(e.Err, ErrTimeout):
			cause = causeTimeout
		case errors.Is(e.Err, ErrMismatch):
			cause = causeMismatch
		}
		text := unprefixed(e.Err)
		if len(text) > maxAbortText {
			text = text[:maxAbortText]
		}
		var wg sync.WaitGroup
		for _, p := range c.peers {
			if p == nil {
				continue
			}
			if p.lost.Load() {
				p.conn.SetDeadline(time.Now()) // unblock any read or write of it
				continue
			}
			p.conn.SetWriteDeadline(time.Now()) // break off a write in progress
			wg.Go(func() {
				p.wmu.Lock()
				defer p.wmu.Unlock()
				if !p.dirty {
					h := header{kind: frameAbort, op: cause, root: int32(e.Rank), bytes: uint64(len(text))}
					p.conn.SetWriteDeadline(time.Now().Add(linger))
					(&net.Buffers{h.encode(), []byte(text)}).WriteTo(p.conn)
					p.dirty = true
				}
				if tc, ok := p.conn.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
			})
		}
		wg.Wait()
	})
}

// errFor returns the communicator's failure as the error of op.
func (c *tcpComm) errFor(op string) error {
	return &RankError{Op: op, Rank: c.err.Rank, Err: c.err.Err}
}

// Rank returns this rank's number.
func (c *tcpComm) Rank() int { return c.rank }

// Size returns the number of ranks.
func (c *tcpComm) Size() int { return c.size }

// Device returns the device of this rank's tensors.
func (c *tcpComm) Device() vram.Device { return c.dev }

// Abort ends the communicator: the calls in progress and later ones
// return an error wrapping ErrAborted and err, and every peer is told, so
// that their calls fail too with an error naming this rank. Abort may be
// called from any goroutine.
func (c *tcpComm) Abort(err error) {
	if err == nil {
		err = errors.New("aborted")
	}
	c.fail(&RankError{Op: "abort", Rank: c.rank, Err: &failure{msg: "aborted: " + unprefixed(err), kinds: []error{ErrAborted, err}}})
}

// Close says goodbye to every peer and closes the connections, waiting a
// little for the peers to close theirs. Calls after Close fail.
func (c *tcpComm) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	close(c.closing)
	select {
	case <-c.failCh:
	default:
		c.sayGoodbye()
	}
	timer := time.NewTimer(linger)
	defer timer.Stop()
	for _, p := range c.peers {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		case <-timer.C:
			p.conn.Close()
			<-p.done
		}
	}
	return nil
}

// sayGoodbye sends every peer a goodbye and ends this rank's part of the
// connections.
func (c *tcpComm) sayGoodbye() {
	for _, p := range c.peers {
		if p == nil {
			continue
		}
		p.wmu.Lock()
		if !p.dirty {
			p.conn.SetWriteDeadline(time.Now().Add(linger))
			p.conn.Write(header{kind: frameBye}.encode())
			p.dirty = true
		}
		if tc, ok := p.conn.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		p.wmu.Unlock()
	}
}

// begin checks that the communicator can run op and marks it busy until
// end, which a call that begins must defer. A call while another goroutine
// has one in progress is refused, leaving that one alone: the two would
// read each other's frames from the rank's connections.
func (c *tcpComm) begin(op string) error {
	if !c.busy.CompareAndSwap(false, true) {
		return &RankError{Op: op, Rank: c.rank, Err: errorf("rank %d is in a call already, on another goroutine; "+
			"a Communicator is one rank's and is used by one goroutine at a time: %w", c.rank, vram.ErrArgument)}
	}
	if c.closed {
		c.end()
		return &RankError{Op: op, Rank: c.rank, Err: failed("the communicator is closed")}
	}
	select {
	case <-c.failCh:
		c.end()
		return c.errFor(op)
	default:
		return nil
	}
}

// end ends the call that begin began.
func (c *tcpComm) end() { c.busy.Store(false) }

// send writes one frame to p.
func (c *tcpComm) send(op string, p *peer, h header, payload []byte, deadline time.Time) error {
	h.bytes = uint64(len(payload))
	p.wmu.Lock()
	if p.dirty {
		p.wmu.Unlock()
		return c.ioErr(op, p, errors.New("connection ended"), deadline)
	}
	p.conn.SetWriteDeadline(deadline)
	// fail breaks off writes by moving the deadline: look again after
	// setting it, so that a failure in between is not missed.
	select {
	case <-c.failCh:
		p.wmu.Unlock()
		return c.errFor(op)
	default:
	}
	_, err := (&net.Buffers{h.encode(), payload}).WriteTo(p.conn)
	if err != nil {
		p.dirty = true
	}
	p.wmu.Unlock()
	if err != nil {
		return c.ioErr(op, p, err, deadline)
	}
	return nil
}

// ioErr turns an error reading from or writing to p into the
// communicator's failure.
func (c *tcpComm) ioErr(op string, p *peer, err error, deadline time.Time) error {
	select {
	case <-c.failCh:
		return c.errFor(op)
	default:
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout() && !time.Now().Before(deadline):
		c.fail(&RankError{Op: op, Rank: p.rank, Err: failed(fmt.Sprintf("did not take part in %s within %v", op, c.timeout), ErrTimeout)})
	default:
		c.fail(&RankError{Op: op, Rank: p.rank, Err: failed(fmt.Sprintf("its connection failed during %s: %v", op, err))})
	}
	return c.errFor(op)
}

// expect waits for p's next data header and checks it against want (its
// kind, op, seq, dtype, elements, reduction and root) and the payload
// length this rank expects. On success the caller reads the payload with
// readPayload or skips it, and must then call p.release.
func (c *tcpComm) expect(op string, p *peer, want header, payload int, deadline time.Time, waitMsg string) (header, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var h header
	select {
	case h = <-p.frames:
	case <-c.failCh:
		return h, c.errFor(op)
	case <-p.bye:
		c.fail(&RankError{Op: op, Rank: p.rank, Err: failed(fmt.Sprintf("closed its communicator while rank %d waited for it in %s", c.rank, op))})
		return h, c.errFor(op)
	case <-timer.C:
		c.fail(&RankError{Op: op, Rank: p.rank, Err: failed(waitMsg, ErrTimeout)})
		return h, c.errFor(op)
	}
	if h.op != want.op || h.seq != want.seq || h.dtype != want.dtype || h.elems != want.elems ||
		h.reduce != want.reduce || h.root != want.root || h.bytes != uint64(payload) {
		c.fail(&RankError{Op: op, Rank: p.rank, Err: failed(fmt.Sprintf("rank %d called %s while rank %d called %s",
			p.rank, h.describe(), c.rank, want.describe()), ErrMismatch)})
		p.release() // after fail: the reader then drops the payload
		return h, c.errFor(op)
	}
	return h, nil
}

// release lets p's reader goroutine go on after its header was handled.
func (p *peer) release() { p.consumed <- struct{}{} }

// readPayload reads the payload of the header just expected into b and
// releases the reader.
func (c *tcpComm) readPayload(op string, p *peer, b []byte, deadline time.Time) error {
	defer p.release()
	p.conn.SetReadDeadline(deadline)
	_, err := io.ReadFull(p.r, b)
	p.conn.SetReadDeadline(time.Time{})
	if err != nil {
		return c.ioErr(op, p, err, deadline)
	}
	return nil
}

// tensorArg checks a tensor argument of a collective (see checkTensor).
func (c *tcpComm) tensorArg(op, name string, t *vram.Tensor, written bool) error {
	return checkTensor(op, name, t, c.dev, written)
}

// rawBytes reads t's elements, turning vram's panics into errors.
func rawBytes(op string, t *vram.Tensor) (b []byte, err error) {
	err = vram.Catch(func() { b = t.RawBytes() })
	if err != nil {
		err = errorf("parallel: %s: %w", op, err)
	}
	return b, err
}

// setRawBytes writes t's elements, turning vram's panics into errors.
// It writes outside autograd, as the other communicators do, so that a
// tensor that requires grad (a parameter) takes the result as it does
// there, rather than failing once the other ranks have theirs.
func setRawBytes(op string, t *vram.Tensor, b []byte) error {
	if err := vram.Catch(func() { vram.NoGrad(func() { t.SetRawBytes(b) }) }); err != nil {
		return errorf("parallel: %s: %w", op, err)
	}
	return nil
}

// collective is one call of a collective on this rank.
type collective struct {
	code  byte
	name  string
	dtype vram.DType
	op    ReduceOp
	root  int
	elems int // elements of one rank's part
	unit  int // bytes of one rank's part
	in    []byte
	// toHub and fromHub are the payload lengths rank r sends to rank 0 and
	// gets back.
	toHub, fromHub func(r int) int
}

// AllReduce replaces t on every rank by the reduction of all ranks' t.
func (c *tcpComm) AllReduce(t *vram.Tensor, op ReduceOp) error {
	const name = "all_reduce"
	if err := c.begin(name); err != nil {
		return err
	}
	defer c.end()
	if err := c.tensorArg(name, "", t, true); err != nil {
		return err
	}
	if err := checkReduce(t.DType(), op); err != nil {
		return errorf("parallel: %s: %w", name, err)
	}
	if c.size == 1 {
		return nil
	}
	in, err := rawBytes(name, t)
	if err != nil {
		return err
	}
	n := len(in)
	k := &collective{code: collAllReduce, name: name, dtype: t.DType(), op: op, elems: t.NumElements(), unit: n, in: in,
		toHub: func(int) int { return n }, fromHub: func(int) int { return n }}
	out, err := c.run(k, func(parts func(yield func(r int, b []byte) bool) error) ([][]byte, error) {
		acc := newAccumulator(k.dtype, op, in)
		if err := parts(func(_ int, b []byte) bool { acc.add(b); return true }); err != nil {
			return nil, err
		}
		res := acc.result(c.size)
		return c.same(res), nil
	})
	if err != nil {
		return err
	}
	return setRawBytes(name, t, out)
}

// Broadcast replaces t on every rank by root's t.
func (c *tcpComm) Broadcast(t *vram.Tensor, root int) error {
	const name = "broadcast"
	if err := c.begin(name); err != nil {
		return err
	}
	defer c.end()
	if err := c.tensorArg(name, "", t, c.rank != root); err != nil {
		return err
	}
	if err := checkRank(name, "root", root, c.size); err != nil {
		return err
	}
	if c.size == 1 {
		return nil
	}
	var in []byte
	if c.rank == root {
		var err error
		if in, err = rawBytes(name, t); err != nil {
			return err
		}
	}
	n := int(t.Bytes())
	k := &collective{code: collBroadcast, name: name, dtype: t.DType(), root: root, elems: t.NumElements(), unit: n, in: in,
		toHub:   func(r int) int { return cond(r == root, n, 0) },
		fromHub: func(r int) int { return cond(r == root, 0, n) }}
	out, err := c.run(k, func(parts func(yield func(r int, b []byte) bool) error) ([][]byte, error) {
		data := in
		if err := parts(func(r int, b []byte) bool {
			if r == root {
				data = slices.Clone(b)
			}
			return true
		}); err != nil {
			return nil, err
		}
		res := make([][]byte, c.size)
		for r := range res {
			if r != root {
				res[r] = data
			}
		}
		return res, nil
	})
	if err != nil || c.rank == root {
		return err
	}
	return setRawBytes(name, t, out)
}

// Reduce replaces t on root by the reduction of all ranks' t.
func (c *tcpComm) Reduce(t *vram.Tensor, op ReduceOp, root int) error {
	const name = "reduce"
	if err := c.begin(name); err != nil {
		return err
	}
	defer c.end()
	if err := c.tensorArg(name, "", t, c.rank == root); err != nil {
		return err
	}
	if err := checkRank(name, "root", root, c.size); err != nil {
		return err
	}
	if err := checkReduce(t.DType(), op); err != nil {
		return errorf("parallel: %s: %w", name, err)
	}
	if c.size == 1 {
		return nil
	}
	in, err := rawBytes(name, t)
	if err != nil {
		return err
	}
	n := len(in)
	k := &collective{code: collReduce, name: name, dtype: t.DType(), op: op, root: root, elems: t.NumElements(), unit: n, in: in,
		toHub:   func(int) int { return n },
		fromHub: func(r int) int { return cond(r == root, n, 0) }}
	out, err := c.run(k, func(parts func(yield func(r int, b []byte) bool) error) ([][]byte, error) {
		acc := newAccumulator(k.dtype, op, in)
		if err := parts(func(_ int, b []byte) bool { acc.add(b); return true }); err != nil {
			return nil, err
		}
		res := make([][]byte, c.size)
		res[root] = acc.result(c.size)
		return res, nil
	})
	if err != nil || c.rank != root {
		return err
	}
	return setRawBytes(name, t, out)
}

// AllGather sets dst on every rank to the ranks' src in rank order.
func (c *tcpComm) AllGather(dst, src *vram.Tensor) error {
	const name = "all_gather"
	if err := c.begin(name); err != nil {
		return err
	}
	defer c.end()
	if err := c.tensorArg(name, "destination", dst, true); err != nil {
		return err
	}
	if err := c.tensorArg(name, "source", src, false); err != nil {
		return err
	}
	if err := checkParts(name, "destination", dst, "source", src, c.size); err != nil {
		return err
	}
	in, err := rawBytes(name, src)
	if err != nil {
		return err
	}
	if c.size == 1 {
		return setRawBytes(name, dst, in)
	}
	n := len(in)
	k := &collective{code: collAllGather, name: name, dtype: src.DType(), elems: src.NumElements(), unit: n, in: in,
		toHub: func(int) int { return n }, fromHub: func(int) int { return n * c.size }}
	out, err := c.run(k, func(parts func(yield func(r int, b []byte) bool) error) ([][]byte, error) {
		all := make([]byte, n*c.size)
		copy(all, in)
		if err := parts(func(r int, b []byte) bool { copy(all[r*n:], b); return true }); err != nil {
			return nil, err
		}
		return c.same(all), nil
	})
	if err != nil {
		return err
	}
	return setRawBytes(name, dst, out)
}

// ReduceScatter sets dst on rank r to part r of the reduction of the
// ranks' src.
func (c *tcpComm) ReduceScatter(dst, src *vram.Tensor, op ReduceOp) error {
	const name = "reduce_scatter"
	if err := c.begin(name); err != nil {
		return err
	}
	defer c.end()
	if err := c.tensorArg(name, "destination", dst, true); err != nil {
		return err
	}
	if err := c.tensorArg(name, "source", src, false); err != nil {
		return err
	}
	if err := checkParts(name, "source", src, "destination", dst, c.size); err != nil {
		return err
	}
	if err := checkReduce(src.DType(), op); err != nil {
		return errorf("parallel: %s: %w", name, err)
	}
	in, err := rawBytes(name, src)
	if err != nil {
		return err
	}
	if c.size == 1 {
		return setRawBytes(name, dst, in)
	}
	n := int(dst.Bytes())
	k := &collective{code: collReduceScatter, name: name, dtype: src.DType(), op: op, elems: dst.NumElements(), unit: n, in: in,
		toHub: func(int) int { return n * c.size }, fromHub: func(int) int { return n }}
	out, err := c.run(k, func(parts func(yield func(r int, b []byte) bool) error) ([][]byte, error) {
		acc := newAccumulator(k.dtype, op, in)
		if err := parts(func(_ int, b []byte) bool { acc.add(b); return true }); err != nil {
			return nil, err
		}
		all := acc.result(c.size)
		res := make([][]byte, c.size)
		for r := range res {
			res[r] = all[r*n : (r+1)*n]
		}
		return res, nil
	})
	if err != nil {
		return err
	}
	return setRawBytes(name, dst, out)
}

// Barrier returns once every rank has called it.
func (c *tcpComm) Barrier() error {
	const name = "barrier"
	if err := c.begin(name); err != nil {
		return err
	}
	defer c.end()
	if c.size == 1 {
		return nil
	}
	k := &collective{code: collBarrier, name: name, toHub: func(int) int { return 0 }, fromHub: func(int) int { return 0 }}
	_, err := c.run(k, func(parts func(yield func(r int, b []byte) bool) error) ([][]byte, error) {
		return make([][]byte, c.size), parts(func(int, []byte) bool { return true })
	})
	return err
}

// same returns b as every rank's result.
func (c *tcpComm) same(b []byte) [][]byte {
	res := make([][]byte, c.size)
	for r := range res {
		res[r] = b
	}
	return res
}

func cond(ok bool, a, b int) int {
	if ok {
		return a
	}
	return b
}

// run runs collective k: on rank 0, hub receives the other ranks' parts
// through its argument (in rank order) and returns each rank's result; on
// the others, the part goes to rank 0 and the result comes back. It
// returns this rank's result.
func (c *tcpComm) run(k *collective, hub func(parts func(yield func(r int, b []byte) bool) error) ([][]byte, error)) ([]byte, error) {
	c.seq++
	want := header{kind: frameData, op: k.code, dtype: k.dtype, reduce: k.op, root: int32(k.root), seq: c.seq, elems: uint64(k.elems)}
	start := time.Now()
	if c.rank != 0 {
		deadline := start.Add(c.timeout)
		h := want
		if err := c.send(k.name, c.peers[0], h, k.in[:k.toHub(c.rank)], deadline); err != nil {
			return nil, err
		}
		wait := graced(c.timeout)
		deadline = start.Add(wait)
		n := k.fromHub(c.rank)
		if _, err := c.expect(k.name, c.peers[0], want, n, deadline,
			fmt.Sprintf("did not answer %s #%d within %v", k.name, c.seq, wait.Round(time.Millisecond))); err != nil {
			return nil, err
		}
		out := make([]byte, n)
		if err := c.readPayload(k.name, c.peers[0], out, deadline); err != nil {
			return nil, err
		}
		return out, nil
	}
	deadline := start.Add(c.timeout)
	var buf []byte
	parts := func(yield func(r int, b []byte) bool) error {
		for r := 1; r < c.size; r++ {
			p := c.peers[r]
			n := k.toHub(r)
			if _, err := c.expect(k.name, p, want, n, deadline,
				fmt.Sprintf("did not reach %s #%d within %v", k.name, c.seq, c.timeout)); err != nil {
				return err
			}
			if cap(buf) < n {
				buf = make([]byte, n)
			}
			if err := c.readPayload(k.name, p, buf[:n], deadline); err != nil {
				return err
			}
			if !yield(r, buf[:n]) {
				break
			}
		}
		return nil
	}
	res, err := hub(parts)
	if err != nil {
		return nil, err
	}
	for r := 1; r < c.size; r++ {
		if err := c.send(k.name, c.peers[r], want, res[r], deadline); err != nil {
			return nil, err
		}
	}
	return res[0], nil
}

// Send sends t to rank peer.
func (c *tcpComm) Send(t *vram.Tensor, peer int) error {
	const name = "send"
	if err := c.begin(name); err != nil {
		return err
	}
	defer c.end()
	if err := c.tensorArg(name, "", t, false); err != nil {
		return err
	}
	if err := c.peerArg(name, peer); err != nil {
		return err
	}
	in, err := rawBytes(name, t)
	if err != nil {
		return err
	}
	c.sendSeq[peer]++
	h := header{kind: frameData, op: collSend, dtype: t.DType(), root: int32(c.rank), seq: c.sendSeq[peer], elems: uint64(t.NumElements())}
	return c.send(name, c.peers[peer], h, in, time.Now().Add(c.timeout))
}

// Recv receives into t what rank peer sends.
func (c *tcpComm) Recv(t *vram.Tensor, peer int) error {
	const name = "recv"
	if err := c.begin(name); err != nil {
		return err
	}
	defer c.end()
	if err := c.tensorArg(name, "", t, true); err != nil {
		return err
	}
	if err := c.peerArg(name, peer); err != nil {
		return err
	}
	c.recvSeq[peer]++
	want := header{kind: frameData, op: collSend, dtype: t.DType(), root: int32(peer), seq: c.recvSeq[peer], elems: uint64(t.NumElements())}
	n := int(t.Bytes())
	deadline := time.Now().Add(c.timeout)
	p := c.peers[peer]
	if _, err := c.expect(name, p, want, n, deadline,
		fmt.Sprintf("did not send to rank %d within %v (recv #%d)", c.rank, c.timeout, want.seq)); err != nil {
		return err
	}
	b := make([]byte, n)
	if err := c.readPayload(name, p, b, deadline); err != nil {
		return err
	}
	return setRawBytes(name, t, b)
}

// peerArg checks the peer of Send or Recv.
func (c *tcpComm) peerArg(op string, peer int) error {
	return checkPeer(op, peer, c.rank, c.size)
}
