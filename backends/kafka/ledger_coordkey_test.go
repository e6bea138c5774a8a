package kafka

import (
	"testing"

	"github.com/berth-dev/berth/redrive"
)

// TestCoordKeyMatchesWhatLookupMatches: LookupEach reads a ledger key as a
// record's coordinates exactly when it is the key Lookup builds for them
// (redrive.FormatOrigin), for this DLQ and no other.
func TestCoordKeyMatchesWhatLookupMatches(t *testing.T) {
	for _, c := range []redrive.Coord{{Partition: 0, Offset: 0}, {Partition: 3, Offset: 12345}, {Partition: 2147483647, Offset: 9223372036854775807}} {
		key := redrive.FormatOrigin("pay/ments.DLT", c.Partition, c.Offset)
		if got, ok := coordKey([]byte(key), "pay/ments.DLT"); !ok || got != c {
			t.Errorf("%s: %v %v, want %v", key, got, ok, c)
		}
	}
	for _, key := range []string{"pay/ments.DLT/03/5", "pay/ments.DLT/3/05", "pay/ments.DLT/3", "pay/ments.DLT/3/5/6", "pay/ments.DLT/-1/5",
		"pay/ments.DLT/3/", "pay/ments.DLT//5", "pay/ments.DLTX/3/5", "other/3/5", "ev/evt-1", "pay/ments.DLT/2147483648/0", "pay/ments.DLT/0/9223372036854775808"} {
		if c, ok := coordKey([]byte(key), "pay/ments.DLT"); ok {
			t.Errorf("%s read as %v", key, c)
		}
	}
}
