package actions

import "sort"

// summarise counts n records per target and lists the idempotency keys of
// those included, in order; rec says each one's target, verdict and key.
func summarise(n int, rec func(i int) (target string, included bool, key string)) ([]TargetCount, []string) {
	targets, keys := []TargetCount{}, []string{}
	by := map[string]*TargetCount{}
	for i := 0; i < n; i++ {
		t, included, key := rec(i)
		tc, ok := by[t]
		if !ok {
			tc = &TargetCount{Target: t}
			by[t] = tc
		}
		if included {
			tc.Included++
			keys = append(keys, key)
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
