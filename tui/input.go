package tui

import (
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/tui/components/textfield"
)

// Input that cannot be misrouted.
//
// Bubbletea v1 reports printable characters that arrive in one read (tmux
// send-keys, a paste in a terminal without bracketed paste, a laggy SSH
// link) as one KeyMsg carrying several runes, which matches no key binding:
// ":topic orders" then neither opens the command line nor types into it,
// and the Enter after it opens whatever row is selected. handleInput hands
// such a burst over one key at a time, exactly as if typed, so keys after
// ":" go to the command line.
//
// A bracketed paste (KeyMsg.Paste) is text, never key presses: it goes to
// the text field that is open (the command line, a filter, a dialog
// field); a paste that starts with ":" opens the command line with the
// rest, not run; any other paste is dropped with a message. Keys of a burst
// or a paste never answer a confirmation (see ConfirmMsg).

// handleInput delivers one KeyMsg as read from the terminal. The first key
// also puts away the start notice (Options.Notice).
func (m *Model) handleInput(msg tea.KeyMsg) tea.Cmd {
	if m.noticeFlash != 0 {
		if m.flashID == m.noticeFlash {
			m.flash = FlashMsg{}
		}
		m.noticeFlash = 0
	}
	if msg.Paste {
		return m.paste(msg)
	}
	if msg.Type != tea.KeyRunes || len(msg.Runes) < 2 {
		return m.handleKey(msg)
	}
	m.burst = true
	defer func() { m.burst = false }()
	cmds := make([]tea.Cmd, 0, len(msg.Runes))
	for _, r := range msg.Runes {
		k := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: msg.Alt}
		if r == ' ' {
			k.Type = tea.KeySpace
		}
		cmds = append(cmds, m.handleKey(k))
	}
	return tea.Batch(cmds...)
}

// paste puts pasted text into the open text field, or refuses it.
func (m *Model) paste(msg tea.KeyMsg) tea.Cmd {
	if m.confirm != nil {
		return m.answerConfirm(msg)
	}
	if m.palette.open {
		return m.updatePalette(msg)
	}
	m.help = false
	top := len(m.stack) - 1
	if c, ok := m.stack[top].page.(InputCapturer); ok && c.CapturesKey(msg) {
		return m.updatePage(top, msg)
	}
	text := strings.TrimSpace(textfield.Clean(string(msg.Runes)))
	if rest, ok := strings.CutPrefix(text, ":"); ok {
		m.palette.start(m.snap)
		m.palette.input = strings.TrimSpace(rest)
		m.palette.suggest(m.opts.Config.ContextNames())
		return nil
	}
	return m.setFlash(FlashMsg{Level: Info, Text: "paste ignored: no text field is open (: opens the command line, / a filter)"})
}

// ConfirmMsg asks before Yes runs: the status line shows Question with
// "y: yes · any other key: no". Only a y typed on its own answers yes; a y
// inside a burst of keys or a paste answers no, so a pasted runbook line
// cannot both start and confirm a change.
type ConfirmMsg struct {
	Question string
	Yes      tea.Cmd
}

// Confirm returns a command that asks question and runs yes on y.
func Confirm(question string, yes tea.Cmd) tea.Cmd {
	return func() tea.Msg { return ConfirmMsg{Question: question, Yes: yes} }
}

// answerConfirm settles the open question with msg.
func (m *Model) answerConfirm(msg tea.KeyMsg) tea.Cmd {
	c := m.confirm
	m.confirm = nil
	if !m.burst && !msg.Paste && msg.Type == tea.KeyRunes && string(msg.Runes) == "y" {
		return c.Yes
	}
	return m.setFlash(FlashMsg{Level: Info, Text: "cancelled: " + c.Question})
}
