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
	// SIGINT/SIGTERM cancel the context: consume --follow stops and exits 0,
	// a daemon shuts down gracefully. Then they are no longer caught, so a
	// second one ends the process at once (killed by the signal: status 130
	// or 143 in a shell), not after shutdown_timeout.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	return cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}
