package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// A view spec is read in two steps: the file becomes generic values
// (objects, arrays, strings, numbers, booleans, null) together with the
// line of every key, then a binder fills the ViewSpec key by key. Errors of
// either step name the line and the key path (views[2].dim) and say what
// was found and what is wanted, in the spec's own terms.

// specError is a problem at one key of a view spec.
type specError struct {
	Path string // key path such as views[2].dim; "" for the whole spec
	Line int    // 1-based line in the spec text, 0 when unknown
	Msg  string
}

func (e *specError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func pathErr(path, format string, args ...any) *specError {
	return &specError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

func keyPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func indexPath(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i) }

// parentPath is the path of the object or array holding path.
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

// specDoc is a spec file decoded into generic values: map[string]any,
// []any, string, json.Number, float64, int, uint64, bool or nil.
type specDoc struct {
	root  any
	lines map[string]int // line of each key path
}

// line is the line of path, or of the nearest object or array holding it.
func (d *specDoc) line(path string) int {
	for {
		if l, ok := d.lines[path]; ok {
			return l
		}
		if path == "" {
			return 0
		}
		path = parentPath(path)
	}
}

// locate sets the line of a spec error from its path.
func (d *specDoc) locate(err error) error {
	var se *specError
	if errors.As(err, &se) && se.Line == 0 {
		se.Line = d.line(se.Path)
	}
	return err
}

// maxSpecDepth bounds the nesting of a spec, so that a hostile file cannot
// exhaust the stack.
const maxSpecDepth = 100

// parseJSONSpec decodes JSON strictly: one value, keys given once.
func parseJSONSpec(data []byte) (*specDoc, error) {
	w := jsonWalker{dec: json.NewDecoder(bytes.NewReader(data)), data: data, doc: &specDoc{lines: map[string]int{"": 1}}}
	for i, c := range data {
		if c == '\n' {
			w.newlines = append(w.newlines, i)
		}
	}
	w.dec.UseNumber()
	root, err := w.value("", 0)
	if err != nil {
		return nil, w.doc.locate(err)
	}
	if _, err := w.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &specError{Line: w.lineAt(w.dec.InputOffset()), Msg: "unexpected text after the spec's closing }"}
	}
	w.doc.root = root
	return w.doc, nil
}

type jsonWalker struct {
	dec      *json.Decoder
	data     []byte
	newlines []int // offsets of the line ends
	doc      *specDoc
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
		return &specError{Line: w.lineOf(se.Offset - 1), Msg: se.Error()}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &specError{Line: w.lineOf(int64(len(w.data))), Msg: "the spec ends early: an object or array is not closed"}
	}
	return err
}

func (w *jsonWalker) value(path string, depth int) (any, error) {
	if depth > maxSpecDepth {
		return nil, pathErr(path, "nested more than %d deep", maxSpecDepth)
	}
	tok, err := w.dec.Token()
	if err != nil {
		return nil, w.syntax(err)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if delim == '[' {
		items := []any{}
		for i := 0; w.dec.More(); i++ {
			p := indexPath(path, i)
			w.doc.lines[p] = w.lineAt(w.dec.InputOffset())
			v, err := w.value(p, depth+1)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		_, err := w.dec.Token() // ]
		return items, w.syntax(err)
	}
	obj := map[string]any{}
	for w.dec.More() {
		line := w.lineAt(w.dec.InputOffset())
		tok, err := w.dec.Token()
		if err != nil {
			return nil, w.syntax(err)
		}
		key := tok.(string) // the decoder allows nothing else here
		p := keyPath(path, key)
		if _, dup := obj[key]; dup {
			return nil, &specError{Path: p, Line: line, Msg: fmt.Sprintf("given twice (first on line %d)", w.doc.lines[p])}
		}
		w.doc.lines[p] = line
		v, err := w.value(p, depth+1)
		if err != nil {
			return nil, err
		}
		obj[key] = v
	}
	_, err = w.dec.Token() // }
	return obj, w.syntax(err)
}

// parseYAMLSpec decodes YAML (its first document). yaml.v3 refuses keys
// given twice and excessive aliasing; the lines come from its node tree.
func parseYAMLSpec(data []byte) (*specDoc, error) {
	var root any
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(err)
	}
	var node yaml.Node
	if err := yaml.Unmarshal(data, &node); err != nil {
		return nil, yamlError(err)
	}
	doc := &specDoc{lines: map[string]int{"": 1}}
	yamlLines(&node, "", doc.lines, 0)
	root, err := stringKeys(root, "", 0)
	if err != nil {
		return nil, doc.locate(err)
	}
	doc.root = root
	return doc, nil
}

// yamlError rewords yaml.v3's errors without its package prefixes.
func yamlError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return &specError{Msg: strings.Join(te.Errors, "; ")}
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, after, ok := strings.Cut(rest, ": "); ok {
			if line, err := strconv.Atoi(n); err == nil {
				return &specError{Line: line, Msg: after}
			}
		}
	}
	return &specError{Msg: msg}
}

