package sink

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
)

// jsonlChunk is the size at which buffered lines are handed to the writer,
// so a large record does not build one huge buffer.
const jsonlChunk = 64 << 10

// NewJSONL returns a Sink writing one JSON object per row, keys in schema
// order: {"id":..,"model_version":..,"prediction":..,"decision":[..]}.
// It follows each record's own schema: int64, float64 (NaN and ±Inf become
// null, as JSON has no such numbers), utf8 strings, fixed-size lists of
// those, and nulls. Every Write hands its complete lines to w; Close does
// not close w. The sink is not safe for concurrent use.
func NewJSONL(w io.Writer) Sink { return &jsonlSink{w: w} }

type jsonlSink struct {
	w      io.Writer
	schema *arrow.Schema // schema the fields were built for
	fields []jsonField
	buf    []byte
	closed bool
}

type jsonField struct {
	key   []byte // `"name":`, with a leading comma after the first field
	value appendJSON
}

// appendJSON appends element i of arr as a JSON value.
type appendJSON func(dst []byte, arr arrow.Array, i int) []byte

func (s *jsonlSink) Write(ctx context.Context, rec arrow.Record) error {
	if s.closed {
		return fmt.Errorf("jsonl sink: write: %w", errClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("jsonl sink: write: %w", err)
	}
	if s.schema == nil || !rec.Schema().Equal(s.schema) {
		fields, err := jsonFields(rec.Schema())
		if err != nil {
			return fmt.Errorf("jsonl sink: %w", err)
		}
		s.schema, s.fields = rec.Schema(), fields
	}
	cols := rec.Columns()
	n := int(rec.NumRows())
	buf := s.buf[:0]
	for i := 0; i < n; i++ {
		buf = append(buf, '{')
		for c, f := range s.fields {
			buf = append(buf, f.key...)
			buf = f.value(buf, cols[c], i)
		}
		buf = append(buf, '}', '\n')
		if len(buf) >= jsonlChunk {
			if _, err := s.w.Write(buf); err != nil {
				return fmt.Errorf("jsonl sink: write up to row %d: %w", i, err)
			}
			buf = buf[:0]
		}
	}
	s.buf = buf
	if len(buf) > 0 {
		if _, err := s.w.Write(buf); err != nil {
			return fmt.Errorf("jsonl sink: write: %w", err)
		}
	}
	return nil
}

// Close marks the sink closed; every Write has already reached the writer,
// so there is nothing to flush and ctx is not needed.
func (s *jsonlSink) Close(context.Context) error {
	s.closed = true
	return nil
}

func jsonFields(schema *arrow.Schema) ([]jsonField, error) {
	fields := make([]jsonField, schema.NumFields())
	for c, f := range schema.Fields() {
		value, err := jsonValue(f.Type)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
		var key []byte
		if c > 0 {
			key = append(key, ',')
		}
		key = appendJSONString(key, f.Name)
		fields[c] = jsonField{key: append(key, ':'), value: value}
	}
	return fields, nil
}

func jsonValue(t arrow.DataType) (appendJSON, error) {
	switch t := t.(type) {
	case *arrow.Int64Type:
		return func(dst []byte, arr arrow.Array, i int) []byte {
			if arr.IsNull(i) {
				return append(dst, "null"...)
			}
			return strconv.AppendInt(dst, arr.(*array.Int64).Value(i), 10)
		}, nil
	case *arrow.Float64Type:
		return func(dst []byte, arr arrow.Array, i int) []byte {
			if arr.IsNull(i) {
				return append(dst, "null"...)
			}
			return appendJSONFloat(dst, arr.(*array.Float64).Value(i))
		}, nil
	case *arrow.StringType:
		return func(dst []byte, arr arrow.Array, i int) []byte {
			if arr.IsNull(i) {
				return append(dst, "null"...)
			}
			return appendJSONString(dst, arr.(*array.String).Value(i))
		}, nil
	case *arrow.FixedSizeListType:
		elem, err := jsonValue(t.Elem())
		if err != nil {
			return nil, fmt.Errorf("list element: %w", err)
		}
		width := int(t.Len())
		return func(dst []byte, arr arrow.Array, i int) []byte {
			if arr.IsNull(i) {
				return append(dst, "null"...)
			}
			l := arr.(*array.FixedSizeList)
			values := l.ListValues()
			start := (l.Offset() + i) * width
			dst = append(dst, '[')
			for j := range width {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = elem(dst, values, start+j)
			}
			return append(dst, ']')
		}, nil
	default:
		return nil, fmt.Errorf("Arrow type %s is not supported (want int64, float64, utf8 or a fixed-size list)", t)
	}
}

// appendJSONFloat formats v as encoding/json does (shortest round-trip
// form, exponent only for very small or large magnitudes); NaN and ±Inf
// have no JSON form and become null.
func appendJSONFloat(dst []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(dst, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, v, format, -1, 64)
	if format == 'e' {
		// e-07 → e-7, as encoding/json writes it.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 bytes become
// U+FFFD, one per byte, as encoding/json does.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\':
				dst = append(dst, '\\', b)
			case b == '\n':
				dst = append(dst, '\\', 'n')
			case b == '\r':
				dst = append(dst, '\\', 'r')
			case b == '\t':
				dst = append(dst, '\\', 't')
			case b < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			default:
				dst = append(dst, b)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			// Valid JSON, but line terminators for JavaScript readers.
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
