package tui

import (
	"fmt"
	"strconv"
	"strings"
)

// PartitionTarget is what an action registered for the "partition" scope
// receives (encoded as its target string): one partition of a group's
// partition table, with the group's committed offset on it as the page
// showed it (-1: never committed). Names are the raw names, not their
// sanitised display text, so the action reads the right partition.
type PartitionTarget struct {
	Group     string
	Topic     string
	Partition int32
	Committed int64
}

// Encode is the target string the "partition" scope's actions get.
func (t PartitionTarget) Encode() string {
	return strings.Join([]string{t.Group, t.Topic, strconv.Itoa(int(t.Partition)), strconv.FormatInt(t.Committed, 10)}, "\x00")
}

// DecodePartitionTarget reads a target made by Encode.
func DecodePartitionTarget(s string) (PartitionTarget, error) {
	f := strings.Split(s, "\x00")
	if len(f) != 4 {
		return PartitionTarget{}, fmt.Errorf("partition target: %d fields, want 4", len(f))
	}
	p, err := strconv.ParseInt(f[2], 10, 32)
	if err != nil {
		return PartitionTarget{}, fmt.Errorf("partition target: partition %q: %v", f[2], err)
	}
	c, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return PartitionTarget{}, fmt.Errorf("partition target: committed offset %q: %v", f[3], err)
	}
	return PartitionTarget{Group: f[0], Topic: f[1], Partition: int32(p), Committed: c}, nil
}
