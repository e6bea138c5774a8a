package main

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	tuidlq "github.com/berth-dev/berth/tui/dlq"
)

// On RabbitMQ too, a class whose messages already took effect in the
// system of record says so instead of its verdict, and the message viewer
// marks each such message.
func TestConsoleRabbitClassesSayWhatAlreadyTookEffect(t *testing.T) {
	isolateConfig(t)
	_, _, _, dlq := rmqDLQ(t, 4) // job-0..job-3, rejected: idempotency key = message id
	db := filepath.Join(t.TempDir(), "sor.db")
	sdb, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`create table done(k TEXT PRIMARY KEY)`, `insert into done values ('job-1'), ('job-2')`} {
		if _, err := sdb.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	sdb.Close()
	rc := newRabbitConsole(t, fmt.Sprintf(`  policies:
    - match: "berth.test.cmd.dlq.*"
      system_of_record: {driver: sqlite, dsn: %s, query: "select 1 from done where k = ?"}
`, db), true)
	d := drive(t, rc.env, tuidlq.NewQueueClassesPage(rc.env, dlq))
	v := d.until("already took effect")
	mustContain(t, v, "system of record: 2 message(s) already took effect")
	if !regexp.MustCompile(`rejected\s+-\s+4\s+took effect 2/4!`).MatchString(v) {
		t.Fatalf("the class does not say 2 of 4 took effect:\n%s", v)
	}
	d.press(keyRunes("a"), never)
	d.press(keyRunes("j"), never) // job-1
	d.press(keyEnterMsg, never)
	mustContain(t, d.view(), "message id      job-1", "pending, but the system of record has its key: it already took effect")
}
