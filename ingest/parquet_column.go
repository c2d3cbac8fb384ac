package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"

	"github.com/mvml/mvml/schemas"
)

var errShortColumn = fmt.Errorf("%w: column chunk ends before the row group's rows", errMalformed)

// columnReader streams one leaf column of a Parquet file into the batch
// buffers, one page at a time.
type columnReader struct {
	name     string
	role     fieldRole
	view     int
	feature  int // feature index within the view, for roleFeature
	index    int // leaf column index in a row group
	unsigned bool
	maxDef   byte
	maxRep   byte

	pages     parquet.Pages // of the current column chunk
	page      parquet.Page  // held while its values are read
	exhausted bool          // the column chunk has no more pages
	vals      pageValues
	def, rep  []byte // levels of the page, aliasing it
	vi        int    // next value of vals
	li        int    // next entry of def and rep
	// Rows of the column chunk before the current page (the one being
	// read, or failing to be read), and rows that start in it.
	pageRow, pageRows int64

	// The column chunk's dictionary, converted once for all its pages.
	dictReady  bool
	dictFloats []float64
	dictInts   []int64
}

// newColumnReader checks that col can feed role: a top-level numeric leaf
// with one value per row, or for a list view a column with exactly one
// numeric leaf repeated once.
func newColumnReader(col *parquet.Column, name string, role fieldRole) (*columnReader, error) {
	leaf := col
	if role == roleList {
		leaves := leavesOf(col, nil)
		if len(leaves) != 1 {
			return nil, fmt.Errorf("is a group of %d columns, want a list of numbers", len(leaves))
		}
		leaf = leaves[0]
		switch r := leaf.MaxRepetitionLevel(); {
		case r == 0:
			return nil, errors.New("is not a list, want a list of numbers per row")
		case r > 1:
			return nil, fmt.Errorf("is a list nested %d deep, want a flat list of numbers", r)
		}
	} else {
		if !col.Leaf() {
			return nil, errors.New("is a group, want one number per row")
		}
		if col.MaxRepetitionLevel() != 0 {
			return nil, errors.New("is repeated, want one number per row")
		}
	}
	unsigned, err := checkNumeric(leaf, role == roleID)
	if err != nil {
		return nil, err
	}
	return &columnReader{
		name:     name,
		role:     role,
		index:    leaf.Index(),
		unsigned: unsigned,
		maxDef:   byte(leaf.MaxDefinitionLevel()),
		maxRep:   byte(leaf.MaxRepetitionLevel()),
	}, nil
}

func leavesOf(col *parquet.Column, leaves []*parquet.Column) []*parquet.Column {
	if col.Leaf() {
		return append(leaves, col)
	}
	for _, c := range col.Columns() {
		leaves = leavesOf(c, leaves)
	}
	return leaves
}

// checkNumeric accepts plain integers of any width, signed or not, and
// unless integer is set floats and doubles. Decimals, dates, timestamps and
// the like are rejected: a plain conversion would lose their meaning.
func checkNumeric(leaf *parquet.Column, integer bool) (unsigned bool, err error) {
	typ := leaf.Type()
	kind := typ.Kind()
	want := "float, double, int32 or int64"
	ok := kind == parquet.Int32 || kind == parquet.Int64
	if integer {
		want = "int32 or int64"
	} else {
		ok = ok || kind == parquet.Float || kind == parquet.Double
	}
	if lt := typ.LogicalType(); ok && lt != nil && lt.Value != nil {
		it, isInt := lt.Value.(*format.IntType)
		ok = isInt
		unsigned = isInt && !it.IsSigned
	}
	if !ok {
		return false, fmt.Errorf("has type %s, want %s", typ, want)
	}
	return unsigned, nil
}

// read decodes batch rows [first, first+n) of the column into b.
func (c *columnReader) read(b *schemas.RecordBuilder, rows *rowSink, first, n int) error {
	switch c.role {
	case roleID:
		ids := b.IDs()[first : first+n]
		return c.scalars(n,
			func(row, vi, m int) { c.vals.ints(ids[row:row+m], vi) },
			func(row int) { rows.reject(first+row, c.name, "id is missing") })
	case roleLabel:
		labels := b.Labels()[first : first+n]
		return c.scalars(n,
			func(row, vi, m int) {
				c.vals.scatter(labels[row:row+m], 1, vi, m)
				b.SetLabelsValid(first+row, m, true)
			},
			func(row int) { b.SetLabel(first+row, 0, false) })
	case roleFeature:
		dim := b.Dim(c.view)
		dst := b.View(c.view)[first*dim+c.feature:]
		return c.scalars(n,
			func(row, vi, m int) { c.vals.scatter(dst[row*dim:], dim, vi, m) },
			func(row int) { rows.reject(first+row, c.name, "value is null") })
	default:
		dim := b.Dim(c.view)
		return c.lists(b.View(c.view)[first*dim:(first+n)*dim], dim, rows, first)
	}
}

