package schemas

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// Task is what the label means.
type Task string

const (
	// Classification labels are class values (any distinct numbers); two
	// classes give a binary model, more give one-vs-all or shared models.
	Classification Task = "classification"
	// Regression labels are real values.
	Regression Task = "regression"
)

// Kernel types understood by transform.
const (
	KernelRBF    = "rbf"
	KernelLinear = "linear"
	KernelPoly   = "poly"
)

// KernelSpec sets one view's kernel. The zero value means a Gaussian (RBF)
// kernel whose width is the mean pairwise distance of the view, as in the
// paper's classification experiments.
type KernelSpec struct {
	// Type is rbf, linear or poly. Default rbf.
	Type string `json:"type,omitempty" yaml:"type,omitempty"`
	// Gamma is the RBF width exp(-gamma·||x-z||²) or the poly scale
	// (gamma·xᵀz + coef0)^degree. Zero means: derive it from Sigma (rbf) or
	// use 1/dim (poly).
	Gamma float64 `json:"gamma,omitempty" yaml:"gamma,omitempty"`
	// Sigma, for rbf when Gamma is zero: "mean" (default), "median", or a
	// number; gamma = 1/(2σ²).
	Sigma string `json:"sigma,omitempty" yaml:"sigma,omitempty"`
	// SigmaScale multiplies a σ derived from the data (mean or median), so
	// that the width can be tuned relative to the data's scale. Default 1.
	SigmaScale float64 `json:"sigma_scale,omitempty" yaml:"sigma_scale,omitempty"`
	// Degree of the polynomial kernel. Default 2.
	Degree int `json:"degree,omitempty" yaml:"degree,omitempty"`
	// Coef0 of the polynomial kernel. Default (nil) 1; 0 gives a
	// homogeneous kernel.
	Coef0 *float64 `json:"coef0,omitempty" yaml:"coef0,omitempty"`
}

// View is one feature set of a multi-view record. Exactly one layout is
// given: Prefix with Dim (flat columns prefix0..prefix{dim-1}), Columns (an
// explicit list), or List (one list column holding the whole view; Dim then
// fixes its length).
type View struct {
	Name    string      `json:"name" yaml:"name"`
	Prefix  string      `json:"prefix,omitempty" yaml:"prefix,omitempty"`
	Dim     int         `json:"dim,omitempty" yaml:"dim,omitempty"`
	Columns []string    `json:"columns,omitempty" yaml:"columns,omitempty"`
	List    string      `json:"list,omitempty" yaml:"list,omitempty"`
	Kernel  *KernelSpec `json:"kernel,omitempty" yaml:"kernel,omitempty"`
	// Standardize scales every feature of the view to zero mean and unit
	// variance (training statistics) before the kernel. Default false.
	Standardize bool `json:"standardize,omitempty" yaml:"standardize,omitempty"`
	// Meta is free data about the view (any JSON value), kept in the model
	// file; mvml does not read it.
	Meta json.RawMessage `json:"meta,omitempty" yaml:"-"`
}

// MaxDim bounds a view's dimension, so that a corrupt spec cannot make a
// reader allocate without limit.
const MaxDim = 1 << 20

// Layout names how a view is stored in a flat input file.
type Layout int

const (
	// LayoutColumns: one scalar column per feature.
	LayoutColumns Layout = iota
	// LayoutList: one list column per view.
	LayoutList
)

// Layout reports how the view is stored.
func (v *View) Layout() Layout {
	if v.List != "" {
		return LayoutList
	}
	return LayoutColumns
}

// Dimension is the number of features of the view.
func (v *View) Dimension() int {
	if len(v.Columns) > 0 {
		return len(v.Columns)
	}
	return v.Dim
}

// ColumnNames returns the flat input columns of a LayoutColumns view, in
// feature order, or nil for a LayoutList view.
func (v *View) ColumnNames() []string {
	if v.List != "" {
		return nil
	}
	if len(v.Columns) > 0 {
		return v.Columns
	}
	names := make([]string, v.Dim)
	for i := range names {
		names[i] = v.Prefix + strconv.Itoa(i)
	}
	return names
}

