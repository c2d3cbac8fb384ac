package ingest

import (
	"errors"
	"fmt"

	flatbuffers "github.com/google/flatbuffers/go"
)

// arrow's IPC reader trusts the flatbuffer of a schema message: it makes
// slices as long as the vectors of fields, children and key-value pairs
// claim to be, and follows the offsets of fields without a bound, so a
// few hostile bytes can claim billions of fields, or fields that hold
// themselves (flatbuffer offsets wrap around), and take the process down
// with them. checkMetadata walks the schema as the reader will first,
// refusing what the message does not hold.

// maxSchemaDepth bounds the nesting of a schema's fields (a list of lists
// is 2 deep).
const maxSchemaDepth = 64

// The vtable slots of the Arrow flatbuffers (Message.fbs, Schema.fbs)
// that checkMetadata reads.
const (
	slotMessageHeaderType     = 6
	slotMessageHeader         = 8
	slotMessageCustomMetadata = 12
	slotSchemaFields          = 6
	slotSchemaCustomMetadata  = 8
	slotSchemaFeatures        = 10
	slotFieldName             = 4
	slotFieldTypeType         = 8
	slotFieldType             = 10
	slotFieldChildren         = 14
	slotFieldCustomMetadata   = 16
	slotUnionTypeIDs          = 6
	slotKeyValueKey           = 4
	slotKeyValueValue         = 6

	messageHeaderSchema = 1  // MessageHeader.Schema
	typeUnion           = 14 // Type.Union
)

var errNotFlatbuffer = errors.New("message metadata is not an Arrow flatbuffer")

// checkMetadata checks the metadata of an IPC message. For a schema, the
// vectors must lie within the metadata, the fields nest at most
// maxSchemaDepth deep, and what the reader makes of them (the elements of
// every vector and the bytes of every string, counted each time the
// reader meets them) must add up to at most twice the metadata's size:
// a writer stores each of them once, while shared or cyclic offsets make
// the reader meet them again and again.
func checkMetadata(meta []byte) (err error) {
	defer func() {
		if recover() != nil {
			err = errNotFlatbuffer
		}
	}()
	if len(meta) < flatbuffers.SizeUOffsetT {
		return errNotFlatbuffer
	}
	w := schemaWalk{bytes: meta, budget: 2*len(meta) + 1024}
	msg := flatbuffers.Table{Bytes: meta, Pos: flatbuffers.GetUOffsetT(meta)}
	if err := w.keyValues(msg, slotMessageCustomMetadata); err != nil {
		return err
	}
	if o := msg.Offset(slotMessageHeaderType); o == 0 || msg.GetByte(flatbuffers.UOffsetT(o)+msg.Pos) != messageHeaderSchema {
		return nil
	}
	schema, ok := w.union(msg, slotMessageHeader)
	if !ok {
		return nil
	}
	if err := w.keyValues(schema, slotSchemaCustomMetadata); err != nil {
		return err
	}
	if _, _, err := w.vector(schema, slotSchemaFeatures, 8); err != nil {
		return err
	}
	return w.fields(schema, slotSchemaFields, 0)
}

// schemaWalk is the state of checkMetadata: the flatbuffer and what is
// left of its budget.
type schemaWalk struct {
	bytes  []byte
	budget int
}

func (w *schemaWalk) spend(n int) error {
	w.budget -= n
	if w.budget < 0 {
		return errors.New("message metadata refers to more than it holds")
	}
	return nil
}

// vector returns the start and length of the vector in slot of t, of
// elements of size bytes, once it is checked to lie within the buffer and
// paid for.
func (w *schemaWalk) vector(t flatbuffers.Table, slot flatbuffers.VOffsetT, size int) (start flatbuffers.UOffsetT, n int, err error) {
	o := flatbuffers.UOffsetT(t.Offset(slot))
	if o == 0 {
		return 0, 0, nil
	}
	start, n = t.Vector(o), t.VectorLen(o)
	if int64(start)+int64(n)*int64(size) > int64(len(w.bytes)) {
		return 0, 0, fmt.Errorf("message metadata: a vector of %d elements at byte %d, past its end", n, start)
	}
	return start, n, w.spend(n * size)
}

// str pays for the string in slot of t; ByteVector checks its bounds.
func (w *schemaWalk) str(t flatbuffers.Table, slot flatbuffers.VOffsetT) error {
	if o := flatbuffers.UOffsetT(t.Offset(slot)); o != 0 {
		return w.spend(len(t.ByteVector(o + t.Pos)))
	}
	return nil
}

// union returns the table of the union in slot of t.
func (w *schemaWalk) union(t flatbuffers.Table, slot flatbuffers.VOffsetT) (flatbuffers.Table, bool) {
	o := flatbuffers.UOffsetT(t.Offset(slot))
	if o == 0 {
		return flatbuffers.Table{}, false
	}
	var u flatbuffers.Table
	t.Union(&u, o)
	return u, true
}

// element returns the table that element i of a vector of tables starting
// at start points to.
func (w *schemaWalk) element(start flatbuffers.UOffsetT, i int) flatbuffers.Table {
	at := start + flatbuffers.UOffsetT(i)*flatbuffers.SizeUOffsetT
	return flatbuffers.Table{Bytes: w.bytes, Pos: at + flatbuffers.GetUOffsetT(w.bytes[at:])}
}

func (w *schemaWalk) keyValues(t flatbuffers.Table, slot flatbuffers.VOffsetT) error {
	start, n, err := w.vector(t, slot, flatbuffers.SizeUOffsetT)
	for i := 0; err == nil && i < n; i++ {
		kv := w.element(start, i)
		if err = w.str(kv, slotKeyValueKey); err == nil {
			err = w.str(kv, slotKeyValueValue)
		}
	}
	return err
}

// fields checks the vector of fields in slot of t, at nesting depth.
func (w *schemaWalk) fields(t flatbuffers.Table, slot flatbuffers.VOffsetT, depth int) error {
	if depth > maxSchemaDepth {
		return fmt.Errorf("message metadata: fields nested deeper than %d", maxSchemaDepth)
	}
	start, n, err := w.vector(t, slot, flatbuffers.SizeUOffsetT)
	for i := 0; err == nil && i < n; i++ {
		f := w.element(start, i)
		if err = w.str(f, slotFieldName); err != nil {
			return err
		}
		if err = w.keyValues(f, slotFieldCustomMetadata); err != nil {
			return err
		}
		if o := f.Offset(slotFieldTypeType); o != 0 && f.GetByte(flatbuffers.UOffsetT(o)+f.Pos) == typeUnion {
			if u, ok := w.union(f, slotFieldType); ok {
				if _, _, err = w.vector(u, slotUnionTypeIDs, 4); err != nil {
					return err
				}
			}
		}
		err = w.fields(f, slotFieldChildren, depth+1)
	}
	return err
}
