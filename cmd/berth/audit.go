package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/internal/sanitize"
)

// `berth audit` lists the local audit log; `berth audit verify` walks its
// hash chain; `berth audit repair` sets a torn last line aside. Every
// command that changes a cluster records itself through a.openAudit, so
// they all write the same file.

func init() {
	register(func(a *app) *cobra.Command {
		var file string
		cmd := &cobra.Command{
			Use:   "audit",
			Short: "List the audit log of actions that changed a cluster (offset resets, redrives)",
			Args:  noArgs,
			RunE:  func(cmd *cobra.Command, _ []string) error { return a.runAuditList(file) },
		}
		addAuditFlag(cmd, &file)
		verify := &cobra.Command{
			Use:   "verify",
			Short: "Check the audit log's hash chain; exit 1 naming the first edited, removed or reordered entry",
			Args:  noArgs,
			RunE:  func(cmd *cobra.Command, _ []string) error { return a.runAuditVerify(file) },
		}
		addAuditFlag(verify, &file)
		repair := &cobra.Command{
			Use:   "repair",
			Short: "Set aside a torn last line (a write cut short) as a new, chained audit entry that keeps its bytes",
			Args:  noArgs,
			RunE:  func(cmd *cobra.Command, _ []string) error { return a.runAuditRepair(file) },
		}
		addAuditFlag(repair, &file)
		cmd.AddCommand(verify, repair)
		return cmd
	})
}

// addAuditFlag adds --audit-file to a command that reads or writes the
// audit log.
func addAuditFlag(cmd *cobra.Command, into *string) {
	cmd.Flags().StringVar(into, "audit-file", "", "audit log file (default: audit.file in the config, or $BERTH_AUDIT_FILE)")
}

// auditPath is where the audit log lives: --audit-file, else
// $BERTH_AUDIT_FILE, else the config's audit.file (default under the XDG
// data home).
func (a *app) auditPath(flag string) string { return auditPathFor(flag, a.cfg) }

func auditPathFor(flag string, cfg *config.Config) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv("BERTH_AUDIT_FILE"); env != "" {
		return env
	}
	return cfg.Audit.File
}

// openAudit opens the audit log every destructive command appends to. Each
// entry is mirrored into the cluster too (Kafka: the __berth_audit topic;
// RabbitMQ: the berth.audit stream), so every operator sees the same
// history and a cut tail shows; a mirror failure is a warning (the local
// log has the entry), never a lost action.
func (a *app) openAudit(flag string) (*audit.Log, error) {
	path := a.auditPath(flag)
	var opts []audit.Option
	if sink := a.auditSink(path); sink != nil {
		opts = append(opts, audit.WithSink(sink))
	}
	return audit.Open(path, opts...)
}

// auditSink is the current context's audit mirror (nil when it has none),
// one per log for the whole command: a redrive audits every chunk, and a
// sink dialled anew for each entry cost a connection and a stream declare
// a chunk.
func (a *app) auditSink(path string) audit.Sink {
	if a.readOnly {
		// Read-only means no write of any kind to the cluster: the audit
		// topic or stream included (it would be created on first use).
		// The local log still records what was done and refused.
		return nil
	}
	a.sinks.mu.Lock()
	defer a.sinks.mu.Unlock()
	key := a.ctxName + "\x00" + path
	if s, ok := a.sinks.m[key]; ok {
		return s
	}
	var sink audit.Sink
	switch a.ctx.Kind {
	case "kafka", "bundled":
		opts, err := a.kafkaOptions()
		if err != nil {
			return nil
		}
		s := kafka.NewAuditSink(opts, auditSource(path))
		a.onClose(s.Close)
		sink = s
	case "rabbitmq":
		opts, err := a.rabbitOptions()
		if err != nil || opts.AMQPURL == "" {
			return nil
		}
		s := rabbitmq.NewAuditSink(opts, auditSource(path))
		a.onClose(s.Close)
		sink = s
	default:
		return nil
	}
	a.sinks.m[key] = sink
	return sink
}

// auditSinks are the audit mirrors a command opened, by context and log.
type auditSinks struct {
	mu sync.Mutex
	m  map[string]audit.Sink
}

