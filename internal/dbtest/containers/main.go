// Command containers starts throwaway PostgreSQL and MySQL servers in Docker
// for dbqueue's tests, prints their DSNs as one JSON line on stdout, and
// keeps them until its stdin closes or it gets SIGINT/SIGTERM, then
// terminates them.
//
// It is its own module so that testcontainers-go and its dependencies stay
// out of dbqueue's go.mod and go.sum, and so out of every importer's.
// internal/dbtest runs it with `go run .` from this directory when no
// DBQUEUE_TEST_*_DSN variable names a server and a Docker engine seems to
// exist:
//
//	go run . -postgres -mysql
//	{"postgres":"postgres://…","mysql":"root:test@tcp(…)/test"}
//
// A server that cannot be started is reported in the JSON ("postgres_error",
// "mysql_error") instead of its DSN; the exit status is 1 when none started.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// Servers is the line printed on stdout.
type Servers struct {
	Postgres      string `json:"postgres,omitempty"`
	PostgresError string `json:"postgres_error,omitempty"`
	MySQL         string `json:"mysql,omitempty"`
	MySQLError    string `json:"mysql_error,omitempty"`
}

func main() {
	pg := flag.Bool("postgres", false, "start a PostgreSQL server")
	my := flag.Bool("mysql", false, "start a MySQL server")
	flag.Parse()
	if !*pg && !*my {
		fmt.Fprintln(os.Stderr, "containers: nothing to start: pass -postgres, -mysql or both")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var (
		out     Servers
		started []testcontainers.Container
	)
	if err := dockerHealthy(ctx); err != nil {
		msg := fmt.Sprintf("no Docker engine answers: %v", err)
		out.PostgresError, out.MySQLError = msg, msg
	} else {
		if *pg {
			c, dsn, err := startPostgres(ctx)
			if c != nil {
				started = append(started, c)
			}
			out.Postgres, out.PostgresError = dsn, errString(err)
		}
		if *my {
			c, dsn, err := startMySQL(ctx)
			if c != nil {
				started = append(started, c)
			}
			out.MySQL, out.MySQLError = dsn, errString(err)
		}
	}
	if !*pg {
		out.PostgresError = ""
	}
	if !*my {
		out.MySQLError = ""
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))

	if len(started) > 0 {
		// Wait for the test binary to finish: it holds our stdin open for
		// its lifetime, and the pipe closes when it exits however it exits.
		closed := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(closed) }()
		select {
		case <-closed:
		case <-ctx.Done():
		}
	}
	for _, c := range started {
		tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := c.Terminate(tctx); err != nil {
			fmt.Fprintf(os.Stderr, "containers: terminate %s: %v (the testcontainers reaper removes it)\n", c.GetContainerID(), err)
		}
		cancel()
	}
	if out.Postgres == "" && out.MySQL == "" {
		os.Exit(1)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func dockerHealthy(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	provider, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return err
	}
	defer provider.Close()
	return provider.Health(ctx)
}

func startPostgres(ctx context.Context) (testcontainers.Container, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, err := tcpostgres.Run(ctx, "postgres:16-alpine",
		tcpostgres.WithDatabase("test"), tcpostgres.BasicWaitStrategies())
	if c == nil { // a typed nil would make a non-nil Container
		return nil, "", fmt.Errorf("start postgres:16-alpine: %w", err)
	}
	if err != nil {
		return c, "", fmt.Errorf("start postgres:16-alpine: %w", err)
	}
	dsn, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		return c, "", fmt.Errorf("postgres DSN: %w", err)
	}
	return c, dsn, nil
}

func startMySQL(ctx context.Context) (testcontainers.Container, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, err := tcmysql.Run(ctx, "mysql:8.4", tcmysql.WithDatabase("test"),
		tcmysql.WithUsername("root"), tcmysql.WithPassword("test"))
	if c == nil { // a typed nil would make a non-nil Container
		return nil, "", fmt.Errorf("start mysql:8.4: %w", err)
	}
	if err != nil {
		return c, "", fmt.Errorf("start mysql:8.4: %w", err)
	}
	dsn, err := c.ConnectionString(ctx)
	if err != nil {
		return c, "", fmt.Errorf("mysql DSN: %w", err)
	}
	return c, strings.TrimSpace(dsn), nil
}
