package dbqpgx_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/driver/dbqpgx"
	"github.com/dbqueue/dbqueue/internal/dbtest"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// TestQueryAfterSharesOneTransaction: what the first statement of a
// QueryAfter sets for its transaction holds for the query, and not after
// it on the same connection, in every pgx exec mode a pool may use (a
// transaction pooler needs exec or simple_protocol). PostgreSQL's claims
// rely on it for their planner settings.
func TestQueryAfterSharesOneTransaction(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t, dbqueue.Postgres)
	for _, mode := range dbtest.PgxExecModes {
		t.Run(mode, func(t *testing.T) {
			dsn := dbtest.WithQuery(db.DSN, "default_query_exec_mode", mode)
			// One connection: "after" reads the one the batch ran on.
			pool, err := pgxpool.New(ctx, dbtest.WithQuery(dsn, "pool_max_conns", "1"))
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			p, ok := dbqpgx.New(pool).Conn().DB.(sqldb.Pipeliner)
			if !ok {
				t.Fatal("a pgx pool cannot pipeline")
			}
			for range 2 { // the second time from pgx's statement cache
				rows, err := p.QueryAfter(ctx, "SELECT set_config('enable_seqscan', 'off', true)",
					"SELECT current_setting('enable_seqscan'), $1::int", 7)
				if err != nil {
					t.Fatal(err)
				}
				var during string
				var seven int
				n := 0
				for rows.Next() {
					if err := rows.Scan(&during, &seven); err != nil {
						t.Fatal(err)
					}
					n++
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				rows.Close()
				var after string
				if err := pool.QueryRow(ctx, "SELECT current_setting('enable_seqscan')").Scan(&after); err != nil {
					t.Fatal(err)
				}
				if n != 1 || during != "off" || seven != 7 || after != "on" {
					t.Fatalf("%d rows; during the query enable_seqscan = %q (want off), $1 = %d (want 7); after it %q (want on)", n, during, seven, after)
				}
			}
			// An error in the query is the rows' error, and the connection
			// is usable after it.
			rows, err := p.QueryAfter(ctx, "SELECT 1", "SELECT 1/0")
			if err == nil {
				for rows.Next() {
				}
				err = rows.Err()
				rows.Close()
			}
			if err == nil {
				t.Fatal("division by zero went unreported")
			}
			var one int
			if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("the connection after a failed batch: %d, %v", one, err)
			}
		})
	}
}
