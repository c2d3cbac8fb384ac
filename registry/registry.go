// Package registry owns where published models live and how the jobs that
// serve them learn of a new one: a model store holds every version
// published, which one is current, and the refitter's checkpoints. Two
// stores implement the one Store interface:
//
//   - Kafka, a compacted model topic of one partition, shared by every
//     replica without a shared file system: models as chunked, checksummed
//     blobs (kafkaconn.WriteBlob), a JSON manifest per version and a
//     pointer to the current one;
//   - Dir, a directory of VERSION.mvml files and current.mvml, with their
//     manifests and pointer beside them, each written atomically.
//
// Both are also a Registry, what `mvml models` runs: List the versions and
// what they are, Get a version's file byte for byte, Promote a version to
// current and Rollback to the one current before. The pointer carries its
// own history (the versions current before it), since a compacted topic
// keeps only the last pointer.
//
// A reader never takes a partial or damaged model: a pointer to a version
// whose manifest or chunks are missing, or whose bytes fail their
// checksum, is refused, logged and counted (Follower.Refused), and the
// reader keeps the model it has. WatchFile follows a single model file the
// same way. The model files themselves are written and read by SaveModel
// and LoadModel.
//
// registry knows model files and the Kafka client, never records or
// services: pipeline wires a store to a running service (its Follow calls
// Service.Swap).
package registry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
)

// Follower follows the current model of a store, or of a model file.
type Follower interface {
	// Follow calls onCurrent with the current model when it starts, if
	// there is one, and with every model made current after, until ctx
	// ends (it then returns nil) or following cannot go on (an error that
	// waiting cannot mend). It never calls onCurrent with a partial or
	// damaged model: such a model is refused, logged and counted
	// (Refused), and onCurrent is not called. Calls are sequential.
	Follow(ctx context.Context, onCurrent func(*model.Model, Manifest)) error
	// Refused counts the models Follow refused since the follower was
	// made. Safe for concurrent use.
	Refused() int64
}

// Store is a model store: the published models, the current one, and the
// refitter's checkpoints. Its methods are safe for concurrent use.
type Store interface {
	// Publish stores m and returns its manifest; with makeCurrent it also
	// makes it the current model. A version already stored whole is kept
	// as first published: the version hashes everything that changes a
	// prediction.
	Publish(ctx context.Context, m *model.Model, meta Meta, makeCurrent bool) (Manifest, error)
	// Current returns the current model and its manifest, ErrNoModel when
	// there is none, or an error wrapping ErrUnusable when it cannot be
	// read whole.
	Current(ctx context.Context) (*model.Model, Manifest, error)
	Follower
	// PutCheckpoint stores data as the checkpoint of lineage, replacing
	// the one before; the registry does not look into it.
	PutCheckpoint(ctx context.Context, lineage string, data []byte) error
	// Checkpoint returns the checkpoint of lineage, ErrNoCheckpoint when
	// there is none.
	Checkpoint(ctx context.Context, lineage string) ([]byte, error)
	// Close releases the store's connections, within ctx.
	Close(ctx context.Context) error
}

var (
	// ErrNoModel is Current's error when no model was made current.
	ErrNoModel = errors.New("no current model")
	// ErrNoCheckpoint is Checkpoint's error when the lineage has none.
	ErrNoCheckpoint = errors.New("no checkpoint")
	// ErrUnusable marks a stored model or checkpoint that cannot be read
	// whole: its manifest or chunks are missing, or its bytes fail their
	// checksum or do not decode.
	ErrUnusable = errors.New("cannot be used")
)

// Role is what a publisher does.
type Role string

const (
	// RoleTrain is a training job: mvml train.
	RoleTrain Role = "train"
	// RoleRefit is a refit of statistics: mvml refit, or mvml serve's own.
	RoleRefit Role = "refit"
	// RoleOperator is a person moving the current pointer: mvml models
	// promote and rollback.
	RoleOperator Role = "operator"
)

// Meta describes a publication, beyond what the model says of itself.
type Meta struct {
	// Role is the publisher's role. Required.
	Role Role
	// Parent is the version the model continues, if any: the warm start of
	// a refit, the base of `mvml train --like`.
	Parent string
	// Note is free text for the people who read the manifests.
	Note string
	// Host names the publisher. Default ("") the host name, a pod's name on
	// Kubernetes.
	Host string
	// Gate, when set, is what the refitter's gate compared before it made
	// the model current, or did not; it goes into the manifest.
	Gate *Gate
}

// Gate is the verdict of the gate a tuned refit passes before it is made
// current: the losses compared, all squared losses from fold statistics
// (model.Model.Loss's units) per row, so that statistics of different
// sizes compare.
type Gate struct {
	// Outcome is GateAccepted or GateRejected.
	Outcome string `json:"outcome"`
	// Serving is the version of the model in service the refit was
	// compared with, Margin the relative margin allowed.
	Serving string  `json:"serving"`
	Margin  float64 `json:"margin"`
	// CVLoss is the refit's cross-validated loss per row; ServingCVLoss
	// the one recorded when the serving model was fitted, absent when it
	// was not tuned.
	CVLoss        float64  `json:"cv_loss"`
	ServingCVLoss *float64 `json:"serving_cv_loss,omitempty"`
	// NewRows are the (decayed) labelled rows gathered since the serving
	// model was made current; NewLoss is the refit's loss per row on them
	// out of sample (each fold by the fit on the other folds), and
	// ServingNewLoss the serving model's, which never saw them.
	NewRows        float64  `json:"new_rows"`
	NewLoss        *float64 `json:"new_loss,omitempty"`
	ServingNewLoss *float64 `json:"serving_new_loss,omitempty"`
}

