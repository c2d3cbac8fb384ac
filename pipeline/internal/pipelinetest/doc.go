// Package pipelinetest is the test support shared by the tests of
// packages pipeline, pipeline/serve and pipeline/refit: a small view spec
// (Spec), rows drawn in memory (Dataset, MakeData) and their CSV and Arrow
// forms (WriteCSV, InputRecord), a model trained on them and its expected
// scores (TrainTestModel, ExpectedScores), the model topic of an
// in-process broker (OpenModelTopic), reading /metrics (ParseMetrics,
// MetricValue) and waiting on a condition (WaitFor).
//
// It is imported only by tests; no program of mvml links it.
package pipelinetest
