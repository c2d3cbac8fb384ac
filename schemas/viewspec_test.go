package schemas

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseViewSpec(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		wantErr string // the whole message; "" for a valid spec
	}{
		{"prefix", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":3}]}`, ""},
		{"columns", `{"task":"classification","views":[{"name":"a","columns":["p","q"]}]}`, ""},
		{"list", `{"task":"classification","views":[{"name":"a","list":"vals","dim":4}]}`, ""},
		{"yaml", "task: regression\nviews:\n  - name: a\n    prefix: a_\n    dim: 2\n", ""},
		{"integral float dim", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":3.0}]}`, ""},
		{"null as absent", `{"task":"regression","label":null,"views":[{"name":"a","prefix":"a_","dim":3,"kernel":null}]}`, ""},
		{"byte order mark", "\uFEFF{\"task\":\"regression\",\"views\":[{\"name\":\"a\",\"prefix\":\"a_\",\"dim\":3}]}", ""},
		{"tab-indented json", "{\n\t\"task\": \"regression\",\n\t\"views\": [{\"name\": \"a\", \"prefix\": \"a_\", \"dim\": 3}]\n}", ""},
		{"empty", ``, "empty view spec"},
		{"no task", `{"views":[{"name":"a","prefix":"a_","dim":3}]}`, "line 1: task: missing: want classification or regression"},
		{"bad task", `{"task":"ranking","views":[{"name":"a","prefix":"a_","dim":3}]}`, `line 1: task: found "ranking", want classification or regression`},
		{"no views", `{"task":"regression","views":[]}`, "line 1: views: no views: want at least one"},
		{"unknown key", "{\"task\":\"regression\",\n  \"n_rows\": 896,\n\"views\":[]}",
			`line 2: n_rows: unknown key: a view spec has task, id, label, views, name, n_classes, split, files, label_description and meta; free data goes under "meta"`},
		{"unknown view key", "{\"task\":\"regression\",\"views\":[\n{\"name\":\"a\",\"prefix\":\"a_\",\"dim\":3},\n{\"name\":\"b\",\"prefix\":\"b_\",\"dims\":3}]}",
			`line 3: views[1].dims: unknown key: a view has name, prefix, dim, columns, list, kernel, standardize and meta; free data goes under "meta"`},
		{"unknown kernel key", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":3,"kernel":{"sigmma":1}}]}`,
			`line 1: views[0].kernel.sigmma: unknown key: a kernel has type, gamma, sigma, sigma_scale, degree and coef0`},
		{"key twice", "{\"task\":\"regression\",\n\"views\":[{\"name\":\"a\",\"prefix\":\"a_\",\n\"dim\":3,\n\"dim\":4}]}",
			"line 4: views[0].dim: given twice (first on line 3)"},
		{"string dim", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":"3"}]}`, `line 1: views[0].dim: found the string "3", want an integer`},
		{"fractional dim", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":2.5}]}`, `line 1: views[0].dim: found the number 2.5, want an integer`},
		{"views not an array", `{"task":"regression","views":{"name":"a"}}`, `line 1: views: found an object, want an array of views`},
		{"view not an object", `{"task":"regression","views":["a"]}`, `line 1: views[0]: found the string "a", want an object (a view)`},
		{"column not a string", `{"task":"regression","views":[{"name":"a","columns":["p",7]}]}`, `line 1: views[0].columns[1]: found the number 7, want a column name (a string)`},
		{"standardize not a bool", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":1,"standardize":"yes"}]}`,
			`line 1: views[0].standardize: found the string "yes", want true or false`},
		{"spec not an object", `[1]`, `line 1: found an array, want an object (a view spec)`},
		{"trailing text", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":3}]} {}`, "line 1: unexpected text after the spec's closing }"},
		{"unclosed", "{\"task\":\"regression\",\n\"views\":[", "line 2: the spec ends early: an object or array is not closed"},
		{"json syntax", "{\"task\":\"regression\",\n\"views\": [,]}", "line 2: invalid character ',' looking for beginning of value"},
		{"two layouts", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":3,"list":"l"}]}`,
			"line 1: views[0]: both prefix and list: give only one of prefix and dim, columns, or list and dim"},
		{"no layout", `{"task":"regression","views":[{"name":"a","dim":3}]}`, "line 1: views[0]: no columns: give prefix and dim, columns, or list and dim"},
		{"no dim", `{"task":"regression","views":[{"name":"a","prefix":"a_"}]}`, "line 1: views[0].dim: missing: want the number of features, a positive integer"},
		{"negative dim", `{"task":"regression","views":[{"name":"a","list":"l","dim":-2}]}`, "line 1: views[0].dim: found -2, want a positive integer"},
		{"huge dim", `{"task":"regression","views":[{"name":"a","list":"l","dim":1e12}]}`, "line 1: views[0].dim: found 1000000000000, want at most 1048576"},
		{"dim beyond integers", `{"task":"regression","views":[{"name":"a","list":"l","dim":1e300}]}`, "line 1: views[0].dim: found the number 1e300, want an integer"},
		{"dim disagrees", `{"task":"regression","views":[{"name":"a","columns":["p"],"dim":2}]}`, "line 1: views[0].dim: found 2, but columns has 1 names"},
		{"duplicate view", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":1},{"name":"a","prefix":"b_","dim":1}]}`,
			`line 1: views[1].name: "a" is the name of views[0] too`},
		{"column twice", `{"task":"regression","views":[{"name":"a","columns":["p"]},{"name":"b","columns":["q","p"]}]}`,
			`line 1: views[1].columns[1]: column "p" is already in views[0]`},
		{"label as feature", `{"task":"regression","views":[{"name":"a","columns":["label"]}]}`, `line 1: views[0].columns[0]: column "label" is already the label column`},
		{"id is label", `{"task":"regression","id":"k","label":"k","views":[{"name":"a","prefix":"a_","dim":1}]}`,
			`line 1: label: "k" is the id column too: give the label its own column`},
		{"reserved name", `{"task":"regression","views":[{"name":"id","prefix":"a_","dim":1}]}`, `line 1: views[0].name: "id" is reserved: name the view otherwise`},
		{"bad kernel", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":1,"kernel":{"type":"sigmoid"}}]}`,
			`line 1: views[0].kernel.type: found "sigmoid", want rbf, linear or poly`},
		{"bad sigma", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":1,"kernel":{"sigma":"wide"}}]}`,
			`line 1: views[0].kernel.sigma: found "wide", want "mean", "median" or a finite number > 0`},
		{"zero sigma", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":1,"kernel":{"sigma":0}}]}`,
			`line 1: views[0].kernel.sigma: found 0, want "mean", "median" or a finite number > 0`},
		{"negative sigma string", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":1,"kernel":{"sigma":"-0.5"}}]}`,
			`line 1: views[0].kernel.sigma: found -0.5, want "mean", "median" or a finite number > 0`},
		{"infinite sigma string", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":1,"kernel":{"sigma":"Inf"}}]}`,
			`line 1: views[0].kernel.sigma: found .inf, want "mean", "median" or a finite number > 0`},
		{"sigma beyond float64", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":1,"kernel":{"sigma":1e400}}]}`,
			`line 1: views[0].kernel.sigma: found the number 1e400, want "mean", "median" or a number > 0`},
		{"sigma true", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":1,"kernel":{"sigma":true}}]}`,
			`line 1: views[0].kernel.sigma: found true, want "mean", "median" or a number > 0`},
		{"negative gamma", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":1,"kernel":{"gamma":-1}}]}`,
			`line 1: views[0].kernel.gamma: found -1, want a number > 0 (or 0: derived)`},
		{"yaml infinite gamma", "task: regression\nviews:\n  - name: a\n    prefix: a_\n    dim: 1\n    kernel: {gamma: .inf}\n",
			`line 6: views[0].kernel.gamma: found the number .inf, want a finite number`},
		{"yaml NaN coef0", "task: regression\nviews:\n  - name: a\n    prefix: a_\n    dim: 1\n    kernel:\n      type: poly\n      coef0: .nan\n",
			`line 8: views[0].kernel.coef0: found the number .nan, want a finite number`},
		{"yaml string dim", "task: regression\nviews:\n  - name: a\n    prefix: a_\n  - name: b\n    prefix: b_\n    dim: three\n",
			`line 7: views[1].dim: found the string "three", want an integer`},
		{"yaml unknown key", "task: regression\nsplit: official\nn_rows: 896\nviews: []\n",
			`line 3: n_rows: unknown key: a view spec has task, id, label, views, name, n_classes, split, files, label_description and meta; free data goes under "meta"`},
		{"yaml validation", "task: regression\nviews:\n  - name: a\n    prefix: a_\n    dim: 2\n  - name: b\n    list: l\n",
			"line 6: views[1].dim: missing: want the number of features, a positive integer"},
		{"yaml key twice", "task: regression\ntask: classification\nviews: []\n", `line 2: mapping key "task" already defined at line 1`},
		{"malformed yaml", "task: [", "line 1: did not find expected node content"},
		{"yaml scalar", "just text", `line 1: found the string "just text", want an object (a view spec)`},
		{"deep yaml", strings.Repeat("[", 200) + strings.Repeat("]", 200), "line 1: " + strings.Repeat("[0]", 101) + ": nested more than 100 deep"},
		{"deep json", `{"meta":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "}", "line 1: meta" + strings.Repeat("[0]", 100) + ": nested more than 100 deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := ParseViewSpec([]byte(tc.in))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if spec.ID != "id" || spec.Label != "label" {
					t.Errorf("defaults not filled: %q %q", spec.ID, spec.Label)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error\n%v\nwant\n%s", err, tc.wantErr)
			}
		})
	}
}

// An error of a spec file names the file, the line and the key; a YAML
// file's errors do not speak of JSON, nor of Go.
func TestLoadViewSpecErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		file, text, want string
	}{
		{"views.yaml", "task: classification\nviews:\n  - name: x\n    prefix: x_\n    dim: 3\n  - name: y\n    prefix: y_\n    dim: 3\n  - name: z\n    prefix: z_\n    dim: [3]\n",
			"view spec DIR/views.yaml: line 11: views[2].dim: found an array, want an integer"},
		{"views.json", "{\"task\": \"classification\",\n \"name\": \"uwave\",\n \"n_rows\": 896,\n \"views\": []}",
			`view spec DIR/views.json: line 3: n_rows: unknown key: a view spec has task, id, label, views, name, n_classes, split, files, label_description and meta; free data goes under "meta"`},
	} {
		path := filepath.Join(dir, tc.file)
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadViewSpec(path)
		if want := strings.ReplaceAll(tc.want, "DIR", dir); err == nil || err.Error() != want {
			t.Errorf("error\n%v\nwant\n%s", err, want)
		}
	}
}

// A kernel's sigma may be a number, as docs/formats.md shows, or a string: mean,
// median or a number; a number and its string are the same spec.
func TestSigmaNumberOrString(t *testing.T) {
	spec := func(sigma string) *ViewSpec {
		t.Helper()
		s, err := ParseViewSpec([]byte(`{"task":"regression","views":[{"name":"a","prefix":"a_","dim":2,"kernel":{"type":"rbf","sigma":` + sigma + `}}]}`))
		if err != nil {
			t.Fatalf("sigma %s: %v", sigma, err)
		}
		return s
	}
	for _, tc := range []struct{ in, want string }{{`0.5`, "0.5"}, {`"0.5"`, "0.5"}, {`2`, "2"}, {`1e-3`, "0.001"}, {`"median"`, "median"}, {`"mean"`, "mean"}} {
		if got := spec(tc.in).Views[0].Kernel.Sigma; got != tc.want {
			t.Errorf("sigma %s read as %q, want %q", tc.in, got, tc.want)
		}
	}
	if spec(`0.5`).Fingerprint() != spec(`"0.5"`).Fingerprint() {
		t.Error("sigma 0.5 and \"0.5\" have different fingerprints")
	}
	y, err := ParseViewSpec([]byte("task: regression\nviews:\n  - {name: a, prefix: a_, dim: 2, kernel: {sigma: 0.5}}\n"))
	if err != nil || y.Views[0].Kernel.Sigma != "0.5" {
		t.Fatalf("YAML sigma 0.5: %v", err)
	}
}

// Free data under "meta" (in the spec or a view) is kept as JSON, through
// the model file's encoding, and does not change the fingerprint.
func TestViewSpecMeta(t *testing.T) {
	plain, err := ParseViewSpec([]byte(`{"task":"regression","views":[{"name":"a","prefix":"a_","dim":3}]}`))
	if err != nil {
		t.Fatal(err)
	}
	withMeta, err := ParseViewSpec([]byte(`{"task":"regression","meta":{"n_rows":896,"split":{"train":0.8},"tags":["a",null,true]},
		"views":[{"name":"a","prefix":"a_","dim":3,"meta":"left wrist"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	yamlMeta, err := ParseViewSpec([]byte("task: regression\nmeta:\n  n_rows: 896\n  split: {train: 0.8}\n  tags: [a, null, true]\n" +
		"views:\n  - name: a\n    prefix: a_\n    dim: 3\n    meta: left wrist\n"))
	if err != nil {
		t.Fatal(err)
	}
	const wantMeta = `{"n_rows":896,"split":{"train":0.8},"tags":["a",null,true]}`
	for name, s := range map[string]*ViewSpec{"json": withMeta, "yaml": yamlMeta} {
		if string(s.Meta) != wantMeta || string(s.Views[0].Meta) != `"left wrist"` {
			t.Errorf("%s: meta %s, view meta %s", name, s.Meta, s.Views[0].Meta)
		}
		if s.Fingerprint() != plain.Fingerprint() {
			t.Errorf("%s: meta changes the fingerprint", name)
		}
	}
	// The model file holds the spec as JSON.
	data, err := json.Marshal(withMeta)
	if err != nil {
		t.Fatal(err)
	}
	var back ViewSpec
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if string(back.Meta) != wantMeta || string(back.Views[0].Meta) != `"left wrist"` || back.Fingerprint() != plain.Fingerprint() {
		t.Errorf("after JSON: meta %s, view meta %s", back.Meta, back.Views[0].Meta)
	}
	// A spec without meta encodes as before, so model files do not change.
	if data, _ := json.Marshal(plain); strings.Contains(string(data), "meta") {
		t.Errorf("a spec without meta encodes it: %s", data)
	}
	if _, err := ParseViewSpec([]byte("task: regression\nmeta: {x: .inf}\nviews: [{name: a, prefix: a_, dim: 1}]\n")); err == nil ||
		err.Error() != "line 2: meta.x: found the number .inf: JSON, and so the model file, cannot hold it" {
		t.Errorf("non-finite meta: %v", err)
	}
}

func TestLoadViewSpecYAML(t *testing.T) {
	spec, err := LoadViewSpec(filepath.Join("testdata", "views.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Dims(); len(got) != 4 || got[0] != 315 || got[2] != 3 || got[3] != 8 {
		t.Errorf("dims %v", got)
	}
	if spec.Views[1].Kernel.Sigma != "median" || *spec.Views[3].Kernel.Coef0 != 0 {
		t.Errorf("kernels not read: %+v %+v", spec.Views[1].Kernel, spec.Views[3].Kernel)
	}
	if names := spec.Views[0].ColumnNames(); names[0] != "x_0" || names[314] != "x_314" {
		t.Errorf("prefix columns %v…", names[:2])
	}
	if spec.Views[3].Layout() != LayoutList || spec.Views[3].ColumnNames() != nil {
		t.Error("list view layout")
	}
	if _, err := LoadViewSpec(filepath.Join("testdata", "absent.json")); err == nil {
		t.Error("missing file: no error")
	}
}

// The shared data sets' views.json files load as they are.
func TestSharedViewSpecs(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "shared", "data", "*", "views.json"))
	if len(paths) == 0 {
		t.Skip("../shared/data is absent")
	}
	for _, p := range paths {
		if _, err := LoadViewSpec(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestFingerprint(t *testing.T) {
	a, _ := ParseViewSpec([]byte(`{"task":"regression","views":[{"name":"a","prefix":"a_","dim":3}]}`))
	b, _ := ParseViewSpec([]byte(`{"task":"regression","name":"other","split":"x","views":[{"name":"a","prefix":"a_","dim":3}]}`))
	c, _ := ParseViewSpec([]byte(`{"task":"regression","views":[{"name":"a","prefix":"a_","dim":4}]}`))
	d, _ := ParseViewSpec([]byte(`{"task":"regression","views":[{"name":"a","prefix":"a_","dim":3,"kernel":{"gamma":2}}]}`))
	if a.Fingerprint() != b.Fingerprint() {
		t.Error("informational fields change the fingerprint")
	}
	if a.Fingerprint() == c.Fingerprint() || a.Fingerprint() == d.Fingerprint() {
		t.Error("a different dimension or kernel keeps the fingerprint")
	}
	// Model files hold the fingerprint of their spec: it must not change
	// from one build to the next (these values are those of the first).
	e, err := ParseViewSpec([]byte(`{"task":"classification","id":"key","label":"y","views":[
		{"name":"a","columns":["p","q"],"standardize":true,"kernel":{"type":"rbf","sigma":"0.5"}},
		{"name":"b","list":"l","dim":4,"kernel":{"type":"poly","degree":3,"coef0":0,"gamma":0.25}},
		{"name":"c","prefix":"c_","dim":2,"kernel":{"sigma":"median","sigma_scale":2}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint() != "2d511d78a4e279fe" || e.Fingerprint() != "717b4dc3f81ab234" {
		t.Errorf("fingerprints %s and %s changed", a.Fingerprint(), e.Fingerprint())
	}
}

// A YAML spec with a tab in its indentation is refused at the tab's line,
// as a configuration file is; merge keys (<<) still share a view's keys.
func TestYAMLTabsAndMerges(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"tab before an item", "task: regression\nviews:\n\t- {name: a, prefix: a_, dim: 3}\n",
			"line 3: a tab in the indentation: YAML indents with spaces only"},
		{"tab in a mapping", "task: regression\nviews:\n  - name: a\n\tprefix: a_\n",
			"line 4: a tab in the indentation: YAML indents with spaces only"},
	} {
		if _, err := ParseViewSpec([]byte(tc.text)); err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	spec, err := ParseViewSpec([]byte("meta: {shared: &v {prefix: a_, dim: 2}}\ntask: regression\nviews:\n  - <<: *v\n    name: a\n    dim: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if v := spec.Views[0]; v.Name != "a" || v.Prefix != "a_" || v.Dim != 3 {
		t.Errorf("merged view %+v, want a, a_ and its own dim 3", v)
	}
}

func FuzzParseViewSpec(f *testing.F) {
	f.Add([]byte(`{"task":"regression","views":[{"name":"a","prefix":"a_","dim":3}]}`))
	f.Add([]byte("task: classification\nviews:\n  - {name: a, list: l, dim: 2}\n"))
	f.Add([]byte(`{"task":"regression","meta":{"k":[1,{"x":null}]},"views":[{"name":"a","columns":["p"],"kernel":{"sigma":0.5}}]}`))
	f.Add([]byte("task: regression\nbase: &k {type: poly, degree: 2}\nviews:\n  - {name: a, prefix: a_, dim: 1, kernel: *k}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := ParseViewSpec(data)
		if err != nil {
			return
		}
		if err := spec.Validate(); err != nil {
			t.Fatalf("parsed spec fails validation: %v", err)
		}
		// The model file holds the spec as JSON: it reads back the same.
		js, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseViewSpec(js)
		if err != nil {
			t.Fatalf("%s does not read back: %v", js, err)
		}
		if back.Fingerprint() != spec.Fingerprint() || !bytes.Equal(back.Meta, spec.Meta) {
			t.Fatalf("%s reads back as another spec", js)
		}
		for l := range spec.Views {
			if spec.Views[l].Dimension() <= 0 {
				t.Fatal("accepted a view without features")
			}
		}
	})
}
