package linedoc

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ParseYAML reads the first document of a YAML stream; an empty one is a
// nil Node.
func ParseYAML(data []byte) (*Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(data, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	// Aliases are expanded: a budget on the nodes made stops a file that
	// would expand to billions of them.
	b := yamlBuilder{budget: 1<<16 + 16*len(data)}
	return b.node(doc.Content[0], "", 0)
}

type yamlBuilder struct{ budget int }

func (b *yamlBuilder) node(y *yaml.Node, path string, depth int) (*Node, error) {
	if depth > MaxDepth {
		return nil, &Error{Line: y.Line, Path: path, Msg: fmt.Sprintf("nested more than %d deep", MaxDepth)}
	}
	if b.budget--; b.budget < 0 {
		return nil, &Error{Line: y.Line, Path: path, Msg: "the document contains excessive aliasing"}
	}
	line := y.Line
	for y.Kind == yaml.AliasNode {
		y = y.Alias
	}
	n := &Node{Line: line}
	switch y.Kind {
	case yaml.MappingNode:
		n.Kind = Mapping
		seen := keys{}
		var merged []Key
		for i := 0; i+1 < len(y.Content); i += 2 {
			k := y.Content[i]
			if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
				m, err := b.merge(y.Content[i+1], path, depth)
				if err != nil {
					return nil, err
				}
				merged = append(merged, m...)
				continue
			}
			p := KeyPath(path, k.Value)
			v, err := b.node(y.Content[i+1], p, depth+1)
			if err != nil {
				return nil, err
			}
			seen.add(n, Key{Name: k.Value, Line: k.Line, Named: k.Kind == yaml.ScalarNode, Value: v})
		}
		// Merged keys come after the mapping's own, which win; of the
		// merged, the first wins.
		for _, k := range merged {
			if _, ok := seen[k.Name]; !ok {
				seen.add(n, k)
			}
		}
	case yaml.SequenceNode:
		n.Kind = Sequence
		for i, c := range y.Content {
			item, err := b.node(c, IndexPath(path, i), depth+1)
			if err != nil {
				return nil, err
			}
			n.Items = append(n.Items, item)
		}
	default:
		n.Kind, n.Tag, n.Text = Scalar, y.ShortTag(), y.Value
		if err := y.Decode(&n.Value); err != nil {
			return nil, &Error{Line: line, Path: path, Msg: yamlError(nil, err).(*Error).Msg}
		}
	}
	return n, nil
}

// merge is the keys a merge key (<<) brings: those of a mapping, or of a
// sequence of mappings.
func (b *yamlBuilder) merge(y *yaml.Node, path string, depth int) ([]Key, error) {
	v, err := b.node(y, path, depth+1)
	if err != nil {
		return nil, err
	}
	sources := []*Node{v}
	if v.Kind == Sequence {
		sources = v.Items
	}
	var keys []Key
	for _, s := range sources {
		if s.Kind != Mapping {
			return nil, &Error{Line: s.Line, Path: path, Msg: "<< merges a mapping or a list of mappings"}
		}
		keys = append(keys, s.Keys...)
	}
	return keys, nil
}

const tabMsg = "a tab in the indentation: YAML indents with spaces only"

// yamlLine is the line yaml.v3 puts at the start of its messages.
var yamlLine = regexp.MustCompile(`^line (\d+): `)

// yamlError is an error of yaml.v3 reading data without the package's
// prefix, at its line. A tab in the indentation is said to be one, at
// its own line (yaml.v3 names the line of the token before it, or a
// character that cannot start a token).
func yamlError(data []byte, err error) error {
	var te *yaml.TypeError
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if errors.As(err, &te) {
		msg = strings.Join(te.Errors, "; ")
	}
	e := &Error{Msg: msg}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Msg = msg[len(m[0]):]
	}
	lines := strings.Split(string(data), "\n")
	tabbed := func(i int) bool {
		line := lines[i]
		return strings.Contains(line[:len(line)-len(strings.TrimLeft(line, " \t"))], "\t")
	}
	switch {
	case strings.Contains(msg, "tab character"):
		// yaml.v3 names the line of the token before the tab.
		for i := range lines {
			if tabbed(i) {
				e.Line, e.Msg = i+1, tabMsg
				break
			}
		}
	case strings.Contains(msg, "cannot start any token") && e.Line >= 1 && e.Line <= len(lines) && tabbed(e.Line-1):
		e.Msg = tabMsg
	}
	return e
}
