package ingest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/mvml/mvml/schemas"
)

// tileRows is how many rows are decoded column after column before moving
// on: the flat layout scatters each column into every row, and a tile of
// rows × features × 8 bytes that stays in L2 keeps those writes cheap.
const tileRows = 256

// errMalformed marks data that the Parquet library could not decode.
var errMalformed = errors.New("malformed Parquet data")

type parquetSource struct {
	name      string
	opts      Options
	file      *parquet.File
	reader    io.ReaderAt
	size      int64
	owned     io.Closer
	columns   []*columnReader // decode order: id, label, then views
	hasID     bool
	hasLabel  bool
	rowGroups []parquet.RowGroup
	nextGroup int
	group     int   // index of the row group being read, -1 before the first
	groupRow  int64 // file row of its first row
	groupLeft int64 // rows of it not read yet
	total     int64
	row       int64 // data rows consumed so far
	idBase    int64
	buf       *schemas.RecordBuilder
	rejects   rejectSet
	done      bool
	// toldUnchecked is set once the log says that the file has pages
	// without checksums.
	toldUnchecked bool
}

// NewParquet reads the Parquet file f of size bytes. name is used in errors
// and Batch.Source. Views may be flat (one float, double, int32 or int64
// column per feature) or one list column per view (a LIST of numbers or a
// repeated numeric field). Pages are decoded one at a time per column, so
// memory does not grow with the file. Close does not close f.
func NewParquet(f io.ReaderAt, size int64, name string, spec *schemas.ViewSpec, opts Options) (Source, error) {
	if spec == nil {
		return nil, errors.New("ingest: nil view spec")
	}
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	return newParquetSource(f, size, name, spec, opts, 0, nil)
}

