package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/snappy"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
	"github.com/pierrec/lz4/v4"
)

// parquet-go allocates what a file's metadata and page headers claim before
// it reads the bytes behind the claim, so one corrupt length can ask for
// gigabytes and kill the process. The checks here run first and turn such
// claims into errors. They bound what one page may hold; a file whose
// pages go beyond is reported as unreadable rather than trusted.
const (
	maxPageBytes  = 64 << 20 // uncompressed page size
	maxPageValues = 16 << 20 // values (and levels) of one page
	// Page headers are read in a small window, widened up to the maximum
	// for the rare header with large statistics.
	pageHeaderWindow   = 256
	maxPageHeaderBytes = 64 << 10
)

// checkFooterEncoding walks the thrift encoding of the footer so that no
// list, map or string in it claims more bytes than the footer holds.
func checkFooterEncoding(f io.ReaderAt, size int64, footerLen int64) error {
	footer := make([]byte, footerLen)
	if _, err := f.ReadAt(footer, size-8-footerLen); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading footer: %w", err)
	}
	w := thriftWalker{b: footer}
	if err := w.structure(); err != nil {
		return fmt.Errorf("%w: footer: %v", errMalformed, err)
	}
	return nil
}

// checkColumnChunk walks the page headers of a column chunk, as the library
// will read them, checking every size against the chunk and the limits, and
// checking what the codec will allocate for each page. It counts the pages
// of values without a checksum, whose damage the library cannot detect.
func checkColumnChunk(f io.ReaderAt, size int64, meta *format.ColumnMetaData) (unchecked int, err error) {
	start := meta.DataPageOffset
	if meta.DictionaryPageOffset != 0 {
		start = meta.DictionaryPageOffset
	}
	end := start + meta.TotalCompressedSize
	if start < 4 || meta.TotalCompressedSize < 0 || end > size || end < start {
		return 0, fmt.Errorf("%w: column chunk at bytes %d..%d of a %d-byte file", errMalformed, start, end, size)
	}
	buf := make([]byte, pageHeaderWindow)
	for off := start; off < end; {
		header, n, err := readPageHeader(f, off, end, buf)
		if err != nil {
			return 0, err
		}
		body := off + int64(n)
		if err := checkPageHeader(header, end-body); err != nil {
			return 0, err
		}
		if err := checkCodec(f, meta.Codec, header, body); err != nil {
			return 0, err
		}
		if header.CRC == 0 && (header.DataPageHeader.Valid || header.DataPageHeaderV2.Valid || header.DictionaryPageHeader.Valid) {
			unchecked++
		}
		off = body + int64(header.CompressedPageSize)
	}
	return unchecked, nil
}

// readPageHeader decodes the page header at off, returning its length.
func readPageHeader(f io.ReaderAt, off, end int64, buf []byte) (*format.PageHeader, int, error) {
	for window := int64(len(buf)); ; window *= 4 {
		n := min(window, end-off)
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("reading page header: %w", err)
		}
		w := thriftWalker{b: buf}
		err := w.structure()
		if errors.Is(err, errThriftShort) && n == window && window < maxPageHeaderBytes {
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%w: page header at byte %d: %v", errMalformed, off, err)
		}
		var h format.PageHeader
		if err := thrift.Unmarshal(new(thrift.CompactProtocol), buf[:w.pos], &h); err != nil {
			return nil, 0, fmt.Errorf("%w: page header at byte %d: %v", errMalformed, off, err)
		}
		return &h, w.pos, nil
	}
}

