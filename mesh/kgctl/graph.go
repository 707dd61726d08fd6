package kgctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// Graph output formats.
const (
	// GraphDOT is Graphviz's source language, as Kilo's `kgctl graph` prints.
	GraphDOT = "dot"
	// GraphSVG is an SVG picture drawn by Graphviz's dot.
	GraphSVG = "svg"
	// GraphPNG is a PNG picture drawn by Graphviz's dot.
	GraphPNG = "png"
)

// ErrNoGraphviz is returned by WriteGraph for a picture format when
// Graphviz's dot command is not installed.
var ErrNoGraphviz = errors.New("graphviz's dot command is not installed")

// ErrInvalidFormat is returned for an unknown output format.
var ErrInvalidFormat = errors.New("invalid output format")

// GraphOptions say how WriteGraph draws the mesh.
type GraphOptions struct {
	// Format is GraphDOT (the default), GraphSVG or GraphPNG.
	Format string
	// Dot is the path of Graphviz's dot command for pictures; empty looks
	// it up in PATH.
	Dot string
}

// WriteGraph writes the mesh as the agents compute it: the DOT text of
// topology.DOT, or a picture that Graphviz's dot draws from it.
func (m *Mesh) WriteGraph(ctx context.Context, w io.Writer, o GraphOptions) error {
	dot := m.Topology.DOT()
	switch o.Format {
	case "", GraphDOT:
		_, err := io.WriteString(w, dot)
		return err
	case GraphSVG, GraphPNG:
	default:
		return fmt.Errorf("%w %q for graph: use dot, svg or png", ErrInvalidFormat, o.Format)
	}
	bin := o.Dot
	if bin == "" {
		p, err := exec.LookPath("dot")
		if err != nil {
			return fmt.Errorf("%w: install graphviz, or use -o dot and pipe to dot (kilofed graph | dot -T%s > mesh.%s)",
				ErrNoGraphviz, o.Format, o.Format)
		}
		bin = p
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "-T"+o.Format)
	cmd.Stdin = strings.NewReader(dot)
	cmd.Stdout = w
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("draw the graph with %s -T%s: %w: %s", bin, o.Format, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
