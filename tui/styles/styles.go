// Package styles holds every lipgloss style the console uses, built once by
// New and handed down the model tree. Nothing builds a style inside View or a
// row loop: rendering a style is what costs time, and building them in one
// place keeps the palette coherent.
//
// Colours are lipgloss.AdaptiveColor values, so they follow the terminal's
// background (light or dark). NO_COLOR is honoured by lipgloss itself: when
// the variable is set, termenv reports the Ascii profile and every style
// renders as plain text (see TestNoColor). Because colour may be absent, no
// information is carried by colour alone: the cursor row has a "▸" gutter
// mark, statuses are words, and problem cells carry a "!" suffix.
package styles

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// Level is how a row or cell should be coloured: by meaning, not by colour.
type Level uint8

const (
	Normal Level = iota
	Good         // healthy: OK statuses, brokers up
	Warn         // needs attention: lagging, under-replicated, hot
	Bad          // broken: stalled, stopped, offline, under min ISR
	Dim          // unimportant or stale: idle members, internal topics
	Accent       // highlights: titles, the selected sort column
	numLevels
)

// NumLevels is the number of Level values (for arrays indexed by Level).
const NumLevels = int(numLevels)

// Palette colours. Light values are for light backgrounds, Dark for dark ones.
var (
	colText   = lipgloss.AdaptiveColor{Light: "#1f1f1f", Dark: "#e4e4e4"}
	colMuted  = lipgloss.AdaptiveColor{Light: "#6b6b6b", Dark: "#8a8a8a"}
	colGood   = lipgloss.AdaptiveColor{Light: "#1a7f37", Dark: "#56d364"}
	colWarn   = lipgloss.AdaptiveColor{Light: "#9a6700", Dark: "#e3b341"}
	colBad    = lipgloss.AdaptiveColor{Light: "#cf222e", Dark: "#ff7b72"}
	colAccent = lipgloss.AdaptiveColor{Light: "#0550ae", Dark: "#79c0ff"}
	colSelBg  = lipgloss.AdaptiveColor{Light: "#d0e2ff", Dark: "#264f78"}
	colBarBg  = lipgloss.AdaptiveColor{Light: "#e8e8e8", Dark: "#303030"}
)

// Styles is the console's whole style sheet.
type Styles struct {
	Levels [NumLevels]lipgloss.Style

	// Chrome.
	Crumbs     lipgloss.Style // breadcrumb trail
	CrumbLast  lipgloss.Style // the current page in the trail
	Title      lipgloss.Style // section titles inside a page
	Label      lipgloss.Style // "brokers up:" style labels
	Muted      lipgloss.Style
	StatusBar  lipgloss.Style // the bottom line
	Badge      lipgloss.Style // context name
	ReadOnly   lipgloss.Style // READ-ONLY badge
	FlashInfo  lipgloss.Style
	FlashError lipgloss.Style
	Stale      lipgloss.Style // "stale 12s" when the last refresh failed
	Disabled   lipgloss.Style // actions a context does not allow

	// Table.
	Header       lipgloss.Style
	HeaderSorted lipgloss.Style
	Selected     lipgloss.Style // the cursor row (plus the gutter mark)
	FilterPrompt lipgloss.Style

	// Palette and dialogs.
	Palette      lipgloss.Style // the ":" line
	PaletteMatch lipgloss.Style // the highlighted completion
	HelpKey      lipgloss.Style
	HelpDesc     lipgloss.Style
	Border       lipgloss.Style

	// Charts.
	ChartAge lipgloss.Style
	ChartLag lipgloss.Style
}

// New builds the style sheet. Call it once per program.
func New() *Styles {
	s := &Styles{}
	base := lipgloss.NewStyle()
	s.Levels[Normal] = base.Foreground(colText)
	s.Levels[Good] = base.Foreground(colGood)
	s.Levels[Warn] = base.Foreground(colWarn)
	s.Levels[Bad] = base.Foreground(colBad).Bold(true)
	s.Levels[Dim] = base.Foreground(colMuted)
	s.Levels[Accent] = base.Foreground(colAccent)

	s.Crumbs = base.Foreground(colMuted)
	s.CrumbLast = base.Foreground(colAccent).Bold(true)
	s.Title = base.Foreground(colAccent).Bold(true)
	s.Label = base.Foreground(colMuted)
	s.Muted = base.Foreground(colMuted)
	s.StatusBar = base.Foreground(colText).Background(colBarBg)
	s.Badge = base.Foreground(colAccent).Background(colBarBg).Bold(true)
	s.ReadOnly = base.Foreground(colBad).Background(colBarBg).Bold(true)
	s.FlashInfo = base.Foreground(colGood).Background(colBarBg)
	s.FlashError = base.Foreground(colBad).Background(colBarBg).Bold(true)
	s.Stale = base.Foreground(colWarn).Background(colBarBg).Bold(true)
	s.Disabled = base.Foreground(colMuted).Strikethrough(false).Faint(true)

	s.Header = base.Foreground(colMuted).Bold(true)
	s.HeaderSorted = base.Foreground(colAccent).Bold(true)
	s.Selected = base.Background(colSelBg).Foreground(colText).Bold(true)
	s.FilterPrompt = base.Foreground(colAccent)

	s.Palette = base.Foreground(colText)
	s.PaletteMatch = base.Foreground(colAccent).Bold(true)
	s.HelpKey = base.Foreground(colAccent).Bold(true)
	s.HelpDesc = base.Foreground(colText)
	s.Border = base.Foreground(colMuted)

	s.ChartAge = base.Foreground(colBad)
	s.ChartLag = base.Foreground(colAccent)
	return s
}

// SGR is a style reduced to the escape sequences it wraps text in. Writing
// Prefix + text + Suffix gives the same bytes as Style.Render(text) for a
// single-line text with no width settings, at a fraction of the cost; the
// table renders thousands of cells a second this way.
type SGR struct{ Prefix, Suffix string }

// Of extracts the SGR of st under the current colour profile. Under the
// Ascii profile (NO_COLOR, or output that is not a terminal) both are empty.
func Of(st lipgloss.Style) SGR {
	const mark = "\x00"
	out := st.Render(mark)
	i := strings.Index(out, mark)
	if i < 0 {
		return SGR{}
	}
	return SGR{Prefix: out[:i], Suffix: out[i+len(mark):]}
}

// Wrap writes s inside the SGR.
func (g SGR) Wrap(s string) string {
	if g.Prefix == "" {
		return s
	}
	return g.Prefix + s + g.Suffix
}
