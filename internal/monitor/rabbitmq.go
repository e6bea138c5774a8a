package monitor

import (
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/lag"
)

// RabbitMQ is what one refresh of a RabbitMQ context observed, for the
// console: the server and its nodes, every queue with its computed status
// and age, and the queues that receive dead letters. Plain data (no AMQP
// types); immutable once delivered.
type RabbitMQ struct {
	// AMQPAddr and ManagementAddr are where the context points (no
	// credentials); either may be "".
	AMQPAddr       string
	ManagementAddr string
	ClusterName    string
	Version        string
	// Nodes are the cluster's nodes (nil in reduced mode: AMQP cannot list
	// them); NodesErr says why they could not be read.
	Nodes    []RabbitNode
	NodesErr string
	// Mode is "management" or "reduced"; Missing says what reduced mode
	// cannot show, Warnings what could not be read.
	Mode     string
	Missing  []string
	Warnings []string
	// Queues are sorted by vhost and name.
	Queues []QueueState
	// DLQs are the queues that receive dead letters (from dead-letter
	// exchange wiring, or configured), sorted by vhost and name. DLQErr
	// says why they could not be found.
	DLQs   []RabbitDLQ
	DLQErr string
}

// Reduced reports whether the context runs without the management API.
func (r *RabbitMQ) Reduced() bool { return r.Mode == "reduced" }

// RabbitNode is one node of the cluster.
type RabbitNode struct {
	Name      string
	Running   bool
	MemAlarm  bool
	DiskAlarm bool
	// Partitions names the nodes this one cannot see.
	Partitions []string
}

// QueueState is one queue as observed, with its status, age and ETA.
type QueueState struct {
	Queue backends.Queue
	Lag   lag.QueueLag
	// DeadLetters lists the queues whose dead letters land here (set when
	// this queue is a DLQ).
	DeadLetters []string
	// DLQFound is "wiring" or "config" when this queue is a DLQ, else "".
	DLQFound string
}

// RabbitDLQ is a queue that receives dead letters.
type RabbitDLQ struct {
	Vhost, Name string
	Sources     []string
	Found       string // wiring or config
}

// Queue finds a queue by vhost and name.
func (r *RabbitMQ) Queue(vhost, name string) (QueueState, bool) {
	for _, q := range r.Queues {
		if q.Queue.Name == name && q.Queue.Vhost == vhost {
			return q, true
		}
	}
	return QueueState{}, false
}

// Age is the queue's age and whether it is known.
func (q QueueState) Age() (time.Duration, bool) {
	if q.Lag.Age == nil {
		return 0, false
	}
	return *q.Lag.Age, true
}