func newParquetSource(f io.ReaderAt, size int64, name string, spec *schemas.ViewSpec, opts Options, idBase int64, owned io.Closer) (*parquetSource, error) {
	s := &parquetSource{name: name, opts: opts, owned: owned, idBase: idBase, group: -1, reader: f, size: size}
	fail := func(err error) (*parquetSource, error) {
		s.Close()
		return nil, err
	}
	footerLen, err := checkFooter(f, size)
	if err == nil {
		err = checkFooterEncoding(f, size, footerLen)
	}
	if err != nil {
		return fail(fileErr(name, -1, "", err))
	}
	err = guard(func() (err error) {
		s.file, err = parquet.OpenFile(f, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
		if err == nil {
			s.rowGroups = s.file.RowGroups()
		}
		return err
	})
	if err != nil {
		return fail(fileErr(name, -1, "", err))
	}
	if err := s.countRows(); err != nil {
		return fail(fileErr(name, -1, "", err))
	}
	if err := s.resolveColumns(spec); err != nil {
		return fail(err)
	}
	s.buf = schemas.NewRecordBuilder(opts.Allocator, spec)
	return s, nil
}

// checkFooter rejects a file whose footer cannot be right before the library
// trusts its length field (and allocates that many bytes). It returns the
// footer's length.
func checkFooter(f io.ReaderAt, size int64) (int64, error) {
	const magic = "PAR1"
	if size < int64(2*len(magic)+4) {
		return 0, fmt.Errorf("%d bytes is too short for a Parquet file", size)
	}
	var tail [8]byte
	if _, err := f.ReadAt(tail[:], size-8); err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("reading footer: %w", err)
	}
	if string(tail[4:]) != magic {
		return 0, fmt.Errorf("not a Parquet file or truncated: no %s at the end", magic)
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n > size-12 {
		return 0, fmt.Errorf("truncated or corrupt: footer of %d bytes in a file of %d", n, size)
	}
	return n, nil
}

func (s *parquetSource) countRows() error {
	for i, g := range s.rowGroups {
		n := g.NumRows()
		if n < 0 {
			return fmt.Errorf("row group %d has %d rows", i, n)
		}
		s.total += n
	}
	if n := s.file.NumRows(); n != s.total {
		return fmt.Errorf("corrupt metadata: file has %d rows but its row groups %d", n, s.total)
	}
	return nil
}

func (s *parquetSource) resolveColumns(spec *schemas.ViewSpec) error {
	root := s.file.Root()
	var missing []string
	for _, sc := range specColumns(spec) {
		col := root.Column(sc.name)
		if col == nil {
			switch {
			case sc.role == roleLabel && s.opts.RequireLabel:
				return fileErr(s.name, -1, sc.name, errors.New("label column is missing"))
			case sc.required():
				missing = append(missing, sc.name)
			}
			continue
		}
		var c *columnReader
		err := guard(func() (err error) {
			// A corrupt schema can make the library's type methods panic.
			c, err = newColumnReader(col, sc.name, sc.role)
			return err
		})
		if err != nil {
			return fileErr(s.name, -1, sc.name, err)
		}
		c.view, c.feature = sc.view, sc.feature
		s.columns = append(s.columns, c)
		switch sc.role {
		case roleID:
			s.hasID = true
		case roleLabel:
			s.hasLabel = true
		}
	}
	if len(missing) > 0 {
		return fileErr(s.name, -1, missing[0], errors.New(describeMissing(spec, missing)))
	}
	return nil
}

func (s *parquetSource) rowsRead() int64 { return s.row }

func (s *parquetSource) Next(ctx context.Context) (Batch, error) {
	if s.done || s.buf == nil {
		return Batch{}, io.EOF
	}
	if err := ctx.Err(); err != nil {
		return Batch{}, fmt.Errorf("ingest: %s: %w", s.name, err)
	}
	left := s.total - s.row
	if left == 0 {
		s.done = true
		if err := s.closeRowGroup(s.row); err != nil {
			return Batch{}, err
		}
		return Batch{}, io.EOF
	}
	n := int(min(int64(s.opts.BatchSize), left))
	s.buf.Reserve(n)
	s.rejects.reset(n)
	for filled := 0; filled < n; {
		if s.groupLeft == 0 {
			if err := s.openNextRowGroup(s.row + int64(filled)); err != nil {
				return Batch{}, s.fail(err)
			}
			continue
		}
		m := int(min(int64(n-filled), s.groupLeft))
		if err := s.decode(filled, m); err != nil {
			return Batch{}, s.fail(err)
		}
		filled += m
		s.groupLeft -= int64(m)
	}

	rows := make([]int64, 0, n-len(s.rejects.errs))
	k := 0
	for i := range n {
		if s.rejects.bad[i] {
			continue
		}
		if k != i {
			s.buf.MoveRow(k, i)
		}
		rows = append(rows, s.row+int64(i))
		k++
	}
	s.buf.SetLen(k)
	b := Batch{Record: s.buf.NewRecord(), Source: s.name, Rows: rows, Rejects: s.rejects.sorted()}
	s.row += int64(n)
	return b, nil
}

// decode fills batch rows [first, first+n) from the current row group, a
// tile of rows at a time.
func (s *parquetSource) decode(first, n int) error {
	fileRow := s.row // file row of batch row 0
	rows := rowSink{rejects: &s.rejects, source: s.name, fileRow0: fileRow}
	if !s.hasID {
		for i := first; i < first+n; i++ {
			s.buf.IDs()[i] = s.idBase + fileRow + int64(i)
		}
	}
	if !s.hasLabel {
		// Allocators need not hand out zeroed memory.
		clear(s.buf.Labels()[first : first+n])
		s.buf.SetLabelsValid(first, n, false)
	}
	for t := first; t < first+n; t += tileRows {
		m := min(tileRows, first+n-t)
		for _, c := range s.columns {
			if err := c.read(s.buf, &rows, t, m); err != nil {
				// The rows before the page that could not be read are good.
				return s.columnError(c, s.groupRow+c.pageRow, err)
			}
		}
	}
	return nil
}

// fail ends the source after a file-level error: what follows the error
// cannot be trusted.
func (s *parquetSource) fail(err error) error {
	s.buf.Release()
	s.done = true
	return err
}

func (s *parquetSource) columnError(c *columnReader, row int64, err error) error {
	if errors.Is(err, parquet.ErrCorrupted) {
		if damaged := s.damagedPageError(c); damaged != nil {
			return damaged
		}
	}
	return fileErr(s.name, row, c.name, fmt.Errorf("row group %d: %w", s.group, err))
}

// openNextRowGroup starts the next row group with rows, whose first row is
// the file's data row fileRow.
func (s *parquetSource) openNextRowGroup(fileRow int64) error {
	if err := s.closeRowGroup(fileRow); err != nil {
		return err
	}
	for s.nextGroup < len(s.rowGroups) {
		g := s.rowGroups[s.nextGroup]
		s.group = s.nextGroup
		s.nextGroup++
		if g.NumRows() == 0 {
			continue
		}
		chunks := g.ColumnChunks()
		meta := s.file.Metadata().RowGroups
		for _, c := range s.columns {
			if c.index >= len(chunks) || s.group >= len(meta) || c.index >= len(meta[s.group].Columns) {
				return s.columnError(c, fileRow, fmt.Errorf("%w: %d column chunks", errMalformed, len(chunks)))
			}
			unchecked, err := checkColumnChunk(s.reader, s.size, &meta[s.group].Columns[c.index].MetaData)
			if err != nil {
				return s.columnError(c, fileRow, err)
			}
			if unchecked > 0 && !s.toldUnchecked {
				s.toldUnchecked = true
				s.opts.Logger.Info("ingest: pages without checksums: damage inside them cannot be detected",
					"file", s.name, "column", c.name, "row_group", s.group)
			}
			if err := c.open(chunks[c.index]); err != nil {
				return s.columnError(c, fileRow, err)
			}
		}
		s.groupRow, s.groupLeft = fileRow, g.NumRows()
		return nil
	}
	return fileErr(s.name, fileRow, "", fmt.Errorf("%w: row groups end before the file's %d rows", errMalformed, s.total))
}

// closeRowGroup checks that every column of the finished row group ended
// with its rows, the last before the file's data row fileRow, and releases
// its pages.
func (s *parquetSource) closeRowGroup(fileRow int64) error {
	var first error
	for _, c := range s.columns {
		if err := c.close(); err != nil && first == nil {
			first = s.columnError(c, fileRow, err)
		}
	}
	return first
}

func (s *parquetSource) Close() error {
	if s.buf != nil {
		s.buf.Release()
		s.buf = nil
	}
	s.done = true
	for _, c := range s.columns {
		c.release()
	}
	if s.owned != nil {
		err := s.owned.Close()
		s.owned = nil
		if err != nil {
			return fmt.Errorf("ingest: closing %s: %w", s.name, err)
		}
	}
	return nil
}

// guard runs calls into the Parquet library, which may panic on malformed
// input (an index out of range in a corrupt page); the file is then
// reported as malformed instead of crashing the process.
func guard(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errMalformed, r)
		}
	}()
	return f()
}
