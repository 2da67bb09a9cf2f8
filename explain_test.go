package dbqueue_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/internal/dbtest"
)

// claimArms are the WHERE clauses of the claim's two SELECTs, copied from
// newStatements in statements.go (NOW stands for the dialect's clock).
// Keep them in sync: TestClaimSQLInSync fails when they drift.
var claimArms = map[string]string{
	// Reservations older than retry_after (their holder died); params:
	// queue, retry_after, n.
	"expired": "queue = ? AND reserved_at IS NOT NULL AND reserved_at <= NOW - ? ORDER BY reserved_at LIMIT ?",
	// Due, unreserved jobs; params: queue, n.
	"ready": "queue = ? AND reserved_at IS NULL AND available_at <= NOW ORDER BY available_at, id LIMIT ?",
}

// postgresCursorArm is PostgreSQL's claim from the queue's cursor
// (internal/dialect/postgres_claim.go): ready rows past (available_at, id);
// params: queue, the cursor's available_at and id, n.
const postgresCursorArm = "ready from the cursor"

var postgresArms = map[string]string{
	postgresCursorArm: "queue = ? AND reserved_at IS NULL AND available_at <= NOW AND (available_at, id) > (?, ?) ORDER BY available_at, id LIMIT ?",
}

// mysqlArms are MySQL's two candidate reads (internal/dialect/mysql.go):
// "ready" from the queue's cursor, "expired" from the queue's start (which
// is where expired reservations are found). Both read without locks; the
// rows are then locked by primary key.
var mysqlArms = map[string]string{
	"ready":   "SELECT id, available_at FROM jobs FORCE INDEX (jobs_queue_available_idx) WHERE queue = ? AND (available_at > ? OR (available_at = ? AND id > ?)) AND available_at <= NOW ORDER BY available_at, id LIMIT ?",
	"expired": "SELECT id, available_at FROM jobs FORCE INDEX (jobs_queue_available_idx) WHERE queue = ? AND available_at <= NOW AND (reserved_at IS NULL OR reserved_at <= NOW - ?) ORDER BY available_at, id LIMIT ?",
}

// armSelect is one arm of the claim as dialect d runs it, with '?'
// placeholders.
func armSelect(d dbqueue.Dialect, arm string) string {
	where := claimArms[arm]
	if d == dbqueue.Postgres && where == "" {
		where = postgresArms[arm]
	}
	where = strings.ReplaceAll(where, "NOW", dbqueue.NowSQL(d))
	switch d {
	case dbqueue.MySQL:
		return strings.ReplaceAll(mysqlArms[arm], "NOW", dbqueue.NowSQL(d))
	case dbqueue.Postgres:
		return "SELECT id FROM jobs WHERE " + where + " FOR UPDATE SKIP LOCKED"
	default:
		return "SELECT id FROM jobs WHERE " + where
	}
}

// armLiteral is armSelect with literal values: queue "bench", retry_after
// 90s, n 10 (and MySQL's cursor at the start).
func armLiteral(d dbqueue.Dialect, arm string) string {
	values := []string{"'bench'", "90", "10"}
	switch {
	case arm == "ready" && d == dbqueue.MySQL:
		values = []string{"'bench'", "0", "0", "0", "10"}
	case arm == "ready":
		values = []string{"'bench'", "10"}
	}
	query := armSelect(d, arm)
	for _, v := range values {
		query = strings.Replace(query, "?", v, 1)
	}
	return query
}

var dollarParam = regexp.MustCompile(`\$\d+`)

func TestClaimSQLInSync(t *testing.T) {
	for _, tc := range []struct {
		d       dbqueue.Dialect
		mariaDB bool
	}{{dbqueue.Postgres, false}, {dbqueue.SQLite, false}, {dbqueue.MySQL, false}, {dbqueue.MySQL, true}} {
		real := dollarParam.ReplaceAllString(dbqueue.StatementsText(tc.d, tc.mariaDB), "?")
		arms := slices.Collect(maps.Keys(claimArms))
		if tc.d == dbqueue.Postgres {
			arms = append(arms, postgresCursorArm)
		}
		for _, arm := range arms {
			if want := armSelect(tc.d, arm); !strings.Contains(real, want) {
				t.Errorf("the %s claim no longer runs this %s arm; update claimArms in explain_test.go:\n%s", tc.d, arm, want)
			}
		}
	}
}

