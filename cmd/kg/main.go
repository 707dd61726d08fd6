// Command kg is kilofed's node agent, a successor of Kilo's kg: it builds the
// WireGuard mesh of one cluster from Node annotations and Peer objects. Run
// one per node (a DaemonSet in production, a process per node namespace in
// the lab). It accepts every flag of Kilo's kg, so Kilo's manifests run
// unchanged; the few that do not apply to kilofed are logged once at start.
// "kg webhook" is Kilo's validating admission webhook for Peers.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"k8s.io/klog/v2"
)

// levelNone is above every level kg logs at: --log-level=none.
const levelNone = slog.LevelError + 64

// newLogger returns the text logger of --log-level (Kilo's names: all is
// debug, none silences kg).
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	switch level {
	case "all":
		l = slog.LevelDebug
	case "none":
		l = levelNone
	default:
		if err := l.UnmarshalText([]byte(level)); err != nil {
			return nil, fmt.Errorf("--log-level %q: use all, debug, info, warn, error or none", level)
		}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// routeKlog sends client-go's klog output to log, so that its messages
// share kg's format and level.
func routeKlog(log *slog.Logger) {
	klog.SetSlogLogger(log.With("component", "client-go"))
}

// version is kg's module version, or "devel" in a build from a work tree.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "webhook" {
		os.Exit(webhookMain(os.Args[2:]))
	}
	o, err := parseFlags(os.Args[1:])
	switch {
	case err == flag.ErrHelp:
		return
	case err == errVersion:
		fmt.Println(version())
		return
	case err != nil:
		fmt.Fprintln(os.Stderr, "kg:", err)
		os.Exit(2)
	}
	log, err := newLogger(os.Stderr, o.logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kg:", err)
		os.Exit(2)
	}
	routeKlog(log)
	for _, n := range o.notes {
		log.Warn(n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		log.Error("kg stopped", "err", err)
		os.Exit(1)
	}
}

// webhookMain runs "kg webhook" and returns its exit code.
func webhookMain(args []string) int {
	o, err := parseWebhookFlags(args)
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kg webhook:", err)
		return 2
	}
	log, err := newLogger(os.Stderr, o.logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kg webhook:", err)
		return 2
	}
	routeKlog(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := runWebhook(ctx, o, log); err != nil {
		log.Error("kg webhook stopped", "err", err)
		return 1
	}
	return 0
}