// scalars walks the next n rows of a one-value-per-row column: present gets
// runs of rows that have a value (batch-relative row, index of its value
// in c.vals, run length), null the rows that have none.
func (c *columnReader) scalars(n int, present func(row, vi, m int), null func(row int)) error {
	for row := 0; row < n; {
		if err := c.fill(); err != nil {
			return err
		}
		if c.maxDef == 0 {
			m := min(n-row, c.vals.n-c.vi)
			present(row, c.vi, m)
			c.vi += m
			row += m
			continue
		}
		m := min(n-row, len(c.def)-c.li)
		def := c.def[c.li : c.li+m]
		if bytes.Count(def, []byte{c.maxDef}) == m {
			present(row, c.vi, m)
			c.vi += m
		} else {
			for k, d := range def {
				if d == c.maxDef {
					present(row+k, c.vi, 1)
					c.vi++
				} else {
					null(row + k)
				}
			}
		}
		c.li += m
		row += m
	}
	return nil
}

// lists decodes len(dst)/dim rows of a list column into dst (row-major).
func (c *columnReader) lists(dst []float64, dim int, rows *rowSink, first int) error {
	n := len(dst) / dim
	for r := 0; r < n; {
		if err := c.fill(); err != nil {
			return err
		}
		if c.rep[c.li] != 0 {
			return fmt.Errorf("%w: a row's values do not start at a row boundary", errMalformed)
		}
		if k := c.regularRows(n-r, dim); k > 0 {
			c.vals.scatter(dst[r*dim:(r+k)*dim], 1, c.vi, k*dim)
			c.vi += k * dim
			c.li += k * dim
			r += k
			continue
		}
		reason, err := c.oneList(dst[r*dim : (r+1)*dim])
		if err != nil {
			return err
		}
		if reason != "" {
			rows.reject(first+r, c.name, reason)
		}
		r++
	}
	return nil
}

// regularRows counts the rows from the current entry, up to maxRows, that
// hold exactly dim values, no nulls, and visibly end within the page.
func (c *columnReader) regularRows(maxRows, dim int) int {
	k := 0
	for li := c.li; k < maxRows; li += dim {
		end := li + dim
		if end >= len(c.rep) || c.rep[end] != 0 ||
			bytes.IndexByte(c.rep[li+1:end], 0) >= 0 ||
			bytes.Count(c.def[li:end], []byte{c.maxDef}) != dim {
			break
		}
		k++
	}
	return k
}

// oneList decodes the row at the current entry into out, following it onto
// the next page if the page ends with it (data pages v1 allow that). It
// returns why the row cannot be used, or "".
func (c *columnReader) oneList(out []float64) (reason string, err error) {
	dim := len(out)
	values, entries, nulls := 0, 0, 0
	for {
		end := c.li + 1
		if entries > 0 {
			end = c.li
		}
		for end < len(c.rep) && c.rep[end] != 0 {
			end++
		}
		for _, d := range c.def[c.li:end] {
			if d != c.maxDef {
				nulls++
				continue
			}
			if values < dim {
				out[values] = c.vals.at(c.vi)
			}
			values++
			c.vi++
		}
		entries += end - c.li
		c.li = end
		if c.li < len(c.rep) {
			break
		}
		if err := c.nextNonEmptyPage(); err != nil {
			return "", err
		}
		if c.exhausted || c.rep[c.li] == 0 {
			break
		}
	}
	switch {
	case entries == 1 && nulls == 1:
		return "list is null or empty", nil
	case nulls > 0:
		return fmt.Sprintf("list has %d null elements", nulls), nil
	case values != dim:
		return fmt.Sprintf("list has %d values, want %d", values, dim), nil
	}
	return "", nil
}

// remaining is the number of unread entries of the current page.
func (c *columnReader) remaining() int {
	if c.maxDef == 0 {
		return c.vals.n - c.vi
	}
	return len(c.def) - c.li
}

// fill makes sure the current page has unread entries.
func (c *columnReader) fill() error {
	if c.remaining() > 0 {
		return nil
	}
	if err := c.nextNonEmptyPage(); err != nil {
		return err
	}
	if c.exhausted {
		return errShortColumn
	}
	return nil
}

// nextNonEmptyPage moves to the next page that has entries, or sets
// exhausted at the end of the column chunk.
func (c *columnReader) nextNonEmptyPage() error {
	for !c.exhausted {
		if err := c.nextPage(); err != nil {
			return err
		}
		if c.remaining() > 0 {
			return nil
		}
	}
	return nil
}

func (c *columnReader) nextPage() error {
	c.dropPage()
	c.pageRow, c.pageRows = c.pageRow+c.pageRows, 0
	if c.pages == nil {
		c.exhausted = true
		return nil
	}
	var page parquet.Page
	err := guard(func() (err error) {
		page, err = c.pages.ReadPage()
		return err
	})
	if errors.Is(err, io.EOF) {
		c.exhausted = true
		return nil
	}
	if err != nil {
		return err
	}
	c.page = page
	return c.load(page)
}