const backlogPayload = `{"uuid":"00000000-0000-4000-8000-000000000000","displayName":"backlog","job":"backlog","maxTries":null,"maxExceptions":null,"failOnTimeout":false,"backoff":null,"timeout":null,"retryUntil":null,"data":null}`

// fillJobs inserts n jobs into queue with one set-based statement: due in
// availableIn seconds, and reserved now when reserved is set.
func fillJobs(tb testing.TB, db *dbtest.DB, queue string, n int, availableIn int64, reserved bool) {
	tb.Helper()
	if n == 0 {
		return
	}
	now := db.Now()
	reservedAt := "NULL"
	if reserved {
		reservedAt = now
	}
	cols := "INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) "
	row := fmt.Sprintf("SELECT ?, ?, 0, %s, %s + %d, %s", reservedAt, now, availableIn, now)
	recursive := fmt.Sprintf("WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < %d) ", n)
	var query string
	switch db.Dialect {
	case dbqueue.Postgres:
		query = cols + row + fmt.Sprintf(" FROM generate_series(1, %d)", n)
	case dbqueue.SQLite:
		query = cols + recursive + row + " FROM seq"
	case dbqueue.MySQL:
		if isMariaDB(tb, db) {
			// MariaDB's SEQUENCE engine: seq_1_to_N is a table of 1..N.
			query = cols + row + fmt.Sprintf(" FROM seq_1_to_%d", n)
			break
		}
		// MySQL 8 stops recursion at cte_max_recursion_depth (1000), a
		// session variable: pin one connection to set it.
		conn, err := db.SQL.Conn(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION cte_max_recursion_depth = %d", n+1)); err != nil {
			tb.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, cols+recursive+row+" FROM seq", queue, backlogPayload); err != nil {
			tb.Fatalf("fill %d jobs: %v", n, err)
		}
		return
	}
	if _, err := db.SQL.ExecContext(ctx, db.Dialect.Rebind(query), queue, backlogPayload); err != nil {
		tb.Fatalf("fill %d jobs: %v", n, err)
	}
}

func isMariaDB(tb testing.TB, db *dbtest.DB) bool {
	tb.Helper()
	var version string
	if err := db.SQL.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		tb.Fatal(err)
	}
	return strings.Contains(strings.ToLower(version), "mariadb")
}

// analyze refreshes the planner's statistics on jobs.
func analyze(tb testing.TB, db *dbtest.DB) {
	tb.Helper()
	stmt := map[dbqueue.Dialect]string{
		dbqueue.Postgres: "ANALYZE jobs",
		dbqueue.MySQL:    "ANALYZE TABLE jobs",
		dbqueue.SQLite:   "ANALYZE",
	}[db.Dialect]
	rows, err := db.SQL.QueryContext(ctx, stmt) // MySQL's ANALYZE TABLE returns a result set
	if err != nil {
		tb.Fatalf("%s: %v", stmt, err)
	}
	rows.Close()
}

// TestClaimPlanIgnoresDelayedBacklog: with 100,000 delayed jobs (and 1,000
// running ones) ahead of one ready job, each arm of the claim reads its own
// index and stops after n entries; nothing scans or sorts the backlog.
func TestClaimPlanIgnoresDelayedBacklog(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 100,000 rows per database")
	}
	const delayed, running = 100_000, 1_000
	dbtest.Each(t, func(t *testing.T, db *dbtest.DB) {
		q := db.Queue(t)
		fillJobs(t, db, "bench", delayed, 3600, false)
		fillJobs(t, db, "bench", running, 0, true)
		readyID := push(t, q, dbqueue.NewJob{Name: "ready", Queue: "bench"})
		var maxID int64
		if err := db.SQL.QueryRowContext(ctx, "SELECT MAX(id) FROM jobs").Scan(&maxID); err != nil || maxID != readyID {
			t.Fatalf("the ready job (id %d) is not behind the backlog (max id %d, %v)", readyID, maxID, err)
		}
		analyze(t, db)

		for _, arm := range []string{"ready", "expired"} {
			query := armLiteral(db.Dialect, arm)
			switch db.Dialect {
			case dbqueue.Postgres:
				checkPostgresPlan(t, db.SQL, arm, "EXPLAIN "+query, "EXPLAIN (FORMAT JSON) "+query)
			case dbqueue.MySQL:
				checkMySQLPlan(t, db.SQL, arm, query)
			case dbqueue.SQLite:
				checkSQLitePlan(t, db.SQL, arm, query)
			}
		}
		if db.Dialect == dbqueue.Postgres {
			checkPostgresGenericPlans(t, db)
		}

		jobs := reserve(t, q, 10, "bench")
		if len(jobs) != 1 || jobs[0].ID != readyID || jobs[0].Name() != "ready" {
			t.Fatalf("reserved %d jobs, want exactly the ready job %d", len(jobs), readyID)
		}
		s, err := q.Size(ctx, "bench")
		if err != nil {
			t.Fatal(err)
		}
		if s.Pending != 0 || s.Delayed != delayed || s.Reserved != running+1 {
			t.Fatalf("sizes %+v, want %d delayed and %d reserved", s, delayed, running+1)
		}
	})
}

