package ingest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mvml/mvml/schemas"
)

// The column helpers every decoder shares: what a column of the input
// feeds, which columns a view spec names, and how a missing column or a
// bad cell is described to the user.

// fieldRole says what an input column feeds.
type fieldRole uint8

const (
	roleIgnore fieldRole = iota
	roleID
	roleLabel
	roleFeature
	roleList
)

// specColumn is a column a view spec names, with what it feeds.
type specColumn struct {
	name    string
	role    fieldRole
	view    int
	feature int // index within the view, for roleFeature
}

// specColumns lists the columns of spec in the order the decoders resolve
// them: the id, the label, then every view's list column or its feature
// columns.
func specColumns(spec *schemas.ViewSpec) []specColumn {
	n := 2
	for l := range spec.Views {
		n += spec.Views[l].Dimension()
	}
	cols := make([]specColumn, 0, n)
	cols = append(cols, specColumn{name: spec.ID, role: roleID}, specColumn{name: spec.Label, role: roleLabel})
	for l := range spec.Views {
		v := &spec.Views[l]
		if v.Layout() == schemas.LayoutList {
			cols = append(cols, specColumn{name: v.List, role: roleList, view: l})
			continue
		}
		for j, c := range v.ColumnNames() {
			cols = append(cols, specColumn{name: c, role: roleFeature, view: l, feature: j})
		}
	}
	return cols
}

// required says whether a file must have the column: a view's columns
// must be there, the id and the label may be missing.
func (c specColumn) required() bool { return c.role == roleFeature || c.role == roleList }

// describeMissing lists missing columns (the first few) and the views
// they belong to, so that a spec naming a view the file lacks says so.
func describeMissing(spec *schemas.ViewSpec, missing []string) string {
	const shown = 5
	msg := "missing column"
	if len(missing) > 1 {
		msg += "s"
	}
	msg += " " + strings.Join(missing[:min(shown, len(missing))], ", ")
	if len(missing) > shown {
		msg += fmt.Sprintf(" and %d more", len(missing)-shown)
	}
	owner := map[string]string{}
	for l := range spec.Views {
		v := &spec.Views[l]
		if v.List != "" {
			owner[v.List] = v.Name
		}
		for _, c := range v.ColumnNames() {
			owner[c] = v.Name
		}
	}
	var views []string
	for _, c := range missing {
		if name, ok := owner[c]; ok && !slices.Contains(views, strconv.Quote(name)) {
			views = append(views, strconv.Quote(name))
		}
	}
	if len(views) == 1 {
		msg += " of view " + views[0]
	} else if len(views) > 1 {
		msg += " of views " + strings.Join(views, ", ")
	}
	return msg
}

// quoteCell quotes a cell for an error message, cut to a readable length.
func quoteCell(field []byte) string {
	const max = 40
	if len(field) > max {
		return strconv.Quote(string(field[:max])) + "…"
	}
	return strconv.Quote(string(field))
}
