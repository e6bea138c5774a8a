package actions

import (
	"sort"
	"time"

	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// twoPersonRule refuses an approval by the plan's author (nil: none yet):
// the approving key fp is the key that signed the plan as its author, or,
// once the approval verified as principal ("" before it is verified), the
// author's signature verifies as the same principal under another key.
// The one wording of this refusal on both backends.
func twoPersonRule(subj approval.Subject, author *approval.Signature, fp, principal string, signers approval.AllowedSigners, now time.Time) error {
	if author == nil {
		return nil
	}
	if author.Fingerprint == fp {
		return Refuse(ErrTwoPersonRule, "the plan's author cannot approve it (two-person rule: the author's key); nothing stored")
	}
	if principal == "" {
		return nil
	}
	if av, err := approval.Verify(subj, *author, signers, now); err == nil && av.Principal == principal {
		return Refuse(ErrTwoPersonRule, "the plan's author cannot approve it (two-person rule: %s is its author); nothing stored", principal)
	}
	return nil
}

// approverAsAuthor refuses an author's signature by a key that already
// approved the plan (the two-person rule the other way round), in one
// wording on both backends.
func approverAsAuthor(hash string, approvals []approval.Signature, sig approval.Signature) error {
	for _, a := range approvals {
		if a.Fingerprint == sig.Fingerprint {
			return Refuse(ErrTwoPersonRule, "this key already approved plan %s; it cannot also be its author; nothing stored", redrive.ShortHash(hash))
		}
	}
	return nil
}

// summarise counts n records per target and lists the idempotency keys of
// those included, in order; rec says each one's target, verdict and key,
// and whether the key was derived from the record as it is now. A record
// gone from the DLQ or changed since the plan has no key to show: it is
// left out of the list (it is named under gone or changed instead), on
// both backends; listed as "" it read as a record without a key.
func summarise(n int, rec func(i int) (target string, included bool, key string, derived bool)) ([]TargetCount, []string) {
	targets, keys := []TargetCount{}, []string{}
	by := map[string]*TargetCount{}
	for i := 0; i < n; i++ {
		t, included, key, derived := rec(i)
		tc, ok := by[t]
		if !ok {
			tc = &TargetCount{Target: t}
			by[t] = tc
		}
		if included {
			tc.Included++
			if derived {
				keys = append(keys, key)
			}
		} else {
			tc.Excluded++
		}
	}
	for _, tc := range by {
		targets = append(targets, *tc)
	}
	sort.Slice(targets, func(i, j int) bool { return targets[i].Target < targets[j].Target })
	return targets, keys
}
