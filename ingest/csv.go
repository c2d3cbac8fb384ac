package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/mvml/mvml/schemas"
)

// csvReadBuffer is the size of the buffered reader under the CSV splitter;
// longer lines are assembled in a scratch buffer.
const csvReadBuffer = 1 << 16

// csvInitialRows is the first allocation of a CSV batch, which then doubles
// up to the batch size: the number of rows left is unknown, and one small
// file should not cost a full batch of memory.
const csvInitialRows = 1024

// csvField says what one header column feeds.
type csvField struct {
	role    fieldRole
	view    int
	feature int
}

type csvSource struct {
	name     string
	opts     Options
	header   []string
	fields   []csvField
	hasID    bool
	records  csvRecords
	gz       *gzip.Reader
	owned    io.Closer // the file opened by Open, closed with the source
	buf      *schemas.RecordBuilder
	row      int64 // data rows consumed so far
	lastRows int   // rows of the previous batch
	idBase   int64
	done     bool
	scratch  []float64 // values of one list cell
}

// NewCSV reads CSV with a header row from r: the format of the reference
// data (id,label,x_0,...). Gzip-compressed input is recognised by its magic
// number and decompressed. name is used in errors and Batch.Source. Fields
// may be quoted (RFC 4180, quotes doubled inside, line breaks allowed);
// blanks around a number are ignored, blank lines are skipped and do not
// count as rows. A list view is one field holding its values separated by
// commas, semicolons or blanks, optionally in brackets: "[0.5, 1, 2]".
// Close does not close r.
func NewCSV(r io.Reader, name string, spec *schemas.ViewSpec, opts Options) (Source, error) {
	if spec == nil {
		return nil, errors.New("ingest: nil view spec")
	}
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	return newCSVSource(r, name, spec, opts, 0, nil)
}

func newCSVSource(r io.Reader, name string, spec *schemas.ViewSpec, opts Options, idBase int64, owned io.Closer) (*csvSource, error) {
	s := &csvSource{name: name, opts: opts, owned: owned, idBase: idBase}
	in := bufio.NewReaderSize(r, csvReadBuffer)
	if magic, _ := in.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(in)
		if err != nil {
			s.Close()
			return nil, fileErr(name, -1, "", fmt.Errorf("gzip: %w", err))
		}
		s.gz = gz
		in = bufio.NewReaderSize(gz, csvReadBuffer)
	}
	s.records.in = in
	if err := s.readHeader(spec); err != nil {
		s.Close()
		return nil, err
	}
	s.buf = schemas.NewRecordBuilder(opts.Allocator, spec)
	return s, nil
}

func (s *csvSource) readHeader(spec *schemas.ViewSpec) error {
	malformed, err := s.records.next()
	switch {
	case errors.Is(err, io.EOF):
		return fileErr(s.name, -1, "", errors.New("empty file: no header row"))
	case err != nil:
		return fileErr(s.name, -1, "", fmt.Errorf("reading header: %w", err))
	case malformed != "":
		return fileErr(s.name, -1, "", fmt.Errorf("header: %s", malformed))
	}
	s.header = s.records.fieldStrings()
	s.header[0] = strings.TrimPrefix(s.header[0], "\uFEFF")
	s.fields = make([]csvField, len(s.header))

	index := make(map[string]int, len(s.header))
	dup := map[string]bool{}
	for i, h := range s.header {
		if _, ok := index[h]; ok {
			dup[h] = true
		}
		index[h] = i
	}
	var missing, dups []string
	assign := func(name string, f csvField, required bool) bool {
		i, ok := index[name]
		if !ok {
			if required {
				missing = append(missing, name)
			}
			return false
		}
		if dup[name] {
			dups = append(dups, name)
		}
		s.fields[i] = f
		return true
	}
	for _, c := range specColumns(spec) {
		found := assign(c.name, csvField{role: c.role, view: c.view, feature: c.feature}, c.required())
		switch {
		case c.role == roleID:
			s.hasID = found
		case c.role == roleLabel && !found && s.opts.RequireLabel:
			return fileErr(s.name, -1, spec.Label, errors.New("label column is missing"))
		}
	}
	if len(missing) > 0 {
		return fileErr(s.name, -1, missing[0], errors.New(describeMissing(spec, missing)))
	}
	if len(dups) > 0 {
		return fileErr(s.name, -1, dups[0], errors.New("column appears more than once in the header"))
	}
	return nil
}

func (s *csvSource) rowsRead() int64 { return s.row }

