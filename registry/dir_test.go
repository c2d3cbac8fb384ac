package registry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mvml/mvml/internal/syncbuf"
	"github.com/mvml/mvml/model"
)

// Publishing never replaces a version file: the same model again is kept
// as first published, other bytes under its name are refused and left as
// they are, and current.mvml is then not touched either.
func TestPublishModelNeverOverwrites(t *testing.T) {
	m := smallModel(t, 1)
	other := smallModel(t, 2)
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
	ctx := context.Background()
	meta := Meta{Role: RoleTrain}

	for _, tc := range []struct {
		name string
		// existing is the content of DIR/VERSION.mvml before publishing,
		// nil for none.
		existing func(dir *Dir) []byte
		wantErr  string
	}{
		{name: "new version"},
		{name: "same model again", existing: func(dir *Dir) []byte {
			if _, err := dir.Publish(ctx, m, meta, true); err != nil {
				t.Fatal(err)
			}
			m.Meta.Created = "2000-01-01T00:00:00Z" // a later publication of the same model
			return read(filepath.Join(dir.Path(), m.Version+".mvml"))
		}},
		{name: "another model under its name", existing: func(dir *Dir) []byte {
			return encoded(filepath.Join(dir.Path(), m.Version+".mvml"))
		}, wantErr: "holds model " + other.Version + ", refusing to replace it"},
		{name: "not a model", existing: func(dir *Dir) []byte {
			data := []byte("something else entirely")
			if err := os.WriteFile(filepath.Join(dir.Path(), m.Version+".mvml"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			return data
		}, wantErr: "exists and is not that model, refusing to replace it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := OpenDir(t.TempDir(), DirOptions{})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir.Path(), m.Version+".mvml")
			var before []byte
			if tc.existing != nil {
				before = tc.existing(dir)
			}
			man, err := dir.Publish(ctx, m, meta, true)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error %v, want one naming %s and containing %q", err, path, tc.wantErr)
				}
				if !bytes.Equal(read(path), before) {
					t.Error("the version file was replaced")
				}
				if _, err := os.Stat(filepath.Join(dir.Path(), CurrentModel)); !os.IsNotExist(err) {
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
			if sum := sumOf(read(path)); man.SHA256 != sum.sha || man.Bytes != sum.bytes || man.Version != m.Version || man.Lineage != m.Lineage() {
				t.Errorf("manifest %+v does not describe %s", man, path)
			}
			cur, _, err := dir.Current(ctx)
			if err != nil || cur.Version != m.Version {
				t.Fatalf("current.mvml: %v, %v; want model %s", cur, err, m.Version)
			}
		})
	}
}

// OpenDir creates the store, takes an existing one, and refuses one that
// cannot be, naming it.
func TestOpenDir(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "models", "prod")
	if _, err := OpenDir(store, DirOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadDir(store); err != nil || len(got) != 0 {
		t.Fatalf("a prepared store holds %v (%v)", got, err)
	}
	if _, err := OpenDir(store, DirOptions{}); err != nil {
		t.Fatalf("an existing store: %v", err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{plain, filepath.Join(plain, "models")} {
		if _, err := OpenDir(bad, DirOptions{}); err == nil || !strings.Contains(err.Error(), "model store "+bad+": ") {
			t.Errorf("OpenDir(%s): %v", bad, err)
		}
	}
}

// A directory has no current model until one is published current, and
// keeps checkpoints by lineage.
func TestDirCurrentAndCheckpoints(t *testing.T) {
	ctx := context.Background()
	dir, err := OpenDir(t.TempDir(), DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := dir.Current(ctx); !errors.Is(err, ErrNoModel) {
		t.Fatalf("empty store: %v, want ErrNoModel", err)
	}
	m := smallModel(t, 1)
	if _, err := dir.Publish(ctx, m, Meta{Role: RoleRefit}, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := dir.Current(ctx); !errors.Is(err, ErrNoModel) {
		t.Fatalf("a model published not current: %v, want ErrNoModel", err)
	}
	if _, err := dir.Publish(ctx, m, Meta{}, true); err == nil || !strings.Contains(err.Error(), `publisher role ""`) {
		t.Errorf("a publication without a role: %v", err)
	}
	lineage := m.Lineage()
	if _, err := dir.Checkpoint(ctx, lineage); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("no checkpoint yet: %v", err)
	}
	for _, data := range [][]byte{[]byte("first"), []byte("second")} {
		if err := dir.PutCheckpoint(ctx, lineage, data); err != nil {
			t.Fatal(err)
		}
		got, err := dir.Checkpoint(ctx, lineage)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("checkpoint %q, %v; want %q", got, err, data)
		}
	}
	if err := dir.PutCheckpoint(ctx, "../x", nil); err == nil {
		t.Error("a lineage that is a path was taken")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Following a directory gives its current model at once, then every other
// model published current; a damaged current.mvml is refused and counted,
// and one that disappears is logged once.
func TestDirFollow(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log syncbuf.Buffer
	dir, err := OpenDir(t.TempDir(), DirOptions{Interval: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	m1, m2 := smallModel(t, 1), smallModel(t, 2)
	if _, err := dir.Publish(ctx, m1, Meta{Role: RoleTrain}, true); err != nil {
		t.Fatal(err)
	}
	got := make(chan *model.Model, 10)
	done := make(chan error, 1)
	go func() { done <- dir.Follow(ctx, func(m *model.Model, _ Manifest) { got <- m }) }()
	if m := <-got; m.Version != m1.Version {
		t.Fatalf("first model %s, want the current %s", m.Version, m1.Version)
	}
	path := filepath.Join(dir.Path(), CurrentModel)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the damaged file refused", func() bool { return dir.Refused() > 0 })
	if _, err := dir.Publish(ctx, m2, Meta{Role: RoleTrain}, true); err != nil {
		t.Fatal(err)
	}
	if m := <-got; m.Version != m2.Version {
		t.Fatalf("then model %s, want %s", m.Version, m2.Version)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the missing file logged", func() bool { return strings.Contains(log.String(), "model file is gone") })
	looked := dir.Looks()
	waitFor(t, "three more looks at the missing file", func() bool { return dir.Looks() >= looked+3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log.String(), "model file is gone"); n != 1 || len(got) != 0 {
		t.Errorf("the missing file logged %d times (want once), %d more models given", n, len(got))
	}
}
