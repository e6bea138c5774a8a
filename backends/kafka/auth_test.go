package kafka

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func testJWT(exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(fmt.Sprintf(`{"exp":%d}`, exp.Unix()))) + "." + enc([]byte("s"))
}

// A token is reused while it is valid and fetched again a minute before it
// expires, so a connection never authenticates with a token about to lapse;
// a token without a readable expiry is fetched every time.
func TestTokenSourceRefreshesBeforeExpiry(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	file := filepath.Join(t.TempDir(), "token")
	first, second := testJWT(now.Add(time.Hour)), testJWT(now.Add(2*time.Hour))
	os.WriteFile(file, []byte(first+"\n"), 0o600)
	src := &TokenSource{File: file, Field: "contexts.c.sasl.", Now: func() time.Time { return now }}
	get := func() string {
		t.Helper()
		tok, err := src.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if get() != first {
		t.Fatal("first token not read")
	}
	os.WriteFile(file, []byte(second), 0o600)
	now = now.Add(58 * time.Minute)
	if get() != first {
		t.Fatal("a token valid for two more minutes was fetched again")
	}
	now = now.Add(90 * time.Second) // 30s before the first token expires
	if get() != second {
		t.Fatal("a token expiring within the refresh margin was reused")
	}

	os.WriteFile(file, []byte("opaque-1"), 0o600)
	src = &TokenSource{File: file, Now: func() time.Time { return now }}
	get()
	os.WriteFile(file, []byte("opaque-2"), 0o600)
	if get() != "opaque-2" {
		t.Fatal("a token without an expiry was cached")
	}
}
