package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/record"
)

// `berth records` prints a partition's records from an offset or from a
// group's committed offset: the console's record viewer ("v" on a group's
// partition row) without the console.

func init() {
	register(func(a *app) *cobra.Command {
		var (
			partition int32
			offset    int64
			group     string
			limit     int
			save      recordSave
		)
		cmd := &cobra.Command{
			Use:   "records TOPIC --partition P (--offset N | --group G)",
			Short: "Print a partition's records from an offset or a group's committed offset (the record behind a stall)",
			Long: `Print at most --limit records of one partition, oldest first, starting at
--offset or at --group's committed offset on the partition (the next record
the group will read: the one a STALLED group is stuck on). The first line
says how the first record relates to the committed offset (a gap, deleted by
retention, nothing there yet). Keys, headers and values are sanitised; a JSON
value is pretty-printed; binary values are a hex dump (hex in JSON). The
partition is read with READ_COMMITTED; nothing joins the group or commits.

JSON: an object with topic, partition, group and committed (when --group;
committed is null without a commit), from, log_start, end, note, and records:
[{topic, partition, offset, timestamp, timestamp_type, key (null for a null
key) or key_hex, headers [{key, value | value_hex, binary}], value or
value_hex, value_binary, value_bytes}].

--save-value FILE and --save-key FILE write the first record's value or key,
its raw bytes unchanged, to FILE instead of printing it (the record viewer's
S). An existing file is refused unless --overwrite (then replaced whole); a
pipe or device is written in place. JSON: topic, partition, offset and saved
[{part, file, bytes}].`,
			Args: exactArgs("TOPIC"),
			RunE: func(cmd *cobra.Command, args []string) error {
				if a.isRabbit() {
					return usageErr("records: RabbitMQ queues have no partitions or offsets; use berth dlq show QUEUE for dead letters")
				}
				f, err := a.format(output.Table, output.JSON)
				if err != nil {
					return err
				}
				if !cmd.Flags().Changed("partition") {
					return usageErr("records: --partition is required")
				}
				if partition < 0 {
					return usageErr("--partition %d: must be 0 or more", partition)
				}
				byOffset, byGroup := cmd.Flags().Changed("offset"), group != ""
				if byOffset == byGroup {
					return usageErr("records: give exactly one of --offset N and --group G")
				}
				if byOffset && offset < 0 {
					return usageErr("--offset %d: must be 0 or more", offset)
				}
				if limit < 1 {
					return usageErr("--limit %d: must be at least 1", limit)
				}
				if err := save.check(limit); err != nil {
					return err
				}
				ctx, cancel := a.opCtx(cmd.Context())
				defer cancel()
				cl, err := a.kafkaCluster(ctx)
				if err != nil {
					return err
				}
				defer cl.Close()
				t := tui.PartitionTarget{Topic: args[0], Partition: partition, Committed: offset}
				if byGroup {
					t.Group = group
					if t.Committed, err = committedOn(ctx, cl, group, args[0], partition); err != nil {
						return err
					}
				}
				if save.value != "" || save.key != "" {
					return a.saveRecord(ctx, cl, t, save, f)
				}
				return a.printRecords(ctx, cl, t, limit, f)
			},
		}
		cmd.Flags().Int32VarP(&partition, "partition", "p", 0, "partition to read")
		cmd.Flags().Int64Var(&offset, "offset", 0, "first offset to read")
		cmd.Flags().StringVar(&group, "group", "", "start at this group's committed offset on the partition")
		cmd.Flags().IntVar(&limit, "limit", 1, "records printed")
		cmd.Flags().StringVar(&save.value, "save-value", "", "write the first record's value, its raw bytes, to FILE (the console's S) instead of printing")
		cmd.Flags().StringVar(&save.key, "save-key", "", "write the first record's key, its raw bytes, to FILE instead of printing")
		cmd.Flags().BoolVar(&save.overwrite, "overwrite", false, "with --save-value/--save-key: replace an existing file")
		return cmd
	})
}

// committedOn is a group's committed offset on one partition, -1 when it
// has none there; a group that does not exist is an error.
func committedOn(ctx context.Context, cl backends.Cluster, group, topic string, partition int32) (int64, error) {
	if _, err := cl.DescribeGroup(ctx, group); err != nil {
		return 0, err
	}
	all, err := cl.CommittedOffsets(ctx, group)
	if err != nil {
		return 0, err
	}
	for _, c := range all[group] {
		if c.Topic == topic && c.Partition == partition {
			return c.Offset, nil
		}
	}
	return -1, nil
}

// recordsView is the JSON of `berth records`.
type recordsView struct {
	Topic     string      `json:"topic"`
	Partition int32       `json:"partition"`
	Group     string      `json:"group,omitempty"`
	Committed *int64      `json:"committed,omitempty"`
	From      int64       `json:"from"`
	LogStart  int64       `json:"log_start"`
	End       int64       `json:"end"`
	Note      string      `json:"note,omitempty"`
	Records   []plainView `json:"records"`
}

