package schemas

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestParseViewSpec(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		wantErr string
	}{
		{"prefix", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":3}]}`, ""},
		{"columns", `{"task":"classification","views":[{"name":"a","columns":["p","q"]}]}`, ""},
		{"list", `{"task":"classification","views":[{"name":"a","list":"vals","dim":4}]}`, ""},
		{"yaml", "task: regression\nviews:\n  - name: a\n    prefix: a_\n    dim: 2\n", ""},
		{"empty", ``, "empty view spec"},
		{"no task", `{"views":[{"name":"a","prefix":"a_","dim":3}]}`, "task is missing"},
		{"bad task", `{"task":"ranking","views":[{"name":"a","prefix":"a_","dim":3}]}`, `task "ranking"`},
		{"no views", `{"task":"regression","views":[]}`, "no views"},
		{"unknown key", `{"task":"regression","viewz":[]}`, "unknown field"},
		{"two layouts", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":3,"list":"l"}]}`, "exactly one"},
		{"no dim", `{"task":"regression","views":[{"name":"a","prefix":"a_"}]}`, "dim must be positive"},
		{"dim disagrees", `{"task":"regression","views":[{"name":"a","columns":["p"],"dim":2}]}`, "dim 2 but 1 columns"},
		{"duplicate view", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":1},{"name":"a","prefix":"b_","dim":1}]}`, "named twice"},
		{"column twice", `{"task":"regression","views":[{"name":"a","columns":["p"]},{"name":"b","columns":["p"]}]}`, `column "p" is already`},
		{"label as feature", `{"task":"regression","views":[{"name":"a","columns":["label"]}]}`, "already the label"},
		{"reserved name", `{"task":"regression","views":[{"name":"id","prefix":"a_","dim":1}]}`, "reserved"},
		{"bad kernel", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":1,"kernel":{"type":"sigmoid"}}]}`, "kernel type"},
		{"bad sigma", `{"task":"regression","views":[{"name":"a","prefix":"a_","dim":1,"kernel":{"sigma":"wide"}}]}`, "sigma"},
		{"malformed yaml", "task: [", "yaml"},
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
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
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
}

func FuzzParseViewSpec(f *testing.F) {
	f.Add([]byte(`{"task":"regression","views":[{"name":"a","prefix":"a_","dim":3}]}`))
	f.Add([]byte("task: classification\nviews:\n  - {name: a, list: l, dim: 2}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := ParseViewSpec(data)
		if err != nil {
			return
		}
		if err := spec.Validate(); err != nil {
			t.Fatalf("parsed spec fails validation: %v", err)
		}
		for l := range spec.Views {
			if spec.Views[l].Dimension() <= 0 {
				t.Fatal("accepted a view without features")
			}
		}
	})
}
