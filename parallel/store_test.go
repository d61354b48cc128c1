package parallel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vramgo/vram"
)

// newTestStore serves a store on a free local port and returns the server
// and a client with the given timeout.
func newTestStore(t *testing.T, timeout time.Duration) (*StoreServer, *Store) {
	t.Helper()
	srv, err := ListenStore("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cl, err := DialStore(context.Background(), srv.Addr().String(), StoreOptions{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return srv, cl
}

func TestStoreSetGetAddWait(t *testing.T) {
	ctx := context.Background()
	srv, s := newTestStore(t, 2*time.Second)
	if err := s.Set(ctx, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(ctx, "a"); err != nil || string(v) != "1" {
		t.Fatalf("Get(a) = %q, %v", v, err)
	}
	if err := s.Set(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(ctx, "empty"); err != nil || len(v) != 0 {
		t.Fatalf("Get(empty) = %q, %v", v, err)
	}
	// A Get waits for a Set from another client.
	go func() {
		time.Sleep(50 * time.Millisecond)
		s.Set(ctx, "later", []byte("x"))
	}()
	if v, err := s.Get(ctx, "later"); err != nil || string(v) != "x" {
		t.Fatalf("Get(later) = %q, %v", v, err)
	}
	// Add is atomic across concurrent clients.
	var wg sync.WaitGroup
	seen := make([]int64, 20)
	for i := range seen {
		wg.Go(func() {
			v, err := s.Add(ctx, "n", 1)
			if err != nil {
				t.Error(err)
			}
			seen[i] = v
		})
	}
	wg.Wait()
	got := map[int64]bool{}
	for _, v := range seen {
		got[v] = true
	}
	for v := int64(1); v <= 20; v++ {
		if !got[v] {
			t.Errorf("no Add returned %d: %v", v, seen)
		}
	}
	if v, err := s.Get(ctx, "n"); err != nil || string(v) != "20" {
		t.Errorf("Get(n) = %q, %v", v, err)
	}
	if _, err := s.Add(ctx, "a", 1); err != nil {
		// "a" holds "1", a counter
		t.Errorf("Add to a numeric value: %v", err)
	}
	s.Set(ctx, "text", []byte("hello"))
	if _, err := s.Add(ctx, "text", 1); err == nil || !strings.Contains(err.Error(), "not a counter") {
		t.Errorf("Add to a text value: %v", err)
	}
	// A counter that would overflow int64 is refused and keeps its value.
	for _, tc := range []struct {
		start, delta int64
	}{
		{math.MaxInt64, 1},
		{math.MinInt64, -1},
		{math.MaxInt64 - 5, 10},
		{-10, math.MinInt64},
	} {
		s.Delete(ctx, "big")
		if _, err := s.Add(ctx, "big", tc.start); err != nil {
			t.Fatal(err)
		}
		if v, err := s.Add(ctx, "big", tc.delta); err == nil || !strings.Contains(err.Error(), "overflow") {
			t.Errorf("Add(%d) to %d = %d, %v, want an overflow error", tc.delta, tc.start, v, err)
		}
		if v, err := s.Add(ctx, "big", 0); err != nil || v != tc.start {
			t.Errorf("after a refused Add, the counter is %d, %v, want %d", v, err, tc.start)
		}
	}
	// Add keeps within the server's memory bound, as Set does.
	srv.mu.Lock()
	held := srv.bytes
	srv.bytes = maxStoreBytes - 8
	srv.mu.Unlock()
	for _, call := range []func() error{
		func() error { _, err := s.Add(ctx, "a new counter", 1); return err },
		func() error { return s.Set(ctx, "a new key", []byte("v")) },
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), "store is full") {
			t.Errorf("a new key in a full store: %v", err)
		}
	}
	srv.mu.Lock()
	srv.bytes = held
	srv.mu.Unlock()
	if err := s.Wait(ctx, "a", "n", "later"); err != nil {
		t.Error(err)
	}
	if ok, err := s.Check(ctx, "a", "nope"); err != nil || ok {
		t.Errorf("Check(a, nope) = %v, %v", ok, err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Check(ctx, "a"); ok {
		t.Error("a still set after Delete")
	}
}

func TestStoreTimeoutNamesMissingKeys(t *testing.T) {
	ctx := context.Background()
	_, s := newTestStore(t, 150*time.Millisecond)
	s.Set(ctx, "here", []byte("1"))
	start := time.Now()
	err := s.Wait(ctx, "here", "gone1", "gone2")
	var te *StoreTimeoutError
	if !errors.As(err, &te) || !errors.Is(err, ErrTimeout) {
		t.Fatalf("Wait = %v, want a *StoreTimeoutError", err)
	}
	if te.NumMissing != 2 || len(te.Missing) != 2 || te.Missing[0] != "gone1" {
		t.Errorf("missing = %d %q", te.NumMissing, te.Missing)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Wait took %v for a timeout of 150ms", el)
	}
	// The error says how long the call waited, not how long it took to
	// send the request.
	if te.After < 100*time.Millisecond || te.After > 2*time.Second {
		t.Errorf("After = %v for a timeout of 150ms", te.After)
	}
	if !strings.Contains(err.Error(), `"gone1", "gone2"`) {
		t.Errorf("message does not name the keys: %v", err)
	}
	// A context ends a wait earlier.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := s.Get(cctx, "never"); err == nil {
		t.Error("Get of a key never set returned no error")
	}
	// The client still works after a timeout.
	if v, err := s.Get(ctx, "here"); err != nil || string(v) != "1" {
		t.Errorf("Get after timeouts = %q, %v", v, err)
	}
}

func TestStoreBadArguments(t *testing.T) {
	ctx := context.Background()
	_, s := newTestStore(t, time.Second)
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"empty key", func() error { return s.Set(ctx, "", nil) }, "empty key"},
		{"long key", func() error { return s.Set(ctx, strings.Repeat("k", MaxStoreKeyBytes+1), nil) }, "key of 1025 bytes"},
		{"big value", func() error { return s.Set(ctx, "k", make([]byte, MaxStoreValueBytes+1)) }, "value of"},
		{"no keys", func() error { return s.Wait(ctx) }, "no key"},
		{"too many keys", func() error { return s.Wait(ctx, make([]string, MaxStoreWaitKeys+1)...) }, "keys (at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// The largest value goes through.
	big := bytes.Repeat([]byte{7}, MaxStoreValueBytes)
	if err := s.Set(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(ctx, "big"); err != nil || !bytes.Equal(v, big) {
		t.Errorf("Get(big): %d bytes, %v", len(v), err)
	}
}

func TestDialStoreWaitsForServerThenTimesOut(t *testing.T) {
	// Reserve a port, free it, and start the server there a little later.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	go func() {
		time.Sleep(200 * time.Millisecond)
		srv, err := ListenStore(addr)
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { srv.Close() })
	}()
	s, err := DialStore(context.Background(), addr, StoreOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	ln, _ = net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err = DialStore(context.Background(), dead, StoreOptions{Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "MASTER_ADDR") {
		t.Errorf("DialStore to nothing: %v", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("DialStore took %v for a timeout of 300ms", time.Since(start))
	}
}

// TestStoreServerHostileInput sends the server malformed and oversized
// requests: each connection is dropped, and the server keeps serving.
func TestStoreServerHostileInput(t *testing.T) {
	srv, s := newTestStore(t, time.Second)
	addr := srv.Addr().String()
	le := binary.LittleEndian
	req := func(op byte, nkeys uint16, rest ...[]byte) []byte {
		b := []byte(storeMagic)
		b = append(b, op)
		b = le.AppendUint32(b, 0)
		b = le.AppendUint16(b, nkeys)
		for _, r := range rest {
			b = append(b, r...)
		}
		return b
	}
	key := func(k string) []byte { return append(le.AppendUint16(nil, uint16(len(k))), k...) }
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"wrong magic", []byte("HTTP/1.1 GET /\r\n\r\n")},
		{"unknown op", req(99, 1, key("k"))},
		{"no keys", req(opGet, 0)},
		{"many keys for get", req(opGet, 2, key("a"), key("b"))},
		{"too many keys", req(opWait, MaxStoreWaitKeys+1)},
		{"empty key", req(opGet, 1, key(""))},
		{"key too long", req(opGet, 1, le.AppendUint16(nil, MaxStoreKeyBytes+1))},
		{"value too long", req(opSet, 1, key("k"), le.AppendUint32(nil, MaxStoreValueBytes+1))},
		{"huge value length", req(opSet, 1, key("k"), le.AppendUint32(nil, 0xffffffff))},
		{"truncated", req(opSet, 1, key("k"), le.AppendUint32(nil, 100), []byte("short"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write(tc.data)
			if tc.name == "truncated" {
				c.(*net.TCPConn).CloseWrite()
			}
			c.SetReadDeadline(time.Now().Add(storeFrameTimeout + 5*time.Second))
			buf := make([]byte, 64)
			n, _ := c.Read(buf) // the magic, perhaps
			if n > len(storeMagic) {
				t.Errorf("the server answered a bad request: %q", buf[:n])
			}
			for {
				if _, err := c.Read(buf); err != nil {
					break // dropped
				}
			}
		})
	}
	if err := s.Set(context.Background(), "still", []byte("works")); err != nil {
		t.Fatalf("the server stopped serving: %v", err)
	}
}

func FuzzStoreRequest(f *testing.F) {
	le := binary.LittleEndian
	b := []byte{opSet}
	b = le.AppendUint32(b, 0)
	b = le.AppendUint16(b, 1)
	b = le.AppendUint16(b, 1)
	b = append(b, 'k')
	b = le.AppendUint32(b, 2)
	b = append(b, "vv"...)
	f.Add(b)
	f.Add([]byte{opWait, 0, 0, 0, 0, 2, 0, 1, 0, 'a', 1, 0, 'b'})
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := readStoreRequest(bufioReader(data))
		if err != nil {
			return
		}
		if len(req.keys) == 0 || len(req.keys) > MaxStoreWaitKeys || len(req.value) > MaxStoreValueBytes {
			t.Fatalf("accepted a request over the limits: %d keys, %d bytes", len(req.keys), len(req.value))
		}
		for _, k := range req.keys {
			if checkKey(k) != nil {
				t.Fatalf("accepted key %q", k)
			}
		}
	})
}

func TestStoreTimeoutErrorText(t *testing.T) {
	e := &StoreTimeoutError{Addr: "h:1", Op: "wait", NumMissing: 20, Missing: []string{"a", "b"}, After: time.Second}
	want := `parallel: store h:1: wait: 20 keys not set within 1s: "a", "b" and 18 more`
	if e.Error() != want {
		t.Errorf("got  %s\nwant %s", e.Error(), want)
	}
	if got := fmt.Sprint(&StoreTimeoutError{Addr: "h:1", Op: "get", After: time.Second}); !strings.Contains(got, "no answer") {
		t.Error(got)
	}
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

// TestDialStoreOtherProtocol dials servers that answer with something
// other than this version's store magic: DialStore fails at once with
// ErrArgument, naming what answered, instead of retrying until its
// timeout as it does while nothing listens. A client of another version
// hears the server's magic before the server drops it.
func TestDialStoreOtherProtocol(t *testing.T) {
	for _, tc := range []struct {
		name, answer, want string
	}{
		{"another version", "VRAMKV99", `"VRAMKV99"`},
		{"not a store", "HTTP/1.1 400 Bad Request\r\n\r\n", "not a vram store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Write([]byte(tc.answer))
					c.Close()
				}
			}()
			start := time.Now()
			s, err := DialStore(context.Background(), ln.Addr().String(), StoreOptions{Timeout: 3 * time.Second})
			if err == nil {
				s.Close()
				t.Fatal("no error")
			}
			if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q that wraps vram.ErrArgument", err, tc.want)
			}
			if el := time.Since(start); el > time.Second {
				t.Errorf("took %v", el)
			}
		})
	}
	// A client of another version learns the server's.
	srv, _ := newTestStore(t, time.Second)
	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("VRAMKV99"))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	got, _ := io.ReadAll(c)
	if string(got) != storeMagic {
		t.Errorf("the server answered %q to another version's magic, want its own, %q", got, storeMagic)
	}
}

