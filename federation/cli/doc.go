// Package cli holds kilofed's federation commands: join, unjoin and status.
// They are kgctl.Commands, so that kilofed lists them beside the mesh's
// graph, showconf and connect.
package cli
