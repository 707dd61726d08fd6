// Command kilofed is kilofed's CLI: the mesh commands (graph, showconf,
// connect, rotate-keys) and, as they are added, the federation commands (join, unjoin,
// status, verify, bench). Each subcommand is a kgctl.Command; add one by
// appending it to commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kilofed/kilofed/federation/cli"
	"github.com/kilofed/kilofed/mesh/kgctl"
)

// commands are kilofed's subcommands, in the order help lists them.
func commands() []kgctl.Command {
	return append(kgctl.MeshCommands(), cli.Commands()...)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := kgctl.Main(ctx, kgctl.NewEnv("kilofed"), commands(), os.Args[1:])
	stop()
	os.Exit(code)
}
