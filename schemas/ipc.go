package schemas

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// The Kafka header that names a message's media type, and the media type
// of an Arrow IPC stream (as registered with IANA), by which Kafka
// messages holding records or scores as Arrow are told apart from JSON.
const (
	HeaderContentType = "content-type"
	ArrowStreamType   = "application/vnd.apache.arrow.stream"
)

// EncodeIPC returns rec as one Arrow IPC stream: its schema, one record
// batch and the end-of-stream marker, the value of one Kafka message.
// mem allocates the writer's scratch space.
func EncodeIPC(rec arrow.Record, mem memory.Allocator) ([]byte, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(mem))
	if err := w.Write(rec); err != nil {
		_ = w.Close() // the write's error says what went wrong
		return nil, fmt.Errorf("arrow ipc: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("arrow ipc: %w", err)
	}
	return buf.Bytes(), nil
}
