package workload

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
)

// MaxStreamBytes is the largest N that the echo server's /bytes/N streams
// (64 GiB): enough for any throughput run, small enough to catch a typo.
const MaxStreamBytes = 64 << 30

// streamChunk is the one buffer every /bytes/N response is written from.
// It is only ever read, so concurrent requests share it and a request of
// any size allocates nothing in proportion to N.
var streamChunk = func() []byte {
	b := make([]byte, 256<<10)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}()

// bytesHandler streams the number of bytes named by the path value n
// (application/octet-stream, with a Content-Length), or answers 400 when n
// is not an integer between 0 and MaxStreamBytes.
func bytesHandler(logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
		if err != nil || n < 0 || n > MaxStreamBytes {
			http.Error(w, fmt.Sprintf("/bytes/N: N must be an integer between 0 and %d, got %q", int64(MaxStreamBytes), r.PathValue("n")),
				http.StatusBadRequest)
			return
		}
		logger.Debug("stream", "remote", r.RemoteAddr, "bytes", n)
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Length", strconv.FormatInt(n, 10))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodHead {
			return
		}
		for left := n; left > 0; {
			chunk := streamChunk[:min(left, int64(len(streamChunk)))]
			if _, err := w.Write(chunk); err != nil {
				logger.Debug("stream cut", "remote", r.RemoteAddr, "bytes", n, "left", left, "err", err)
				return
			}
			left -= int64(len(chunk))
		}
	}
}
