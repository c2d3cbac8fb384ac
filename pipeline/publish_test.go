package pipeline

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Publishing never replaces a version file: the same model again is kept
// as first published, other bytes under its name are refused and left as
// they are, and current.mvml is then not touched either.
func TestPublishModelNeverOverwrites(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	other := trainTestModel(t, spec, makeData(spec, 150, 2))
	if other.Version == m.Version {
		t.Fatal("two models of different data share a version")
	}
	read := func(path string) []byte {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	encoded := func(path string) []byte {
		t.Helper()
		if err := SaveModel(path, other); err != nil {
			t.Fatal(err)
		}
		return read(path)
	}

	for _, tc := range []struct {
		name string
		// existing is the content of DIR/VERSION.mvml before publishing,
		// nil for none.
		existing func(dir string) []byte
		wantErr  string
	}{
		{name: "new version"},
		{name: "same model again", existing: func(dir string) []byte {
			if err := PublishModel(dir, m); err != nil {
				t.Fatal(err)
			}
			m.Meta.Created = "2000-01-01T00:00:00Z" // a later publication of the same model
			return read(filepath.Join(dir, m.Version+".mvml"))
		}},
		{name: "another model under its name", existing: func(dir string) []byte {
			return encoded(filepath.Join(dir, m.Version+".mvml"))
		}, wantErr: "holds model " + other.Version + ", refusing to replace it"},
		{name: "not a model", existing: func(dir string) []byte {
			data := []byte("something else entirely")
			if err := os.WriteFile(filepath.Join(dir, m.Version+".mvml"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			return data
		}, wantErr: "exists and is not that model, refusing to replace it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, m.Version+".mvml")
			var before []byte
			if tc.existing != nil {
				before = tc.existing(dir)
			}
			err := PublishModel(dir, m)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error %v, want one naming %s and containing %q", err, path, tc.wantErr)
				}
				if !bytes.Equal(read(path), before) {
					t.Error("the version file was replaced")
				}
				if _, err := os.Stat(filepath.Join(dir, CurrentModel)); !os.IsNotExist(err) {
					t.Errorf("current.mvml written after a refused publication (%v)", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if before != nil && !bytes.Equal(read(path), before) {
				t.Error("the version file of the same model was rewritten")
			}
			cur, err := LoadModel(filepath.Join(dir, CurrentModel))
			if err != nil || cur.Version != m.Version {
				t.Fatalf("current.mvml: %v, %v; want model %s", cur, err, m.Version)
			}
		})
	}
}
