package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/model"
)

// registries are the two stores, each made empty for a test; damage
// stores version m damaged in it: its manifest, and a file that fails its
// checksum.
var registries = []struct {
	name   string
	open   func(t *testing.T) Registry
	damage func(t *testing.T, r Registry, m *model.Model)
}{
	{"kafka", func(t *testing.T) Registry {
		return openKafka(t, kafkatest.Start(t, 1, "models"), "models", nil)
	}, func(t *testing.T, r Registry, m *model.Model) {
		chunks, man, _ := rawPublication(t, m)
		chunks[1].Value[100] ^= 0x40
		var msgs []kafkatest.Message
		for _, c := range chunks {
			msgs = append(msgs, kafkatest.Message{Key: c.Key, Value: c.Value, Headers: kafkatest.HeadersOf(c.Headers)})
		}
		msgs = append(msgs, kafkatest.Message{Key: []byte(modelKey(m.Version)), Value: []byte(mustJSON(t, man))})
		if err := kafkaProduce(r.(*Kafka), msgs); err != nil {
			t.Fatal(err)
		}
	}},
	{"dir", func(t *testing.T) Registry {
		d, err := OpenDir(t.TempDir(), DirOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}, func(t *testing.T, r Registry, m *model.Model) {
		d := r.(*Dir)
		file, err := encodeModel(m)
		if err != nil {
			t.Fatal(err)
		}
		man := newManifest(m, sumOf(file), 1, Meta{}, Publisher{Host: "test", Role: RoleTrain})
		file[100] ^= 0x40
		if err := os.WriteFile(d.modelPath(m.Version), file, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := writeJSONAtomic(d.manifestPath(m.Version), man, "test"); err != nil {
			t.Fatal(err)
		}
	}},
}

// kafkaProduce writes raw messages to k's topic.
func kafkaProduce(k *Kafka, msgs []kafkatest.Message) error {
	c := &kafkatest.Cluster{Brokers: k.cfg.Conn.Brokers}
	return c.Send(k.cfg.Topic, msgs...)
}

// datedModel is smallModel(seed) created at the given hour of a day.
func datedModel(t *testing.T, seed uint64, hour int) *model.Model {
	m := smallModel(t, seed)
	m.Meta.Created = time.Date(2026, 3, 1, hour, 0, 0, 0, time.UTC).Format(time.RFC3339)
	return m
}

// The registry of either store: List shows every version with what it
// is, who published it and which one is current; Get gives a version's
// file byte for byte; Promote makes any whole version current and
// Rollback undoes the moves of the pointer one by one, back to the first
// model; a version unknown or damaged is refused by name, and the pointer
// stays.
func TestRegistry(t *testing.T) {
	for _, store := range registries {
		t.Run(store.name, func(t *testing.T) {
			ctx := testContext(t)
			r := store.open(t)
			if l, err := r.List(ctx); err != nil || len(l.Versions) != 0 || l.Current != nil {
				t.Fatalf("an empty store lists %+v, %v", l, err)
			}
			if _, err := r.Rollback(ctx, Meta{}); !errors.Is(err, ErrNoModel) {
				t.Errorf("rollback of an empty store: %v, want ErrNoModel", err)
			}
			m1, m2, m3 := datedModel(t, 1, 1), datedModel(t, 2, 2), datedModel(t, 3, 3)
			for _, p := range []struct {
				m       *model.Model
				meta    Meta
				current bool
			}{
				{m1, Meta{Role: RoleTrain, Host: "cron-1"}, true},
				{m2, Meta{Role: RoleRefit, Host: "refit-0", Parent: m1.Version, Note: "a candidate"}, false},
				{m3, Meta{Role: RoleTrain, Host: "cron-2"}, true},
			} {
				if _, err := r.Publish(ctx, p.m, p.meta, p.current); err != nil {
					t.Fatal(err)
				}
			}
			l, err := r.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var versions []string
			for _, man := range l.Versions {
				versions = append(versions, man.Version)
			}
			if want := []string{m1.Version, m2.Version, m3.Version}; !slices.Equal(versions, want) {
				t.Fatalf("versions %v, want %v", versions, want)
			}
			man2 := l.Versions[1]
			if man2.Rows != m2.Meta.Rows || man2.ObjectivePerRow == nil || man2.Publisher != (Publisher{Host: "refit-0", Role: RoleRefit}) ||
				man2.Parent != m1.Version || man2.Note != "a candidate" || !man2.Created.Equal(time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)) {
				t.Errorf("manifest of %s: %+v", m2.Version, man2)
			}
			checkPointer(t, l.Current, m3.Version, ReasonPublish, RoleTrain, m1.Version)

			file, man, err := r.Get(ctx, m2.Version)
			want, _ := encodeModel(m2)
			if err != nil || !bytes.Equal(file, want) || man.SHA256 != sumOf(want).sha {
				t.Errorf("get %s: %d bytes, %v; want its file of %d bytes", m2.Version, len(file), err, len(want))
			}
			if _, _, err := r.Get(ctx, "0123456789ab"); !errors.Is(err, ErrUnknownVersion) {
				t.Errorf("get of an unknown version: %v", err)
			}

			p, moved, err := r.Promote(ctx, m2.Version, Meta{Host: "alice@laptop"})
			if err != nil || !moved {
				t.Fatalf("promote: moved %v, %v", moved, err)
			}
			checkPointer(t, &p, m2.Version, ReasonPromote, RoleOperator, m3.Version, m1.Version)
			if p.By.Host != "alice@laptop" {
				t.Errorf("promoted by %+v", p.By)
			}
			if cur, _, err := r.Current(ctx); err != nil || cur.Version != m2.Version {
				t.Fatalf("current after promote: %v, %v", cur, err)
			}
			if again, moved, err := r.Promote(ctx, m2.Version, Meta{}); err != nil || moved || !again.At.Equal(p.At) {
				t.Errorf("promoting the current version again: %+v, moved %v, %v; want the pointer unchanged", again, moved, err)
			}
			for _, tc := range []struct {
				what    string
				err     error
				promote string
			}{
				{"an unknown version", ErrUnknownVersion, "0123456789ab"},
				{"a damaged version", ErrUnusable, ""},
			} {
				version := tc.promote
				if version == "" {
					m4 := datedModel(t, 4, 4)
					store.damage(t, r, m4)
					version = m4.Version
					if _, _, err := r.Get(ctx, version); !errors.Is(err, ErrUnusable) {
						t.Errorf("get of %s: %v, want ErrUnusable", tc.what, err)
					}
				}
				if _, _, err := r.Promote(ctx, version, Meta{}); !errors.Is(err, tc.err) {
					t.Errorf("promote of %s: %v, want %v", tc.what, err, tc.err)
				}
				if l, _ := r.List(ctx); l.Current == nil || l.Current.Version != m2.Version {
					t.Errorf("after refusing to promote %s the current pointer is %+v", tc.what, l.Current)
				}
			}

			p, err = r.Rollback(ctx, Meta{})
			if err != nil {
				t.Fatal(err)
			}
			checkPointer(t, &p, m3.Version, ReasonRollback, RoleOperator, m1.Version)
			p, err = r.Rollback(ctx, Meta{})
			if err != nil {
				t.Fatal(err)
			}
			checkPointer(t, &p, m1.Version, ReasonRollback, RoleOperator)
			if cur, _, err := r.Current(ctx); err != nil || cur.Version != m1.Version {
				t.Fatalf("current after two rollbacks: %v, %v", cur, err)
			}
			if _, err := r.Rollback(ctx, Meta{}); !errors.Is(err, ErrNoHistory) {
				t.Errorf("a rollback from the first model: %v, want ErrNoHistory", err)
			}
		})
	}
}

// checkPointer fails the test unless p names version, moved for reason by
// a publisher of role, with history.
func checkPointer(t *testing.T, p *Pointer, version string, reason Reason, role Role, history ...string) {
	t.Helper()
	switch {
	case p == nil:
		t.Errorf("no pointer, want one to %s", version)
	case p.Version != version || p.Reason != reason || p.By.Role != role || !slices.Equal(p.History, history):
		t.Errorf("pointer to %s (%s by %s, history %v); want %s (%s by %s, history %v)",
			p.Version, p.Reason, p.By.Role, p.History, version, reason, role, history)
	}
}

// A pointer remembers at most MaxHistory versions, the latest first.
func TestPointerHistoryBounded(t *testing.T) {
	var p *Pointer
	for i := range MaxHistory + 10 {
		n := p.next(fmt.Sprintf("%012x", i), "", Publisher{}, ReasonPublish)
		p = &n
	}
	if len(p.History) != MaxHistory || p.History[0] != fmt.Sprintf("%012x", MaxHistory+8) {
		t.Errorf("history of %d versions starting %s", len(p.History), p.History[0])
	}
}

// A model store of before the manifests and pointer files, or whose
// current.mvml another writer replaced, is read off its model files: its
// versions are listed, got and promoted, and the current pointer is
// inferred from current.mvml, the version of current.json first in its
// history.
func TestDirWithoutManifests(t *testing.T) {
	ctx := context.Background()
	d, err := OpenDir(t.TempDir(), DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m1, m2, m3 := datedModel(t, 1, 1), datedModel(t, 2, 2), datedModel(t, 3, 3)
	for _, m := range []*model.Model{m1, m2} {
		if _, err := d.Publish(ctx, m, Meta{Role: RoleTrain}, true); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []*model.Model{m1, m2} {
		if err := os.Remove(d.manifestPath(m.Version)); err != nil {
			t.Fatal(err)
		}
	}
	// As `mvml train --model DIR/current.mvml` and an earlier release do.
	if err := SaveModel(d.modelPath(m3.Version), m3); err != nil {
		t.Fatal(err)
	}
	if err := SaveModel(filepath.Join(d.Path(), CurrentModel), m3); err != nil {
		t.Fatal(err)
	}
	l, err := d.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Versions) != 3 || l.Versions[0].Version != m1.Version || l.Versions[2].Version != m3.Version || l.Versions[0].Rows != m1.Meta.Rows {
		t.Errorf("versions listed %+v", l.Versions)
	}
	if l.Current == nil || l.Current.Version != m3.Version || !slices.Equal(l.Current.History, []string{m2.Version, m1.Version}) {
		t.Errorf("inferred pointer %+v, want %s with history %s, %s", l.Current, m3.Version, m2.Version, m1.Version)
	}
	if _, _, err := d.Get(ctx, m1.Version); err != nil {
		t.Errorf("get without a manifest: %v", err)
	}
	p, err := d.Rollback(ctx, Meta{})
	if err != nil || p.Version != m2.Version {
		t.Fatalf("rollback: %+v, %v", p, err)
	}
	if cur, _, err := d.Current(ctx); err != nil || cur.Version != m2.Version {
		t.Errorf("current after the rollback: %v, %v", cur, err)
	}
}
