package ingest

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mvml/mvml/schemas"
)

// kafkaMaxDepth bounds the nesting of JSON values the decoder skips, so a
// hostile message cannot exhaust the stack.
const kafkaMaxDepth = 256

// refKind says what a top-level field of a message feeds.
type refKind uint8

const (
	refNone    refKind = iota
	refID              // the spec's id field
	refLabel           // the spec's label field
	refView            // a whole view as an array of numbers
	refFeature         // one feature of a view with flat columns
)

type fieldRef struct {
	kind    refKind
	view    int
	feature int
}

// viewForm is how a message gave a view.
type viewForm uint8

const (
	formNone viewForm = iota
	formArray
	formFlat
)

// prefixView is a view declared with prefix+dim: its flat fields are
// prefix0..prefix{dim-1}, recognised without a map of every name.
type prefixView struct {
	prefix string
	view   int
	dim    int
}

// kafkaDecoder decodes message values into rows: one JSON object per
// message (see the package documentation for the format). It writes a
// row's views where its caller says (the batch's Arrow buffers) and keeps
// its other scratch space between messages, so decoding a row allocates
// nothing unless the row is rejected or a field name has escapes. It is
// not safe for concurrent use.
type kafkaDecoder struct {
	spec         *schemas.ViewSpec
	requireLabel bool
	fields       map[string]fieldRef
	prefixes     []prefixView

	// The row being decoded.
	id       int64
	hasID    bool
	label    float64
	hasLabel bool
	sawLabel bool        // the label field was given, maybe as null
	vals     [][]float64 // per view, its dimension: where decode writes
	dims     []int
	form     []viewForm
	count    []int      // values given so far per view (array items or flat fields)
	seen     [][]uint32 // per flat view and feature, the gen of the row that set it
	gen      uint32

	s   jsonScanner
	key []byte // an unescaped field name

	// scanArrays has arrays of numbers read by scanArray where it can
	// (false: every item by scanFloat, the tests' reference).
	scanArrays bool
}

func newKafkaDecoder(spec *schemas.ViewSpec, requireLabel bool) *kafkaDecoder {
	d := &kafkaDecoder{
		spec:         spec,
		requireLabel: requireLabel,
		fields:       map[string]fieldRef{},
		dims:         spec.Dims(),
		form:         make([]viewForm, len(spec.Views)),
		count:        make([]int, len(spec.Views)),
		seen:         make([][]uint32, len(spec.Views)),
		scanArrays:   true,
	}
	for l := range spec.Views {
		v := &spec.Views[l]
		switch {
		case v.List != "":
			// A list view has no flat form.
		case len(v.Columns) > 0:
			d.seen[l] = make([]uint32, v.Dimension())
			for j, c := range v.Columns {
				d.fields[c] = fieldRef{kind: refFeature, view: l, feature: j}
			}
		default:
			d.seen[l] = make([]uint32, v.Dimension())
			d.prefixes = append(d.prefixes, prefixView{prefix: v.Prefix, view: l, dim: v.Dim})
		}
	}
	// View names, then id and label, win over flat column names.
	for l := range spec.Views {
		d.fields[spec.Views[l].Name] = fieldRef{kind: refView, view: l}
	}
	d.fields[spec.ID] = fieldRef{kind: refID}
	d.fields[spec.Label] = fieldRef{kind: refLabel}
	return d
}

// lookup says what the field name feeds.
func (d *kafkaDecoder) lookup(name []byte) fieldRef {
	if ref, ok := d.fields[string(name)]; ok {
		return ref
	}
	for _, p := range d.prefixes {
		if len(name) <= len(p.prefix) || string(name[:len(p.prefix)]) != p.prefix {
			continue
		}
		if j, ok := parseIndex(name[len(p.prefix):]); ok && j < p.dim {
			return fieldRef{kind: refFeature, view: p.view, feature: j}
		}
	}
	return fieldRef{}
}

