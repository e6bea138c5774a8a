package redrive

import "testing"

// The selection named in a refusal reads back as the flags given, and a
// value the user typed never reaches the terminal with a control
// character intact.
func TestSelectionFlagsNameTheSelection(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Selection{Classes: []string{"a", "b"}, Offsets: []Coord{{Partition: 0, Offset: 7}}, Header: "k=v"}.Flags(), "--class a --class b --offsets 0:7 --header k=v"},
		{Selection{Key: "two words\x1b[2J"}.Flags(), `--record-key "two words\x1b[2J"`},
		{QueueSelection{All: true, Reasons: []string{"expired"}, OriginalQueues: []string{"q"}}.Flags(), "--all --reason expired --original-queue q"},
	} {
		if c.got != c.want {
			t.Errorf("Flags() = %q, want %q", c.got, c.want)
		}
	}
}
