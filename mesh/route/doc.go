// Package route holds the routes and policy rules the mesh wants, and a
// Router that makes the kernel's tables match them through netlink, touching
// only what the agent owns.
package route
