package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/mvml/mvml/model"
)

// Registry is a model store as an operator runs it (`mvml models`): the
// versions it holds and what they are, a version's model file, and the
// current pointer moved by hand. Kafka and Dir are registries.
type Registry interface {
	Store
	// List returns every version stored and the current pointer.
	List(ctx context.Context) (Listing, error)
	// Get returns the model file of version, byte for byte as published,
	// checked against its manifest's SHA-256 and decoded to make sure it
	// is that version's model; ErrUnknownVersion when the store has no
	// such version, ErrUnusable when its file is not stored whole.
	Get(ctx context.Context, version string) ([]byte, Manifest, error)
	// Promote makes version current (reason promote), after checking that
	// it is stored whole, and reports that it moved the pointer; the
	// version current until then goes first in the pointer's history.
	// Promoting the current version changes nothing: it returns the
	// pointer as it is.
	Promote(ctx context.Context, version string, meta Meta) (p Pointer, moved bool, err error)
	// Rollback makes current again the version that was current before
	// the present one: the first of the pointer's history, which it takes
	// off, so that a second rollback goes one further back (an undo, not
	// a toggle). ErrNoHistory when no version was current before.
	Rollback(ctx context.Context, meta Meta) (Pointer, error)
}

var (
	// ErrUnknownVersion is the error of a version the store does not hold.
	ErrUnknownVersion = errors.New("no such version in the model store")
	// ErrNoHistory is Rollback's error when no version was current before
	// the current one.
	ErrNoHistory = errors.New("no version was current before it: nothing to roll back to")
)

// Listing is what a store holds.
type Listing struct {
	// Versions are the manifests of every version stored, oldest first:
	// in the order they were published to a topic, by creation time in a
	// directory.
	Versions []Manifest
	// Current is the current pointer, nil when no model is current.
	Current *Pointer
}

// pointerStore is what Promote and Rollback need of a store, so that both
// stores move their pointer by one implementation.
type pointerStore interface {
	// pointer returns the current pointer, read up to now; nil when none.
	pointer(ctx context.Context) (*Pointer, error)
	// Get is Registry.Get.
	Get(ctx context.Context, version string) ([]byte, Manifest, error)
	// setPointer makes p current; file is the model file p names.
	setPointer(ctx context.Context, p Pointer, file []byte) error
}

// promote is Registry.Promote of s.
func promote(ctx context.Context, s pointerStore, version string, meta Meta) (Pointer, bool, error) {
	fail := func(err error) (Pointer, error) { return Pointer{}, fmt.Errorf("promote %s: %w", version, err) }
	cur, err := s.pointer(ctx)
	if err != nil {
		_, err = fail(err)
		return Pointer{}, false, err
	}
	if cur != nil && cur.Version == version {
		return *cur, false, nil
	}
	p, err := move(ctx, s, cur, version, ReasonPromote, meta, fail)
	return p, err == nil, err
}

// rollback is Registry.Rollback of s.
func rollback(ctx context.Context, s pointerStore, meta Meta) (Pointer, error) {
	fail := func(err error) (Pointer, error) { return Pointer{}, fmt.Errorf("roll back: %w", err) }
	cur, err := s.pointer(ctx)
	switch {
	case err != nil:
		return fail(err)
	case cur == nil:
		return fail(ErrNoModel)
	case len(cur.History) == 0:
		return fail(fmt.Errorf("current model %s: %w", cur.Version, ErrNoHistory))
	}
	target := cur.History[0]
	fail = func(err error) (Pointer, error) {
		return Pointer{}, fmt.Errorf("roll back from %s to %s, current before it: %w", cur.Version, target, err)
	}
	return move(ctx, s, cur, target, ReasonRollback, meta, fail)
}

// move points s at version, stored whole, from cur. A rollback takes its
// target off the history instead of pushing cur onto it.
func move(ctx context.Context, s pointerStore, cur *Pointer, version string, reason Reason, meta Meta,
	fail func(error) (Pointer, error)) (Pointer, error) {
	if meta.Role == "" {
		meta.Role = RoleOperator
	}
	pub, err := meta.publisher()
	if err != nil {
		return fail(err)
	}
	file, man, err := s.Get(ctx, version)
	if err != nil {
		return fail(err)
	}
	p := cur.next(version, man.SHA256, pub, reason)
	if reason == ReasonRollback {
		p.History = cur.History[1:]
	}
	if err := s.setPointer(ctx, p, file); err != nil {
		return fail(err)
	}
	return p, nil
}

// checkFile makes sure that file is the model man describes: its
// checksum, size, version and lineage; otherwise an error wrapping
// ErrUnusable.
func checkFile(file []byte, man Manifest) (*model.Model, error) {
	if sum := sumOf(file); sum.sha != man.SHA256 || sum.bytes != man.Bytes {
		return nil, fmt.Errorf("%w: model %s: the file has SHA-256 %s (%d bytes), its manifest says %s (%d bytes)",
			ErrUnusable, man.Version, sum.sha, sum.bytes, man.SHA256, man.Bytes)
	}
	return decodeFile(file, man)
}

// decodeFile decodes file, whose checksum is man's, and makes sure that it
// is the model man describes: its version and lineage; otherwise an error
// wrapping ErrUnusable.
func decodeFile(file []byte, man Manifest) (*model.Model, error) {
	m, err := model.Decode(bytes.NewReader(file))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: model %s: %w", ErrUnusable, man.Version, err)
	case m.Version != man.Version:
		return nil, fmt.Errorf("%w: model %s: its file holds model %s", ErrUnusable, man.Version, m.Version)
	case m.Lineage() != man.Lineage:
		return nil, fmt.Errorf("%w: model %s: its file has lineage %s, its manifest %s", ErrUnusable, man.Version, m.Lineage(), man.Lineage)
	}
	return m, nil
}

// validVersion reports whether s can be a version (model.Model.Version:
// hex digits), which makes it a safe file name and Kafka key.
func validVersion(s string) bool { return validLineage(s) }

// Both stores are registries.
var (
	_ Registry = (*Kafka)(nil)
	_ Registry = (*Dir)(nil)
)