func (s *csvSource) Next(ctx context.Context) (Batch, error) {
	if s.done || s.buf == nil {
		return Batch{}, io.EOF
	}
	// The context is checked between batches only: a batch is bounded, and
	// stopping inside one would drop the rows already consumed.
	if err := ctx.Err(); err != nil {
		return Batch{}, fmt.Errorf("ingest: %s: %w", s.name, err)
	}
	size := s.opts.BatchSize
	// After a full batch the file likely has more: skip the growth steps.
	s.buf.Reserve(min(size, max(csvInitialRows, s.lastRows)))
	var (
		rows    []int64
		rejects []schemas.RowError
		k       int // rows decoded into the batch
	)
	for consumed := 0; consumed < size; consumed++ {
		malformed, err := s.records.next()
		if errors.Is(err, io.EOF) {
			s.done = true
			break
		}
		if err != nil {
			// Nothing after a read error can be trusted.
			s.buf.Release()
			s.done = true
			return Batch{}, fileErr(s.name, s.row, "", err)
		}
		if k == s.buf.Cap() {
			s.buf.Reserve(min(size, 2*k))
		}
		column, reason := malformedColumn, malformed
		if malformed == "" {
			column, reason = s.decodeRow(k)
		}
		if reason == "" {
			rows = append(rows, s.row)
			k++
		} else {
			rejects = append(rejects, schemas.RowError{Source: s.name, Row: s.row, Column: column, Reason: reason})
		}
		s.row++
	}
	if k == 0 && len(rejects) == 0 {
		s.buf.Release()
		return Batch{}, io.EOF
	}
	s.lastRows = k
	s.buf.SetLen(k)
	return Batch{Record: s.buf.NewRecord(), Source: s.name, Rows: rows, Rejects: rejects}, nil
}

// malformedColumn is the column of a record whose quoting is broken: the
// whole record is unreadable, not one field.
const malformedColumn = ""

// decodeRow decodes the current record into batch row k. It returns the
// column and reason of the first problem, or an empty reason.
func (s *csvSource) decodeRow(k int) (column, reason string) {
	r := &s.records
	if len(r.ends) != len(s.fields) {
		if len(r.ends) < len(s.fields) {
			column = s.header[len(r.ends)]
		}
		return column, fmt.Sprintf("row has %d fields, header has %d", len(r.ends), len(s.fields))
	}
	b := s.buf
	if !s.hasID {
		b.IDs()[k] = s.idBase + s.row
	}
	b.SetLabel(k, 0, false)
	start := 0
	for i, f := range s.fields {
		end := r.ends[i]
		field := trimBlanks(r.data[start:end])
		start = end + 1
		switch f.role {
		case roleFeature:
			v, ok := parseFloat(field)
			if !ok {
				return s.header[i], describeBadNumber(field)
			}
			b.View(f.view)[k*b.Dim(f.view)+f.feature] = v
		case roleList:
			if reason := s.decodeList(field, b.View(f.view)[k*b.Dim(f.view):(k+1)*b.Dim(f.view)]); reason != "" {
				return s.header[i], reason
			}
		case roleID:
			if len(field) == 0 {
				return s.header[i], "id is missing"
			}
			id, err := strconv.ParseInt(string(field), 10, 64)
			if err != nil {
				return s.header[i], fmt.Sprintf("id %s is not an integer", quoteCell(field))
			}
			b.IDs()[k] = id
		case roleLabel:
			if len(field) == 0 {
				continue
			}
			v, ok := parseFloat(field)
			if !ok {
				return s.header[i], "label " + describeBadNumber(field)
			}
			b.SetLabel(k, v, true)
		}
	}
	return "", ""
}

// decodeList parses one list cell into dst, which has the view's dimension.
func (s *csvSource) decodeList(field []byte, dst []float64) string {
	field = bytes.TrimSpace(field)
	if len(field) >= 2 && field[0] == '[' && field[len(field)-1] == ']' {
		field = field[1 : len(field)-1]
	}
	vals := s.scratch[:0]
	for len(field) > 0 {
		i := bytes.IndexAny(field, ",; \t")
		var item []byte
		if i < 0 {
			item, field = field, nil
		} else {
			item, field = field[:i], field[i+1:]
		}
		if len(item) == 0 {
			continue
		}
		v, ok := parseFloat(item)
		if !ok {
			s.scratch = vals
			return fmt.Sprintf("list item %d: %s", len(vals), describeBadNumber(item))
		}
		vals = append(vals, v)
	}
	s.scratch = vals
	if len(vals) != len(dst) {
		return fmt.Sprintf("list has %d values, want %d", len(vals), len(dst))
	}
	copy(dst, vals)
	return ""
}

// parseFloat accepts what strconv does, including NaN and ±Inf; a value
// too large for float64 is ±Inf, as schemas.CheckRecord will report.
func parseFloat(field []byte) (float64, bool) {
	if v, ok := parseDecimal(field); ok {
		return v, true
	}
	if len(field) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(field), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return v, true
}

func describeBadNumber(field []byte) string {
	if len(field) == 0 {
		return "value is empty"
	}
	return fmt.Sprintf("value %s is not a number", quoteCell(field))
}

