package sink

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

// ParquetOptions sets how Arrow records become a Parquet file. The zero
// value writes LIST columns of float64, snappy-compressed, in row groups of
// DefaultRowGroupRows rows.
type ParquetOptions struct {
	// Flatten writes a FixedSizeList field as one scalar column per element
	// instead of a Parquet LIST; the map gives, per Arrow field name, the
	// flat column names (e.g. from schemas.View.ColumnNames()). Needed to
	// write input-layout files (x_0..x_314). The flat columns are required
	// unless the field is nullable, so a record with a null item in a
	// non-nullable flattened field is rejected. Default: no flattening.
	Flatten map[string][]string
	// Float32 stores float64 list and flattened values as FLOAT (float32).
	// Scalar float64 columns (label, prediction) stay DOUBLE.
	Float32 bool
	// Compression is "snappy" (default), "zstd" or "none".
	Compression string
	// RowGroupRows is the number of rows per row group. Default
	// DefaultRowGroupRows, fewer for rows so wide that a row group would
	// exceed about 128 MiB: the writer holds a whole row group in memory.
	RowGroupRows int
}

// DefaultRowGroupRows is the row group size when ParquetOptions leaves it 0
// and rows are not too wide.
const DefaultRowGroupRows = 128 * 1024

// defaultRowGroupBytes caps the default row group at the size Parquet
// tools usually aim for; 128k rows of uWave input (945 float64) would hold
// a gigabyte.
const defaultRowGroupBytes = 128 << 20

// valuesPerWrite bounds the values handed to one column writer per call:
// parquet-go cuts pages only between calls, so this keeps pages near the
// writer's page size and the reused value buffer small.
const valuesPerWrite = 8192

// arrowSchemaKey is the file metadata key under which Arrow writers store
// the serialized Arrow schema; Arrow readers use it to restore fixed-size
// list types that Parquet alone reads back as variable lists.
const arrowSchemaKey = "ARROW:schema"

var errClosed = errors.New("sink is closed")

type parquetSink struct {
	schema      *arrow.Schema
	w           *parquet.GenericWriter[any]
	columns     []columnEncoder
	firstLeaf   []int // leaf column index of each encoder's first column
	rowsPerCall int
	groupRows   int
	rowsInGroup int
	values      []parquet.Value
	failed      error // a write that failed half-way leaves columns uneven
	closed      bool
}

// NewParquet returns a Sink writing records of schema to w as one Parquet
// file; the file is complete only after Close, which does not close w.
// Supported Arrow types: int64, float64, utf8 string (each nullable or
// not) and FixedSizeList<float64>. The sink is not safe for concurrent use.
func NewParquet(w io.Writer, schema *arrow.Schema, opts ParquetOptions) (Sink, error) {
	if schema == nil {
		return nil, errors.New("parquet sink: schema is nil")
	}
	codec, err := compressionCodec(opts.Compression)
	if err != nil {
		return nil, fmt.Errorf("parquet sink: %w", err)
	}
	if opts.RowGroupRows < 0 {
		return nil, fmt.Errorf("parquet sink: row group rows %d must not be negative", opts.RowGroupRows)
	}
	layout, err := planLayout(schema, opts)
	if err != nil {
		return nil, fmt.Errorf("parquet sink: %w", err)
	}
	groupRows := opts.RowGroupRows
	if groupRows == 0 {
		groupRows = defaultGroupRows(layout.rowBytes)
	}
	arrowSchema, err := serializeArrowSchema(layout.fileSchema)
	if err != nil {
		return nil, fmt.Errorf("parquet sink: %w", err)
	}
	// parquet-go writes a CRC32 into every page header (it has no option to
	// leave it out), so readers, ingest among them, detect damaged pages.
	config, err := parquet.NewWriterConfig(
		parquet.NewSchema("schema", layout.root),
		parquet.Compression(codec),
		parquet.KeyValueMetadata(arrowSchemaKey, arrowSchema),
	)
	if err != nil {
		return nil, fmt.Errorf("parquet sink: writer config: %w", err)
	}
	return &parquetSink{
		schema:      schema,
		w:           parquet.NewGenericWriter[any](w, config),
		columns:     layout.encoders,
		firstLeaf:   layout.firstLeaf,
		rowsPerCall: max(1, valuesPerWrite/layout.maxValuesPerRow),
		groupRows:   groupRows,
	}, nil
}