// ViewSpec describes a multi-view data set: which columns hold the id, the
// label and each view, and what the label means. It reads the views.json
// files of the reference data sets as they are.
type ViewSpec struct {
	Name string `json:"name,omitempty" yaml:"name,omitempty"`
	Task Task   `json:"task" yaml:"task"`
	// ID is the input column of integer record ids. Default "id".
	ID string `json:"id,omitempty" yaml:"id,omitempty"`
	// Label is the input column of labels. Default "label".
	Label string `json:"label,omitempty" yaml:"label,omitempty"`
	Views []View `json:"views" yaml:"views"`

	// Informational fields, kept so that documented data sets load strictly.
	NClasses         int               `json:"n_classes,omitempty" yaml:"n_classes,omitempty"`
	Split            string            `json:"split,omitempty" yaml:"split,omitempty"`
	Files            map[string]string `json:"files,omitempty" yaml:"files,omitempty"`
	LabelDescription string            `json:"label_description,omitempty" yaml:"label_description,omitempty"`
	// Meta is free data about the data set (any JSON value: its rows, its
	// source, a split), kept in the model file; mvml does not read it and
	// it is not part of the fingerprint.
	Meta json.RawMessage `json:"meta,omitempty" yaml:"-"`
}

// LoadViewSpec reads and validates a view spec file (JSON or YAML).
// Errors name the file, the line and the key path (views[2].dim).
func LoadViewSpec(path string) (*ViewSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("view spec: %w", err)
	}
	spec, err := ParseViewSpec(data)
	if err != nil {
		return nil, fmt.Errorf("view spec %s: %w", path, err)
	}
	return spec, nil
}

// ParseViewSpec decodes a view spec from JSON (text starting with "{") or
// YAML, fills defaults and validates it. Unknown keys are errors, so that
// a misspelt key is not silently ignored, and so are keys given twice;
// free data goes under "meta", in the spec or in a view. An error says
// where (line and key path), what was found and what is wanted.
func ParseViewSpec(data []byte) (*ViewSpec, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("empty view spec")
	}
	doc, err := parseSpec(data)
	if err != nil {
		return nil, err
	}
	spec, err := doc.bindSpec()
	if err != nil {
		return nil, doc.lines.Locate(err)
	}
	spec.fillDefaults()
	if err := spec.Validate(); err != nil {
		return nil, doc.lines.Locate(err)
	}
	return spec, nil
}

func (s *ViewSpec) fillDefaults() {
	if s.ID == "" {
		s.ID = "id"
	}
	if s.Label == "" {
		s.Label = "label"
	}
}

// Validate checks that the spec is complete and unambiguous. Its errors
// name the key path of the problem (views[2].dim).
func (s *ViewSpec) Validate() error {
	switch s.Task {
	case Classification, Regression:
	case "":
		return pathErr("task", "missing: want classification or regression")
	default:
		return pathErr("task", "found %q, want classification or regression", s.Task)
	}
	if len(s.Views) == 0 {
		return pathErr("views", "no views: want at least one")
	}
	if s.ID == s.Label {
		return pathErr("label", "%q is the id column too: give the label its own column", s.Label)
	}
	seenView := map[string]int{}
	seenCol := map[string]string{s.ID: "the id column", s.Label: "the label column"}
	for i := range s.Views {
		v := &s.Views[i]
		path := indexPath("views", i)
		switch prev, named := seenView[v.Name]; {
		case v.Name == "":
			return pathErr(path, "no name: every view needs one")
		case v.Name == FieldID || v.Name == FieldLabel:
			return pathErr(keyPath(path, "name"), "%q is reserved: name the view otherwise", v.Name)
		case named:
			return pathErr(keyPath(path, "name"), "%q is the name of views[%d] too", v.Name, prev)
		}
		seenView[v.Name] = i
		var layouts []string
		if v.Prefix != "" {
			layouts = append(layouts, "prefix")
		}
		if len(v.Columns) > 0 {
			layouts = append(layouts, "columns")
		}
		if v.List != "" {
			layouts = append(layouts, "list")
		}
		switch {
		case len(layouts) == 0:
			return pathErr(path, "no columns: give prefix and dim, columns, or list and dim")
		case len(layouts) > 1:
			return pathErr(path, "both %s and %s: give only one of prefix and dim, columns, or list and dim", layouts[0], layouts[1])
		}
		dimPath := keyPath(path, "dim")
		switch {
		case len(v.Columns) > 0 && v.Dim != 0 && v.Dim != len(v.Columns):
			return pathErr(dimPath, "found %d, but columns has %d names", v.Dim, len(v.Columns))
		case len(v.Columns) == 0 && v.Dim == 0:
			return pathErr(dimPath, "missing: want the number of features, a positive integer")
		case v.Dimension() <= 0:
			return pathErr(dimPath, "found %d, want a positive integer", v.Dim)
		case v.Dimension() > MaxDim:
			return pathErr(dimPath, "found %d, want at most %d", v.Dimension(), MaxDim)
		}
		cols := v.ColumnNames()
		if v.List != "" {
			cols = []string{v.List}
		}
		for j, c := range cols {
			if owner, ok := seenCol[c]; ok {
				return pathErr(columnPath(v, path, j), "column %q is already %s", c, owner)
			}
			seenCol[c] = "in " + path
		}
		if err := v.Kernel.validate(keyPath(path, "kernel")); err != nil {
			return err
		}
	}
	return nil
}

