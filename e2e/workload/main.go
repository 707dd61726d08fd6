package workload

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// ErrUsage is returned (wrapped) when the arguments of Main are wrong.
var ErrUsage = errors.New("usage")

const usage = `usage: workload <subcommand> [flags]
  http     --port N [--port M ...] --name POD --namespace NS --cluster C --node NODE [--ready-file F]
  udp      --port N [--port M ...] [--ready-file F]
  sleep    --seconds N [--ready-file F]   (N = 0 sleeps forever)
  get      URL [--timeout 5s] [--discard]
  udp-send ADDR MESSAGE [--timeout 5s]
  mount-exec [--bind SRC:DST[:ro]]... -- COMMAND [ARG...]`

// Main runs the workload subcommand named by args[0] with the remaining
// arguments, writing results to stdout and logs to stderr. It returns when the
// subcommand ends: a server ends on SIGTERM or SIGINT (with a nil error), a
// client when it has printed its answer. The caller turns a non-nil error into
// a non-zero exit status.
func Main(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return run(ctx, args, os.Stdout, os.Stderr)
}

// run is Main with its context and output streams injected, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no subcommand given\n%s", ErrUsage, usage)
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil)).With("workload", args[0])
	switch args[0] {
	case "http":
		return runHTTP(ctx, args[1:], logger)
	case "udp":
		return runUDP(ctx, args[1:], logger)
	case "sleep":
		return runSleep(ctx, args[1:], logger)
	case "get":
		return runGet(ctx, args[1:], stdout)
	case "udp-send":
		return runUDPSend(ctx, args[1:], stdout)
	case "mount-exec":
		return runMountExec(args[1:])
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	default:
		return fmt.Errorf("%w: unknown subcommand %q\n%s", ErrUsage, args[0], usage)
	}
}

// ports is a repeatable --port flag.
type ports []int

func (p *ports) String() string {
	s := make([]string, len(*p))
	for i, v := range *p {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (p *ports) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number between 0 and 65535", v)
	}
	*p = append(*p, n)
	return nil
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses flags placed before, between or after positional arguments
// and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%w: %s: %w\n%s", ErrUsage, fs.Name(), err, usage)
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// envOr returns the value of the environment variable key, or def when unset.
func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

// markReady creates the ready file, if one was asked for.
func markReady(path string) error {
	if path == "" {
		return nil
	}
	if err := os.WriteFile(path, []byte("ready\n"), 0o644); err != nil {
		return fmt.Errorf("write ready file: %w", err)
	}
	return nil
}
