package kgctl

import (
	"context"
	"fmt"
)

// MeshCommands returns the mesh commands: graph, showconf, connect and
// rotate-keys.
func MeshCommands() []Command {
	return []Command{graphCommand(), showconfCommand(), connectCommand(), rotateKeysCommand()}
}

// computeMesh opens the cluster and computes its mesh as the agents do.
func computeMesh(ctx context.Context, env *Env, m *meshFlagSet) (*Mesh, error) {
	f, err := m.flags()
	if err != nil {
		return nil, err
	}
	src, err := env.source(ctx, m.backend)
	if err != nil {
		return nil, err
	}
	mesh, err := Compute(src.Snapshot(), f)
	if err != nil {
		return nil, err
	}
	m.printNotes(env, mesh)
	return mesh, nil
}

func graphCommand() Command {
	c := Command{
		Name:    "graph",
		Usage:   "graph [-o dot|svg|png] [flags]",
		Summary: "draw the mesh as the agents compute it (Graphviz)",
	}
	c.Run = func(ctx context.Context, env *Env, args []string) error {
		var m meshFlagSet
		var format string
		fs := newFlagSet(env, c, `
Print the mesh as a Graphviz graph: one cluster per location with its nodes
(leaders with a double border), the WireGuard tunnels, the Peers, and the
nodes and Peers left out of the mesh. Draw it with
  `+env.Program+` graph | dot -Tsvg > mesh-topology.svg
or let `+env.Program+` call dot with -o svg or -o png.`)
		fs.StringVarP(&format, "output", "o", GraphDOT, "dot, svg or png (svg and png need graphviz)")
		m.register(fs)
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("%w: graph takes no arguments, got %q", ErrUsage, fs.Args())
		}
		switch format {
		case GraphDOT, GraphSVG, GraphPNG:
		default:
			return fmt.Errorf("%w: -o %q: use dot, svg or png", ErrUsage, format)
		}
		mesh, err := computeMesh(ctx, env, &m)
		if err != nil {
			return err
		}
		return mesh.WriteGraph(ctx, env.Stdout, GraphOptions{Format: format})
	}
	return c
}
