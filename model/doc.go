// Package model owns the learning and scoring of Multi-View Metric Learning
// (Huusari, Kadri, Capponi, AISTATS 2018, Algorithm 1 version b) on the
// block-Nyström features built by transform.
//
// A fit reads only sufficient statistics of the labelled rows (Stats:
// S = UᵀU, c = Uᵀy, yᵀy, n), so rows can be accumulated in batches, merged
// from partitions, and decayed, and a refit costs O((vp)³) per iteration
// whatever the number of rows. The learned pieces (the block metric Ã, the
// solution g̃, the view weights w) are turned into per-view coefficients
// β_l = W_l^{†1/2} g̃_l, so that scoring a record costs one kernel product
// against the landmarks per view. Scorer.Score gives the decisions of a
// batch, Scorer.Predict the predictions, and both say which rows have no
// finite score. Labels become fit targets through an Encoding (classes, or
// a standardised regression target), which TargetScan derives from labels
// held in memory or streamed alike.
//
// model is pure computation: it knows gonum matrices, Arrow records and
// schemas, never a file, a topic or a clock.
package model
