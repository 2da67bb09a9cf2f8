package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
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
	var hosts hostList
	fs.Var(&hosts, "allow-host", "a host name the dashboard is opened by, besides localhost and the -addr host (repeat, or comma-separate); requests for any other name are refused, against DNS rebinding")
	remoteActions := fs.Bool("allow-remote-actions", false, "allow actions with no login on an -addr beyond this machine (prints a warning); without it such an -addr needs -read-only")
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
	allowed, err := listenHosts(*addr)
	if err != nil {
		return err
	}
	h, err := dashboard.New(q, dashboard.Options{ReadOnly: *readOnly, Interval: *every, Queues: named,
		AllowedHosts: append(allowed, hosts...)})
	if err != nil {
		return usageError{err.Error()}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("dashboard: listen on %s: %w", *addr, err)
	}
	defer ln.Close()
	if ip := ln.Addr().(*net.TCPAddr).IP; !*readOnly && !ip.IsLoopback() {
		if !*remoteActions {
			return usageError{fmt.Sprintf("dashboard: -addr %s listens beyond this machine, and the dashboard has no login: "+
				"anyone who can reach it could pause queues, cancel jobs and delete failed jobs. "+
				"Add -read-only, or listen on 127.0.0.1 and reach it through an SSH tunnel (ssh -L 8080:127.0.0.1:8080 host), "+
				"or put it behind a proxy that authenticates and add -allow-remote-actions", *addr)}
		}
		fmt.Fprintf(c.errOut, "WARNING: the dashboard on %s has actions and NO LOGIN, and listens beyond this machine: "+
			"anyone who can reach it can pause queues, cancel jobs and delete failed jobs (-allow-remote-actions)\n", ln.Addr())
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	mode := ""
	if *readOnly {
		mode = " (read-only)"
	}
	// An address of every interface is no name to open: [::] would be
	// refused by the host check.
	where := ln.Addr().String()
	if tcp := ln.Addr().(*net.TCPAddr); tcp.IP.IsUnspecified() {
		where = net.JoinHostPort("localhost", strconv.Itoa(tcp.Port))
	}
	fmt.Fprintf(c.out, "dashboard%s on http://%s/ — no login: keep it on localhost or behind your own authentication; Ctrl-C stops it\n", mode, where)
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

// hostList is the repeatable -allow-host flag.
type hostList []string

func (l *hostList) String() string { return strings.Join(*l, ",") }
func (l *hostList) Set(s string) error {
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			*l = append(*l, h)
		}
	}
	return nil
}

// listenHosts are the host names the dashboard serves because -addr names
// them: its host, or, for an address of every interface (":8080",
// "0.0.0.0:8080"), the addresses of this machine's interfaces, so that it
// can be opened by any of them. An address cannot be rebound the way a
// name can; other names need -allow-host.
func listenHosts(addr string) ([]string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usageError{fmt.Sprintf("dashboard: -addr %q: want host:port, or :port for every interface: %v", addr, err)}
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return []string{host}, nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("dashboard: list the interface addresses to serve on -addr %s: %w", addr, err)
	}
	var hosts []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			hosts = append(hosts, n.IP.String())
		}
	}
	return hosts, nil
}
