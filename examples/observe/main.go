// Observe shows what dlock's locks are doing, as an operator sees it: workers contend for a
// few locks while the process serves their metrics (extra/prometheus) on /metrics, for
// Prometheus to scrape and the dashboard of extra/prometheus to show.
//
// Workers (goroutines, spread over --procs dlock Clients, as separate processes would
// be) take one of --locks locks, the first ones more often than the others, hold it for
// about --hold, and release it; every fourth time they call TryLock instead, and give up
// a Lock that waits longer than --patience. At the end the example prints, for each
// lock, what the metrics say: acquisitions, refusals, give-ups, mean wait and mean hold.
//
// Run it from the repository root, and look at http://127.0.0.1:9464/metrics:
//
//	go run ./examples/observe                 # until Ctrl-C
//	go run ./examples/observe --for 10s --workers 16 --locks 5
//
// Redis is --redis, else $DLOCK_REDIS, else redis://127.0.0.1:6379, else (when nothing
// answers there) an embedded Redis; --redis embedded asks for that one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	dlockprom "github.com/seed51c676c8/dlock/extra/prometheus"

	"github.com/seed51c676c8/dlock/examples/internal/cli"
	"github.com/seed51c676c8/dlock/examples/internal/exredis"
)

func main() { cli.Main("observe", run) }

// options are the workload's flags.
type options struct {
	procs, workers, locks int
	hold, patience        time.Duration
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("observe", flag.ContinueOnError)
	redisURL := exredis.Flag(fs)
	listen := fs.String("listen", "127.0.0.1:9464", "`address` to serve /metrics on (port 0: any free port)")
	span := fs.Duration("for", 0, "how long to run (0: until interrupted)")
	var o options
	fs.IntVar(&o.procs, "procs", 2, "dlock Clients, as separate processes would have")
	fs.IntVar(&o.workers, "workers", 8, "workers, spread over the Clients")
	fs.IntVar(&o.locks, "locks", 3, "locks the workers contend for")
	fs.DurationVar(&o.hold, "hold", 20*time.Millisecond, "how long a worker holds a lock, on average")
	fs.DurationVar(&o.patience, "patience", 500*time.Millisecond, "how long a Lock waits before it gives up")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if o.procs < 1 || o.workers < 1 || o.locks < 1 || o.hold <= 0 || o.patience <= 0 || *span < 0 {
		return errors.New("--procs, --workers and --locks must be at least 1, --hold and --patience positive, --for not negative")
	}

	srv, err := exredis.Open(ctx, *redisURL)
	if err != nil {
		return err
	}
	defer srv.Close()
	metrics, err := dlockprom.New()
	if err != nil {
		return err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics)
	stop, err := serve(*listen, registry, stdout)
	if err != nil {
		return err
	}
	defer stop()

	fmt.Fprintf(stdout, "%d workers on %d Clients contend for %d locks. Redis: %s\n", o.workers, o.procs, o.locks, srv.Desc)
	if *span > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *span)
		defer cancel()
	} else {
		fmt.Fprintf(stdout, "Ctrl-C ends it.\n")
	}
	if err := work(ctx, srv, metrics, o); err != nil {
		return err
	}
	return report(stdout, registry)
}

// serve serves registry's metrics on /metrics at addr, and says where. stop shuts the
// server down.
func serve(addr string, registry *prometheus.Registry, stdout io.Writer) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serving the metrics: %w (give another --listen address)", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = server.Serve(ln) // returns when stop shuts it down
	}()
	fmt.Fprintf(stdout, "Metrics: http://%s/metrics\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(ctx)
		<-done
	}, nil
}
