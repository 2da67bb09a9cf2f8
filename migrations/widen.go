package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"

	"github.com/dbqueue/dbqueue"
)

// Widening is one column of an existing table that Up changed in place:
// Laravel's queue:table makes attempts a tinyint (MySQL) or smallint
// (PostgreSQL) and the times 32-bit integers, which migration 00003
// widens; on MySQL, migration 00008 gives the name columns (jobs.queue,
// the failed jobs' connection and queue, the signal and middleware names)
// a binary collation, so names compare byte for byte.
type Widening struct {
	Table  string // the table, as SQL names it
	Column string
	From   string // the column type before, as the catalog shows it (a name column's collation)
	To     string // the column type after (a name column's collation)
}

// String says what changed and why, e.g. "widened jobs.attempts from
// tinyint unsigned to int unsigned (Laravel's type overflows at 255)" or
// "made jobs.queue byte-exact: collation utf8mb4_unicode_ci to
// utf8mb4_nopad_bin (names that differ only in case or trailing spaces
// are no longer equal)".
func (w Widening) String() string {
	if nameColumns[w.Column] {
		return fmt.Sprintf("made %s.%s byte-exact: collation %s to %s (names that differ only in case or trailing spaces are no longer equal)", w.Table, w.Column, w.From, w.To)
	}
	s := fmt.Sprintf("widened %s.%s from %s to %s", w.Table, w.Column, w.From, w.To)
	if why := w.why(); why != "" {
		s += " (" + why + ")"
	}
	return s
}

// intLimits is the largest value of each narrow integer type.
var intLimits = map[string]string{
	"tinyint":            "127",
	"tinyint unsigned":   "255",
	"smallint":           "32767",
	"smallint unsigned":  "65535",
	"mediumint":          "8388607",
	"mediumint unsigned": "16777215",
	"int":                "2147483647",
	"integer":            "2147483647",
}

func (w Widening) why() string {
	switch w.Column {
	case "attempts":
		if limit, ok := intLimits[w.From]; ok {
			return "Laravel's type overflows at " + limit
		}
	case "reserved_at", "available_at", "created_at":
		switch w.From {
		case "int unsigned":
			return "Laravel's 32-bit Unix time overflows in 2106"
		case "int", "integer":
			return "Laravel's 32-bit Unix time overflows in 2038"
		}
	}
	return ""
}

// nameColumns are the columns migration 00008 may give another
// collation (MySQL).
var nameColumns = map[string]bool{"queue": true, "connection": true, "name": true}

// watched is one column Up may change in place: table is its bare name,
// sqlName as statements name it.
type watched struct{ table, sqlName, column string }

// watchedColumns lists the columns migrations 00003 (the jobs table's
// numbers) and 00008 (MySQL's name columns) may change.
func watchedColumns(dialect dbqueue.Dialect, t Tables) []watched {
	full := t.withDefaults()
	out := []watched{}
	for _, c := range []string{"attempts", "reserved_at", "available_at", "created_at"} {
		out = append(out, watched{full.Jobs, t.JobsTable(), c})
	}
	if dialect != dbqueue.MySQL {
		return out
	}
	return append(out,
		watched{full.Jobs, t.JobsTable(), "queue"},
		watched{full.Failed, t.FailedTable(), "connection"},
		watched{full.Failed, t.FailedTable(), "queue"},
		watched{t.signalsName(), t.SignalsTable(), "name"},
		watched{full.Jobs + "_limits", t.qualify(full.Jobs + "_limits"), "name"},
		watched{full.Jobs + "_locks", t.qualify(full.Jobs + "_locks"), "name"},
	)
}

var displayWidth = regexp.MustCompile(`\(\d+\)`)

// columnTypes reads the types of the watched columns, keyed by
// "table.column": empty when the tables do not exist (or on SQLite, where
// INTEGER is 64-bit already and names compare byte for byte, so nothing
// changes). A MySQL name column's type is its collation.
func columnTypes(ctx context.Context, db *sql.DB, dialect dbqueue.Dialect, t Tables) (map[string]string, error) {
	var (
		query string
		args  []any
	)
	tables := map[string]bool{}
	for _, w := range watchedColumns(dialect, t) {
		if !tables[w.table] {
			tables[w.table] = true
			args = append(args, w.table)
		}
	}
	switch dialect {
	case dbqueue.MySQL:
		query = "SELECT table_name, column_name, column_type, COALESCE(collation_name, '') FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name IN (?" + strings.Repeat(", ?", len(args)-1) + ")"
	case dbqueue.Postgres:
		query = "SELECT table_name, column_name, data_type, '' FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1"
		if t.Schema != "" {
			query = "SELECT table_name, column_name, data_type, '' FROM information_schema.columns WHERE table_schema = $2 AND table_name = $1"
			args = append(args, t.Schema)
		}
	default:
		return map[string]string{}, nil
	}
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read the column types of %s: %w", t.JobsTable(), err)
	}
	defer rows.Close()
	watch := map[string]bool{}
	for _, w := range watchedColumns(dialect, t) {
		watch[w.table+"."+w.column] = true
	}
	types := map[string]string{}
	for rows.Next() {
		var table, col, typ, collation string
		if err := rows.Scan(&table, &col, &typ, &collation); err != nil {
			return nil, fmt.Errorf("read the column types of %s: %w", t.JobsTable(), err)
		}
		key := strings.ToLower(table) + "." + strings.ToLower(col)
		switch {
		case !watch[key]:
		case nameColumns[strings.ToLower(col)]:
			types[key] = collation
		default:
			// MariaDB shows display widths: tinyint(3) unsigned.
			types[key] = strings.Join(strings.Fields(displayWidth.ReplaceAllString(strings.ToLower(typ), "")), " ")
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the column types of %s: %w", t.JobsTable(), err)
	}
	return types, nil
}

// widenings lists the watched columns whose type changed between before
// and after.
func widenings(dialect dbqueue.Dialect, t Tables, before, after map[string]string) []Widening {
	var out []Widening
	for _, w := range watchedColumns(dialect, t) {
		key := w.table + "." + w.column
		from, ok := before[key]
		to := after[key]
		if ok && to != "" && from != to {
			out = append(out, Widening{Table: w.sqlName, Column: w.column, From: from, To: to})
		}
	}
	return out
}
