package kafkaconn

import (
	"bufio"
	"context"
	"net"
)

// ReadAheadSize is how many bytes a reader's connection takes from the
// socket at once. kafka-go reads a fetch response through a 4 KiB
// bufio.Reader, so a response of small messages (3.6 KB of JSON each)
// took a system call a message; read ahead 64 KiB at a time, one system
// call serves about sixteen of them and the rest is a copy in memory. A
// message larger than the buffer is still read straight into its own
// slice.
const ReadAheadSize = 64 << 10

// readAheadConn is a connection whose reads are buffered ReadAheadSize
// bytes at a time; everything else (deadlines, Close, addresses) is the
// connection's own.
type readAheadConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readAheadConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// dialReadAhead opens a TCP connection as kafka-go's dialer does by
// default and buffers its reads.
func dialReadAhead(ctx context.Context, network, address string) (net.Conn, error) {
	conn, err := new(net.Dialer).DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &readAheadConn{Conn: conn, r: bufio.NewReaderSize(conn, ReadAheadSize)}, nil
}
