package kgctl

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
)

func rotateKeysCommand() Command {
	c := Command{
		Name:    "rotate-keys",
		Usage:   "rotate-keys (--node NAME... | --all) [--timeout 1m]",
		Summary: "give nodes new WireGuard keys, published and followed by the mesh",
	}
	c.Run = func(ctx context.Context, env *Env, args []string) error {
		var o RotateOptions
		fs := newFlagSet(env, c, `
Ask the agents of the named nodes (or of every node with --all) for new
WireGuard keys, and wait until each reports that it published its new key.
The other locations, and the clusters joined with kilofed join, follow the
published keys with no other step. Each node's request is the annotation
kilo.squat.ai/rotate-key, written with your credentials (an agent may not
write it); its agent answers in kilo.squat.ai/key-rotated.

Deleting a node's key file and restarting its agent still rotates its key.`)
		fs.StringSliceVar(&o.Nodes, "node", nil, "node whose key to rotate (repeatable, or comma-separated)")
		fs.BoolVar(&o.All, "all", false, "rotate the keys of every node with a published key")
		fs.DurationVar(&o.Timeout, "timeout", time.Minute, "how long to wait for the agents' reports")
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("%w: rotate-keys takes no arguments, got %q: use --node NAME", ErrUsage, fs.Args())
		}
		if o.All == (len(o.Nodes) > 0) {
			return fmt.Errorf("%w: pass --node NAME (repeatable) or --all", ErrUsage)
		}
		rc, err := RESTConfig(env.Kubeconfig, env.Context)
		if err != nil {
			return err
		}
		kube, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return fmt.Errorf("kubernetes client: %w", err)
		}
		_, err = RotateKeys(ctx, kube, o, env.Stdout)
		return err
	}
	return c
}
