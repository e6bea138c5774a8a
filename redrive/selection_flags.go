package redrive

import (
	"strconv"
	"strings"
	"unicode"
)

// Flags is the selection as the `berth redrive plan` flags that made it,
// for a message that must name it (a selection matching no record).
func (s Selection) Flags() string {
	var f selectionFlags
	f.bool("--all", s.All)
	f.each("--class", s.Classes)
	if len(s.Offsets) > 0 {
		cs := make([]string, len(s.Offsets))
		for i, c := range s.Offsets {
			cs[i] = c.String()
		}
		f.add("--offsets", strings.Join(cs, ","))
	}
	f.add("--record-key", s.Key)
	f.add("--header", s.Header)
	if s.Since != nil {
		f.add("--since", FormatCreatedAt(*s.Since))
	}
	if s.Until != nil {
		f.add("--until", FormatCreatedAt(*s.Until))
	}
	return f.String()
}

// Flags is the selection as the `berth redrive plan` flags that made it.
func (s QueueSelection) Flags() string {
	var f selectionFlags
	f.bool("--all", s.All)
	f.each("--class", s.Classes)
	f.each("--event-id", s.EventIDs)
	f.each("--reason", s.Reasons)
	f.each("--original-queue", s.OriginalQueues)
	return f.String()
}

type selectionFlags []string

func (f *selectionFlags) bool(name string, on bool) {
	if on {
		*f = append(*f, name)
	}
}

func (f *selectionFlags) each(name string, vs []string) {
	for _, v := range vs {
		f.add(name, v)
	}
}

// add appends name and v, quoted when v would not read back as one shell
// word or holds a control character (values are the user's, and the
// message reaches a terminal).
func (f *selectionFlags) add(name, v string) {
	if v == "" {
		return
	}
	if strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) || strings.ContainsRune(`"'\`, r) }) >= 0 {
		v = strconv.Quote(v)
	}
	*f = append(*f, name+" "+v)
}

func (f selectionFlags) String() string { return strings.Join(f, " ") }
