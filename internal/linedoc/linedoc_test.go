package linedoc

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// dump writes the tree as one line per node: path, line, kind, tag and
// text.
func dump(n *Node) string {
	var b strings.Builder
	var walk func(n *Node, path string)
	walk = func(n *Node, path string) {
		fmt.Fprintf(&b, "%s@%d kind=%d %s %q\n", path, n.Line, n.Kind, n.Tag, n.Text)
		for _, k := range n.Keys {
			fmt.Fprintf(&b, "key %s@%d first=%d named=%v\n", KeyPath(path, k.Name), k.Line, k.First, k.Named)
			walk(k.Value, KeyPath(path, k.Name))
		}
		for i, item := range n.Items {
			walk(item, IndexPath(path, i))
		}
	}
	walk(n, "")
	return b.String()
}

// JSON and YAML of the same content give the same tree, lines included.
func TestSameTreeFromJSONAndYAML(t *testing.T) {
	js := `{"name": "a",
  "dim": 3,
  "scale": 2.5,
  "on": true,
  "none": null,
  "columns": ["p",
    "q"],
  "kernel": {"type": "rbf"}}`
	yml := `name: a
dim: 3
scale: 2.5
on: true
none: null
columns: [p,
  q]
kernel: {type: rbf}`
	j, err := ParseJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	y, err := ParseYAML([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	if dump(j) != dump(y) {
		t.Errorf("JSON tree\n%s\nYAML tree\n%s", dump(j), dump(y))
	}
	want := Lines{"": 1, "name": 1, "dim": 2, "scale": 3, "on": 4, "none": 5, "columns": 6, "columns[0]": 6, "columns[1]": 7, "kernel": 8, "kernel.type": 8}
	for _, n := range []*Node{j, y} {
		if got := n.Lines(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("lines %v, want %v", got, want)
		}
	}
	if got := j.Lines().Line("kernel.sigma"); got != 8 {
		t.Errorf("line of a key not given: %d, want its mapping's, 8", got)
	}
}

// Every problem is an error at its line (and path, where it has one).
func TestErrors(t *testing.T) {
	deep := strings.Repeat("[", 120) + strings.Repeat("]", 120)
	laughs := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for c := 'b'; c <= 'h'; c++ {
		prev := string(c - 1)
		laughs += fmt.Sprintf("%c: &%c [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", c, c, prev, prev, prev, prev, prev, prev, prev, prev, prev, prev)
	}
	tests := []struct {
		name, text string
		want       string
	}{
		{"yaml tab after a key", "a: 1\nb:\n\tc: 2\n", "line 3: a tab in the indentation: YAML indents with spaces only"},
		{"yaml tab before an item", "a: 1\nb:\n\t- 2\n", "line 3: a tab in the indentation: YAML indents with spaces only"},
		{"yaml syntax", "a: [1\n", "line 1: did not find expected ',' or ']'"},
		{"yaml too deep", deep, "line 1: " + strings.Repeat("[0]", 101) + ": nested more than 100 deep"},
		{"json too deep", "{\n\"a\":" + deep + "}", "line 2: a" + strings.Repeat("[0]", 100) + ": nested more than 100 deep"},
		{"yaml aliases beyond the budget", laughs, "the document contains excessive aliasing"},
		{"yaml value not of its tag", "a: !!int x\n", "line 1: a: cannot decode !!str `x` as a !!int"},
		{"yaml merge of a scalar", "a: &a 1\nb:\n  <<: *a\n", "line 3: b: << merges a mapping or a list of mappings"},
		{"json syntax", "{\"a\": 1,\n\"b\": [,]}", "line 2: invalid character ',' looking for beginning of value"},
		{"json text after", "{}\n{}", "line 2: unexpected text after the spec's closing }"},
		{"json unclosed", "{\"a\": [", "line 1: the spec ends early: an object or array is not closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text))
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want an *Error with %q", err, tt.want)
			}
		})
	}
}

// A key given twice is kept twice, the second knowing the line of the
// first; Generic refuses it, and a key that is not a name.
func TestKeysGivenTwiceAndNotNames(t *testing.T) {
	for _, text := range []string{"a: 1\nb:\n  c: 2\n  c: 3\n", "{\"a\": 1, \"b\":\n\n{\"c\": 2,\n\"c\": 3}}"} {
		n, err := Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		if k := n.Keys[1].Value.Keys[1]; k.Name != "c" || k.Line != 4 || k.First != 3 {
			t.Errorf("%q: second c is %+v", text, k)
		}
		_, err = n.Generic("")
		var dup *DuplicateError
		if !errors.As(err, &dup) || err.Error() != "line 4: b.c: given twice (first on line 3)" || dup.Key != "c" {
			t.Errorf("%q: Generic: %v", text, err)
		}
	}
	n, err := ParseYAML([]byte("a: 1\n? [x]\n: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Generic(""); err == nil || err.Error() != "line 2: a key must be a name" {
		t.Errorf("a key that is a list: %v", err)
	}
}

// Aliases and merge keys are resolved: a mapping's own keys win over the
// merged ones, which keep the lines where they are written.
func TestAliasesAndMerges(t *testing.T) {
	n, err := ParseYAML([]byte("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\nl: *b\n"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := n.Generic("")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(v); got != "map[base:map[x:1 y:2] l:map[x:1 y:2] m:map[x:1 y:3]]" {
		t.Errorf("value %s", got)
	}
	lines := n.Lines()
	if lines["m.y"] != 4 || lines["m.x"] != 1 || lines["l"] != 5 {
		t.Errorf("lines %v", lines)
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"output-topic", "topic", "brokers", "lambda"}
	for key, want := range map[string]string{"output-topc": "output-topic", "lamda": "lambda", "topics": "topic", "zzz": "", "": ""} {
		if got := Suggest(key, names); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", key, got, want)
		}
	}
}

// Lines.Locate gives an error without a line that of its path, or of the
// nearest mapping or sequence holding it.
func TestLocate(t *testing.T) {
	n, err := ParseYAML([]byte("# a comment\na:\n  b: [1,\n    2]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"a.b[1]": 4, "a.b[7]": 3, "a.c": 2, "z": 2, "": 2} {
		if err := n.Lines().Locate(Errorf(path, "bad")); err.(*Error).Line != want {
			t.Errorf("%q located at %v, want line %d", path, err, want)
		}
	}
}

// No document makes the reader panic; what it reads has a line for every
// path, and Generic's errors have a line.
func FuzzParse(f *testing.F) {
	f.Add("a: 1\nb: [x, {c: d}]\n")
	f.Add(`{"a": [1, 2.5, null, true], "b": {"c": "d"}}`)
	f.Add("base: &b {x: 1}\nm:\n  <<: [*b]\n  y: !!float 3\n")
	f.Add("a:\n\t- 1\n")
	f.Add("? [x]\n: 1\na: 1\na: 2\n")
	f.Fuzz(func(t *testing.T, text string) {
		n, err := Parse([]byte(text))
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%q: error %v is not an *Error", text, err)
			}
			return
		}
		for path, line := range n.Lines() {
			if line < 1 {
				t.Fatalf("%q: %q at line %d", text, path, line)
			}
		}
		if _, err := n.Generic(""); err != nil && !strings.HasPrefix(err.Error(), "line ") {
			t.Fatalf("%q: Generic: %v without a line", text, err)
		}
	})
}
