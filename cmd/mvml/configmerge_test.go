package main

import (
	"strings"
	"testing"
)

// A configuration file may share values through a YAML merge key (<<):
// its keys are the command's keys, at the lines where they are written.
func TestLintMergeKeys(t *testing.T) {
	path := writeConfig(t, "<<: {brokers: k:9092, topic: in, batch-size: many}\noutput-dir: /scores\nmodel: model.mvml\n")
	code, stdout, _ := mvml(t, "lint", path)
	if want := `line 1: batch-size: found the string "many", want an integer`; code != exitError || !strings.Contains(stdout, want) {
		t.Errorf("exit %d, stdout:\n%s\nwant %q", code, stdout, want)
	}
	if strings.Contains(stdout, "<<") {
		t.Errorf("the merge key is reported as a key:\n%s", stdout)
	}
}
