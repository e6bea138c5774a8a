package redrive

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-dev/berth/redrive/approval"
)

// DecodeQueuePlanSignedFrom reads a RabbitMQ plan file or stored plan, and
// its signatures, from r, a row at a time: neither the
// document (~95 bytes a message) nor its rows as []Row (~110 bytes) are
// held beside the plan's records, and the hash is computed once, from the
// records as read. It accepts and refuses exactly what DecodeQueuePlan
// did, with the same errors: a plan with anything unusual in its rows (a
// row that does not parse, a location or event listed twice, a target out
// of range) is checked by the same code as a whole core, to say what.
func DecodeQueuePlanSignedFrom(r io.Reader) (QueuePlan, []approval.Signature, error) {
	size := sizeOf(r)
	head, sink, err := decodeSignedRaw(r, func(null bool) rowSink { return &queueRows{null: null, size: size} })
	if err != nil {
		return QueuePlan{}, nil, fmt.Errorf("not a Berth plan: %v", err)
	}
	if head != nil && isQueuePlanV1(head.Bytes()) {
		return QueuePlan{}, nil, ErrQueuePlanV1
	}
	var sp SignedPlan
	if head != nil {
		hd := json.NewDecoder(head)
		hd.DisallowUnknownFields()
		if err := hd.Decode(&sp); err != nil {
			return QueuePlan{}, nil, fmt.Errorf("not a Berth plan: %v", err)
		}
	}
	rows := sink.(*queueRows)
	c := sp.Plan
	if rows.unusual(c.Targets) {
		// The whole core, checked as DecodeSignedPlan and
		// QueuePlanFromCore check it: its errors name the row.
		c.Rows = rows.all()
		*rows = queueRows{}
		if err := c.Validate(); err != nil {
			return QueuePlan{}, nil, err
		}
		got, err := c.Hash()
		if err != nil {
			return QueuePlan{}, nil, err
		}
		sigs, err := checkHash(sp.Hash, got, sp.Signatures)
		if err != nil {
			return QueuePlan{}, nil, err
		}
		p, err := QueuePlanFromCore(c)
		if err != nil {
			return QueuePlan{}, nil, err
		}
		return p, sigs, nil
	}
	if err := c.Validate(); err != nil {
		return QueuePlan{}, nil, err
	}
	got, err := hashCanonical(func(w io.Writer) error {
		return c.writeCanonical(w, rows.n(), func(b *bytes.Buffer, i int) { rows.row(i).write(b, writeASCIIString) })
	})
	if err != nil {
		return QueuePlan{}, nil, err
	}
	sigs, err := checkHash(sp.Hash, got, sp.Signatures)
	if err != nil {
		return QueuePlan{}, nil, err
	}
	p, err := QueuePlanFromCore(c) // the head: backend, options, targets
	if err != nil {
		return QueuePlan{}, nil, err
	}
	origins := make([]*QueueOrigin, len(c.Targets))
	for i, t := range c.Targets {
		x, k, _ := strings.Cut(t, "\x00") // checked by QueuePlanFromCore
		origins[i] = &QueueOrigin{Exchange: x, RoutingKey: k}
	}
	p.Records = rows.recs
	for i := range p.Records {
		if t := rows.targets[i]; t >= 0 {
			p.Records[i].origin = origins[t]
		}
	}
	if p.Records == nil {
		p.Records = []QueueRecord{}
	}
	// The hash just checked is the plan's unless the plan, made again
	// from its records, writes another core: a file whose header holds
	// what a RabbitMQ plan does not keep, or whose targets are not tabled
	// in order of first use.
	if !rows.null && rows.firstUse(len(c.Targets)) {
		made, _, _ := p.coreHead()
		want, err1 := Canonical(made)
		c.Rows = nil
		have, err2 := Canonical(c)
		if err1 == nil && err2 == nil && bytes.Equal(want, have) {
			p.seal = p.sealOf(got)
		}
	}
	return p, sigs, nil
}

// isQueuePlanV1 reports whether a plan file's head (without rows) is a
// RabbitMQ plan in format v1, as DecodeQueuePlan probes it.
func isQueuePlanV1(head []byte) bool {
	var probe struct {
		Plan struct {
			Format  string `json:"format"`
			Kind    string `json:"kind"`
			Version int    `json:"version"`
		} `json:"plan"`
	}
	return json.NewDecoder(bytes.NewReader(head)).Decode(&probe) == nil && probe.Plan.Format == "" && probe.Plan.Kind == BackendRabbitMQ
}

