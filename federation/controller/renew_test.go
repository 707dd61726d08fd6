package controller

import (
	"testing"
	"time"
)

func TestTokensAreRenewedAfterTwoThirdsOfTheirLife(t *testing.T) {
	iat := time.Unix(1700000000, 0)
	exp := iat.Add(24 * time.Hour)
	for _, tc := range []struct {
		name string
		now  time.Time
		iat  time.Time
		want bool
	}{
		{"fresh", iat.Add(time.Hour), iat, false},
		{"just before two thirds", iat.Add(16*time.Hour - time.Second), iat, false},
		{"two thirds", iat.Add(16 * time.Hour), iat, true},
		{"expired", exp.Add(time.Hour), iat, true},
		{"no issue time", iat.Add(20 * time.Hour), time.Time{}, false},
	} {
		if got := dueForRenewal(tc.iat, exp, tc.now); got != tc.want {
			t.Errorf("%s: dueForRenewal = %v, want %v", tc.name, got, tc.want)
		}
	}
}