// parseIndex parses a feature index as ColumnNames writes it: decimal
// digits without leading zeros.
func parseIndex(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// rowError is why a message was rejected: the field concerned (or "") and
// the reason.
type rowError struct {
	column string
	reason string
}

// decode decodes one message value into d.id, d.label, d.hasLabel and
// vals, one slice of each view's dimension. It returns nil or the first
// problem found; the values of a rejected message are left half written.
func (d *kafkaDecoder) decode(data []byte, vals [][]float64) *rowError {
	d.vals = vals
	d.gen++
	if d.gen == 0 { // wrapped: forget every mark
		for _, s := range d.seen {
			clear(s)
		}
		d.gen = 1
	}
	d.hasID, d.hasLabel, d.sawLabel, d.label = false, false, false, 0
	clear(d.form)
	clear(d.count)
	s := &d.s
	s.reset(data)

	s.skipSpace()
	if s.eof() {
		return &rowError{reason: "message is empty, want a JSON object"}
	}
	if c := s.peek(); c != '{' {
		kind := describeKind(c)
		if err := s.skipValue(0); err != nil {
			return err
		}
		if err := s.end(); err != nil {
			return err
		}
		return &rowError{reason: fmt.Sprintf("message is %s, want a JSON object", kind)}
	}
	s.pos++
	s.skipSpace()
	if s.consume('}') {
		if err := s.end(); err != nil {
			return err
		}
		return d.finish()
	}
	for {
		s.skipSpace()
		if !s.consume('"') {
			return s.syntaxError("want a field name")
		}
		name, escaped, err := s.readString()
		if err != nil {
			return err
		}
		if escaped {
			d.key = unescapeString(d.key[:0], name)
			name = d.key
		}
		s.skipSpace()
		if !s.consume(':') {
			return s.syntaxError("want ':' after a field name")
		}
		s.skipSpace()
		if err := d.field(d.lookup(name)); err != nil {
			return err
		}
		more, err := s.separator('}', "after a field")
		if err != nil {
			return err
		}
		if !more {
			break
		}
	}
	if err := s.end(); err != nil {
		return err
	}
	return d.finish()
}

// field decodes the value of one field of the message object.
func (d *kafkaDecoder) field(ref fieldRef) *rowError {
	s := &d.s
	switch ref.kind {
	case refID:
		return d.decodeID()
	case refLabel:
		return d.decodeLabel()
	case refView:
		return d.decodeArray(ref.view)
	case refFeature:
		return d.decodeFeature(ref.view, ref.feature)
	default:
		return s.skipValue(0)
	}
}

// givenTwice rejects a message that gives a field mvml reads twice: which
// of its values is meant cannot be known.
func givenTwice(field string) *rowError {
	return &rowError{column: field, reason: fmt.Sprintf("field %q is given twice", field)}
}

func (d *kafkaDecoder) decodeID() *rowError {
	s := &d.s
	name := d.spec.ID
	if d.hasID {
		return givenTwice(name)
	}
	if c := s.peek(); c != '-' && !isDigit(c) {
		if err := s.skipValue(0); err != nil {
			return err
		}
		return &rowError{column: name, reason: fmt.Sprintf("id is %s, want an integer", describeKind(c))}
	}
	tok, integer, err := s.readNumber()
	if err != nil {
		return err
	}
	if !integer {
		return &rowError{column: name, reason: fmt.Sprintf("id %s is not an integer", quoteCell(tok))}
	}
	id, perr := strconv.ParseInt(string(tok), 10, 64)
	if perr != nil {
		return &rowError{column: name, reason: fmt.Sprintf("id %s is out of the int64 range", quoteCell(tok))}
	}
	d.id, d.hasID = id, true
	return nil
}

func (d *kafkaDecoder) decodeLabel() *rowError {
	s := &d.s
	name := d.spec.Label
	if d.sawLabel {
		return givenTwice(name)
	}
	d.sawLabel = true
	c := s.peek()
	if c == 'n' {
		if err := s.literal("null"); err != nil {
			return err
		}
		d.hasLabel, d.label = false, 0
		return nil
	}
	if c != '-' && !isDigit(c) {
		if err := s.skipValue(0); err != nil {
			return err
		}
		return &rowError{column: name, reason: fmt.Sprintf("label is %s, want a number or null", describeKind(c))}
	}
	start := s.pos
	v, overflow, err := s.readFloat()
	if err != nil {
		return err
	}
	if overflow {
		return &rowError{column: name, reason: fmt.Sprintf("label %s overflows float64", quoteCell(s.data[start:s.pos]))}
	}
	d.label, d.hasLabel = v, true
	return nil
}

// decodeArray reads view l given whole, as an array of numbers.
func (d *kafkaDecoder) decodeArray(l int) *rowError {
	s := &d.s
	v := &d.spec.Views[l]
	switch d.form[l] {
	case formFlat:
		return &rowError{column: v.Name, reason: fmt.Sprintf("view %q is given both as an array and as flat fields", v.Name)}
	case formArray:
		return givenTwice(v.Name)
	}
	c := s.peek()
	if c != '[' {
		if err := s.skipValue(0); err != nil {
			return err
		}
		return &rowError{column: v.Name, reason: fmt.Sprintf("view %q is %s, want an array of %d numbers", v.Name, describeKind(c), d.dims[l])}
	}
	d.form[l] = formArray
	dst := d.vals[l]
	// The items are read with the position in a local variable (see
	// scanFloat), plain numbers many at a time by scanArray; s takes the
	// position back for anything but a number and a comma.
	data, i := s.data, skipSpaces(s.data, s.pos+1)
	n, plain := 0, d.scanArrays
	if i < len(data) && data[i] == ']' {
		i++
	} else {
		for {
			if plain {
				next, k, closed := scanArray(data, i, dst[min(n, len(dst)):])
				n += k
				if i = next; closed {
					break
				}
				// scanArray takes over again after an item it left,
				// unless it read none: then the array's items are
				// seldom plain, and a scan costs more than an item.
				plain = k > 0
			}
			// An item scanArray does not read, or every item without it.
			i = skipSpaces(data, i)
			val, end, fault := scanFloat(data, i)
			if fault != numberOK {
				s.pos = i
				return d.badItem(v, n, fault, end)
			}
			if n < len(dst) {
				dst[n] = val
			}
			n++
			if i = skipSpaces(data, end); i < len(data) && data[i] == ',' {
				i++
				continue
			}
			if i < len(data) && data[i] == ']' {
				i++
				break
			}
			s.pos = i
			return s.syntaxError("want ',' or ']' in an array")
		}
	}
	s.pos = i
	if n != len(dst) {
		return &rowError{column: v.Name, reason: fmt.Sprintf("view %q has %d values, want %d", v.Name, n, len(dst))}
	}
	d.count[l] = n
	return nil
}

// badItem is the reject of item n of array view v, at s.pos, which is not
// a number that fits a float64: its kind, or scanFloat's fault, met at end.
func (d *kafkaDecoder) badItem(v *schemas.View, n int, fault numberFault, end int) *rowError {
	s := &d.s
	c := s.peek()
	switch {
	case c != '-' && !isDigit(c):
		if err := s.skipValue(1); err != nil {
			return err
		}
		return &rowError{column: v.Name, reason: fmt.Sprintf("view %q item %d is %s, want a number", v.Name, n, describeKind(c))}
	case fault == numberOverflow:
		return &rowError{column: v.Name, reason: fmt.Sprintf("view %q item %d: %s overflows float64", v.Name, n, quoteCell(s.data[s.pos:end]))}
	}
	s.pos = end
	return s.syntaxError(fault.want())
}

// decodeFeature reads feature j of view l given as its own field. The
// field's name is built only for a reject: this runs once per feature.
func (d *kafkaDecoder) decodeFeature(l, j int) *rowError {
	s := &d.s
	v := &d.spec.Views[l]
	if d.form[l] == formArray {
		return &rowError{column: v.FeatureName(j), reason: fmt.Sprintf("view %q is given both as an array and as flat fields", v.Name)}
	}
	if d.seen[l][j] == d.gen {
		return givenTwice(v.FeatureName(j))
	}
	d.form[l] = formFlat
	c := s.peek()
	if c != '-' && !isDigit(c) {
		if err := s.skipValue(0); err != nil {
			return err
		}
		column := v.FeatureName(j)
		return &rowError{column: column, reason: fmt.Sprintf("view %q feature %d (%s) is %s, want a number", v.Name, j, column, describeKind(c))}
	}
	start := s.pos
	val, overflow, err := s.readFloat()
	if err != nil {
		return err
	}
	if overflow {
		column := v.FeatureName(j)
		return &rowError{column: column, reason: fmt.Sprintf("view %q feature %d (%s): %s overflows float64", v.Name, j, column, quoteCell(s.data[start:s.pos]))}
	}
	d.vals[l][j] = val
	d.seen[l][j] = d.gen
	d.count[l]++
	return nil
}

// finish checks that the message gave everything a row needs.
func (d *kafkaDecoder) finish() *rowError {
	if !d.hasID {
		return &rowError{column: d.spec.ID, reason: fmt.Sprintf("id field %q is missing", d.spec.ID)}
	}
	if d.requireLabel && !d.hasLabel {
		return &rowError{column: d.spec.Label, reason: "label is missing"}
	}
	for l := range d.spec.Views {
		v := &d.spec.Views[l]
		switch d.form[l] {
		case formNone:
			return &rowError{column: v.Name, reason: fmt.Sprintf("view %q is missing", v.Name)}
		case formFlat:
			if d.count[l] == d.dims[l] {
				continue
			}
			for j, g := range d.seen[l] {
				if g != d.gen {
					column := v.FeatureName(j)
					return &rowError{column: column, reason: fmt.Sprintf("view %q feature %d (%s) is missing", v.Name, j, column)}
				}
			}
		}
	}
	return nil
}

// describeKind names the kind of JSON value that starts with c.
func describeKind(c byte) string {
	switch {
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || isDigit(c):
		return "a number"
	}
	return "not JSON"
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// jsonScanner walks one JSON text. Its methods report syntax errors as
// rejects naming the byte offset.
type jsonScanner struct {
	data []byte
	pos  int
}

func (s *jsonScanner) reset(data []byte) { s.data, s.pos = data, 0 }

func (s *jsonScanner) eof() bool { return s.pos >= len(s.data) }

// peek returns the current byte, or 0 at the end.
func (s *jsonScanner) peek() byte {
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

func (s *jsonScanner) consume(c byte) bool {
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

func (s *jsonScanner) skipSpace() { s.pos = skipSpaces(s.data, s.pos) }

// skipSpaces returns the index of the first byte of b from i that is not
// JSON white space.
func skipSpaces(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// end checks that only white space follows the value.
func (s *jsonScanner) end() *rowError {
	s.skipSpace()
	if !s.eof() {
		return s.syntaxError("data after the JSON value")
	}
	return nil
}

// separator reads what follows an item of an array or object (closer ']'
// or '}'): a comma (more items follow) or the closer (none do).
func (s *jsonScanner) separator(closer byte, where string) (more bool, err *rowError) {
	s.skipSpace()
	if s.consume(',') {
		return true, nil
	}
	if s.consume(closer) {
		return false, nil
	}
	return false, s.syntaxError("want ',' or '" + string(closer) + "' " + where)
}

func (s *jsonScanner) syntaxError(what string) *rowError {
	if s.eof() {
		return &rowError{reason: fmt.Sprintf("invalid JSON: unexpected end of input at offset %d (%s)", s.pos, what)}
	}
	return &rowError{reason: fmt.Sprintf("invalid JSON: unexpected %s at offset %d (%s)", quoteChar(s.data[s.pos]), s.pos, what)}
}

func quoteChar(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// literal reads true, false or null.
func (s *jsonScanner) literal(word string) *rowError {
	if len(s.data)-s.pos >= len(word) && string(s.data[s.pos:s.pos+len(word)]) == word {
		s.pos += len(word)
		return nil
	}
	return s.syntaxError("want " + word)
}

// readNumber reads a JSON number token: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
// integer says it has neither fraction nor exponent.
func (s *jsonScanner) readNumber() (tok []byte, integer bool, err *rowError) {
	start := s.pos
	s.consume('-')
	switch {
	case s.consume('0'):
	case s.pos < len(s.data) && s.data[s.pos] >= '1' && s.data[s.pos] <= '9':
		s.digits()
	default:
		return nil, false, s.syntaxError("want a digit")
	}
	integer = true
	if s.consume('.') {
		integer = false
		if s.digits() == 0 {
			return nil, false, s.syntaxError("want a digit after '.'")
		}
	}
	if s.consume('e') || s.consume('E') {
		integer = false
		if !s.consume('+') {
			s.consume('-')
		}
		if s.digits() == 0 {
			return nil, false, s.syntaxError("want a digit in the exponent")
		}
	}
	return s.data[start:s.pos], integer, nil
}

// numberFault is why scanFloat did not read a finite float64.
type numberFault uint8

const (
	numberOK numberFault = iota
	numberNoDigit
	numberNoFraction
	numberNoExponent
	numberOverflow // too large for a float64
)

// readFloat reads a JSON number as a float64 (see scanFloat). overflow
// says the number is too large for a float64; a number too small for one
// is zero, as for strconv. The number's text is what s advanced over,
// left to the rare caller that needs it (an overflow's message).
func (s *jsonScanner) readFloat() (v float64, overflow bool, err *rowError) {
	v, end, fault := scanFloat(s.data, s.pos)
	s.pos = end
	switch fault {
	case numberOK:
		return v, false, nil
	case numberOverflow:
		return v, true, nil
	}
	return 0, false, s.syntaxError(fault.want())
}

// want says what a number of that fault lacks.
func (f numberFault) want() string {
	switch f {
	case numberNoFraction:
		return "want a digit after '.'"
	case numberNoExponent:
		return "want a digit in the exponent"
	}
	return "want a digit"
}

// scanFloat reads the JSON number of data at i as a float64 in one pass:
// the syntax is checked while the digits are gathered, and decimal.float
// converts them; only the rare numbers it declines go to strconv. It
// returns the index after the number, or where its syntax fails. The
// position stays in a register: the loop over an array's numbers, whose
// every step depends on where the last number ended, would otherwise
// wait for it to be stored and loaded again for every number.
func scanFloat(data []byte, i int) (v float64, end int, fault numberFault) {
	start := i
	neg := i < len(data) && data[i] == '-'
	// Without a branch (SETEQ): the sign of sensor values is a coin toss,
	// which a branch would mispredict half the time.
	sign := 0
	if neg {
		sign = 1
	}
	i += sign
	digits := i
	var mant uint64
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		i, mant = gatherEights(data, i, 0)
		i, mant = gatherDigits(data, i, mant)
	default:
		return 0, i, numberNoDigit
	}
	nd, exp := i-digits, 0
	if i < len(data) && data[i] == '.' {
		i++
		frac := i
		i, mant = gatherEights(data, i, mant)
		if i, mant = gatherDigits(data, i, mant); i == frac {
			return 0, i, numberNoFraction
		}
		nd += i - frac
		exp = frac - i
	}
	mantEnd, e := i, 0
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		var ok bool
		if i, e, ok = readExponent(data, i+1); !ok {
			return 0, i, numberNoExponent
		}
	}
	d := decimal{mant: mant, exp: exp + e, neg: neg}
	if nd > maxMantDigits {
		d = longDecimal(data[digits:mantEnd], e, neg)
	} else if v, ok := exactDecimal(d.mant, d.exp, d.neg); ok {
		return v, i, numberOK
	}
	if v, ok := d.float(); ok {
		return v, i, numberOK
	}
	// The token has JSON's number syntax, which strconv accepts; only its
	// magnitude can fail.
	v, err := strconv.ParseFloat(string(data[start:i]), 64)
	if err != nil {
		return v, i, numberOverflow
	}
	return v, i, numberOK
}

func (s *jsonScanner) digits() int {
	start := s.pos
	for s.pos < len(s.data) && isDigit(s.data[s.pos]) {
		s.pos++
	}
	return s.pos - start
}

// readString reads a string whose opening quote was consumed; it returns
// its raw contents (escapes as written) and whether it has escapes.
func (s *jsonScanner) readString() (raw []byte, escaped bool, err *rowError) {
	start := s.pos
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			raw = s.data[start:s.pos]
			s.pos++
			return raw, escaped, nil
		case c == '\\':
			escaped = true
			s.pos++
			if s.pos >= len(s.data) {
				return nil, false, s.syntaxError("want an escape")
			}
			switch s.data[s.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos++
			case 'u':
				s.pos++
				for range 4 {
					if s.pos >= len(s.data) || !isHex(s.data[s.pos]) {
						return nil, false, s.syntaxError("want 4 hex digits after \\u")
					}
					s.pos++
				}
			default:
				return nil, false, s.syntaxError("invalid escape")
			}
		case c < 0x20:
			return nil, false, s.syntaxError("control character in a string")
		default:
			s.pos++
		}
	}
	return nil, false, s.syntaxError("unterminated string")
}

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// skipValue checks and skips one JSON value at depth.
func (s *jsonScanner) skipValue(depth int) *rowError {
	if depth > kafkaMaxDepth {
		return &rowError{reason: fmt.Sprintf("invalid JSON: nested deeper than %d levels at offset %d", kafkaMaxDepth, s.pos)}
	}
	switch c := s.peek(); {
	case c == '"':
		s.pos++
		_, _, err := s.readString()
		return err
	case c == '-' || isDigit(c):
		_, _, err := s.readNumber()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '[':
		s.pos++
		s.skipSpace()
		if s.consume(']') {
			return nil
		}
		for {
			s.skipSpace()
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			if more, err := s.separator(']', "in an array"); err != nil || !more {
				return err
			}
		}
	case c == '{':
		s.pos++
		s.skipSpace()
		if s.consume('}') {
			return nil
		}
		for {
			s.skipSpace()
			if !s.consume('"') {
				return s.syntaxError("want a field name")
			}
			if _, _, err := s.readString(); err != nil {
				return err
			}
			s.skipSpace()
			if !s.consume(':') {
				return s.syntaxError("want ':' after a field name")
			}
			s.skipSpace()
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			if more, err := s.separator('}', "after a field"); err != nil || !more {
				return err
			}
		}
	default:
		return s.syntaxError("want a JSON value")
	}
}

// unescapeString appends the decoded contents of a checked JSON string.
// Unpaired surrogates become U+FFFD, as encoding/json decodes them.
func unescapeString(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		e := raw[i+1]
		i += 2
		switch e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := rune(hex4(raw[i:]))
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2 = rune(hex4(raw[i+2:]))
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
	}
	return dst
}

func hex4(b []byte) int {
	n := 0
	for _, c := range b[:4] {
		n <<= 4
		switch {
		case isDigit(c):
			n |= int(c - '0')
		case c >= 'a' && c <= 'f':
			n |= int(c-'a') + 10
		default:
			n |= int(c-'A') + 10
		}
	}
	return n
}
