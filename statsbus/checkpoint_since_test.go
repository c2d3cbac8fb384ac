package statsbus

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// A checkpoint keeping the labels since the serving model (KeepSince) is
// of format 2 and gives back both statistics; one without them (or with
// statistics of no row) stays format 1, the bytes of before.
func TestCheckpointKeepsLabelsSince(t *testing.T) {
	m := trained(t, 0)
	acc, rs := gathered(t, m)
	since, _ := gathered(t, m)
	since.Decay(0.5)
	c := checkpointOf(t, acc, rs)
	plain, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.KeepSince(m.NewAccumulator(), "serving"); err != nil || c.Format != CheckpointFormat || c.Since != nil {
		t.Fatalf("statistics of no row kept: format %d, %d bytes, %v", c.Format, len(c.Since), err)
	}
	if again, err := c.Encode(); err != nil || !bytes.Equal(again, plain) {
		t.Fatalf("a checkpoint without labels since changed its bytes (%v)", err)
	}
	if err := c.KeepSince(since, "serving"); err != nil {
		t.Fatal(err)
	}
	data, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.Format != CheckpointSinceFormat || back.SinceModel != "serving" || back.SinceRows != 20 || !bytes.Equal(back.Stats, c.Stats) {
		t.Errorf("read back %+v", back.CheckpointHeader)
	}
	base, err := back.Accumulator(m)
	if err != nil || base.Rows() != 40 {
		t.Fatalf("statistics: %v rows, %v", base.Rows(), err)
	}
	got, err := back.SinceAccumulator(m)
	if err != nil || got == nil || got.Rows() != 20 {
		t.Fatalf("labels since: %v, %v", got, err)
	}
	gb, _ := got.MarshalBinary()
	wb, _ := since.MarshalBinary()
	if !bytes.Equal(gb, wb) {
		t.Error("the labels since read back differ")
	}
	if none, err := checkpointOf(t, acc, rs).SinceAccumulator(m); none != nil || err != nil {
		t.Errorf("a checkpoint without labels since gives %v, %v", none, err)
	}

	// A header that says more bytes of labels since than there are.
	js := strings.Replace(string(headerOf(t, data)), `"since_bytes":`, `"since_bytes":1`, 1)
	if _, err := DecodeCheckpoint(seal(checkpointMagic, []byte(js), append(bytes.Clone(c.Stats), c.Since...))); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("a checkpoint whose labels since overrun its statistics: %v", err)
	}
}

// headerOf is the JSON header of sealed data.
func headerOf(t *testing.T, data []byte) []byte {
	t.Helper()
	js, _, err := unseal(checkpointMagic, "checkpoint", data)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
