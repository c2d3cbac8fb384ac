package kafkaconn

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/segmentio/kafka-go"
)

// Transient reports whether err is a failure that passes by itself and is
// worth waiting through: the brokers out of reach or a connection cut, a
// leader election, a consumer group changing, or any error kafka-go calls
// temporary (kafka.Error.Temporary). A refusal that waiting cannot mend —
// authentication, authorisation, a message too large, a missing topic
// configuration — is not transient. A write that failed message by
// message (WriteErrors, or kafka-go's kafka.WriteErrors, as it reports
// every failed write) is transient when every message that failed is.
func Transient(err error) bool {
	var perMessage WriteErrors
	var kafkaPerMessage kafka.WriteErrors
	if errors.As(err, &kafkaPerMessage) {
		perMessage = WriteErrors(kafkaPerMessage)
	}
	if perMessage != nil || errors.As(err, &perMessage) {
		failed := false
		for _, e := range perMessage {
			if e != nil && !Transient(e) {
				return false
			}
			failed = failed || e != nil
		}
		return failed
	}
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		switch kerr {
		case kafka.RebalanceInProgress, kafka.UnknownMemberId, kafka.IllegalGeneration, kafka.BrokerNotAvailable:
			return true
		}
		return kerr.Temporary()
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