// yamlLines records the line of every key path of n. Aliases are not
// followed (their keys take the line of the alias).
func yamlLines(n *yaml.Node, path string, lines map[string]int, depth int) {
	if depth > maxSpecDepth {
		return
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			yamlLines(c, path, lines, depth+1)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := keyPath(path, k.Value)
			lines[p] = k.Line
			yamlLines(v, p, lines, depth+1)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := indexPath(path, i)
			lines[p] = c.Line
			yamlLines(c, p, lines, depth+1)
		}
	}
}

// stringKeys turns YAML mappings with keys that are not strings (1: x)
// into objects keyed by their text, as JSON has them.
func stringKeys(v any, path string, depth int) (any, error) {
	if depth > maxSpecDepth {
		return nil, pathErr(path, "nested more than %d deep", maxSpecDepth)
	}
	var err error
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if v[k], err = stringKeys(x, keyPath(path, k), depth+1); err != nil {
				return nil, err
			}
		}
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			key := fmt.Sprint(k)
			if m[key], err = stringKeys(x, keyPath(path, key), depth+1); err != nil {
				return nil, err
			}
		}
		return m, nil
	case []any:
		for i, x := range v {
			if v[i], err = stringKeys(x, indexPath(path, i), depth+1); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// describe says what a generic value is, for "found ..." in errors.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case string:
		return "the string " + strconv.Quote(v)
	case json.Number:
		return "the number " + v.String()
	case int, int64, uint64:
		return fmt.Sprintf("the number %d", v)
	case float64:
		return "the number " + formatNumber(v)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case time.Time:
		return "the date " + v.Format(time.RFC3339)
	}
	return fmt.Sprintf("%v", v)
}

// formatNumber writes x as the spec would, YAML's spelling for the
// values JSON has none for.
func formatNumber(x float64) string {
	switch {
	case math.IsNaN(x):
		return ".nan"
	case math.IsInf(x, 1):
		return ".inf"
	case math.IsInf(x, -1):
		return "-.inf"
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// asNumber reads a number; ok is false for anything else. A JSON number
// beyond float64 is ±Inf, refused where a finite value is needed.
func asNumber(v any) (x float64, ok bool) {
	switch v := v.(type) {
	case json.Number:
		x, err := strconv.ParseFloat(v.String(), 64)
		return x, err == nil || errors.Is(err, strconv.ErrRange)
	case float64:
		return v, true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	}
	return 0, false
}

// asInt reads a number with an integer value (3, 3.0 or 3e2) of at most
// 2^53, where float64 holds every integer; ranges are Validate's.
func asInt(v any) (int, bool) {
	x, ok := asNumber(v)
	if !ok || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return 0, false
	}
	return int(x), true
}

// binding is how one key of an object is read.
type binding struct {
	key string
	set func(v any, path string) error
}

// bindObject reads the keys of an object in order of their lines, nulls
// counting as absent. what names the object in the error for an unknown key.
func (d *specDoc) bindObject(v any, path, what string, keys []binding) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return pathErr(path, "found %s, want an object (%s)", describe(v), what)
	}
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		li, lj := d.lines[keyPath(path, names[i])], d.lines[keyPath(path, names[j])]
		return li < lj || li == lj && names[i] < names[j]
	})
	for _, name := range names {
		i := slices.IndexFunc(keys, func(b binding) bool { return b.key == name })
		p := keyPath(path, name)
		if i < 0 {
			known := make([]string, len(keys))
			for j, b := range keys {
				known[j] = b.key
			}
			msg := fmt.Sprintf("unknown key: %s has %s and %s", what, strings.Join(known[:len(known)-1], ", "), known[len(known)-1])
			if slices.Contains(known, "meta") {
				msg += "; free data goes under \"meta\""
			}
			return pathErr(p, "%s", msg)
		}
		if obj[name] == nil {
			continue
		}
		if err := keys[i].set(obj[name], p); err != nil {
			return err
		}
	}
	return nil
}

func bindString(dst *string) func(any, string) error {
	return func(v any, path string) error {
		s, ok := v.(string)
		if !ok {
			return pathErr(path, "found %s, want a string", describe(v))
		}
		*dst = s
		return nil
	}
}

func bindInt(dst *int) func(any, string) error {
	return func(v any, path string) error {
		i, ok := asInt(v)
		if !ok {
			return pathErr(path, "found %s, want an integer", describe(v))
		}
		*dst = i
		return nil
	}
}

func bindFloat(dst *float64) func(any, string) error {
	return func(v any, path string) error {
		x, ok := asNumber(v)
		if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
			return pathErr(path, "found %s, want a finite number", describe(v))
		}
		*dst = x
		return nil
	}
}

func bindBool(dst *bool) func(any, string) error {
	return func(v any, path string) error {
		b, ok := v.(bool)
		if !ok {
			return pathErr(path, "found %s, want true or false", describe(v))
		}
		*dst = b
		return nil
	}
}