// load points the reader at the values and levels of page, after checking
// that they agree with each other and with the column.
func (c *columnReader) load(page parquet.Page) error {
	var (
		data     encoding.Values
		dict     parquet.Dictionary
		dictData encoding.Values
	)
	err := guard(func() error {
		data = page.Data()
		c.def, c.rep = page.DefinitionLevels(), page.RepetitionLevels()
		if dict = page.Dictionary(); dict != nil && !c.dictReady {
			dictData = dict.Page().Data()
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.vi, c.li = 0, 0
	if dict != nil {
		if data.Kind() != encoding.Int32 {
			return fmt.Errorf("%w: dictionary indexes of type %s", errMalformed, data.Kind())
		}
		if !c.dictReady {
			if err := c.convertDictionary(dictData); err != nil {
				return err
			}
		}
		size := len(c.dictFloats)
		if c.role == roleID {
			size = len(c.dictInts)
		}
		idx := data.Int32()
		for _, i := range idx {
			if uint32(i) >= uint32(size) {
				return fmt.Errorf("%w: dictionary index %d of %d entries", errMalformed, i, size)
			}
		}
		c.vals = pageValues{kind: valsDict, n: len(idx), idx: idx, dictFloats: c.dictFloats, dictInts: c.dictInts}
	} else {
		if err := c.vals.set(data, c.unsigned, c.role == roleID); err != nil {
			return err
		}
	}
	switch {
	case c.maxDef == 0 && len(c.def) != 0:
		return fmt.Errorf("%w: definition levels in a required column", errMalformed)
	case c.maxRep == 0 && len(c.rep) != 0:
		return fmt.Errorf("%w: repetition levels in an unrepeated column", errMalformed)
	case c.maxRep > 0 && len(c.rep) != len(c.def):
		return fmt.Errorf("%w: %d repetition levels but %d definition levels", errMalformed, len(c.rep), len(c.def))
	case c.maxDef > 0 && bytes.Count(c.def, []byte{c.maxDef}) != c.vals.n:
		return fmt.Errorf("%w: %d values for %d defined entries", errMalformed, c.vals.n, bytes.Count(c.def, []byte{c.maxDef}))
	}
	switch {
	case c.maxRep > 0:
		c.pageRows = int64(bytes.Count(c.rep, []byte{0}))
	case c.maxDef > 0:
		c.pageRows = int64(len(c.def))
	default:
		c.pageRows = int64(c.vals.n)
	}
	return nil
}

// convertDictionary converts the column chunk's dictionary: to integers
// for the id column, to float64 for any other.
func (c *columnReader) convertDictionary(d encoding.Values) error {
	var v pageValues
	if err := v.set(d, c.unsigned, c.role == roleID); err != nil {
		return err
	}
	if c.role == roleID {
		c.dictInts = slices.Grow(c.dictInts[:0], v.n)[:v.n]
		v.ints(c.dictInts, 0)
	} else {
		c.dictFloats = slices.Grow(c.dictFloats[:0], v.n)[:v.n]
		v.scatter(c.dictFloats, 1, 0, v.n)
	}
	c.dictReady = true
	return nil
}

// open starts reading a column chunk.
func (c *columnReader) open(chunk parquet.ColumnChunk) error {
	c.release()
	c.exhausted = false
	c.dictReady = false
	c.pageRow, c.pageRows = 0, 0
	return guard(func() error {
		c.pages = chunk.Pages()
		return nil
	})
}

// close checks that the column chunk holds no more values than the rows
// read from it, and releases it.
func (c *columnReader) close() error {
	if c.pages == nil {
		return nil
	}
	defer c.release()
	if c.remaining() == 0 {
		if err := c.nextNonEmptyPage(); err != nil {
			return err
		}
	}
	if c.remaining() > 0 {
		return fmt.Errorf("%w: column chunk has more values than the row group's rows", errMalformed)
	}
	return nil
}

func (c *columnReader) dropPage() {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	c.vals = pageValues{}
	c.def, c.rep = nil, nil
	c.vi, c.li = 0, 0
}

// release frees the page and the column chunk's page reader.
func (c *columnReader) release() {
	c.dropPage()
	if c.pages != nil {
		c.pages.Close()
		c.pages = nil
	}
	c.exhausted = true
}

// rowSink records the rows of a batch that cannot be decoded.
type rowSink struct {
	rejects  *rejectSet
	source   string
	fileRow0 int64 // file row of batch row 0
}

func (s *rowSink) reject(batchRow int, column, reason string) {
	s.rejects.add(batchRow, schemas.RowError{Source: s.source, Row: s.fileRow0 + int64(batchRow), Column: column, Reason: reason})
}