// queueRows gathers a RabbitMQ plan's rows as the records they become
// while they are decoded (targets resolved once the whole core is read: a
// file may list its targets after its rows).
type queueRows struct {
	recs    []QueueRecord
	targets []int32
	// odd holds, by index, the rows a record cannot hold exactly as read
	// (a location or digest not in its one form, a verdict that is not a
	// reason, a target past int32): only an edited plan has any.
	odd  map[int]Row
	null bool
	// size is the document's length in bytes (0: not known): the records
	// are then allocated once, as planRows does (a million of them are
	// 160 MB, and growing them by appending holds the old array too).
	size int64
}

func (qr *queueRows) n() int {
	if qr.null {
		return -1
	}
	return len(qr.recs)
}

func (qr *queueRows) decode(dec *json.Decoder, field string) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		qr.null = true
		return nil
	}
	if t != json.Delim('[') {
		return fmt.Errorf("json: cannot unmarshal %s into Go struct field %s.rows of type []redrive.Row", jsonKind(t), field)
	}
	start := dec.InputOffset()
	for dec.More() {
		if len(qr.recs) == sizeSample && qr.size > 0 {
			qr.reserve(dec.InputOffset()-start, qr.size-dec.InputOffset())
		}
		var row Row
		if err := dec.Decode(&row); err != nil {
			return err
		}
		pos, id, okLoc := strings.Cut(row.Loc, ":")
		n, err := strconv.Atoi(pos)
		okLoc = okLoc && err == nil && n >= 0 && strconv.Itoa(n) == pos && id != ""
		d, okDigest := ParseDigest(row.Digest)
		v, okVerdict := reasonOf(row.Verdict)
		okTarget := row.Target >= -1 && row.Target <= 1<<31-1
		if !okLoc || !okDigest || !okVerdict || !okTarget {
			if qr.odd == nil {
				qr.odd = map[int]Row{}
			}
			qr.odd[len(qr.recs)] = row
		}
		qr.recs = append(qr.recs, QueueRecord{Position: n, EventID: id, Digest: d, Verdict: Verdict{Included: v == "", Reason: v}})
		qr.targets = append(qr.targets, int32(row.Target))
	}
	_, err = dec.Token()
	return err
}

// reserve makes room for the rows still to come in rest bytes, the rows
// so far having taken read bytes (see planRows.reserve).
func (qr *queueRows) reserve(read, rest int64) {
	if read <= 0 || rest <= 0 {
		return
	}
	per := float64(read) / float64(len(qr.recs))
	n := len(qr.recs) + int(float64(rest)/per*1.01) + 16
	recs := make([]QueueRecord, len(qr.recs), n)
	copy(recs, qr.recs)
	targets := make([]int32, len(qr.targets), n)
	copy(targets, qr.targets)
	qr.recs, qr.targets = recs, targets
}

// row is row i as read.
func (qr *queueRows) row(i int) queueRow {
	r := qr.recs[i]
	v := Reason("")
	if !r.Included {
		v = r.Reason
	}
	return queueRow{pos: r.Position, id: r.EventID, digest: r.Digest, target: int(qr.targets[i]), verdict: v}
}

// all is every row as read.
func (qr *queueRows) all() []Row {
	if qr.null {
		return nil
	}
	rows := make([]Row, len(qr.recs))
	for i := range rows {
		if o, ok := qr.odd[i]; ok {
			rows[i] = o
			continue
		}
		rows[i] = qr.row(i).Row()
	}
	return rows
}

// unusual reports whether any row is one the whole core's checks must
// judge: one read oddly, a target not in targets (or none for an included
// row), positions not strictly increasing (a location could repeat), or
// an event included twice.
func (qr *queueRows) unusual(targets []string) bool {
	if len(qr.odd) > 0 {
		return true
	}
	included := make([]int32, 0, len(qr.recs))
	for i, r := range qr.recs {
		t := qr.targets[i]
		if t < -1 || int(t) >= len(targets) || (t == -1 && r.Included) || (i > 0 && qr.recs[i-1].Position >= r.Position) {
			return true
		}
		if r.Included {
			included = append(included, int32(i))
		}
	}
	slices.SortFunc(included, func(a, b int32) int { return cmp.Compare(qr.recs[a].EventID, qr.recs[b].EventID) })
	for j := 1; j < len(included); j++ {
		if qr.recs[included[j]].EventID == qr.recs[included[j-1]].EventID {
			return true
		}
	}
	return false
}

// firstUse reports whether the rows use the n targets in order of first
// use, each at least once (as a plan made from its records tables them).
func (qr *queueRows) firstUse(n int) bool {
	next := int32(0)
	for _, t := range qr.targets {
		switch {
		case t == next:
			next++
		case t > next:
			return false
		}
	}
	return int(next) == n
}
