package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/internal/savefile"
)

// --save-value/--save-key: one record's (message's) raw bytes to files, the
// headless twin of the record viewer's S (`berth records`, `berth dlq
// show`), written by the same savefile.Write.

// recordSave is what --save-value/--save-key/--overwrite ask for.
type recordSave struct {
	value, key string
	overwrite  bool
}

func (s recordSave) asked() bool { return s.value != "" || s.key != "" }

func (s recordSave) check(limit int) error {
	switch {
	case !s.asked():
		if s.overwrite {
			return usageErr("--overwrite: only with --save-value or --save-key")
		}
	case limit != 1:
		return usageErr("--save-value/--save-key: save one record; --limit %d is not 1", limit)
	case s.value == s.key:
		return usageErr("--save-value and --save-key: both name %s", s.value)
	}
	return s.dirsExist()
}

// dirsExist refuses a file whose directory does not exist before anything
// is read (a DLQ browse marks every message redelivered), as --out does.
func (s recordSave) dirsExist() error {
	for _, p := range []struct{ flag, file string }{{"--save-value", s.value}, {"--save-key", s.key}} {
		if p.file == "" {
			continue
		}
		if dir := filepath.Dir(p.file); !isDir(dir) {
			return usageErr("%s: directory %s does not exist", p.flag, sanitize.Text(dir))
		}
	}
	return nil
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// savedPart is one file written, as -o json reports it.
type savedPart struct {
	Part  string `json:"part"` // value or key
	File  string `json:"file"`
	Bytes int    `json:"bytes"`
}

// write writes value and key to the files asked for. Every target is
// checked first: when one is refused, nothing is written.
func (s recordSave) write(value, key []byte) ([]savedPart, error) {
	var parts []savedPart
	var files []string
	var data [][]byte
	for _, p := range []struct {
		part, file string
		data       []byte
	}{{"value", s.value, value}, {"key", s.key, key}} {
		if p.file == "" {
			continue
		}
		abs, _, err := savefile.Check(p.file, s.overwrite)
		if errors.Is(err, savefile.ErrExists) {
			return nil, fmt.Errorf("--save-%s: %s already exists: nothing written (--overwrite replaces it)", p.part, sanitize.Text(abs))
		}
		if err != nil {
			return nil, fmt.Errorf("--save-%s: %s", p.part, sanitize.Text(err.Error()))
		}
		parts = append(parts, savedPart{Part: p.part, File: sanitize.Text(abs), Bytes: len(p.data)})
		files, data = append(files, abs), append(data, p.data)
	}
	for i, p := range parts {
		if _, err := savefile.Write(files[i], data[i], s.overwrite); err != nil {
			return nil, fmt.Errorf("--save-%s: %s", p.Part, sanitize.Text(err.Error()))
		}
	}
	return parts, nil
}

// printSaved says what was written: view as JSON (its saved list is
// parts), or a line a part naming what (the record) it came from.
func (a *app) printSaved(f output.Format, view any, parts []savedPart, what string) error {
	if f == output.JSON {
		return output.WriteJSON(a.stdout, view)
	}
	for _, p := range parts {
		fmt.Fprintf(a.stdout, "wrote the %s of %s (%d bytes) to %s\n", p.Part, what, p.Bytes, p.File)
	}
	return nil
}

// savedMessageView is the JSON of `berth dlq show --save-value` on RabbitMQ.
type savedMessageView struct {
	DLQ      string      `json:"dlq"`
	Position int         `json:"position"`
	EventID  string      `json:"event_id"`
	Saved    []savedPart `json:"saved"`
}

// checkShow is dlq show's rule: --save-value names one message by
// --event-id, and --event-id selects only for a save.
func (s recordSave) checkShow(eventID string) error {
	switch {
	case s.value == "" && eventID != "":
		return usageErr("--event-id: only with --save-value (dlq show lists by --class)")
	case s.value == "" && s.overwrite:
		return usageErr("--overwrite: only with --save-value")
	case s.value != "" && eventID == "":
		return usageErr("--save-value: name the message with --event-id ID (see berth dlq show)")
	}
	return s.dirsExist()
}

// rmqSaveMessage browses a RabbitMQ DLQ (as dlq show does: nothing is
// consumed) and writes the body of the oldest message with eventID.
func (a *app) rmqSaveMessage(cmd *cobra.Command, dlq, eventID string, s recordSave, read int, b browseFlags) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	_, res, release, err := a.browseDLQ(cmd, dlq, "read", read, b, nil)
	if err != nil {
		return err
	}
	defer release()
	a.browseNotes(res)
	for _, m := range res.Messages {
		if m.EventID != eventID {
			continue
		}
		saved, err := s.write(m.Body, nil)
		if err != nil {
			return err
		}
		v := savedMessageView{DLQ: sanitize.Text(dlq), Position: m.Position, EventID: sanitize.Text(eventID), Saved: saved}
		return a.printSaved(f, v, saved, fmt.Sprintf("%s message %d (event id %s)", v.DLQ, m.Position, v.EventID))
	}
	more := ""
	if !res.Complete {
		more = "; more remain: raise --read"
	}
	return fmt.Errorf("no message with event id %s among the %d read from %s%s: nothing written", sanitize.Text(eventID), len(res.Messages), sanitize.Text(dlq), more)
}
