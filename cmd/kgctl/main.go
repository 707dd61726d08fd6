// Command kgctl is kilofed's mesh CLI under Kilo's CLI name, so that Kilo's
// documented commands work verbatim:
//
//	kgctl graph | dot -Tsvg > mesh-topology.svg
//	kgctl showconf node master-eu-west
//	kgctl showconf peer admin-workstation
//	kgctl connect seb-laptop --private-key-file dev-private.key
//
// It runs the same commands as `kilofed graph|showconf|connect|rotate-keys`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kilofed/kilofed/mesh/kgctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := kgctl.Main(ctx, kgctl.NewEnv("kgctl"), kgctl.MeshCommands(), os.Args[1:])
	stop()
	os.Exit(code)
}
