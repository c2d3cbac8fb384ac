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
// configuration — is not transient.
func Transient(err error) bool {
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
