package kafkaconn

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/segmentio/kafka-go"
)

// The brokers being out of reach or the group changing is waited
// through; a refusal is not.
func TestKafkaTransientErrors(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", fmt.Errorf("failed to dial: %w", fmt.Errorf("failed to open connection to 127.0.0.1:9: %w", refused)), true},
		{"connection cut", io.ErrUnexpectedEOF, true},
		{"rebalance", kafka.RebalanceInProgress, true},
		{"coordinator moving", kafka.NotCoordinatorForGroup, true},
		{"evicted member", kafka.UnknownMemberId, true},
		{"leader election", kafka.LeaderNotAvailable, true},
		{"leader moved", kafka.NotLeaderForPartition, true},
		{"broker restarting", fmt.Errorf("write: %w", syscall.ECONNRESET), true},
		{"too large", kafka.MessageSizeTooLarge, false},
		{"wrong password", kafka.SASLAuthenticationFailed, false},
		{"group not allowed", kafka.GroupAuthorizationFailed, false},
		{"topic not allowed", kafka.TopicAuthorizationFailed, false},
		{"end of the source", io.EOF, false},
		{"anything else", errors.New("unknown codec"), false},
		{"a write's messages, every failure passing", fmt.Errorf("writing: %w", kafka.WriteErrors{nil, kafka.NotLeaderForPartition, kafka.LeaderNotAvailable}), true},
		{"a write's messages, one refused", kafka.WriteErrors{kafka.NotLeaderForPartition, kafka.MessageSizeTooLarge}, false},
		{"a write's messages, none failed", kafka.WriteErrors{nil, nil}, false},
		{"a Writer's messages, every failure passing", fmt.Errorf("writing: %w", WriteErrors{nil, kafka.NotLeaderForPartition}), true},
		{"a Writer's messages, one refused", WriteErrors{kafka.LeaderNotAvailable, kafka.MessageSizeTooLarge}, false},
	}
	for _, tt := range tests {
		if got := Transient(tt.err); got != tt.want {
			t.Errorf("%s: Transient(%v) = %t, want %t", tt.name, tt.err, got, tt.want)
		}
	}
}
