package ingest

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go/format"
)

// errDamagedPage marks a page whose bytes do not match the CRC32 its header
// holds: the file was damaged after it was written.
var errDamagedPage = errors.New("damaged page")

// A Parquet page header may hold a CRC32 (IEEE) of the page's bytes as
// stored: compressed, levels included. parquet-go verifies it while reading
// (and fails with parquet.ErrCorrupted) but says neither which page nor
// which rows; damagedPage finds them by checking the pages of the column
// chunk again, on the error path only, so reading pays for one check.
type damagedPage struct {
	dictionary bool
	index      int   // among the data pages of the column chunk
	offset     int64 // byte offset of the page header in the file
	rows       int64 // rows of a data page, -1 when its header does not say
	stored     uint32
	computed   uint32
}

// findDamagedPage returns the first page of the column chunk whose CRC does
// not match its bytes, or nil if there is none. Pages without a CRC, like
// those parquet-go treats as such (a CRC field of 0), are not checked.
func findDamagedPage(f io.ReaderAt, meta *format.ColumnMetaData, repeated bool) (*damagedPage, error) {
	start := meta.DataPageOffset
	if meta.DictionaryPageOffset != 0 {
		start = meta.DictionaryPageOffset
	}
	end := start + meta.TotalCompressedSize
	header := make([]byte, pageHeaderWindow)
	var body []byte
	dataPages := 0
	for off := start; off < end; {
		h, n, err := readPageHeader(f, off, end, header)
		if err != nil {
			return nil, err
		}
		bodyAt, size := off+int64(n), int64(h.CompressedPageSize)
		if size < 0 || size > end-bodyAt {
			return nil, fmt.Errorf("%w: page of %d bytes with %d left in the column chunk", errMalformed, size, end-bodyAt)
		}
		isData := h.DataPageHeader.Valid || h.DataPageHeaderV2.Valid
		if h.CRC != 0 && (isData || h.DictionaryPageHeader.Valid) {
			body = slices.Grow(body[:0], int(size))[:size]
			if _, err := f.ReadAt(body, bodyAt); err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("reading page: %w", err)
			}
			if sum := crc32.ChecksumIEEE(body); sum != uint32(h.CRC) {
				p := &damagedPage{dictionary: !isData, index: dataPages, offset: off, rows: -1, stored: uint32(h.CRC), computed: sum}
				switch {
				case h.DataPageHeaderV2.Valid:
					p.rows = int64(h.DataPageHeaderV2.V.NumRows)
				case h.DataPageHeader.Valid && !repeated:
					p.rows = int64(h.DataPageHeader.V.NumValues) // one value or null per row
				}
				return p, nil
			}
		}
		if isData {
			dataPages++
		}
		off = bodyAt + size
	}
	return nil, nil
}

// damagedPageError names the damaged page of column c in the current row
// group and its rows, or returns nil if no page fails its checksum (the
// library's error then has another cause).
func (s *parquetSource) damagedPageError(c *columnReader) error {
	meta := &s.file.Metadata().RowGroups[s.group].Columns[c.index].MetaData
	p, err := findDamagedPage(s.reader, meta, c.maxRep > 0)
	if err != nil || p == nil {
		return nil
	}
	groupEnd := s.groupRow + s.rowGroups[s.group].NumRows() - 1
	// The pages before the damaged one were read: the rows that start in
	// them precede it.
	first := s.groupRow + c.pageRow
	var where string
	switch {
	case p.dictionary:
		// Every page of the row group reads its values from the dictionary.
		first = s.groupRow
		where = fmt.Sprintf("the dictionary page of row group %d (rows %d..%d", s.group, first, groupEnd)
	case p.rows > 0:
		where = fmt.Sprintf("page %d of row group %d (rows %d..%d", p.index, s.group, first, min(first+p.rows-1, groupEnd))
	default:
		// A v1 page of a list column may go on with the last row of the
		// page before it.
		first = max(s.groupRow, first-1)
		where = fmt.Sprintf("page %d of row group %d (rows from %d", p.index, s.group, first)
	}
	return fileErr(s.name, first, c.name, fmt.Errorf("%w: %s, at byte %d): its bytes have CRC32 %08x, its header says %08x",
		errDamagedPage, where, p.offset, p.computed, p.stored))
}
