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
// Statistics belong to a lineage (Model.Lineage: the feature maps and the
// target encoding they were gathered on): an Accumulator merges those of
// any model of its lineage, travels as checksummed bytes
// (MarshalBinary, UnmarshalAccumulator) and refits warm (Refit) or from
// the paper's initialisation (RefitCold), so that statistics merged from
// many processes refit to what one training run on their rows gives: every
// sum is a double-double whose float64 value is the same, bit for bit,
// whatever the order and the grouping of the rows, which the learned
// metric's fit needs (it amplifies a last-bit difference of S). A
// row's projected features u(x) = [u_1(x) … u_v(x)] (Model.Project) serve
// both its decision (Scorer.ScoreProjected) and, once its label comes,
// the statistics (Accumulator.AddProjected).
//
// model is pure computation: it knows gonum matrices, Arrow records and
// schemas, never a file, a topic or a clock.
package model
