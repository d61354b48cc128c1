package parallel

import (
	"context"
	"encoding/binary"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram"
)

// settleGoroutines waits up to d for the number of goroutines to fall back
// to before, and fails with their stacks if it does not.
func settleGoroutines(t *testing.T, before int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStoreServerHostileClientsLeaveNothing connects clients that misbehave
// in every way the wire allows at once: the server keeps serving, Close
// returns at once, and no goroutine of it is left.
func TestStoreServerHostileClientsLeaveNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	srv, err := ListenStore("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr().String()
	ctx := context.Background()
	good, err := DialStore(ctx, addr, StoreOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := good.Set(ctx, "big", make([]byte, MaxStoreValueBytes)); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	req := func(op byte, wait uint32, key string, rest ...byte) []byte {
		b := []byte{op}
		b = le.AppendUint32(b, wait)
		b = le.AppendUint16(b, 1)
		b = le.AppendUint16(b, uint16(len(key)))
		b = append(b, key...)
		return append(b, rest...)
	}
	hostile := map[string][]byte{
		"silent":             nil,
		"half a magic":       []byte("VRAM"),
		"half a header":      append([]byte(storeMagic), opGet, 0, 0),
		"announces a value":  append([]byte(storeMagic), req(opSet, 0, "k", le.AppendUint32(nil, MaxStoreValueBytes)...)...),
		"waits a day":        append([]byte(storeMagic), req(opWait, 1<<31, "never")...),
		"never reads":        append([]byte(storeMagic), []byte(strings.Repeat(string(req(opGet, 0, "big")), 64))...),
		"length of 2^63":     append([]byte(storeMagic), req(opAdd, 0, "n", le.AppendUint64(nil, 1<<63)...)...),
		"unknown op":         append([]byte(storeMagic), req(200, 0, "k")...),
		"another version":    []byte("VRAMKV00"),
		"closes its writing": append([]byte(storeMagic), req(opGet, 1<<31, "never")...),
	}
	var conns []net.Conn
	for name, data := range hostile {
		for range 5 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			c.Write(data)
			if name == "closes its writing" {
				c.(*net.TCPConn).CloseWrite()
			}
		}
	}
	time.Sleep(100 * time.Millisecond)
	// The server still answers.
	if _, err := good.Add(ctx, "other", 2); err != nil {
		t.Errorf("the server stopped serving: %v", err)
	}
	start := time.Now()
	srv.Close()
	if el := time.Since(start); el > time.Second {
		t.Errorf("Close took %v", el)
	}
	good.Close()
	for _, c := range conns {
		c.Close()
	}
	settleGoroutines(t, before, 2*time.Second)
}

// TestTCPInitStrangersLeaveNothing connects strangers to a rank's listener
// while it waits for the others to join (a client that sends nothing, one
// that sends half a hello, one of another version): the group still forms,
// and once it is closed no goroutine of the strangers' is left.
func TestTCPInitStrangersLeaveNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	srv, err := ListenStore("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	store, err := DialStore(ctx, srv.Addr().String(), StoreOptions{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	type result struct {
		c   Communicator
		err error
	}
	res0 := make(chan result, 1)
	go func() {
		c, err := NewTCPRank(ctx, store, 0, 2, vram.CPU, TCPOptions{Timeout: 2 * time.Second})
		res0 <- result{c, err}
	}()
	a, err := store.Get(ctx, "tcp/addr/0")
	if err != nil {
		t.Fatal(err)
	}
	var strangers []net.Conn
	for _, data := range [][]byte{nil, []byte(tcpMagic + "half"), []byte("VRAMTCP0" + strings.Repeat("x", helloLen-8))} {
		c, err := net.Dial("tcp", string(a))
		if err != nil {
			t.Fatal(err)
		}
		c.Write(data)
		strangers = append(strangers, c)
	}
	time.Sleep(50 * time.Millisecond)
	c1, err := NewTCPRank(ctx, store, 1, 2, vram.CPU, TCPOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r0 := <-res0
	if r0.err != nil {
		t.Fatal(r0.err)
	}
	errs := onRanks([]Communicator{r0.c, c1}, func(_ int, c Communicator) error { return c.AllReduce(vram.Ones(vram.Shape{2}), Sum) })
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	onRanks([]Communicator{r0.c, c1}, func(_ int, c Communicator) error { return c.Close() })
	store.Close()
	srv.Close()
	settleGoroutines(t, before, time.Second)
	for _, c := range strangers {
		c.Close()
	}
}
