package redrive

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// Digest is a record's content digest (see ContentDigest): the SHA-256
// itself, 32 bytes held in place. Its text, in plan files, rows and
// output, is the unpadded base64url of those bytes (43 characters),
// exactly what a plan file holds and its hash covers.
type Digest [sha256.Size]byte

// digestEncoding is the digest's text form. Strict: of the 2^258 strings
// of 43 base64url characters, only the one String writes for each digest
// is accepted, so text -> Digest -> text is the identity and a plan's
// hash, computed from its records, is the hash of what its file says.
var digestEncoding = base64.RawURLEncoding.Strict()

// digestTextLen is the length of a digest's text.
var digestTextLen = digestEncoding.EncodedLen(sha256.Size)

// String is the digest's text: base64url, no padding.
func (d Digest) String() string { return digestEncoding.EncodeToString(d[:]) }

// appendText appends the digest's text to b.
func (d Digest) appendText(b []byte) []byte { return digestEncoding.AppendEncode(b, d[:]) }

// IsZero reports whether d is the zero digest (no record was digested).
func (d Digest) IsZero() bool { return d == Digest{} }

// MarshalText writes the digest's text.
func (d Digest) MarshalText() ([]byte, error) { return d.appendText(nil), nil }

// UnmarshalText reads a digest's text (ParseDigest).
func (d *Digest) UnmarshalText(b []byte) error {
	v, ok := parseDigest(b)
	if !ok {
		return fmt.Errorf("digest %q is not base64url SHA-256", b)
	}
	*d = v
	return nil
}

// ParseDigest reads a digest's text: exactly the 43 characters String
// writes for some digest.
func ParseDigest(s string) (Digest, bool) {
	// Copied to the stack: a plan's million digests are read without
	// allocating.
	var b [64]byte
	if len(s) != digestTextLen {
		return Digest{}, false
	}
	return parseDigest(b[:copy(b[:], s)])
}

func parseDigest(b []byte) (Digest, bool) {
	var d Digest
	if len(b) != digestTextLen {
		return d, false
	}
	n, err := digestEncoding.Decode(d[:], b)
	return d, err == nil && n == len(d)
}
