package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// echoServer answers every connection with what it reads; hangUp makes it close its side
// of the next connection after the first read.
func echoServer(t *testing.T) (addr string, hangUp func(), upstreamClosed <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		hang   bool
		wg     sync.WaitGroup
		closed = make(chan struct{}, 16)
	)
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			h := hang
			hang = false
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				if h {
					buf := make([]byte, 1)
					_, _ = c.Read(buf)
					return
				}
				_, _ = io.Copy(c, c) // until the proxy closes its side
				closed <- struct{}{}
			})
		}
	})
	return ln.Addr().String(), func() { mu.Lock(); hang = true; mu.Unlock() }, closed
}

// TestDelayProxyRelays: bytes written through the proxy in many writes, some while
// others are in flight, come back whole and in order; the end of either side closes the
// other; closing the proxy ends every connection and goroutine (goleak).
func TestDelayProxyRelays(t *testing.T) {
	up, hangUp, upstreamClosed := echoServer(t)
	p, err := listenDelayed(proxyConfig{Delay: 200 * time.Microsecond, Upstreams: []string{up, up}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	addrs := p.addrs()
	if len(addrs) != 2 || addrs[0] == addrs[1] {
		t.Fatalf("listeners %v, want two", addrs)
	}

	c, err := net.Dial("tcp", addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i := range 300 {
		want.Write(bytes.Repeat([]byte{byte(i)}, 1+i*37%5000))
	}
	wrote := make(chan error, 1)
	go func() {
		b := want.Bytes()
		for len(b) > 0 { // writes of varying size, without waiting for the echo
			n := min(len(b), 1+len(b)%7919)
			if _, err := c.Write(b[:n]); err != nil {
				wrote <- err
				return
			}
			b = b[n:]
		}
		wrote <- nil
	}()
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("the bytes came back changed or out of order")
	}
	c.Close()
	<-upstreamClosed // the client's end closed the upstream's side

	hangUp()
	c2, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the upstream hung up: %v, want EOF", err)
	}

	c3, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if _, err := c3.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c3, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	p.close() // with c3 still open
	if _, err := c3.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection outlived the proxy")
	}
}

func TestMajorityOf(t *testing.T) {
	tests := []struct {
		times []float64
		want  float64
	}{
		{[]float64{5, 1, 4, 2, 3}, 3}, // the third of five
		{[]float64{9, 1, 1}, 1},       // two of three
		{[]float64{7}, 7},
		{nil, 0},
	}
	for _, tc := range tests {
		if got := majorityOf(tc.times); got != tc.want {
			t.Errorf("majorityOf(%v) = %v, want %v", tc.times, got, tc.want)
		}
	}
}

// TestDelayProxyEndsWithStdin: the proxy process runs until its stdin ends, which is how
// the benchmark stops it (and what happens when the benchmark dies).
func TestDelayProxyEndsWithStdin(t *testing.T) {
	up, _, _ := echoServer(t)
	spec := `{"delay":1000,"upstreams":["` + up + `"]}`
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- proxyMain(spec, inR, outW)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var ready proxyReady
	if err := json.Unmarshal(line, &ready); err != nil || len(ready.Addrs) != 1 {
		t.Fatalf("ready line %q: %v", line, err)
	}
	c, err := net.Dial("tcp", ready.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	inW.Close()
	if err := <-done; err != nil {
		t.Fatalf("proxyMain: %v", err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection outlived the proxy")
	}
}
