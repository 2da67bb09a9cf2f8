package dialect_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/dialect/dialecttest"
	"github.com/dbqueue/dbqueue/internal/sqldb"
	"github.com/dbqueue/dbqueue/migrations"
)

// variant is one way to reach a database that changes what its driver or
// server reports: each runs the whole conformance suite.
type variant struct {
	name     string
	dialect  dbqueue.Dialect
	dsnQuery string // added to the test database's DSN
	setup    []string
	// server, when set, forces the MySQL dialect's view of its server
	// instead of asking it (the RETURNING path, MySQL 8's counted ids).
	server *dialect.MySQLServer
}

var variants = []variant{
	{name: "postgres", dialect: dbqueue.Postgres},
	// ids drawn 7 apart from 1000: Insert must return what RETURNING says.
	{name: "postgres/sequence-step-7", dialect: dbqueue.Postgres, setup: []string{"ALTER SEQUENCE jobs_id_seq INCREMENT BY 7 RESTART WITH 1000"}},
	// A session zone far from UTC, with a half hour in it.
	{name: "postgres/timezone", dialect: dbqueue.Postgres, dsnQuery: "timezone=Pacific/Chatham"},
	{name: "mysql", dialect: dbqueue.MySQL},
	// RowsAffected counts matched rows, not changed ones.
	{name: "mysql/clientFoundRows", dialect: dbqueue.MySQL, dsnQuery: "clientFoundRows=true"},
	// Timestamps scanned as time.Time in the host's zone, in a session
	// whose time_zone is not UTC: failed_at must still read as UTC.
	{name: "mysql/parseTime-loc-Local", dialect: dbqueue.MySQL, dsnQuery: "parseTime=true&loc=Local&time_zone=%27%2B05%3A30%27"},
	// Galera and Group Replication set the step above 1 on every session:
	// ids counted from LAST_INSERT_ID must follow it.
	{name: "mysql/auto-increment-step-7", dialect: dbqueue.MySQL, dsnQuery: "auto_increment_increment=7&auto_increment_offset=3"},
	// MariaDB with innodb_autoinc_lock_mode 2 reads ids back with RETURNING.
	{name: "mysql/returning-ids", dialect: dbqueue.MySQL, dsnQuery: "auto_increment_increment=7&auto_increment_offset=3",
		server: &dialect.MySQLServer{MariaDB: true, IDStep: 7}},
	// MySQL 8's statements (no DELETE … RETURNING), run on this server.
	{name: "mysql/mysql8-statements", dialect: dbqueue.MySQL, dsnQuery: "auto_increment_increment=7&auto_increment_offset=3",
		server: &dialect.MySQLServer{IDStep: 7, ConsecutiveIDs: true}},
	{name: "sqlite", dialect: dbqueue.SQLite},
}

// TestConformance runs dialecttest's suite on every database and variant.
func TestConformance(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			dialecttest.Run(t, func(t *testing.T) dialecttest.Harness { return v.open(t) })
		})
	}
}

func (v variant) open(t *testing.T) dialecttest.Harness {
	ctx := context.Background()
	db := dbtest.New(t, v.dialect)
	for _, stmt := range v.setup {
		db.Exec(t, stmt)
	}
	dsn := db.DSN
	if v.dsnQuery != "" {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + v.dsnQuery
	}
	opener, ok := sqldb.OpenerFor(dsn)
	if !ok {
		t.Fatalf("no driver for %s", dsn)
	}
	pool, err := opener.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	own := func(t *testing.T, tables dialect.Tables) dialect.Dialect {
		t.Helper()
		err := migrations.Up(ctx, db.SQL, v.dialect, migrations.WithLogger(slog.New(slog.DiscardHandler)),
			migrations.WithTables(migrations.Tables{Jobs: tables.Jobs, Failed: tables.Failed, Schema: tables.Schema}))
		if err != nil {
			t.Fatalf("migrate %s: %v", tables.Jobs, err)
		}
		return v.dialectOn(t, pool, tables)
	}
	return dialecttest.Harness{Dialect: v.dialectOn(t, pool, dialect.DefaultTables), DB: pool, RowLocks: v.dialect != dbqueue.SQLite, Own: own}
}

// dialectOn opens v's dialect over tables on pool, as the queue opens it,
// or with v's server forced.
func (v variant) dialectOn(t *testing.T, pool sqldb.DB, tables dialect.Tables) dialect.Dialect {
	t.Helper()
	d, err := dialect.Open(context.Background(), string(v.dialect), pool, tables)
	if v.server != nil && err == nil {
		d, err = dialect.For(string(v.dialect), tables, *v.server)
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}
