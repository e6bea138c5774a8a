package tui

import (
	"strings"
	"time"

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

// Type-ahead. A key often starts a command that answers at once but
// through the program's loop (enter on a row opens its page with tui.Open,
// x asks its question with tui.Confirm), while the keys typed after it are
// already waiting: they would reach the page the key was typed on, not the
// page it opened. So keys read after a key that started a command wait for
// that command's answer (the gate), for gateWait at most (a command doing
// I/O or waiting on a timer must not hold the keyboard), and are then
// handled in order. A burst is split the same way: its keys after such a
// key wait too, and keep their burst mark (they never answer a question).

// gateWait bounds how long keys wait for the command a key started.
const gateWait = 150 * time.Millisecond

// pendingKey is a key waiting behind the gate.
type pendingKey struct {
	msg   tea.KeyMsg
	burst bool
}

type (
	// gateAnswerMsg carries the answer of the command key gate id waits for.
	gateAnswerMsg struct {
		id  int
		msg tea.Msg
	}
	// gateOpenMsg opens gate id: its command answered (and the answer was
	// handled), or gateWait passed.
	gateOpenMsg struct{ id int }
)

// keyInput handles a key read from the terminal: now, or after the keys
// already waiting.
func (m *Model) keyInput(msg tea.KeyMsg) tea.Cmd {
	if m.gate != 0 {
		m.pending = append(m.pending, pendingKey{msg: msg})
		return nil
	}
	return m.handleInput(msg)
}

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
		return m.gated(m.paste(msg))
	}
	if msg.Type != tea.KeyRunes || len(msg.Runes) < 2 {
		return m.gated(m.handleKey(msg))
	}
	keys := make([]pendingKey, len(msg.Runes))
	for i, r := range msg.Runes {
		k := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: msg.Alt}
		if r == ' ' {
			k.Type = tea.KeySpace
		}
		keys[i] = pendingKey{msg: k, burst: true}
	}
	m.pending = append(keys, m.pending...)
	return m.drain()
}

// drain handles waiting keys in order until one starts a command; the rest
// then wait for its answer.
func (m *Model) drain() tea.Cmd {
	for len(m.pending) > 0 && m.gate == 0 {
		k := m.pending[0]
		m.pending = m.pending[1:]
		if !k.burst {
			if cmd := m.handleInput(k.msg); cmd != nil {
				return cmd
			}
			continue
		}
		m.burst = true
		cmd := m.handleKey(k.msg)
		m.burst = false
		if cmd != nil {
			return m.gated(cmd)
		}
	}
	return nil
}

// gated runs cmd with the gate closed until it answers or gateWait passes.
func (m *Model) gated(cmd tea.Cmd) tea.Cmd {
	if cmd == nil {
		return nil
	}
	m.gateSeq++
	id := m.gateSeq
	m.gate = id
	return tea.Batch(
		func() tea.Msg { return gateAnswerMsg{id: id, msg: cmd()} },
		m.tick(gateWait, func(time.Time) tea.Msg { return gateOpenMsg{id: id} }),
	)
}

// gateAnswer hands the answer back to the program's loop (a batch or a
// sequence is the runtime's to run), then opens the gate behind it.
func gateAnswer(a gateAnswerMsg) tea.Cmd {
	open := func() tea.Msg { return gateOpenMsg{id: a.id} }
	if a.msg == nil {
		return open
	}
	return tea.Sequence(func() tea.Msg { return a.msg }, open)
}

// openGate lets the waiting keys through if gate id is still the one
// closed.
func (m *Model) openGate(id int) tea.Cmd {
	if id != m.gate {
		return nil
	}
	m.gate = 0
	return m.drain()
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
