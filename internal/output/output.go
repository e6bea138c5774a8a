// Package output renders headless command results as aligned tables, JSON
// or Markdown. Cells are sanitised: anything read from a cluster may carry
// escape sequences, and they never reach the terminal intact.
package output

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/berth-dev/berth/internal/sanitize"
)

// Format is an output format chosen with -o.
type Format string

const (
	Table Format = "table"
	JSON  Format = "json"
	// JSONL is one JSON object a line (for pipes and --watch streams).
	JSONL    Format = "jsonl"
	Markdown Format = "markdown"
)

// Parse validates a -o value against the formats a command accepts.
func Parse(s string, allowed ...Format) (Format, error) {
	if len(allowed) == 0 {
		allowed = []Format{Table, JSON}
	}
	names := make([]string, len(allowed))
	for i, f := range allowed {
		if string(f) == s {
			return f, nil
		}
		names[i] = string(f)
	}
	return "", fmt.Errorf("--output: %q is not one of %s", s, strings.Join(names, ", "))
}

// WriteJSON writes v as indented JSON followed by a newline.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Grid is a table: a header and rows of cells.
type Grid struct {
	Header []string
	Rows   [][]string
	// Right marks columns to right-align (numbers).
	Right map[int]bool
}

// Add appends a row; cells are sanitised.
func (g *Grid) Add(cells ...string) {
	for i, c := range cells {
		cells[i] = sanitize.Text(c)
	}
	g.Rows = append(g.Rows, cells)
}

// WriteTable writes g as space-aligned columns.
func (g *Grid) WriteTable(w io.Writer) error {
	return Rows{Header: g.Header, Right: g.Right, N: len(g.Rows), Row: func(i int) []string { return g.Rows[i] }}.WriteTable(w)
}

// Rows is a table too large to hold as cells (a million-record redrive
// plan would take hundreds of MiB as strings): Row makes row i's cells
// when asked, and WriteTable asks twice, once to measure the columns and
// once to write them, so only one row's cells are held at a time. Row
// returns cells fit to print: sanitised, as Grid.Add makes them.
type Rows struct {
	Header []string
	// Right marks columns to right-align (numbers).
	Right map[int]bool
	N     int
	Row   func(i int) []string
}

// WriteTable writes the rows as space-aligned columns, as Grid does.
func (t Rows) WriteTable(w io.Writer) error {
	widths := make([]int, len(t.Header))
	measure := func(row []string) {
		for i, c := range row {
			if i < len(widths) {
				if n := utf8.RuneCountInString(c); n > widths[i] {
					widths[i] = n
				}
			}
		}
	}
	measure(t.Header)
	for i := 0; i < t.N; i++ {
		measure(t.Row(i))
	}
	b := bufio.NewWriterSize(w, 64<<10)
	line := func(row []string) {
		for i := range widths {
			c := ""
			if i < len(row) {
				c = row[i]
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if t.Right[i] {
				b.WriteString(pad + c)
			} else if i == len(widths)-1 {
				b.WriteString(c)
			} else {
				b.WriteString(c + pad)
			}
			if i < len(widths)-1 {
				b.WriteString("  ")
			}
		}
		b.WriteString("\n")
	}
	line(t.Header)
	for i := 0; i < t.N; i++ {
		line(t.Row(i))
	}
	return b.Flush()
}

// WriteMarkdown writes g as a GitHub-flavoured Markdown table.
func (g *Grid) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	row := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
		}
		b.WriteString("\n")
	}
	row(g.Header)
	b.WriteString("|")
	for i := range g.Header {
		if g.Right[i] {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, r := range g.Rows {
		row(r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
