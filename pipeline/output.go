package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/sink"
)

// scoreColumns are the values of one output record, row-major for the
// list columns; contrib is nil without contributions.
type scoreColumns struct {
	ids        []int64
	prediction []float64
	decision   []float64
	contrib    []float64
}

// newScoreRecord builds a record of schema (schemas.OutputSchema) from
// whole columns at once: the rows of a batch are already in flat slices,
// so there is no per-row append, and the list columns get the schema's
// own non-nullable item type.
func newScoreRecord(mem memory.Allocator, schema *arrow.Schema, version string, c *scoreColumns) arrow.Record {
	n := len(c.ids)
	cols := make([]arrow.Array, 0, schema.NumFields())
	add := func(d arrow.ArrayData) {
		cols = append(cols, array.MakeFromData(d))
		d.Release()
	}
	add(primitiveData(mem, arrow.PrimitiveTypes.Int64, arrow.Int64Traits.CastToBytes(c.ids), n))
	add(repeatedString(mem, version, n))
	add(primitiveData(mem, arrow.PrimitiveTypes.Float64, arrow.Float64Traits.CastToBytes(c.prediction), n))
	add(listData(mem, schema.Field(3).Type, c.decision, n))
	if c.contrib != nil {
		add(listData(mem, schema.Field(4).Type, c.contrib, n))
	}
	rec := array.NewRecord(schema, cols, int64(n))
	for _, col := range cols {
		col.Release()
	}
	return rec
}

// bufferOf copies raw into a new buffer of mem.
func bufferOf(mem memory.Allocator, raw []byte) *memory.Buffer {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(len(raw))
	copy(buf.Bytes(), raw)
	return buf
}

func primitiveData(mem memory.Allocator, t arrow.DataType, raw []byte, n int) arrow.ArrayData {
	buf := bufferOf(mem, raw)
	defer buf.Release()
	return array.NewData(t, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
}

func listData(mem memory.Allocator, t arrow.DataType, values []float64, n int) arrow.ArrayData {
	child := primitiveData(mem, arrow.PrimitiveTypes.Float64, arrow.Float64Traits.CastToBytes(values), len(values))
	defer child.Release()
	return array.NewData(t, n, []*memory.Buffer{nil}, []arrow.ArrayData{child}, 0, 0)
}

// repeatedString is a utf8 column holding s in each of its n rows.
func repeatedString(mem memory.Allocator, s string, n int) arrow.ArrayData {
	offsets := memory.NewResizableBuffer(mem)
	defer offsets.Release()
	offsets.Resize((n + 1) * arrow.Int32SizeBytes)
	off := arrow.Int32Traits.CastFromBytes(offsets.Bytes())
	data := memory.NewResizableBuffer(mem)
	defer data.Release()
	data.Resize(n * len(s))
	raw := data.Bytes()
	for i := range n {
		off[i] = int32(i * len(s))
		copy(raw[i*len(s):], s)
	}
	off[n] = int32(n * len(s))
	return array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{nil, offsets, data}, nil, 0, 0)
}

// output is the job's sink: its file appears under its final name only
// when the job succeeds (commit); a failed job discards it.
type output struct {
	sink.Sink
	name string
}

func createOutput(path string, stdout io.Writer, schema *arrow.Schema, opts sink.ParquetOptions) (*output, error) {
	if path == sink.Stdout {
		if stdout == nil {
			stdout = os.Stdout
		}
		return &output{Sink: sink.NewJSONL(stdout), name: "standard output"}, nil
	}
	s, err := sink.Create(path, schema, opts)
	if err != nil {
		return nil, fmt.Errorf("output %s: %w", path, err)
	}
	return &output{Sink: s, name: path}, nil
}

func (o *output) commit(ctx context.Context) error {
	if err := o.Close(ctx); err != nil {
		return fmt.Errorf("output %s: %w", o.name, err)
	}
	return nil
}

// discard drops the output of a failed job; the job's error says what went
// wrong.
func (o *output) discard() error {
	if a, ok := o.Sink.(sink.Aborter); ok {
		return a.Abort()
	}
	// Standard output, which has nothing left to flush.
	return o.Close(context.Background())
}
