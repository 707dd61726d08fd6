package route

import (
	"context"
	"log/slog"

	"github.com/kilofed/kilofed/mesh/topology"
)

// Router makes the kernel's routes and policy rules match a desired set,
// among those it owns. Its methods are safe to call again with the same
// input.
type Router interface {
	// Set makes the owned routes and rules exactly routes and rules:
	// missing ones are added, changed routes replaced, stale ones deleted;
	// routes and rules owned by others are never touched.
	Set(ctx context.Context, routes []topology.Route, rules []topology.Rule) error
	// Close deletes every route and rule the Router owns.
	Close(ctx context.Context) error
}

// DefaultProtocol is the rtnetlink protocol number ('K', 75) that marks the
// routes and rules kilofed owns; ip-route(8) shows it as "proto 75".
const DefaultProtocol = 0x4b

// RouterOptions configure NewRouter.
type RouterOptions struct {
	// Protocol marks owned routes and rules; zero means DefaultProtocol.
	// It must differ from the numbers the kernel, DHCP clients and routing
	// daemons use (0-4 are reserved here).
	Protocol int
	// Logger receives one line per change; nil discards.
	Logger *slog.Logger
}
