package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/dbqueue/dbqueue/dashboard"
)

// dashboard serves the web dashboard (package dashboard) until interrupted.
func (c *cli) dashboard(ctx context.Context, args []string) error {
	fs := newFlagSet(c, "dashboard")
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (host:port; :8080 for every interface)")
	readOnly := fs.Bool("read-only", false, "show the queues but refuse every action")
	every := fs.Duration("interval", dashboard.DefaultInterval, "how often open pages refresh, and the throughput sample spacing")
	var named queueList
	fs.Var(&named, "queue", "a queue to show even while it holds no jobs (repeat, or comma-separate)")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs("dashboard", rest); err != nil {
		return err
	}
	q, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	h, err := dashboard.New(q, dashboard.Options{ReadOnly: *readOnly, Interval: *every, Queues: named})
	if err != nil {
		return usageError{err.Error()}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("dashboard: listen on %s: %w", *addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	mode := ""
	if *readOnly {
		mode = " (read-only)"
	}
	fmt.Fprintf(c.out, "dashboard%s on http://%s/ — no login: keep it on localhost or behind your own authentication; Ctrl-C stops it\n", mode, ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("dashboard: %w", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("dashboard: shut down: %w", err)
	}
	return nil
}
