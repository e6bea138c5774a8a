package output

import (
	"bytes"
	"strings"
	"testing"
)

// A table made a row at a time (Rows, for a million-record plan) reads as
// the same table held whole (Grid): numbers right-aligned, text left, the
// widest cell of each column (in characters, not bytes) setting its width,
// the last column unpadded; Grid's cells are sanitised on the way in.
func TestRowsAlignAsAGrid(t *testing.T) {
	header := []string{"PARTITION", "OFFSET", "EVENT", "VERDICT"}
	cells := [][]string{{"0", "7", "evt-1", "include"}, {"12", "1234567890", "é", "effect_committed"}}
	want := "PARTITION      OFFSET  EVENT  VERDICT\n" +
		"        0           7  evt-1  include\n" +
		"       12  1234567890  é      effect_committed\n"
	right := map[int]bool{0: true, 1: true}
	var streamed, held bytes.Buffer
	if err := (Rows{Header: header, Right: right, N: len(cells), Row: func(i int) []string { return cells[i] }}).WriteTable(&streamed); err != nil {
		t.Fatal(err)
	}
	if streamed.String() != want {
		t.Fatalf("rows:\n%s\nwant:\n%s", streamed.String(), want)
	}
	g := Grid{Header: header, Right: right}
	for _, c := range cells {
		g.Add(append([]string(nil), c...)...)
	}
	if err := g.WriteTable(&held); err != nil || held.String() != want {
		t.Fatalf("grid (%v):\n%s\nwant:\n%s", err, held.String(), want)
	}
	held.Reset()
	g.Add("1", "2", "\x1b[31mred", "x")
	if err := g.WriteTable(&held); err != nil || strings.Contains(held.String(), "\x1b") {
		t.Fatalf("grid with an escape sequence (%v): %q", err, held.String())
	}
}
