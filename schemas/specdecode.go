package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mvml/mvml/internal/linedoc"
)

// A view spec is read in two steps: internal/linedoc reads the file into
// generic values (objects, arrays, strings, numbers, booleans, null)
// together with the line of every key, then a binder fills the ViewSpec
// key by key. Errors of either step name the line and the key path
// (views[2].dim) and say what was found and what is wanted, in the spec's
// own terms.

var (
	pathErr   = linedoc.Errorf
	keyPath   = linedoc.KeyPath
	indexPath = linedoc.IndexPath
)

// specDoc is a spec file decoded into generic values: map[string]any,
// []any, string, json.Number, float64, int, uint64, bool or nil.
type specDoc struct {
	root  any
	lines linedoc.Lines
}

// parseSpec decodes a spec, JSON (text starting with "{") or YAML; a key
// given twice is refused.
func parseSpec(data []byte) (*specDoc, error) {
	root, err := linedoc.Parse(data)
	if err != nil {
		return nil, err
	}
	doc := &specDoc{lines: root.Lines()}
	doc.root, err = root.Generic("")
	var dup *linedoc.DuplicateError
	switch {
	case errors.As(err, &dup) && !linedoc.IsJSON(data):
		// In YAML's words, as the spec's reader always said it.
		return nil, &linedoc.Error{Line: dup.Line, Msg: fmt.Sprintf("mapping key %q already defined at line %d", dup.Key, dup.First)}
	case err != nil:
		return nil, doc.lines.Locate(err)
	}
	return doc, nil
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
