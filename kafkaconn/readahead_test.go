package kafkaconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// countingConn is a connection that serves data as a socket would, at
// most what is asked for a read, and counts the reads.
type countingConn struct {
	net.Conn
	data  *bytes.Reader
	reads int
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads++
	return c.data.Read(p)
}

// Read the way kafka-go reads a fetch response (a 4 KiB bufio.Reader over
// the connection: small messages through its buffer, a large one straight
// into its slice), a read-ahead connection gives the same bytes in one
// read of the socket every ReadAheadSize bytes, and never in more reads.
func TestReadAheadConnReadsInLargeReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	want := make([]byte, 2<<20)
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	for _, message := range []int{100, 3_600, 17_000, 200_000} {
		plain := &countingConn{data: bytes.NewReader(want)}
		ahead := &countingConn{data: bytes.NewReader(want)}
		for _, c := range []struct {
			conn  net.Conn
			reads *int
		}{{plain, &plain.reads}, {&readAheadConn{Conn: ahead, r: bufio.NewReaderSize(ahead, ReadAheadSize)}, &ahead.reads}} {
			kafkaGo := bufio.NewReader(c.conn)
			got := make([]byte, 0, len(want))
			buf := make([]byte, message)
			for {
				n, err := io.ReadFull(kafkaGo, buf)
				got = append(got, buf[:n]...)
				if err == io.EOF || err == io.ErrUnexpectedEOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("messages of %d bytes: the bytes read differ from those sent", message)
			}
		}
		if message < ReadAheadSize && ahead.reads > len(want)/ReadAheadSize+2 || ahead.reads > plain.reads+1 {
			t.Errorf("messages of %d bytes: %d reads of the socket read ahead, %d without", message, ahead.reads, plain.reads)
		}
	}
}

// A reader's dialer opens read-ahead TCP connections whose deadlines are
// the socket's own.
func TestDialReadAhead(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan struct{})
	defer close(served)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte("hello"))
		<-served // then nothing until the test ends: the client's deadline passes
	}()
	if d := (Config{Brokers: []string{l.Addr().String()}}).Dialer(); d.DialFunc == nil {
		t.Fatal("the dialer does not read ahead")
	}
	conn, err := dialReadAhead(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, ok := conn.(*readAheadConn); !ok {
		t.Fatalf("dialed a %T", conn)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if _, err := conn.Read(buf); err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("after the deadline: %v, want a timeout", err)
	}
}