// wantIndex is the index each arm must use, per dialect.
var wantIndex = map[dbqueue.Dialect]map[string]string{
	dbqueue.Postgres: {"ready": "jobs_queue_ready_idx", "expired": "jobs_queue_reserved_idx"},
	dbqueue.SQLite:   {"ready": "jobs_queue_ready_idx", "expired": "jobs_queue_reserved_idx"},
	dbqueue.MySQL:    {"ready": "jobs_queue_available_idx", "expired": "jobs_queue_available_idx"},
}

// pgNode is a node of PostgreSQL's JSON plan.
type pgNode struct {
	Type     string   `json:"Node Type"`
	Relation string   `json:"Relation Name"`
	Index    string   `json:"Index Name"`
	Plans    []pgNode `json:"Plans"`
	// With EXPLAIN (ANALYZE, BUFFERS):
	IndexCond  string `json:"Index Cond"`
	SharedHit  int    `json:"Shared Hit Blocks"`
	SharedRead int    `json:"Shared Read Blocks"`
}

func (n pgNode) walk(parent *pgNode, fn func(n, parent *pgNode)) {
	fn(&n, parent)
	for _, c := range n.Plans {
		c.walk(&n, fn)
	}
}

func isIndexScan(n *pgNode) bool {
	switch n.Type {
	case "Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Bitmap Index Scan":
		return true
	}
	return false
}

