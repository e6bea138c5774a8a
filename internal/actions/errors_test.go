package actions

import (
	"errors"
	"fmt"
	"testing"
)

// A refusal wrapped by a caller's context still answers errors.Is/As, and
// its message is the detail a user reads.
func TestRefusalsAreTyped(t *testing.T) {
	err := fmt.Errorf("redrive execute: %w", Refuse(ErrClusterMismatch, "plan 1234 was made on cluster A, this is cluster B"))
	if !errors.Is(err, ErrClusterMismatch) || errors.Is(err, ErrReadOnly) {
		t.Fatalf("errors.Is: %v", err)
	}
	if !IsRefusal(err) || IsRefusal(errors.New("broker down")) {
		t.Fatal("IsRefusal")
	}
	if got := err.Error(); got != "redrive execute: refused: plan 1234 was made on cluster A, this is cluster B" {
		t.Fatalf("message %q", got)
	}
	if got := (&Refusal{Reason: ErrReadOnly}).Error(); got != "refused: the context is read-only" {
		t.Fatalf("bare refusal %q", got)
	}
}
