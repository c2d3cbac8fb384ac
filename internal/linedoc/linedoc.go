// Package linedoc reads a YAML or JSON document people write (a view
// spec, a configuration file) into a tree that keeps the line of every
// key and value, so that its readers say where a problem lies.
//
// Both syntaxes give the same tree: mappings (keys in order, a key given
// twice kept twice), sequences and scalars with their YAML tag, text and
// value. YAML aliases and merge keys (<<) are resolved; a tab in YAML's
// indentation is reported at its line; nesting beyond MaxDepth is refused.
package linedoc

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxDepth bounds the nesting of a document, so that a hostile file cannot
// exhaust the stack.
const MaxDepth = 100

// Kind is the kind of a Node.
type Kind uint8

// The kinds of node.
const (
	Scalar Kind = iota + 1
	Mapping
	Sequence
)

// Node is a value of a document.
type Node struct {
	Kind Kind
	Line int
	// Tag is a scalar's YAML tag: !!str, !!int, !!float, !!bool, !!null,
	// !!timestamp, … (a JSON number is !!int when written without a
	// fraction or exponent).
	Tag string
	// Text is a scalar as written, a string without its quotes.
	Text string
	// Value is a scalar decoded: a string, bool or nil, and for numbers a
	// json.Number (JSON) or the int, uint64 or float64 YAML resolves.
	Value any
	// Keys are a mapping's keys in order.
	Keys []Key
	// Items are a sequence's items.
	Items []*Node
}

// Key is a key of a mapping and its value.
type Key struct {
	Name string // as written
	Line int
	// Named is false for a key that is a mapping or a sequence.
	Named bool
	// First is the line where the same mapping gives Name before (0 for
	// its first time).
	First int
	Value *Node
}

// Error is a problem at one key of a document.
type Error struct {
	Line int    // 1-based, 0 when unknown
	Path string // key path such as views[2].dim; "" for the whole document
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errorf is a problem at path, its line to be found (Lines.Locate).
func Errorf(path, format string, args ...any) *Error {
	return &Error{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// DuplicateError is a key given twice in one mapping.
type DuplicateError struct {
	Path, Key   string
	Line, First int
}

func (e *DuplicateError) Error() string {
	return (&Error{Line: e.Line, Path: e.Path, Msg: fmt.Sprintf("given twice (first on line %d)", e.First)}).Error()
}

// KeyPath is the path of key in the mapping at parent.
func KeyPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// IndexPath is the path of item i of the sequence at parent.
func IndexPath(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

// Parse reads JSON (IsJSON) or YAML.
func Parse(data []byte) (*Node, error) {
	if IsJSON(data) {
		return ParseJSON(data)
	}
	return ParseYAML(data)
}

// IsJSON says whether data is read as JSON: text starting with "{".
func IsJSON(data []byte) bool {
	t := bytes.TrimSpace(data)
	return len(t) > 0 && t[0] == '{'
}

// Generic is the document as Go values: map[string]any, []any and the
// scalars' values. A key given twice is a *DuplicateError, a key that is
// not a name an *Error.
func (n *Node) Generic(path string) (any, error) {
	if n == nil {
		return nil, nil
	}
	switch n.Kind {
	case Mapping:
		m := make(map[string]any, len(n.Keys))
		for _, k := range n.Keys {
			p := KeyPath(path, k.Name)
			switch {
			case !k.Named:
				return nil, &Error{Line: k.Line, Path: path, Msg: "a key must be a name"}
			case k.First > 0:
				return nil, &DuplicateError{Path: p, Key: k.Name, Line: k.Line, First: k.First}
			}
			v, err := k.Value.Generic(p)
			if err != nil {
				return nil, err
			}
			m[k.Name] = v
		}
		return m, nil
	case Sequence:
		items := make([]any, len(n.Items))
		for i, item := range n.Items {
			v, err := item.Generic(IndexPath(path, i))
			if err != nil {
				return nil, err
			}
			items[i] = v
		}
		return items, nil
	}
	return n.Value, nil
}

// Lines are the lines of a document's key paths.
type Lines map[string]int

// Lines returns the line of every key path of the tree at n.
func (n *Node) Lines() Lines {
	lines := Lines{"": 1}
	if n != nil {
		lines[""] = n.Line
		n.lines("", lines)
	}
	return lines
}

func (n *Node) lines(path string, lines Lines) {
	for _, k := range n.Keys {
		p := KeyPath(path, k.Name)
		if k.First == 0 {
			lines[p] = k.Line
		}
		k.Value.lines(p, lines)
	}
	for i, item := range n.Items {
		p := IndexPath(path, i)
		lines[p] = item.Line
		item.lines(p, lines)
	}
}

// Line is the line of path, or of the nearest mapping or sequence holding
// it.
func (l Lines) Line(path string) int {
	for {
		if line, ok := l[path]; ok {
			return line
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return l[""]
		}
		path = path[:i]
	}
}

// Locate sets the line of an *Error without one from its path.
func (l Lines) Locate(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Line == 0 {
		e.Line = l.Line(e.Path)
	}
	return err
}

// Suggest is the name of names closest to a misspelt key, or "" when none
// is within two edits.
func Suggest(key string, names []string) string {
	best, bestDist := "", 3
	for _, name := range names {
		if d := editDistance(key, name); d < bestDist {
			best, bestDist = name, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	cur := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// keys notes, while a mapping is read, where each of its keys came first.
type keys map[string]int

// add appends k to the mapping m, with the line of an earlier key of its
// name.
func (seen keys) add(m *Node, k Key) {
	if k.Named {
		if first, ok := seen[k.Name]; ok {
			k.First = first
		} else {
			seen[k.Name] = k.Line
		}
	}
	m.Keys = append(m.Keys, k)
}