func checkPageHeader(h *format.PageHeader, left int64) error {
	values := int32(0)
	switch {
	case h.DataPageHeader.Valid:
		values = h.DataPageHeader.V.NumValues
	case h.DataPageHeaderV2.Valid:
		v2 := h.DataPageHeaderV2.V
		values = max(v2.NumValues, v2.NumRows, v2.NumNulls)
		if v2.RepetitionLevelsByteLength < 0 || v2.DefinitionLevelsByteLength < 0 ||
			int64(v2.RepetitionLevelsByteLength)+int64(v2.DefinitionLevelsByteLength) > int64(h.CompressedPageSize) {
			return fmt.Errorf("%w: page levels of %d+%d bytes in a page of %d", errMalformed,
				v2.RepetitionLevelsByteLength, v2.DefinitionLevelsByteLength, h.CompressedPageSize)
		}
	case h.DictionaryPageHeader.Valid:
		values = h.DictionaryPageHeader.V.NumValues
	}
	switch {
	case h.CompressedPageSize < 0 || int64(h.CompressedPageSize) > left:
		return fmt.Errorf("%w: page of %d bytes with %d left in the column chunk", errMalformed, h.CompressedPageSize, left)
	case h.UncompressedPageSize < 0 || h.UncompressedPageSize > maxPageBytes:
		return fmt.Errorf("%w: page of %d bytes uncompressed (this reader accepts up to %d)", errMalformed, h.UncompressedPageSize, maxPageBytes)
	case values < 0 || values > maxPageValues:
		return fmt.Errorf("%w: page of %d values (this reader accepts up to %d)", errMalformed, values, maxPageValues)
	}
	return nil
}

// checkCodec makes sure the codec will not allocate more than the page's
// uncompressed size: snappy and zstd allocate what their stream header
// says, and parquet-go's LZ4 decoder doubles its buffer on any error, so
// corrupt LZ4 data is decoded once here, into a buffer of the right size.
func checkCodec(f io.ReaderAt, codec format.CompressionCodec, h *format.PageHeader, body int64) error {
	data := body
	size := int64(h.CompressedPageSize)
	if v2 := h.DataPageHeaderV2; v2.Valid {
		if v2.V.IsCompressed.Valid && !v2.V.IsCompressed.V {
			return nil
		}
		levels := int64(v2.V.RepetitionLevelsByteLength) + int64(v2.V.DefinitionLevelsByteLength)
		data, size = body+levels, size-levels
	}
	if !h.DataPageHeader.Valid && !h.DataPageHeaderV2.Valid && !h.DictionaryPageHeader.Valid {
		return nil // a page the library skips
	}
	limit := int64(h.UncompressedPageSize)
	switch codec {
	case format.Snappy:
		head := make([]byte, min(size, binary.MaxVarintLen32))
		if _, err := f.ReadAt(head, data); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading page: %w", err)
		}
		if n, err := snappy.DecodedLen(head); err != nil || int64(n) > limit {
			return fmt.Errorf("%w: snappy page claims %d bytes, header %d (%v)", errMalformed, n, limit, err)
		}
	case format.Zstd:
		head := make([]byte, min(size, 18))
		if _, err := f.ReadAt(head, data); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading page: %w", err)
		}
		if n, ok := zstdContentSize(head); ok && n > uint64(limit) {
			return fmt.Errorf("%w: zstd page claims %d bytes, header %d", errMalformed, n, limit)
		}
	case format.Lz4Raw:
		src := make([]byte, size)
		if _, err := f.ReadAt(src, data); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading page: %w", err)
		}
		if _, err := lz4.UncompressBlock(src, make([]byte, limit)); err != nil {
			return fmt.Errorf("%w: LZ4 page does not decode into its %d bytes: %v", errMalformed, limit, err)
		}
	}
	return nil
}

// zstdContentSize reads the frame content size of a zstd frame header
// (RFC 8878, 3.1.1.1), when the header gives one.
func zstdContentSize(b []byte) (uint64, bool) {
	if len(b) < 6 || binary.LittleEndian.Uint32(b) != 0xFD2FB528 {
		return 0, false
	}
	desc := b[4]
	singleSegment := desc&0x20 != 0
	pos := 5
	if !singleSegment {
		pos++ // window descriptor
	}
	pos += [4]int{0, 1, 2, 4}[desc&3] // dictionary id
	var fcsLen int
	switch desc >> 6 {
	case 0:
		if singleSegment {
			fcsLen = 1
		}
	case 1:
		fcsLen = 2
	case 2:
		fcsLen = 4
	case 3:
		fcsLen = 8
	}
	if fcsLen == 0 || pos+fcsLen > len(b) {
		return 0, false
	}
	var v [8]byte
	copy(v[:], b[pos:pos+fcsLen])
	n := binary.LittleEndian.Uint64(v[:])
	if fcsLen == 2 {
		n += 256
	}
	return n, true
}

