//go:build !linux

package main

import (
	"context"
	"errors"
	"log/slog"
)

func run(context.Context, options, *slog.Logger) error {
	return errors.New("kg runs on Linux only")
}