// columnPath is the key that names feature j's column in view v at path.
func columnPath(v *View, path string, j int) string {
	switch {
	case v.List != "":
		return keyPath(path, "list")
	case len(v.Columns) > 0:
		return indexPath(keyPath(path, "columns"), j)
	}
	return keyPath(path, "prefix")
}

func (k *KernelSpec) validate(path string) error {
	if k == nil {
		return nil
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch k.Type {
	case "", KernelRBF, KernelLinear, KernelPoly:
	default:
		return pathErr(keyPath(path, "type"), "found %q, want rbf, linear or poly", k.Type)
	}
	if k.Gamma < 0 || !finite(k.Gamma) {
		return pathErr(keyPath(path, "gamma"), "found %s, want a number > 0 (or 0: derived)", formatNumber(k.Gamma))
	}
	if k.SigmaScale < 0 || !finite(k.SigmaScale) {
		return pathErr(keyPath(path, "sigma_scale"), "found %s, want a number > 0", formatNumber(k.SigmaScale))
	}
	if k.Degree < 0 {
		return pathErr(keyPath(path, "degree"), "found %d, want a positive integer", k.Degree)
	}
	if k.Coef0 != nil && !finite(*k.Coef0) {
		return pathErr(keyPath(path, "coef0"), "found %s, want a finite number", formatNumber(*k.Coef0))
	}
	switch k.Sigma {
	case "", "mean", "median":
	default:
		found := strconv.Quote(k.Sigma)
		s, err := strconv.ParseFloat(k.Sigma, 64)
		if err == nil {
			found = formatNumber(s)
		}
		if err != nil || !(s > 0) || math.IsInf(s, 0) {
			return pathErr(keyPath(path, "sigma"), "found %s, want \"mean\", \"median\" or a finite number > 0", found)
		}
	}
	return nil
}

// Fingerprint identifies the spec's meaning: task, columns and views in
// order, and kernel settings. Two specs with the same fingerprint read the
// same data the same way; informational fields and meta do not count.
func (s *ViewSpec) Fingerprint() string {
	var b strings.Builder
	fmt.Fprintf(&b, "task=%s;id=%s;label=%s", s.Task, s.ID, s.Label)
	for _, v := range s.Views {
		fmt.Fprintf(&b, ";view=%s:%d:%s:%s:%t", v.Name, v.Dimension(), v.List, strings.Join(v.ColumnNames(), ","), v.Standardize)
		if v.Kernel != nil {
			fmt.Fprintf(&b, ":%s/%g/%s/%g/%d", v.Kernel.Type, v.Kernel.Gamma, v.Kernel.Sigma, v.Kernel.SigmaScale, v.Kernel.Degree)
			if v.Kernel.Coef0 != nil {
				fmt.Fprintf(&b, "/%g", *v.Kernel.Coef0)
			}
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// Dims returns the dimension of every view, in order.
func (s *ViewSpec) Dims() []int {
	d := make([]int, len(s.Views))
	for i := range s.Views {
		d[i] = s.Views[i].Dimension()
	}
	return d
}
