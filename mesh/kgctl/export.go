package kgctl

import "github.com/spf13/pflag"

// NewFlagSet returns the flag set of a command defined outside this package
// (kilofed's federation commands): the global flags, and a --help that
// prints c's usage, long and the flags on env.Stdout.
func NewFlagSet(env *Env, c Command, long string) *pflag.FlagSet { return newFlagSet(env, c, long) }

// ParseFlags parses args into fs: a bad flag is an ErrUsage error, --help
// returns pflag.ErrHelp.
func ParseFlags(fs *pflag.FlagSet, args []string) error { return parseFlags(fs, args) }
