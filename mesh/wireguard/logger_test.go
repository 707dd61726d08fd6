package wireguard_test

import (
	"log/slog"
	"testing"
)

// testLogger writes to the test log, so logs show only for failed tests.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