// auditSource names a local log in the audit topic: host and absolute path.
func auditSource(path string) string {
	host, _ := os.Hostname()
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return host + ":" + path
}

func (a *app) runAuditList(file string) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	log, err := a.openAudit(file)
	if err != nil {
		return err
	}
	entries, err := log.List()
	if err != nil {
		return err
	}
	if f == output.JSON {
		if entries == nil {
			entries = []audit.Entry{}
		}
		return output.WriteJSON(a.stdout, entries)
	}
	if len(entries) == 0 {
		fmt.Fprintf(a.stdout, "No audit entries in %s.\n", sanitize.Text(log.Path()))
		return nil
	}
	g := output.Grid{Header: auditHeader, Right: map[int]bool{0: true}}
	for _, e := range entries {
		when := e.Time
		if t := e.When(); !t.IsZero() {
			when = t.UTC().Format("2006-01-02 15:04:05")
		}
		r := auditRowOf(e)
		g.Add(fmt.Sprint(e.Seq), when, e.Actor, r.signer, e.Action, e.Context, r.target, r.outcome, r.details)
	}
	return g.WriteTable(a.stdout)
}

func (a *app) runAuditVerify(file string) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	log, err := audit.Open(a.auditPath(file))
	if err != nil {
		return err
	}
	rep, err := log.Verify()
	if err != nil {
		return err
	}
	mirror := a.verifyAuditMirror(log)
	if f == output.JSON {
		if err := output.WriteJSON(a.stdout, struct {
			audit.Report
			Mirror *auditMirror `json:"mirror,omitempty"`
		}{rep, mirror}); err != nil {
			return err
		}
	} else {
		if rep.OK {
			fmt.Fprintf(a.stdout, "OK: %d entries, chain intact (head %s) in %s\n", rep.Entries, rep.Head, sanitize.Text(rep.File))
		}
		if mirror != nil {
			if !mirror.Checked {
				fmt.Fprintf(a.stdout, "audit mirror %s not checked: %s\n", mirror.Topic, sanitize.Text(mirror.Error))
			}
			for _, s := range mirror.Sources {
				state := "OK"
				if !s.OK {
					state = "BROKEN: " + s.Problem
				}
				fmt.Fprintf(a.stdout, "audit mirror %s: %s: %d entries, %s\n", mirror.Topic, sanitize.Text(s.Source), s.Entries, state)
			}
		}
	}
	if !rep.OK {
		return chainBroken(rep)
	}
	if mirror != nil {
		for _, s := range mirror.Sources {
			if !s.OK {
				return &exitError{code: 1, err: fmt.Errorf("audit mirror %s: %s: %s", mirror.Topic, s.Source, s.Problem)}
			}
		}
	}
	return nil
}

// auditRepair is what `berth audit repair -o json` prints.
type auditRepair struct {
	File     string `json:"file"`
	Repaired bool   `json:"repaired"`
	// NothingToRepair says why nothing was repaired: "missing" (no file:
	// no audit entries yet), "empty", or "complete" (the log ends with a
	// complete entry); omitted when Repaired.
	NothingToRepair string `json:"nothing_to_repair,omitempty"`
	// SetAside is the torn line set aside and the entry that now holds it
	// (`berth audit -o json` shows its bytes, base64).
	SetAside *setAside `json:"set_aside,omitempty"`
	// MirrorWarning: the entry is in the file, but the audit mirror did
	// not take it.
	MirrorWarning string       `json:"mirror_warning,omitempty"`
	Chain         audit.Report `json:"chain"`
}