var errThriftShort = errors.New("ends early")

// thriftWalker skips over one thrift compact-protocol struct, checking that
// every length and element count fits in the bytes that are left (each
// element takes at least one byte) before anything trusts it.
type thriftWalker struct {
	b     []byte
	pos   int
	depth int
}

const (
	thriftBoolTrue  = 1
	thriftBoolFalse = 2
	thriftByte      = 3
	thriftI16       = 4
	thriftI32       = 5
	thriftI64       = 6
	thriftDouble    = 7
	thriftBinary    = 8
	thriftList      = 9
	thriftSet       = 10
	thriftMap       = 11
	thriftStruct    = 12
	thriftMaxDepth  = 64
)

func (w *thriftWalker) left() uint64 { return uint64(len(w.b) - w.pos) }

func (w *thriftWalker) byte() (byte, error) {
	if w.pos >= len(w.b) {
		return 0, errThriftShort
	}
	c := w.b[w.pos]
	w.pos++
	return c, nil
}

func (w *thriftWalker) skip(n uint64) error {
	if n > w.left() {
		return errThriftShort
	}
	w.pos += int(n)
	return nil
}

func (w *thriftWalker) varint() (uint64, error) {
	var x uint64
	for shift := 0; shift < 64; shift += 7 {
		c, err := w.byte()
		if err != nil {
			return 0, err
		}
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x, nil
		}
	}
	return 0, errors.New("varint longer than 10 bytes")
}

func (w *thriftWalker) structure() error {
	if w.depth++; w.depth > thriftMaxDepth {
		return errors.New("structs nested too deep")
	}
	defer func() { w.depth-- }()
	for {
		h, err := w.byte()
		if err != nil {
			return err
		}
		if h == 0 {
			return nil // stop field
		}
		if h>>4 == 0 { // field id in a varint of its own
			if _, err := w.varint(); err != nil {
				return err
			}
		}
		switch t := h & 0x0f; t {
		case thriftBoolTrue, thriftBoolFalse: // the value is the type
		default:
			if err := w.value(t); err != nil {
				return err
			}
		}
	}
}

func (w *thriftWalker) value(t byte) error {
	switch t {
	case thriftBoolTrue, thriftBoolFalse, thriftByte:
		return w.skip(1)
	case thriftI16, thriftI32, thriftI64:
		_, err := w.varint()
		return err
	case thriftDouble:
		return w.skip(8)
	case thriftBinary:
		n, err := w.varint()
		if err != nil {
			return err
		}
		return w.skip(n)
	case thriftList, thriftSet:
		h, err := w.byte()
		if err != nil {
			return err
		}
		n := uint64(h >> 4)
		if n == 15 {
			if n, err = w.varint(); err != nil {
				return err
			}
		}
		return w.elements(n, 1, h&0x0f, 0)
	case thriftMap:
		n, err := w.varint()
		if err != nil || n == 0 {
			return err
		}
		kv, err := w.byte()
		if err != nil {
			return err
		}
		return w.elements(n, 2, kv>>4, kv&0x0f)
	case thriftStruct:
		return w.structure()
	}
	return fmt.Errorf("unknown thrift type %d", t)
}

// elements skips n elements of type t (and u for map values), each taking
// at least per bytes.
func (w *thriftWalker) elements(n, per uint64, t, u byte) error {
	if n > w.left()/per {
		return errThriftShort
	}
	for range n {
		if err := w.value(t); err != nil {
			return err
		}
		if per == 2 {
			if err := w.value(u); err != nil {
				return err
			}
		}
	}
	return nil
}