func trimBlanks(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func (s *csvSource) Close() error {
	if s.buf != nil {
		s.buf.Release()
		s.buf = nil
	}
	s.done = true
	var errs []error
	if s.gz != nil {
		errs = append(errs, s.gz.Close())
		s.gz = nil
	}
	if s.owned != nil {
		errs = append(errs, s.owned.Close())
		s.owned = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ingest: closing %s: %w", s.name, err)
	}
	return nil
}

// csvRecords splits CSV input into records. After next, field i of the
// record is data[start:ends[i]], where start is 0 for the first field and
// ends[i-1]+1 otherwise; data is valid until the following call.
type csvRecords struct {
	in   *bufio.Reader
	data []byte
	ends []int
	long []byte // a line longer than the read buffer
	out  []byte // unquoted fields of a record with quotes
}

// next reads one record, skipping blank lines. It returns io.EOF at the end
// of input, an error if the input cannot be read, and a non-empty reason
// when the record's quoting is broken (the record is consumed either way).
func (r *csvRecords) next() (malformed string, err error) {
	var line []byte
	for {
		if line, err = r.readLine(); err != nil {
			return "", err
		}
		if len(trimEOL(line)) > 0 {
			break
		}
	}
	if bytes.IndexByte(line, '"') >= 0 {
		return r.splitQuoted(line)
	}
	line = trimEOL(line)
	r.data = line
	r.ends = r.ends[:0]
	for off := 0; ; {
		i := bytes.IndexByte(line[off:], ',')
		if i < 0 {
			r.ends = append(r.ends, len(line))
			return "", nil
		}
		r.ends = append(r.ends, off+i)
		off += i + 1
	}
}

// readLine returns the next line with its line break, io.EOF when no input
// is left. The slice is valid until the next call.
func (r *csvRecords) readLine() ([]byte, error) {
	line, err := r.in.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.long = append(r.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = r.in.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	switch {
	case err == nil:
		return line, nil
	case errors.Is(err, io.EOF) && len(line) > 0:
		return line, nil
	default:
		return nil, err
	}
}

// splitQuoted splits a record that has quotes, reading more lines while a
// quoted field spans line breaks. Fields are unquoted into r.out, separated
// by one byte so that the field layout of r.data holds.
func (r *csvRecords) splitQuoted(line []byte) (malformed string, err error) {
	out, ends := r.out[:0], r.ends[:0]
	defer func() { r.out, r.ends, r.data = out, ends, out }()
	src, i := line, 0
	for {
		if i < len(src) && src[i] == '"' {
			i++
			for {
				j := bytes.IndexByte(src[i:], '"')
				if j < 0 {
					out = append(out, src[i:]...)
					more, err := r.readLine()
					if errors.Is(err, io.EOF) {
						ends = append(ends, len(out))
						return "unterminated quoted field", nil
					}
					if err != nil {
						return "", err
					}
					src, i = more, 0
					continue
				}
				out = append(out, src[i:i+j]...)
				i += j + 1
				if i < len(src) && src[i] == '"' {
					out = append(out, '"')
					i++
					continue
				}
				break
			}
			rest := src[i:]
			switch {
			case len(rest) > 0 && rest[0] == ',':
				ends = append(ends, len(out))
				out = append(out, ',')
				i++
			case len(trimEOL(rest)) == 0:
				ends = append(ends, len(out))
				return "", nil
			default:
				ends = append(ends, len(out))
				return fmt.Sprintf("text after the closing quote of field %d", len(ends)-1), nil
			}
			continue
		}
		j := bytes.IndexByte(src[i:], ',')
		if j < 0 {
			out = append(out, trimEOL(src[i:])...)
			ends = append(ends, len(out))
			return "", nil
		}
		out = append(out, src[i:i+j]...)
		ends = append(ends, len(out))
		out = append(out, ',')
		i += j + 1
	}
}

// fieldStrings copies the current record's fields.
func (r *csvRecords) fieldStrings() []string {
	fields := make([]string, len(r.ends))
	start := 0
	for i, end := range r.ends {
		fields[i] = string(r.data[start:end])
		start = end + 1
	}
	return fields
}

func trimEOL(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
	}
	return line
}

// parseDecimal parses a plain decimal (an optional sign, digits with an
// optional point, an optional exponent) with the conversion the JSON
// decoder uses. It reports false for anything else (hex, NaN, Inf,
// underscores...) and for the rare numbers decimal.float declines, which
// then go to strconv.
func parseDecimal(b []byte) (float64, bool) {
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg, i = b[0] == '-', 1
	}
	digits := i
	i, mant := gatherEights(b, i, 0)
	i, mant = gatherDigits(b, i, mant)
	nd, exp := i-digits, 0
	if i < len(b) && b[i] == '.' {
		i++
		frac := i
		i, mant = gatherEights(b, i, mant)
		i, mant = gatherDigits(b, i, mant)
		nd += i - frac
		exp = frac - i
	}
	if nd == 0 {
		return 0, false
	}
	mantEnd, e := i, 0
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		var ok bool
		if i, e, ok = readExponent(b, i+1); !ok {
			return 0, false
		}
	}
	if i != len(b) {
		return 0, false
	}
	d := decimal{mant: mant, exp: exp + e, neg: neg}
	if nd > maxMantDigits {
		d = longDecimal(b[digits:mantEnd], e, neg)
	} else if v, ok := exactDecimal(d.mant, d.exp, d.neg); ok {
		return v, true
	}
	return d.float()
}
