// Package schemas owns the shape of mvml's data: the view spec that says which
// input columns form which view, the canonical Arrow record every stage passes
// along (id, label, one fixed-size-list column per view), the output record of
// scores, the one builder of each (RecordBuilder, OutputBuilder), and the
// validation that names the source, row and column of bad input.
//
// It imports none of mvml's other packages, so every stage can depend on it.
package schemas
