package dbqpgx

import (
	"context"
	"database/sql/driver"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// The errors a failover shows (see internal/scaletest/failover): those
// where the work certainly did not happen are retried, a connection lost
// after a statement was sent is not.
func TestClassifyFailoverErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A port nobody listens on: connection refused, inside a ConnectError.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	_, refused := pgconn.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable&connect_timeout=5", port))
	if refused == nil {
		t.Fatal("connected to a closed port")
	}

	cases := []struct {
		name string
		err  error
		want sqldb.Class
	}{
		{"connection refused", fmt.Errorf("push: %w", refused), sqldb.Retryable},
		{"read-only standby", &pgconn.PgError{Code: "25006"}, sqldb.Retryable},
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, sqldb.Retryable},
		{"database/sql bad conn", fmt.Errorf("x: %w", driver.ErrBadConn), sqldb.Retryable},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, sqldb.Other},
		{"lost mid-statement", io.ErrUnexpectedEOF, sqldb.Other},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, sqldb.Retryable},
	}
	if dsn := os.Getenv("DBQUEUE_TEST_POSTGRES_DSN"); dsn != "" {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/dbqueue_no_such_database"
		_, missing := pgconn.Connect(ctx, u.String())
		if missing == nil {
			t.Fatal("connected to a database that does not exist")
		}
		cases = append(cases, struct {
			name string
			err  error
			want sqldb.Class
		}{"no such database", missing, sqldb.Other})
	}
	for _, c := range cases {
		if got := sqldb.Classify(c.err); got != c.want {
			t.Errorf("%s (%v): class %d, want %d", c.name, c.err, got, c.want)
		}
	}
}

// A closed pool cannot succeed however often it is retried: its error is
// Closed, so the worker gives up at once instead of backing off.
func TestClassifyClosedPool(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/x?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	_, err = pool.Exec(context.Background(), "SELECT 1")
	if err == nil {
		t.Fatal("a closed pool ran a statement")
	}
	if got := sqldb.Classify(fmt.Errorf("reserve: %w", err)); got != sqldb.Closed {
		t.Fatalf("Classify(%v) = %v, want Closed", err, got)
	}
}
