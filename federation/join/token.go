package join

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// TokenExpiry returns the expiry (the "exp" claim) of a ServiceAccount JWT,
// without checking its signature: the issuing API server does that; this is
// only to know when to renew it.
func TokenExpiry(token string) (time.Time, error) {
	_, exp, err := TokenLifetime(token)
	return exp, err
}

// TokenLifetime returns when a ServiceAccount JWT was issued (its "iat"
// claim, zero when absent) and when it expires (its "exp" claim), without
// checking its signature.
func TokenLifetime(token string) (issued, expires time.Time, err error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return issued, expires, errors.New("not a JWT (want three dot-separated parts)")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return issued, expires, fmt.Errorf("JWT payload: %w", err)
	}
	var claims struct {
		Iat int64 `json:"iat"`
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(b, &claims); err != nil {
		return issued, expires, fmt.Errorf("JWT payload: %w", err)
	}
	if claims.Exp == 0 {
		return issued, expires, errors.New("the token does not expire (no exp claim)")
	}
	if claims.Iat != 0 {
		issued = time.Unix(claims.Iat, 0)
	}
	return issued, time.Unix(claims.Exp, 0), nil
}
