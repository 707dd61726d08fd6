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
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, errors.New("not a JWT (want three dot-separated parts)")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, fmt.Errorf("JWT payload: %w", err)
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(b, &claims); err != nil {
		return time.Time{}, fmt.Errorf("JWT payload: %w", err)
	}
	if claims.Exp == 0 {
		return time.Time{}, errors.New("the token does not expire (no exp claim)")
	}
	return time.Unix(claims.Exp, 0), nil
}
