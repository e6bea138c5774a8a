package kafka

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// describeErr rewrites a franz-go/kadm error so it names the broker a
// failed request was meant for and keeps Kafka's error code name (kerr
// errors print as "CODE_NAME: description"). what names the subject of the
// call ("topic orders", "group billing", "metadata").
func describeErr(what string, err error) error {
	if err == nil {
		return nil
	}
	var se *kadm.ShardErrors
	if errors.As(err, &se) && len(se.Errs) > 0 {
		first := se.Errs[0]
		more := ""
		if n := len(se.Errs) - 1; n > 0 {
			more = fmt.Sprintf(" (and %d more failed request(s))", n)
		}
		return fmt.Errorf("%s: %s %s: %w%s", what, se.Name, brokerName(first.Broker), first.Err, more)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// brokerName is "broker 2 (10.0.0.2:9092)", or "before reaching a broker"
// when the request failed before it was mapped to one.
func brokerName(b kadm.BrokerDetail) string {
	if b.NodeID < 0 && b.Host == "" {
		return "before reaching a broker"
	}
	return fmt.Sprintf("broker %d (%s)", b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
}

// shardFailure says why a sharded request got no answer for a partition
// led by leader: the failure of the request sent to that broker, or every
// failure when none was addressed to it (the leader moved meanwhile).
func shardFailure(err error, leader int32) (string, bool) {
	var se *kadm.ShardErrors
	if !errors.As(err, &se) || len(se.Errs) == 0 {
		return "", false
	}
	var mine, all []string
	for _, e := range se.Errs {
		msg := fmt.Sprintf("%s %s: %s", se.Name, brokerName(e.Broker), codeName(e.Err))
		all = append(all, msg)
		if e.Broker.NodeID == leader {
			mine = append(mine, msg)
		}
	}
	if len(mine) > 0 {
		return strings.Join(mine, "; "), true
	}
	return strings.Join(all, "; "), true
}

// allFailed reports whether err is a request that got no usable answer at
// all (as opposed to a sharded request that failed on some brokers only).
func allFailed(err error) bool {
	if err == nil {
		return false
	}
	var se *kadm.ShardErrors
	if errors.As(err, &se) {
		return se.AllFailed
	}
	return true
}

// codeName is Kafka's error code name for err when it is a Kafka error
// ("NOT_LEADER_FOR_PARTITION"), or err's text otherwise.
func codeName(err error) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}