func bindStrings(dst *[]string) func(any, string) error {
	return func(v any, path string) error {
		items, ok := v.([]any)
		if !ok {
			return pathErr(path, "found %s, want an array of column names", describe(v))
		}
		out := make([]string, len(items))
		for i, item := range items {
			s, ok := item.(string)
			if !ok {
				return pathErr(indexPath(path, i), "found %s, want a column name (a string)", describe(item))
			}
			out[i] = s
		}
		*dst = out
		return nil
	}
}

func bindStringMap(dst *map[string]string) func(any, string) error {
	return func(v any, path string) error {
		obj, ok := v.(map[string]any)
		if !ok {
			return pathErr(path, "found %s, want an object of strings", describe(v))
		}
		out := make(map[string]string, len(obj))
		for k, x := range obj {
			s, ok := x.(string)
			if !ok {
				return pathErr(keyPath(path, k), "found %s, want a string", describe(x))
			}
			out[k] = s
		}
		*dst = out
		return nil
	}
}

// bindMeta keeps any value as JSON, for the model file.
func bindMeta(dst *json.RawMessage) func(any, string) error {
	return func(v any, path string) error {
		if p, x, ok := nonFinite(v, path); ok {
			return pathErr(p, "found %s: JSON, and so the model file, cannot hold it", describe(x))
		}
		b, err := json.Marshal(v)
		if err != nil {
			return pathErr(path, "cannot be kept as JSON: %v", err)
		}
		*dst = b
		return nil
	}
}

// nonFinite finds a NaN or infinite number (YAML's .nan, .inf) in v.
func nonFinite(v any, path string) (string, any, bool) {
	switch v := v.(type) {
	case float64:
		return path, v, math.IsNaN(v) || math.IsInf(v, 0)
	case map[string]any:
		for k, x := range v {
			if p, bad, ok := nonFinite(x, keyPath(path, k)); ok {
				return p, bad, true
			}
		}
	case []any:
		for i, x := range v {
			if p, bad, ok := nonFinite(x, indexPath(path, i)); ok {
				return p, bad, true
			}
		}
	}
	return "", nil, false
}

func (d *specDoc) bindSpec() (*ViewSpec, error) {
	var s ViewSpec
	err := d.bindObject(d.root, "", "a view spec", []binding{
		{"task", func(v any, p string) error { return bindString((*string)(&s.Task))(v, p) }},
		{"id", bindString(&s.ID)},
		{"label", bindString(&s.Label)},
		{"views", func(v any, p string) error { return d.bindViews(v, p, &s.Views) }},
		{"name", bindString(&s.Name)},
		{"n_classes", bindInt(&s.NClasses)},
		{"split", bindString(&s.Split)},
		{"files", bindStringMap(&s.Files)},
		{"label_description", bindString(&s.LabelDescription)},
		{"meta", bindMeta(&s.Meta)},
	})
	if err != nil {
		return nil, err
	}
	return &s, nil
}

func (d *specDoc) bindViews(v any, path string, dst *[]View) error {
	items, ok := v.([]any)
	if !ok {
		return pathErr(path, "found %s, want an array of views", describe(v))
	}
	views := make([]View, len(items))
	for i, item := range items {
		w := &views[i]
		err := d.bindObject(item, indexPath(path, i), "a view", []binding{
			{"name", bindString(&w.Name)},
			{"prefix", bindString(&w.Prefix)},
			{"dim", bindInt(&w.Dim)},
			{"columns", bindStrings(&w.Columns)},
			{"list", bindString(&w.List)},
			{"kernel", func(v any, p string) error {
				w.Kernel = new(KernelSpec)
				return d.bindKernel(v, p, w.Kernel)
			}},
			{"standardize", bindBool(&w.Standardize)},
			{"meta", bindMeta(&w.Meta)},
		})
		if err != nil {
			return err
		}
	}
	*dst = views
	return nil
}

func (d *specDoc) bindKernel(v any, path string, k *KernelSpec) error {
	return d.bindObject(v, path, "a kernel", []binding{
		{"type", bindString(&k.Type)},
		{"gamma", bindFloat(&k.Gamma)},
		{"sigma", func(v any, p string) error {
			// A number, or mean, median or a number in a string; kept as
			// text, so that 0.5 and "0.5" are the same spec.
			if x, ok := asNumber(v); ok && !math.IsNaN(x) && !math.IsInf(x, 0) {
				k.Sigma = strconv.FormatFloat(x, 'g', -1, 64)
				return nil
			}
			if s, ok := v.(string); ok {
				k.Sigma = s
				return nil
			}
			return pathErr(p, "found %s, want \"mean\", \"median\" or a number > 0", describe(v))
		}},
		{"sigma_scale", bindFloat(&k.SigmaScale)},
		{"degree", bindInt(&k.Degree)},
		{"coef0", func(v any, p string) error {
			k.Coef0 = new(float64)
			return bindFloat(k.Coef0)(v, p)
		}},
	})
}
