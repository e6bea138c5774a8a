package redrive

import (
	"bytes"
	"testing"
	"time"
)

// TestWriteCanonicalIsCanonical: the streaming writer Hash uses produces
// exactly Canonical's bytes, for rows with hostile text (quotes, escapes,
// invalid UTF-8, astral characters, HTML characters), nil and empty rows.
func TestWriteCanonicalIsCanonical(t *testing.T) {
	base := Core{Format: PlanFormat, Backend: BackendRabbitMQ, Cluster: "rabbit@h\u00e9", Vhost: "/", DLQ: "q<&>\"\\",
		CreatedAt: FormatCreatedAt(time.Unix(1700000000, 5e6)), Options: []string{"to_queues"},
		Policy: PolicySnapshot{Match: "pay*", Review: "required", Approvals: 2}, Targets: []string{"ex\x00rk", "\U0001F4A5"}}
	for name, rows := range map[string][]Row{
		"nil":   nil,
		"empty": {},
		"hostile": {
			{Loc: "0:m-\"1\"\\\n\t\u2028", Digest: "AAAA", Target: 0},
			{Loc: "1:\xff\xfe bad utf8 \U0001F600", Digest: "x<y>&z", Target: -1, Verdict: ReasonDuplicate},
			{Loc: "2:\x1b[31m\u00e9", Digest: "", Target: 1, Verdict: "already_redriven"},
		},
	} {
		c := base
		c.Rows = rows
		want, err := Canonical(c)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := c.WriteCanonical(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("%s:\nstream    %s\ncanonical %s", name, got.Bytes(), want)
		}
		if h, _ := c.Hash(); h != DomainHash(PlanFormat+"\n", want) {
			t.Fatalf("%s: Hash is not over Canonical", name)
		}
	}
}
