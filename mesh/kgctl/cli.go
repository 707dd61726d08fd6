package kgctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// ErrUsage is wrapped by the errors of a command line that cannot be run
// as typed; Main then prints the command's usage and exits with 2.
var ErrUsage = errors.New("invalid command line")

// Command is one subcommand of a Program.
type Command struct {
	// Name is what the user types: "graph", "showconf".
	Name string
	// Usage is the synopsis after the program name: "showconf node|peer NAME [flags]".
	Usage string
	// Summary is one line for the command list.
	Summary string
	// Run runs the command with the arguments after its name; errors
	// wrapping ErrUsage print the usage.
	Run func(ctx context.Context, env *Env, args []string) error
}

// Env is what every command gets: streams, the global flags, and how to
// reach the cluster.
type Env struct {
	// Program is the name the user typed (kilofed, kgctl), for messages.
	Program string
	// Stdout and Stderr are the output streams.
	Stdout, Stderr io.Writer
	// Kubeconfig is --kubeconfig; empty means $KUBECONFIG, then
	// ~/.kube/config (then the in-cluster service account).
	Kubeconfig string
	// Context is --context, the kubeconfig context; empty means the
	// current one.
	Context string
	// OpenSource opens the mesh snapshot source of the cluster; nil means
	// OpenCluster. Tests replace it.
	OpenSource func(ctx context.Context, env *Env, b BackendFlags) (Source, error)
	// Logger receives library logs (the WireGuard device); nil discards.
	Logger *slog.Logger
}

// NewEnv returns the Env of a real process: os.Stdout and os.Stderr.
func NewEnv(program string) *Env {
	return &Env{Program: program, Stdout: os.Stdout, Stderr: os.Stderr}
}

// source opens the cluster's Source.
func (e *Env) source(ctx context.Context, b BackendFlags) (Source, error) {
	if e.OpenSource != nil {
		return e.OpenSource(ctx, e, b)
	}
	return OpenCluster(ctx, e, b)
}

func (e *Env) logger() *slog.Logger {
	if e.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Logger
}

// addGlobalFlags registers the flags every command accepts.
func (e *Env) addGlobalFlags(fs *pflag.FlagSet) {
	fs.StringVar(&e.Kubeconfig, "kubeconfig", e.Kubeconfig, "path to the kubeconfig (default $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&e.Context, "context", e.Context, "kubeconfig context to use (default the current context)")
}

// Main runs the command that args name among cmds, as program env.Program
// [global flags] COMMAND [flags] [args], and returns the exit status: 0,
// 1 when the command failed, 2 for a command line that cannot be run.
func Main(ctx context.Context, env *Env, cmds []Command, args []string) int {
	global := pflag.NewFlagSet(env.Program, pflag.ContinueOnError)
	global.SetInterspersed(false)
	global.SetOutput(io.Discard)
	env.addGlobalFlags(global)
	err := global.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		printCommands(env.Stdout, env.Program, cmds)
		return 0
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", env.Program, err)
		printCommands(env.Stderr, env.Program, cmds)
		return 2
	}
	rest := global.Args()
	if len(rest) == 0 {
		printCommands(env.Stderr, env.Program, cmds)
		return 2
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		if len(rest) > 0 {
			if c, ok := find(cmds, rest[0]); ok {
				return runCommand(ctx, env, c, []string{"--help"})
			}
		}
		printCommands(env.Stdout, env.Program, cmds)
		return 0
	}
	c, ok := find(cmds, name)
	if !ok {
		fmt.Fprintf(env.Stderr, "%s: unknown command %q\n", env.Program, name)
		printCommands(env.Stderr, env.Program, cmds)
		return 2
	}
	return runCommand(ctx, env, c, rest)
}

func runCommand(ctx context.Context, env *Env, c Command, args []string) int {
	err := c.Run(ctx, env, args)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(env.Stderr, "%s %s: %v\nusage: %s %s (see %s help %s)\n",
			env.Program, c.Name, err, env.Program, c.Usage, env.Program, c.Name)
		return 2
	}
	fmt.Fprintf(env.Stderr, "%s %s: %v\n", env.Program, c.Name, err)
	return 1
}

func find(cmds []Command, name string) (Command, bool) {
	i := slices.IndexFunc(cmds, func(c Command) bool { return c.Name == name })
	if i < 0 {
		return Command{}, false
	}
	return cmds[i], true
}

func printCommands(w io.Writer, program string, cmds []Command) {
	fmt.Fprintf(w, "usage: %s [--kubeconfig FILE] [--context NAME] COMMAND [flags] [args]\n\ncommands:\n", program)
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.Name))
	}
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.Name, c.Summary)
	}
	fmt.Fprintf(w, "\nRun %s help COMMAND for a command's flags.\n", program)
}

// newFlagSet returns the flag set of command c, with the global flags, whose
// --help prints the usage and the flags on env.Stdout.
func newFlagSet(env *Env, c Command, long string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(c.Name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	env.addGlobalFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(env.Stdout, "usage: %s %s\n\n%s\n\nflags:\n%s", env.Program, c.Usage, strings.TrimSpace(long), fs.FlagUsages())
	}
	return fs
}

// parseFlags parses args; a bad flag is a usage error, --help prints the
// usage (pflag calls fs.Usage) and returns pflag.ErrHelp.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	return nil
}