// checkPostgresPlan logs the text plan and checks the JSON one: the arm's
// index is used, no sequential scan of jobs, and nothing is sorted unless
// an index scan feeds it (the expired arm sorts only expired reservations).
func checkPostgresPlan(t *testing.T, db querier, arm, textQuery, jsonQuery string) {
	t.Helper()
	t.Logf("postgres %s arm:\n%s", arm, strings.Join(queryLines(t, db, textQuery), "\n"))
	raw := strings.Join(queryLines(t, db, jsonQuery), "")
	var plans []struct {
		Plan pgNode `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(raw), &plans); err != nil || len(plans) != 1 {
		t.Fatalf("JSON plan %s: %v", raw, err)
	}
	checkPostgresTree(t, arm, plans[0].Plan)
}

func checkPostgresTree(t *testing.T, arm string, root pgNode) {
	t.Helper()
	usesIndex := false
	root.walk(nil, func(n, parent *pgNode) {
		if n.Index == wantIndex[dbqueue.Postgres][arm] {
			usesIndex = true
		}
		if n.Type == "Seq Scan" && n.Relation == "jobs" {
			t.Errorf("%s arm: sequential scan of jobs", arm)
		}
		if strings.HasSuffix(n.Type, "Sort") {
			if arm == "ready" {
				t.Errorf("%s arm: %s node; the index should give the claim's order", arm, n.Type)
			}
			for _, c := range n.Plans {
				if !isIndexScan(&c) {
					t.Errorf("%s arm: %s above a %s, not an index scan", arm, n.Type, c.Type)
				}
			}
		}
	})
	if !usesIndex {
		t.Errorf("%s arm does not use %s", arm, wantIndex[dbqueue.Postgres][arm])
	}
}

// genericPlans is a connection of db's on which PostgreSQL plans every
// prepared statement without its parameter values, as its plan cache does
// once a statement has run a few times; it is closed when the test ends.
func genericPlans(t *testing.T, db *dbtest.DB) *sql.Conn {
	t.Helper()
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// genericPlan prepares stmt on conn (from genericPlans) as name and
// returns its plan for the parameter list args, "(…)".
func genericPlan(t *testing.T, conn *sql.Conn, name, stmt, args string) string {
	t.Helper()
	if _, err := conn.ExecContext(ctx, "PREPARE "+name+" AS "+stmt); err != nil {
		t.Fatal(err)
	}
	return strings.Join(queryLines(t, conn, "EXPLAIN EXECUTE "+name+args), "\n")
}

// checkPostgresGenericPlans checks the plans PostgreSQL caches once a
// prepared claim has run a few times (pgx prepares every statement): the
// generic plan, made without the parameter values, must pick the same
// indexes.
func checkPostgresGenericPlans(t *testing.T, db *dbtest.DB) {
	t.Helper()
	conn := genericPlans(t, db)
	for _, arm := range []string{"ready", "expired"} {
		args := "('bench', 90, 10)"
		if arm == "ready" {
			args = "('bench', 10)"
		}
		if _, err := conn.ExecContext(ctx, "PREPARE claim_"+arm+" AS "+db.Dialect.Rebind(armSelect(db.Dialect, arm))); err != nil {
			t.Fatal(err)
		}
		t.Logf("postgres %s arm, generic plan:\n%s", arm, strings.Join(queryLines(t, conn, "EXPLAIN EXECUTE claim_"+arm+args), "\n"))
		raw := strings.Join(queryLines(t, conn, "EXPLAIN (FORMAT JSON) EXECUTE claim_"+arm+args), "")
		var plans []struct {
			Plan pgNode `json:"Plan"`
		}
		if err := json.Unmarshal([]byte(raw), &plans); err != nil || len(plans) != 1 {
			t.Fatalf("JSON plan %s: %v", raw, err)
		}
		checkPostgresTree(t, arm+" (generic)", plans[0].Plan)
	}
}

// checkMySQLPlan: one range read of the claim's index, in the claim's order
// (no filesort): a sort would lock every row the range returns.
func checkMySQLPlan(t *testing.T, db querier, arm, query string) {
	t.Helper()
	plan := mysqlPlan(t, db, "EXPLAIN "+query)
	for _, r := range plan {
		t.Logf("mysql %s arm: table=%s type=%s key=%s rows=%s Extra=%q", arm, r["table"], r["type"], r["key"], r["rows"], r["extra"])
	}
	if len(plan) != 1 {
		t.Fatalf("%s arm: %d plan rows, want 1", arm, len(plan))
	}
	r := plan[0]
	if r["key"] != wantIndex[dbqueue.MySQL][arm] || r["type"] != "range" {
		t.Errorf("%s arm: %s read of key %q, want a range read of %s", arm, r["type"], r["key"], wantIndex[dbqueue.MySQL][arm])
	}
	if strings.Contains(r["extra"], "filesort") {
		t.Errorf("%s arm sorts (%s): the read would go through every due row of the queue, not stop after n; "+
			"the ORDER BY must follow the index order (queue, available_at, id)", arm, r["extra"])
	}
	if arm == "ready" && !strings.Contains(r["extra"], "Using index") {
		t.Errorf("%s arm reads rows (%s): the read from the cursor must come from the index alone", arm, r["extra"])
	}
}

// checkSQLitePlan: a SEARCH of the arm's partial index, no full SCAN of jobs
// and no temporary B-tree to sort.
func checkSQLitePlan(t *testing.T, db querier, arm, query string) {
	t.Helper()
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var details []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		details = append(details, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(details, "\n")
	t.Logf("sqlite %s arm:\n%s", arm, plan)
	if !regexp.MustCompile(`SEARCH jobs USING (COVERING )?INDEX ` + wantIndex[dbqueue.SQLite][arm] + ` `).MatchString(plan) {
		t.Errorf("%s arm does not search %s", arm, wantIndex[dbqueue.SQLite][arm])
	}
	if strings.Contains(plan, "SCAN jobs") || strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("%s arm scans or sorts jobs", arm)
	}
}

// querier is what *sql.DB and *sql.Conn share.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryLines returns the first column of every row as text.
func queryLines(t *testing.T, db querier, query string) []string {
	t.Helper()
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}