// TestStoreRequestAllocatesAsDataArrives announces the largest value and
// sends a few bytes of it: decoding allocates about what arrived, not what
// was announced, so that connections that announce values and send
// nothing do not make the server hold a megabyte each.
func TestStoreRequestAllocatesAsDataArrives(t *testing.T) {
	le := binary.LittleEndian
	b := []byte{opSet}
	b = le.AppendUint32(b, 0)
	b = le.AppendUint16(b, 1)
	b = le.AppendUint16(b, 1)
	b = append(b, 'k')
	b = le.AppendUint32(b, MaxStoreValueBytes)
	b = append(b, "only this"...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := readStoreRequest(bufioReader(b)); err == nil {
			t.Fatal("a truncated request was accepted")
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 10; per > 256<<10 {
		t.Errorf("decoding a request of %d bytes that announces a value of %d allocated %d bytes", len(b), MaxStoreValueBytes, per)
	}
	// A whole value still arrives whole.
	v := make([]byte, MaxStoreValueBytes)
	for i := range v {
		v[i] = byte(i * 7)
	}
	full := append(b[:len(b)-len("only this")], v...)
	req, err := readStoreRequest(bufioReader(full))
	if err != nil || !bytes.Equal(req.value, v) {
		t.Errorf("a whole value: %d bytes, %v", len(req.value), err)
	}
}

// TestStoreServerFull fills the server's connections: a client turned
// away is told why, and DialStore, which goes on trying until its timeout
// in case one frees, says so when it gives up.
func TestStoreServerFull(t *testing.T) {
	srv, err := ListenStore("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := srv.Addr().String()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for len(conns) < maxStoreConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// The server has taken every connection when it answers one more.
	deadline := time.Now().Add(5 * time.Second)
	for {
		srv.mu.Lock()
		n := len(srv.conns)
		srv.mu.Unlock()
		if n == maxStoreConns {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server holds %d connections", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	_, err = DialStore(context.Background(), addr, StoreOptions{Timeout: 400 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d connections", maxStoreConns)) {
		t.Errorf("DialStore to a full server: %v, want an error saying that it is full", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("took %v", el)
	}
	// Once a connection closes, a client gets in.
	conns[0].Close()
	conns = conns[1:]
	s, err := DialStore(context.Background(), addr, StoreOptions{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("DialStore once a connection closed: %v", err)
	}
	s.Close()
}
