package pipeline

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

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

// output is a Sink whose file appears under its final name only when the
// job succeeds. sink.Create already writes atomically, but it commits on
// every Close; a failed job must not leave a partial file that looks
// complete, so the sink writes to a hidden staging name beside the final
// one, and commit renames it while discard removes it.
type output struct {
	sink.Sink
	final, staged string // both empty for standard output
}

func createOutput(path string, stdout io.Writer, schema *arrow.Schema, opts sink.ParquetOptions) (*output, error) {
	if path == sink.Stdout {
		if stdout == nil {
			stdout = os.Stdout
		}
		return &output{Sink: sink.NewJSONL(stdout)}, nil
	}
	// The staging name keeps the final name's extension, which is how
	// sink.Create picks the format.
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "." // CreateTemp would read "" as the system's temporary directory
	}
	placeholder, err := os.CreateTemp(dir, ".partial-*-"+base)
	if err != nil {
		return nil, fmt.Errorf("output %s: %w", path, err)
	}
	staged := placeholder.Name()
	if err := placeholder.Close(); err != nil {
		return nil, errors.Join(fmt.Errorf("output %s: %w", path, err), os.Remove(staged))
	}
	s, err := sink.Create(staged, schema, opts)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("output %s: %w", path, err), os.Remove(staged))
	}
	return &output{Sink: s, final: path, staged: staged}, nil
}

func (o *output) commit() error {
	if err := o.Close(); err != nil {
		return errors.Join(fmt.Errorf("output %s: %w", o.name(), err), o.removeStaged())
	}
	if o.staged == "" {
		return nil
	}
	if err := os.Rename(o.staged, o.final); err != nil {
		return errors.Join(fmt.Errorf("output %s: %w", o.final, err), o.removeStaged())
	}
	return nil
}

// discard drops the output of a failed job. Close's own error is not
// reported: the job's error says what went wrong, and the staged file is
// removed whatever Close did with it.
func (o *output) discard() error {
	_ = o.Close()
	return o.removeStaged()
}

func (o *output) removeStaged() error {
	if o.staged == "" {
		return nil
	}
	if err := os.Remove(o.staged); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("output %s: remove staging file: %w", o.final, err)
	}
	return nil
}

func (o *output) name() string {
	if o.final == "" {
		return "standard output"
	}
	return o.final
}