type setAside struct {
	Seq    int64  `json:"seq"`
	Hash   string `json:"hash"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// runAuditRepair sets a torn last line aside (audit.SetAsideTorn) through
// the log every destructive command appends to, so the repair entry is
// mirrored like theirs, then reports the chain as verify does.
func (a *app) runAuditRepair(file string) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	log, err := a.openAudit(file)
	if err != nil {
		return err
	}
	res := auditRepair{File: log.Path()}
	ctx, cancel := a.opCtx(context.Background()) // bounds the mirroring
	defer cancel()
	e, err := log.SetAsideTorn(ctx, a.ctxName)
	var se *audit.SinkError
	switch {
	case errors.As(err, &se):
		res.MirrorWarning = se.Error()
		fmt.Fprintf(a.stderr, "berth: warning: %v\n", se)
	case errors.Is(err, audit.ErrNoLog):
		res.NothingToRepair = "missing"
	case errors.Is(err, audit.ErrEmptyLog):
		res.NothingToRepair = "empty"
	case errors.Is(err, audit.ErrNothingTorn):
		res.NothingToRepair = "complete"
	case err != nil:
		return err
	}
	if err == nil || se != nil {
		var d audit.TornDetails
		if err := e.Decode(&d); err != nil {
			return err
		}
		res.Repaired = true
		res.SetAside = &setAside{Seq: e.Seq, Hash: e.Hash, Bytes: d.Bytes, SHA256: d.SHA256}
	}
	if res.Chain, err = log.Verify(); err != nil {
		return err
	}
	if f == output.JSON {
		if err := output.WriteJSON(a.stdout, res); err != nil {
			return err
		}
	} else {
		if s := res.SetAside; s != nil {
			fmt.Fprintf(a.stdout, "Set aside the incomplete last line (%d bytes, sha256 %s…) as entry %d (%s): `berth audit -o json` shows its bytes.\n",
				s.Bytes, s.SHA256[:12], s.Seq, audit.TornAction)
		} else {
			why := map[string]string{"missing": "does not exist (no audit entries yet)", "empty": "is empty", "complete": "ends with a complete entry"}[res.NothingToRepair]
			fmt.Fprintf(a.stdout, "Nothing to repair: %s %s.\n", sanitize.Text(res.File), why)
		}
		if res.Chain.OK {
			fmt.Fprintf(a.stdout, "OK: %d entries, chain intact (head %s) in %s\n", res.Chain.Entries, res.Chain.Head, sanitize.Text(res.Chain.File))
		}
	}
	if !res.Chain.OK {
		return chainBroken(res.Chain)
	}
	return nil
}

// chainBroken is verify's (and repair's) exit 1 for a broken chain.
func chainBroken(rep audit.Report) error {
	return &exitError{code: 1, err: fmt.Errorf("audit log %s is tampered or damaged at %s (%d good entries before it)", rep.File, rep.Bad, rep.Entries)}
}

// auditMirror is the check of the cluster's audit mirror (Kafka: the
// __berth_audit topic; RabbitMQ: the berth.audit stream).
type auditMirror struct {
	Topic   string               `json:"topic"`
	Checked bool                 `json:"checked"`
	Error   string               `json:"error,omitempty"`
	Sources []audit.MirrorReport `json:"sources"`
}

// verifyAuditMirror checks every log mirrored to the context's cluster;
// this host's own log is compared entry by entry with the file, which also
// catches entries removed from the end of the file. nil for contexts with
// no mirror.
func (a *app) verifyAuditMirror(log *audit.Log) *auditMirror {
	var m *auditMirror
	ctx, cancel := a.opCtx(context.Background())
	defer cancel()
	var mirrored map[string][][]byte
	var err error
	switch a.ctx.Kind {
	case "kafka", "bundled":
		m = &auditMirror{Topic: kafka.AuditTopic, Sources: []audit.MirrorReport{}}
		var k *kafka.Cluster
		if k, err = a.kafkaCluster(ctx); err == nil {
			defer k.Close()
			mirrored, err = k.MirroredAudit(ctx)
		}
	case "rabbitmq":
		m = &auditMirror{Topic: rabbitmq.AuditStream, Sources: []audit.MirrorReport{}}
		var c *rabbitmq.Client
		if c, err = a.rabbitClient(ctx); err == nil {
			defer c.Close()
			mirrored, err = c.MirroredAudit(ctx)
		}
	default:
		return nil
	}
	if err != nil {
		m.Error = err.Error()
		return m
	}
	local, err := log.List()
	if err != nil {
		m.Error = err.Error()
		return m
	}
	m.Checked = true
	self := auditSource(log.Path())
	for _, src := range audit.Sources(mirrored) {
		var mine []audit.Entry
		if src == self {
			mine = local
			if mine == nil {
				mine = []audit.Entry{}
			}
		}
		m.Sources = append(m.Sources, audit.VerifyMirror(src, mirrored[src], mine))
	}
	return m
}
