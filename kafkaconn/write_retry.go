package kafkaconn

import (
	"context"
	"errors"
	"slices"
	"time"
)

// WriteRetried writes batch, retrying the messages that failed for a
// transient reason (Transient) as retry says, the others not: the
// messages written are not sent twice. It returns nil, WriteErrors holding
// each message's lasting failure (nil for those written), or the failure
// of the whole call. Before each pause it calls onRetry, if not nil, with
// the error, the pause and how many messages are to be written again.
func (w *Writer) WriteRetried(ctx context.Context, retry Retry, batch []Message, onRetry func(err error, pause time.Duration, messages int)) error {
	// Bookkept only once a message failed: outcome[i] is the lasting
	// failure of batch[i], and at[j] the index in batch of todo[j] (nil
	// while todo is batch).
	var outcome WriteErrors
	var at []int
	todo := batch
	err := retry.Do(ctx, func() error {
		err := w.WriteMessages(ctx, todo...)
		var perMessage WriteErrors
		if !errors.As(err, &perMessage) || len(perMessage) != len(todo) {
			return err
		}
		if outcome == nil {
			outcome = make(WriteErrors, len(batch))
		}
		var again []Message
		var againAt []int
		var transient error
		for j, e := range perMessage {
			i := j
			if at != nil {
				i = at[j]
			}
			if e != nil && Transient(e) {
				again, againAt, transient = append(again, todo[j]), append(againAt, i), e
			} else {
				outcome[i] = e
			}
		}
		todo, at = again, againAt
		return transient
	}, func(err error, pause time.Duration) {
		if onRetry != nil {
			onRetry(err, pause, len(todo))
		}
	})
	switch {
	case err != nil:
		return err
	case slices.ContainsFunc(outcome, func(e error) bool { return e != nil }):
		return outcome
	}
	return nil
}

// WriteFitting writes msgs as WriteRetried does and, where the broker
// refuses a batch as too large (its message.max.bytes below the writer's
// BatchBytes, or several messages of one partition adding up past it),
// writes the refused messages again in halves, down to single messages.
// It returns the indexes of the messages the broker or the writer refuses
// even alone; everything else was written. Any other failure is returned
// as is.
func (w *Writer) WriteFitting(ctx context.Context, retry Retry, msgs []Message, onRetry func(err error, pause time.Duration, messages int)) (refused []int, err error) {
	idx := make([]int, 0, len(msgs))
	for i := range msgs {
		// The writer refuses the whole call, writing nothing, for one
		// message above BatchBytes: keep such messages out of it.
		if MessageBytes(&msgs[i]) > w.BatchBytes() {
			refused = append(refused, i)
		} else {
			idx = append(idx, i)
		}
	}
	more, err := w.writeHalving(ctx, retry, msgs, idx, onRetry)
	refused = append(refused, more...)
	slices.Sort(refused)
	return refused, err
}

// writeHalving writes the messages msgs[idx] and those of them the broker
// refuses as too large again in halves; it returns the indexes refused
// alone.
func (w *Writer) writeHalving(ctx context.Context, retry Retry, msgs []Message, idx []int, onRetry func(error, time.Duration, int)) ([]int, error) {
	if len(idx) == 0 {
		return nil, nil
	}
	batch := make([]Message, len(idx))
	for j, i := range idx {
		batch[j] = msgs[i]
	}
	err := w.WriteRetried(ctx, retry, batch, onRetry)
	if err == nil {
		return nil, nil
	}
	var perMessage WriteErrors
	if !errors.As(err, &perMessage) || len(perMessage) != len(batch) {
		return nil, err
	}
	var tooLarge []int
	for j, e := range perMessage {
		switch {
		case e == nil:
		case TooLarge(e):
			tooLarge = append(tooLarge, idx[j])
		default:
			return nil, err
		}
	}
	// The broker answers for a whole batch: a message refused with no
	// other was refused alone.
	if len(tooLarge) == 1 {
		return tooLarge, nil
	}
	half := len(tooLarge) / 2
	refused, err := w.writeHalving(ctx, retry, msgs, tooLarge[:half], onRetry)
	if err != nil {
		return nil, err
	}
	rest, err := w.writeHalving(ctx, retry, msgs, tooLarge[half:], onRetry)
	return append(refused, rest...), err
}