// schemaDifference names the first difference between a record's schema
// and the sink's; printing both whole would bury it among hundreds of
// fields.
func schemaDifference(got, want *arrow.Schema) string {
	for i := range min(got.NumFields(), want.NumFields()) {
		if g, w := got.Field(i), want.Field(i); !g.Equal(w) {
			return fmt.Sprintf("field %d is %s, want %s", i, g, w)
		}
	}
	return fmt.Sprintf("%d fields, want %d", got.NumFields(), want.NumFields())
}

// defaultGroupRows is the default row group size for rows of rowBytes.
func defaultGroupRows(rowBytes int) int {
	return min(DefaultRowGroupRows, max(1, defaultRowGroupBytes/max(1, rowBytes)))
}

func compressionCodec(name string) (compress.Codec, error) {
	switch strings.ToLower(name) {
	case "", "snappy":
		return &parquet.Snappy, nil
	case "zstd":
		return &parquet.Zstd, nil
	case "none", "uncompressed":
		return &parquet.Uncompressed, nil
	default:
		return nil, fmt.Errorf("compression %q: want snappy, zstd or none", name)
	}
}

// Write appends the rows of rec, splitting row groups as configured.
func (s *parquetSink) Write(ctx context.Context, rec arrow.Record) error {
	switch {
	case s.closed:
		return fmt.Errorf("parquet sink: write: %w", errClosed)
	case s.failed != nil:
		return fmt.Errorf("parquet sink: write after an earlier failure: %w", s.failed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("parquet sink: write: %w", err)
	}
	if !rec.Schema().Equal(s.schema) {
		return fmt.Errorf("parquet sink: record does not match the sink's schema: %s", schemaDifference(rec.Schema(), s.schema))
	}
	for c, f := range s.schema.Fields() {
		if nulls := rec.Column(c).NullN(); nulls > 0 && !f.Nullable {
			return fmt.Errorf("parquet sink: column %q is not nullable but has %d nulls", f.Name, nulls)
		}
		if flat, ok := s.columns[c].(flatColumn); ok && !flat.optional {
			if err := flat.checkItems(rec.Column(c)); err != nil {
				return fmt.Errorf("parquet sink: column %q: %w", f.Name, err)
			}
		}
	}
	if err := s.writeRows(rec); err != nil {
		s.failed = err
		return fmt.Errorf("parquet sink: %w", err)
	}
	return nil
}

func (s *parquetSink) writeRows(rec arrow.Record) error {
	writers := s.w.ColumnWriters()
	n := int(rec.NumRows())
	used := 0
	// String values point into rec's buffers; drop them so the sink does
	// not keep rec's memory reachable after Write returns.
	defer func() { clear(s.values[:used]) }()
	for lo := 0; lo < n; {
		hi := min(n, lo+s.rowsPerCall, lo+s.groupRows-s.rowsInGroup)
		for c, enc := range s.columns {
			arr := rec.Column(c)
			for k := range enc.leaves() {
				leaf := s.firstLeaf[c] + k
				s.values = enc.appendValues(s.values[:0], arr, lo, hi, k)
				used = max(used, len(s.values))
				if _, err := writers[leaf].WriteRowValues(s.values); err != nil {
					return fmt.Errorf("column %q: %w", s.schema.Field(c).Name, err)
				}
			}
		}
		s.rowsInGroup += hi - lo
		if s.rowsInGroup == s.groupRows {
			if err := s.w.Flush(); err != nil {
				return fmt.Errorf("flush row group: %w", err)
			}
			s.rowsInGroup = 0
		}
		lo = hi
	}
	return nil
}

// Close writes the last row group and the footer, unless ctx has ended:
// the file is then left incomplete. Closing twice is a no-op.
func (s *parquetSink) Close(ctx context.Context) error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.failed != nil {
		return fmt.Errorf("parquet sink: file is incomplete after an earlier failure: %w", s.failed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("parquet sink: close: %w", err)
	}
	if err := s.w.Close(); err != nil {
		return fmt.Errorf("parquet sink: close: %w", err)
	}
	return nil
}

// layout is the Parquet shape of an Arrow schema.
type layout struct {
	root            parquet.Node
	encoders        []columnEncoder
	firstLeaf       []int
	maxValuesPerRow int
	rowBytes        int           // estimated size of one row before compression
	fileSchema      *arrow.Schema // the Arrow schema that reads the file back as written
}

// stringBytes is the guess of a string's size in rowBytes.
const stringBytes = 16

func planLayout(schema *arrow.Schema, opts ParquetOptions) (*layout, error) {
	for name := range opts.Flatten {
		if !schema.HasField(name) {
			return nil, fmt.Errorf("flatten: no field %q in the schema", name)
		}
	}
	l := &layout{maxValuesPerRow: 1}
	var (
		fields     []parquet.Field
		fileFields []arrow.Field
		seen       = map[string]string{}
	)
	add := func(name, owner string, node parquet.Node, file arrow.Field) error {
		if prev, ok := seen[name]; ok {
			return fmt.Errorf("column %q of %s is already %s", name, owner, prev)
		}
		seen[name] = owner
		fields = append(fields, parquet.Group{name: node}.Fields()[0])
		fileFields = append(fileFields, file)
		return nil
	}
	for _, f := range schema.Fields() {
		owner := fmt.Sprintf("field %q", f.Name)
		l.firstLeaf = append(l.firstLeaf, len(fields))
		switch t := f.Type.(type) {
		case *arrow.Int64Type:
			l.rowBytes += 8
			l.encoders = append(l.encoders, int64Column{optional: f.Nullable})
			if err := add(f.Name, owner, optional(parquet.Leaf(parquet.Int64Type), f.Nullable), f); err != nil {
				return nil, err
			}
		case *arrow.Float64Type:
			l.rowBytes += 8
			l.encoders = append(l.encoders, float64Column{optional: f.Nullable})
			if err := add(f.Name, owner, optional(parquet.Leaf(parquet.DoubleType), f.Nullable), f); err != nil {
				return nil, err
			}
		case *arrow.StringType:
			l.rowBytes += stringBytes
			l.encoders = append(l.encoders, stringColumn{optional: f.Nullable})
			// Dictionary pages: string columns such as model_version repeat one value.
			node := parquet.Encoded(parquet.String(), &parquet.RLEDictionary)
			if err := add(f.Name, owner, optional(node, f.Nullable), f); err != nil {
				return nil, err
			}
		case *arrow.FixedSizeListType:
			if t.Elem().ID() != arrow.FLOAT64 {
				return nil, fmt.Errorf("field %q: fixed-size list of %s is not supported (want float64)", f.Name, t.Elem())
			}
			width := int(t.Len())
			elemNullable := t.ElemField().Nullable
			elemType, elemLeaf := arrow.DataType(arrow.PrimitiveTypes.Float64), parquet.Leaf(parquet.DoubleType)
			if opts.Float32 {
				elemType, elemLeaf = arrow.PrimitiveTypes.Float32, parquet.Leaf(parquet.FloatType)
			}
			l.rowBytes += width * elemType.(arrow.FixedWidthDataType).Bytes()
			if names, ok := opts.Flatten[f.Name]; ok {
				if len(names) != width {
					return nil, fmt.Errorf("flatten field %q: %d column names for a list of %d", f.Name, len(names), width)
				}
				// A flat column is one feature of a list that is present
				// whenever the field is; it is optional only when the field
				// is nullable. Item nullability does not count:
				// arrow.FixedSizeListOf declares items nullable, so the
				// canonical records' views have nullable items that are
				// never null, and optional columns would halve the write
				// speed of every input-layout file. Write rejects records
				// that do hold null items.
				nullable := f.Nullable
				l.encoders = append(l.encoders, flatColumn{width: width, optional: nullable, float32: opts.Float32})
				for _, name := range names {
					file := arrow.Field{Name: name, Type: elemType, Nullable: nullable}
					if err := add(name, owner, optional(elemLeaf, nullable), file); err != nil {
						return nil, err
					}
				}
				continue
			}
			enc := newListColumn(width, f.Nullable, elemNullable, opts.Float32)
			l.encoders = append(l.encoders, enc)
			l.maxValuesPerRow = max(l.maxValuesPerRow, width)
			node := parquet.List(optional(elemLeaf, elemNullable))
			file := arrow.Field{Name: f.Name, Type: fileListType(width, elemType, elemNullable, f.Nullable), Nullable: f.Nullable}
			if err := add(f.Name, owner, optional(node, f.Nullable), file); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("field %q: Arrow type %s is not supported (want int64, float64, utf8 or fixed_size_list<float64>)", f.Name, f.Type)
		}
	}
	l.root = orderedGroup{fields: fields}
	meta := schema.Metadata()
	l.fileSchema = arrow.NewSchema(fileFields, &meta)
	return l, nil
}

func optional(node parquet.Node, nullable bool) parquet.Node {
	if nullable {
		return parquet.Optional(node)
	}
	return node
}

// fileListType is the Arrow type Arrow readers should give a LIST column:
// the fixed-size list it came from, except when lists may be null, as
// Arrow v15's reader rejects null fixed-size lists (it wants every list,
// null or not, to hold width elements); those read back as variable lists.
func fileListType(width int, elem arrow.DataType, elemNullable, listNullable bool) arrow.DataType {
	switch {
	case listNullable:
		return arrow.ListOf(elem)
	case elemNullable:
		return arrow.FixedSizeListOf(int32(width), elem)
	default:
		return arrow.FixedSizeListOfNonNullable(int32(width), elem)
	}
}

// orderedGroup is a Parquet group whose columns keep the Arrow field order;
// parquet.Group is a map and would sort them by name.
type orderedGroup struct {
	parquet.Group
	fields []parquet.Field
}

func (g orderedGroup) Fields() []parquet.Field { return g.fields }

// String prints the group in its own field order, not the embedded map's.
func (g orderedGroup) String() string {
	var b strings.Builder
	_ = parquet.PrintSchema(&b, "", g) // a strings.Builder does not fail
	return b.String()
}

// serializeArrowSchema encodes schema as Arrow writers do for the
// ARROW:schema key: an IPC stream holding only the schema, base64.
func serializeArrowSchema(schema *arrow.Schema) (string, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema), ipc.WithAllocator(memory.NewGoAllocator()))
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("serialize Arrow schema: %w", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// columnEncoder turns one Arrow column into the values of its Parquet leaf
// columns, one leaf at a time. The values go straight to that leaf's
// ColumnWriter, which reads only their repetition and definition levels,
// so their column index is left unset: Value.Level would set all three but
// does not inline, and at one call per value that costs a third of the
// write time.
type columnEncoder interface {
	// leaves is the number of Parquet leaf columns of the Arrow column.
	leaves() int
	// appendValues appends to dst the values of leaf k (of leaves()) for
	// rows [lo, hi) of arr.
	appendValues(dst []parquet.Value, arr arrow.Array, lo, hi, k int) []parquet.Value
}

// definition returns the definition level of a present value.
func definition(optional bool) int {
	if optional {
		return 1
	}
	return 0
}

// null is a null value at definition level def.
func null(def int) parquet.Value {
	v := parquet.NullValue()
	v.SetDefinitionLevel(def)
	return v
}

type int64Column struct{ optional bool }

func (int64Column) leaves() int { return 1 }

func (c int64Column) appendValues(dst []parquet.Value, arr arrow.Array, lo, hi, _ int) []parquet.Value {
	a := arr.(*array.Int64)
	vals, def := a.Int64Values(), definition(c.optional)
	for i := lo; i < hi; i++ {
		if a.IsNull(i) {
			dst = append(dst, null(0))
			continue
		}
		v := parquet.Int64Value(vals[i])
		v.SetDefinitionLevel(def)
		dst = append(dst, v)
	}
	return dst
}

type float64Column struct{ optional bool }

func (float64Column) leaves() int { return 1 }

func (c float64Column) appendValues(dst []parquet.Value, arr arrow.Array, lo, hi, _ int) []parquet.Value {
	a := arr.(*array.Float64)
	vals, def := a.Float64Values(), definition(c.optional)
	for i := lo; i < hi; i++ {
		if a.IsNull(i) {
			dst = append(dst, null(0))
			continue
		}
		v := parquet.DoubleValue(vals[i])
		v.SetDefinitionLevel(def)
		dst = append(dst, v)
	}
	return dst
}

type stringColumn struct{ optional bool }

func (stringColumn) leaves() int { return 1 }

func (c stringColumn) appendValues(dst []parquet.Value, arr arrow.Array, lo, hi, _ int) []parquet.Value {
	a := arr.(*array.String)
	// Slice the Arrow data buffer directly; the column buffer copies the bytes.
	offsets, data := a.ValueOffsets(), a.ValueBytes()
	base, def := offsets[0], definition(c.optional)
	for i := lo; i < hi; i++ {
		if a.IsNull(i) {
			dst = append(dst, null(0))
			continue
		}
		b := data[offsets[i]-base : offsets[i+1]-base]
		v := parquet.ByteArrayValue(b)
		v.SetDefinitionLevel(def)
		dst = append(dst, v)
	}
	return dst
}

// elements returns the values of a fixed-size list column, the index of
// row 0's first element in them, and the element array for null checks.
func elements(arr arrow.Array) (vals []float64, first int, elems *array.Float64) {
	l := arr.(*array.FixedSizeList)
	elems = l.ListValues().(*array.Float64)
	width := int(l.DataType().(*arrow.FixedSizeListType).Len())
	return elems.Float64Values(), l.Offset() * width, elems
}

func floatValue(v float64, as32 bool) parquet.Value {
	if as32 {
		return parquet.FloatValue(float32(v))
	}
	return parquet.DoubleValue(v)
}

// listColumn writes a fixed-size list as a three-level Parquet LIST.
type listColumn struct {
	width   int
	float32 bool
	// Definition levels: null list, empty list, null element, element.
	nullList, emptyList, nullElem, elem int
}

func newListColumn(width int, listNullable, elemNullable, as32 bool) listColumn {
	c := listColumn{width: width, float32: as32}
	c.emptyList = definition(listNullable)
	c.nullElem = c.emptyList + 1 // the repeated "list" level
	c.elem = c.nullElem + definition(elemNullable)
	return c
}

func (listColumn) leaves() int { return 1 }

func (c listColumn) appendValues(dst []parquet.Value, arr arrow.Array, lo, hi, _ int) []parquet.Value {
	vals, first, elems := elements(arr)
	if arr.NullN() == 0 && elems.NullN() == 0 && c.width > 0 {
		return c.appendDense(dst, vals[first+lo*c.width:first+hi*c.width])
	}
	checkElems := elems.NullN() > 0
	nullList, emptyList, nullElem := null(c.nullList), null(c.emptyList), null(c.nullElem)
	for i := lo; i < hi; i++ {
		switch {
		case arr.IsNull(i):
			dst = append(dst, nullList)
			continue
		case c.width == 0:
			dst = append(dst, emptyList)
			continue
		}
		start := len(dst)
		row := vals[first+i*c.width : first+(i+1)*c.width]
		for j, x := range row {
			if checkElems && elems.IsNull(first+i*c.width+j) {
				dst = append(dst, nullElem)
				continue
			}
			v := floatValue(x, c.float32)
			v.SetDefinitionLevel(c.elem)
			dst = append(dst, v)
		}
		// Every element but the first continues the row's list.
		for j := start + 1; j < len(dst); j++ {
			dst[j].SetRepetitionLevel(1)
		}
	}
	return dst
}

// appendDense appends the values of whole lists without nulls, src
// holding them row after row: the common case, in two tight passes.
func (c listColumn) appendDense(dst []parquet.Value, src []float64) []parquet.Value {
	n := len(dst)
	dst = slices.Grow(dst, len(src))[:n+len(src)]
	out := dst[n:]
	if c.float32 {
		for i, x := range src {
			out[i] = parquet.FloatValue(float32(x))
		}
	} else {
		for i, x := range src {
			out[i] = parquet.DoubleValue(x)
		}
	}
	for start := 0; start < len(out); start += c.width {
		row := out[start : start+c.width]
		row[0].SetDefinitionLevel(c.elem)
		for j := 1; j < len(row); j++ {
			row[j].SetRepetitionLevel(1)
			row[j].SetDefinitionLevel(c.elem)
		}
	}
	return dst
}

// flatColumn writes element k of a fixed-size list as its own scalar column.
type flatColumn struct {
	width    int
	optional bool
	float32  bool
}

func (c flatColumn) leaves() int { return c.width }

// checkItems reports a null item of arr, which required flat columns
// cannot store.
func (c flatColumn) checkItems(arr arrow.Array) error {
	_, first, elems := elements(arr)
	if elems.NullN() == 0 {
		return nil
	}
	// The item array may be longer than arr's slice; look only inside it.
	for i := range arr.Len() {
		for k := range c.width {
			if elems.IsNull(first + i*c.width + k) {
				return fmt.Errorf("row %d item %d is null, but the flattened columns of a non-nullable field are required", i, k)
			}
		}
	}
	return nil
}

func (c flatColumn) appendValues(dst []parquet.Value, arr arrow.Array, lo, hi, k int) []parquet.Value {
	vals, first, elems := elements(arr)
	at := first + lo*c.width + k
	if arr.NullN() > 0 || elems.NullN() > 0 {
		for i := lo; i < hi; i, at = i+1, at+c.width {
			if arr.IsNull(i) || elems.IsNull(at) {
				dst = append(dst, null(0))
				continue
			}
			v := floatValue(vals[at], c.float32)
			v.SetDefinitionLevel(definition(c.optional))
			dst = append(dst, v)
		}
		return dst
	}
	// No nulls: the common case, one plain value per row.
	n := len(dst)
	dst = slices.Grow(dst, hi-lo)[:n+hi-lo]
	out := dst[n:]
	def := definition(c.optional)
	// One loop per case: a branch or level store left in the loop body
	// makes it several times slower.
	switch {
	case c.float32 && def == 0:
		for i := range out {
			out[i] = parquet.FloatValue(float32(vals[at+i*c.width]))
		}
	case c.float32:
		for i := range out {
			v := parquet.FloatValue(float32(vals[at+i*c.width]))
			v.SetDefinitionLevel(def)
			out[i] = v
		}
	case def == 0:
		for i := range out {
			out[i] = parquet.DoubleValue(vals[at+i*c.width])
		}
	default:
		for i := range out {
			v := parquet.DoubleValue(vals[at+i*c.width])
			v.SetDefinitionLevel(def)
			out[i] = v
		}
	}
	return dst
}
