package linedoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
)

// ParseJSON reads one JSON value strictly: nothing may follow it. Its
// messages speak of a spec, the JSON files mvml reads.
func ParseJSON(data []byte) (*Node, error) {
	w := jsonWalker{dec: json.NewDecoder(bytes.NewReader(data)), data: data}
	for i, c := range data {
		if c == '\n' {
			w.newlines = append(w.newlines, i)
		}
	}
	w.dec.UseNumber()
	root, err := w.value("", 0)
	if err != nil {
		return nil, err
	}
	if _, err := w.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &Error{Line: w.lineAt(w.dec.InputOffset()), Msg: "unexpected text after the spec's closing }"}
	}
	return root, nil
}

type jsonWalker struct {
	dec      *json.Decoder
	data     []byte
	newlines []int // offsets of the line ends
}

// lineAt is the line of the next token at or after offset.
func (w *jsonWalker) lineAt(offset int64) int {
	at := min(offset, int64(len(w.data)))
	for at < int64(len(w.data)) && strings.IndexByte(" \t\r\n,:", w.data[at]) >= 0 {
		at++
	}
	return w.lineOf(at)
}

// lineOf is the line of the byte at offset.
func (w *jsonWalker) lineOf(offset int64) int {
	line, _ := slices.BinarySearch(w.newlines, int(offset))
	return 1 + line
}

func (w *jsonWalker) syntax(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return &Error{Line: w.lineOf(se.Offset - 1), Msg: se.Error()}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Line: w.lineOf(int64(len(w.data))), Msg: "the spec ends early: an object or array is not closed"}
	}
	return err
}

func (w *jsonWalker) value(path string, depth int) (*Node, error) {
	line := w.lineAt(w.dec.InputOffset())
	if depth > MaxDepth {
		return nil, &Error{Line: line, Path: path, Msg: "nested more than 100 deep"}
	}
	tok, err := w.dec.Token()
	if err != nil {
		return nil, w.syntax(err)
	}
	n := &Node{Kind: Scalar, Line: line, Value: tok}
	switch v := tok.(type) {
	case json.Delim:
		n.Value = nil
	case string:
		n.Tag, n.Text = "!!str", v
	case json.Number:
		n.Tag, n.Text = "!!int", v.String()
		if strings.ContainsAny(n.Text, ".eE") {
			n.Tag = "!!float"
		}
	case bool:
		n.Tag, n.Text = "!!bool", strconv.FormatBool(v)
	case nil:
		n.Tag, n.Text = "!!null", "null"
	}
	switch tok {
	case json.Delim('['):
		n.Kind, n.Items = Sequence, []*Node{}
		for i := 0; w.dec.More(); i++ {
			item, err := w.value(IndexPath(path, i), depth+1)
			if err != nil {
				return nil, err
			}
			n.Items = append(n.Items, item)
		}
		_, err := w.dec.Token() // ]
		return n, w.syntax(err)
	case json.Delim('{'):
		n.Kind = Mapping
		seen := keys{}
		for w.dec.More() {
			line := w.lineAt(w.dec.InputOffset())
			tok, err := w.dec.Token()
			if err != nil {
				return nil, w.syntax(err)
			}
			key := tok.(string) // the decoder allows nothing else here
			v, err := w.value(KeyPath(path, key), depth+1)
			if err != nil {
				return nil, err
			}
			seen.add(n, Key{Name: key, Line: line, Named: true, Value: v})
		}
		_, err := w.dec.Token() // }
		return n, w.syntax(err)
	}
	return n, nil
}
