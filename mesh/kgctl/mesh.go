package kgctl

import (
	"errors"
	"fmt"

	"github.com/kilofed/kilofed/mesh/topology"
)

// Mesh is a snapshot and the topology the agents compute from it.
type Mesh struct {
	// Snapshot is the cluster state the topology was computed from.
	Snapshot Snapshot
	// Topology is topology.New's result, with the agents' options.
	Topology *topology.Topology
	// Notes say which options were inferred from the agents, and which
	// flags contradict them; commands print them on stderr.
	Notes []string
}

// Compute computes the mesh of snapshot s with topology.New, the agents'
// function, and the options of f completed from what the agents publish
// (see MeshFlags.Options).
func Compute(s Snapshot, f MeshFlags) (*Mesh, error) {
	opts, notes, err := f.Options(s)
	if err != nil {
		return nil, err
	}
	t, err := topology.New(s.Nodes, s.Peers, opts)
	if err != nil {
		return nil, fmt.Errorf("compute the mesh: %w", err)
	}
	return &Mesh{Snapshot: s, Topology: t, Notes: notes}, nil
}

// explain adds to err, an error of the topology about a node or peer, the
// backend's reason when the object could not be read at all.
func (m *Mesh) explain(kind, name string, err error) error {
	if !errors.Is(err, topology.ErrUnknownNode) && !errors.Is(err, topology.ErrUnknownPeer) {
		return err
	}
	if p := m.Snapshot.problemOf(kind, name); p != nil {
		sentinel := topology.ErrUnknownNode
		if kind == topology.KindPeer {
			sentinel = topology.ErrUnknownPeer
		}
		return fmt.Errorf("%w; the mesh leaves it out until it is fixed (%w)", p, sentinel)
	}
	return err
}