// The outcomes of a Gate.
const (
	GateAccepted = "accepted"
	GateRejected = "rejected"
)

// publisher says who publishes with meta.
func (meta Meta) publisher() (Publisher, error) {
	switch meta.Role {
	case RoleTrain, RoleRefit, RoleOperator:
	default:
		return Publisher{}, fmt.Errorf("publisher role %q: want %s, %s or %s", meta.Role, RoleTrain, RoleRefit, RoleOperator)
	}
	host := meta.Host
	if host == "" {
		// A host without a name is still worth publishing from.
		host, _ = os.Hostname()
	}
	return Publisher{Host: host, Role: meta.Role}, nil
}

// Publisher is who published a model or moved the pointer.
type Publisher struct {
	Host string `json:"host"`
	Role Role   `json:"role"`
}

// Manifest describes a stored model.
type Manifest struct {
	Version string `json:"version"`
	Lineage string `json:"lineage"`
	// SHA256 (lowercase hex) and Bytes are the model file's.
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
	// Chunks is the number of messages the file is written in (a
	// directory's file is one).
	Chunks  int          `json:"chunks"`
	Created time.Time    `json:"created"`
	Rows    int          `json:"rows"`
	Task    schemas.Task `json:"task"`
	// ObjectivePerRow is the fit's final objective, summed over the heads,
	// per training row: comparable between refits of one lineage. Absent
	// when not known.
	ObjectivePerRow *float64  `json:"objective_per_row,omitempty"`
	Publisher       Publisher `json:"publisher"`
	Parent          string    `json:"parent,omitempty"`
	Note            string    `json:"note,omitempty"`
	// Tuning is the cross-validation table the model's hyper-parameters
	// were chosen by (model.Meta.Tuning), when they were.
	Tuning *model.Tuning `json:"tuning,omitempty"`
	// Gate is what the refitter's gate compared before it made the model
	// current (or, rejected, did not), for a tuned refit.
	Gate *Gate `json:"gate,omitempty"`
}

// Reason is why the current pointer moved.
type Reason string

// The reasons of a pointer: a new model published, a stored one made
// current by an operator (Promote), or the one current before put back
// (Rollback).
const (
	ReasonPublish  Reason = "publish"
	ReasonPromote  Reason = "promote"
	ReasonRollback Reason = "rollback"
)

// Pointer names the current model.
type Pointer struct {
	Version string    `json:"version"`
	SHA256  string    `json:"sha256"`
	At      time.Time `json:"at"`
	By      Publisher `json:"by"`
	Reason  Reason    `json:"reason"`
	// History are the versions that were current before this one, the
	// latest first, at most MaxHistory: where Rollback goes back to. The
	// pointer carries them itself because a compacted topic keeps only
	// the last pointer.
	History []string `json:"history,omitempty"`
}

// MaxHistory is the most versions a pointer remembers as current before
// it.
const MaxHistory = 64

// next is the pointer that makes version (of file checksum sha) current
// after p (nil: no model was current), for reason, by pub: p's version
// goes first in the history, unless it is version itself.
func (p *Pointer) next(version, sha string, pub Publisher, reason Reason) Pointer {
	n := Pointer{Version: version, SHA256: sha, At: time.Now().UTC(), By: pub, Reason: reason}
	switch {
	case p == nil:
	case p.Version == version:
		n.History = p.History
	default:
		n.History = append([]string{p.Version}, p.History[:min(len(p.History), MaxHistory-1)]...)
	}
	return n
}

// newManifest describes m, whose model file has the sum given.
func newManifest(m *model.Model, sum fileSum, chunks int, meta Meta, pub Publisher) Manifest {
	created, err := time.Parse(time.RFC3339, m.Meta.Created)
	if err != nil {
		// A refit's model says nothing of its time: it is made now.
		created = time.Now().UTC().Truncate(time.Second)
	}
	man := Manifest{
		Version: m.Version, Lineage: m.Lineage(), SHA256: sum.sha, Bytes: sum.bytes, Chunks: chunks,
		Created: created, Rows: m.Meta.Rows, Task: m.Spec.Task, Publisher: pub, Parent: meta.Parent, Note: meta.Note,
		Tuning: m.Meta.Tuning, Gate: meta.Gate,
	}
	if obj, ok := objectivePerRow(m); ok {
		man.ObjectivePerRow = &obj
	}
	return man
}

// objectivePerRow is the sum of the heads' final objectives over the
// training rows, when the model knows both.
func objectivePerRow(m *model.Model) (float64, bool) {
	if m.Meta.Rows <= 0 || len(m.Heads) == 0 {
		return 0, false
	}
	sum := 0.0
	for _, h := range m.Heads {
		obj := h.Trace.Objective
		if len(obj) == 0 {
			return 0, false
		}
		sum += obj[len(obj)-1]
	}
	v := sum / float64(m.Meta.Rows)
	return v, !math.IsNaN(v) && !math.IsInf(v, 0)
}