// plainView is one record in JSON, sanitised like `berth dlq show`.
type plainView struct {
	Topic         string       `json:"topic"`
	Partition     int32        `json:"partition"`
	Offset        int64        `json:"offset"`
	Timestamp     time.Time    `json:"timestamp"`
	TimestampType string       `json:"timestamp_type"`
	Key           *string      `json:"key"`
	KeyHex        string       `json:"key_hex,omitempty"`
	Headers       []headerView `json:"headers"`
	Value         string       `json:"value,omitempty"`
	ValueHex      string       `json:"value_hex,omitempty"`
	Binary        bool         `json:"value_binary"`
	ValueBytes    int          `json:"value_bytes"`
}

func viewPlain(r backends.Record) plainView {
	v := plainView{Topic: sanitize.Text(r.Topic), Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		TimestampType: r.TimestampType.String(), Headers: []headerView{}, ValueBytes: len(r.Value)}
	v.Key, v.KeyHex = keyView(r.KeyNull, r.Key)
	for _, h := range r.Headers {
		v.Headers = append(v.Headers, headerViewOf(h.Key, h.Value, 0))
	}
	v.Value, v.ValueHex, v.Binary = bytesView(r.Value)
	return v
}

// printRecords reads through the same loader as the console's viewer, so
// both say the same thing about the committed offset.
func (a *app) printRecords(ctx context.Context, cl backends.Cluster, t tui.PartitionTarget, limit int, f output.Format) error {
	rr, ok := cl.(backends.RecordReader)
	if !ok {
		return fmt.Errorf("records: this cluster cannot read records")
	}
	from := max(t.Committed, 0)
	got, err := rr.ReadRecords(ctx, t.Topic, t.Partition, from, limit)
	if err != nil {
		return err
	}
	note := ""
	if t.Group != "" {
		note = record.CommittedNote(t, got)
	}
	if f == output.JSON {
		v := recordsView{Topic: sanitize.Text(t.Topic), Partition: t.Partition, Group: sanitize.Text(t.Group), From: max(from, got.LogStart),
			LogStart: got.LogStart, End: got.End, Note: sanitize.Text(note), Records: []plainView{}}
		if t.Group != "" && t.Committed >= 0 {
			c := t.Committed
			v.Committed = &c
		}
		for _, r := range got.Records {
			v.Records = append(v.Records, viewPlain(r))
		}
		return output.WriteJSON(a.stdout, v)
	}
	if note != "" {
		fmt.Fprintln(a.stdout, sanitize.Text(note))
	}
	now := time.Now()
	for i, r := range got.Records {
		if i > 0 || note != "" {
			fmt.Fprintln(a.stdout)
		}
		fmt.Fprint(a.stdout, record.Text(record.FromKafka(r, t, now)))
	}
	if len(got.Records) == 0 && note == "" {
		fmt.Fprintf(a.stdout, "no records at or after offset %d (the partition ends at %d)\n", from, got.End)
	}
	return nil
}

// savedView is the JSON of `berth records --save-value/--save-key`.
type savedView struct {
	Topic     string      `json:"topic"`
	Partition int32       `json:"partition"`
	Offset    int64       `json:"offset"`
	Saved     []savedPart `json:"saved"`
}

// saveRecord writes the first record at or after t.Committed: its value
// and/or key, raw, through the same savefile.Write as the console's S.
// Every target is checked, and the key's presence, before anything is
// written.
func (a *app) saveRecord(ctx context.Context, cl backends.Cluster, t tui.PartitionTarget, s recordSave, f output.Format) error {
	rr, ok := cl.(backends.RecordReader)
	if !ok {
		return fmt.Errorf("records: this cluster cannot read records")
	}
	from := max(t.Committed, 0)
	got, err := rr.ReadRecords(ctx, t.Topic, t.Partition, from, 1)
	if err != nil {
		return err
	}
	where := fmt.Sprintf("%s[%d]", sanitize.Text(t.Topic), t.Partition)
	if len(got.Records) == 0 {
		return fmt.Errorf("no record at or after offset %d on %s (the partition ends at %d): nothing written", from, where, got.End)
	}
	r := got.Records[0]
	if s.key != "" && r.KeyNull {
		return fmt.Errorf("%s offset %d has a null key: nothing written", where, r.Offset)
	}
	saved, err := s.write(r.Value, r.Key)
	if err != nil {
		return err
	}
	return a.printSaved(f, savedView{Topic: sanitize.Text(t.Topic), Partition: t.Partition, Offset: r.Offset, Saved: saved}, saved,
		fmt.Sprintf("%s offset %d", where, r.Offset))
}
