package join

import (
	"encoding/base64"
	"testing"
	"time"
)

func jwt(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(payload)) + ".c2ln"
}

func TestTokenLifetimeReadsIatAndExp(t *testing.T) {
	iat, exp, err := TokenLifetime(jwt(`{"iat":1700000000,"exp":1700086400,"sub":"system:serviceaccount:kilofed-system:kilofed-remote-dr"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !iat.Equal(time.Unix(1700000000, 0)) || exp.Sub(iat) != 24*time.Hour {
		t.Errorf("TokenLifetime = %v, %v; want issued at 1700000000, valid 24h", iat, exp)
	}
}

func TestTokenLifetimeRefusesWhatIsNotAnExpiringJWT(t *testing.T) {
	for name, tok := range map[string]string{
		"not a JWT":        "abc",
		"garbage payload":  "a.!!!.c",
		"no expiry":        jwt(`{"sub":"x"}`),
		"payload not JSON": jwt(`[`),
	} {
		if _, _, err := TokenLifetime(tok); err == nil {
			t.Errorf("%s: TokenLifetime accepted %q", name, tok)
		}
	}
}
