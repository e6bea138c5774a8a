package lag

import (
	"encoding/json"
	"sync"
	"testing"
)

// Rows carry interned names; what a user reads (JSON, text) is the string,
// the same Name for the same string from any goroutine.
func TestNamesInternAndPrint(t *testing.T) {
	if Intern("") != 0 || Name(0).String() != "" {
		t.Fatal("the empty string is not the zero Name")
	}
	var wg sync.WaitGroup
	got := make([]Name, 8)
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = Intern("orders") }()
	}
	wg.Wait()
	for _, n := range got {
		if n != got[0] || n == 0 || n.String() != "orders" {
			t.Fatalf("Intern(orders) = %v (%q), want one non-zero Name", got, n.String())
		}
	}
	if Intern("payments") == got[0] {
		t.Fatal("two strings share a Name")
	}
	b, err := json.Marshal(PartitionLag{Topic: Intern("orders"), Owner: Intern("m-1")})
	if err != nil {
		t.Fatal(err)
	}
	var back struct{ Topic, Owner, Err string }
	if err := json.Unmarshal(b, &back); err != nil || back.Topic != "orders" || back.Owner != "m-1" || back.Err != "" {
		t.Fatalf("JSON %s: %+v %v", b, back, err)
	}
	if !Intern("a").Less(Intern("b")) || Intern("b").Less(Intern("a")) || Intern("a").Less(Intern("a")) {
		t.Fatal("Less does not order by the strings")
	}
}
