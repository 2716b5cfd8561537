// Command tiered is the tiered binary. The commands live in internal/app/cli;
// main only connects them to os.Args, the standard streams and signals.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/tiered/tiered/internal/app/cli"
)

func main() {
	os.Exit(run())
}

func run() int {
	// SIGINT/SIGTERM cancel the context: consume --follow stops and exits 0.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}
